/* ref/avgpool.h: the float64 reference of [avgpool] (global average pooling), in src/ref/dropout.c:
 * the specification its kernels are checked against in tests/test_dropout.c. Shared
 * definitions (activations: t, act) are cltrain/ref.h's. */
#ifndef CLTRAIN_REF_AVGPOOL_H
#define CLTRAIN_REF_AVGPOOL_H
#include "cltrain/ref.h"

/* global average pooling over the HW pixels of each image: y[B, C] */
void ref_avgpool_forward(float *y, const float *x, int B, int HW, int C);
void ref_avgpool_backward(float *dx, const float *dy, int B, int HW, int C);
#endif
