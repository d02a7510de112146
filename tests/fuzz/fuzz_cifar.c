/* fuzz_cifar.c: the CIFAR binary-batch reader on any test batch: byte 0 picks
 * CIFAR-10 or CIFAR-100 (fine or coarse labels), the rest is the file. */
#include "cltrain/cifar.h"
#include "fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    int kind = data[0] & 1 ? 100 : 10, fine = (data[0] >> 1) & 1;
    fz_write(kind == 10 ? "c/cifar-10-batches-bin/test_batch.bin" : "c/cifar-100-binary/test.bin", data + 1, size - 1);
    char dir[512];
    snprintf(dir, sizeof dir, "%s/c", fz_tmp());
    ct_dataset test;
    if (ct_cifar_load(NULL, &test, dir, kind, fine, 0) == 0) ct_dataset_free(&test);
    fz_rmtree(dir, 1);
    return 0;
}
