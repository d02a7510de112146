/* ref.h: the plain-C float64 references every kernel is checked against.
 * They are the specification: slow, obvious, no SIMD. Layout is NHWC.
 * What several layers share is here (activations, the GEMM, the loss, the
 * optimizers); each layer type's own reference is declared in
 * cltrain/ref/<type>.h, which its test includes. Tested by the
 * finite-difference gradient checks in tests/test_ref.c and each layer's test. */
#ifndef CLTRAIN_REF_H
#define CLTRAIN_REF_H
#include <stdint.h>

/* Activations: act is CT_ACT_* (cltrain/model.h): 0 linear, 1 ReLU, 2 GELU
 * (the erf form, z Phi(z), as PyTorch's nn.GELU()). ref_act_bwd takes the
 * gradient g of the activation's output through it; t is, as for the
 * kernels (CT_ACT_BWD, kernels/prelude.cl), its output y for ReLU and its
 * input z for GELU. Every backward below that takes "t" means the same. */
double ref_act(double z, int act);
double ref_act_bwd(double g, double t, int act);

/* C[M,N] = alpha*op(A)*op(B) + beta*C (+bias[n]), act applied */
void ref_gemm(int transA, int transB, int M, int N, int K, float alpha, const float *A, int lda,
              const float *B, int ldb, float beta, float *C, int ldc, const float *bias, int act);

/* mean softmax cross-entropy over B rows; dlogits = (softmax - onehot) / B; returns loss sum; counts correct */
double ref_softmax_xent(float *dlogits, const float *logits, const int32_t *labels, int B, int C, int *correct);
/* the same with label smoothing e: targets (1-e)*onehot + e/C; loss sum_j q_j*(logsumexp - z_j) */
double ref_softmax_xent_smooth(float *dlogits, const float *logits, const int32_t *labels, int B, int C, double e,
                              int *correct);

/* Optimizer steps over n parameters (src/ref/optim.c); t is the 1-based step; wd applies to all n. */
void ref_adam(float *p, float *m, float *v, const float *g, long n, float lr, float b1, float b2, float eps, float wd, int t);
/* AdamW with the decay decoupled from the rate: p -= lr*mhat/(sqrt(vhat)+eps) + wdt*p */
void ref_adamw(float *p, float *m, float *v, const float *g, long n, float lr, float b1, float b2, float eps, double wdt, int t);
void ref_sgd(float *p, float *mom, const float *g, long n, float lr, float momentum, float wd);
void ref_nesterov(float *p, float *mom, const float *g, long n, float lr, float momentum, float wd);
/* the lookahead's update (cltrain/lookahead.h): avg += w (p - avg); p = avg */
void ref_lookahead(float *p, float *avg, long n, double w);
/* input normalisation (prep.h): out[i, k] = (in[i, k] / 255 - mean[k]) / std[k] over px pixels of c channels */
void ref_prep(double *out, const uint8_t *in, long px, int c, const double *mean, const double *std);
#endif
