/* winograd.cl: 3x3 stride-1 convolution as Winograd F(2x2, 3x3) (Lavin and
 * Gray 2016), NHWC. Each 2x2 output tile t = (b, th, tw) reads a 4x4 input
 * patch d from row 2*th - pad, column 2*tw - pad (zero outside the image):
 *   V = B^T d B, U = G g G^T, M = sum over c of U .* V, Y = A^T M A,
 * so the 16 points xi = 4*i + j of the transformed domain are 16 independent
 * GEMMs M[xi] (T x K) = V[xi] (T x C) * U[xi] (C x K), run by the GEMM
 * kernels: 16 multiplies per tile and channel pair instead of 36.
 * Layouts: V [16][T][C], U [16][C][K], M [16][T][K].
 *   backward data: the same with dy as the input, pad 2 - pad and the
 *     weights turned 180 degrees, C and K swapped (wino_w flip=1: [16][K][C]);
 *   backward weights: dU[xi] (C x K) = V[xi]^T Z[xi] with Z = A dY A^T
 *     (wino_dy; output positions past the edge count as 0), then
 *     dg = G^T dU G added into the gradient (wino_dw).
 * Reference: src/ref/conv.c (the direct convolution); tests: tests/test_layers.c
 * (test_conv_winograd, every conv case with --conv winograd). */

/* The transforms move whole channel runs per tile, as im2col does: eight
 * channels at a time (float8), then the rest one by one. A work-item per
 * (channel, tile) left PoCL scalar code with 16 strided stores each, and the
 * transforms took three times the GEMMs. */
#define LD8(p) vload8(0, (p))
#define ST8(v, p) vstore8((v), 0, (p))
#define LD1(p) (*(p))
#define ST1(v, p) (*(p) = (v))

#define WINO_IN(VT, LD, ST, VW)                                                                          \
    for (; c + VW <= C; c += VW) {                                                                       \
        VT d[4][4], e[4][4];                                                                             \
        for (int i = 0; i < 4; i++)                                                                      \
            for (int j = 0; j < 4; j++) {                                                                \
                const int y = y0 + i, xx = x0 + j;                                                       \
                d[i][j] = y >= 0 && y < H && xx >= 0 && xx < W ? LD(x + (((size_t)b * H + y) * W + xx) * C + c) \
                                                                : (VT)(0.0f);                            \
            }                                                                                            \
        for (int j = 0; j < 4; j++) {                                                                    \
            e[0][j] = d[0][j] - d[2][j];                                                                 \
            e[1][j] = d[1][j] + d[2][j];                                                                 \
            e[2][j] = d[2][j] - d[1][j];                                                                 \
            e[3][j] = d[1][j] - d[3][j];                                                                 \
        }                                                                                                \
        for (int i = 0; i < 4; i++) {                                                                    \
            ST(e[i][0] - e[i][2], V + (4 * i + 0) * TC + o + c);                                         \
            ST(e[i][1] + e[i][2], V + (4 * i + 1) * TC + o + c);                                         \
            ST(e[i][2] - e[i][1], V + (4 * i + 2) * TC + o + c);                                         \
            ST(e[i][1] - e[i][3], V + (4 * i + 3) * TC + o + c);                                         \
        }                                                                                                \
    }

/* gws = (T): V = B^T d B for one tile, every channel */
__kernel void wino_in(__global float *V, __global const float *x, const int H, const int W, const int C,
                      const int pad, const int TH, const int TW, const int T) {
    const int t = (int)get_global_id(0);
    if (t >= T) return;
    const int tw = t % TW, r = t / TW, th = r % TH, b = r / TH;
    const int y0 = 2 * th - pad, x0 = 2 * tw - pad;
    const size_t TC = (size_t)T * C, o = (size_t)t * C;
    int c = 0;
    WINO_IN(float8, LD8, ST8, 8)
    WINO_IN(float, LD1, ST1, 1)
}

/* gws = (K, C): U = G g G^T of the weights w[woff + ((a*3 + b)*C + c)*K + k]
 * (HWIO). flip = 1: g turned 180 degrees and U written [16][K][C], the
 * weights of the data gradient. */
__kernel void wino_w(__global float *U, __global const float *w, const int woff, const int C, const int K,
                     const int flip) {
    const int k = (int)get_global_id(0), c = (int)get_global_id(1);
    if (k >= K || c >= C) return;
    float g[3][3];
    for (int a = 0; a < 3; a++)
        for (int b = 0; b < 3; b++) {
            const int ka = flip ? 2 - a : a, kb = flip ? 2 - b : b;
            g[a][b] = w[woff + ((size_t)(ka * 3 + kb) * C + c) * K + k];
        }
    float e[4][3];
    for (int b = 0; b < 3; b++) {
        e[0][b] = g[0][b];
        e[1][b] = 0.5f * (g[0][b] + g[1][b] + g[2][b]);
        e[2][b] = 0.5f * (g[0][b] - g[1][b] + g[2][b]);
        e[3][b] = g[2][b];
    }
    const size_t CK = (size_t)C * K, o = flip ? (size_t)k * C + c : (size_t)c * K + k;
    for (int i = 0; i < 4; i++) {
        U[(4 * i + 0) * CK + o] = e[i][0];
        U[(4 * i + 1) * CK + o] = 0.5f * (e[i][0] + e[i][1] + e[i][2]);
        U[(4 * i + 2) * CK + o] = 0.5f * (e[i][0] - e[i][1] + e[i][2]);
        U[(4 * i + 3) * CK + o] = e[i][2];
    }
}

