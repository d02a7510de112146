/* ref/globalmaxpool.h: the float64 reference of [globalmaxpool] (global max pooling), in src/ref/globalmaxpool.c:
 * the specification its kernels are checked against in tests/test_globalmaxpool.c. Shared
 * definitions (activations: t, act) are cltrain/ref.h's. */
#ifndef CLTRAIN_REF_GLOBALMAXPOOL_H
#define CLTRAIN_REF_GLOBALMAXPOOL_H
#include "cltrain/ref.h"

/* global max pooling: y[B, C] = the largest of the HW pixels of each channel, the first of equal
 * maxima (a NaN wins once met); backward: dy to that pixel, 0 to the others (dx overwritten).
 * ref_globalmaxpool_arg: the index into x of image b's channel c's maximum. */
long ref_globalmaxpool_arg(const float *x, int b, int HW, int C, int c);
void ref_globalmaxpool_forward(float *y, const float *x, int B, int HW, int C);
void ref_globalmaxpool_backward(float *dx, const float *dy, const float *x, int B, int HW, int C);
#endif
