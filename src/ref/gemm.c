/* ref/gemm.c: float64 reference for kernels/gemm.cl. Tested by tests/test_gemm.c. */
#include "cltrain/ref.h"

void ref_gemm(int transA, int transB, int M, int N, int K, float alpha, const float *A, int lda,
              const float *B, int ldb, float beta, float *C, int ldc, const float *bias, int act) {
    for (int m = 0; m < M; m++)
        for (int n = 0; n < N; n++) {
            double s = 0;
            for (int k = 0; k < K; k++) {
                double a = transA ? A[(long)k * lda + m] : A[(long)m * lda + k];
                double b = transB ? B[(long)n * ldb + k] : B[(long)k * ldb + n];
                s += a * b;
            }
            double c = alpha * s;
            if (beta != 0) c += (double)beta * C[(long)m * ldc + n];
            if (bias) c += bias[n];
            c = ref_act(c, act);
            C[(long)m * ldc + n] = (float)c;
        }
}
