/* nn/gemm.c: host side of kernels/gemm.cl and the CLBlast path.
 * Tuning comes from a small per-device table (CPU vs GPU) and can be
 * overridden with CLTRAIN_GEMM="TM,NV,KCHUNK". Weight-gradient products
 * (reduction over the batch, transA) are split along K into cache-sized
 * chunks whose partial tiles gemm_reduce sums: without it every tile would
 * stream the whole activation matrix once more.
 * Tested by tests/test_gemm.c; timed by `cltrain bench kernels`. */
#include "cltrain/gemm.h"
#include <clblast_c.h>
#include <string.h>

enum { GEMM_WORK_ALIGN = 256 };

static int split_count(const ct_gemm *g, int transA, int M, int N, int K) {
    long tiles = (long)((M + g->tm - 1) / g->tm) * ((N + 16 * g->nv - 1) / (16 * g->nv));
    /* Split when the reduction is long and the output small: weight gradients
     * (transA), or too few tiles to keep every compute unit busy. */
    if (K < 4 * g->kchunk) return 1;
    if (!transA && tiles >= 8L * g->cl->compute_units) return 1;
    int s = (K + g->kchunk - 1) / g->kchunk;
    return s > 1024 ? 1024 : s;
}

static size_t work_need(const ct_gemm *g, int transA, int transB, int M, int N, int K) {
    size_t need = 0;
    int s = split_count(g, transA, M, N, K);
    if (s > 1) need += ct_round_up((size_t)s * M * N * sizeof(float), GEMM_WORK_ALIGN);
    if (transB) need += (size_t)K * N * sizeof(float);
    return need;
}

int ct_gemm_reserve(ct_gemm *g, int transA, int transB, int M, int N, int K) {
    size_t need = work_need(g, transA, transB, M, N, K);
    if (need <= g->work_bytes) return 0;
    ct_cl_release(&g->work);
    g->work_bytes = 0;
    int rc = ct_cl_alloc(g->cl, &g->work, need, "gemm workspace");
    if (rc) return rc;
    g->work_bytes = need;
    return 0;
}

int ct_gemm_init(ct_gemm *g, ct_cl *cl, int mode) {
    memset(g, 0, sizeof *g);
    g->cl = cl;
    g->mode = mode;
    /* per-device table: CPUs like wide register tiles; GPUs get narrower tiles and more work-items */
    if (cl->is_cpu) { g->tm = 6; g->nv = 2; g->kchunk = 512; }
    else            { g->tm = 4; g->nv = 1; g->kchunk = 128; } /* H200: 128 beat 512 by 1.2x, 2048 by 2x (BENCHMARKS.md) */
    const char *env = getenv("CLTRAIN_GEMM");
    if (env && *env) {
        int a, b, c;
        if (sscanf(env, "%d,%d,%d", &a, &b, &c) != 3 || a < 1 || a > 16 || b < 1 || b > 4 || c < 16)
            return ct_fail(CT_EINPUT, "CLTRAIN_GEMM='%s': expected TM,NV,KCHUNK such as 8,2,512 (TM 1..16, NV 1..4)", env);
        g->tm = a; g->nv = b; g->kchunk = c;
    }
    char opts[128];
    snprintf(opts, sizeof opts, "-DTM=%d -DNV=%d", g->tm, g->nv);
    int rc = ct_cl_build(cl, &g->prog, "gemm.cl", opts);
    if (rc) return rc;
    g->k_gemm = ct_cl_kernel(g->prog, "gemm");
    g->k_reduce = ct_cl_kernel(g->prog, "gemm_reduce");
    g->k_transpose = ct_cl_kernel(g->prog, "transpose");
    return 0;
}

void ct_gemm_free(ct_gemm *g) {
    if (g->k_gemm) clReleaseKernel(g->k_gemm);
    if (g->k_reduce) clReleaseKernel(g->k_reduce);
    if (g->k_transpose) clReleaseKernel(g->k_transpose);
    if (g->prog) clReleaseProgram(g->prog);
    ct_cl_release(&g->work);
    memset(g, 0, sizeof *g);
}

