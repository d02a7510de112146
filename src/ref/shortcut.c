/* ref/shortcut.c: the residual addition of [shortcut], in double: y =
 * act(a + P(s)), P taking every S-th pixel of s and zero-padding its
 * channels (option A of He et al. 2016), or, with projection=1, taking every
 * S-th pixel through a 1x1 convolution with bias (option B). Checked by
 * central differences in tests/test_shortcut.c, and the kernels of
 * kernels/shortcut.cl and the GEMM path against it. */
#include "cltrain/ref.h"
#include "cltrain/ref/shortcut.h"

static long src_index(int b, int yy, int x, int c, int SH, int SW, int SC, int S) {
    return (((long)b * SH + (long)yy * S) * SW + (long)x * S) * SC + c;
}

void ref_shortcut_forward(float *y, const float *a, const float *s, int B, int H, int W, int C, int SH, int SW, int SC,
                          int S, int act) {
    for (int b = 0; b < B; b++)
        for (int yy = 0; yy < H; yy++)
            for (int x = 0; x < W; x++)
                for (int c = 0; c < C; c++) {
                    long i = (((long)b * H + yy) * W + x) * C + c;
                    double v = (double)a[i] + (c < SC ? (double)s[src_index(b, yy, x, c, SH, SW, SC, S)] : 0.0);
                    v = ref_act(v, act);
                    y[i] = (float)v;
                }
}

void ref_shortcut_backward(float *da, float *ds, const float *dy, const float *t, int B, int H, int W, int C, int SH,
                           int SW, int SC, int S, int act) {
    for (int b = 0; b < B; b++)
        for (int yy = 0; yy < H; yy++)
            for (int x = 0; x < W; x++)
                for (int c = 0; c < C; c++) {
                    long i = (((long)b * H + yy) * W + x) * C + c;
                    double g = ref_act_bwd(dy[i], t[i], act);
                    if (da) da[i] = (float)g;
                    if (ds && c < SC) {
                        long j = src_index(b, yy, x, c, SH, SW, SC, S);
                        ds[j] = (float)((double)ds[j] + g);
                    }
                }
}

/* option B: the earlier output through a 1x1 convolution of stride S, w [SC, C] and bias [C] */
void ref_shortcut_proj_forward(float *y, const float *a, const float *s, const float *w, const float *bias, int B,
                               int H, int W, int C, int SH, int SW, int SC, int S, int act) {
    for (int b = 0; b < B; b++)
        for (int yy = 0; yy < H; yy++)
            for (int x = 0; x < W; x++)
                for (int c = 0; c < C; c++) {
                    long i = (((long)b * H + yy) * W + x) * C + c, j0 = src_index(b, yy, x, 0, SH, SW, SC, S);
                    double v = (double)a[i] + (double)bias[c];
                    for (int k = 0; k < SC; k++) v += (double)s[j0 + k] * (double)w[(long)k * C + c];
                    v = ref_act(v, act);
                    y[i] = (float)v;
                }
}

void ref_shortcut_proj_backward(float *da, float *ds, float *dw, float *dbias, const float *dy, const float *t,
                                const float *s, const float *w, int B, int H, int W, int C, int SH, int SW, int SC,
                                int S, int act) {
    for (int b = 0; b < B; b++)
        for (int yy = 0; yy < H; yy++)
            for (int x = 0; x < W; x++) {
                long j0 = src_index(b, yy, x, 0, SH, SW, SC, S);
                for (int c = 0; c < C; c++) {
                    long i = (((long)b * H + yy) * W + x) * C + c;
                    double g = ref_act_bwd(dy[i], t[i], act);
                    if (da) da[i] = (float)g;
                    dbias[c] = (float)((double)dbias[c] + g);
                    for (int k = 0; k < SC; k++) {
                        long wk = (long)k * C + c;
                        dw[wk] = (float)((double)dw[wk] + g * (double)s[j0 + k]);
                        if (ds) ds[j0 + k] = (float)((double)ds[j0 + k] + g * (double)w[wk]);
                    }
                }
            }
}
