/* fuzz/fuzz_npy.c: libFuzzer harness for the NumPy readers (data/npy.c): the
 * input is parsed as a .npy file and as an .npz archive, whose every member
 * is opened as an array (inflated ones up to 1 MiB). Nothing may crash, hang,
 * leak or read out of bounds; an accepted array's elements all lie inside the
 * input (or the inflated copy) and are read, first and last. Built and run by
 * `make fuzz` (tests/fuzz/run.sh), seeds in tests/fuzz/corpus/npy (np.save,
 * np.savez and np.savez_compressed files). */
#include "cltrain/npy.h"
#include "cltrain/common.h"
#include <stdlib.h>
#include <string.h>

static void touch(const ct_array *a, const uint8_t *lo, const uint8_t *hi) {
    if (a->count && (a->data < lo || a->data + (size_t)a->count * a->size > hi)) abort();
    if (a->count) {
        volatile int64_t s = ct_array_int(a, 0) ^ ct_array_int(a, a->count - 1);
        volatile float f = ct_array_float(a, a->count - 1);
        (void)s, (void)f;
    }
    if (!ct_array_dtype(a)[0]) abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    ct_array a;
    if (!ct_npy_parse(&a, data, size, "fuzz.npy")) touch(&a, data, data + size);
    else if (!ct_last_error()[0]) abort();
    ct_npz z;
    if (ct_npz_parse(&z, data, size, "fuzz.npz")) {
        if (!ct_last_error()[0]) abort();
        return 0;
    }
    for (int i = 0; i < z.n; i++) {
        if (!ct_npz_array(&z, i, &a, 1 << 20)) {
            if (a.owned) touch(&a, a.owned, a.owned + (size_t)a.count * a.size + 1024 * 1024);
            else touch(&a, data, data + size);
            ct_array_free(&a);
        }
        (void)ct_npz_find(&z, z.e[i].name);
    }
    ct_npz_close(&z);
    return 0;
}
