/* cli/import.c: `cltrain import MODEL.onnx OUT.ckpt [--mean M --std S]`: an
 * ONNX model (as torch.onnx.export writes it) as a cltrain checkpoint that
 * eval, predict, export and training (--init, --resume) accept; the
 * conversion is train/onnx_import.c. The input preparation goes into the
 * model's [net] section: pixels in [0, 1] (torchvision's ToTensor: mean 0,
 * std 1) unless --mean and --std add a Normalize, or what the metadata of
 * cltrain's own export says. The checkpoint is written atomically, only when
 * the whole graph converted. Tested by tests/import.sh. */
#include "cli.h"
#include "cltrain/checkpoint.h"
#include "cltrain/file.h"
#include "cltrain/onnx.h"
#include "cltrain/optim.h"
#include <getopt.h>
#include <string.h>

void cli_import_help(FILE *f) {
    fprintf(f, "Usage: cltrain import MODEL.onnx OUT.ckpt [--mean M1,M2,M3 --std S1,S2,S3]\n"
               "Convert an ONNX model (torch.onnx.export, cltrain export) into a cltrain checkpoint: the model, its\n"
               "weights (batch norm running statistics kept) and a fresh Adam state, for predict, eval, export and\n"
               "training (--init). Inputs are pixels in [0, 1] (torchvision's ToTensor), or as the metadata of\n"
               "cltrain's own export says. Ops: Conv, BatchNormalization, Relu, Gelu (or its Erf/Tanh formula),\n"
               "MaxPool, AveragePool (global), GlobalAveragePool, GlobalMaxPool, ReduceMean over H and W, Flatten/Reshape before Gemm or MatMul+Add, Add\n"
               "(residuals), Dropout and Identity (dropped), a final Softmax/LogSoftmax (dropped).\n\n"
               "Options:\n"
               "  --mean M1,M2,...        with --std: the model was trained on torchvision's Normalize(mean, std)\n"
               "  --std S1,S2,...         after ToTensor, one value per input channel; the checkpoint's model then\n"
               "                          prepares every image as (x / 255 - mean) / std ([net] mean= and std=)\n"
               "  --help                  this help\n");
}

/* --mean/--std's list into v[] (*n values); CT_EINPUT naming the option */
static int parse_list(const char *opt, const char *s, int positive, float *v, int *n) {
    const char *why;
    if (ct_prep_parse_list(s, positive, v, n, &why))
        return ct_fail(CT_EINPUT, "%s %s: %s; give one number per input channel, comma-separated (e.g. %s %s)", opt, s, why,
                       opt, positive ? "0.2470,0.2435,0.2616" : "0.4914,0.4822,0.4465");
    return 0;
}

/* the options and the two file names */
static int parse_import(int argc, char **argv, const char **in, const char **out, ct_prep *given) {
    static const struct option opts[] = {{"mean", required_argument, 0, 'm'}, {"std", required_argument, 0, 's'}, {0, 0, 0, 0}};
    const char *mean = NULL, *std = NULL;
    int opt, rc = 0, n_mean = 0, n_std = 0;
    optind = 1;
    opterr = 0;
    while (!rc && (opt = getopt_long(argc, argv, ":", opts, NULL)) != -1) {
        if (opt == 'm') mean = optarg;
        else if (opt == 's') std = optarg;
        else if (opt == ':') rc = ct_fail(CT_EINPUT, "import: option %s needs a value", argv[optind - 1]);
        else rc = ct_fail(CT_EINPUT, "import: unknown option %s (import takes --mean M1,M2,... and --std S1,S2,...)", argv[optind - 1]);
    }
    if (!rc && argc - optind != 2)
        rc = ct_fail(CT_EINPUT, "import needs a model and an output: cltrain import MODEL.onnx OUT.ckpt [--mean M --std S]");
    if (!rc && !mean != !std)
        rc = ct_fail(CT_EINPUT, "import: %s without %s: a Normalize needs both, one value per input channel", mean ? "--mean" : "--std",
                     mean ? "--std" : "--mean");
    memset(given, 0, sizeof *given);
    if (!rc && mean) rc = parse_list("--mean", mean, 0, given->mean, &n_mean);
    if (!rc && std) rc = parse_list("--std", std, 1, given->std, &n_std);
    if (!rc && n_mean != n_std) rc = ct_fail(CT_EINPUT, "import: --mean has %d values, --std %d; give one of each per input channel", n_mean, n_std);
    given->c = rc ? 0 : n_mean;
    if (!rc) {
        *in = argv[optind];
        *out = argv[optind + 1];
    }
    return rc;
}

