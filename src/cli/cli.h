/* cli.h: what the cltrain subcommands share: the option parser and its
 * result (cli/opts.c), exit status, and the few helpers one command lends
 * another. The data sets come from the library's table (datasets.h).
 * Each command file depends on this header and the library only; the
 * helpers lent between files go one way: train.c and pack.c use the
 * TFRecord options of tfrecord.c, bench.c packs with pack.c, tune.c sets
 * up and steps models with bench.c; main.c calls every cmd_*. */
#ifndef CLTRAIN_CLI_H
#define CLTRAIN_CLI_H
#include "cltrain/datasets.h"
#include "cltrain/train.h"

/* The commands that parse options with cli_parse_train (and, for the help
 * and the messages that name who takes an option, those with their own). */
enum { CLI_TRAIN = 1, CLI_EVAL = 2, CLI_BENCH = 4, CLI_TUNE = 8, CLI_PACK = 16, CLI_PREDICT = 32 };

/* One command's options: what it trains with, its data set's options, and
 * those only one command reads. Filled by cli_parse_train. */
typedef struct cli_opts {
    ct_train_opts train;
    ct_data_opts data;         /* --data, --augment, --cutout, --labels, --size, --channels, --val-split, --strict */
    const char *confusion_png; /* eval --confusion-png FILE */
    const char *curves_png;    /* training --curves-png FILE */
    int top;                   /* --top K (predict parses its own) [5] */
    unsigned cmd;              /* CLI_*: which options are taken (0: as CLI_TRAIN) */
    const char *cmd_name;      /* for messages: "eval", "mnist", ... */
    const ct_dataset_def *set; /* a training command's data set (which data options it takes) */
    const char *x_key, *y_key; /* arrays --x KEY[,TESTKEY] --y KEY[,TESTKEY]: the .npz's arrays */
    const char *layout;        /* arrays --layout NHWC|NCHW|NHW */
    char spec[CT_ARRAYS_SPEC]; /* arrays: the spec string built from the files and those (the data path) */
    unsigned char seen[128];   /* options given on the command line, by id (cli/opts.c) */
    char recipe_note[768];     /* what cli_apply_recipe took from the model's [net] and what it did not */
    char recipe_vals[CT_MAX_RECIPE][48]; /* the values it took: options keep pointers to their text */
    /* the model that bench and tune set up, when it is not --model as written (0 and NULL: it is):
     * a checkpoint's definition (--resume, --init), or --model fitted to an opened data set's shape */
    const char *model_cfg, *model_cfg_name;
    int fit_h, fit_w, fit_c, fit_classes;
} cli_opts;
void cli_opts_defaults(cli_opts *c);
/* The command c's options are parsed for: cmd (CLI_*), its name, and for a training command its data set. */
void cli_opts_for(cli_opts *c, unsigned cmd, const char *name, const ct_dataset_def *set);
/* argv[1..] into c (argv[0] stands for the command). CT_EINPUT naming the
 * option on bad usage, or the commands that take an option this one does not;
 * -h prints the command's help and exits. */
int cli_parse_train(int argc, char **argv, cli_opts *c);
/* The options command cmd takes (set: a training command's data set), one
 * per line, generated from the option, model, optimizer and data-set tables;
 * and the same after the command's usage lines. */
void cli_print_options(FILE *f, unsigned cmd, const ct_dataset_def *set);
void cli_print_command_help(FILE *f, unsigned cmd, const ct_dataset_def *set);
/* Print ct_last_error (with the rank under mpirun) and return the exit status for code. */
int cli_fail(int code);
/* --opt VALUE as a whole number (a number) in lo..hi, or CT_EINPUT naming the option. */
int cli_parse_int(const char *opt, const char *s, long lo, long hi, long *out);
int cli_parse_num(const char *opt, const char *s, double lo, double hi, double *out);
/* exit status of a training command: 130 / 143 when a signal stopped it */
int train_exit(int rc, const ct_train_result *res);
/* The model's training defaults ([net] keys, ct_model.recipe): each applied as
 * its option unless the command line gave that option (a resumed run: the
 * checkpoint's model, and the checkpoint's saved hyper-parameters stay above
 * them). The model's lr, momentum and weight decay go with its optimizer: an
 * --optimizer other than its own drops them. Keys for options this data set
 * does not take are left out. c->recipe_note says what came from where.
 * CT_EINPUT naming the .cfg line for a bad value. */
int cli_apply_recipe(cli_opts *c);
/* Load --model (or the --resume / --init checkpoint's model) once and drop
 * it, so a bad one fails before seconds of data loading; *prep: its input
 * preparation ([net] mean= and std=), for ct_data_prepare. */
