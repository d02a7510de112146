/* test_gemm.c: kernels/gemm.cl, kernels/gemm_local.cl, kernels/gemm_img.cl
 * (and the CLBlast path) against ref_gemm on fresh random inputs, outputs
 * poisoned with NaN, sizes 1, primes, edges and the mnist-cnn shapes;
 * transposes, alpha/beta, bias, ReLU, split-K, a K past the device's loop
 * limit. Every shape runs with EVERY parameter set the tuner can pick
 * (ct_gemm_candidates) and every shipped default (ct_gemm_defaults),
 * split-K shapes also with every chunk the tuner tries; with
 * CLTRAIN_TEST_SUBSET=device, with the programs the class in force runs on
 * the device instead (see subset_device). */
#include "ct_test.h"
#include "cltrain/gemm.h"
#include "cltrain/ref.h"

static ct_gemm g_gemm;
static int g_progs[64], g_nprogs; /* distinct programs of the candidates and defaults */
static int g_kchunk[64];

static void check_shape_k(int path, int split, int tA, int tB, int M, int N, int K, float alpha, float beta, int use_bias,
                          int act, uint64_t seed) {
    ct_rng r = ct_rng_make(seed, (uint64_t)M * 131 + N, (uint64_t)K * 7 + tA * 2 + tB);
    size_t na = (size_t)M * K, nb = (size_t)K * N, nc = (size_t)M * N;
    float *A = malloc(na * 4 + 4), *B = malloc(nb * 4 + 4), *C = malloc(nc * 4 + 4), *bias = malloc(N * 4 + 4);
    float *want = malloc(nc * 4 + 4), *got = malloc(nc * 4 + 4);
    ct_fill_rand(A, na, &r, 1);
    ct_fill_rand(B, nb, &r, 1);
    ct_fill_rand(C, nc, &r, 1);
    ct_fill_rand(bias, N, &r, 1);
    memcpy(want, C, nc * 4);
    int lda = tA ? M : K, ldb = tB ? K : N;
    ref_gemm(tA, tB, M, N, K, alpha, A, lda, B, ldb, beta, want, N, use_bias ? bias : NULL, act);
    /* offsets: put each matrix 3 floats into its buffer to test offA/offB/offC */
    cl_mem dA = ct_test_buf(NULL, na + 3), dB = ct_test_buf(NULL, nb + 3), dC, db = ct_test_buf(NULL, N + 3);
    ct_cl_write(&g_cl, dA, 12, na * 4, A);
    ct_cl_write(&g_cl, dB, 12, nb * 4, B);
    ct_cl_write(&g_cl, db, 12, (size_t)N * 4, bias);
    dC = ct_test_nanbuf(nc + 3);
    /* float32 sums of K products of magnitude <= 1: error grows like sqrt(K) */
    double atol = 1e-5 * sqrt((double)K + 1) * 4;
    char what[256], cfg[160];
    int runs = path == CT_GEMM_CLBLAST ? 1 : g_nprogs;
    for (int i = 0; i < runs; i++) {
        /* CLTRAIN_TEST_SUBSET=device: split shapes with the program's own chunk only (what runs untuned) */
        int nk = path == CT_GEMM_CLBLAST || !split || ct_test_subset() ? 1 : ct_gemm_n_kchunks;
        for (int j = 0; j < nk; j++) {
            if (beta != 0.0f) ct_cl_write(&g_cl, dC, 12, nc * 4, C);
            else { float *nan = malloc(nc * 4 + 4); ct_fill_nan(nan, nc); ct_cl_write(&g_cl, dC, 12, nc * 4, nan); free(nan); }
            if (path == CT_GEMM_CLBLAST) {
                assert_int_equal(ct_gemm_clblast(&g_gemm, tA, tB, M, N, K, alpha, dA, 3, lda, dB, 3, ldb, beta, dC, 3, N,
                                                 use_bias ? db : NULL, 3, act), 0);
                snprintf(cfg, sizeof cfg, "clblast");
            } else {
                int kc = split && !ct_test_subset() ? ct_gemm_kchunks[j] : g_kchunk[i];
                ct_gemm_native_with(&g_gemm, g_progs[i], kc, tA, tB, M, N, K, alpha, dA, 3, lda, dB, 3, ldb, beta, dC, 3, N,
                                    use_bias ? db : NULL, 3, act);
                ct_gemm_cfg c = g_gemm.progs[g_progs[i]].cfg;
                c.kchunk = kc;
                ct_gemm_cfg_str(&c, cfg, sizeof cfg);
            }
            ct_cl_read(&g_cl, dC, 12, nc * 4, got);
            snprintf(what, sizeof what, "%s gemm %c%c M%d N%d K%d", cfg, tA ? 'T' : 'N', tB ? 'T' : 'N', M, N, K);
            assert_true(ct_compare(what, got, want, nc, 1e-4, atol));
        }
    }
    ct_cl_release(&dA); ct_cl_release(&dB); ct_cl_release(&dC); ct_cl_release(&db);
    free(A); free(B); free(C); free(bias); free(want); free(got);
}

