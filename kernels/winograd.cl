/* winograd.cl: 3x3 stride-1 convolution as Winograd F(m x m, 3x3) (Lavin and
 * Gray 2016), NHWC, built once per tile size: -DWINO_M=2 (F(2x2, 3x3)) or
 * -DWINO_M=4 (F(4x4, 3x3)); n = m + 2. Each m x m output tile t = (b, th, tw)
 * reads an n x n input patch d from row m*th - pad, column m*tw - pad (zero
 * outside the image):
 *   V = B^T d B, U = G g G^T, M = sum over c of U .* V, Y = A^T M A,
 * so the n*n points xi = n*i + j of the transformed domain are n*n
 * independent GEMMs M[xi] (T x K) = V[xi] (T x C) * U[xi] (C x K), run by the
 * GEMM kernels: n*n multiplies per tile and channel pair instead of 9*m*m
 * (16 for 36 at m = 2, 36 for 144 at m = 4).
 * Layouts: V [n*n][T][C], U [n*n][C][ldu], M [n*n][T][K]; ldu is K, or more
 * where the host pads U's rows (conv_winograd.c, u_ld); wino_fused reads U
 * packed, [n*n][K/16][C][16].
 *   backward data: the same with dy as the input, pad 2 - pad and the
 *     weights turned 180 degrees, C and K swapped (wino_w flip=1: [n*n][K][ldu]);
 *   backward weights: dU[xi] (C x K) = V[xi]^T Z[xi] with Z = A dY A^T
 *     (wino_dy; output positions past the edge count as 0), then
 *     dg = G^T dU G added into the gradient (wino_dw).
 * Reference: src/ref/conv.c (the direct convolution); tests: tests/test_layers.c
 * (test_conv_winograd: every conv case with each tile size). */

#ifndef WINO_M
#define WINO_M 2
#endif
/* -DWINO_VW=16 on devices with 16-wide float vectors (AVX-512): F(4x4)'s
 * per-tile kernels then move sixteen channels at a time first */
#ifndef WINO_VW
#define WINO_VW 8
#endif
#if WINO_M == 4 && WINO_VW >= 16
#define WIDE(X) X(float16, LD16, ST16, 16)
#else
#define WIDE(X)
#endif
#define WN (WINO_M + 2)

/* The 1-D transforms, o = T s on arrays of n, 3 or m elements (vectors or
 * scalars). The 2-D ones apply them to the columns and then to the rows. */
#if WINO_M == 2
/* B^T (4 <- 4) */
#define T_IN(o, s) (o[0] = s[0] - s[2], o[1] = s[1] + s[2], o[2] = s[2] - s[1], o[3] = s[1] - s[3])
/* G (4 <- 3) */
#define T_W(o, s) (o[0] = s[0], o[1] = 0.5f * (s[0] + s[1] + s[2]), o[2] = 0.5f * (s[0] - s[1] + s[2]), o[3] = s[2])
/* A^T (2 <- 4) */
#define T_OUT(o, s) (o[0] = s[0] + s[1] + s[2], o[1] = s[1] - s[2] - s[3])
/* A (4 <- 2) */
#define T_DY(o, s) (o[0] = s[0], o[1] = s[0] + s[1], o[2] = s[0] - s[1], o[3] = -s[1])
/* G^T (3 <- 4) */
#define T_DW(o, s) \
    (o[0] = s[0] + 0.5f * (s[1] + s[2]), o[1] = 0.5f * (s[1] - s[2]), o[2] = 0.5f * (s[1] + s[2]) + s[3])
#elif WINO_M == 4
/* B^T (6 <- 6), rows [4 0 -5 0 1 0] [0 -4 -4 1 1 0] [0 4 -4 -1 1 0]
 * [0 -2 -1 2 1 0] [0 2 -1 -2 1 0] [0 4 0 -5 0 1] */
#define T_IN(o, s)                                                                                       \
    (o[0] = 4.0f * s[0] - 5.0f * s[2] + s[4], o[1] = (s[3] + s[4]) - 4.0f * (s[1] + s[2]),               \
     o[2] = (s[4] - s[3]) + 4.0f * (s[1] - s[2]), o[3] = (s[4] - s[2]) + 2.0f * (s[3] - s[1]),           \
     o[4] = (s[4] - s[2]) - 2.0f * (s[3] - s[1]), o[5] = 4.0f * s[1] - 5.0f * s[3] + s[5])
/* G (6 <- 3), rows [1/4 0 0] [-1/6 -1/6 -1/6] [-1/6 1/6 -1/6]
 * [1/24 1/12 1/6] [1/24 -1/12 1/6] [0 0 1] */
#define T_W(o, s)                                                                                        \
    (o[0] = 0.25f * s[0], o[1] = (s[0] + s[1] + s[2]) * (-1.0f / 6), o[2] = (s[0] - s[1] + s[2]) * (-1.0f / 6), \
     o[3] = s[0] * (1.0f / 24) + s[1] * (1.0f / 12) + s[2] * (1.0f / 6),                                  \
     o[4] = s[0] * (1.0f / 24) - s[1] * (1.0f / 12) + s[2] * (1.0f / 6), o[5] = s[2])
/* A^T (4 <- 6), rows [1 1 1 1 1 0] [0 1 -1 2 -2 0] [0 1 1 4 4 0] [0 1 -1 8 -8 1] */
#define T_OUT(o, s)                                                                                      \
    (o[0] = s[0] + (s[1] + s[2]) + (s[3] + s[4]), o[1] = (s[1] - s[2]) + 2.0f * (s[3] - s[4]),           \
     o[2] = (s[1] + s[2]) + 4.0f * (s[3] + s[4]), o[3] = (s[1] - s[2]) + 8.0f * (s[3] - s[4]) + s[5])
/* A (6 <- 4): the transpose of A^T */
#define T_DY(o, s)                                                                                       \
    (o[0] = s[0], o[1] = (s[0] + s[2]) + (s[1] + s[3]), o[2] = (s[0] + s[2]) - (s[1] + s[3]),            \
     o[3] = (s[0] + 4.0f * s[2]) + (2.0f * s[1] + 8.0f * s[3]),                                          \
     o[4] = (s[0] + 4.0f * s[2]) - (2.0f * s[1] + 8.0f * s[3]), o[5] = s[3])
/* G^T (3 <- 6): the transpose of G */
#define T_DW(o, s)                                                                                       \
    (o[0] = 0.25f * s[0] - (s[1] + s[2]) * (1.0f / 6) + (s[3] + s[4]) * (1.0f / 24),                      \
     o[1] = (s[2] - s[1]) * (1.0f / 6) + (s[3] - s[4]) * (1.0f / 12),                                     \
     o[2] = (s[3] + s[4] - s[1] - s[2]) * (1.0f / 6) + s[5])
#else
#error "WINO_M must be 2 or 4"
#endif