/* eval without --tta: the model's [net] tta= (the evaluation its training
 * ended with) into c->train.tta; 1 when it set it */
int cli_model_tta(cli_opts *c, const ct_model *m);
int cli_check_model(const ct_train_opts *o, ct_prep *prep);

/* the commands (main.c dispatches) and the help of those with their own options */
int cmd_train(const ct_dataset_def *set, int argc, char **argv); /* cltrain mnist|fashion-mnist|cifar10|cifar100|images|arrays */
int cmd_bench(int argc, char **argv);
int cmd_tune(int argc, char **argv);
/* A first training run on a device with no tuning database: `cltrain tune`'s search within
 * CLTRAIN_AUTOTUNE seconds (20 unset, 0 off), announced in one line, cached in the database.
 * 0, or CT_EINPUT for a bad CLTRAIN_AUTOTUNE; a failed search only says so. */
int cli_autotune(const cli_opts *c, const ct_dataset *train);
int cmd_eval(int argc, char **argv);
int cmd_pack(int argc, char **argv);
int cmd_predict(int argc, char **argv);
int cmd_export(int argc, char **argv);
void cli_pack_help(FILE *f);
void cli_predict_help(FILE *f);
void cli_export_help(FILE *f);
int cmd_import(int argc, char **argv);
void cli_import_help(FILE *f);
/* A checkpoint without class names (written before built-in sets stored them):
 * its data set reopened, when still where it was, for d->test->class_names. */
void cli_dataset_names(const ct_ckpt *ck, ct_data *d);

/* bench and tune: --model (fitted to --size/--channels; or c->model_cfg, or fitted to c->fit_*) on o->device
 * (under mpirun, the device this rank trains on), set up for
 * o->batch with weights from o->seed and one batch of random bytes loaded. */
int cli_bench_setup(ct_model *m, ct_cl *cl, const cli_opts *c, int gemm_mode);
/* the same with the model's tuning-database fields (db_defaults, conv_tuned, n_conv_tuned) taken from db */
int cli_bench_setup_db(ct_model *m, ct_cl *cl, const cli_opts *c, int gemm_mode, const ct_model *db);
/* one forward and backward on the loaded batch, so every layer's dy holds real gradients before
 * layers are timed one by one: never-written buffers can hold denormals, many times slower on CPUs */
void cli_real_gradients(ct_model *m, int B);
/* layer i's forward plus backward time, each the best of reps after a warm-up run */
double cli_time_layer(ct_model *m, int i, int B, int reps);
/* one training step on the loaded batch, as ct_train runs it (no host sync) */
void cli_bench_step(ct_model *m, ct_optim_state *opt, int B);

/* Figures (cli/plot.c), written as PNG: the C x C confusion matrix conf[true][pred]
 * with the class names (NULL: indices) on both axes, counts and shares in the
 * cells and a colour legend; the loss and accuracy curves of a metrics.csv.
 * CT_EIO when the file cannot be written, CT_EINPUT when no font is found. */
int cli_plot_confusion(const int *conf, int C, char **names, const char *title, const char *path);
int cli_plot_curves(const char *csv, const char *title, const char *path);

/* TFRecord files (cli/tfrecord.c): cli_tfr_args takes --tfrecord-image KEY,
 * --tfrecord-label KEY, --tfrecord-shape H,W,C, --train GLOB and --test GLOB
 * out of argv (argc updated; t->given = 1 if any was there); cli_tfr_files
 * adds the regular files at argv[1..] to the train list and returns how many. */
int cli_tfr_args(int *argc, char **argv, ct_tfr_files *t);
int cli_tfr_files(int argc, char **argv, ct_tfr_files *t);
int cli_is_file(const char *path);

/* Decode split `which` of d (threads in parallel, written in scan order) into
 * OUT/SPLIT-*.shard; per_shard 0: about 64 MiB per file. Unreadable files are
 * skipped and counted in st, or with strict an error. (`cltrain pack`) */
typedef struct cli_pack_stats { long written[2], skipped; int shards[2]; uint64_t bytes; } cli_pack_stats;
/* The leading FILE.npz / X.npy Y.npy [XT.npy YT.npy] arguments of argv[1..]
 * (those ending in .npz or .npy): how many. */
int cli_array_files(int argc, char **argv);
/* `cltrain pack` of arrays: the spec's splits as shards in out. */
int cli_pack_arrays(const char *spec, const char *out, double val_split, uint64_t seed, long per_shard);
int cli_pack_split(const ct_imgdir *d, int which, const char *out, int size, int channels, int strict, int threads,
                   long per_shard, cli_pack_stats *st);
#endif
