/* ref/shortcut.c: the residual addition of [shortcut], in double: y =
 * act(a + P(s)), P taking every S-th pixel of s and zero-padding its
 * channels (option A of He et al. 2016). Checked by central differences in
 * tests/test_shortcut.c, and the kernels of kernels/shortcut.cl against it. */
#include "cltrain/ref.h"

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
                    if (act && v < 0) v = 0;
                    y[i] = (float)v;
                }
}

void ref_shortcut_backward(float *da, float *ds, const float *dy, const float *y, int B, int H, int W, int C, int SH,
                           int SW, int SC, int S, int act) {
    for (int b = 0; b < B; b++)
        for (int yy = 0; yy < H; yy++)
            for (int x = 0; x < W; x++)
                for (int c = 0; c < C; c++) {
                    long i = (((long)b * H + yy) * W + x) * C + c;
                    double g = act && !(y[i] > 0) ? 0.0 : (double)dy[i];
                    if (da) da[i] = (float)g;
                    if (ds && c < SC) {
                        long j = src_index(b, yy, x, c, SH, SW, SC, S);
                        ds[j] = (float)((double)ds[j] + g);
                    }
                }
}