/* o (NO x NO) = T s T^T for s (NI x NI) of type VT: T on each column, then on each row */
#define T2D(VT, T, NI, NO, o, s)                                                                         \
    do {                                                                                                 \
        VT c_[NO][NI];                                                                                   \
        for (int j_ = 0; j_ < NI; j_++) {                                                                \
            VT a_[NI], b_[NO];                                                                           \
            for (int i_ = 0; i_ < NI; i_++) a_[i_] = s[i_][j_];                                          \
            T(b_, a_);                                                                                   \
            for (int i_ = 0; i_ < NO; i_++) c_[i_][j_] = b_[i_];                                         \
        }                                                                                                \
        for (int i_ = 0; i_ < NO; i_++) T(o[i_], c_[i_]);                                                \
    } while (0)

/* The transforms move whole channel runs per tile, as im2col does: eight
 * channels at a time (float8; sixteen first under WIDE), then the rest one by one. A work-item per
 * (channel, tile) left PoCL scalar code with strided stores, and the
 * transforms took three times the GEMMs. (LD8, ST8, LD1, ST1: prelude.cl.) */

/* the tile of work-item t: t = (b*TH + th)*TW + tw */
#define TILE_OF(t)                                                                                       \
    const int tw = (t) % TW, r_ = (t) / TW, th = r_ % TH, b = r_ / TH

#if WINO_M == 4
/* F(4x4)'s 6x6 tiles of float8 (36 vectors in, 36 between the passes) do
 * not fit a CPU's registers; spilled, wino_in ran at 3-4 GB/s. So its
 * transforms make two output rows of the column pass at a time, from the
 * input rows they need (reloaded from the cache), and finish each with the
 * row transform: the same arithmetic in the same order as T2D, so the same
 * bits, 1.1-1.7x faster on PoCL (wino_in, wino_out, wino_dy). */
#define RX(VT, LD, i, j) (rok[i] && cok[j] ? LD(px + ((size_t)(i) * W + (j)) * C) : (VT)(0.0f))
#define IN_ROW(ST, r, u) T_IN(v, u); _Pragma("unroll") for (int j = 0; j < WN; j++) ST(v[j], pv + (WN * (r) + j) * TC);
/* the three passes of the column transform, each making two rows that
 * ROW(ST, r, row) turns and stores (wino_in and wino_fused, which store them
 * to different places) */
#define IN_PASSES(VT, LD, ROW, ST) IN_PASSES_BY(RX, VT, LD, ROW, ST)
/* IN_PASSES with each input read by RXM(VT, LD, i, j) */
#define IN_PASSES_BY(RXM, VT, LD, ROW, ST)                                                              \
    _Pragma("unroll") for (int j = 0; j < WN; j++) {                                                     \
        u[j] = 4.0f * RXM(VT, LD, 0, j) - 5.0f * RXM(VT, LD, 2, j) + RXM(VT, LD, 4, j);                     \
        w[j] = 4.0f * RXM(VT, LD, 1, j) - 5.0f * RXM(VT, LD, 3, j) + RXM(VT, LD, 5, j);                     \
    }                                                                                                    \
    ROW(ST, 0, u) ROW(ST, 5, w)                                                                          \
    _Pragma("unroll") for (int j = 0; j < WN; j++) {                                                     \
        const VT d1 = RXM(VT, LD, 1, j), d2 = RXM(VT, LD, 2, j), d3 = RXM(VT, LD, 3, j), d4 = RXM(VT, LD, 4, j); \
        u[j] = (d3 + d4) - 4.0f * (d1 + d2);                                                             \
        w[j] = (d4 - d3) + 4.0f * (d1 - d2);                                                             \
    }                                                                                                    \
    ROW(ST, 1, u) ROW(ST, 2, w)                                                                          \
    _Pragma("unroll") for (int j = 0; j < WN; j++) {                                                     \
        const VT d1 = RXM(VT, LD, 1, j), d2 = RXM(VT, LD, 2, j), d3 = RXM(VT, LD, 3, j), d4 = RXM(VT, LD, 4, j); \
        u[j] = (d4 - d2) + 2.0f * (d3 - d1);                                                             \
        w[j] = (d4 - d2) - 2.0f * (d3 - d1);                                                             \
    }                                                                                                    \
    ROW(ST, 3, u) ROW(ST, 4, w)
/* The same transform reading each input once (IN_PASSES' three column
 * passes reload rows 1-4: 84 bounds-tested loads a channel run, not 36): the
 * column pass a column at a time into t_, its loads tested by column, then
 * by row, then the rows turned by ROW(ST, r, t_[r]). The same operations in
 * the same order. The fused kernels (CPUs) use it; wino_in keeps the passes
 * (a GPU's 36 float8 would spill, and on the AMD EPYC its float16 pass was no
 * faster with it). */
#define IN_ONCE(VT, LD, ROW, ST) IN_ONCE_BY(RX, VT, LD, ROW, ST)
/* IN_ONCE with each input read by RXM(VT, LD, i, j) */
#define IN_ONCE_BY(RXM, VT, LD, ROW, ST)                                                                 \
    VT t_[WN][WN];                                                                                       \
    _Pragma("unroll") for (int j = 0; j < WN; j++) {                                                     \
        VT d0 = (VT)(0.0f), d1 = d0, d2 = d0, d3 = d0, d4 = d0, d5 = d0;                                 \
        if (cok[j]) {                                                                                    \
            d0 = RXM(VT, LD, 0, j); d1 = RXM(VT, LD, 1, j); d2 = RXM(VT, LD, 2, j);                      \
            d3 = RXM(VT, LD, 3, j); d4 = RXM(VT, LD, 4, j); d5 = RXM(VT, LD, 5, j);                      \
        }                                                                                                \
        t_[0][j] = 4.0f * d0 - 5.0f * d2 + d4;                                                           \
        t_[5][j] = 4.0f * d1 - 5.0f * d3 + d5;                                                           \
        t_[1][j] = (d3 + d4) - 4.0f * (d1 + d2);                                                         \
        t_[2][j] = (d4 - d3) + 4.0f * (d1 - d2);                                                         \
        t_[3][j] = (d4 - d2) + 2.0f * (d3 - d1);                                                         \
        t_[4][j] = (d4 - d2) - 2.0f * (d3 - d1);                                                         \
    }                                                                                                    \
    _Pragma("unroll") for (int r = 0; r < WN; r++) { ROW(ST, r, t_[r]) }
/* norm = 1 (x is the input of a [batchnorm] that wrote no output: ct_layer.normed; C a multiple of 16):
 * each input as that batch norm's bn_fwd (bn.cl) would have written it, act(gamma (x - mean) invstd +
 * beta), with mean and invstd at nstats[c] and nstats[C + c], gamma and beta at nparams[ngoff + c] and
 * nparams[nboff + c]; the padding stays zero. The same operations as bn_fwd, not contracted: the
 * values are bn_fwd's to the bit. The batch norm's pass over its output goes (resnet20's six 16- and
 * 32-channel inner batch norms: its step 1.015x, 11 of 16 interleaved pairs of bench train). */
#pragma OPENCL FP_CONTRACT OFF
static inline float16 bn_norm16(const float16 v, const float16 g, const float16 mu, const float16 is, const float16 bt,
                                const int act) {
    const float16 z = g * (v - mu) * is + bt;
    return CT_ACT(float16, z, act);
}
#pragma OPENCL FP_CONTRACT ON
/* channels c..c+15's gamma, mean, invstd and beta for RXN */
#define NORM_VECS                                                                                        \
    const float16 ng = vload16(0, nparams + ngoff + c), nm = vload16(0, nstats + c);                     \
    const float16 ns = vload16(0, nstats + C + c), nb = vload16(0, nparams + nboff + c);
