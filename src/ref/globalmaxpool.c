/* ref/globalmaxpool.c: global max pooling in float64 terms (a maximum is
 * exact in float): y[b, c] = max over the HW pixels of x[b, :, c], the first
 * of equal maxima (a NaN wins once met); the backward gives dy[b, c] to that
 * pixel and 0 to the others. Checked by central differences in
 * tests/test_globalmaxpool.c, and the kernels of kernels/globalmaxpool.cl
 * against it. */
#include "cltrain/ref.h"
#include "cltrain/ref/globalmaxpool.h"
#include <math.h>

long ref_globalmaxpool_arg(const float *x, int b, int HW, int C, int c) {
    long best = (long)b * HW * C + c;
    for (int p = 1; p < HW && !isnan(x[best]); p++) {
        long i = ((long)b * HW + p) * C + c;
        if (x[i] > x[best] || isnan(x[i])) best = i;
    }
    return best;
}

void ref_globalmaxpool_forward(float *y, const float *x, int B, int HW, int C) {
    for (int b = 0; b < B; b++)
        for (int c = 0; c < C; c++) y[(long)b * C + c] = x[ref_globalmaxpool_arg(x, b, HW, C, c)];
}

void ref_globalmaxpool_backward(float *dx, const float *dy, const float *x, int B, int HW, int C) {
    for (long i = 0; i < (long)B * HW * C; i++) dx[i] = 0;
    for (int b = 0; b < B; b++)
        for (int c = 0; c < C; c++) dx[ref_globalmaxpool_arg(x, b, HW, C, c)] = dy[(long)b * C + c];
}
