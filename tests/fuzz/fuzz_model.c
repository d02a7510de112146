/* fuzz_model.c: the .cfg model parser (ct_model_parse) on any text. */
#include "cltrain/model.h"
#include "fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fz_tmp(); /* quiet stderr */
    char *text = malloc(size + 1);
    memcpy(text, data, size);
    text[size] = 0;
    ct_model m;
    if (ct_model_parse(&m, text, "fuzz") == 0) ct_model_free(&m);
    free(text);
    return 0;
}