#define RXN(VT, LD, i, j) (rok[i] && cok[j] ? bn_norm16(LD(px + ((size_t)(i) * W + (j)) * C), ng, nm, ns, nb, nact) : (VT)(0.0f))
/* wino_in with norm (a batch norm's input, normalised as it loads: see bn_norm16), 16 channels at a time */
#define WINO_IN_NORM                                                                                     \
    for (; c + 16 <= C; c += 16) {                                                                       \
        __global const float *px = x + (((size_t)b * H + y0) * W + x0) * C + c;                          \
        __global float *pv = V + o + c;                                                                  \
        NORM_VECS                                                                                        \
        float16 u[WN], w[WN], v[WN];                                                                     \
        IN_PASSES_BY(RXN, float16, LD16, IN_ROW, ST16)                                                   \
    }
#define WINO_IN(VT, LD, ST, VW)                                                                          \
    for (; c + VW <= C; c += VW) {                                                                       \
        __global const float *px = x + (((size_t)b * H + y0) * W + x0) * C + c;                          \
        __global float *pv = V + o + c;                                                                  \
        VT u[WN], w[WN], v[WN];                                                                          \
        IN_PASSES(VT, LD, IN_ROW, ST)                                                                    \
    }
#else
#define WINO_IN(VT, LD, ST, VW)                                                                          \
    for (; c + VW <= C; c += VW) {                                                                       \
        VT d[WN][WN], v[WN][WN];                                                                         \
        for (int i = 0; i < WN; i++)                                                                     \
            for (int j = 0; j < WN; j++) {                                                               \
                const int y = y0 + i, xx = x0 + j;                                                       \
                d[i][j] = y >= 0 && y < H && xx >= 0 && xx < W ? LD(x + (((size_t)b * H + y) * W + xx) * C + c) \
                                                                : (VT)(0.0f);                            \
            }                                                                                            \
        T2D(VT, T_IN, WN, WN, v, d);                                                                     \
        for (int i = 0; i < WN; i++)                                                                     \
            for (int j = 0; j < WN; j++) ST(v[i][j], V + (WN * i + j) * TC + o + c);                     \
    }
#endif

/* gws = (T): V = B^T d B for one tile, every channel */
__kernel void wino_in(__global float *V, __global const float *x, const int H, const int W, const int C,
                      const int pad, const int TH, const int TW, const int T, const int norm,
                      __global const float *nstats, __global const float *nparams, const int ngoff, const int nboff,
                      const int nact) {
    const int t = (int)get_global_id(0);
    if (t >= T) return;
    TILE_OF(t);
    const int y0 = WINO_M * th - pad, x0 = WINO_M * tw - pad;
    const size_t TC = (size_t)T * C, o = (size_t)t * C;
#if WINO_M == 4
    bool rok[WN], cok[WN];
    for (int i = 0; i < WN; i++) {
        rok[i] = y0 + i >= 0 && y0 + i < H;
        cok[i] = x0 + i >= 0 && x0 + i < W;
    }
#endif
    int c = 0;
#if WINO_M == 4
    if (norm) {
        WINO_IN_NORM
        return;
    }
#endif
    WIDE(WINO_IN)
    WINO_IN(float8, LD8, ST8, 8)
    WINO_IN(float, LD1, ST1, 1)
}

/* gws = (K, C): U = G g G^T of the weights w[woff + ((a*3 + b)*C + c)*K + k]
 * (HWIO), rows ldu floats apart. flip = 1, gws = (C, K): g turned 180 degrees and U written
 * [n*n][K][ldu], the weights of the data gradient; the index that runs fastest
 * is the one U is written along (36 stores against 9 loads per work-item).
 * packed: U as wino_fused reads it, [n*n][ceil(kout/16)][cin][16] (kout the index
 * written along: k, or c when flipped), the lanes past kout zeros; gws's first
 * dimension then runs to kout rounded up to 16 (ldu unused). */
__kernel void wino_w(__global float *U, __global const float *w, const int woff, const int C, const int K,
                     const int flip, const int ldu, const int packed) {
    const int i0 = (int)get_global_id(0), i1 = (int)get_global_id(1);
    const int k = flip ? i1 : i0, c = flip ? i0 : i1;
    const int kout = flip ? C : K, cin = flip ? K : C, ko = i0, ci = i1, kp = (kout + 15) / 16 * 16;
    if (ci >= cin || ko >= (packed ? kp : kout)) return;
    float g[3][3], u[WN][WN];
    for (int a = 0; a < 3; a++)
        for (int b = 0; b < 3; b++) {
            const int ka = flip ? 2 - a : a, kb = flip ? 2 - b : b;
            g[a][b] = ko < kout ? w[woff + ((size_t)(ka * 3 + kb) * C + c) * K + k] : 0.0f; /* G 0 G^T = 0 */
        }
    T2D(float, T_W, 3, WN, u, g);
    const size_t CK = (size_t)cin * (packed ? kp : ldu);
    const size_t o = packed ? ((size_t)(ko / 16) * cin + ci) * 16 + ko % 16 : (size_t)ci * ldu + ko;
    for (int i = 0; i < WN; i++)
        for (int j = 0; j < WN; j++) U[(WN * i + j) * CK + o] = u[i][j];
}

/* wino_w with 16 of U's contiguous index per work-item (a CPU): k when not
 * flipped (gws = (K / 16, C)), c when flipped (gws = (C / 16, K), the
 * weights gathered); packed: U as wino_fused reads it ([n*n][K/16][C][16],
 * flipped [n*n][C/16][K][16]; ldu unused). One output per work-item left PoCL scalar code over
 * private arrays: 0.6 ms for 64x64 weights, 2.1 ms for 128x128. */
__kernel void wino_w16(__global float *U, __global const float *w, const int woff, const int C, const int K,
                       const int flip, const int packed, const int ldu) {
    const int i0 = (int)get_global_id(0) * 16, i1 = (int)get_global_id(1);
    float16 g[3][3], u[WN][WN];
    _Pragma("unroll") for (int a = 0; a < 3; a++) _Pragma("unroll") for (int b = 0; b < 3; b++) {
        if (!flip) {
            g[a][b] = vload16(0, w + woff + ((size_t)(a * 3 + b) * C + i1) * K + i0);
        } else {
            float t[16];
            for (int l = 0; l < 16; l++) t[l] = w[woff + ((size_t)((2 - a) * 3 + 2 - b) * C + i0 + l) * K + i1];
            g[a][b] = vload16(0, t);
        }
    }
    T2D(float16, T_W, 3, WN, u, g);
    const size_t CK = packed ? (size_t)C * K : (size_t)(flip ? K : C) * ldu;
    const size_t o = packed ? ((size_t)(i0 / 16) * (flip ? K : C) + i1) * 16 : (size_t)i1 * ldu + i0;
    _Pragma("unroll") for (int i = 0; i < WN; i++) _Pragma("unroll") for (int j = 0; j < WN; j++)
        vstore16(u[i][j], 0, U + (WN * i + j) * CK + o);
}

