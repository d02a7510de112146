/* ref/conv.c: direct convolution in float64, NHWC, weights [KH][KW][C][K].
 * Written as the textbook loop nest, independent of the im2col+GEMM kernels
 * it specifies. Tested by the gradient checks in tests/test_ref.c. */
#include "cltrain/ref.h"
#include "cltrain/ref/conv.h"
#include <stdlib.h>
#include <string.h>

#define XI(s, b, y, x, c) ((((long)(b) * (s)->H + (y)) * (s)->W + (x)) * (s)->C + (c))
#define YI(s, b, y, x, k) ((((long)(b) * (s)->OH + (y)) * (s)->OW + (x)) * (s)->K + (k))
#define WI(s, ky, kx, c, k) ((((long)(ky) * (s)->KW + (kx)) * (s)->C + (c)) * (s)->K + (k))

void ref_conv_forward(const ref_conv_shape *s, float *y, const float *x, const float *w, const float *b, int act) {
    for (int n = 0; n < s->B; n++)
        for (int oy = 0; oy < s->OH; oy++)
            for (int ox = 0; ox < s->OW; ox++)
                for (int k = 0; k < s->K; k++) {
                    double sum = b ? b[k] : 0;
                    for (int ky = 0; ky < s->KH; ky++)
                        for (int kx = 0; kx < s->KW; kx++) {
                            int iy = oy * s->stride - s->pad + ky, ix = ox * s->stride - s->pad + kx;
                            if (iy < 0 || iy >= s->H || ix < 0 || ix >= s->W) continue;
                            for (int c = 0; c < s->C; c++) sum += (double)x[XI(s, n, iy, ix, c)] * w[WI(s, ky, kx, c, k)];
                        }
                    sum = ref_act(sum, act);
                    y[YI(s, n, oy, ox, k)] = (float)sum;
                }
}

void ref_conv_backward(const ref_conv_shape *s, float *dx, float *dw, float *db, const float *dy,
                       const float *t, const float *x, const float *w, int act) {
    long nx = (long)s->B * s->H * s->W * s->C;
    double *gx = calloc((size_t)nx, sizeof *gx);
    for (int n = 0; n < s->B; n++)
        for (int oy = 0; oy < s->OH; oy++)
            for (int ox = 0; ox < s->OW; ox++)
                for (int k = 0; k < s->K; k++) {
                    long yi = YI(s, n, oy, ox, k);
                    double g = ref_act_bwd(dy[yi], t[yi], act);
                    if (db) db[k] += (float)g;
                    for (int ky = 0; ky < s->KH; ky++)
                        for (int kx = 0; kx < s->KW; kx++) {
                            int iy = oy * s->stride - s->pad + ky, ix = ox * s->stride - s->pad + kx;
                            if (iy < 0 || iy >= s->H || ix < 0 || ix >= s->W) continue;
                            for (int c = 0; c < s->C; c++) {
                                if (dw) dw[WI(s, ky, kx, c, k)] += (float)(g * x[XI(s, n, iy, ix, c)]);
                                gx[XI(s, n, iy, ix, c)] += g * w[WI(s, ky, kx, c, k)];
                            }
                        }
                }
    if (dx)
        for (long i = 0; i < nx; i++) dx[i] = (float)gx[i];
    free(gx);
}
