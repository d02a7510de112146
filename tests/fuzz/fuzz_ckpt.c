/* fuzz_ckpt.c: the checkpoint reader (ct_ckpt_load) on any file. */
#include "cltrain/checkpoint.h"
#include "fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *p = fz_write("x.ckpt", data, size);
    ct_ckpt st;
    if (ct_ckpt_load(&st, p) == 0) ct_ckpt_free(&st);
    return 0;
}