static void run_reduce(ct_gemm *g, int M, int N, int S, float alpha, cl_mem P, size_t offP, int ldp, float beta,
                       cl_mem C, size_t offC, int ldc, cl_mem bias, size_t offBias, int act) {
    ct_kargs(g->k_reduce, M, N, S, alpha, P, (int)offP, ldp, beta, C, (int)offC, ldc, bias,
               (int)offBias, act);
    size_t gws[2] = {(size_t)N, (size_t)M}, lws[2] = {N >= 16 ? 16 : 1, 1};
    ct_cl_run(g->cl, g->k_reduce, "gemm_reduce", 2, gws, g->cl->is_cpu ? NULL : lws);
}

void ct_gemm_native(ct_gemm *g, int transA, int transB, int M, int N, int K, float alpha,
                    cl_mem A, size_t offA, int lda, cl_mem B, size_t offB, int ldb,
                    float beta, cl_mem C, size_t offC, int ldc, cl_mem bias, size_t offBias, int act) {
    if (M <= 0 || N <= 0) return;
    size_t need = work_need(g, transA, transB, M, N, K);
    if (need > g->work_bytes && ct_gemm_reserve(g, transA, transB, M, N, K)) {
        fprintf(stderr, "cltrain: %s\n", ct_last_error());
        exit(1);
    }
    int S = split_count(g, transA, M, N, K);
    size_t partial_bytes = S > 1 ? ct_round_up((size_t)S * M * N * sizeof(float), GEMM_WORK_ALIGN) : 0;
    if (transB) {
        /* B is [N, K]: transpose into the workspace as [K, N] */
        int offT = (int)(partial_bytes / sizeof(float));
        ct_kargs(g->k_transpose, g->work, offT, B, (int)offB, N, K, ldb);
        size_t gws[2] = {(size_t)K, (size_t)N};
        ct_cl_run(g->cl, g->k_transpose, "transpose", 2, gws, NULL);
        ct_gemm_native(g, transA, 0, M, N, K, alpha, A, offA, lda, g->work, (size_t)offT, N, beta, C, offC, ldc, bias, offBias, act);
        return;
    }
    int tiles_m = (M + g->tm - 1) / g->tm, tiles_n = (N + 16 * g->nv - 1) / (16 * g->nv);
    int kchunk = S > 1 ? (K + S - 1) / S : K;
    cl_mem out = S > 1 ? g->work : C;
    int offOut = S > 1 ? 0 : (int)offC, ldOut = S > 1 ? N : ldc;
    float a1 = S > 1 ? 1.0f : alpha, b1 = S > 1 ? 0.0f : beta;
    cl_mem bias1 = S > 1 ? NULL : bias;
    int act1 = S > 1 ? 0 : act;
    cl_kernel k = g->k_gemm;
    ct_kargs(k, M, N, K, a1, A, (int)offA, lda, transA, B, (int)offB, ldb, b1, out, offOut,
               ldOut, bias1, (int)offBias, act1, kchunk);
    size_t gws[3] = {(size_t)tiles_m, (size_t)tiles_n, (size_t)S};
    if (g->cl->is_cpu) {
        /* one work-group = all tiles of one K chunk (they share its rows in cache),
         * or a strip of row tiles sharing one column panel of B */
        size_t lws[3] = {(size_t)tiles_m, (size_t)tiles_n, 1};
        if ((size_t)tiles_m * tiles_n > g->cl->max_wg || S == 1) {
            lws[0] = tiles_m < 16 ? (size_t)tiles_m : 16;
            lws[1] = 1;
        }
        ct_cl_run(g->cl, k, "gemm", 3, gws, lws);
    } else {
        size_t lws[3] = {16, tiles_n >= 4 ? 4 : 1, 1};
        ct_cl_run(g->cl, k, "gemm", 3, gws, lws);
    }
    if (S > 1) run_reduce(g, M, N, S, alpha, g->work, 0, N, beta, C, offC, ldc, bias, offBias, act);
}