static void check_shape(int path, int tA, int tB, int M, int N, int K, float alpha, float beta, int use_bias, int act, uint64_t seed) {
    check_shape_k(path, 0, tA, tB, M, N, K, alpha, beta, use_bias, act, seed);
}

static const int sizes[][3] = {{1, 1, 1}, {1, 17, 5}, {7, 1, 13}, {13, 31, 7}, {31, 33, 97}, {64, 64, 64},
                               {97, 47, 257}, {5, 129, 3}, {128, 10, 128}, {257, 131, 19},
                               /* a partial column block of 16 + 8 and of 8 alone (load16_edge's vector paths) */
                               {45, 24, 64}, {9, 8, 33}};

static void test_native_small(void **state) {
    (void)state;
    CT_NEED_CL();
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++)
        for (int tA = 0; tA < 2; tA++)
            for (int tB = 0; tB < 2; tB++)
                check_shape(CT_GEMM_NATIVE, tA, tB, sizes[i][0], sizes[i][1], sizes[i][2], 1.0f, 0.0f, 0, 0, 1);
}

static void test_native_alpha_beta_bias_relu(void **state) {
    (void)state;
    CT_NEED_CL();
    check_shape(CT_GEMM_NATIVE, 0, 0, 37, 45, 29, 0.5f, 1.0f, 1, 1, 2);
    check_shape(CT_GEMM_NATIVE, 1, 0, 37, 45, 29, -1.5f, 0.25f, 1, 0, 3);
    check_shape(CT_GEMM_NATIVE, 0, 1, 19, 50, 23, 1.0f, 0.0f, 1, 1, 4);
    /* GELU (CT_ACT_GELU), as every program's epilogue and the split-K reduction apply it */
    check_shape(CT_GEMM_NATIVE, 0, 0, 37, 45, 29, 0.5f, 1.0f, 1, 2, 20);
    check_shape_k(CT_GEMM_NATIVE, 1, 1, 0, 67, 131, 4111, 0.5f, 1.0f, 1, 2, 21);
}

static void test_native_split_k(void **state) {
    (void)state;
    CT_NEED_CL();
    /* long reductions with small outputs take the split-K path (weight gradients) */
    check_shape_k(CT_GEMM_NATIVE, 1, 1, 0, 9, 32, 5000, 1.0f, 1.0f, 0, 0, 5);
    check_shape_k(CT_GEMM_NATIVE, 1, 1, 0, 1, 64, 4099, 1.0f, 0.0f, 0, 0, 6);
    check_shape_k(CT_GEMM_NATIVE, 1, 0, 0, 3, 10, 9216, 1.0f, 0.0f, 1, 1, 7);
    check_shape_k(CT_GEMM_NATIVE, 1, 1, 0, 67, 131, 4111, 0.5f, 1.0f, 1, 1, 15);
    /* enough tiles for every core, but a B (K x N, 4.7 MB) larger than a
     * core's cache: a dense layer's forward (mnist-cnn: 128 x 128 x 9216)
     * splits on a CPU, so each chunk's rows of B stay in cache (class cpu's
     * rule: class gpu does not split it, and the product is checked either way) */
    if (g_cl.is_cpu && g_gemm.def.variant == CT_GEMM_REG)
        assert_true(ct_gemm_splits(&g_gemm, &g_gemm.def, 0, 61, 128, 9217) > 1);
    check_shape_k(CT_GEMM_NATIVE, 1, 0, 0, 61, 128, 9217, 1.0f, 0.0f, 1, 1, 19);
}

