/* ref/pool.c: max pooling reference (NHWC, floor mode, first maximum wins ties). */
#include "cltrain/ref.h"
#include "cltrain/ref/maxpool.h"
#include <string.h>

static long argmax_window(const float *x, int b, int H, int W, int C, int c, int k, int st, int oy, int ox) {
    long best = -1;
    float m = 0;
    for (int ky = 0; ky < k; ky++)
        for (int kx = 0; kx < k; kx++) {
            long i = (((long)b * H + oy * st + ky) * W + ox * st + kx) * C + c;
            if (best < 0 || x[i] > m) { m = x[i]; best = i; }
        }
    return best;
}

void ref_maxpool_forward(float *y, const float *x, int B, int H, int W, int C, int k, int st, int OH, int OW) {
    for (int b = 0; b < B; b++)
        for (int oy = 0; oy < OH; oy++)
            for (int ox = 0; ox < OW; ox++)
                for (int c = 0; c < C; c++)
                    y[(((long)b * OH + oy) * OW + ox) * C + c] = x[argmax_window(x, b, H, W, C, c, k, st, oy, ox)];
}

void ref_maxpool_backward(float *dx, const float *dy, const float *x, int B, int H, int W, int C, int k, int st, int OH, int OW) {
    memset(dx, 0, sizeof(float) * (size_t)B * H * W * C);
    for (int b = 0; b < B; b++)
        for (int oy = 0; oy < OH; oy++)
            for (int ox = 0; ox < OW; ox++)
                for (int c = 0; c < C; c++)
                    dx[argmax_window(x, b, H, W, C, c, k, st, oy, ox)] += dy[(((long)b * OH + oy) * OW + ox) * C + c];
}
