/* cli/eval.c: `cltrain eval CHECKPOINT [--data DIR] [--confusion-png FILE]`:
 * the checkpoint's model and weights on its data set's test split: accuracy,
 * per-class accuracy, the confusion matrix (and as an image, stb_image_write).
 * Tested by tests/checkpoint.sh. */
#include "cli.h"
#include "cltrain/checkpoint.h"
#include <string.h>
#include <unistd.h>
#define STB_IMAGE_WRITE_IMPLEMENTATION
#define STBIW_ASSERT(x) CT_ASSERT(x)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
#pragma GCC diagnostic ignored "-Wsign-compare"
#pragma GCC diagnostic ignored "-Wunused-parameter"
#include <stb/stb_image_write.h>
#pragma GCC diagnostic pop

/* one cell per (true, predicted) pair; darker = larger share of the true class */
static int write_confusion_png(const ct_eval_result *r, const char *path) {
    int C = r->n_classes, cell = 24, W = C * cell;
    unsigned char *img = ct_xmalloc((size_t)W * W * 3);
    for (int t = 0; t < C; t++) {
        int tot = 0;
        for (int p = 0; p < C; p++) tot += r->confusion[t * C + p];
        for (int p = 0; p < C; p++) {
            double share = tot ? (double)r->confusion[t * C + p] / tot : 0;
            unsigned char v = (unsigned char)(255 - 255 * share);
            for (int y = 0; y < cell; y++)
                for (int x = 0; x < cell; x++) {
                    unsigned char *px = img + (((size_t)(t * cell + y) * W) + p * cell + x) * 3;
                    int edge = x == 0 || y == 0;
                    px[0] = edge ? 200 : (t == p ? v / 2 : v);
                    px[1] = edge ? 200 : v;
                    px[2] = edge ? 200 : (t == p ? v : 255);
                }
        }
    }
    int ok = stbi_write_png(path, W, W, 3, img, W * 3);
    free(img);
    return ok ? 0 : ct_fail(CT_EIO, "%s: cannot write the confusion matrix image", path);
}

/* The data set's path: --data, or the one the checkpoint recorded. A relative
 * one (checkpoints before paths were stored absolute) is tried from here,
 * then from the checkpoint's folder; neither: CT_EINPUT suggesting --data. */
static int data_path(const char *ckpt, const ct_ckpt *ck, const ct_dataset_def *set, const char *given, char *buf,
                     size_t size, const char **out) {
    const char *rec = ck->data.path;
    *out = given ? given : rec;
    if (given || !rec[0] || rec[0] == '/' || set->from_files == CT_FILES_ARRAYS || access(rec, F_OK) == 0) return 0;
    const char *slash = strrchr(ckpt, '/');
    if (slash) {
        snprintf(buf, size, "%.*s/%s", (int)(slash - ckpt), ckpt, rec);
        if (access(buf, F_OK) == 0) {
            *out = buf;
            return 0;
        }
    }
    return ct_fail(CT_EINPUT, "%s: its %s data set was at %s, relative to where training ran: not found from here%s; "
                   "give --data DIR", ckpt, ck->data.kind, rec, slash ? " or beside the checkpoint" : "");
}

/* --tta flip on a set whose training never flips: the mirror is an image it never saw */
static void tta_warning(const ct_dataset_def *set, int tta) {
    if (tta != CT_TTA_FLIP) return;
    if (!(set->takes & CT_DS_AUGMENT))
        fprintf(stderr, "cltrain: warning: --tta flip averages each image with its mirror, but %s training never flips "
                        "(it is not augmented): accuracy can drop; use --tta none\n", set->name);
    else if (!set->standardize)
        fprintf(stderr, "cltrain: warning: --tta flip: %s training flips only with --augment basic or full (the default "
                        "does not); if it did not, accuracy can drop\n", set->name);
}

int cmd_eval(int argc, char **argv) {
    /* the checkpoint is the first non-option argument */
    if (argc < 2 || argv[1][0] == '-') {
        ct_fail(CT_EINPUT, "eval needs a checkpoint file: cltrain eval CHECKPOINT [--data DIR]");
        return cli_fail(CT_EINPUT);
    }
    const char *path = argv[1];
    cli_opts c;
    cli_opts_defaults(&c);
    cli_opts_for(&c, CLI_EVAL, "eval", NULL);
    const ct_train_opts *o = &c.train;
    int rc = cli_parse_train(argc - 1, argv + 1, &c);
    if (rc) return cli_fail(rc);
    ct_ckpt ck;
    if ((rc = ct_ckpt_load(&ck, path))) return cli_fail(rc);
    const ct_dataset_def *set = ct_dataset_find_kind(ck.data.kind);
    if (!set) {
        ct_fail(CT_EINPUT, "%s: data set '%s' is not one eval knows (%s)", path, ck.data.kind, ct_dataset_list());
        ct_ckpt_free(&ck);
        return cli_fail(CT_EINPUT);
    }
    char buf[4400];
    const char *data;
    if ((rc = data_path(path, &ck, set, c.data.path, buf, sizeof buf, &data))) {
        ct_ckpt_free(&ck);
        return cli_fail(rc);
    }
    tta_warning(set, o->tta);
    ct_model m;
    ct_cl cl;
    ct_data d;
    memset(&cl, 0, sizeof cl);
    memset(&m, 0, sizeof m);
    memset(&d, 0, sizeof d);
    /* the model first: image sets are decoded at its input size */
    rc = ct_model_parse(&m, ck.cfg, ck.model_name);
    if (!rc && m.n_params != ck.n_params) rc = ct_fail(CT_EINPUT, "%s: parameter count does not match its model", path);
    if (!rc && (rc = ct_data_reopen(&d, set, &ck.data, data, ck.seed, m.in_h, m.in_c)) && !c.data.path && rc == CT_EINPUT &&
        access(data, F_OK) != 0) {
        char why[600];
        snprintf(why, sizeof why, "%s", ct_last_error());
        rc = ct_fail(rc, "%s (where %s was trained from; give --data DIR if the set has moved)", why, path);
    }
    const ct_dataset *test = d.test;
    if (!rc) rc = ct_model_check_input(&m, test->h, test->w, test->c, test->n_classes, data,
                                       "give --data the data set the checkpoint was trained on");
    if (!rc) rc = ct_cl_open(&cl, o->device);
    m.conv_algo = o->conv;
    if (!rc) rc = ct_model_setup(&m, &cl, o->batch, o->gemm);
    if (!rc) {
        ct_model_set_params(&m, ck.params);
        ct_eval_result ev;
        rc = ct_evaluate(&m, test, d.src[1], o->limit_test, o->scale, o->shift, o->tta, &ev);
        printf("%s: model %s, %d parameters, trained %lld step%s on %s\n", path, ck.model_name, (int)ck.n_params,
               (long long)ck.next_batch, ck.next_batch == 1 ? "" : "s", d.name);
        ct_eval_print(&ev, test->class_names, stdout, 1);
        if (!rc && c.confusion_png) rc = write_confusion_png(&ev, c.confusion_png);
        ct_eval_free(&ev);
    }
    ct_model_free(&m);
    if (cl.ctx) ct_cl_close(&cl);
    ct_data_close(&d);
    ct_ckpt_free(&ck);
    return rc ? cli_fail(rc) : 0;
}
