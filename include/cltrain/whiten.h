/* whiten.h: a patch-whitening convolution's weights from data ([conv]
 * whiten=N, as airbench's init_whitening): the uncentred covariance of every
 * k x k x c patch (stride 1, inside the image) of the first N training
 * images as the model sees them, its eigenvectors (LAPACK's dsyev, through
 * LAPACKE, in double) scaled by 1 / sqrt(eigenvalue + CT_WHITEN_EPS), the
 * largest eigenvalue first, then the same filters negated: 2 k k c filters.
 * The layer's weights are frozen (lr multiplier 0); its bias trains as
 * bias_lr=, bias_epochs= say. The training loop (src/train/whiten.c) feeds
 * the images at the start of a fresh run; a resumed run, --init and
 * evaluation take the weights from the checkpoint. Tested by
 * tests/test_whiten.c (the eigen-property against a float64 covariance). */
#ifndef CLTRAIN_WHITEN_H
#define CLTRAIN_WHITEN_H
#include "cltrain/model.h"

#define CT_WHITEN_EPS 5e-4

/* The layer with whiten= set, or -1 (ct_model_parse allows it on the first layer only). */
int ct_whiten_layer(const ct_model *m);
/* cov[d * d] (d = k*k*c, index (ky*k + kx)*c + ch, the weights' HWIO order)
 * += the outer product of every k x k patch of the B images x [B, h, w, c]
 * with itself; returns how many patches it added. */
long ct_whiten_accumulate(double *cov, const float *x, int B, int h, int w, int c, int k);
/* Layer L's weights into params (the whole flat buffer) from cov summed over
 * n patches: CT_EINPUT when n is 0, CT_EIO when LAPACK fails (one line). */
int ct_whiten_weights(const ct_layer *L, const double *cov, long n, float *params);
#endif
