/* fuzz/fuzz_onnx.c: libFuzzer harness for the ONNX importer
 * (train/onnx_import.c): the input is a ModelProto. Nothing may crash, hang,
 * leak or read out of bounds; a refusal always says why, and an accepted
 * model parses as a cltrain model with exactly its parameter count. Built and
 * run by `make fuzz` (tests/fuzz/run.sh), seeds in tests/fuzz/corpus/onnx
 * (PyTorch's exports of small nets, cltrain's own export, one with its model's
 * mean= and std=). */
#include "cltrain/onnx.h"
#include "cltrain/common.h"
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    ct_onnx_imported r;
    if (ct_onnx_import(data, size, "fuzz.onnx", &r)) {
        if (!ct_last_error()[0]) abort(); /* a refusal always says why */
        return 0;
    }
    ct_model m;
    if (ct_model_parse(&m, r.cfg, "fuzz") || m.n_params != r.n_params) abort();
    ct_model_free(&m);
    /* a normalisation read back from the metadata makes a model that parses with it, as import writes it */
    char *cfg = ct_model_cfg_set_prep(r.cfg, &r.prep);
    if (ct_model_parse(&m, cfg, "fuzz") || m.prep.c != r.prep.c) abort();
    ct_model_free(&m);
    free(cfg);
    ct_onnx_imported_free(&r);
    return 0;
}
