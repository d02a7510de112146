/* gemm.cl: C = alpha * op(A) * B + beta * C, then + bias[n] and ReLU if asked.
 * Row-major. op(A) is A stored [M, K] (transA = 0) or [K, M] (transA = 1).
 * B is [K, N]. A B^T product is done by transposing B first (host side).
 *
 * Shape for CPUs (PoCL): one work-item computes a TM x (16*NV) tile of C in
 * float16 accumulators held in registers; no local memory. Loads of A are
 * scalar broadcasts, loads of B are 16-wide vectors, so the inner loop is
 * TM*NV fused multiply-adds per NV vector loads. Rows and columns past the
 * edge are clamped on load (a partial vector: load16_edge, prelude.cl) and
 * skipped on store.
 *
 * Split-K and batches: get_global_id(2) = b*nsplit + s. Batch b's matrices
 * start strideA, strideB, strideC floats after batch b-1's (a batch of
 * products of one shape in one launch: Winograd's 16 or 36). With nsplit > 1
 * the work-items of split s compute the K range [s*kchunk, min(K,
 * (s+1)*kchunk)) and write their partial tile to C + b*strideC + s*M*ldc
 * (alpha 1, beta 0, no bias); gemm_reduce sums the partials.
 * Reference: src/ref/gemm.c; tests: tests/test_gemm.c. */
#ifndef TM
#define TM 8
#endif
#ifndef NV
#define NV 2
#endif

#define GEMM_LOOP(ALOAD, BLOAD)                                        \
    for (int k = k0; k < k1; k++) {                                    \
        __global const float *brow = B + (size_t)k * ldb + n0;          \
        float16 b[NV];                                                 \
        _Pragma("unroll") for (int v = 0; v < NV; v++) b[v] = BLOAD;   \
        _Pragma("unroll") for (int r = 0; r < TM; r++) {               \
            const float a = ALOAD;                                     \
            _Pragma("unroll") for (int v = 0; v < NV; v++)             \
                acc[r][v] = fma((float16)(a), b[v], acc[r][v]);        \
        }                                                              \
    }

__kernel void gemm(const int M, const int N, const int K, const float alpha,
                   __global const float *A, const int offA, const int lda, const int transA,
                   __global const float *B, const int offB, const int ldb,
                   const float beta, __global float *C, const int offC, const int ldc,
                   __global const float *bias, const int offBias, const int act, const int kchunk,
                   const int nsplit, const int strideA, const int strideB, const int strideC) {
    const int m0 = (int)get_global_id(0) * TM;
    const int n0 = (int)get_global_id(1) * (16 * NV);
    if (m0 >= M || n0 >= N) return;
    const int z = (int)get_global_id(2), s = z % nsplit, bt = z / nsplit;
    const int k0 = s * kchunk;
    const int k1 = min(K, k0 + kchunk);
    A += offA + (size_t)bt * strideA;
    B += offB + (size_t)bt * strideB;
    C += offC + (size_t)bt * strideC + (size_t)s * M * ldc;
    float16 acc[TM][NV];
    _Pragma("unroll") for (int r = 0; r < TM; r++)
        _Pragma("unroll") for (int v = 0; v < NV; v++) acc[r][v] = (float16)(0.0f);
    int mr[TM];
    _Pragma("unroll") for (int r = 0; r < TM; r++) mr[r] = min(m0 + r, M - 1);
    const int full = n0 + 16 * NV <= N;
    if (!transA) {
        if (full) { GEMM_LOOP(A[(size_t)mr[r] * lda + k], vload16(v, brow)) }
        else      { GEMM_LOOP(A[(size_t)mr[r] * lda + k], load16_edge(brow + 16 * v, N - n0 - 16 * v)) }
    } else {
        if (full) { GEMM_LOOP(A[(size_t)k * lda + mr[r]], vload16(v, brow)) }
        else      { GEMM_LOOP(A[(size_t)k * lda + mr[r]], load16_edge(brow + 16 * v, N - n0 - 16 * v)) }
    }
    _Pragma("unroll") for (int r = 0; r < TM; r++) {
        const int m = m0 + r;
        if (m < M) {
            __global float *crow = C + (size_t)m * ldc + n0;
            _Pragma("unroll") for (int v = 0; v < NV; v++) {
                const int nv = n0 + 16 * v;
                if (nv < N) {
                    float16 c = alpha * acc[r][v];
                    const int valid = N - nv;
                    if (valid >= 16) {
                        if (beta != 0.0f) c += beta * vload16(v, crow);
                        if (bias) c += vload16(0, bias + offBias + nv);
                        c = CT_ACT(float16, c, act);
                        vstore16(c, v, crow);
                    } else {
                        float t[16];
                        vstore16(c, 0, t);
                        for (int j = 0; j < valid; j++) {
                            float x = t[j];
                            if (beta != 0.0f) x += beta * crow[16 * v + j];
                            if (bias) x += bias[offBias + nv + j];
                            x = CT_ACT(float, x, act);
                            crow[16 * v + j] = x;
                        }
                    }
                }
            }
        }
    }
}

