/* datasets.h: the data sets cltrain knows, in one table (data/registry.c),
 * and the image set behind `cltrain images` (data/imageset.c).
 *
 * Each entry names its command (`cltrain NAME`), the kind a checkpoint
 * records (ct_ckpt_data.kind), the default model, and opens its train and
 * test splits for training, or the test split a checkpoint names for
 * `cltrain eval` (and export's class names). The command line (src/cli/)
 * asks the table instead of matching names: a new data set is a loader in
 * src/data/, its open functions and one table line.
 *
 * The table lives in the library, not in src/cli: its entries only call
 * loaders (idx, cifar, image folders, shards, TFRecord) and fill ct_dataset
 * and ct_source, none of which needs the command line or OpenCL, and tests
 * can open a set the way the command does. Parsing options stays in src/cli.
 * Depends on data.h, arrays.h, cifar.h, augment.h, images.h, shard.h, tfrecord.h,
 * checkpoint.h (ct_ckpt_data). Tested end to end by tests/cli.sh,
 * tests/checkpoint.sh, tests/cifar.sh, tests/images.sh, tests/tfrecord.sh and tests/arrays.sh. */
#ifndef CLTRAIN_DATASETS_H
#define CLTRAIN_DATASETS_H
#include <stdio.h>
#include "cltrain/arrays.h"
#include "cltrain/augment.h"
#include "cltrain/checkpoint.h"
#include "cltrain/cifar.h"
#include "cltrain/data.h"
#include "cltrain/images.h"
#include "cltrain/shard.h"
#include "cltrain/source.h"
#include "cltrain/tfrecord.h"

/* TFRecord files of an image set: the training files and (maybe none) the
 * test files, with the feature keys or raw shape. given: a TFRecord option
 * (--tfrecord-*, --train, --test) was on the command line. */
typedef struct ct_tfr_files {
    ct_tfr_opts o;
    char **train, **test;
    int n_train, n_test, given;
} ct_tfr_files;
void ct_tfr_files_free(ct_tfr_files *t);

/* An image data set: a folder of class folders (decoded by the producers),
 * the shards `cltrain pack` wrote, or TFRecord files. ds[split] are shells
 * (n, shape, classes, names; no pixels), src[split] the sources that load
 * samples (x / 255). */
/* A split's samples as stored (class by class), and the order they are served in. */
typedef struct ct_spread_ctx {
    ct_source base;
    int *order;                /* sample i is base's order[i] */
} ct_spread_ctx;
typedef struct ct_imageset {
    int shards;                /* 1: read from shards */
    int tfrecord;              /* 1: read from TFRecord files */
    ct_tfr_data tfr;
    ct_tfr_src_ctx tctx[2];
    ct_imgdir dir;
    ct_imgdir_src_ctx ctx[2];
    ct_shardset set[2];
    ct_source src[2];          /* what the pipeline reads: spread[k].base in spread order */
    ct_dataset ds[2];
    ct_spread_ctx spread[2];
} ct_imageset;
/* Each split is served in spread order: the classes interleaved in
 * proportion to their sizes (sample j of n_c in class c at (j + 1/2) / n_c),
 * each class in a shuffle drawn from seed, so that the first N samples,
 * which --limit-train and --limit-test take, spread over the classes as the
 * split does, the same N for a folder, its shards and TFRecord files of it.
 * A folder or shards at path. size/channels 0: from the shards, or 64 and 3
 * for a folder. need_train: missing train shards are an error. CT_EINPUT
 * naming the path; s is closed on failure. */
int ct_imageset_open(ct_imageset *s, const char *path, int size, int channels, double val_split, uint64_t seed,
                     int strict, int need_train);
/* TFRecord files t (t->n_test 0: val_split of each class held out). */
int ct_imageset_open_tfr(ct_imageset *s, const ct_tfr_files *t, int size, int channels, double val_split,
                         uint64_t seed);
void ct_imageset_close(ct_imageset *s);

/* What a data set is opened with (the command line's data options). */
typedef struct ct_data_opts {
    const char *path;          /* --data, or images' folder / first file; NULL: the set's default */
    const ct_tfr_files *tfr;   /* images from TFRecord files; NULL: path is a folder or shards */
    uint64_t seed;             /* --seed: which files a held-out split takes */
    const char *augment;       /* --augment none|shift|basic|full; NULL: the set's default */
    int cutout;                /* --cutout N (0: off) */
    int translate;             /* --translate N: the crop is a reflect-padded translation by up to N pixels (0: the set's) */
    const char *flip;          /* --flip random|alternate (basic, full); NULL: random */
    int coarse;                /* --labels coarse (cifar100) */
    int size, channels;        /* --size, --channels (images; 0: from the shards, else 64 and 3) */
    double val_split;          /* --val-split (images) [0.1] */
    int val_split_set;         /* --val-split was given (refused where the set has its own split) */
    int strict;                /* --strict (images): an unreadable image is an error */
} ct_data_opts;
void ct_data_opts_defaults(ct_data_opts *o);

struct ct_dataset_def;
/* An opened data set. Sources point into it: do not copy or move it. */
typedef struct ct_data {
    const struct ct_dataset_def *def;
    const char *name;          /* as printed: def->name, or "cifar100-coarse" */
    const char *path;          /* the folder (or first TFRecord file) read; recorded in checkpoints */
    double split;              /* recorded in checkpoints: images' held-out share (0 with shards or test files) */
    const ct_dataset *train;   /* the training split (NULL after reopen) */
    const ct_dataset *test;    /* the test split, or NULL when there is none */
    const ct_source *src[2];   /* samples of each split; NULL: bytes / 255 straight from ds */
    char **class_names;        /* recorded in checkpoints: images' names (built-in sets name their own) */
    double load_s;             /* seconds open took */
    ct_data_opts o;            /* as opened */
    const char *augment;       /* the training augmentation level's name, as given or the default */
    /* the loaders' state behind train, test and src */
    ct_dataset ds[2];          /* mnist and cifar: the pixels of both splits */
    ct_source own[2];
    ct_cifar_ctx cctx[2];
    ct_augment aug;
    ct_augsrc_ctx actx;
    ct_augsrc_ctx actx1;       /* image sets and arrays with a model's normalisation: the test split's */
    ct_prep prep;              /* ct_data_prepare's, or none */
    ct_imageset img;
    ct_arrays arr;
} ct_data;