/* one output row r of the tile, e (m values) plus the bias, ReLU if act */
#define OUT_ROW(VT, ST, r, e)                                                                            \
    if (WINO_M * th + (r) < OH) {                                                                        \
        __global float *row = y + (((size_t)b * OH + WINO_M * th + (r)) * OW + WINO_M * tw) * K + k;     \
        for (int j = 0; j < WINO_M && WINO_M * tw + j < OW; j++) {                                       \
            const VT v_ = e[j] + bk;                                                                     \
            ST(CT_ACT(VT, v_, act), row + j * K);                                                         \
        }                                                                                                \
    }
#if WINO_M == 4
#define MX(LD, i, j) LD(M + (WN * (i) + (j)) * TK + o + k)
/* A^T M A two output rows at a time from X(XA, i, j), the point (i, j) of M,
 * each row stored by OUT_ROW with ST (wino_out and wino_fused, which read M
 * from different places) */
#define OUT_PASSES_R(VT, X, XA, ROW, ST)                                                                 \
    VT u[WN], w[WN], e[WINO_M];                                                                          \
    _Pragma("unroll") for (int j = 0; j < WN; j++) {                                                     \
        const VT p = X(XA, 1, j) + X(XA, 2, j), q = X(XA, 3, j) + X(XA, 4, j);                           \
        u[j] = X(XA, 0, j) + p + q;                                                                      \
        w[j] = p + 4.0f * q;                                                                             \
    }                                                                                                    \
    T_OUT(e, u); ROW(VT, ST, 0, e)                                                                       \
    T_OUT(e, w); ROW(VT, ST, 2, e)                                                                       \
    _Pragma("unroll") for (int j = 0; j < WN; j++) {                                                     \
        const VT p = X(XA, 1, j) - X(XA, 2, j), q = X(XA, 3, j) - X(XA, 4, j);                           \
        u[j] = p + 2.0f * q;                                                                             \
        w[j] = p + 8.0f * q + X(XA, 5, j);                                                               \
    }                                                                                                    \
    T_OUT(e, u); ROW(VT, ST, 1, e)                                                                       \
    T_OUT(e, w); ROW(VT, ST, 3, e)
#define OUT_PASSES(VT, X, XA, ST) OUT_PASSES_R(VT, X, XA, OUT_ROW, ST)
/* The same reading each point of M once: the column pass for all four rows (24 vectors, which a
 * CPU's 32 registers hold), then the rows turned and stored in order; the same operations, so the
 * same bits. wino_fused's outputs: resnet20's step 1.015x and 1.028x (9 of 12 pairs each). Its
 * pooled outputs keep the passes (their 16 maxima beside these would spill); so does dY's
 * transform, where reading once gained nothing (0.999x) */
#define OUT_ONCE_R(VT, X, XA, ROW, ST)                                                                   \
    VT t_[WINO_M][WN], e[WINO_M];                                                                        \
    _Pragma("unroll") for (int j = 0; j < WN; j++) {                                                     \
        const VT x1 = X(XA, 1, j), x2 = X(XA, 2, j), x3 = X(XA, 3, j), x4 = X(XA, 4, j);                 \
        const VT p = x1 + x2, q = x3 + x4, pm = x1 - x2, qm = x3 - x4;                                   \
        t_[0][j] = X(XA, 0, j) + p + q;                                                                  \
        t_[2][j] = p + 4.0f * q;                                                                         \
        t_[1][j] = pm + 2.0f * qm;                                                                       \
        t_[3][j] = pm + 8.0f * qm + X(XA, 5, j);                                                         \
    }                                                                                                    \
    _Pragma("unroll") for (int r = 0; r < WINO_M; r++) { T_OUT(e, t_[r]); ROW(VT, ST, r, e) }
#define WINO_OUT(VT, LD, ST, VW)                                                                         \
    for (; k + VW <= K; k += VW) {                                                                       \
        const VT bk = has_bias ? LD(bias + boff + k) : (VT)(0.0f);                                       \
        OUT_PASSES(VT, MX, LD, ST)                                                                       \
    }
#else
#define WINO_OUT(VT, LD, ST, VW)                                                                         \
    for (; k + VW <= K; k += VW) {                                                                       \
        VT m[WN][WN], e[WINO_M][WINO_M];                                                                 \
        for (int i = 0; i < WN * WN; i++) m[i / WN][i % WN] = LD(M + i * TK + o + k);                    \
        T2D(VT, T_OUT, WN, WINO_M, e, m);                                                                \
        const VT bk = has_bias ? LD(bias + boff + k) : (VT)(0.0f);                                       \
        for (int i = 0; i < WINO_M; i++) OUT_ROW(VT, ST, i, e[i])                                        \
    }
#endif

/* gws = (T): Y = A^T M A, plus bias[boff + k] when has_bias, then ReLU if
 * act, into y[b, m*th + r, m*tw + s, k] for the positions inside OH x OW
 * (overwrites). */
__kernel void wino_out(__global float *y, __global const float *M, __global const float *bias, const int boff,
                       const int has_bias, const int act, const int OH, const int OW, const int K, const int TH,
                       const int TW, const int T) {
    const int t = (int)get_global_id(0);
    if (t >= T) return;
    TILE_OF(t);
    const size_t TK = (size_t)T * K, o = (size_t)t * K;
    int k = 0;
    WIDE(WINO_OUT)
    WINO_OUT(float8, LD8, ST8, 8)
    WINO_OUT(float, LD1, ST1, 1)
}

#if WINO_M == 4
#define GX(VT, LD, i, j)                                                                                 \
    (WINO_M * th + (i) < OH && WINO_M * tw + (j) < OW ? LD(pg + ((size_t)(i) * OW + (j)) * K) : (VT)(0.0f))
#define DY_ROW(ST, r, u) T_DY(z, u); _Pragma("unroll") for (int j = 0; j < WN; j++) ST(z[j], pz + (WN * (r) + j) * TK);
/* the three passes of A dY A^T's column transform, each making two rows that
 * ROW(ST, r, row) turns and stores (wino_dy and wino_dw_fused) */
#define DY_PASSES(VT, LD, ROW, ST)                                                                       \
    _Pragma("unroll") for (int j = 0; j < WINO_M; j++) {                                                 \
        u[j] = GX(VT, LD, 0, j);                                                                         \
        w[j] = GX(VT, LD, 3, j);                                                                         \
    }                                                                                                    \
    ROW(ST, 0, u) ROW(ST, 5, w)                                                                          \
    _Pragma("unroll") for (int j = 0; j < WINO_M; j++) {                                                 \
        const VT p = GX(VT, LD, 0, j) + GX(VT, LD, 2, j), q = GX(VT, LD, 1, j) + GX(VT, LD, 3, j);       \
        u[j] = p + q;                                                                                    \
        w[j] = p - q;                                                                                    \
    }                                                                                                    \
    ROW(ST, 1, u) ROW(ST, 2, w)                                                                          \
    _Pragma("unroll") for (int j = 0; j < WINO_M; j++) {                                                 \
        const VT p = GX(VT, LD, 0, j) + 4.0f * GX(VT, LD, 2, j);                                         \
        const VT q = 2.0f * GX(VT, LD, 1, j) + 8.0f * GX(VT, LD, 3, j);                                  \
        u[j] = p + q;                                                                                    \
        w[j] = p - q;                                                                                    \
    }                                                                                                    \
    ROW(ST, 3, u) ROW(ST, 4, w)
