/* fuzz/fuzz_tfrecord.c: libFuzzer harness for the TFRecord reader (data/tfrecord.c):
 * the input is a TFRecord stream; every record ct_tfr_next frames is parsed
 * as a tf.train.Example with the default keys and with MNIST-style ones, and
 * the input itself also as one Example. Nothing may crash, hang, read out of
 * bounds or hand back an image slice outside the record. Built and run by
 * `make fuzz` (tests/fuzz/run.sh), seeds in tests/fuzz/corpus/tfrecord. */
#include "cltrain/tfrecord.h"
#include <stdlib.h>
#include <string.h>

static void example(const uint8_t *p, size_t n, const ct_tfr_opts *o) {
    const uint8_t *img = NULL;
    size_t len = 0;
    int64_t label = 0;
    char why[256];
    if (ct_tfr_example(p, n, o, &img, &len, &label, why, sizeof why) == 0) {
        if (img < p || img + len > p + n) abort(); /* the image must lie inside the record */
    } else if (!why[0]) {
        abort(); /* a failure always says why */
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static const ct_tfr_opts slim = {0}, raw = {"image_raw", "label", 28, 28, 1};
    size_t pos = 0, len;
    const uint8_t *rec;
    char why[256];
    int k;
    while ((k = ct_tfr_next(data, size, &pos, &rec, &len, why, sizeof why)) == 1) {
        if (rec < data || rec + len > data + size || pos > size) abort();
        example(rec, len, &slim);
        example(rec, len, &raw);
    }
    if (k == 0 && pos != size) abort();
    example(data, size, &slim);
    example(data, size, &raw);
    return 0;
}