#define WINO_OUT(VT, LD, ST, VW)                                                                         \
    for (; k + VW <= K; k += VW) {                                                                       \
        VT m[4][4], e[2][4];                                                                             \
        for (int i = 0; i < 16; i++) m[i / 4][i % 4] = LD(M + i * TK + o + k);                           \
        for (int j = 0; j < 4; j++) {                                                                    \
            e[0][j] = m[0][j] + m[1][j] + m[2][j];                                                       \
            e[1][j] = m[1][j] - m[2][j] - m[3][j];                                                       \
        }                                                                                                \
        const VT bk = has_bias ? LD(bias + boff + k) : (VT)(0.0f);                                       \
        for (int i = 0; i < 2 && 2 * th + i < OH; i++) {                                                 \
            const VT v0 = e[i][0] + e[i][1] + e[i][2] + bk, v1 = e[i][1] - e[i][2] - e[i][3] + bk;       \
            __global float *row = y + (((size_t)b * OH + 2 * th + i) * OW + 2 * tw) * K + k;             \
            ST(act == CT_ACT_RELU ? fmax(v0, (VT)(0.0f)) : v0, row);                                     \
            if (2 * tw + 1 < OW) ST(act == CT_ACT_RELU ? fmax(v1, (VT)(0.0f)) : v1, row + K);           \
        }                                                                                                \
    }

/* gws = (T): Y = A^T M A, plus bias[boff + k] when has_bias, then ReLU if
 * act, into y[b, 2*th + r, 2*tw + s, k] for the positions inside OH x OW
 * (overwrites). */
__kernel void wino_out(__global float *y, __global const float *M, __global const float *bias, const int boff,
                       const int has_bias, const int act, const int OH, const int OW, const int K, const int TH,
                       const int TW, const int T) {
    const int t = (int)get_global_id(0);
    if (t >= T) return;
    const int tw = t % TW, r = t / TW, th = r % TH, b = r / TH;
    const size_t TK = (size_t)T * K, o = (size_t)t * K;
    int k = 0;
    WINO_OUT(float8, LD8, ST8, 8)
    WINO_OUT(float, LD1, ST1, 1)
}

#define WINO_DY(VT, LD, ST, VW)                                                                          \
    for (; k + VW <= K; k += VW) {                                                                       \
        VT g[2][2];                                                                                      \
        for (int i = 0; i < 2; i++)                                                                      \
            for (int j = 0; j < 2; j++) {                                                                \
                const int oy = 2 * th + i, ox = 2 * tw + j;                                              \
                g[i][j] = oy < OH && ox < OW ? LD(dy + (((size_t)b * OH + oy) * OW + ox) * K + k) : (VT)(0.0f); \
            }                                                                                            \
        const VT e[4][2] = {{g[0][0], g[0][1]}, {g[0][0] + g[1][0], g[0][1] + g[1][1]},                   \
                            {g[0][0] - g[1][0], g[0][1] - g[1][1]}, {-g[1][0], -g[1][1]}};               \
        for (int i = 0; i < 4; i++) {                                                                    \
            ST(e[i][0], Z + (4 * i + 0) * TK + o + k);                                                   \
            ST(e[i][0] + e[i][1], Z + (4 * i + 1) * TK + o + k);                                         \
            ST(e[i][0] - e[i][1], Z + (4 * i + 2) * TK + o + k);                                         \
            ST(-e[i][1], Z + (4 * i + 3) * TK + o + k);                                                  \
        }                                                                                                \
    }

/* gws = (T): Z = A dY A^T of one output tile of dy (positions past OH x OW are 0) */
__kernel void wino_dy(__global float *Z, __global const float *dy, const int OH, const int OW, const int K,
                      const int TH, const int TW, const int T) {
    const int t = (int)get_global_id(0);
    if (t >= T) return;
    const int tw = t % TW, r = t / TW, th = r % TH, b = r / TH;
    const size_t TK = (size_t)T * K, o = (size_t)t * K;
    int k = 0;
    WINO_DY(float8, LD8, ST8, 8)
    WINO_DY(float, LD1, ST1, 1)
}

/* gws = (K, C): grads[woff + ((a*3 + b)*C + c)*K + k] += (G^T dU G)[a][b] */
__kernel void wino_dw(__global float *grads, const int woff, __global const float *dU, const int C, const int K) {
    const int k = (int)get_global_id(0), c = (int)get_global_id(1);
    if (k >= K || c >= C) return;
    const size_t CK = (size_t)C * K, o = (size_t)c * K + k;
    float u[4][4];
    for (int i = 0; i < 16; i++) u[i / 4][i % 4] = dU[i * CK + o];
    float e[3][4];
    for (int j = 0; j < 4; j++) {
        e[0][j] = u[0][j] + 0.5f * (u[1][j] + u[2][j]);
        e[1][j] = 0.5f * (u[1][j] - u[2][j]);
        e[2][j] = 0.5f * (u[1][j] + u[2][j]) + u[3][j];
    }
    for (int a = 0; a < 3; a++) {
        const float d[3] = {e[a][0] + 0.5f * (e[a][1] + e[a][2]), 0.5f * (e[a][1] - e[a][2]),
                            0.5f * (e[a][1] + e[a][2]) + e[a][3]};
        for (int b = 0; b < 3; b++) grads[woff + ((size_t)(a * 3 + b) * C + c) * K + k] += d[b];
    }
}
