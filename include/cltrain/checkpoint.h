/* checkpoint.h: training state on disk. One file holds a magic, a format
 * version, the model definition (.cfg text), every parameter, the optimizer
 * (kind, step, hyper-parameters and its N state buffers), the data-order
 * state (seed, batch size, samples per epoch, next global batch, ranks), the
 * data set as structured fields, class names, and a CRC32 of all of it.
 * Files are written atomically (temporary file, fsync, rename, fsync of the
 * folder): a crash at any moment leaves the old or the new file. Every field
 * is validated once the CRC matches. Little-endian hosts only (checked).
 * Tested by tests/checkpoint.sh (round trip, bit-exact resume, damage of
 * every kind, fields out of range, files of the previous format). */
#ifndef CLTRAIN_CHECKPOINT_H
#define CLTRAIN_CHECKPOINT_H
#include <stdint.h>
#include <stddef.h>

/* Version 4: after the magic, version and header size, a fixed header (seed,
 * next batch, batch, samples per epoch, ranks, optimizer kind, step, state
 * count and hyper-parameters, parameter count, .cfg length, class-name count,
 * model name, data-set kind, path, held-out share and classes; then the
 * lookahead's rate, whether its average is stored, and --drop-last), the .cfg text, each
 * class name as u32 length + bytes, the parameters, the state buffers, the
 * lookahead's average (when stored), the CRC. Version 3 is the same without
 * the lookahead fields and the average; versions 1 and 2 (the data set as one
 * string such as "images:0.100", always two moment buffers) still load. */
#define CT_CKPT_VERSION 4
#define CT_CKPT_MAX_STATE 4

/* The data set a checkpoint was trained on (what `cltrain eval` reopens). */
typedef struct ct_ckpt_data {
    char kind[32];             /* "mnist", "fashion-mnist", "cifar10", "cifar100", "images"; "" if not recorded */
    char path[512];            /* its folder */
    double split;              /* images: the share of each class held out for testing (0 with shards or train/ test/) */
    int32_t classes;           /* classes of the labels (cifar100: 100 fine or 20 coarse); 0 if not recorded */
} ct_ckpt_data;

typedef struct ct_ckpt {
    char model_name[256];
    ct_ckpt_data data;
    char *cfg;                 /* model definition text */
    uint64_t seed;
    int64_t next_batch;        /* global batch to train next */
    int32_t batch, n_train;    /* batch size and samples per epoch: they fix the data order */
    int32_t opt_kind, opt_step;/* CT_OPT_*, optimizer steps applied */
    float lr, momentum, wd;    /* the optimizer's hyper-parameters (0 in files of versions 1 and 2) */
    int hp_saved;              /* 1 when lr, momentum and wd were in the file */
    size_t n_params;
    float *params;
    int n_state;               /* the optimizer's state buffers, n_params floats each */
    float *state[CT_CKPT_MAX_STATE];
    int32_t ranks;             /* data-parallel ranks (the global batch is batch x ranks) */
    float lookahead;           /* the lookahead's rate (cltrain/lookahead.h), 0: off */
    float *average;            /* its average, n_params floats, or NULL (off, or not started yet) */
    int32_t drop_last;         /* 1: each epoch's last partial batch left out (--drop-last) */
    int n_names;               /* class names (images folders), 0 when the data set names them itself */
    char **class_names;
} ct_ckpt;

/* Write st to path atomically. CT_EIO with a message naming the path on failure. */
int ct_ckpt_save(const ct_ckpt *st, const char *path);
/* Read and validate (magic, version, sizes, CRC, then every field: batch,
 * optimizer, steps, state count, ranks, data set, the model's parameter count
 * and classes). CT_EINPUT with one line naming the file and the field on any damage. */
int ct_ckpt_load(ct_ckpt *st, const char *path);
void ct_ckpt_free(ct_ckpt *st);
#endif
