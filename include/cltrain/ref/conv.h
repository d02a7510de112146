/* ref/conv.h: the float64 reference of [conv] (2-D convolution), in src/ref/conv.c:
 * the specification its kernels are checked against in tests/test_layers.c. Shared
 * definitions (activations: t, act) are cltrain/ref.h's. */
#ifndef CLTRAIN_REF_CONV_H
#define CLTRAIN_REF_CONV_H
#include "cltrain/ref.h"

typedef struct ref_conv_shape { int B, H, W, C, K, KH, KW, stride, pad, OH, OW; } ref_conv_shape;
/* y[B,OH,OW,K] = conv(x[B,H,W,C], w[KH,KW,C,K]) + b[K], act applied. */
void ref_conv_forward(const ref_conv_shape *s, float *y, const float *x, const float *w, const float *b, int act);
/* given dy (gradient of the activated output) and t (ref_act_bwd), dx overwritten, dw and db accumulated (+=). */
void ref_conv_backward(const ref_conv_shape *s, float *dx, float *dw, float *db, const float *dy,
                       const float *t, const float *x, const float *w, int act);
#endif
