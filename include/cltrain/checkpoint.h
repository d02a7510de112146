/* checkpoint.h: training state on disk. One file holds a magic, a format
 * version, the model definition (.cfg text), every parameter, the optimizer
 * moments and step, the data-order state (seed, batch size, samples per
 * epoch, next global batch), the data set's name and folder, and a CRC32 of
 * all of it. Files are written atomically (temporary file, fsync, rename,
 * fsync of the folder): a crash at any moment leaves the old or the new file.
 * Little-endian hosts only (checked). Tested by tests/checkpoint.sh. */
#ifndef CLTRAIN_CHECKPOINT_H
#define CLTRAIN_CHECKPOINT_H
#include <stdint.h>
#include <stddef.h>

/* Version 2 adds, after the .cfg text, a u32 length and an extension block:
 * i32 ranks (data-parallel ranks the batch order was made for), u32 count of
 * class names, then each name as u32 length + bytes. Version 1 files load
 * with ranks 1 and no names. */
#define CT_CKPT_VERSION 2

typedef struct ct_ckpt {
    char model_name[256];
    char dataset[32];          /* "mnist", "fashion-mnist", ... */
    char data_dir[512];
    char *cfg;                 /* model definition text */
    uint64_t seed;
    int64_t next_batch;        /* global batch to train next */
    int32_t batch, n_train;    /* batch size and samples per epoch: they fix the data order */
    int32_t opt_kind, opt_step;
    size_t n_params;
    float *params, *mom1, *mom2;
    int32_t ranks;             /* data-parallel ranks (the global batch is batch x ranks) */
    int n_names;               /* class names (images folders), 0 when the data set names them itself */
    char **class_names;
} ct_ckpt;

/* Write st to path atomically. CT_EIO with a message naming the path on failure. */
int ct_ckpt_save(const ct_ckpt *st, const char *path);
/* Read and validate (magic, version, sizes, CRC). CT_EINPUT with one line on any damage. */
int ct_ckpt_load(ct_ckpt *st, const char *path);
void ct_ckpt_free(ct_ckpt *st);
#endif