/* The preparation the checkpoint's model records: the export's own, the data set's (cltrain's export
 * without one: no keys), or the --mean/--std given, else [0, 1] pixels (mean 0, std 1). */
static int choose_prep(const char *in, const ct_onnx_imported *r, int in_c, const ct_prep *given, ct_prep *p, const char **what) {
    memset(p, 0, sizeof *p);
    if (r->prep.c || r->dataset[0]) {
        if (given->c)
            return ct_fail(CT_EINPUT, "%s: cltrain's export, whose metadata gives its input preparation (%s); leave out --mean and --std",
                           in, r->prep.c ? "its model's mean and std" : r->dataset);
        *p = r->prep;
        *what = NULL; /* the importer's note says which */
        return 0;
    }
    if (given->c && given->c != in_c)
        return ct_fail(CT_EINPUT, "import: --mean and --std give %d value%s, but %s takes %d channel%s; give one per channel", given->c,
                       given->c == 1 ? "" : "s", in, in_c, in_c == 1 ? "" : "s");
    if (in_c > CT_PREP_MAX)
        return given->c ? ct_fail(CT_EINPUT, "import: %s takes %d channels; --mean and --std name at most %d", in, in_c, CT_PREP_MAX) : 0;
    if (given->c) {
        *p = *given;
        *what = "inputs (x / 255 - mean) / std, as --mean and --std give";
    } else {
        p->c = in_c;
        for (int k = 0; k < p->c; k++) p->std[k] = 1.0f;
        *what = "inputs x / 255 in [0, 1], as torchvision's ToTensor (--mean and --std add a Normalize)";
    }
    return 0;
}

int cmd_import(int argc, char **argv) {
    if (argc == 2 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))) {
        cli_import_help(stdout);
        return 0;
    }
    const char *in = NULL, *out = NULL, *what = NULL;
    ct_prep given, prep;
    int rc = parse_import(argc, argv, &in, &out, &given);
    if (rc) return cli_fail(rc);
    uint8_t *buf;
    size_t len;
    rc = ct_file_probe_write(out, "import's output");
    if (!rc) rc = ct_file_read_all(in, "an ONNX model file", (size_t)1 << 31, &buf, &len);
    if (rc) return cli_fail(rc);
    ct_onnx_imported r;
    rc = ct_onnx_import(buf, len, in, &r);
    free(buf);
    if (rc) return cli_fail(rc);
    ct_model m;
    if (!(rc = ct_model_parse(&m, r.cfg, in))) rc = choose_prep(in, &r, m.in_c, &given, &prep, &what);
    ct_model_free(&m);
    if (rc) {
        ct_onnx_imported_free(&r);
        return cli_fail(rc);
    }
    char *cfg = ct_model_cfg_set_prep(r.cfg, &prep);
    ct_ckpt st = {.cfg = cfg, .seed = 1, .batch = 128, .n_train = 1, .opt_kind = CT_OPT_ADAM,
                  .lr = ct_optim_types[CT_OPT_ADAM]->default_lr, .momentum = 0.9f, .n_params = r.n_params, .params = r.params,
                  .n_state = ct_optim_types[CT_OPT_ADAM]->n_state, .ranks = 1, .n_names = r.n_names, .class_names = r.class_names};
    const char *base = strrchr(in, '/') ? strrchr(in, '/') + 1 : in;
    snprintf(st.model_name, sizeof st.model_name, "%s", r.model_name[0] ? r.model_name : base);
    if (r.dataset[0] && ct_dataset_find_kind(r.dataset)) snprintf(st.data.kind, sizeof st.data.kind, "%s", r.dataset);
    /* the model must parse with its keys before anything is written */
    rc = ct_model_parse(&m, cfg, st.model_name);
    for (int i = 0; !rc && i < st.n_state; i++) st.state[i] = ct_xcalloc(r.n_params ? r.n_params : 1, sizeof(float));
    if (!rc) rc = ct_ckpt_save(&st, out);
    for (int i = 0; i < st.n_state; i++) free(st.state[i]);
    if (!rc) {
        ct_model_summary(&m, stdout);
        printf("import: %s -> %s: %d layers, %zu parameters%s%s%s%s\n", in, out, r.n_layers, r.n_params, r.notes[0] ? "; " : "",
               r.notes, what ? "; " : "", what ? what : "");
    }
    ct_model_free(&m);
    free(cfg);
    ct_onnx_imported_free(&r);
    return rc ? cli_fail(rc) : 0;
}