static void test_native_aliasing_ld(void **state) {
    (void)state;
    CT_NEED_CL();
    /* B rows 4 KiB or 6 KiB apart: copied with padded rows first (padded_ld,
     * src/nn/gemm.c); with transB the transposed copy is padded instead */
    for (int tB = 0; tB < 2; tB++) {
        check_shape(CT_GEMM_NATIVE, 0, tB, 9, 1024, 70, 1.0f, 0.0f, 1, 1, 16);
        check_shape(CT_GEMM_NATIVE, 1, tB, 13, 1536, 65, 0.5f, 1.0f, 0, 0, 17);
    }
    check_shape_k(CT_GEMM_NATIVE, 1, 1, 0, 5, 1024, 3000, 1.0f, 0.0f, 0, 0, 18); /* split K */
}

/* A K longer than a device lets one work-item loop (ct_cl_loop_limit: 65535
 * iterations in all on Mesa 22.3's llvmpipe, which then leaves the loop and
 * gives wrong sums or NaN): such a device gets K chunks that fit, and the
 * products must be right on every device. Thin shapes, so it stays quick. */
static void test_native_long_k(void **state) {
    (void)state;
    CT_NEED_CL();
    check_shape(CT_GEMM_NATIVE, 0, 0, 5, 20, 70001, 1.0f, 0.0f, 1, 1, 25);
    check_shape(CT_GEMM_NATIVE, 1, 0, 3, 17, 66000, 0.5f, 1.0f, 0, 0, 26);
    int limit = ct_cl_loop_limit(&g_cl);
    for (int i = 0; i < g_nprogs && limit; i++) { /* each chunk within the limit, by the kernel's own count */
        ct_gemm_cfg c = g_gemm.progs[g_progs[i]].cfg;
        int s = ct_gemm_splits(&g_gemm, &c, 0, 5, 20, 70001);
        assert_true(s > 1 && (70001 + s - 1) / s < limit);
    }
}

static void test_native_model_shapes(void **state) {
    (void)state;
    CT_NEED_CL();
    /* mnist-cnn at batch 8: conv2 forward, its weight and data gradients, dense1 */
    check_shape(CT_GEMM_NATIVE, 0, 0, 8 * 576, 64, 288, 1.0f, 0.0f, 1, 1, 8);
    check_shape(CT_GEMM_NATIVE, 1, 0, 288, 64, 8 * 576, 1.0f, 1.0f, 0, 0, 9);
    check_shape(CT_GEMM_NATIVE, 0, 1, 8 * 576, 288, 64, 1.0f, 0.0f, 0, 0, 10);
    check_shape(CT_GEMM_NATIVE, 0, 0, 8, 128, 9216, 1.0f, 0.0f, 1, 1, 11);
}

/* count products of one shape through ct_gemm_run_batched, strided apart with
 * gaps, each against the reference, with every program (set as the shape's
 * choice, so the real dispatch runs) and on the CLBlast path (one call each) */
