/* cli/eval.c: `cltrain eval CHECKPOINT [--data DIR] [--confusion-png FILE]`:
 * the checkpoint's model and weights on its data set's test split: accuracy,
 * per-class accuracy, the confusion matrix (and as a figure, cli/plot.c).
 * Tested by tests/checkpoint.sh. */
#include "cli.h"
#include "cltrain/checkpoint.h"
#include "cltrain/file.h"
#include <string.h>
#include <unistd.h>

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
    if (tta == CT_TTA_NONE) return;
    const char *mode = tta == CT_TTA_FLIP ? "flip" : "flip-translate";
    if (!(set->takes & CT_DS_AUGMENT))
        fprintf(stderr, "cltrain: warning: --tta %s averages each image with its mirror, but %s training never flips "
                        "(it is not augmented): accuracy can drop; use --tta none\n", mode, set->name);
    else if (!set->standardize)
        fprintf(stderr, "cltrain: warning: --tta %s: %s training flips only with --augment basic or full (the default "
                        "does not); if it did not, accuracy can drop\n", mode, set->name);
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
    if (!rc && c.confusion_png) rc = ct_file_probe_write(c.confusion_png, "--confusion-png");
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
    ct_model m;
    ct_cl cl;
    ct_data d;
    memset(&cl, 0, sizeof cl);
    memset(&m, 0, sizeof m);
    memset(&d, 0, sizeof d);
    /* the model first: image sets are decoded at its input size */
    rc = ct_model_parse(&m, ck.cfg, ck.model_name);
    if (!rc && m.n_params != ck.n_params) rc = ct_fail(CT_EINPUT, "%s: parameter count does not match its model", path);
    int model_tta = !rc && cli_model_tta(&c, &m);
    if (!rc) tta_warning(set, o->tta);
    if (!rc && (rc = ct_data_reopen(&d, set, &ck.data, data, ck.seed, m.in_h, m.in_c)) && !c.data.path && rc == CT_EINPUT &&
        access(data, F_OK) != 0) {
        char why[600];
        snprintf(why, sizeof why, "%s", ct_last_error());
        rc = ct_fail(rc, "%s (where %s was trained from; give --data DIR if the set has moved)", why, path);
    }
    /* the model's own preparation ([net] mean= and std=) in place of the set's */
    float scale = o->scale, shift = o->shift;
    if (!rc) rc = ct_data_prepare(&d, &m.prep, &scale, &shift);
    const ct_dataset *test = d.test;
    if (!rc) rc = ct_model_check_input(&m, test->h, test->w, test->c, test->n_classes, data,
                                       "give --data the data set the checkpoint was trained on");
    if (!rc) rc = ct_cl_open(&cl, o->device);
    m.conv_algo = o->conv;
    if (!rc) rc = ct_model_setup(&m, &cl, o->batch, o->gemm);
    if (!rc) {
        ct_model_set_params(&m, ck.params);
        ct_eval_result ev;
        rc = ct_evaluate(&m, test, d.src[1], o->limit_test, scale, shift, o->tta, &ev, NULL);
        printf("%s: model %s, %d parameters, trained %lld step%s on %s\n", path, ck.model_name, (int)ck.n_params,
               (long long)ck.next_batch, ck.next_batch == 1 ? "" : "s", d.name);
        if (model_tta)
            printf("test-time augmentation %s, as %s's [net] asks (training's last evaluation; --tta none: without)\n",
                   o->tta == CT_TTA_FLIP ? "flip" : "flip-translate", ck.model_name);
        ct_eval_print(&ev, test->class_names, stdout, 1);
        if (!rc && c.confusion_png) {
            char title[300];
            const char *base = strrchr(path, '/');
            snprintf(title, sizeof title, "%s on %s: %d test images, accuracy %.1f%%", base ? base + 1 : path, d.name, ev.n,
                     100.0 * ev.correct / (ev.n ? ev.n : 1));
            rc = cli_plot_confusion(ev.confusion, ev.n_classes, test->class_names, title, c.confusion_png);
            if (!rc) printf("wrote the confusion matrix to %s\n", c.confusion_png);
        }
        ct_eval_free(&ev);
    }
    ct_model_free(&m);
    if (cl.ctx) ct_cl_close(&cl);
    ct_data_close(&d);
    ct_ckpt_free(&ck);
    return rc ? cli_fail(rc) : 0;
}