#define WINO_DY(VT, LD, ST, VW)                                                                          \
    for (; k + VW <= K; k += VW) {                                                                       \
        __global const float *pg = dy + (((size_t)b * OH + WINO_M * th) * OW + WINO_M * tw) * K + k;     \
        __global float *pz = Z + o + k;                                                                  \
        VT u[WINO_M], w[WINO_M], z[WN];                                                                  \
        DY_PASSES(VT, LD, DY_ROW, ST)                                                                    \
    }
#else
#define WINO_DY(VT, LD, ST, VW)                                                                          \
    for (; k + VW <= K; k += VW) {                                                                       \
        VT g[WINO_M][WINO_M], z[WN][WN];                                                                 \
        for (int i = 0; i < WINO_M; i++)                                                                 \
            for (int j = 0; j < WINO_M; j++) {                                                           \
                const int oy = WINO_M * th + i, ox = WINO_M * tw + j;                                    \
                g[i][j] = oy < OH && ox < OW ? LD(dy + (((size_t)b * OH + oy) * OW + ox) * K + k) : (VT)(0.0f); \
            }                                                                                            \
        T2D(VT, T_DY, WINO_M, WN, z, g);                                                                 \
        for (int i = 0; i < WN; i++)                                                                     \
            for (int j = 0; j < WN; j++) ST(z[i][j], Z + (WN * i + j) * TK + o + k);                     \
    }
#endif

/* the sum of 16 channels of dy over the ni x nj positions of a tile that
 * lie inside the output, pg pointing at its first (row stride OW*K) */
inline float16 tile_sum16(__global const float *pg, const int ni, const int nj, const int OW, const int K) {
    float16 s = (float16)(0.0f);
    for (int i = 0; i < ni; i++)
        for (int j = 0; j < nj; j++) s += vload16(0, pg + ((size_t)i * OW + j) * K);
    return s;
}

/* gws = (T): Z = A dY A^T of one output tile of dy (positions past OH x OW
 * are 0), and bsum[bsoff + t*K + k], the tile's sum of dy (the bias gradient's share
 * of the tile, read from the cache: the bias gradient then sums T rows, not
 * 16 times as many) */
__kernel void wino_dy(__global float *Z, __global float *bsum, const int bsoff, __global const float *dy, const int OH,
                      const int OW, const int K, const int TH, const int TW, const int T) {
    const int t = (int)get_global_id(0);
    if (t >= T) return;
    bsum += bsoff;
    TILE_OF(t);
    const size_t TK = (size_t)T * K, o = (size_t)t * K;
    int k = 0;
    WIDE(WINO_DY)
    WINO_DY(float8, LD8, ST8, 8)
    WINO_DY(float, LD1, ST1, 1)
    const int ni = min(WINO_M, OH - WINO_M * th), nj = min(WINO_M, OW - WINO_M * tw);
    __global const float *pg = dy + (((size_t)b * OH + WINO_M * th) * OW + WINO_M * tw) * K;
    for (k = 0; k + 16 <= K; k += 16) vstore16(tile_sum16(pg + k, ni, nj, OW, K), 0, bsum + o + k);
    for (; k < K; k++) {
        float s = 0.0f;
        for (int i = 0; i < ni; i++)
            for (int j = 0; j < nj; j++) s += pg[((size_t)i * OW + j) * K + k];
        bsum[o + k] = s;
    }
}

#if WINO_M == 4
/* The backward of a conv whose output a 2x2 stride-2 [maxpool] alone reads (ct_layer.pool_next), from
 * the pool's gradient dyp (POH x POW x K) and its maxima's window positions arg, without the pool's
 * backward writing dy at full size: dy at (y, x) is dyp of the window holding it where arg names
 * (y, x), else 0 (and 0 past the last whole window), summed onto 0 as maxpool_bwd (pool.cl) does, so
 * the same bits. 16 channels at a time (K a multiple of 16). */
inline float16 pooled_dy16(__global const float *dyp, __global const ushort *arg, const int b, const int y,
                           const int x, const int POH, const int POW, const int K, const int k) {
    const int wy = y >> 1, wx = x >> 1;
    if (wy >= POH || wx >= POW) return (float16)(0.0f);
    const size_t po = (((size_t)b * POH + wy) * POW + wx) * K + k;
    const int16 a = convert_int16(*(__global const ushort16 *)(arg + po)); /* aligned: po is a multiple of 16 */
    return (float16)(0.0f) + select((float16)(0.0f), vload16(0, dyp + po), a == (int16)((y & 1) * 2 + (x & 1)));
}

/* the WN x WN tile at (y0, x0) of dy (H x W, zeros outside), 16 channels from c, from the pool's gradient */
inline void pooled_tile16(float16 d[WN][WN], __global const float *dyp, __global const ushort *arg, const int b,
                          const int y0, const int x0, const int H, const int W, const int POH, const int POW,
                          const int C, const int c) {
    _Pragma("unroll") for (int i = 0; i < WN; i++) _Pragma("unroll") for (int j = 0; j < WN; j++) {
        const int in = y0 + i >= 0 && y0 + i < H && x0 + j >= 0 && x0 + j < W;
        d[i][j] = in ? pooled_dy16(dyp, arg, b, y0 + i, x0 + j, POH, POW, C, c) : (float16)(0.0f);
    }
}

/* pool: a row of the tile into ev (plus the bias; act is linear) instead of y */
#define KEEP_ROW(VT, ST, r, e) _Pragma("unroll") for (int j = 0; j < WINO_M; j++) ev[r][j] = e[j] + bk;
/* pool: the 2x2 window (2*pr, 2*pc) of the tile, its maximum into yp and its position into parg
 * exactly as maxpool_fwd (pool.cl) finds them: the first maximum in (ky, kx) order */
#define POOL_WINDOW(pr, pc)                                                                              \
    if (2 * th + (pr) < POH && 2 * tw + (pc) < POW) {                                                    \
        float16 mx = ev[2 * (pr)][2 * (pc)];                                                             \
        int16 a = (int16)(0);                                                                            \
        _Pragma("unroll") for (int q = 1; q < 4; q++) {                                                  \
            const float16 v = ev[2 * (pr) + q / 2][2 * (pc) + q % 2];                                    \
            const int16 gt = v > mx;                                                                     \
            mx = select(mx, v, gt);                                                                      \
            a = select(a, (int16)(q), gt);                                                               \
        }                                                                                                \
        const size_t po = (((size_t)b * POH + 2 * th + (pr)) * POW + 2 * tw + (pc)) * K + k;             \
        *(__global float16 *)(yp + po) = mx;                                                             \
        *(__global ushort16 *)(parg + po) = convert_ushort16(a);                                         \
    }