static void check_batched(int tA, int M, int N, int K, float beta, uint64_t seed) {
    enum { COUNT = 3 };
    ct_rng r = ct_rng_make(seed, (uint64_t)M * 131 + N, (uint64_t)K);
    size_t na = (size_t)M * K, nb = (size_t)K * N, nc = (size_t)M * N;
    size_t sa = na + 5, sb = nb + 3, sc = nc + 7; /* strides with gaps that must stay untouched */
    float *A = malloc(COUNT * sa * 4), *Bm = malloc(COUNT * sb * 4), *C = malloc(COUNT * sc * 4);
    float *want = malloc(COUNT * sc * 4), *got = malloc(COUNT * sc * 4);
    ct_fill_rand(A, COUNT * sa, &r, 1);
    ct_fill_rand(Bm, COUNT * sb, &r, 1);
    ct_fill_rand(C, COUNT * sc, &r, 1);
    if (beta == 0.0f) /* beta 0 must not read C: poison the products, keep the gaps finite */
        for (int b = 0; b < COUNT; b++) ct_fill_nan(C + b * sc, nc);
    int lda = tA ? M : K;
    cl_mem dA = ct_test_buf(NULL, COUNT * sa + 2), dB = ct_test_buf(NULL, COUNT * sb + 2), dC = ct_test_nanbuf(COUNT * sc + 2);
    ct_cl_write(&g_cl, dA, 8, COUNT * sa * 4, A);
    ct_cl_write(&g_cl, dB, 8, COUNT * sb * 4, Bm);
    double atol = 1e-5 * sqrt((double)K + 1) * 4;
    char what[256], cfg[160];
    for (int i = 0; i <= g_nprogs; i++) { /* i == g_nprogs: CLBlast */
        memcpy(want, C, COUNT * sc * 4);
        for (int b = 0; b < COUNT; b++) {
            ref_gemm(tA, 0, M, N, K, 1.0f, A + b * sa, lda, Bm + b * sb, N, beta, want + b * sc, N, NULL, 0);
            for (size_t j = nc; j < sc; j++) want[b * sc + j] = C[b * sc + j]; /* the gaps keep what they had */
        }
        ct_cl_write(&g_cl, dC, 8, COUNT * sc * 4, C);
        g_gemm.n_choices = 0;
        if (i < g_nprogs) {
            ct_gemm_cfg c = g_gemm.progs[g_progs[i]].cfg;
            assert_int_equal(ct_gemm_choose(&g_gemm, tA, 0, M, N, K, CT_GEMM_NATIVE, &c), 0);
            ct_gemm_cfg_str(&c, cfg, sizeof cfg);
        } else {
            g_gemm.mode = CT_GEMM_CLBLAST;
            snprintf(cfg, sizeof cfg, "clblast");
        }
        assert_int_equal(ct_gemm_reserve_batched(&g_gemm, COUNT, tA, 0, M, N, K), 0);
        ct_gemm_run_batched(&g_gemm, COUNT, tA, M, N, K, 1.0f, dA, 2, lda, sa, dB, 2, N, sb, beta, dC, 2, N, sc);
        g_gemm.mode = CT_GEMM_NATIVE;
        ct_cl_read(&g_cl, dC, 8, COUNT * sc * 4, got);
        snprintf(what, sizeof what, "%s batched x%d gemm %cN M%d N%d K%d", cfg, COUNT, tA ? 'T' : 'N', M, N, K);
        assert_true(ct_compare(what, got, want, COUNT * sc, 1e-4, atol));
    }
    g_gemm.n_choices = 0;
    ct_cl_release(&dA); ct_cl_release(&dB); ct_cl_release(&dC);
    free(A); free(Bm); free(C); free(want); free(got);
}

static void test_batched(void **state) {
    (void)state;
    CT_NEED_CL();
    check_batched(0, 37, 16, 16, 0.0f, 21);  /* Winograd's forward shape (resnet20's 16 channels), odd tile count */
    check_batched(0, 50, 33, 19, 1.0f, 22);  /* odd everything, accumulating */
    check_batched(1, 16, 16, 3001, 0.0f, 23); /* the weight gradient: a long reduction, split over K */
    check_batched(1, 9, 40, 1100, 0.5f, 24);
}

