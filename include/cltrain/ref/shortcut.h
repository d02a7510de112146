/* ref/shortcut.h: the float64 reference of [shortcut] (the residual connection), in src/ref/shortcut.c:
 * the specification its kernels are checked against in tests/test_shortcut.c. Shared
 * definitions (activations: t, act) are cltrain/ref.h's. */
#ifndef CLTRAIN_REF_SHORTCUT_H
#define CLTRAIN_REF_SHORTCUT_H
#include "cltrain/ref.h"

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
#endif
