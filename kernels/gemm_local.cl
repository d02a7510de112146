/* gemm_local.cl: the GPU-shaped GEMM, same contract as gemm() in gemm.cl:
 * C = alpha * op(A) * B + beta * C (+ bias[n]) (ReLU), row-major, op(A) is
 * A [M, K] (transA = 0) or [K, M] (transA = 1), B is [K, N]; split-K and
 * batches over get_group_id(2) = b*nsplit + s, partials at C + b*strideC +
 * s*M*ldc (summed by gemm_reduce), as in gemm.cl.
 *
 * A work-group computes a TSM x TSN tile of C. It has (TSN/WPTN) x (TSM/WPTM)
 * work-items; each keeps a WPTM x WPTN micro-tile in registers, its rows and
 * columns strided by the work-group's extent so that neighbouring work-items
 * touch neighbouring elements (coalesced stores; on PoCL, lanes of one
 * vector). The K loop walks TSK-deep tiles of A and B staged in local memory,
 * double-buffered: tile t+1 is loaded while tile t is used, one barrier per
 * step. Global loads are VW-wide vectors along the contiguous dimension of
 * each matrix, consecutive work-items taking consecutive vectors; vectors
 * that cross an edge are loaded element by element with zeros past it.
 * Every work-item reaches every barrier; only the stores are masked.
 *
 * Parameters (-D): TSM, TSN, TSK, WPTM, WPTN, VW (1, 2, 4 or 8). The host
 * checks TSM % WPTM, TSN % WPTN, TSM, TSN and TSK % VW, and local memory.
 * Reference: src/ref/gemm.c; tests: tests/test_gemm.c (every shipped set). */
#ifndef TSM
#define TSM 64
#endif
#ifndef TSN
#define TSN 64
#endif
#ifndef TSK
#define TSK 16
#endif
#ifndef WPTM
#define WPTM 4
#endif
#ifndef WPTN
#define WPTN 4
#endif
#ifndef VW
#define VW 4
#endif
#define RTSM (TSM / WPTM) /* work-items along M */
#define RTSN (TSN / WPTN) /* work-items along N */
#define NTHR (RTSM * RTSN)

#define CT_CAT_(a, b) a##b
#define CT_CAT(a, b) CT_CAT_(a, b)
#if VW == 1
#define VLOAD_TO(dst, src) ((dst)[0] = (src)[0])
#else
#define VLOAD_TO(dst, src) CT_CAT(vstore, VW)(CT_CAT(vload, VW)(0, (src)), 0, (dst))
#endif

/* v[0..VW) = p[0..VW) where index < lim (lim may be <= 0), 0 elsewhere */
inline void load_edge(float *v, __global const float *p, const int lim) {
    if (lim >= VW) {
        VLOAD_TO(v, p);
    } else {
        for (int j = 0; j < VW; j++) v[j] = j < lim ? p[j] : 0.0f;
    }
}

/* Stage the K tile [kt, kt + TSK) of op(A) into As[k][m] and of B into Bs[k][n]. */
inline void load_tiles(__local float *As, __local float *Bs, __global const float *A, const int lda, const int transA,
                       __global const float *B, const int ldb, const int M, const int N, const int k1,
                       const int m0, const int n0, const int kt, const int tid) {
    float v[VW];
    if (transA) { /* A is [K, M]: vectors along m */
        for (int i = tid; i < TSK * TSM / VW; i += NTHR) {
            const int kk = i / (TSM / VW), mm = (i % (TSM / VW)) * VW;
            const int k = kt + kk, m = m0 + mm;
            if (k < k1) load_edge(v, A + (size_t)k * lda + m, M - m);
            else for (int j = 0; j < VW; j++) v[j] = 0.0f;
            for (int j = 0; j < VW; j++) As[kk * TSM + mm + j] = v[j];
        }
    } else { /* A is [M, K]: vectors along k, stored transposed */
        for (int i = tid; i < TSK * TSM / VW; i += NTHR) {
            const int mm = i / (TSK / VW), kk = (i % (TSK / VW)) * VW;
            const int k = kt + kk, m = m0 + mm;
            if (m < M) load_edge(v, A + (size_t)m * lda + k, k1 - k);
            else for (int j = 0; j < VW; j++) v[j] = 0.0f;
            for (int j = 0; j < VW; j++) As[(kk + j) * TSM + mm] = v[j];
        }
    }
    for (int i = tid; i < TSK * TSN / VW; i += NTHR) { /* B is [K, N]: vectors along n */
        const int kk = i / (TSN / VW), nn = (i % (TSN / VW)) * VW;
        const int k = kt + kk, n = n0 + nn;
        if (k < k1) load_edge(v, B + (size_t)k * ldb + n, N - n);
        else for (int j = 0; j < VW; j++) v[j] = 0.0f;
        for (int j = 0; j < VW; j++) Bs[kk * TSN + nn + j] = v[j];
    }
}