static void test_clblast_path(void **state) {
    (void)state;
    CT_NEED_CL();
    check_shape(CT_GEMM_CLBLAST, 0, 0, 31, 33, 97, 1.0f, 0.0f, 1, 1, 12);
    check_shape(CT_GEMM_CLBLAST, 1, 0, 64, 17, 200, 1.0f, 1.0f, 0, 0, 13);
    check_shape(CT_GEMM_CLBLAST, 0, 1, 13, 8, 5, 2.0f, 0.5f, 0, 0, 14);
    check_shape(CT_GEMM_CLBLAST, 0, 0, 31, 33, 97, 1.0f, 0.0f, 1, 2, 22); /* GELU after CLBlast, by gemm_reduce */
}

/* A parameter set the device cannot run (its local memory or work-group
 * limits, the compiled kernel's CL_KERNEL_WORK_GROUP_SIZE: rusticl on
 * llvmpipe allows 32) is skipped with one line; any other failure, a build
 * error above all, fails the test. */
static void add_cfg(const ct_gemm_cfg *c) {
    char what[160];
    ct_gemm_cfg_str(c, what, sizeof what);
    int p = ct_gemm_prog_get(&g_gemm, c);
    if (p < 0 && (strstr(ct_last_error(), "work-items per group") || strstr(ct_last_error(), "needs work-groups of") ||
                  strstr(ct_last_error(), "of local memory"))) {
        fprintf(stderr, "# skipped on this device: %s\n", ct_last_error());
        return;
    }
    if (p < 0) fprintf(stderr, "# %s: %s\n", what, ct_last_error());
    assert_true(p >= 0);
    for (int i = 0; i < g_nprogs; i++)
        if (g_progs[i] == p && g_kchunk[i] == c->kchunk) return;
    g_progs[g_nprogs] = p;
    g_kchunk[g_nprogs++] = c->kchunk;
}

/* the shipped table has one row per class and a fallback; the parameter checks reject what the kernels cannot do */
static void test_tables(void **state) {
    (void)state;
    int rows = 0, fallback = 0;
    for (const ct_gemm_default *d = ct_gemm_defaults; d->cls; d++, rows++) {
        assert_int_equal(ct_gemm_cfg_check(&d->cfg), 0);
        ct_gemm_cfg narrow = {CT_GEMM_REG, {d->narrow_tm, 1, 0, 0, 0, 0}, d->cfg.kchunk};
        if (d->narrow_tm) assert_int_equal(ct_gemm_cfg_check(&narrow), 0);
        ct_gemm_cfg wide = {CT_GEMM_REG, {d->cfg.p[0], d->wide_nv, 0, 0, 0, 0}, d->cfg.kchunk};
        if (d->wide_nv) assert_int_equal(ct_gemm_cfg_check(&wide), 0);
        fallback = !d->type && !d->vendor;
    }
    assert_true(rows >= 5);
    assert_true(fallback);
    for (int i = 0; i < ct_gemm_n_candidates; i++) assert_int_equal(ct_gemm_cfg_check(&ct_gemm_candidates[i]), 0);
    ct_gemm_cfg bad[] = {{CT_GEMM_LOCAL, {64, 64, 16, 3, 4, 4}, 128}, {CT_GEMM_LOCAL, {64, 64, 6, 4, 4, 4}, 128},
                         {CT_GEMM_LOCAL, {64, 64, 16, 4, 4, 3}, 128}, {CT_GEMM_REG, {17, 1}, 128}, {CT_GEMM_REG, {4, 1}, 8}};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) assert_int_equal(ct_gemm_cfg_check(&bad[i]), CT_EINPUT);
}

/* class gpu gets a GPU row and the local-memory kernel; class cpu the row for its SIMD width: AVX-512 (16 floats) the
 * cpu-avx512 row, narrower ones (AVX2 here) the cpu row, whose register
 * tile fits 16 registers; and the row's narrow and wide kernels by N */
