/* cli.h: shared by the cltrain subcommands. */
#ifndef CLTRAIN_CLI_H
#define CLTRAIN_CLI_H
#include "cltrain/train.h"
int cli_fail(int code);
/* --opt VALUE as a whole number in lo..hi, or CT_EINPUT naming the option. */
int cli_parse_int(const char *opt, const char *s, long lo, long hi, long *out);
int cli_parse_train(int argc, char **argv, ct_train_opts *o, const char **data);
int cmd_bench(int argc, char **argv);
int cmd_tune(int argc, char **argv);
/* bench and tune: --model (fitted to --size/--channels) on o->device, set up for
 * o->batch with weights from o->seed and one batch of random bytes loaded. */
int cli_bench_setup(ct_model *m, ct_cl *cl, const ct_train_opts *o, int gemm_mode);
/* one training step on the loaded batch, as ct_train runs it (no host sync) */
void cli_bench_step(ct_model *m, ct_opt *opt, int B);
int cmd_eval(int argc, char **argv);
int cmd_pack(int argc, char **argv);
int cmd_images(int argc, char **argv);
int cmd_predict(int argc, char **argv);
int cmd_export(int argc, char **argv);
int train_exit(int rc, const ct_train_result *res);
/* Load --model once and drop it, so a bad one fails before seconds of data loading. */
int cli_check_model(const ct_train_opts *o);
extern const char *g_confusion_png, *g_augment, *g_labels;
extern int g_size, g_channels, g_strict, g_top, g_cutout;
extern double g_val_split;

/* An image data set for training or evaluation: a folder of class folders
 * (decoded by the producers) or the shards `cltrain pack` wrote. ds[split]
 * are shells (n, shape, classes, names; no pixels) for ct_train/ct_evaluate,
 * src[split] the sources that load samples. */
#include "cltrain/images.h"
#include "cltrain/shard.h"
#include "cltrain/tfrecord.h"
typedef struct cli_imageset {
    int shards;                /* 1: read from shards */
    int tfrecord;              /* 1: read from TFRecord files */
    ct_tfr_data tfr;
    ct_tfr_src_ctx tctx[2];
    ct_imgdir dir;
    ct_imgdir_src_ctx ctx[2];
    ct_shardset set[2];
    ct_source src[2];
    ct_dataset ds[2];
} cli_imageset;
/* size/channels 0: from the shards, or 64 and 3 for a folder. */
int cli_imageset_open(cli_imageset *s, const char *path, int size, int channels, double val_split, uint64_t seed,
                      int strict, int need_train);
void cli_imageset_close(cli_imageset *s);

/* TFRecord files (cli/tfrecord.c): cli_tfr_args takes --tfrecord-image KEY,
 * --tfrecord-label KEY, --tfrecord-shape H,W,C, --train GLOB and --test GLOB
 * out of argv (argc updated; given = 1 if any was there); cli_tfr_files adds
 * the regular files at argv[1..] to the train list and returns how many. */
typedef struct cli_tfr { ct_tfr_opts o; char **train, **test; int n_train, n_test, given; } cli_tfr;
int cli_tfr_args(int *argc, char **argv, cli_tfr *t);
int cli_tfr_files(int argc, char **argv, cli_tfr *t);
void cli_tfr_free(cli_tfr *t);
int cli_is_file(const char *path);
int cli_imageset_open_tfr(cli_imageset *s, const cli_tfr *t, int size, int channels, double val_split, uint64_t seed);

/* Decode split `which` of d (threads in parallel, written in scan order) into
 * OUT/SPLIT-*.shard; per_shard 0: about 64 MiB per file. Unreadable files are
 * skipped and counted in st, or with strict an error. (`cltrain pack`) */
typedef struct cli_pack_stats { long written[2], skipped; int shards[2]; uint64_t bytes; } cli_pack_stats;
int cli_pack_tfr(const cli_tfr *t, const char *out, int size, int channels, double val_split, uint64_t seed,
                 long per_shard, cli_pack_stats *st);
int cli_pack_split(const ct_imgdir *d, int which, const char *out, int size, int channels, int strict, int threads,
                   long per_shard, cli_pack_stats *st);
#endif
