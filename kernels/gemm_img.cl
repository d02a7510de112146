/* gemm_img.cl: the product of gemm.cl (same arguments, same split-K and
 * batch layout, same epilogue), with A and B read through one-channel float
 * image views of their buffers (image1d_buffer_t, CL_R / CL_FLOAT, the whole
 * buffer: element i of the buffer is texel i), and no bias or activation.
 *
 * Shape for devices that vectorise across work-items and scalarise each
 * work-item's buffer accesses (Mesa's llvmpipe under rusticl: native float
 * vector width 1): there every global load becomes a per-lane loop with a
 * branch per lane, while an image read is the texture unit's vector gather.
 * One work-item computes a TM x TN tile in scalar registers; per step of K
 * it reads TM texels of A and TN of B. bias and act are not read here: the
 * host adds them with gemm_reduce (llvmpipe ran this kernel 3-4x slower
 * with the activation epilogue in it, even at act 0). Measured on llvmpipe (Mesa 22.3,
 * 256^3): buffers with a 4x4 tile 0.55 GFLOP/s, images 6.9
 * (BENCHMARKS.md). Rows and columns past the edge are clamped on load and
 * skipped on store; no early return (llvmpipe would then read the scalar
 * arguments under a branch).
 * Reference: src/ref/gemm.c; tests: tests/test_gemm.c. */
#ifndef TM
#define TM 4
#endif
#ifndef TN
#define TN 4
#endif

__kernel void gemm_img(const int M, const int N, const int K, const float alpha,
                       __read_only image1d_buffer_t A, const int offA, const int lda, const int transA,
                       __read_only image1d_buffer_t B, const int offB, const int ldb,
                       const float beta, __global float *C, const int offC, const int ldc,
                       __global const float *bias, const int offBias, const int act, const int kchunk,
                       const int nsplit, const int strideA, const int strideB, const int strideC) {
    const int m0 = (int)get_global_id(0) * TM;
    const int n0 = (int)get_global_id(1) * TN;
    const int z = (int)get_global_id(2), s = z % nsplit, bt = z / nsplit;
    const int k0 = s * kchunk;
    const int k1 = min(K, k0 + kchunk);
    const int astep = transA ? lda : 1; /* texels from A(m, k) to A(m, k + 1) */
    int ar[TM], bc[TN];
    _Pragma("unroll") for (int r = 0; r < TM; r++) {
        const int m = min(m0 + r, M - 1);
        ar[r] = offA + bt * strideA + (transA ? m : m * lda);
    }
    _Pragma("unroll") for (int c = 0; c < TN; c++) bc[c] = offB + bt * strideB + min(n0 + c, N - 1);
    float acc[TM][TN];
    _Pragma("unroll") for (int r = 0; r < TM; r++)
        _Pragma("unroll") for (int c = 0; c < TN; c++) acc[r][c] = 0.0f;
    for (int k = k0; k < k1; k++) {
        float a[TM], b[TN];
        _Pragma("unroll") for (int r = 0; r < TM; r++) a[r] = read_imagef(A, ar[r] + k * astep).x;
        _Pragma("unroll") for (int c = 0; c < TN; c++) b[c] = read_imagef(B, bc[c] + k * ldb).x;
        _Pragma("unroll") for (int r = 0; r < TM; r++)
            _Pragma("unroll") for (int c = 0; c < TN; c++) acc[r][c] += a[r] * b[c];
    }
    __global float *out = C + offC + (size_t)bt * strideC + (size_t)s * M * ldc;
    _Pragma("unroll") for (int r = 0; r < TM; r++) {
        const int m = m0 + r;
        _Pragma("unroll") for (int c = 0; c < TN; c++) {
            const int n = n0 + c;
            if (m < M && n < N) {
                float x = alpha * acc[r][c];
                if (beta != 0.0f) x += beta * out[(size_t)m * ldc + n];
                out[(size_t)m * ldc + n] = x;
            }
        }
    }
}