static void test_table_row(void **state) {
    (void)state;
    CT_NEED_CL();
    const char *env = getenv("CLTRAIN_GEMM");
    if (env && *env) skip();
    if (g_cl.is_gpu) {
        /* class gpu (a GPU, or CLTRAIN_DEVICE_CLASS=gpu on any device): a GPU row,
         * the local-memory kernel for every shape (no narrow or wide kernels) */
        const ct_gemm_default *r = ct_gemm_defaults;
        while (r->cls && strcmp(r->cls, g_gemm.def_from)) r++;
        assert_non_null(r->cls);
        if (r->type != CL_DEVICE_TYPE_GPU) {
            /* the fallback row: the GPU rows' local tiles need more work-items per group than the device
             * runs (rusticl on llvmpipe: 32; they need 64 or 256), so the register kernel, for every shape */
            assert_string_equal(g_gemm.def_from, "fallback");
            assert_null(r[1].cls);
            assert_int_equal(g_gemm.def.variant, CT_GEMM_REG);
            assert_memory_equal(g_gemm.def.p, r->cfg.p, sizeof r->cfg.p);
            for (const ct_gemm_default *d = ct_gemm_defaults; d->cls; d++) {
                if (d->type != CL_DEVICE_TYPE_GPU) continue;
                ct_gemm_cfg want = d->cfg;
                assert_true(ct_gemm_prog_get(&g_gemm, &want) < 0);
                assert_non_null(strstr(ct_last_error(), "work-items per group"));
            }
            fprintf(stderr, "# class gpu: no GPU row's local tile fits this device; the register kernel\n");
        } else assert_int_equal(g_gemm.def.variant, CT_GEMM_LOCAL);
        int prog;
        ct_gemm_cfg c;
        ct_gemm_default_for(&g_gemm, 16, &prog, &c);
        assert_int_equal(prog, g_gemm.def_prog);
        ct_gemm_default_for(&g_gemm, 4096, &prog, &c);
        assert_int_equal(prog, g_gemm.def_prog);
        return;
    }
    cl_uint vec = 0;
    clGetDeviceInfo(g_cl.device, CL_DEVICE_NATIVE_VECTOR_WIDTH_FLOAT, sizeof vec, &vec, NULL);
    if (vec <= 1) { /* a device that vectorises across work-items (llvmpipe): the image kernel, for every shape */
        assert_string_equal(g_gemm.def_from, "cpu-scalar");
        assert_int_equal(g_gemm.def.variant, CT_GEMM_IMG);
        int prog;
        ct_gemm_cfg c;
        ct_gemm_default_for(&g_gemm, 16, &prog, &c);
        assert_int_equal(prog, g_gemm.def_prog);
        return;
    }
    assert_string_equal(g_gemm.def_from, vec >= 16 ? "cpu-avx512" : "cpu");
    /* TM x NV float16 accumulators are 2*TM*NV ymm registers: at most 14 of AVX2's 16, so B and A's broadcast fit */
    if (vec < 16) assert_true(g_gemm.def.variant == CT_GEMM_REG && 2 * g_gemm.def.p[0] * g_gemm.def.p[1] <= 14);
    /* shapes of at most 16 columns get the row's narrow kernel (NV = 1) where it has one, others the default */
    const ct_gemm_default *row = ct_gemm_defaults;
    while (row->cls && strcmp(row->cls, g_gemm.def_from)) row++;
    int prog;
    ct_gemm_cfg c;
    ct_gemm_default_for(&g_gemm, 16, &prog, &c);
    int narrow = row->narrow_tm > 0 && g_gemm.def.p[1] > 1;
    assert_int_equal(c.p[0], narrow ? row->narrow_tm : g_gemm.def.p[0]);
    assert_int_equal(c.p[1], narrow ? 1 : g_gemm.def.p[1]);
    assert_int_equal(g_gemm.progs[prog].cfg.p[1], c.p[1]);
    ct_gemm_default_for(&g_gemm, 17, &prog, &c);
    assert_int_equal(prog, g_gemm.def_prog);
    /* shapes of 16 * wide_nv columns or more get the row's wide kernel (NV = wide_nv, TM = wide_tm where
     * the row gives one) where it has one */
    int wide = row->wide_nv > g_gemm.def.p[1] && g_gemm.def.variant == CT_GEMM_REG, wn = 16 * row->wide_nv;
    if (wide) {
        ct_gemm_default_for(&g_gemm, wn, &prog, &c);
        assert_int_equal(c.p[0], row->wide_tm > 0 ? row->wide_tm : g_gemm.def.p[0]);
        assert_int_equal(g_gemm.progs[prog].cfg.p[0], c.p[0]);
        assert_int_equal(c.p[1], row->wide_nv);
        assert_int_equal(g_gemm.progs[prog].cfg.p[1], row->wide_nv);
        ct_gemm_default_for(&g_gemm, wn - 1, &prog, &c);
        assert_int_equal(prog, g_gemm.def_prog);
    }
}

