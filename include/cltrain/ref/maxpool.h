/* ref/maxpool.h: the float64 reference of [maxpool] (max pooling), in src/ref/pool.c:
 * the specification its kernels are checked against in tests/test_layers.c. Shared
 * definitions (activations: t, act) are cltrain/ref.h's. */
#ifndef CLTRAIN_REF_MAXPOOL_H
#define CLTRAIN_REF_MAXPOOL_H
#include "cltrain/ref.h"

/* max pool, window k, stride st, floor mode; ties go to the first maximum in (ky, kx) order */
void ref_maxpool_forward(float *y, const float *x, int B, int H, int W, int C, int k, int st, int OH, int OW);
void ref_maxpool_backward(float *dx, const float *dy, const float *x, int B, int H, int W, int C, int k, int st, int OH, int OW);
#endif