/* what a data set's command takes as arguments (ct_dataset_def.from_files) */
enum { CT_FILES_NONE = 0, CT_FILES_IMAGES = 1, CT_FILES_ARRAYS = 2 };

/* What a data set takes beyond the options every training command has
 * (ct_dataset_def.takes): the command line refuses the others with a reason. */
enum {
    CT_DS_PATH = 1,            /* --data (images and arrays name their files as arguments) */
    CT_DS_AUGMENT = 2,         /* --augment, --cutout */
    CT_DS_LABELS = 4,          /* --labels fine|coarse */
    CT_DS_RESIZE = 8,          /* --size, --channels: images are decoded to a chosen shape */
    CT_DS_SPLIT = 16,          /* --val-split: a share of each class may be held out */
    CT_DS_IMAGES = 32,         /* --strict and the TFRecord options */
    CT_DS_ARRAYS = 64,         /* --x, --y, --layout */
    CT_DS_RESIDENT = 128,      /* --resident: raw bytes in memory, nothing done on the host */
};

typedef struct ct_dataset_def {
    const char *name;          /* the command: cltrain NAME */
    const char *help;          /* one line for --help */
    const char *args;          /* the command's arguments for --help ("" when none) */
    unsigned takes;            /* CT_DS_* */
    const char *kind;          /* ct_ckpt_data.kind of its checkpoints */
    const char *model;         /* default --model */
    const char *default_path;  /* without --data (NULL: the command's arguments name it) */
    int variant;               /* the loader's own kind: CT_MNIST / CT_FASHION_MNIST, 10 / 100 for CIFAR */
    int from_files;            /* CT_FILES_IMAGES (a folder, shards or TFRecord files) or CT_FILES_ARRAYS
                                * (.npz or .npy files): the command's arguments, read by the producers
                                * (no --resident), and the model is fitted to them */
    int fit_model;             /* the model is fitted to the data (input shape, class count) as for
                                * from_files: cifar100's 100 fine or 20 coarse classes (--labels) */
    int standardize;           /* inputs are x / 255, then per-image standardisation (predict, export) */
    int names_classes;         /* the loader names the classes itself (checkpoints hold no names) */
    /* options checked before anything is loaded; NULL: none */
    int (*check)(const ct_data_opts *o);
    /* both splits for training, into a zeroed d */
    int (*open)(ct_data *d, const ct_data_opts *o);
    /* the test split of a checkpoint's data set rec, read from path, for a
     * model of input h x h x c (image sets are decoded at that size) */
    int (*reopen)(ct_data *d, const ct_ckpt_data *rec, const char *path, uint64_t seed, int h, int c);
    /* the line training prints once the set is open */
    void (*describe)(const ct_data *d, FILE *out);
    /* after training (NULL: nothing) */
    void (*report)(const ct_data *d, FILE *out);
    /* frees what open or reopen made besides ds[] (NULL: nothing) */
    void (*close)(ct_data *d);
} ct_dataset_def;

extern const ct_dataset_def ct_datasets[];
extern const int ct_n_datasets;
/* The entry of command name / of checkpoint kind, or NULL. */
const ct_dataset_def *ct_dataset_find(const char *name);
const ct_dataset_def *ct_dataset_find_kind(const char *kind);
/* "mnist, fashion-mnist, cifar10, cifar100, images" (for messages) */
const char *ct_dataset_list(void);

/* def->open (timed into d->load_s) / def->reopen; d is closed on failure. */
int ct_data_open(ct_data *d, const ct_dataset_def *def, const ct_data_opts *o);
int ct_data_reopen(ct_data *d, const ct_dataset_def *def, const ct_ckpt_data *rec, const char *path, uint64_t seed,
                   int h, int c);
/* Prepare both splits' samples as a model whose [net] has mean= and std=
 * wants them (p->c > 0; p->c 0 leaves the set's own preparation): in
 * place of the set's default (CIFAR's per-image standardisation, x / 255
 * elsewhere) after augmentation's pixel steps. For a set read without
 * producers (MNIST; d->src[k] NULL) *scale and *shift become the affine map
 * that gives the same (one channel): x * scale + shift; otherwise they are
 * left alone. Call after ct_data_open or ct_data_reopen. CT_EINPUT naming
 * what when p->c is not the images' channel count. */
int ct_data_prepare(ct_data *d, const ct_prep *p, float *scale, float *shift);
/* The training split prepared as the test split is (no augmentation), for a
 * whitening layer's statistics (ct_train_opts.plain_src): *out = src, a
 * source over it with its state in *ctx (both the caller's, alive while it
 * is used), or the set's own unaugmented source; *out = NULL for a set
 * without sources (bytes * scale + shift from d->train). Call after
 * ct_data_prepare. CT_EINPUT when a set has no such view. */
typedef struct ct_plain_ctx { ct_cifar_ctx cifar; ct_augsrc_ctx aug; } ct_plain_ctx;
int ct_data_plain_train(const ct_data *d, ct_source *src, ct_plain_ctx *ctx, const ct_source **out);

/* Frees everything d owns and zeroes it; safe on a zeroed or closed d. */
void ct_data_close(ct_data *d);
#endif