/* CLTRAIN_TEST_SUBSET=device: only the programs the class in force runs on
 * this device without tuning (what ct_gemm_init built: the table row's
 * default, its narrow and wide kernels, and the register kernel that holds
 * gemm_reduce and transpose, the fallback when an image view cannot be
 * made), every shape with each, split shapes with the program's own chunk
 * (and the chunks the device's loop limit makes). For a slow second implementation (tests/rusticl.sh:
 * Mesa's llvmpipe compiles a float16 variant in 10-14 s of CPU and runs
 * these kernels 20-400x slower than PoCL), where every tuner candidate and
 * every other row's default would take some 250 s of CPU. Those are not
 * what the device runs unless `cltrain tune` picks one there. */
static int subset_device(void) { return ct_test_subset(); }

static int setup(void **state) {
    ct_test_open(state);
    if (!g_have_cl) return 0;
    assert_int_equal(ct_gemm_init(&g_gemm, &g_cl, CT_GEMM_NATIVE), 0);
    fprintf(stderr, "# the device's loop limit: %d (0: none below %d)\n", ct_cl_loop_limit(&g_cl), CT_LOOP_PROBE_N);
    if (subset_device()) {
        int n = g_gemm.n_progs;
        for (int i = 0; i < n; i++) add_cfg(&g_gemm.progs[i].cfg);
        char what[160];
        for (int i = 0; i < g_nprogs; i++) {
            ct_gemm_cfg_str(&g_gemm.progs[g_progs[i]].cfg, what, sizeof what);
            fprintf(stderr, "# CLTRAIN_TEST_SUBSET=device: the class's own program %s\n", what);
        }
        return 0;
    }
    for (int i = 0; i < ct_gemm_n_candidates; i++) add_cfg(&ct_gemm_candidates[i]);
    for (const ct_gemm_default *d = ct_gemm_defaults; d->cls; d++) {
        add_cfg(&d->cfg);
        ct_gemm_cfg narrow = {CT_GEMM_REG, {d->narrow_tm, 1, 0, 0, 0, 0}, d->cfg.kchunk};
        if (d->narrow_tm) add_cfg(&narrow);
        ct_gemm_cfg wide = {CT_GEMM_REG, {d->cfg.p[0], d->wide_nv, 0, 0, 0, 0}, d->cfg.kchunk};
        if (d->wide_nv) add_cfg(&wide);
    }
    return 0;
}
static int teardown(void **state) {
    if (g_have_cl) ct_gemm_free(&g_gemm);
    return ct_test_close(state);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tables),
        cmocka_unit_test(test_table_row),
        cmocka_unit_test(test_native_small),
        cmocka_unit_test(test_native_alpha_beta_bias_relu),
        cmocka_unit_test(test_native_split_k),
        cmocka_unit_test(test_native_aliasing_ld),
        cmocka_unit_test(test_native_long_k),
        cmocka_unit_test(test_native_model_shapes),
        cmocka_unit_test(test_batched),
        cmocka_unit_test(test_clblast_path),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