/* wino_out into the 2x2 stride-2 maxpool after it (pool_next; act linear, K a multiple of 16): the
 * tile's outputs pooled in registers into yp (POH x POW x K) and the positions into parg, as
 * wino_fused's pool does; y is not written. gws = (T) */
__kernel void wino_out_pool(__global float *yp, __global ushort *parg, __global const float *M,
                            __global const float *bias, const int boff, const int has_bias, const int OH, const int OW,
                            const int K, const int TH, const int TW, const int T, const int POH, const int POW) {
    const int t = (int)get_global_id(0);
    if (t >= T) return;
    TILE_OF(t);
    const size_t TK = (size_t)T * K, o = (size_t)t * K;
    for (int k = 0; k < K; k += 16) {
        const float16 bk = has_bias ? vload16(0, bias + boff + k) : (float16)(0.0f);
        float16 ev[WINO_M][WINO_M];
        OUT_PASSES_R(float16, MX, LD16, KEEP_ROW, _)
        POOL_WINDOW(0, 0) POOL_WINDOW(0, 1) POOL_WINDOW(1, 0) POOL_WINDOW(1, 1)
    }
}

/* wino_dy from the pool's gradient: Z and the tile sums of dy as wino_dy makes them. gws = (T) */
#undef GX
#define GX(VT, LD, i, j) gt[i][j]
__kernel void wino_dy_pool(__global float *Z, __global float *bsum, const int bsoff, __global const float *dyp,
                           __global const ushort *arg, const int OH, const int OW, const int K, const int TH,
                           const int TW, const int T, const int POH, const int POW) {
    const int t = (int)get_global_id(0);
    if (t >= T) return;
    bsum += bsoff;
    TILE_OF(t);
    const size_t TK = (size_t)T * K, o = (size_t)t * K;
    const int ni = min(WINO_M, OH - WINO_M * th), nj = min(WINO_M, OW - WINO_M * tw);
    for (int k = 0; k < K; k += 16) {
        float16 gt[WINO_M][WINO_M];
        _Pragma("unroll") for (int i = 0; i < WINO_M; i++) _Pragma("unroll") for (int j = 0; j < WINO_M; j++)
            gt[i][j] = pooled_dy16(dyp, arg, b, WINO_M * th + i, WINO_M * tw + j, POH, POW, K, k);
        __global float *pz = Z + o + k;
        float16 u[WINO_M], w[WINO_M], z[WN];
        DY_PASSES(float16, _, DY_ROW, ST16)
        float16 sum = (float16)(0.0f); /* tile_sum16's order */
        for (int i = 0; i < ni; i++)
            for (int j = 0; j < nj; j++) sum += gt[i][j];
        vstore16(sum, 0, bsum + o + k);
    }
}
#undef GX
#define GX(VT, LD, i, j)                                                                                 \
    (WINO_M * th + (i) < OH && WINO_M * tw + (j) < OW ? LD(pg + ((size_t)(i) * OW + (j)) * K) : (VT)(0.0f))

/* wino_in of the data gradient from the pool's gradient: V of dy's tiles (dy H x W x C, pad pad) as
 * wino_in makes them. gws = (T) */
#undef RX
#define RX(VT, LD, i, j) d[i][j]
__kernel void wino_in_pool(__global float *V, __global const float *dyp, __global const ushort *arg, const int H,
                           const int W, const int C, const int pad, const int TH, const int TW, const int T,
                           const int POH, const int POW) {
    const int t = (int)get_global_id(0);
    if (t >= T) return;
    TILE_OF(t);
    const int y0 = WINO_M * th - pad, x0 = WINO_M * tw - pad;
    const size_t TC = (size_t)T * C, o = (size_t)t * C;
    for (int c = 0; c < C; c += 16) {
        float16 d[WN][WN];
        pooled_tile16(d, dyp, arg, b, y0, x0, H, W, POH, POW, C, c);
        __global float *pv = V + o + c;
        float16 u[WN], w[WN], v[WN];
        IN_PASSES(float16, _, IN_ROW, ST16)
    }
}
#undef RX
#define RX(VT, LD, i, j) (rok[i] && cok[j] ? LD(px + ((size_t)(i) * W + (j)) * C) : (VT)(0.0f))
#endif

/* grads[woff + ((a*3 + b)*C + c)*K + k] += (G^T dU G)[a][b], dU the sum of S
 * partials [S][n*n][C][K] (wino_dw_fused's; 1: the GEMMs'). wino_dw: one k
 * per work-item, gws = (K, C); wino_dw16: 16 per work-item (a CPU, K a
 * multiple of 16), gws = (K / 16, C) */
#define WINO_DW(NAME, VT, LD, ST, VW)                                                                      \
    __kernel void NAME(__global float *grads, const int woff, __global const float *dU, const int C,      \
                       const int K, const int S) {                                                         \
        const int k = (int)get_global_id(0) * VW, c = (int)get_global_id(1);                              \
        if (k >= K || c >= C) return;                                                                      \
        const size_t CK = (size_t)C * K, o = (size_t)c * K + k;                                            \
        VT u[WN][WN], d[3][3];                                                                             \
        _Pragma("unroll") for (int i = 0; i < WN * WN; i++) {                                              \
            VT v = (VT)(0.0f);                                                                             \
            for (int p = 0; p < S; p++) v += LD(dU + ((size_t)p * WN * WN + i) * CK + o);                 \
            u[i / WN][i % WN] = v;                                                                         \
        }                                                                                                  \
        T2D(VT, T_DW, WN, 3, d, u);                                                                        \
        _Pragma("unroll") for (int a = 0; a < 3; a++) _Pragma("unroll") for (int b = 0; b < 3; b++) {      \
            __global float *g = grads + woff + ((size_t)(a * 3 + b) * C + c) * K + k;                      \
            ST(LD(g) + d[a][b], g);                                                                        \
        }                                                                                                  \
    }
WINO_DW(wino_dw, float, LD1, ST1, 1)
WINO_DW(wino_dw16, float16, LD16, ST16, 16)

#if WINO_M == 4 && defined(WINO_FUSED)
/* The whole F(4x4, 3x3) convolution of FT tiles in one work-item, for a CPU:
 * V = B^T d B of every input channel into private memory; then for each 16*FNV
 * output channels the 36 products M[xi] (FT tiles x 16*FNV) = V[xi] U[xi]
 * as a register-tiled GEMM (FT broadcasts and FNV vector loads per FT*FNV
 * multiply-adds) into private memory, and Y = A^T M A (+ bias, ReLU if act)
 * from there. Nothing goes through global memory but x, U (from the cache)
 * and y: the separate kernels write V and M (2.25x the activations each) and
 * read them back, and on a CPU that traffic, not the multiplies, set their
 * speed. (Writing V out as well, for the weight gradient, cost more here
 * than wino_in recomputing it there: 36 store streams beside the private
 * tiles, 4.5 ms for mnist-cnn's 21 MB.) C <= WINO_FUSED_C, K a multiple of
 * 8 (U padded to 16s; the last vector of outputs stored in part: cifar-fast's
 * first data gradient, 64 -> 24); the same as wino_in + the GEMMs + wino_out in
 * another rounding order.
 * Built for CPUs only (-DWINO_FUSED, src/nn/layers/conv.c): a GPU would hold the
 * tiles' V, up to 72 KiB per work-item, in slow memory.
 * Work-item (g, j) takes tiles [g*FT, g*FT + FT) and outputs [j*KB, j*KB + KB):
 * its block of U (36 x C x KB floats) stays in the core's L2 while the
 * work-items of that block, consecutive in dimension 0, take every tile.
 * With one block for all K, each work-item streamed all of U (2.4 MB at
 * 64 -> 256) for its 8 tiles. U is packed, [36][K/16][C][16] (wino_w16): in
 * [36][C][K] rows 1 KB apart the rows of a point shared four L1 sets.
 * gws = (ceil(T / FT), ceil(K / KB)). */