int ct_gemm_clblast(ct_gemm *g, int transA, int transB, int M, int N, int K, float alpha,
                    cl_mem A, size_t offA, int lda, cl_mem B, size_t offB, int ldb,
                    float beta, cl_mem C, size_t offC, int ldc, cl_mem bias, size_t offBias, int act) {
    CLBlastStatusCode st = CLBlastSgemm(CLBlastLayoutRowMajor, transA ? CLBlastTransposeYes : CLBlastTransposeNo,
                                        transB ? CLBlastTransposeYes : CLBlastTransposeNo, (size_t)M, (size_t)N, (size_t)K,
                                        alpha, A, offA, (size_t)lda, B, offB, (size_t)ldb, beta, C, offC, (size_t)ldc,
                                        &g->cl->queue, NULL);
    if (st != CLBlastSuccess) return ct_fail(CT_EDEVICE, "CLBlastSgemm failed with status %d", (int)st);
    if (bias || act) run_reduce(g, M, N, 1, 1.0f, C, offC, ldc, 0.0f, C, offC, ldc, bias, offBias, act);
    return 0;
}

static double time_path(ct_gemm *g, int path, int transA, int transB, int M, int N, int K,
                        cl_mem A, size_t offA, int lda, cl_mem B, size_t offB, int ldb,
                        cl_mem C, size_t offC, int ldc) {
    /* C is scratch here: we time with beta 0 and no bias on a copy of the call's shape */
    double best = 1e30;
    for (int rep = 0; rep < 3; rep++) {
        ct_cl_finish(g->cl);
        double t0 = ct_now();
        if (path == CT_GEMM_CLBLAST) {
            if (ct_gemm_clblast(g, transA, transB, M, N, K, 1, A, offA, lda, B, offB, ldb, 0, C, offC, ldc, NULL, 0, 0))
                return 1e30;
        } else {
            ct_gemm_native(g, transA, transB, M, N, K, 1, A, offA, lda, B, offB, ldb, 0, C, offC, ldc, NULL, 0, 0);
        }
        ct_cl_finish(g->cl);
        double t = ct_now() - t0;
        if (t < best) best = t;
    }
    return best;
}

void ct_gemm_run(ct_gemm *g, int transA, int transB, int M, int N, int K, float alpha,
                 cl_mem A, size_t offA, int lda, cl_mem B, size_t offB, int ldb,
                 float beta, cl_mem C, size_t offC, int ldc, cl_mem bias, size_t offBias, int act) {
    int path = g->mode;
    if (path == CT_GEMM_AUTO) {
        path = -1;
        for (int i = 0; i < g->n_choices; i++) {
            ct_gemm_choice *c = &g->choices[i];
            if (c->transA == transA && c->transB == transB && c->M == M && c->N == N && c->K == K) { path = c->path; break; }
        }
        if (path < 0) {
            /* Measure once. The timed calls overwrite C, so time only when C is
             * not accumulated into (beta 0): otherwise use the native path. */
            path = CT_GEMM_NATIVE;
            if (beta == 0.0f) {
                double tn = time_path(g, CT_GEMM_NATIVE, transA, transB, M, N, K, A, offA, lda, B, offB, ldb, C, offC, ldc);
                double tb = time_path(g, CT_GEMM_CLBLAST, transA, transB, M, N, K, A, offA, lda, B, offB, ldb, C, offC, ldc);
                path = tb < tn ? CT_GEMM_CLBLAST : CT_GEMM_NATIVE;
                CT_DEBUG(1, "gemm %c%c %dx%dx%d: native %.3f ms, clblast %.3f ms -> %s", transA ? 'T' : 'N', transB ? 'T' : 'N',
                         M, N, K, tn * 1e3, tb * 1e3, path ? "clblast" : "native");
                if (g->n_choices < 64) g->choices[g->n_choices++] = (ct_gemm_choice){transA, transB, M, N, K, path};
            }
        }
    }
    if (path == CT_GEMM_CLBLAST) {
        if (ct_gemm_clblast(g, transA, transB, M, N, K, alpha, A, offA, lda, B, offB, ldb, beta, C, offC, ldc, bias, offBias, act)) {
            fprintf(stderr, "cltrain: %s\n", ct_last_error());
            exit(1);
        }
        return;
    }
    ct_gemm_native(g, transA, transB, M, N, K, alpha, A, offA, lda, B, offB, ldb, beta, C, offC, ldc, bias, offBias, act);
}
