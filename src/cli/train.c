/* cli/train.c: `cltrain NAME [options]` for every data set of the table in
 * datasets.h: parse the options, check the model, open the set, train.
 * `images` takes its folder, shards or TFRecord files as arguments,
 * `arrays` its .npz or .npy files.
 * Tested by tests/cli.sh, tests/cifar.sh, tests/images.sh, tests/tfrecord.sh
 * and tests/checkpoint.sh. */
#include "cli.h"
#include "cltrain/dist.h"
#include "cltrain/file.h"
#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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

/* arrays FILE.npz | X.npy Y.npy [XT.npy YT.npy] [options]: the spec string as the data path */
static int parse_arrays(int argc, char **argv, cli_opts *c) {
    int nf = cli_array_files(argc, argv);
    if (!nf) {
        if (argc > 1 && argv[1][0] != '-')
            return ct_fail(CT_EINPUT, "%s: expected an .npz or .npy file: cltrain arrays FILE.npz | X.npy Y.npy [XTEST.npy YTEST.npy]", argv[1]);
        return ct_fail(CT_EINPUT, "arrays needs NumPy files: cltrain arrays FILE.npz | X.npy Y.npy [XTEST.npy YTEST.npy] [options]");
    }
    int rc = cli_parse_train(argc - nf, argv + nf, c);
    if (!rc) rc = ct_arrays_spec_make(c->spec, (const char *const *)argv + 1, nf, c->x_key, c->y_key, c->layout);
    if (rc) return rc;
    c->data.path = c->spec;
    if (c->train.resident)
        return ct_fail(CT_EINPUT, "--resident does not apply to arrays: the producers read them from the mapped files");
    return 0;
}

/* whether training mirrors images (augmentation basic or full) */
static int flips(const ct_data *d) {
    if (!(d->def->takes & CT_DS_AUGMENT)) return 0;
    const ct_augment *a = d->def->from_files ? &d->aug : &d->cctx[0].aug;
    return a->level >= CT_AUG_BASIC;
}

/* --resume without --seed: the checkpoint's seed, before the data set opens
 * (an image set's held-out split and spread order depend on it); a file that
 * does not load is reported by ct_train */
static void resume_seed(cli_opts *c) {
    ct_ckpt ck;
    if (!c->train.resume || (c->train.given & CT_GIVEN_SEED) || ct_ckpt_load(&ck, c->train.resume)) return;
    c->train.seed = c->data.seed = ck.seed;
    ct_ckpt_free(&ck);
}

int cmd_train(const ct_dataset_def *set, int argc, char **argv) {
    cli_opts c;
    cli_opts_defaults(&c);
    cli_opts_for(&c, CLI_TRAIN, set->name, set);
    ct_train_opts *o = &c.train;
    o->model = set->model;
    o->fit_model = set->from_files != CT_FILES_NONE || set->fit_model;
    ct_tfr_files tf;
    memset(&tf, 0, sizeof tf);
    int rc = set->from_files == CT_FILES_IMAGES ? parse_files(argc, argv, &c, &tf)
             : set->from_files == CT_FILES_ARRAYS ? parse_arrays(argc, argv, &c)
                                                  : cli_parse_train(argc, argv, &c);
    if (!rc) rc = cli_apply_recipe(&c);
    if (!rc && set->check) rc = set->check(&c.data);
    if (!rc && c.curves_png && ct_world.rank == 0) rc = ct_file_probe_write(c.curves_png, "--curves-png"); /* before hours of training */
    ct_prep prep;
    if (!rc) rc = cli_check_model(o, &prep);
    if (!rc) resume_seed(&c);
    ct_data d;
    if (!rc && !(rc = ct_data_open(&d, set, &c.data)) && (rc = ct_data_prepare(&d, &prep, &o->scale, &o->shift)))
        ct_data_close(&d);
    if (rc) {
        ct_tfr_files_free(&tf);
        return cli_fail(rc);
    }
    if (!o->quiet && ct_world.rank == 0) set->describe(&d, stdout); /* under mpirun, rank 0 alone prints */
    /* recorded in checkpoints for `cltrain eval` */
    o->dataset = set->kind;
    /* absolute, so that eval finds the set from any folder (arrays record a spec of files and keys) */
    char *abs = set->from_files != CT_FILES_ARRAYS ? realpath(d.path, NULL) : NULL;
    o->data_dir = abs && strlen(abs) < sizeof ((ct_ckpt_data *)0)->path ? abs : d.path;
    if (o->tta != CT_TTA_NONE && ct_world.rank == 0 && !flips(&d))
        fprintf(stderr, "cltrain: warning: --tta %s averages each test image with its mirror, but this training does not "
                        "flip (%s): accuracy can drop; use --augment basic or full, or --tta none\n",
                o->tta == CT_TTA_FLIP ? "flip" : "flip-translate",
                set->takes & CT_DS_AUGMENT ? "--augment none or shift" : "the set is not augmented");
    o->data_split = d.split;
    o->class_names = d.class_names ? d.class_names : d.train->class_names; /* predict and export name the classes */
    o->train_src = d.src[0];
    o->eval_src = d.src[1];
    ct_source plain;
    ct_plain_ctx plain_ctx;
    if (ct_data_plain_train(&d, &plain, &plain_ctx, &o->plain_src)) o->plain_src = NULL; /* a whiten= model is refused */
    /* no tuning database for this device yet: a short search first (CLTRAIN_AUTOTUNE) */
    rc = cli_autotune(&c, d.train);
    if (rc) {
        ct_data_close(&d);
        ct_tfr_files_free(&tf);
        free(abs);
        return cli_fail(rc);
    }
    /* --curves-png draws from the run's metrics.csv: --logdir's, or one in a folder of its own for the run */
    char tmpdir[] = "/tmp/cltrain-curves-XXXXXX", csv[4200];
    int own_log = c.curves_png && !o->logdir && ct_world.rank == 0;
    if (own_log && !mkdtemp(tmpdir)) {
        ct_fail(CT_EIO, "--curves-png: cannot make a folder for the training log (%s); give --logdir DIR", strerror(errno));
        ct_data_close(&d);
        ct_tfr_files_free(&tf);
        free(abs);
        return cli_fail(CT_EIO);
    }
    if (own_log) o->logdir = tmpdir;
    ct_train_result res;
    rc = ct_train(o, d.train, d.test, &res, stdout);
    if (c.curves_png && ct_world.rank == 0 && (!rc || rc == CT_EINTR)) {
        snprintf(csv, sizeof csv, "%s/metrics.csv", o->logdir);
        char title[300];
        snprintf(title, sizeof title, "%s on %s: loss and accuracy", o->resume ? o->resume : o->model, d.name);
        int prc = cli_plot_curves(csv, title, c.curves_png);
        if (prc) fprintf(stderr, "cltrain: %s\n", ct_last_error());
        else printf("wrote the loss and accuracy curves to %s\n", c.curves_png);
        if (!rc) rc = prc;
    }
    if (own_log) { /* the folder and what ct_train wrote into it */
        DIR *dir = opendir(tmpdir);
        for (struct dirent *e; dir && (e = readdir(dir));) {
            if (e->d_name[0] == '.') continue;
            snprintf(csv, sizeof csv, "%s/%s", tmpdir, e->d_name);
            unlink(csv);
        }
        if (dir) closedir(dir);
        rmdir(tmpdir);
    }
    if (ct_world.rank == 0 && set->report) set->report(&d, stdout); /* a result: --quiet keeps it */
    ct_data_close(&d);
    ct_tfr_files_free(&tf);
    free(abs);
    return train_exit(rc, &res);
}
