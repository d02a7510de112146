/* cifar.h: the CIFAR-10 / CIFAR-100 binary versions into ct_datasets, their
 * download, and a ct_source that augments samples of any ct_dataset.
 *
 * A record is 1 label byte (CIFAR-10) or 2 (CIFAR-100: coarse, fine),
 * then 3072 bytes: the R, G and B planes of a 32x32 image, each row-major.
 * The loader turns them into NHWC uint8 (32x32x3) and checks every file as
 * it goes: whole records only, labels in range, every batch present.
 * Depends on data.h, augment.h, download.h; targz.h unpacks the archives.
 * Tested by tests/test_cifar.c (fixtures, damage, byte flips, offline,
 * hostile archives) and tests/test_augment.c (the source). */
#ifndef CLTRAIN_CIFAR_H
#define CLTRAIN_CIFAR_H
#include <stdint.h>
#include "cltrain/augment.h"
#include "cltrain/data.h"
#include "cltrain/source.h"

#define CT_CIFAR_SIDE 32
#define CT_CIFAR_PIXELS (CT_CIFAR_SIDE * CT_CIFAR_SIDE * 3) /* 3072 bytes per image */

/* Load CIFAR-10 (kind 10) or CIFAR-100 (kind 100).
 *
 * CIFAR-10: dir/cifar-10-batches-bin/ (as the archive unpacks), or dir
 * itself, holds data_batch_1.bin .. data_batch_5.bin (train: all five in
 * order) and test_batch.bin; batches.meta.txt gives the class names, one per
 * line (blank lines ignored; the standard names when the file is absent).
 * CIFAR-100: dir/cifar-100-binary/ or dir holds train.bin and test.bin;
 * fine != 0 takes the fine label (100 classes), else the coarse one (20);
 * names come from fine_label_names.txt / coarse_label_names.txt (standard
 * names when absent). Any whole number >= 1 of records per file is
 * accepted, so small generated sets load like the real ones.
 *
 * When files are missing: if dir holds cifar-10-binary.tar.gz
 * (cifar-100-binary.tar.gz) it is unpacked into dir; else if download is
 * nonzero the archive is fetched from www.cs.toronto.edu/~kriz/ (or from the
 * base URL in CLTRAIN_CIFAR_MIRROR), its MD5 checked, unpacked into dir and
 * deleted. train or test may be NULL to skip that split. On failure both
 * are left zeroed and a one-line message says what is wrong and what to do:
 * CT_EINPUT (files missing, damaged, labels out of range, bad archive),
 * CT_ENET (download failed: says where to put the files), CT_EIO (dir not
 * writable), CT_ENOMEM. */
int ct_cifar_load(ct_dataset *train, ct_dataset *test, const char *dir, int kind, int fine, int download);

/* A ct_source ctx: samples of ds, augmented by aug (ct_augment_apply). */
typedef struct ct_cifar_ctx {
    const ct_dataset *ds;
    ct_augment aug;
} ct_cifar_ctx;

/* ct_source.load for a ct_cifar_ctx: sample `index` of ctx->ds into dst
 * (h*w*c floats) and its label into *label. Works for any ct_dataset
 * (MNIST too). Always returns 0; an index out of range is a bug (aborts). */
int ct_cifar_source_load(void *ctx, int index, float *dst, int32_t *label, ct_rng *rng);

/* Fill src (a ct_source, source.h) to read ctx's data set:
 * n, h, w, c, n_classes, ctx and load; io_latency_us = 0. */
void ct_cifar_source_init(struct ct_source *src, ct_cifar_ctx *ctx);

#endif
