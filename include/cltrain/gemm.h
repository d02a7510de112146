/* gemm.h: the matrix product every conv and dense layer runs on.
 * C = alpha * op(A) * op(B) + beta * C (+ bias[n]) (ReLU), row-major, float.
 * Two paths: our kernels/gemm.cl (default, tuned per device by -D TM/NV) and
 * CLBlast's SGEMM as the reference path; --gemm auto times both once per shape
 * and remembers the faster. Tested by tests/test_gemm.c against src/ref/gemm.c. */
#ifndef CLTRAIN_GEMM_H
#define CLTRAIN_GEMM_H
#include "cltrain/cl.h"

enum { CT_GEMM_NATIVE = 0, CT_GEMM_CLBLAST = 1, CT_GEMM_AUTO = 2 };

typedef struct ct_gemm_choice { int transA, transB, M, N, K, path; } ct_gemm_choice;

typedef struct ct_gemm {
    ct_cl *cl;
    cl_program prog;
    cl_kernel k_gemm, k_reduce, k_transpose;
    int tm, nv, kchunk;    /* tuning, from the device table or CLTRAIN_GEMM="TM,NV,KCHUNK" */
    int mode;              /* CT_GEMM_NATIVE, _CLBLAST or _AUTO */
    cl_mem work;           /* split-K partials and transposed B; grows on demand (init time only) */
    size_t work_bytes;
    ct_gemm_choice choices[64];
    int n_choices;
} ct_gemm;

int ct_gemm_init(ct_gemm *g, ct_cl *cl, int mode);
void ct_gemm_free(ct_gemm *g);
/* Reserve workspace for a shape ahead of time, so no allocation happens while training. */
int ct_gemm_reserve(ct_gemm *g, int transA, int transB, int M, int N, int K);
/* A is [M,K] (transA=0) or [K,M]; B is [K,N] (transB=0) or [N,K]; offsets in floats. */
void ct_gemm_run(ct_gemm *g, int transA, int transB, int M, int N, int K, float alpha,
                 cl_mem A, size_t offA, int lda, cl_mem B, size_t offB, int ldb,
                 float beta, cl_mem C, size_t offC, int ldc, cl_mem bias, size_t offBias, int act);
/* The native path only / the CLBlast path only (bias and act applied by a second pass there). */
void ct_gemm_native(ct_gemm *g, int transA, int transB, int M, int N, int K, float alpha,
                    cl_mem A, size_t offA, int lda, cl_mem B, size_t offB, int ldb,
                    float beta, cl_mem C, size_t offC, int ldc, cl_mem bias, size_t offBias, int act);
int ct_gemm_clblast(ct_gemm *g, int transA, int transB, int M, int N, int K, float alpha,
                    cl_mem A, size_t offA, int lda, cl_mem B, size_t offB, int ldb,
                    float beta, cl_mem C, size_t offC, int ldc, cl_mem bias, size_t offBias, int act);
#endif
