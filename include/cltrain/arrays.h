/* arrays.h: an image data set held in NumPy arrays (`cltrain arrays`): one
 * .npz as Keras and np.savez write it (x_train, y_train, x_test, y_test),
 * or .npy files X Y [XTEST YTEST].
 *
 * Images are uint8 (x / 255, as every other set) or float32/float64 (taken
 * as they are), laid out NHW (one channel), NHWC or NCHW; labels are
 * integers of any width (or bool), shape (n) or (n, 1). Without test
 * arrays, --val-split of each class is held out (seeded, as image
 * folders). .npy files and stored .npz members are mapped, not read, so a
 * set larger than memory trains; compressed members are inflated (npy.h).
 *
 * The whole set is described by one spec string, which checkpoints record
 * as the data path so `cltrain eval` opens the same arrays:
 *   FILE.npz[;x=TRAIN[,TEST];y=TRAIN[,TEST]][;layout=nhwc|nchw|nhw]
 *   X.npy,Y.npy[,XTEST.npy,YTEST.npy][;layout=...]
 * Depends on npy.h, source.h, data.h. Tested by tests/arrays.sh. */
#ifndef CLTRAIN_ARRAYS_H
#define CLTRAIN_ARRAYS_H
#include "cltrain/data.h"
#include "cltrain/npy.h"
#include "cltrain/source.h"

enum { CT_LAYOUT_AUTO = 0, CT_LAYOUT_NHWC, CT_LAYOUT_NCHW, CT_LAYOUT_NHW };

#define CT_ARRAYS_SPEC 512

typedef struct ct_arrays_spec {
    char files[4][CT_ARRAYS_SPEC];
    int n_files;                 /* 1 (.npz), 2 or 4 (.npy) */
    char x[2][64], y[2][64];     /* .npz keys of train and test; test "" without test arrays */
    int layout;                  /* CT_LAYOUT_* */
} ct_arrays_spec;

/* Parse a spec string (above) into s. CT_EINPUT naming what is wrong. */
int ct_arrays_spec_parse(ct_arrays_spec *s, const char *spec);
/* The spec string of files (n of them) with --x, --y (NULL: the defaults)
 * and --layout (NULL: by rank) into out[CT_ARRAYS_SPEC]. CT_EINPUT for a
 * wrong count or kind of files, keys given for .npy files, names with ',' or ';'. */
int ct_arrays_spec_make(char *out, const char *const *files, int n, const char *x, const char *y, const char *layout);

typedef struct ct_arrays_src_ctx {
    const struct ct_arrays *set;
    int split;
} ct_arrays_src_ctx;

typedef struct ct_arrays {
    ct_arrays_spec spec;
    ct_npz npz;
    ct_array x[2], y[2];         /* the arrays read; [1] absent (count 0) when the test split is held out */
    int layout;                  /* as resolved */
    int h, w, c, n_classes;
    int32_t *labels[2];          /* per row of x[k] */
    int *rows[2];                /* split k's samples: rows of x[from[k]] */
    int from[2];
    int held_out;                /* the test split is --val-split of the training arrays */
    char **class_names;          /* "0", "1", ... */
    ct_arrays_src_ctx ctx[2];
    ct_source src[2];            /* x / 255 (uint8) or x (floats), HWC */
    ct_dataset ds[2];            /* shells: n, shape, classes, names; no pixels */
} ct_arrays;

/* Open the arrays of spec string `spec`. need_train 0 (eval): only the
 * test split (classes: the checkpoint's, or 0 to count them). val_split and
 * seed choose the held-out share without test arrays. CT_EINPUT with one
 * line naming file and key; a is closed on failure. */
int ct_arrays_open(ct_arrays *a, const char *spec, double val_split, uint64_t seed, int need_train, int classes);
void ct_arrays_close(ct_arrays *a);
/* Sample i of split k as h*w*c uint8 HWC (round(x*255) clamped for floats). */
void ct_arrays_bytes(const ct_arrays *a, int k, int i, uint8_t *dst);
#endif
