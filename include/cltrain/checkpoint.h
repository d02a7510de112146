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

#define CT_CKPT_VERSION 1

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
} ct_ckpt;

/* Write st to path atomically. CT_EIO with a message naming the path on failure. */
int ct_ckpt_save(const ct_ckpt *st, const char *path);
/* Read and validate (magic, version, sizes, CRC). CT_EINPUT with one line on any damage. */
int ct_ckpt_load(ct_ckpt *st, const char *path);
void ct_ckpt_free(ct_ckpt *st);
#endif