__kernel __attribute__((reqd_work_group_size(RTSN, RTSM, 1)))
void gemm_local(const int M, const int N, const int K, const float alpha,
                __global const float *A, const int offA, const int lda, const int transA,
                __global const float *B, const int offB, const int ldb,
                const float beta, __global float *C, const int offC, const int ldc,
                __global const float *bias, const int offBias, const int act, const int kchunk,
                const int nsplit, const int strideA, const int strideB, const int strideC) {
    __local float As[2][TSK * TSM];
    __local float Bs[2][TSK * TSN];
    const int tx = (int)get_local_id(0), ty = (int)get_local_id(1), tid = ty * RTSN + tx;
    const int n0 = (int)get_group_id(0) * TSN, m0 = (int)get_group_id(1) * TSM;
    const int z = (int)get_group_id(2), s = z % nsplit, bt = z / nsplit;
    const int k0 = s * kchunk, k1 = min(K, k0 + kchunk);
    A += offA + (size_t)bt * strideA;
    B += offB + (size_t)bt * strideB;
    C += offC + (size_t)bt * strideC + (size_t)s * M * ldc;
    float acc[WPTM][WPTN];
    for (int r = 0; r < WPTM; r++)
        for (int c = 0; c < WPTN; c++) acc[r][c] = 0.0f;
    const int nt = k1 > k0 ? (k1 - k0 + TSK - 1) / TSK : 0;
    if (nt > 0) load_tiles(As[0], Bs[0], A, lda, transA, B, ldb, M, N, k1, m0, n0, k0, tid);
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int t = 0; t < nt; t++) {
        const int cur = t & 1;
        if (t + 1 < nt) load_tiles(As[cur ^ 1], Bs[cur ^ 1], A, lda, transA, B, ldb, M, N, k1, m0, n0, k0 + (t + 1) * TSK, tid);
        __local const float *as = As[cur], *bs = Bs[cur];
        for (int kk = 0; kk < TSK; kk++) {
            float a[WPTM], b[WPTN];
            for (int r = 0; r < WPTM; r++) a[r] = as[kk * TSM + ty + r * RTSM];
            for (int c = 0; c < WPTN; c++) b[c] = bs[kk * TSN + tx + c * RTSN];
            for (int r = 0; r < WPTM; r++)
                for (int c = 0; c < WPTN; c++) acc[r][c] = fma(a[r], b[c], acc[r][c]);
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    for (int r = 0; r < WPTM; r++) {
        const int m = m0 + ty + r * RTSM;
        if (m >= M) continue;
        __global float *crow = C + (size_t)m * ldc;
        for (int c = 0; c < WPTN; c++) {
            const int n = n0 + tx + c * RTSN;
            if (n >= N) continue;
            float x = alpha * acc[r][c];
            if (beta != 0.0f) x += beta * crow[n];
            if (bias) x += bias[offBias + n];
            x = CT_ACT(float, x, act);
            crow[n] = x;
        }
    }
}
