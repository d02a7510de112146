/* cli/import.c: `cltrain import MODEL.onnx OUT.ckpt`: an ONNX model (as
 * torch.onnx.export writes it) as a cltrain checkpoint that eval, predict,
 * export and training (--init, --resume) accept; the conversion is
 * train/onnx_import.c. The checkpoint is written atomically, only when the
 * whole graph converted. Tested by tests/import.sh. */
#include "cli.h"
#include "cltrain/checkpoint.h"
#include "cltrain/file.h"
#include "cltrain/onnx.h"
#include "cltrain/optim.h"
#include <string.h>

void cli_import_help(FILE *f) {
    fprintf(f, "Usage: cltrain import MODEL.onnx OUT.ckpt\n"
               "Convert an ONNX model (torch.onnx.export, cltrain export) into a cltrain checkpoint: the model, its\n"
               "weights (batch norm running statistics kept) and a fresh Adam state, for predict, eval, export and\n"
               "training (--init). Inputs are pixels in [0, 1] (torchvision's ToTensor), or as the metadata of\n"
               "cltrain's own export says. Ops: Conv, BatchNormalization, Relu, Gelu (or its Erf/Tanh formula),\n"
               "MaxPool, AveragePool (global), GlobalAveragePool, GlobalMaxPool, ReduceMean over H and W, Flatten/Reshape before Gemm or MatMul+Add, Add\n"
               "(residuals), Dropout and Identity (dropped), a final Softmax/LogSoftmax (dropped).\n"
               "  --help                  this help\n");
}

int cmd_import(int argc, char **argv) {
    if (argc == 2 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))) {
        cli_import_help(stdout);
        return 0;
    }
    if (argc != 3 || argv[1][0] == '-' || argv[2][0] == '-') {
        ct_fail(CT_EINPUT, "import needs a model and an output: cltrain import MODEL.onnx OUT.ckpt");
        return cli_fail(CT_EINPUT);
    }
    const char *in = argv[1], *out = argv[2];
    uint8_t *buf;
    size_t len;
    int rc = ct_file_probe_write(out, "import's output");
    if (!rc) rc = ct_file_read_all(in, "an ONNX model file", (size_t)1 << 31, &buf, &len);
    if (rc) return cli_fail(rc);
    ct_onnx_imported r;
    rc = ct_onnx_import(buf, len, in, &r);
    free(buf);
    if (rc) return cli_fail(rc);
    ct_ckpt st = {.cfg = r.cfg, .seed = 1, .batch = 128, .n_train = 1, .opt_kind = CT_OPT_ADAM,
                  .lr = ct_optim_types[CT_OPT_ADAM]->default_lr, .momentum = 0.9f, .n_params = r.n_params, .params = r.params,
                  .n_state = ct_optim_types[CT_OPT_ADAM]->n_state, .ranks = 1, .n_names = r.n_names, .class_names = r.class_names};
    const char *base = strrchr(in, '/') ? strrchr(in, '/') + 1 : in;
    snprintf(st.model_name, sizeof st.model_name, "%s", r.model_name[0] ? r.model_name : base);
    if (r.dataset[0] && ct_dataset_find_kind(r.dataset)) snprintf(st.data.kind, sizeof st.data.kind, "%s", r.dataset);
    for (int i = 0; i < st.n_state; i++) st.state[i] = ct_xcalloc(r.n_params ? r.n_params : 1, sizeof(float));
    rc = ct_ckpt_save(&st, out);
    for (int i = 0; i < st.n_state; i++) free(st.state[i]);
    if (!rc) {
        ct_model m;
        if (!ct_model_parse(&m, r.cfg, st.model_name)) {
            ct_model_summary(&m, stdout);
            ct_model_free(&m);
        }
        printf("import: %s -> %s: %d layers, %zu parameters%s%s\n", in, out, r.n_layers, r.n_params, r.notes[0] ? "; " : "", r.notes);
    }
    ct_onnx_imported_free(&r);
    return rc ? cli_fail(rc) : 0;
}
