/* cli/predict.c: `cltrain predict CHECKPOINT IMG...`: each image decoded at
 * the model's input size, prepared as its data set prepared training
 * samples (the model's [net] mean= and std=, else the data-set table says
 * whether that standardises), and its top
 * classes with probabilities. Tested by tests/images.sh and tests/onnx.sh. */
#include "cli.h"
#include "cltrain/augment.h"
#include "cltrain/checkpoint.h"
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <string.h>

/* predict's own options: --top K, --device P:D, --logits FILE, --pixels FILE */
typedef struct predict_opts {
    const char *ckpt, *device, *logits_path, *pixels_path;
    int top;
    const char **imgs;
    int n_img;
} predict_opts;

void cli_predict_help(FILE *f) {
    fprintf(f, "Usage: cltrain predict CHECKPOINT IMG... [OPTIONS]\n"
               "Decode and resize each image as training did and print its top classes with probabilities.\n\n"
               "Options:\n"
               "  --top K                 classes shown per image [5]\n"
               "  --device P:D            OpenCL platform:device (see `cltrain devices`)\n"
               "  --logits FILE           write each image's logits (float32, in order)\n"
               "  --pixels FILE           write each image's decoded input (uint8 HWC, in order)\n"
               "  --help                  this help\n");
}

static int parse_predict(int argc, char **argv, predict_opts *p) {
    *p = (predict_opts){.ckpt = argv[1], .top = 5};
    if (argc < 3 || argv[1][0] == '-')
        return ct_fail(CT_EINPUT, "predict needs a checkpoint and images: cltrain predict CHECKPOINT IMG... [--top K]");
    static const struct option opts[] = {{"top", required_argument, 0, 't'}, {"device", required_argument, 0, 'd'},
                                         {"logits", required_argument, 0, 'l'}, {"pixels", required_argument, 0, 'p'}, {0, 0, 0, 0}};
    int opt, rc = 0;
    long l;
    /* argv[1], the checkpoint, stands where getopt expects the program name;
     * GNU getopt moves the image paths after the options */
    int ac = argc - 1;
    char **av = argv + 1;
    optind = 1;
    opterr = 0;
    while (!rc && (opt = getopt_long(ac, av, ":", opts, NULL)) != -1) {
        if (opt == 't') { if (!(rc = cli_parse_int("top", optarg, 1, 1000, &l))) p->top = (int)l; }
        else if (opt == 'd') p->device = optarg;
        else if (opt == 'l') p->logits_path = optarg;
        else if (opt == 'p') p->pixels_path = optarg;
        else if (opt == ':') rc = ct_fail(CT_EINPUT, "option %s needs a value", av[optind - 1]);
        else rc = ct_fail(CT_EINPUT, "predict: unknown option %s (predict takes --top K, --device P:D, --logits FILE, --pixels FILE)", av[optind - 1]);
    }
    if (!rc && optind >= ac) rc = ct_fail(CT_EINPUT, "predict: no images given");
    p->imgs = (const char **)av + optind;
    p->n_img = ac - optind;
    return rc;
}

/* "IMG: NAME P%, ..." for the K largest of the C logits z, in order (names NULL: "class N") */
static void print_top(const char *img, const float *z, int C, int K, char **names) {
    float mx = z[0];
    for (int c = 1; c < C; c++) mx = z[c] > mx ? z[c] : mx;
    double sum = 0;
    for (int c = 0; c < C; c++) sum += exp((double)z[c] - mx);
    printf("%s:", img);
    char *shown = ct_xcalloc((size_t)C, 1);
    for (int k = 0; k < K; k++) {
        int best = -1;
        for (int c = 0; c < C; c++)
            if (!shown[c] && (best < 0 || z[c] > z[best])) best = c;
        shown[best] = 1;
        double p = exp((double)z[best] - mx) / sum;
        if (names) printf("%s %s %.1f%%", k ? "," : "", names[best], 100 * p);
        else printf("%s class %d %.1f%%", k ? "," : "", best, 100 * p);
    }
    free(shown);
    printf("\n");
}

