/* data.h: in-memory image data sets and the MNIST / Fashion-MNIST (IDX) loader.
 *
 * A ct_dataset holds every sample of a split as uint8 NHWC images plus one
 * label byte per sample; producers normalise and augment from it. IDX files
 * are read through zlib, so raw and .gz files load the same way.
 * Depends on common.h (error codes), zlib; ct_mnist_load downloads missing
 * files through download.h. Tested by tests/test_idx.c. */
#ifndef CLTRAIN_DATA_H
#define CLTRAIN_DATA_H
#include <stdint.h>

typedef struct ct_dataset {
    int n;            /* samples */
    int h, w, c;      /* image shape, NHWC, c = 1 for MNIST */
    int n_classes;
    uint8_t *images;  /* n*h*w*c bytes, row-major HWC per image */
    uint8_t *labels;  /* n */
    char **class_names; /* n_classes strings, may be NULL */
} ct_dataset;

/* Frees everything ds owns and zeroes it; safe on a zeroed or freed set. */
void ct_dataset_free(ct_dataset *ds);

/* Largest image side and the largest image-data size the IDX loader accepts;
 * anything larger is treated as a damaged header, not allocated. */
#define CT_IDX_MAX_SIDE 16384
#define CT_IDX_MAX_BYTES ((uint64_t)1 << 32)

/* Read an IDX image file (magic 0x00000803: n, rows, cols, then n*rows*cols
 * bytes) and an IDX label file (magic 0x00000801: n, then n bytes); raw or
 * .gz, both read through gzopen/gzread. n_classes is 1..256; every label
 * must be below it. ds is overwritten (class_names NULL); on failure it is
 * left zeroed and a negative CT_E* code is returned with a one-line message
 * naming the file (CT_EINPUT for missing, damaged or inconsistent files,
 * CT_ENOMEM when the images do not fit in memory). */
int ct_idx_load(ct_dataset *ds, const char *images_path, const char *labels_path, int n_classes);

enum { CT_MNIST = 1, CT_FASHION_MNIST = 2 };

/* An MNIST-format set in dir: train-images-idx3-ubyte[.gz],
 * train-labels-idx1-ubyte[.gz], t10k-images-idx3-ubyte[.gz],
 * t10k-labels-idx1-ubyte[.gz] (the .gz name wins when both exist).
 * kind = CT_MNIST or CT_FASHION_MNIST sets 10 class names ("0".."9", or
 * "T-shirt/top", "Trouser", ...). If download is nonzero, missing files are
 * downloaded into dir (created if needed) and their MD5 checked: MNIST from
 * the ossci-datasets S3 and cvdf-datasets GCS mirrors, Fashion-MNIST from
 * Zalando's; the environment variable CLTRAIN_MNIST_MIRROR (or
 * CLTRAIN_FASHION_MNIST_MIRROR) is a base URL that replaces the list.
 * train or test may be NULL to skip that split. On failure both are left
 * zeroed: CT_EINPUT (files missing or bad), CT_ENET (download failed), CT_EIO
 * (dir not writable), CT_ENOMEM. */
int ct_mnist_load(ct_dataset *train, ct_dataset *test, const char *dir, int kind, int download);

#endif