/* C[m, n] = alpha * sum_s P[s][m][n] + beta * C[m, n] (+ bias[n]) (ReLU).
 * P is [S][M][ldp] at offset offP (P may be C itself, S = 1).
 * get_global_id(2) = b: batch b's P starts S*M*ldp floats after b-1's, its C strideC after.
 * gemm_reduce: one element per work-item, gws = (N, M, batch); gemm_reduce16 (a CPU, N a
 * multiple of 16): 16 columns per work-item, gws = (N / 16, M, batch). One float per
 * work-item ran at about 5 GB/s on PoCL (cifar-cnn's 36 split-K products of 64 x 64: 0.65 ms).
 * (LD1, ST1, LD16, ST16: prelude.cl.) */
#define GEMM_REDUCE(NAME, VT, LD, ST, VW)                                                               \
    __kernel void NAME(const int M, const int N, const int S, const float alpha, __global const float *P, \
                       const int offP, const int ldp, const float beta, __global float *C, const int offC, \
                       const int ldc, __global const float *bias, const int offBias, const int act,      \
                       const int strideC) {                                                              \
        const int n = (int)get_global_id(0) * VW, m = (int)get_global_id(1), bt = (int)get_global_id(2); \
        if (n >= N || m >= M) return;                                                                    \
        VT sum = (VT)(0.0f);                                                                             \
        const size_t stride = (size_t)M * ldp;                                                           \
        P += offP + (size_t)bt * S * stride + (size_t)m * ldp + n;                                       \
        for (int s = 0; s < S; s++) sum += LD(P + s * stride);                                           \
        VT x = alpha * sum;                                                                              \
        __global float *c = C + offC + (size_t)bt * strideC + (size_t)m * ldc + n;                       \
        if (beta != 0.0f) x += beta * LD(c);                                                             \
        if (bias) x += LD(bias + offBias + n);                                                           \
        x = CT_ACT(VT, x, act);                                                                          \
        ST(x, c);                                                                                        \
    }
GEMM_REDUCE(gemm_reduce, float, LD1, ST1, 1)
GEMM_REDUCE(gemm_reduce16, float16, LD16, ST16, 16)

/* out[c, r] = in[r, c]: in is [R, Cc] with row stride ld; out is [Cc, R] with row stride ldo.
 * gws = (Cc, ceil(R / 16)): a work-item writes 16 consecutive floats of one row of out
 * with one vector store; its 16 reads, one per row of in, share their cache lines with
 * the work-items of the next columns. One float per work-item wrote 16 lines ld apart
 * per vector of work-items on PoCL: 0.70 ms for mnist-cnn's 9216 x 128 weights. */
__kernel void transpose(__global float *out, const int offOut, const int ldo, __global const float *in, const int offIn,
                        const int R, const int Cc, const int ld) {
    const int c = (int)get_global_id(0), r0 = (int)get_global_id(1) * 16;
    if (c >= Cc || r0 >= R) return;
    __global const float *src = in + offIn + (size_t)r0 * ld + c;
    __global float *dst = out + offOut + (size_t)c * ldo + r0;
    if (r0 + 16 <= R) {
        float t[16];
        _Pragma("unroll") for (int j = 0; j < 16; j++) t[j] = src[(size_t)j * ld];
        vstore16(vload16(0, t), 0, dst);
    } else {
        for (int j = 0; r0 + j < R; j++) dst[j] = src[(size_t)j * ld];
    }
}
