/* ref.h: the plain-C float64 references every kernel is checked against.
 * They are the specification: slow, obvious, no SIMD. Layout is NHWC.
 * Tested by the finite-difference gradient checks in tests/test_ref.c. */
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

typedef struct ref_conv_shape { int B, H, W, C, K, KH, KW, stride, pad, OH, OW; } ref_conv_shape;
/* y[B,OH,OW,K] = conv(x[B,H,W,C], w[KH,KW,C,K]) + b[K], act applied. */
void ref_conv_forward(const ref_conv_shape *s, float *y, const float *x, const float *w, const float *b, int act);
/* given dy (gradient of the activated output) and t (ref_act_bwd), dx overwritten, dw and db accumulated (+=). */
void ref_conv_backward(const ref_conv_shape *s, float *dx, float *dw, float *db, const float *dy,
                       const float *t, const float *x, const float *w, int act);

/* max pool, window k, stride st, floor mode; ties go to the first maximum in (ky, kx) order */
void ref_maxpool_forward(float *y, const float *x, int B, int H, int W, int C, int k, int st, int OH, int OW);
void ref_maxpool_backward(float *dx, const float *dy, const float *x, int B, int H, int W, int C, int k, int st, int OH, int OW);

/* mean softmax cross-entropy over B rows; dlogits = (softmax - onehot) / B; returns loss sum; counts correct */
double ref_softmax_xent(float *dlogits, const float *logits, const int32_t *labels, int B, int C, int *correct);
/* the same with label smoothing e: targets (1-e)*onehot + e/C; loss sum_j q_j*(logsumexp - z_j) */
double ref_softmax_xent_smooth(float *dlogits, const float *logits, const int32_t *labels, int B, int C, double e,
                              int *correct);

/* batch norm over x[M, C] with batch statistics; mean/invstd out may be NULL */
void ref_bn_forward(float *y, double *mean, double *invstd, const float *x, const float *gamma, const float *beta,
                    int M, int C, float eps, int act);
/* dy is the gradient of the (activated) output, t as ref_act_bwd; dx overwritten, dgamma/dbeta accumulated */
void ref_bn_backward(float *dx, float *dgamma, float *dbeta, const float *dy, const float *t, const float *x,
                     const float *gamma, int M, int C, float eps, int act);

/* inverted dropout: keep element i when hash(seed, step, layer, i) >> 8 >= p * 2^24 */
uint32_t ref_hash(uint32_t a, uint32_t b, uint32_t c, uint32_t d);
void ref_dropout(float *y, const float *x, long n, float p, uint32_t seed, uint32_t step, uint32_t layer);
/* global average pooling over the HW pixels of each image: y[B, C] */
void ref_avgpool_forward(float *y, const float *x, int B, int HW, int C);
void ref_avgpool_backward(float *dx, const float *dy, int B, int HW, int C);
/* global max pooling: y[B, C] = the largest of the HW pixels of each channel, the first of equal
 * maxima (a NaN wins once met); backward: dy to that pixel, 0 to the others (dx overwritten).
 * ref_globalmaxpool_arg: the index into x of image b's channel c's maximum. */
long ref_globalmaxpool_arg(const float *x, int b, int HW, int C, int c);
void ref_globalmaxpool_forward(float *y, const float *x, int B, int HW, int C);
void ref_globalmaxpool_backward(float *dx, const float *dy, const float *x, int B, int HW, int C);

/* residual addition y[B,H,W,C] = act(a + P(s)), s [B,SH,SW,SC]: P takes pixel (y*S, x*S) of s and
 * zero-pads its SC <= C channels. Backward: da overwritten, ds accumulated (+=); either may be NULL. */
void ref_shortcut_forward(float *y, const float *a, const float *s, int B, int H, int W, int C, int SH, int SW, int SC,
                          int S, int act);
void ref_shortcut_backward(float *da, float *ds, const float *dy, const float *t, int B, int H, int W, int C, int SH,
                           int SW, int SC, int S, int act);
/* with a 1x1 projection (option B): y = act(a + P(s) w + bias), P taking pixel (y*S, x*S) of s (all SC
 * channels, any number), w [SC, C], bias [C]. Backward: da overwritten; ds, dw and dbias accumulated
 * (+=); da and ds may be NULL. */
void ref_shortcut_proj_forward(float *y, const float *a, const float *s, const float *w, const float *bias, int B,
                               int H, int W, int C, int SH, int SW, int SC, int S, int act);
void ref_shortcut_proj_backward(float *da, float *ds, float *dw, float *dbias, const float *dy, const float *t,
                                const float *s, const float *w, int B, int H, int W, int C, int SH, int SW, int SC,
                                int S, int act);

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