#ifndef WINO_FUSED_C
#define WINO_FUSED_C 64
#endif
#ifndef FT
#define FT 8
#endif
#ifndef FNV
#define FNV 1
#endif
/* 16 floats at p into a private tile: one aligned store when C is a multiple
 * of 16 (the tiles are 64-byte aligned; vstore16 was split into three) */
#define PST16(val, p) ((C & 15) == 0 ? (void)(*(float16 *)(p) = (val)) : vstore16((val), 0, (p)))
#define PST8(val, p) vstore8((val), 0, (p))
#define PST1(val, p) (*(p) = (val))
/* the input transform of one tile as wino_in's F(4x4) does it (two rows of
 * the column pass at a time, the same operations), into vf */
#define FIN_ROW(VST, r, uu)                                                                              \
    T_IN(vv, uu);                                                                                        \
    _Pragma("unroll") for (int j = 0; j < WN; j++) VST(vv[j], vf + (WN * (r) + j) * C + c);
/* tile t's channels c.. in runs of VW into vf, each input read once (IN_ONCE) */
#define FUSED_IN(VT, LD, VST, VW)                                                                        \
    for (; c + VW <= C; c += VW) {                                                                       \
        __global const float *px = x + (((size_t)b * H + y0) * W + x0) * C + c;                          \
        VT vv[WN];                                                                                       \
        IN_ONCE(VT, LD, FIN_ROW, VST)                                                                    \
    }
#define FUSED_IN_NORM                                                                                    \
    for (; c + 16 <= C; c += 16) {                                                                       \
        __global const float *px = x + (((size_t)b * H + y0) * W + x0) * C + c;                          \
        NORM_VECS                                                                                        \
        float16 vv[WN];                                                                                  \
        IN_ONCE_BY(RXN, float16, LD16, FIN_ROW, PST16)                                                   \
    }
/* tile t's V for every input channel into vf (16, 8 and 1 at a time; normalised as they load with
 * norm); declares the tile's b, th, tw */
#define TILE_INTO_VF(t)                                                                                  \
    TILE_OF(t);                                                                                          \
    const int y0 = WINO_M * th - pad, x0 = WINO_M * tw - pad;                                            \
    bool rok[WN], cok[WN];                                                                               \
    for (int i = 0; i < WN; i++) {                                                                       \
        rok[i] = y0 + i >= 0 && y0 + i < H;                                                              \
        cok[i] = x0 + i >= 0 && x0 + i < W;                                                              \
    }                                                                                                    \
    int c = 0;                                                                                           \
    if (norm) {                                                                                          \
        FUSED_IN_NORM                                                                                    \
    } else {                                                                                             \
        FUSED_IN(float16, LD16, PST16, 16)                                                               \
        FUSED_IN(float8, LD8, PST8, 8)                                                                   \
        FUSED_IN(float, LD1, PST1, 1)                                                                    \
    }
/* y's rows are 64-byte aligned when K is a multiple of 16: one store, not vstore16's three;
 * else the outputs k.. of the row, as many of 16 as there are (load16_edge and store16_edge:
 * prelude.cl) */
#define GST16(val, p) ((K & 15) == 0 ? (void)(*(__global float16 *)(p) = (val)) : store16_edge((val), (p), K - k))
#define MP(unused, i, j) mp[WN * (i) + (j)][f][nv]
/* pool = 1 (a 2x2 stride-2 [maxpool] after this conv, K a multiple of 16, act linear: ct_layer.pool_next):
 * the tile's 4x4 outputs are pooled in registers into yp (POH x POW x K) and the maxima's window
 * positions into parg, as maxpool_fwd would from y, and y is not written. The windows of a tile
 * lie inside it (4x4 tiles at multiples of 4), so no window needs two work-items.
 * pool_in = 1 (the data gradient of a conv before such a pool, ct_layer.dy_pooled; C a multiple of
 * 16): x (H x W x C) is not read; its tiles are made from the pool's gradient xp (XPH x XPW x C)
 * and positions xarg as wino_in_pool makes them. */
__kernel void wino_fused(__global float *y, __global const float *x, __global const float *U,
                         __global const float *bias, const int boff, const int has_bias, const int act, const int H,
                         const int W, const int C, const int pad, const int OH, const int OW, const int K,
                         const int TH, const int TW, const int T, const int KB, const int pool,
                         __global float *yp, __global ushort *parg, const int POH, const int POW, const int pool_in,
                         __global const float *xp, __global const ushort *xarg, const int XPH, const int XPW,
                         const int norm, __global const float *nstats, __global const float *nparams, const int ngoff,
                         const int nboff, const int nact) {
    const int t0 = (int)get_global_id(0) * FT, k_lo = (int)get_global_id(1) * KB, k_hi = min(K, k_lo + KB);
    if (t0 >= T || k_lo >= K) return;
    const int nt = min(FT, T - t0);
    float v[FT][WN * WN * WINO_FUSED_C] __attribute__((aligned(64)));
    for (int f = 0; f < FT; f++) {
        float *vf = v[f];
        if (f >= nt) {
            for (int i = 0; i < WN * WN * C; i++) vf[i] = 0.0f;
            continue;
        }
        if (pool_in) { /* x is the gradient of a 2x2 maxpool's input: read from its gradient and positions */
            TILE_OF(t0 + f);
            for (int c = 0; c < C; c += 16) {
                float16 d[WN][WN];
                pooled_tile16(d, xp, xarg, b, WINO_M * th - pad, WINO_M * tw - pad, H, W, XPH, XPW, C, c);
                float16 u[WN], w[WN], vv[WN];
#undef RX
#define RX(VT, LD, i, j) d[i][j]
                IN_PASSES(float16, _, FIN_ROW, PST16)
#undef RX
#define RX(VT, LD, i, j) (rok[i] && cok[j] ? LD(px + ((size_t)(i) * W + (j)) * C) : (VT)(0.0f))
            }
            continue;
        }
        TILE_INTO_VF(t0 + f);
    }
    const int Kp = (K + 15) / 16 * 16; /* U's outputs, padded with zeros to 16s (wino_w, wino_w16) */
    for (int kb = k_lo; kb < k_hi; kb += 16 * FNV) {
        const int nvs = min(FNV, (k_hi - kb + 15) / 16);
        float16 mp[WN * WN][FT][FNV];
        for (int xi = 0; xi < WN * WN; xi++) {
            float16 acc[FT][FNV];
            _Pragma("unroll") for (int f = 0; f < FT; f++)
                _Pragma("unroll") for (int nv = 0; nv < FNV; nv++) acc[f][nv] = (float16)(0.0f);
            __global const float *u = U + (size_t)xi * C * Kp + (size_t)kb * C;
            for (int c = 0; c < C; c++) {
                float16 uv[FNV];
                _Pragma("unroll") for (int nv = 0; nv < FNV; nv++)
                    uv[nv] = nv < nvs ? vload16(0, u + ((size_t)nv * C + c) * 16) : (float16)(0.0f);
                _Pragma("unroll") for (int f = 0; f < FT; f++) {
                    const float16 a = (float16)(v[f][xi * C + c]);
                    _Pragma("unroll") for (int nv = 0; nv < FNV; nv++) acc[f][nv] = fma(a, uv[nv], acc[f][nv]);
                }
            }
            _Pragma("unroll") for (int f = 0; f < FT; f++)
                _Pragma("unroll") for (int nv = 0; nv < FNV; nv++) mp[xi][f][nv] = acc[f][nv];
        }
        for (int f = 0; f < nt; f++) {
            TILE_OF(t0 + f);
            for (int nv = 0; nv < nvs; nv++) {
                const int k = kb + 16 * nv;
                const float16 bk = has_bias ? load16_edge(bias + boff + k, K - k) : (float16)(0.0f);
                if (pool) {
                    float16 ev[WINO_M][WINO_M];
                    OUT_PASSES_R(float16, MP, _, KEEP_ROW, _)
                    POOL_WINDOW(0, 0) POOL_WINDOW(0, 1) POOL_WINDOW(1, 0) POOL_WINDOW(1, 1)
                } else {
                    OUT_ONCE_R(float16, MP, _, OUT_ROW, GST16)
                }
            }
        }
    }
}