/* `cltrain predict CHECKPOINT IMG... [--top K] [--device P:D]` */
int cmd_predict(int argc, char **argv) {
    predict_opts po;
    int rc = parse_predict(argc, argv, &po);
    if (rc) return cli_fail(rc);
    const char *path = po.ckpt, *logits_path = po.logits_path, *pixels_path = po.pixels_path;
    int top = po.top;
    const char **imgs = po.imgs;
    int n_img = po.n_img;
    ct_ckpt ck;
    if ((rc = ct_ckpt_load(&ck, path))) return cli_fail(rc);
    ct_model m;
    ct_cl cl;
    ct_data named;
    memset(&cl, 0, sizeof cl);
    memset(&named, 0, sizeof named);
    rc = ct_model_parse(&m, ck.cfg, ck.model_name);
    if (!rc && m.n_params != ck.n_params) rc = ct_fail(CT_EINPUT, "%s: parameter count does not match its model", path);
    if (!rc && m.in_h != m.in_w) rc = ct_fail(CT_EINPUT, "%s: predict needs a model with square input, not %dx%d", path, m.in_h, m.in_w);
    if (!rc && m.in_c != 1 && m.in_c != 3) rc = ct_fail(CT_EINPUT, "%s: predict takes models of 1 or 3 channels, not %d", path, m.in_c);
    int B = n_img < 64 ? n_img : 64;
    if (!rc) rc = ct_cl_open(&cl, po.device);
    m.conv_algo = CT_CONV_AUTO;
    if (!rc) rc = ct_model_setup(&m, &cl, B, CT_GEMM_NATIVE);
    int bad = 0;
    /* --logits / --pixels: float32 logits and the uint8 HWC input of each image read, in order */
    FILE *flog = NULL, *fpix = NULL;
    if (!rc && logits_path && !(flog = fopen(logits_path, "wb"))) rc = ct_fail(CT_EIO, "--logits %s: %s", logits_path, strerror(errno));
    if (!rc && pixels_path && !(fpix = fopen(pixels_path, "wb"))) rc = ct_fail(CT_EIO, "--pixels %s: %s", pixels_path, strerror(errno));
    if (!rc) {
        ct_model_set_params(&m, ck.params);
        m.training = 0;
        /* the same preparation as training: the model's own ([net] mean= and std=), else its data set's:
         * x / 255, or per-image standardisation for CIFAR models */
        const ct_dataset_def *set = ct_dataset_find_kind(ck.data.kind);
        int standardize = !m.prep.c && set && set->standardize;
        if (m.prep.c && m.prep.c != m.in_c)
            rc = ct_fail(CT_EINPUT, "%s: its model's mean= and std= name %d channels, its input has %d", path, m.prep.c, m.in_c);
        size_t sz = (size_t)m.in_h * m.in_w * m.in_c;
        uint8_t *u8 = ct_xmalloc(sz);
        float *x = ct_xmalloc(sz * B * sizeof(float)), *logits = ct_xmalloc(sizeof(float) * (size_t)B * m.n_classes);
        const char **who = ct_xcalloc((size_t)B, sizeof *who);
        int C = m.n_classes, K = top < C ? top : C;
        /* the names the checkpoint holds, or (older checkpoints of built-in sets) the data set's */
        char **names = ck.n_names == C ? ck.class_names : NULL;
        if (!names) {
            cli_dataset_names(&ck, &named);
            if (named.test && named.test->class_names && named.test->n_classes == C) names = named.test->class_names;
            else fprintf(stderr, "cltrain: %s holds no class names and its data set is not at %s: classes are shown by index\n",
                         path, ck.data.path[0] ? ck.data.path : "(none)");
        }
        for (int i = 0; !rc && i < n_img;) {
            int b = 0;
            for (; i < n_img && b < B; i++) {
                if (ct_image_decode(imgs[i], m.in_h, m.in_c, u8)) {
                    fprintf(stderr, "cltrain: %s\n", ct_last_error());
                    bad++;
                    continue;
                }
                if (fpix) fwrite(u8, 1, sz, fpix);
                for (size_t k = 0; k < sz; k++) x[b * sz + k] = u8[k] / 255.0f;
                if (m.prep.c) ct_prep_apply(&m.prep, x + b * sz, sz / (size_t)m.in_c);
                else if (standardize) ct_augment_standardize(x + b * sz, sz);
                who[b++] = imgs[i];
            }
            if (!b) continue;
            ct_cl_write(&cl, m.input, 0, (size_t)b * sz * sizeof(float), x);
            ct_model_forward(&m, b);
            ct_cl_read(&cl, m.layers[m.n_layers - 1].out, 0, sizeof(float) * (size_t)b * C, logits);
            if (flog) fwrite(logits, sizeof(float), (size_t)b * C, flog);
            for (int j = 0; j < b; j++) print_top(who[j], logits + (size_t)j * C, C, K, names);
        }
        free(u8); free(x); free(logits); free(who);
        if (bad) rc = ct_fail(CT_EINPUT, "%d of %d images could not be read (named above)", bad, n_img);
    }
    if (flog && fclose(flog) && !rc) rc = ct_fail(CT_EIO, "--logits %s: write failed", logits_path);
    if (fpix && fclose(fpix) && !rc) rc = ct_fail(CT_EIO, "--pixels %s: write failed", pixels_path);
    ct_data_close(&named);
    ct_model_free(&m);
    if (cl.ctx) ct_cl_close(&cl);
    ct_ckpt_free(&ck);
    return rc ? cli_fail(rc) : 0;
}
