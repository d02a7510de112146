/* ref/batchnorm.h: the float64 reference of [batchnorm] (batch normalisation), in src/ref/bn.c:
 * the specification its kernels are checked against in tests/test_bn.c. Shared
 * definitions (activations: t, act) are cltrain/ref.h's. */
#ifndef CLTRAIN_REF_BATCHNORM_H
#define CLTRAIN_REF_BATCHNORM_H
#include "cltrain/ref.h"

/* batch norm over x[M, C] with batch statistics; mean/invstd out may be NULL */
void ref_bn_forward(float *y, double *mean, double *invstd, const float *x, const float *gamma, const float *beta,
                    int M, int C, float eps, int act);
/* dy is the gradient of the (activated) output, t as ref_act_bwd; dx overwritten, dgamma/dbeta accumulated */
void ref_bn_backward(float *dx, float *dgamma, float *dbeta, const float *dy, const float *t, const float *x,
                     const float *gamma, int M, int C, float eps, int act);
#endif