/* The weight gradient of F(4x4, 3x3) for few channels (C, K <= WINO_DWF_C,
 * K a multiple of 16), without V or Z in memory: work-item s takes the
 * tiles [s*per, min(T, (s+1)*per)), FT at a time: V = B^T d B of x and
 * Z = A dY A^T of dy into private memory (zeros for tiles past the end),
 * then for each point xi, input channel c and 16 outputs the FT products
 * V[f][xi][c] Z[f][xi][k..k+16] summed in registers and added to its
 * private dU[xi][c][k]. It writes dU to P[s] ([36][C][K]) and its tiles'
 * sums of dy (the bias gradient's share) to P[S*36*C*K + s*K]; wino_dw sums
 * the S partials. The separate path writes V and Z (2.25x x and dy) and
 * reads them back. x, which the forward wrote long before, comes from memory: a tile's six rows
 * at W*C floats apart defeated the hardware's prefetchers, and each FT tiles prefetch the rows
 * of the next (CT_PREFETCH): resnet20's step 1.021x (13 of 16 pairs, with direct_dw_taps'); dy,
 * just written, gains nothing from it. norm = 1: x is a batch norm's input, normalised as it loads
 * (TILE_INTO_VF, as wino_fused's forward reads it). gws = (S). */
#ifndef WINO_DWF_C
#define WINO_DWF_C 32
#endif
#define FDY_ROW(ST, r, uu)                                                                               \
    T_DY(zz, uu);                                                                                        \
    _Pragma("unroll") for (int j = 0; j < WN; j++) ST(zz[j], zf + (WN * (r) + j) * K + k);
__kernel void wino_dw_fused(__global float *P, __global const float *x, __global const float *dy, const int H,
                            const int W, const int C, const int pad, const int OH, const int OW, const int K,
                            const int TH, const int TW, const int T, const int per, const int S, const int norm,
                            __global const float *nstats, __global const float *nparams, const int ngoff, const int nboff,
                            const int nact) {
    const int s = (int)get_global_id(0);
    if (s >= S) return;
    const int t_lo = s * per, t_hi = min(T, t_lo + per);
    float du[WN * WN * WINO_DWF_C * WINO_DWF_C] __attribute__((aligned(64)));
    float vt[FT][WN * WN * WINO_DWF_C] __attribute__((aligned(64)));
    float zt[FT][WN * WN * WINO_DWF_C] __attribute__((aligned(64)));
    float16 bs[WINO_DWF_C / 16];
    for (int i = 0; i < WN * WN * C * K; i++) du[i] = 0.0f;
    for (int i = 0; i < K / 16; i++) bs[i] = (float16)(0.0f);
    for (int t0 = t_lo; t0 < t_hi; t0 += FT) {
        const int nt = min(FT, t_hi - t0);
        if (t0 + FT < t_hi) { /* the rows of x the next FT tiles read, into the cache while these compute */
            const int a0 = (t0 + FT) / TW, a1 = (min(t_hi, t0 + 2 * FT) - 1) / TW; /* their first and last b*TH + th */
            const int b0 = a0 / TH, h0 = a0 % TH, b1 = a1 / TH, h1 = a1 % TH;
            const size_t xs = ((size_t)b0 * H + max(0, WINO_M * h0 - pad)) * W * C,
                         xe = ((size_t)b1 * H + min(H, WINO_M * h1 + WN - pad)) * W * C;
            for (size_t o = xs; o < xe; o += 16) CT_PREFETCH(x + o);
        }
        for (int f = 0; f < FT; f++) {
            float *vf = vt[f], *zf = zt[f];
            if (f >= nt) {
                for (int i = 0; i < WN * WN * C; i++) vf[i] = 0.0f;
                for (int i = 0; i < WN * WN * K; i++) zf[i] = 0.0f;
                continue;
            }
            TILE_INTO_VF(t0 + f);
            const int ni = min(WINO_M, OH - WINO_M * th), nj = min(WINO_M, OW - WINO_M * tw);
            for (int k = 0; k < K; k += 16) {
                __global const float *pg = dy + (((size_t)b * OH + WINO_M * th) * OW + WINO_M * tw) * K + k;
                float16 u[WINO_M], w[WINO_M], zz[WN];
                DY_PASSES(float16, LD16, FDY_ROW, PST16)
                bs[k / 16] += tile_sum16(pg, ni, nj, OW, K);
            }
        }
        for (int xi = 0; xi < WN * WN; xi++)
            for (int k = 0; k < K; k += 16) {
                float16 z[FT];
                _Pragma("unroll") for (int f = 0; f < FT; f++) z[f] = *(float16 *)(zt[f] + xi * K + k);
                for (int c = 0; c < C; c++) {
                    float16 acc = (float16)(0.0f);
                    _Pragma("unroll") for (int f = 0; f < FT; f++) acc = fma((float16)(vt[f][xi * C + c]), z[f], acc);
                    float16 *d = (float16 *)(du + (xi * C + c) * K + k);
                    *d += acc;
                }
            }
    }
    __global float *out = P + (size_t)s * WN * WN * C * K;
    for (int i = 0; i < WN * WN * C * K; i += 16) vstore16(*(float16 *)(du + i), 0, out + i);
    for (int k = 0; k < K; k += 16) vstore16(bs[k / 16], 0, P + (size_t)S * WN * WN * C * K + (size_t)s * K + k);
}
#endif
