/* cli/train.c: `cltrain NAME [options]` for every data set of the table in
 * datasets.h: parse the options, check the model, open the set, train.
 * `images` takes its folder, shards or TFRecord files as arguments.
 * Tested by tests/cli.sh, tests/cifar.sh, tests/images.sh, tests/tfrecord.sh
 * and tests/checkpoint.sh. */
#include "cli.h"
#include <string.h>

/* images DIR|FILE.tfrecord... [options]: the TFRecord options and files out
 * of argv, the rest parsed as every command's options; *path the folder or
 * first file */
static int parse_files(int argc, char **argv, cli_opts *c, ct_tfr_files *tf) {
    int rc = cli_tfr_args(&argc, argv, tf), nf = rc ? 0 : cli_tfr_files(argc, argv, tf);
    if (!rc && nf < 0) rc = nf;
    if (!rc && !tf->n_train && (argc < 2 || argv[1][0] == '-'))
        rc = ct_fail(CT_EINPUT, "images needs a folder or TFRecord files: cltrain images DIR|FILE.tfrecord... [--size S] [options]");
    if (!rc && !tf->n_train && tf->given)
        rc = ct_fail(CT_EINPUT, "%s: a folder; --tfrecord-*, --train and --test are for TFRecord files", argv[1]);
    const char *dir = tf->n_train ? tf->train[0] : argv[1];
    if (!rc) rc = tf->n_train ? cli_parse_train(argc - nf, argv + nf, c) : cli_parse_train(argc - 1, argv + 1, c);
    if (rc) return rc;
    c->data.path = dir;
    c->data.tfr = tf->n_train ? tf : NULL;
    if (c->train.resident)
        return ct_fail(CT_EINPUT, "--resident does not apply to images: they are decoded (or read from shards) by the producers");
    return 0;
}

int cmd_train(const ct_dataset_def *set, int argc, char **argv) {
    cli_opts c;
    cli_opts_defaults(&c);
    ct_train_opts *o = &c.train;
    o->model = set->model;
    o->fit_model = set->from_files;
    ct_tfr_files tf;
    memset(&tf, 0, sizeof tf);
    int rc = set->from_files ? parse_files(argc, argv, &c, &tf) : cli_parse_train(argc, argv, &c);
    if (!rc && set->check) rc = set->check(&c.data);
    if (!rc) rc = cli_check_model(o);
    ct_data d;
    if (!rc) rc = ct_data_open(&d, set, &c.data);
    if (rc) {
        ct_tfr_files_free(&tf);
        return cli_fail(rc);
    }
    if (!o->quiet) set->describe(&d, stdout);
    /* recorded in checkpoints for `cltrain eval` */
    o->dataset = set->kind;
    o->data_dir = d.path;
    o->data_split = d.split;
    o->class_names = d.class_names;
    o->train_src = d.src[0];
    o->eval_src = d.src[1];
    ct_train_result res;
    rc = ct_train(o, d.train, d.test, &res, stdout);
    if (!o->quiet && set->report) set->report(&d, stdout);
    ct_data_close(&d);
    ct_tfr_files_free(&tf);
    return train_exit(rc, &res);
}
