/* test_layers.c: every device layer pass against the float64 references in
 * src/ref, on small models built from .cfg text (ct_model_parse/setup).
 *
 * check_layer runs one layer's forward with its output poisoned with NaN and
 * compares it with the reference on the same (device) input; then writes a
 * random dy into the next layer's dx (or dlogits), random values into every
 * parameter gradient (gradients accumulate, so the expectation is start +
 * reference) and NaN into the layer's dx, runs its backward and compares the
 * layer's weight and bias gradients, its dx, and checks that no other
 * layer's gradients moved. The reference backward is given the device's own
 * forward output for the ReLU mask (already checked equal), so an output
 * within rounding of zero cannot flip the mask between the two.
 * Shapes: batch 1, odd sizes, C=1, primes, stride 2, pad, 1x1 and 5x5, C a
 * multiple of 16 (the kernels' float16 paths) and not, partial batches, and
 * mnist-cnn at batch 4.
 * Also: softmax cross-entropy (large logits, ties), Adam and SGD over several
 * steps, u8 input conversion, the split activation's kernels (act_fwd,
 * act_bwd), accumulation semantics, the non-finite check.
 * Skipped without an OpenCL device. */
#include "ct_test.h"
#include "cltrain/layer.h"
#include "cltrain/lookahead.h"
#include "cltrain/optim.h"
#include "cltrain/ref.h"
#include "cltrain/ref/conv.h"
#include "cltrain/ref/maxpool.h"

/* ---------------- helpers ---------------- */

static int g_conv_algo = CT_CONV_IM2COL; /* --conv for the models made here */
static int g_wino_unfused = 0;           /* their wino_unfused */
static int g_wino_ft = 0;                /* their wino_ft (0: the device's) */

static int make_model(ct_model *m, const char *cfg, int batch) {
    int rc = ct_model_parse(m, cfg, "test.cfg");
    if (rc) fprintf(stderr, "# parse: %s\n", ct_last_error());
    assert_int_equal(rc, 0);
    m->conv_algo = g_conv_algo;
    m->wino_unfused = g_wino_unfused;
    m->wino_ft = g_wino_ft;
    rc = ct_model_setup(m, &g_cl, batch, CT_GEMM_NATIVE);
    if (rc) fprintf(stderr, "# setup: %s\n", ct_last_error());
    assert_int_equal(rc, 0);
    return 0;
}

static float *dev_read(cl_mem b, size_t n) {
    float *h = malloc(n * sizeof(float) + 4);
    ct_cl_read(&g_cl, b, 0, n * sizeof(float), h);
    return h;
}

static void dev_poison(cl_mem b, size_t n) {
    float *t = malloc(n * sizeof(float) + 4);
    ct_fill_nan(t, n);
    ct_cl_write(&g_cl, b, 0, n * sizeof(float), t);
    free(t);
}

static float *dev_rand(cl_mem b, size_t n, ct_rng *g, float scale) {
    float *h = malloc(n * sizeof(float) + 4);
    ct_fill_rand(h, n, g, scale);
    ct_cl_write(&g_cl, b, 0, n * sizeof(float), h);
    return h;
}

static double amax(const float *x, size_t n) {
    double m = 0;
    for (size_t i = 0; i < n; i++) m = fmax(m, fabs(x[i]));
    return m;
}

/* float32 sums of len products of magnitude <= a*b: error grows like sqrt(len) (as test_gemm) */
static double sum_atol(size_t len, double a, double b) { return 4e-5 * sqrt((double)len + 1) * (a * b + 1e-30); }

/* Random parameters: weights U(-s, s) with s = 1 or sqrt(3/fan_in) (unit variance outputs), biases U(-0.5, 0.5). */
static float *set_random_params(ct_model *m, ct_rng *g, int scaled) {
    float *P = malloc(m->n_params * sizeof(float) + 4);
    for (int i = 0; i < m->n_layers; i++) {
        ct_layer *L = &m->layers[i];
        if (!L->n_w) continue;
        float s = scaled ? sqrtf(3.0f / (float)(L->n_w / (size_t)L->oc)) : 1.0f;
        ct_fill_rand(P + L->w_off, L->n_w, g, s);
        ct_fill_rand(P + L->b_off, L->n_b, g, 0.5f);
    }
    ct_model_set_params(m, P);
    return P;
}

static ref_conv_shape conv_shape(const ct_layer *L, int B) {
    ref_conv_shape s = {B, L->ih, L->iw, L->ic, L->oc, L->k, L->k, L->stride, L->pad, L->oh, L->ow};
    return s;
}

/* whether setup reserved the GEMM shape (transA, transB, M, N, K): the workspace, and the tuner's list */
static int reserved(const ct_model *m, int tA, int tB, int M, int N, int K) {
    for (int i = 0; i < m->gemm.n_shapes; i++) {
        const int *s = m->gemm.shapes[i];
        if (s[0] == tA && s[1] == tB && s[2] == M && s[3] == N && s[4] == K) return 1;
    }
    return 0;
}

/* Forward and backward of layer i at batch B (<= m->batch) against the references. */
static void check_layer(ct_model *m, int i, int B, ct_rng *g, const float *P) {
    ct_layer *L = &m->layers[i];
    static const char *names[] = {"conv", "maxpool", "dense"};
    size_t nin = (size_t)B * L->ih * L->iw * L->ic, nout = (size_t)B * L->oh * L->ow * L->oc, np = m->n_params;
    char what[160], tag[120];
    int n = snprintf(tag, sizeof tag, "layer %d %s B%d %dx%dx%d->%dx%dx%d", i, names[L->type], B, L->ih, L->iw, L->ic,
                     L->oh, L->ow, L->oc);
    if (L->type != CT_L_DENSE) n += snprintf(tag + n, sizeof tag - (size_t)n, " k%d s%d p%d", L->k, L->stride, L->pad);
    snprintf(tag + n, sizeof tag - (size_t)n, "%s%s", L->act ? " " : "", L->act ? ct_activations[L->act].name : "");
    float *x = dev_read(i == 0 ? m->input : m->layers[i - 1].out, nin);
    const float *W = P + L->w_off, *bias = L->n_b ? P + L->b_off : NULL; /* bias=0: none */
    if (L->type == CT_L_CONV) { /* the --conv rule; under auto it depends on the device class (is_cpu: class cpu) and,
                                  * in class cpu, on the GEMM: a device whose default is the image kernel (native
                                  * float vector width 1: llvmpipe) runs im2col + that GEMM (src/nn/layers/conv.c) */
        int s1 = L->k == 3 && L->stride == 1, kk = L->k * L->k * L->ic, a = m->conv_algo;
        int cpu_auto = a == CT_CONV_AUTO && g_cl.is_cpu && m->gemm.def.variant != CT_GEMM_IMG;
        /* direct: outputs in 8s (and <= 16384 inputs per output); on a CPU under auto where not Winograd */
        int fits = L->oc % 8 == 0 && kk <= 16384, wino_auto = cpu_auto && s1 && L->ic >= 8;
        int direct = fits && (a == CT_CONV_DIRECT || (cpu_auto && (kk <= 32 || !wino_auto)));
        int tile = ct_conv_tile(L);
        assert_int_equal(tile == CT_TILE_DIRECT, direct);
        if (!tile) { /* im2col: its three products reserved at setup */
            int rows = m->batch * L->oh * L->ow;
            assert_true(reserved(m, 0, 0, rows, L->oc, kk) && reserved(m, 1, 0, kk, L->oc, rows) &&
                        reserved(m, 1, 0, 1, L->oc, rows));
        }
        assert_int_equal(tile == CT_TILE_DIRECT ? 0 : tile, direct || !s1                 ? 0
                                  : a == CT_CONV_WINOGRAD       ? 2
                                  : a == CT_CONV_WINOGRAD4 || wino_auto ? 4
                                                                : 0);
    }

    /* forward; with an activation whose gradient reads its input (GELU), first
     * as evaluation runs it (fused into the layer's kernels), then as
     * training does (the kernels linear, then act_fwd keeping the input) */
    float *y = NULL, *want = malloc(nout * 4 + 4), *z = malloc(nout * 4 + 4);
    ref_conv_shape s = conv_shape(L, B);
    int K = L->ih * L->iw * L->ic;
    double atol = 0;
    switch (L->type) {
    case CT_L_CONV:
        ref_conv_forward(&s, want, x, W, bias, L->act);
        ref_conv_forward(&s, z, x, W, bias, CT_ACT_LINEAR);
        atol = sum_atol((size_t)L->k * L->k * L->ic, amax(x, nin), amax(W, L->n_w));
        break;
    case CT_L_MAXPOOL:
        ref_maxpool_forward(want, x, B, L->ih, L->iw, L->ic, L->k, L->stride, L->oh, L->ow);
        break;  /* a copy of one input: exact */
    case CT_L_DENSE:
        ref_gemm(0, 0, B, L->oc, K, L->scale, x, K, W, L->oc, 0.0f, want, L->oc, bias, L->act);
        ref_gemm(0, 0, B, L->oc, K, L->scale, x, K, W, L->oc, 0.0f, z, L->oc, bias, CT_ACT_LINEAR);
        atol = sum_atol((size_t)K, amax(x, nin), amax(W, L->n_w) * fabs(L->scale));
        break;
    }
    int grad_in = ct_activations[L->act].grad_reads_input;
    for (int training = !grad_in; training <= 1; training++) {
        m->training = training;
        assert_true((L->act_in != NULL) == grad_in && ct_fused_act(m, L) == (training && grad_in ? CT_ACT_LINEAR : L->act));
        dev_poison(L->out, nout);
        ct_layer_forward(m, i, B);
        free(y);
        y = dev_read(L->out, nout);
        snprintf(what, sizeof what, "%s forward%s", tag, grad_in ? (training ? " (training)" : " (fused)") : "");
        assert_true(ct_compare(what, y, want, nout, atol ? 1e-4 : 0, atol));
    }
    if (grad_in) { /* the kept input */
        float *kept = dev_read(L->act_in, nout);
        snprintf(what, sizeof what, "%s kept pre-activation", tag);
        assert_true(ct_compare(what, kept, z, nout, 1e-4, atol));
        memcpy(z, kept, nout * 4); /* the backward reads these */
        free(kept);
    }

    /* backward */
    cl_mem dyb = i == m->n_layers - 1 ? m->dlogits : m->layers[i + 1].dx;
    float *dy = dev_rand(dyb, nout, g, 1.0f);
    float *g0 = dev_rand(m->grads, np, g, 1.0f);
    if (L->dx) dev_poison(L->dx, nin);
    if (L->relu_next) { /* the next layer's backward (a maxpool's) applies this layer's ReLU: dy arrives masked */
        for (size_t j = 0; j < nout; j++)
            if (!(y[j] > 0)) dy[j] = 0.0f;
        ct_cl_write(&g_cl, dyb, 0, nout * 4, dy);
    }
    ct_layer_backward(m, i, B);
    float *grads = dev_read(m->grads, np), *dx = L->dx ? dev_read(L->dx, nin) : NULL;
    float *wg = malloc(np * 4 + 4), *wdx = malloc(nin * 4 + 4), *dym = malloc(nout * 4 + 4);
    memcpy(wg, g0, np * 4);
    for (size_t j = 0; j < nout; j++) dym[j] = (float)ref_act_bwd(dy[j], grad_in ? z[j] : y[j], L->act);
    double atol_w = 0, atol_b = 0, atol_x = 1e-6;
    size_t rows = (size_t)B * L->oh * L->ow;
    switch (L->type) {
    case CT_L_CONV:
        ref_conv_backward(&s, wdx, wg + L->w_off, L->n_b ? wg + L->b_off : NULL, dy, grad_in ? z : y, x, W, L->act);
        atol_w = sum_atol(rows, amax(x, nin), 1);
        atol_b = sum_atol(rows, 1, 1);
        atol_x = sum_atol((size_t)L->k * L->k * L->oc, 1, amax(W, L->n_w));
        break;
    case CT_L_MAXPOOL:
        ref_maxpool_backward(wdx, dy, x, B, L->ih, L->iw, L->ic, L->k, L->stride, L->oh, L->ow);
        if (i > 0 && m->layers[i - 1].relu_next) /* and the ReLU's backward before it */
            for (size_t j = 0; j < nin; j++)
                if (!(x[j] > 0)) wdx[j] = 0.0f;
        break;
    case CT_L_DENSE: {
        float *ones = malloc((size_t)B * 4);
        for (int j = 0; j < B; j++) ones[j] = 1;
        ref_gemm(1, 0, K, L->oc, B, L->scale, x, K, dym, L->oc, 1.0f, wg + L->w_off, L->oc, NULL, 0);
        if (L->n_b) ref_gemm(1, 0, 1, L->oc, B, 1.0f, ones, 1, dym, L->oc, 1.0f, wg + L->b_off, L->oc, NULL, 0);
        ref_gemm(0, 1, B, K, L->oc, L->scale, dym, L->oc, W, L->oc, 0.0f, wdx, K, NULL, 0);
        atol_w = sum_atol((size_t)B, amax(x, nin), fabs(L->scale));
        atol_b = sum_atol((size_t)B, 1, 1);
        atol_x = sum_atol((size_t)L->oc, 1, amax(W, L->n_w) * fabs(L->scale));
        free(ones);
        break;
    }
    }
    if (L->n_w) {
        snprintf(what, sizeof what, "%s dW (accumulated)", tag);
        assert_true(ct_compare(what, grads + L->w_off, wg + L->w_off, L->n_w, 1e-4, atol_w));
        snprintf(what, sizeof what, "%s db (accumulated)", tag);
        assert_true(ct_compare(what, grads + L->b_off, wg + L->b_off, L->n_b, 1e-4, atol_b));
    }
    /* no other layer's gradients move */
    for (size_t j = 0; j < np; j++)
        if (j < L->w_off || j >= L->b_off + L->n_b) assert_true(grads[j] == g0[j]);
    if (dx) {
        snprintf(what, sizeof what, "%s dx", tag);
        assert_true(ct_compare(what, dx, wdx, nin, 1e-4, atol_x));
    }
    /* documented: the activation's backward is applied to dy in place (ReLU's exactly) */
    if (L->act) {
        float *dy_after = dev_read(dyb, nout);
        if (L->act == CT_ACT_RELU) assert_memory_equal(dy_after, dym, nout * 4);
        snprintf(what, sizeof what, "%s dy through the activation", tag);
        assert_true(ct_compare(what, dy_after, dym, nout, 1e-5, 1e-6));
        free(dy_after);
    }
    free(x); free(y); free(z); free(want); free(dy); free(g0); free(grads); free(dx); free(wg); free(wdx); free(dym);
}

/* A model whose layer 1 is the layer under test: [maxpool] size=1 (identity)
 * first so that layer 1 gets a dx, a final dense to satisfy the format. */
static void run_single(const char *cfg, int batch, int B, int layer, uint64_t seed, float in_scale) {
    ct_model m;
    make_model(&m, cfg, batch);
    ct_rng g = ct_rng_make(seed, 0x1a7e, (uint64_t)batch);
    float *P = set_random_params(&m, &g, 0);
    float *x = dev_rand(m.input, (size_t)B * m.in_h * m.in_w * m.in_c, &g, in_scale);
    for (int i = 0; i <= layer; i++) check_layer(&m, i, B, &g, P);
    free(P);
    free(x);
    ct_model_free(&m);
}

/* ---------------- conv ---------------- */

typedef struct conv_case { int batch, B, H, W, C, K, k, s, p, act; } conv_case; /* act: CT_ACT_* */

/* the conv cases, run with each --conv */
static const conv_case conv_cases[] = {
    /* batch B  H   W   C   K  k  s  p act */
    {1, 1, 5, 5, 1, 1, 3, 1, 0, 1},
    {2, 2, 7, 9, 3, 5, 3, 1, 1, 2},
    {3, 3, 7, 9, 1, 13, 3, 2, 1, 0},
    {1, 1, 8, 8, 13, 5, 1, 1, 0, 1},
    {2, 2, 9, 7, 5, 13, 5, 2, 2, 1},
    {2, 2, 6, 6, 2, 3, 5, 1, 0, 0},
    {1, 1, 11, 11, 3, 17, 3, 2, 0, 1},
    {5, 3, 4, 4, 7, 33, 3, 1, 1, 2},   /* partial batch */
    {2, 1, 5, 5, 67, 65, 3, 1, 1, 1},  /* more channels than a 64-wide work-group */
    {2, 2, 7, 5, 16, 5, 3, 2, 1, 2},   /* C a multiple of 16: the float16 im2col/col2im paths */
    {1, 1, 6, 6, 48, 3, 3, 1, 1, 1},
    {1, 1, 6, 7, 2, 3, 3, 3, 0, 0},    /* k == s: disjoint windows, the last column unread */
    {1, 1, 8, 8, 3, 4, 2, 3, 1, 1},    /* stride 3 > size 2: inputs no window reads */
};

/* Each case as layer 1 (after an identity [maxpool], so it has a dx) against
 * the reference; first_layer: also as layer 0 (no dx). Returns how many of
 * the cases ran as Winograd or as the direct kernel. */
static int run_conv_cases(const conv_case *cases, size_t n, uint64_t seed, int first_layer) {
    int wino = 0, direct = 0;
    for (size_t c = 0; c < n; c++) {
        const conv_case *t = &cases[c];
        char cfg[512];
        for (int first = 0; first <= first_layer; first++) {
            snprintf(cfg, sizeof cfg,
                     "[net]\nheight=%d\nwidth=%d\nchannels=%d\nclasses=2\n%s"
                     "[conv]\nfilters=%d\nsize=%d\nstride=%d\npad=%d\nactivation=%s\n[dense]\noutputs=2\n[softmax]\n",
                     t->H, t->W, t->C, first ? "" : "[maxpool]\nsize=1\n", t->K, t->k, t->s, t->p,
                     ct_activations[t->act].name);
            run_single(cfg, t->batch, t->B, first ? 0 : 1, seed + c, 1.0f);
        }
        wino += (g_conv_algo == CT_CONV_WINOGRAD || g_conv_algo == CT_CONV_WINOGRAD4) && t->k == 3 && t->s == 1;
        direct += g_conv_algo == CT_CONV_DIRECT && t->K % 8 == 0;
    }
    return wino + direct;
}

/* the cases at pick[] under CLTRAIN_TEST_SUBSET=device (ct_test.h), else all of them, as run_conv_cases */
static int run_conv_pick(const conv_case *cases, size_t n, const int *pick, size_t npick, uint64_t seed, int first_layer) {
    if (!ct_test_subset()) return run_conv_cases(cases, n, seed, first_layer);
    conv_case sel[16];
    assert_true(npick <= sizeof sel / sizeof *sel);
    for (size_t i = 0; i < npick; i++) {
        assert_true(pick[i] >= 0 && (size_t)pick[i] < n);
        sel[i] = cases[pick[i]];
    }
    return run_conv_cases(sel, npick, seed, first_layer);
}

static void test_conv(void **state) {
    (void)state;
    CT_NEED_CL();
    run_conv_cases(conv_cases, sizeof conv_cases / sizeof *conv_cases, 100, 0);
}

/* --conv winograd and winograd4: the same cases (3x3 stride-1 ones through Winograd, the
 * others through im2col as before) and Winograd's own: odd sizes whose last
 * tile is cut, pads 0, 2 and 3, channel counts over a work-group, a partial
 * batch, and the conv as the first layer. */
static void test_conv_winograd(void **state) {
    (void)state;
    CT_NEED_CL();
    static const conv_case wcases[] = {
        /* batch B  H   W   C   K  k  s  p act */
        {2, 2, 7, 5, 3, 4, 3, 1, 0, 0},
        {3, 3, 5, 8, 6, 7, 3, 1, 2, 1},
        {2, 1, 9, 9, 17, 33, 3, 1, 1, 1},
        {2, 1, 9, 6, 24, 29, 3, 1, 1, 1},  /* 16 + 8 channels, 16 + 8 + 5: each vector width */
        {4, 4, 3, 3, 1, 2, 3, 1, 1, 0},    /* one tile, mostly padding */
        {2, 2, 16, 16, 32, 32, 3, 1, 1, 2},
        {1, 1, 11, 6, 70, 66, 3, 1, 1, 0},
        {2, 2, 5, 4, 9, 5, 3, 1, 3, 1},    /* pad 3: the data gradient's pad is -1 */
        /* F(4x4) on a CPU runs these through wino_fused (forward, data gradient or both) */
        {2, 2, 9, 7, 16, 16, 3, 1, 1, 2},  /* cut tiles, 16-wide input path */
        {2, 1, 6, 5, 5, 16, 3, 1, 1, 2},   /* scalar input path; the data gradient unfused (5 outputs) */
        {3, 3, 7, 7, 8, 16, 3, 1, 0, 1},   /* 8-wide input path, pad 0 (data gradient pad 2) */
        {2, 2, 6, 6, 16, 5, 3, 1, 1, 1},   /* the data gradient fused alone */
        {1, 1, 8, 8, 64, 32, 3, 1, 1, 1},  /* 64 input channels: the most wino_fused holds */
        {2, 1, 7, 6, 24, 16, 3, 1, 1, 1},  /* 16 + 8 input channels: unaligned 16-wide tile rows */
        {1, 1, 4, 4, 256, 256, 3, 1, 1, 1}, /* 256 x 256 weights: the weight kernels' work-groups (a crash once) */
        {2, 1, 5, 6, 64, 208, 3, 1, 1, 1}, /* wino_fused's outputs in two blocks (112 + 96: fused_kb) */
        {2, 1, 9, 7, 24, 64, 3, 1, 1, 1},  /* cifar-fast's first conv: its data gradient fused to 24 outputs (16 + 8) */
        {3, 2, 13, 11, 16, 16, 3, 1, 1, 2}, /* 36 tiles: whole groups of 8 and of 16 tiles a work-item and a part */
    };
    static const int algos[] = {CT_CONV_WINOGRAD, CT_CONV_WINOGRAD4};
    /* CLTRAIN_TEST_SUBSET=device: four of the Winograd cases (17 -> 33 channels: the scalar channel
     * tails; 24 -> 29: the 8-wide ones; pad 3; 64 -> 32, once NaN where loops are capped), each tile size,
     * and no shared cases (those not 3x3 stride 1 are test_conv's im2col); the unfused and 16-tile F(4x4)
     * passes are skipped where the device caps loops, since F(4x4) runs unfused there anyway */
    static const int wpick[] = {2, 3, 7, 12};
    int subset = ct_test_subset(), capped = ct_cl_loop_limit(&g_cl) > 0;
    /* F(2x2), F(4x4) fused with 8 tiles a work-item, never fused, fused with 16 (each CPU's choice: wino_ft) */
    static const char *const pass[] = {"", " fused, 8 tiles a work-item", " unfused", " fused, 16 tiles a work-item"};
    static const int ft[] = {0, 8, 0, 16};
    for (int a = 0; a < 4; a++) {
        if (subset && a >= 2 && capped) continue;
        g_conv_algo = algos[a > 0];
        g_wino_unfused = a == 2;
        g_wino_ft = ft[a];
        int n = subset ? 0 : run_conv_cases(conv_cases, sizeof conv_cases / sizeof *conv_cases, 300 + 1000 * a, 0);
        n += run_conv_pick(wcases, sizeof wcases / sizeof *wcases, wpick, 4, 400 + 1000 * a, 1);
        fprintf(stderr, "# F(%dx%d, 3x3)%s: %d cases ran as Winograd\n", 2 + 2 * (a > 0), 2 + 2 * (a > 0),
                pass[a], n);
        assert_int_equal(n, subset ? 4 : 5 + 18);
    }
    g_wino_unfused = 0;
    g_wino_ft = 0;
    /* auto: check_layer asserts the rule (Winograd from 8 input channels) on each */
    g_conv_algo = CT_CONV_AUTO;
    run_conv_pick(wcases, sizeof wcases / sizeof *wcases, wpick, 4, 500, 0);
    g_conv_algo = CT_CONV_IM2COL;
}

/* --conv direct (kernels/conv_direct.cl): the shared cases (those it fits
 * through it, the others im2col) and its own, each also as the first layer:
 * windows up to 32 inputs in registers and larger ones in runs of 8 channels,
 * strides 1-3, pads 0-2, 16-64 outputs (its passes of 1-4 output vectors),
 * fewer pixels than its weight-gradient strips, a partial batch. Then --conv
 * auto, whose rule (direct on a CPU where not Winograd) check_layer asserts. */
static void test_conv_direct(void **state) {
    (void)state;
    CT_NEED_CL();
    static const conv_case dcases[] = {
        /* batch B  H   W   C   K  k  s  p act */
        {2, 2, 7, 9, 3, 16, 3, 1, 1, 2},   /* RGB 3x3: interior and border windows */
        {3, 3, 28, 28, 1, 32, 3, 1, 0, 1}, /* mnist-cnn's first layer */
        {1, 1, 9, 7, 1, 48, 5, 2, 2, 0},   /* 5x5 stride 2, three output vectors */
        {2, 1, 6, 5, 2, 64, 3, 2, 1, 2},   /* four output vectors, partial batch */
        {1, 1, 5, 5, 3, 16, 3, 1, 0, 1},   /* 9 pixels: empty strips */
        {2, 2, 4, 4, 1, 16, 4, 3, 1, 0},   /* 4x4 windows at stride 3 */
        {5, 5, 9, 9, 3, 32, 1, 1, 0, 1},   /* 1x1 */
        {1, 1, 8, 8, 2, 16, 4, 1, 2, 1},   /* 32 inputs per output: the most in registers */
        /* more inputs per output: the weight gradient per tap and run of up to 8 channels */
        {2, 2, 6, 6, 4, 16, 3, 1, 1, 1},   /* 36 inputs, runs of 4 */
        {2, 2, 9, 8, 3, 64, 5, 1, 2, 2},   /* cifar-tf's first layer: 5x5 over RGB */
        {1, 1, 6, 6, 13, 16, 3, 2, 1, 0},  /* 13 channels: runs of 1 */
        {1, 1, 7, 7, 12, 32, 3, 1, 1, 1},  /* 12 channels: runs of 6; 3x3 stride 1, Winograd's under auto */
        {2, 2, 9, 9, 16, 32, 3, 2, 1, 1},  /* resnet20's stride-2 layers */
        {2, 1, 8, 8, 32, 64, 3, 2, 1, 1},  /* four output vectors, two per pass; partial batch */
        {1, 1, 7, 6, 8, 48, 5, 1, 2, 0},   /* 5x5, three output vectors in one pass */
        {3, 3, 5, 5, 24, 16, 1, 1, 0, 1},  /* 1x1 with 24 channels: 24 inputs, in registers */
        {2, 2, 6, 7, 40, 16, 1, 2, 0, 1},  /* 1x1 stride 2, 40 channels: five runs of 8 */
        {2, 2, 9, 9, 16, 16, 3, 1, 1, 1},  /* 3x3 stride 1: Winograd's under auto */
        /* RGB 3x3, 56x56 at batch 16: 50176 pixels, whose weight-gradient strips a device that ends a
         * work-item's loops after 65535 iterations (ct_cl_loop_limit: llvmpipe, 8 compute units) splits
         * further by their worst-case loop count (the build of the first case: no compilation more) */
        {16, 16, 56, 56, 3, 16, 3, 1, 1, 2},
        /* outputs in 8s, not 16s: rows of KO floats not 64-byte aligned, each row's last vector half used */
        {2, 2, 9, 8, 3, 24, 2, 1, 0, 2},   /* cifar-fast's whitening layer: 2x2 over RGB to 24, GELU */
        {1, 1, 7, 6, 2, 8, 3, 2, 1, 1},    /* 8 outputs: one half vector */
        {2, 1, 6, 6, 16, 40, 3, 1, 1, 0},  /* 144 inputs, 40 outputs: direct_dw_taps; direct_dx (16 channels) */
    };
    /* CLTRAIN_TEST_SUBSET=device: every kernel of conv_direct.cl in two builds (each shape is a build of its
     * own, 30-60 s on llvmpipe): RGB 3x3 with borders (direct_fwd, direct_dw), the same at 56x56 (long
     * strips), 32 -> 64 at stride 2 over four output vectors (direct_dw_taps, direct_wt, direct_dx), and the
     * whitening layer's 2x2 to 24 outputs (half vectors) */
    static const int dpick[] = {0, 18, 13, 19};
    int subset = ct_test_subset();
    g_conv_algo = CT_CONV_DIRECT;
    int n = subset ? 0 : run_conv_cases(conv_cases, sizeof conv_cases / sizeof *conv_cases, 600, 0);
    n += run_conv_pick(dcases, sizeof dcases / sizeof *dcases, dpick, 4, 700, 1);
    fprintf(stderr, "# --conv direct: %d cases ran as the direct kernel\n", n);
    assert_int_equal(n, subset ? 4 : 22);
    g_conv_algo = CT_CONV_AUTO;
    run_conv_pick(dcases, sizeof dcases / sizeof *dcases, dpick, 4, 800, 1);
    g_conv_algo = CT_CONV_IM2COL;
}

/* bias=0 under each --conv: no bias read in the forward, none summed in the
 * backward, and no parameter after the weights touched (check_layer), at the
 * fast CIFAR model's shapes (a 2x2 over RGB with pad 0, 3x3 24 -> 64 and
 * 64 -> 64) and small odd ones */
static void test_conv_no_bias(void **state) {
    (void)state;
    CT_NEED_CL();
    static const conv_case cases[] = {
        /* batch B  H   W   C   K  k  s  p act */
        {2, 2, 8, 8, 3, 24, 2, 1, 0, 2},
        {2, 1, 7, 7, 24, 64, 3, 1, 1, 0},
        {1, 1, 6, 6, 64, 64, 3, 1, 1, 0},
        {2, 2, 5, 7, 3, 16, 3, 1, 1, 1},
        {3, 2, 6, 5, 5, 7, 3, 2, 1, 0},
    };
    static const int algos[] = {CT_CONV_IM2COL, CT_CONV_WINOGRAD, CT_CONV_WINOGRAD4, CT_CONV_DIRECT, CT_CONV_AUTO};
    /* CLTRAIN_TEST_SUBSET=device: RGB 3x3, whose direct build test_conv_direct's subset has made */
    static const size_t pick[] = {3};
    int wino = 0, direct = 0, subset = ct_test_subset();
    for (size_t a = 0; a < sizeof algos / sizeof *algos; a++) {
        g_conv_algo = algos[a];
        for (size_t i = 0; i < (subset ? 1 : sizeof cases / sizeof *cases); i++) {
            size_t c = subset ? pick[i] : i;
            const conv_case *t = &cases[c];
            char cfg[512];
            snprintf(cfg, sizeof cfg,
                     "[net]\nheight=%d\nwidth=%d\nchannels=%d\nclasses=2\n[maxpool]\nsize=1\n"
                     "[conv]\nfilters=%d\nsize=%d\nstride=%d\npad=%d\nactivation=%s\nbias=0\n[dense]\noutputs=2\n[softmax]\n",
                     t->H, t->W, t->C, t->K, t->k, t->s, t->p, ct_activations[t->act].name);
            ct_model m;
            make_model(&m, cfg, t->batch);
            assert_int_equal(m.layers[1].n_b, 0);
            assert_int_equal(m.layers[2].w_off, m.layers[1].w_off + m.layers[1].n_w);
            wino += ct_conv_tile(&m.layers[1]) > CT_TILE_DIRECT;
            direct += ct_conv_tile(&m.layers[1]) == CT_TILE_DIRECT;
            ct_model_free(&m);
            run_single(cfg, t->batch, t->B, 1, 900 + 10 * a + c, 1.0f);
        }
    }
    fprintf(stderr, "# bias=0: %d cases ran as Winograd, %d as the direct kernel\n", wino, direct);
    assert_true(subset ? wino >= 2 && direct >= 1 : wino >= 4 && direct >= 3);
    g_conv_algo = CT_CONV_IM2COL;
}

/* ---------------- maxpool ---------------- */

typedef struct pool_case { int B, H, W, C, k, s; } pool_case;

static void test_maxpool(void **state) {
    (void)state;
    CT_NEED_CL();
    static const pool_case cases[] = {
        {1, 4, 4, 1, 2, 2}, {2, 7, 9, 3, 2, 2},  /* odd sizes: floor mode drops the last row/column */
        {1, 7, 7, 2, 3, 2},                      /* overlapping windows */
        {3, 5, 5, 1, 2, 2}, {2, 9, 8, 17, 3, 1}, {1, 6, 6, 67, 2, 2},
        {1, 8, 8, 2, 2, 3},                      /* stride 3 > size 2: inputs in no window get 0 */
        {4, 26, 26, 64, 2, 2},                   /* mnist-cnn's pool at batch 4 (C=64) */
        {2, 7, 9, 16, 3, 2}, {1, 9, 7, 32, 2, 2}, /* C a multiple of 16: the float16 paths */
    };
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        const pool_case *t = &cases[c];
        char cfg[512];
        snprintf(cfg, sizeof cfg,
                 "[net]\nheight=%d\nwidth=%d\nchannels=%d\nclasses=2\n[maxpool]\nsize=1\n"
                 "[maxpool]\nsize=%d\nstride=%d\n[dense]\noutputs=2\n[softmax]\n",
                 t->H, t->W, t->C, t->k, t->s);
        run_single(cfg, t->B, t->B, 1, 200 + c, 1.0f);
    }
}

/* A maxpool after a ReLU that nothing else reads does that ReLU's backward
 * (maxima not above 0 pass no gradient), and the ReLU layer skips its own;
 * inputs of both signs, overlapping and disjoint windows, scalar and float16
 * channel paths. A ReLU output that a shortcut also reads keeps its own pass. */
static void test_maxpool_after_relu(void **state) {
    (void)state;
    CT_NEED_CL();
    static const pool_case cases[] = {{2, 7, 7, 3, 3, 2}, {2, 8, 6, 16, 2, 2}, {3, 9, 9, 32, 3, 2}, {1, 6, 6, 5, 2, 1}};
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        const pool_case *t = &cases[c];
        char cfg[512];
        snprintf(cfg, sizeof cfg,
                 "[net]\nheight=%d\nwidth=%d\nchannels=%d\nclasses=2\n[maxpool]\nsize=1\n"
                 "[conv]\nfilters=%d\nsize=1\nactivation=relu\n[maxpool]\nsize=%d\nstride=%d\n"
                 "[dense]\noutputs=2\n[softmax]\n",
                 t->H, t->W, t->C, t->C, t->k, t->s);
        ct_model m;
        make_model(&m, cfg, t->B);
        assert_int_equal(m.layers[1].relu_next, 1);
        assert_int_equal(m.layers[3].relu_next, 0);
        ct_rng g = ct_rng_make(350 + c, 0, 0);
        float *P = set_random_params(&m, &g, 0);
        float *x = dev_rand(m.input, (size_t)t->B * t->H * t->W * t->C, &g, 1.0f);
        for (int i = 0; i <= 2; i++) check_layer(&m, i, t->B, &g, P);
        free(x); free(P);
        ct_model_free(&m);
    }
    ct_model m;
    make_model(&m, "[net]\nheight=4\nwidth=4\nchannels=2\nclasses=2\n[maxpool]\nsize=1\n"
                   "[conv]\nfilters=2\nsize=1\nactivation=relu\n[maxpool]\nsize=1\n[shortcut]\nfrom=-2\n"
                   "[dense]\noutputs=2\n[softmax]\n", 2);
    assert_int_equal(m.layers[1].relu_next, 0);
    ct_model_free(&m);
}

/* Many exact ties (inputs in {-1, 0, 1}, or all equal): the first maximum in
 * (ky, kx) order wins in forward and backward, as in the reference. */
static void test_maxpool_ties(void **state) {
    (void)state;
    CT_NEED_CL();
    static const int channels[] = {3, 16, 32};  /* scalar and float16 paths */
    for (size_t ci = 0; ci < sizeof channels / sizeof *channels; ci++) {
        int C = channels[ci];
        char cfg[256];
        snprintf(cfg, sizeof cfg, "[net]\nheight=7\nwidth=7\nchannels=%d\nclasses=2\n[maxpool]\nsize=1\n"
                                  "[maxpool]\nsize=3\nstride=2\n[dense]\noutputs=2\n[softmax]\n", C);
        ct_model m;
        make_model(&m, cfg, 2);
        ct_rng g = ct_rng_make(300, (uint64_t)C, 0);
        float *P = set_random_params(&m, &g, 0);
        size_t n = (size_t)2 * 7 * 7 * C;
        float *x = malloc(n * 4);
        for (size_t i = 0; i < n; i++) x[i] = (float)ct_rng_below(&g, 3) - 1.0f;
        for (size_t i = 0; i < (size_t)7 * 7 * C; i++) x[i] = -2.0f;  /* sample 0: all equal and negative */
        ct_cl_write(&g_cl, m.input, 0, n * 4, x);
        check_layer(&m, 0, 2, &g, P);
        check_layer(&m, 1, 2, &g, P);
        free(x); free(P);
        ct_model_free(&m);
    }
}

/* ---------------- dense ---------------- */

typedef struct dense_case { int B, h, w, c, O, classes, act; } dense_case;

static void test_dense(void **state) {
    (void)state;
    CT_NEED_CL();
    static const dense_case cases[] = {
        {1, 1, 1, 1, 1, 2, 0}, {3, 1, 1, 7, 5, 3, 1}, {5, 3, 5, 2, 17, 11, 2},
        {2, 1, 1, 33, 65, 2, 0}, {7, 1, 1, 100, 19, 13, 1}, {1, 2, 3, 5, 129, 31, 2},
    };
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        const dense_case *t = &cases[c];
        char cfg[512];
        snprintf(cfg, sizeof cfg,
                 "[net]\nheight=%d\nwidth=%d\nchannels=%d\nclasses=%d\n[maxpool]\nsize=1\n"
                 "[dense]\noutputs=%d\nactivation=%s\n[dense]\noutputs=%d\n[softmax]\n",
                 t->h, t->w, t->c, t->classes, t->O, ct_activations[t->act].name, t->classes);
        run_single(cfg, t->B, t->B, 2, 400 + c, 1.0f);  /* layer 1 (dy from dx) and 2 (dy = dlogits) */
    }
}

/* [dense] bias=0 and scale=1/9 (the fast CIFAR model's head: logits / 9):
 * forward, dW and dx against the reference with alpha = scale */
static void test_dense_scale(void **state) {
    (void)state;
    CT_NEED_CL();
    static const dense_case cases[] = {{3, 1, 1, 7, 5, 3, 0}, {5, 1, 1, 256, 10, 10, 0}, {2, 2, 3, 5, 17, 4, 2}};
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        const dense_case *t = &cases[c];
        char cfg[512];
        snprintf(cfg, sizeof cfg,
                 "[net]\nheight=%d\nwidth=%d\nchannels=%d\nclasses=%d\n[maxpool]\nsize=1\n"
                 "[dense]\noutputs=%d\nactivation=%s\nbias=0\nscale=1/9\n[dense]\noutputs=%d\nbias=0\nscale=-2.5\n[softmax]\n",
                 t->h, t->w, t->c, t->classes, t->O, ct_activations[t->act].name, t->classes);
        ct_model m;
        make_model(&m, cfg, t->B);
        assert_true(m.layers[1].scale == (float)(1.0 / 9.0) && m.layers[2].scale == -2.5f);
        assert_true(m.layers[1].n_b == 0 && m.layers[2].n_b == 0);
        assert_int_equal(m.n_params, m.layers[1].n_w + m.layers[2].n_w);
        ct_model_free(&m);
        run_single(cfg, t->B, t->B, 2, 450 + c, 1.0f);
    }
}

/* init=dirac: the first min(in, out) filters are identities (a 1 at the
 * centre tap of their own channel), the rest PyTorch's default
 * U(-1/sqrt(fan_in), 1/sqrt(fan_in)), as is init=uniform everywhere; the
 * biases start at 0 */
static void test_init_dirac(void **state) {
    (void)state;
    CT_NEED_CL();
    ct_model m;
    make_model(&m, "[net]\nheight=6\nwidth=6\nchannels=24\nclasses=10\n[conv]\nfilters=64\nsize=3\npad=1\n"
                   "init=dirac\nbias=0\n[conv]\nfilters=16\nsize=3\npad=1\ninit=dirac\n[dense]\noutputs=10\n"
                   "init=uniform\nbias=0\n[softmax]\n", 1);
    ct_model_init_weights(&m, 5);
    float *p = dev_read(m.params, m.n_params);
    for (int i = 0; i < 3; i++) {
        const ct_layer *L = &m.layers[i];
        size_t fan_in = L->n_w / (size_t)L->oc;
        int n = i == 2 ? 0 : L->ic < L->oc ? L->ic : L->oc, ones = 0;
        double bound = 1.0 / sqrt((double)fan_in), ss = 0, cnt = 0;
        for (size_t j = 0; j < fan_in; j++)
            for (int o = 0; o < L->oc; o++) {
                float w = p[L->w_off + j * (size_t)L->oc + (size_t)o];
                if (o < n) { /* j = (ky * k + kx) * ic + c: the centre tap of channel o */
                    int centre = (int)j == (L->k / 2 * L->k + L->k / 2) * L->ic + o;
                    assert_true(w == (centre ? 1.0f : 0.0f));
                    ones += centre;
                } else {
                    assert_true(fabs(w) <= bound);
                    ss += (double)w * w;
                    cnt++;
                }
            }
        assert_int_equal(ones, n);
        if (cnt) { /* U(-b, b) has variance b^2 / 3 */
            double var = ss / cnt, want = bound * bound / 3;
            fprintf(stderr, "# layer %d init: %d identity filters, the rest variance %.3g (uniform: %.3g)\n", i, n, var, want);
            assert_true(fabs(var - want) < 0.1 * want);
        }
        for (size_t j = 0; j < L->n_b; j++) assert_true(p[L->b_off + j] == 0.0f);
    }
    free(p);
    ct_model_free(&m);
}

/* ---------------- mnist-cnn at batch 4 ---------------- */

static void test_mnist_cnn_shapes(void **state) {
    (void)state;
    CT_NEED_CL();
    ct_model m;
    int rc = ct_model_load(&m, "mnist-cnn");
    assert_int_equal(rc, 0);
    rc = ct_model_setup(&m, &g_cl, 4, CT_GEMM_NATIVE);
    if (rc) fprintf(stderr, "# setup: %s\n", ct_last_error());
    assert_int_equal(rc, 0);
    ct_rng g = ct_rng_make(500, 0, 0);
    float *P = set_random_params(&m, &g, 1);
    float *x = dev_rand(m.input, 4 * 28 * 28, &g, 1.0f);
    /* 28x28x1 -> 32 3x3, 26x26x32 -> 64 3x3, maxpool 2, dense 9216 -> 128, 128 -> 10;
     * each layer's reference runs on the device's output of the layer before */
    for (int i = 0; i < m.n_layers; i++) check_layer(&m, i, 4, &g, P);
    free(x); free(P);
    ct_model_free(&m);
}

/* ---------------- softmax cross-entropy ---------------- */

/* e: label smoothing */
static void check_xent(ct_model *m, int B, const float *z, const int32_t *lab, float e, const char *tag) {
    int C = m->n_classes;
    m->label_smoothing = e;
    size_t n = (size_t)B * C;
    ct_layer *last = &m->layers[m->n_layers - 1];
    ct_cl_write(&g_cl, last->out, 0, n * 4, z);
    ct_cl_write(&g_cl, m->labels, 0, (size_t)B * 4, lab);
    dev_poison(m->loss, (size_t)m->batch);
    dev_poison(m->dlogits, (size_t)m->batch * C);
    int32_t *pred = malloc((size_t)m->batch * 4);
    memset(pred, 0xff, (size_t)m->batch * 4);
    ct_cl_write(&g_cl, m->pred, 0, (size_t)m->batch * 4, pred);
    ct_model_loss(m, B);
    float *loss = dev_read(m->loss, (size_t)B), *dl = dev_read(m->dlogits, n);
    ct_cl_read(&g_cl, m->pred, 0, (size_t)B * 4, pred);
    float *wloss = malloc((size_t)B * 4), *wdl = malloc(n * 4);
    double total = 0;
    for (int b = 0; b < B; b++) {
        double l = ref_softmax_xent_smooth(wdl + (size_t)b * C, z + (size_t)b * C, lab + b, 1, C, e, NULL);
        for (int j = 0; j < C; j++) wdl[(size_t)b * C + j] /= (float)B;  /* the mean over B rows */
        wloss[b] = (float)l;
        total += l;
        /* the prediction is the first maximum */
        int arg = 0;
        for (int j = 1; j < C; j++)
            if (z[(size_t)b * C + j] > z[(size_t)b * C + arg]) arg = j;
        if (pred[b] != arg) fprintf(stderr, "# %s: pred[%d] = %d, want %d\n", tag, b, pred[b], arg);
        assert_int_equal(pred[b], arg);
    }
    char what[128];
    /* float log-sum-exp: a few ulps of the largest logit plus a few of the loss; smoothing
     * adds e/C times a float sum of C gaps of up to 2*zmax */
    double zmax = amax(z, n) * (1.0 + 0.3 * e * C);
    snprintf(what, sizeof what, "%s loss", tag);
    assert_true(ct_compare(what, loss, wloss, (size_t)B, 1e-5, 1e-6 + 4e-7 * zmax));
    snprintf(what, sizeof what, "%s dlogits", tag);
    assert_true(ct_compare(what, dl, wdl, n, 1e-4, 1e-6 / B));
    double got_total = ct_model_read_results(m, B, NULL);
    assert_true(fabs(got_total - total) <= 1e-5 * fabs(total) + B * (1e-6 + 4e-7 * zmax));
    free(pred); free(loss); free(dl); free(wloss); free(wdl);
}

static void test_softmax_xent(void **state) {
    (void)state;
    CT_NEED_CL();
    static const int shapes[][3] = {{1, 1, 2}, {5, 5, 10}, {16, 13, 37}, {64, 64, 10}};  /* batch, B, C */
    static const float scales[] = {1, 5, 20}, smooth[] = {0.1f, 0.0f, 0.35f};
    for (size_t si = 0; si < sizeof shapes / sizeof *shapes; si++) {
        int batch = shapes[si][0], B = shapes[si][1], C = shapes[si][2];
        char cfg[256];
        snprintf(cfg, sizeof cfg, "[net]\nheight=1\nwidth=1\nchannels=%d\nclasses=%d\n[maxpool]\nsize=1\n[dense]\noutputs=%d\n[softmax]\n",
                 C, C, C);
        ct_model m;
        make_model(&m, cfg, batch);
        ct_rng g = ct_rng_make(600 + si, 0, 0);
        float *z = malloc((size_t)B * C * 4);
        int32_t *lab = malloc((size_t)B * 4);
        for (size_t k = 0; k < sizeof scales / sizeof *scales; k++) {
            ct_fill_rand(z, (size_t)B * C, &g, scales[k]);
            for (int b = 0; b < B; b++) lab[b] = (int32_t)ct_rng_below(&g, (uint32_t)C);
            char tag[64];
            snprintf(tag, sizeof tag, "softmax_xent B%d C%d scale %g smoothing %g", B, C, scales[k], smooth[k]);
            check_xent(&m, B, z, lab, smooth[k], tag);
        }
        free(z); free(lab);
        ct_model_free(&m);
    }
}

/* logits of magnitude 1e4: no overflow, no log(0), no NaN; ties predict the first */
static void test_softmax_xent_large(void **state) {
    (void)state;
    CT_NEED_CL();
    ct_model m;
    make_model(&m, "[net]\nheight=1\nwidth=1\nchannels=3\nclasses=3\n[maxpool]\nsize=1\n[dense]\noutputs=3\n[softmax]\n", 6);
    float z[6 * 3] = {1e4f, 9999.0f, -1e4f, 1e4f, 9999.0f, -1e4f, -1e4f, -1e4f, -1e4f,
                      -1e4f, 1e4f, 1e4f, 3e4f, -3e4f, 0.0f, 0.5f, 0.5f, -0.5f};
    int32_t lab[6] = {1, 2, 0, 0, 1, 1};
    check_xent(&m, 6, z, lab, 0.2f, "softmax_xent large logits, smoothing 0.2");
    check_xent(&m, 6, z, lab, 0.0f, "softmax_xent large logits");
    float loss[6];
    ct_cl_read(&g_cl, m.loss, 0, sizeof loss, loss);
    double l1 = log1p(exp(-1.0));
    double want[5] = {1 + l1, 2e4 + l1, log(3.0), 2e4 + log(2.0), 6e4};
    for (int b = 0; b < 5; b++) {
        assert_true(isfinite(loss[b]));
        assert_true(fabs(loss[b] - want[b]) <= 1e-6 * want[b] + 4e-7 * 3e4);
    }
    float dl[18];
    ct_cl_read(&g_cl, m.dlogits, 0, sizeof dl, dl);
    for (int i = 0; i < 18; i++) assert_true(isfinite(dl[i]));
    ct_model_free(&m);
}

/* ---------------- optimizers ---------------- */

static const char *optim_cfg = "[net]\nheight=5\nwidth=5\nchannels=2\nclasses=4\n[conv]\nfilters=3\nsize=3\nactivation=relu\n"
                               "[maxpool]\nsize=2\nstride=1\n[dense]\noutputs=4\n[softmax]\n";

/* the float64 reference of one step of o's optimizer over [n] values; wd applies to all of them */
static void ref_optim(const ct_optim_hparams *o, float lr, float *P, float *M1, float *M2, const float *G, long n, float wd, int t) {
    switch (o->kind) {
    case CT_OPT_ADAM: ref_adam(P, M1, M2, G, n, lr, o->b1, o->b2, o->eps, wd, t); break;
    case CT_OPT_ADAMW: ref_adamw(P, M1, M2, G, n, lr, o->b1, o->b2, o->eps, (double)wd * lr / o->lr, t); break;
    case CT_OPT_SGD: ref_sgd(P, M1, G, n, lr, o->momentum, wd); break;
    case CT_OPT_NESTEROV: ref_nesterov(P, M1, G, n, lr, o->momentum, wd); break;
    default: fail();
    }
}

static void ref_step_segments(ct_model *m, const ct_optim_hparams *o, float lr, float *P, float *M1, float *M2, const float *G, int t) {
    for (int i = 0; i < m->n_layers; i++) {
        ct_layer *L = &m->layers[i];
        if (!L->n_w) continue;
        /* weight decay applies to weights only (the device's decay_mask) */
        ref_optim(o, lr, P + L->w_off, M1 + L->w_off, M2 + L->w_off, G + L->w_off, (long)L->n_w, o->wd, t);
        ref_optim(o, lr, P + L->b_off, M1 + L->b_off, M2 + L->b_off, G + L->b_off, (long)L->n_b, 0.0f, t);
    }
}

/* five steps of o's optimizer through the interface against its reference;
 * the learning rate falls as a schedule would (AdamW's decay follows it) */
static void check_optim_vw(const ct_optim_hparams *o, const char *name, int vw) {
    ct_model m;
    make_model(&m, optim_cfg, 2);
    ct_model_init_weights(&m, 7);  /* step 0 */
    ct_optim_state opt;
    assert_int_equal(ct_optim_setup_vw(&opt, &m, o, vw), 0); /* zero state */
    int ns = opt.type->n_state;
    assert_int_equal(ns, o->kind == CT_OPT_ADAM || o->kind == CT_OPT_ADAMW ? 2 : 1);
    ct_rng g = ct_rng_make(700, (uint64_t)o->kind, 0);
    size_t n = m.n_params;
    float *P = set_random_params(&m, &g, 0);
    float *M1 = calloc(n, 4), *M2 = calloc(n, 4), *S[2] = {M1, M2};
    for (int t = 1; t <= 5; t++) {
        float *G = malloc(n * 4);
        ct_fill_rand(G, n, &g, t == 3 ? 1e-3f : 1.0f);
        for (size_t j = 0; j < n; j += 7) G[j] = 0;  /* zero gradients: Adam's 0/(0+eps) */
        ct_cl_write(&g_cl, m.grads, 0, n * 4, G);
        float lr = o->lr * (t <= 3 ? 1.0f : 0.25f);
        ct_optim_step(&opt, lr);
        ref_step_segments(&m, o, lr, P, M1, M2, G, t);
        float *gp = dev_read(m.params, n);
        char what[96];
        /* one float update of values of magnitude <= ~1 */
        snprintf(what, sizeof what, "%s (%d per work-item) step %d params", name, opt.vw, t);
        assert_true(ct_compare(what, gp, P, n, 1e-5, 1e-6));
        for (int i = 0; i < ns; i++) {
            float *got = ct_xmalloc(n * 4);
            ct_optim_get_state(&opt, i, got);
            snprintf(what, sizeof what, "%s (%d per work-item) step %d state %d", name, opt.vw, t, i + 1);
            assert_true(ct_compare(what, got, S[i], n, 1e-5, i ? 1e-9 : 1e-7));
            free(got);
        }
        free(G); free(gp);
    }
    assert_int_equal(m.step, 5);
    /* a NaN gradient: the step leaves parameters and state as they were */
    float *G = calloc(n, 4), *before = dev_read(m.params, n);
    G[n / 2] = NAN;
    ct_cl_write(&g_cl, m.grads, 0, n * 4, G);
    ct_optim_step(&opt, o->lr);
    int32_t pred[2];
    ct_model_read_results(&m, 2, pred);
    assert_int_equal(m.nonfinite, 1);
    float *after = dev_read(m.params, n);
    assert_memory_equal(before, after, n * 4);
    free(G); free(before); free(after);
    free(P); free(M1); free(M2);
    ct_optim_free(&opt);
    ct_model_free(&m);
}

/* both kernel shapes: a CPU's 16 parameters per work-item (the last vector
 * partial: the test model has 109) and a GPU's one */
static void check_optim(const ct_optim_hparams *o, const char *name) {
    check_optim_vw(o, name, 16);
    check_optim_vw(o, name, 1);
}

static void test_adam(void **state) {
    (void)state;
    CT_NEED_CL();
    ct_optim_hparams o = {.kind = CT_OPT_ADAM, .lr = 1e-2f, .b1 = 0.9f, .b2 = 0.999f, .eps = 1e-8f, .wd = 0.1f};
    check_optim(&o, "adam");
}

static void test_adamw(void **state) {
    (void)state;
    CT_NEED_CL();
    /* the decay per step is wd at the base rate, not lr*wd: 1e-2 moves weights as much as adam's 1.0 would */
    ct_optim_hparams o = {.kind = CT_OPT_ADAMW, .lr = 1e-2f, .b1 = 0.9f, .b2 = 0.999f, .eps = 1e-8f, .wd = 1e-2f};
    check_optim(&o, "adamw");
}

static void test_sgd(void **state) {
    (void)state;
    CT_NEED_CL();
    ct_optim_hparams o = {.kind = CT_OPT_SGD, .lr = 5e-2f, .momentum = 0.9f, .wd = 0.1f};
    check_optim(&o, "sgd");
    ct_optim_hparams plain = {.kind = CT_OPT_SGD, .lr = 0.1f, .momentum = 0.0f, .wd = 0.0f};
    check_optim(&plain, "sgd (no momentum, no decay)");
}

static void test_nesterov(void **state) {
    (void)state;
    CT_NEED_CL();
    ct_optim_hparams o = {.kind = CT_OPT_NESTEROV, .lr = 5e-2f, .momentum = 0.9f, .wd = 0.1f};
    check_optim(&o, "nesterov");
}

/* The lookahead (cltrain/lookahead.h). 1. The kernel against ref_lookahead in
 * both shapes (the last vector partial). 2. The rule over a run of 3 epochs
 * of 9 steps with the average from epoch 1 on, the optimizer's steps stood in
 * for by fresh random parameters each step: the parameters after each step
 * against airbench94's loop written out here in double (tools/pytorch_airbench.py:
 * from the start epoch, at every 5th step the average starts as a copy, then
 * lerps towards the weights with weight 1 - 0.95^5 (s/total)^3 and the weights
 * copy it; at each epoch end the weights become the average). The kernel's
 * start epoch is CT_LOOKAHEAD_START, so the rule's run is shifted by it. */
static void check_lookahead_vw(int vw) {
    ct_model m;
    make_model(&m, optim_cfg, 2);
    ct_optim_hparams hp = {.kind = CT_OPT_NESTEROV, .lr = 0.1f, .momentum = 0.9f};
    ct_optim_state opt;
    assert_int_equal(ct_optim_setup_vw(&opt, &m, &hp, vw), 0);
    ct_lookahead la;
    assert_int_equal(ct_lookahead_setup(&la, &opt, 0.95f), 0);
    size_t n = m.n_params;
    ct_rng g = ct_rng_make(710, (uint64_t)vw, 0);
    char what[96];
    /* 1. one update */
    float *P = set_random_params(&m, &g, 0), *A = malloc(n * 4);
    ct_fill_rand(A, n, &g, 1.0f);
    ct_lookahead_set(&la, A);
    ct_lookahead_update(&la, 0.3f);
    ref_lookahead(P, A, (long)n, 0.3f);
    float *gp = dev_read(m.params, n), *ga = malloc(n * 4);
    ct_lookahead_get(&la, ga);
    snprintf(what, sizeof what, "lookahead (%d per work-item) params", opt.vw);
    assert_true(ct_compare(what, gp, P, n, 1e-6, 1e-7));
    snprintf(what, sizeof what, "lookahead (%d per work-item) average", opt.vw);
    assert_true(ct_compare(what, ga, P, n, 1e-6, 1e-7));
    free(gp); free(P); free(A);
    ct_lookahead_free(&la);
    /* 2. the rule, from a fresh start */
    assert_int_equal(ct_lookahead_setup(&la, &opt, 0.95f), 0);
    const int spe = 9, epochs = CT_LOOKAHEAD_START + 3;
    const int64_t total = (int64_t)spe * epochs;
    double *W = calloc(n, sizeof(double)), *E = calloc(n, sizeof(double));
    int have = 0;
    float *fresh = malloc(n * 4);
    for (int64_t step = 0; step < total;) {
        int epoch = (int)(step / spe);
        int64_t g0 = step;
        ct_fill_rand(fresh, n, &g, 1.0f); /* the optimizer's step */
        ct_model_set_params(&m, fresh);
        for (size_t j = 0; j < n; j++) W[j] = fresh[j];
        step++;
        if (epoch >= CT_LOOKAHEAD_START && step % 5 == 0) {
            if (!have) memcpy(E, W, n * sizeof(double));
            else {
                double rho = pow(0.95, 5) * pow((double)step / (double)total, 3);
                for (size_t j = 0; j < n; j++) W[j] = E[j] = E[j] + (1 - rho) * (W[j] - E[j]);
            }
            have = 1;
        }
        int end = step % spe == 0;
        if (end && have) memcpy(W, E, n * sizeof(double));
        ct_lookahead_after_step(&la, g0, total, epoch, end);
        gp = dev_read(m.params, n);
        snprintf(what, sizeof what, "lookahead rule (%d per work-item) after step %lld", opt.vw, (long long)step);
        float *wf = malloc(n * 4);
        for (size_t j = 0; j < n; j++) wf[j] = (float)W[j];
        assert_true(ct_compare(what, gp, wf, n, 1e-5, 1e-6));
        free(wf); free(gp);
        assert_int_equal(la.have, have);
    }
    /* it did something: the last weights are not the last step's */
    gp = dev_read(m.params, n);
    assert_true(fabsf(gp[0] - fresh[0]) > 1e-4f || fabsf(gp[1] - fresh[1]) > 1e-4f);
    free(gp); free(fresh); free(W); free(E); free(ga);
    assert_true(ct_lookahead_decay(0.95f, 10, 10) > 0.77 && ct_lookahead_decay(0.95f, 10, 10) < 0.78); /* 0.95^5 */
    assert_true(!ct_lookahead_due(3, CT_LOOKAHEAD_START) && ct_lookahead_due(4, CT_LOOKAHEAD_START) && !ct_lookahead_due(4, 0));
    ct_lookahead_free(&la);
    ct_optim_free(&opt);
    ct_model_free(&m);
}

/* Parameter groups: a layer's lr= and bias_lr= multiply the learning rate of
 * its weights and biases, a decaying group decays by wd / multiplier (so
 * lr * wd is every group's: PyTorch groups with weight_decay = wd / m, as
 * airbench), lr=0 freezes (batch norm's gamma), bias_epochs=2 freezes the
 * biases from epoch 2. Five steps of each optimizer against its float64
 * reference run region by region with (lr * m, wd / m); AdamW's decoupled
 * decay is wdt in every decaying group. */
static const char *groups_cfg = "[net]\nheight=5\nwidth=5\nchannels=2\nclasses=4\n"
                                "[conv]\nfilters=3\nsize=3\nactivation=relu\nlr=0.5\nbias_lr=64\nbias_decay=1\nbias_epochs=2\n"
                                "[batchnorm]\nlr=0\nbias_lr=64\nbias_decay=1\n[maxpool]\nsize=2\nstride=1\n"
                                "[dense]\noutputs=4\nbias=0\nlr=2\n[softmax]\n";

typedef struct group_want { size_t off, n; float lr, wd; } group_want;

static void check_groups_vw(const ct_optim_hparams *o, const char *name, int vw) {
    ct_model m;
    make_model(&m, groups_cfg, 2);
    ct_model_init_weights(&m, 7);
    const ct_layer *C = &m.layers[0], *N = &m.layers[1], *D = &m.layers[3];
    group_want want[] = {
        {C->w_off, C->n_w, 0.5f, 2.0f}, {C->b_off, C->n_b, 64.0f, 1.0f / 64}, /* the conv bias until epoch 2 */
        {N->w_off, N->n_w, 0.0f, 0.0f}, {N->b_off, N->n_b, 64.0f, 1.0f / 64}, {D->w_off, D->n_w, 2.0f, 0.5f},
    };
    assert_int_equal(D->n_b, 0);
    assert_true(ct_model_has_groups(&m));
    uint8_t *mask = malloc(m.n_params);
    ct_cl_read(&g_cl, m.decay_mask, 0, m.n_params, mask);
    size_t covered = 0;
    for (size_t r = 0; r < sizeof want / sizeof *want; r++)
        for (size_t j = want[r].off; j < want[r].off + want[r].n; j++, covered++) {
            const struct ct_param_group *gp = &m.group[mask[j]];
            assert_true(gp->lr == want[r].lr && gp->wd == want[r].wd && gp->until == (r == 1 ? 2 : 0));
        }
    assert_int_equal(covered, m.n_params);
    free(mask);
    ct_optim_state opt;
    assert_int_equal(ct_optim_setup_vw(&opt, &m, o, vw), 0);
    ct_rng g = ct_rng_make(710, (uint64_t)o->kind, 0);
    size_t n = m.n_params;
    float *P = set_random_params(&m, &g, 0);
    float *M1 = calloc(n, 4), *M2 = calloc(n, 4), *S[2] = {M1, M2}, *prev = malloc(n * 4);
    for (int t = 1; t <= 5; t++) {
        if (t == 4) { /* epoch 2: the conv's biases stop */
            ct_model_groups_epoch(&m, 2);
            want[1].lr = want[1].wd = 0.0f;
        }
        float *G = malloc(n * 4);
        ct_fill_rand(G, n, &g, 1.0f);
        ct_cl_write(&g_cl, m.grads, 0, n * 4, G);
        float lr = o->lr * (t <= 2 ? 1.0f : 0.25f);
        ct_optim_step(&opt, lr);
        for (size_t r = 0; r < sizeof want / sizeof *want; r++) {
            group_want *w = &want[r];
            float lr_g = lr * w->lr;
            if (o->kind == CT_OPT_ADAMW)
                ref_adamw(P + w->off, M1 + w->off, M2 + w->off, G + w->off, (long)w->n, lr_g, o->b1, o->b2, o->eps,
                          w->wd != 0 ? (double)o->wd * lr / o->lr : 0.0, t);
            else
                ref_optim(o, lr_g, P + w->off, M1 + w->off, M2 + w->off, G + w->off, (long)w->n, o->wd * w->wd, t);
        }
        float *gp = dev_read(m.params, n);
        char what[128];
        snprintf(what, sizeof what, "%s groups (%d per work-item) step %d params", name, opt.vw, t);
        assert_true(ct_compare(what, gp, P, n, 1e-5, 1e-5));
        for (size_t j = 0; j < N->n_w; j++) assert_true(gp[N->w_off + j] == P[N->w_off + j]); /* frozen: exactly */
        if (t >= 4) /* frozen: exactly the last step's */
            for (size_t j = 0; j < C->n_b; j++) assert_true(gp[C->b_off + j] == prev[C->b_off + j]);
        memcpy(prev, gp, n * 4);
        for (int i = 0; i < opt.type->n_state; i++) {
            float *got = ct_xmalloc(n * 4);
            ct_optim_get_state(&opt, i, got);
            snprintf(what, sizeof what, "%s groups (%d per work-item) step %d state %d", name, opt.vw, t, i + 1);
            assert_true(ct_compare(what, got, S[i], n, 1e-5, i ? 1e-9 : 1e-5));
            free(got);
        }
        free(G);
        free(gp);
    }
    free(P); free(M1); free(M2); free(prev);
    ct_optim_free(&opt);
    ct_model_free(&m);
}

static void test_lookahead(void **state) {
    (void)state;
    CT_NEED_CL();
    check_lookahead_vw(16);
    check_lookahead_vw(1);
}

static void test_optim_groups(void **state) {
    (void)state;
    CT_NEED_CL();
    ct_optim_hparams os[] = {
        {.kind = CT_OPT_NESTEROV, .lr = 2e-3f, .momentum = 0.85f, .wd = 0.3f},
        {.kind = CT_OPT_SGD, .lr = 2e-3f, .momentum = 0.9f, .wd = 0.1f},
        {.kind = CT_OPT_ADAM, .lr = 1e-3f, .b1 = 0.9f, .b2 = 0.999f, .eps = 1e-8f, .wd = 0.1f},
        {.kind = CT_OPT_ADAMW, .lr = 1e-3f, .b1 = 0.9f, .b2 = 0.999f, .eps = 1e-8f, .wd = 1e-2f},
    };
    for (size_t k = 0; k < sizeof os / sizeof *os; k++)
        for (int vw = 1; vw <= 16; vw += 15) check_groups_vw(&os[k], ct_optim_types[os[k].kind]->name, vw);
}

/* the table: every kind has an entry under its own name, a kernel and a state count */
static void test_optim_table(void **state) {
    (void)state;
    for (int k = 0; k < CT_OPT_COUNT; k++) {
        const ct_optim_type *op = ct_optim_types[k];
        assert_non_null(op);
        int kind = -1;
        assert_ptr_equal(ct_optim_type_find(op->name, &kind), op);
        assert_int_equal(kind, k);
        assert_true(op->n_state >= 1 && op->n_state <= CT_OPT_MAX_STATE);
        assert_non_null(op->kernel);
        assert_true(op->default_lr > 0);
    }
    assert_null(ct_optim_type_find("rmsprop", NULL));
    assert_string_equal(ct_optim_type_list(), "adam|sgd|adamw|nesterov");
}

/* ---------------- input conversion ---------------- */

static void test_u8_input(void **state) {
    (void)state;
    CT_NEED_CL();
    ct_model m;
    make_model(&m, "[net]\nheight=5\nwidth=7\nchannels=3\nclasses=2\n[dense]\noutputs=2\n[softmax]\n", 4);
    size_t per = 5 * 7 * 3;
    uint8_t *img = malloc(4 * per);
    ct_rng g = ct_rng_make(800, 0, 0);
    for (size_t i = 0; i < 4 * per; i++) img[i] = (uint8_t)ct_rng_below(&g, 256);
    img[0] = 0;
    img[1] = 255;
    int32_t lab[4] = {1, 0, 1, 1}, got_lab[4] = {-1, -1, -1, -1};
    struct { float scale, shift; int B; } cases[] = {{1.0f / 255, 0.0f, 3}, {1.0f / 127.5f, -1.0f, 4}, {1.0f, 0.0f, 1}};
    for (size_t c = 0; c < 3; c++) {
        dev_poison(m.input, 4 * per);
        ct_cl_write(&g_cl, m.labels, 0, sizeof got_lab, got_lab);
        ct_model_set_batch(&m, img, lab, cases[c].B, cases[c].scale, cases[c].shift);
        float *x = dev_read(m.input, 4 * per), *want = malloc(4 * per * 4);
        size_t n = (size_t)cases[c].B * per;
        for (size_t i = 0; i < n; i++) want[i] = (float)img[i] * cases[c].scale + cases[c].shift;
        char what[64];
        snprintf(what, sizeof what, "u8 input B%d scale %g shift %g", cases[c].B, cases[c].scale, cases[c].shift);
        assert_true(ct_compare(what, x, want, n, 1e-6, 1e-7));
        for (size_t i = n; i < 4 * per; i++) assert_true(isnan(x[i]));  /* nothing past B images */
        int32_t lb[4];
        ct_cl_read(&g_cl, m.labels, 0, sizeof lb, lb);
        for (int b = 0; b < 4; b++) assert_int_equal(lb[b], b < cases[c].B ? lab[b] : -1);
        free(x); free(want);
    }
    free(img);
    ct_model_free(&m);
}

/* ---------------- the split activation's kernels ---------------- */

/* act_fwd and act_bwd (kernels/ops.cl) against ref_act / ref_act_bwd, one
 * float per work-item and sixteen (vw 16, n a multiple of 16), with every
 * activation, on fresh random inputs: ReLU and linear exactly, GELU within
 * what OpenCL's erf (16 ulp) allows where 1 + erf cancels (4e-6 absolute
 * at |z| <= 4). Past n, y and dz hold -7.5 (which ReLU and GELU would
 * change) and z NaN, none of which may change; z is poisoned throughout
 * before act_fwd (it must keep the input exactly). act_bwd runs twice, the
 * second time also writing a poisoned second buffer (both = 1: a shortcut's
 * input gradient), which must then equal dz to the bit, and stay NaN past n. */
static void test_act_kernels(void **state) {
    (void)state;
    CT_NEED_CL();
    ct_model m;
    make_model(&m, "[net]\nheight=1\nwidth=1\nchannels=2\nclasses=2\n[dense]\noutputs=2\n[softmax]\n", 1);
    static const int ns[] = {1, 15, 16, 48, 1584, 4099};
    const size_t cap = 4099 + 32;
    cl_mem by = NULL, bz = NULL, b2 = NULL;
    assert_int_equal(ct_cl_alloc(&g_cl, &by, cap * 4, "test y"), 0);
    assert_int_equal(ct_cl_alloc(&g_cl, &bz, cap * 4, "test z"), 0);
    assert_int_equal(ct_cl_alloc(&g_cl, &b2, cap * 4, "test dz copy"), 0);
    ct_rng g = ct_rng_make(1300, 0, 0);
    float *x = malloc(cap * 4), *t = malloc(cap * 4), *want = malloc(cap * 4);
    int tried16 = 0;
    for (size_t k = 0; k < sizeof ns / sizeof *ns; k++)
        for (int act = CT_ACT_LINEAR; act <= CT_ACT_GELU; act++)
            for (int vw = 1; vw <= 16; vw += 15) {
                int n = ns[k], gelu = act == CT_ACT_GELU;
                if (n % vw) continue;
                tried16 += vw == 16;
                char what[96];
                /* forward: y = act(y), z = the input */
                ct_fill_rand(x, cap, &g, 4.0f);
                for (size_t j = (size_t)n; j < cap; j++) x[j] = -7.5f;
                ct_cl_write(&g_cl, by, 0, cap * 4, x);
                dev_poison(bz, cap);
                size_t gws = (size_t)(n / vw);
                ct_kargs(m.k_act_fwd, by, bz, act, n, vw);
                ct_cl_run(&g_cl, m.k_act_fwd, "act_fwd", 1, &gws, NULL);
                float *y = dev_read(by, cap), *z = dev_read(bz, cap);
                for (int j = 0; j < n; j++) want[j] = (float)ref_act(x[j], act);
                snprintf(what, sizeof what, "act_fwd %s n %d vw %d", ct_activations[act].name, n, vw);
                assert_true(ct_compare(what, y, want, (size_t)n, gelu ? 2e-5 : 0, gelu ? 4e-6 : 0));
                for (int j = 0; j < n; j++) assert_memory_equal(&z[j], &x[j], 4);
                for (size_t j = (size_t)n; j < cap; j++) assert_true(y[j] == -7.5f && isnan(z[j]));
                free(y); free(z);
                /* backward: dz = dz * act'(t), t the output (ReLU) or the input (GELU) */
                ct_fill_rand(x, cap, &g, 1.0f);
                ct_fill_rand(t, cap, &g, 4.0f);
                for (size_t j = (size_t)n; j < cap; j++) x[j] = -7.5f, t[j] = -1.0f;
                for (int both = 0; both < 2; both++) {
                    ct_cl_write(&g_cl, by, 0, cap * 4, x);
                    ct_cl_write(&g_cl, bz, 0, cap * 4, t);
                    dev_poison(b2, cap);
                    ct_kargs(m.k_act_bwd, by, bz, act, n, vw, both ? b2 : by, both);
                    ct_cl_run(&g_cl, m.k_act_bwd, "act_bwd", 1, &gws, NULL);
                    float *dz = dev_read(by, cap), *d2 = dev_read(b2, cap);
                    for (int j = 0; j < n; j++) want[j] = (float)ref_act_bwd(x[j], t[j], act);
                    snprintf(what, sizeof what, "act_bwd %s n %d vw %d both %d", ct_activations[act].name, n, vw, both);
                    assert_true(ct_compare(what, dz, want, (size_t)n, gelu ? 2e-5 : 0, gelu ? 4e-6 : 0));
                    for (size_t j = (size_t)n; j < cap; j++) assert_true(dz[j] == -7.5f && isnan(d2[j]));
                    for (int j = 0; j < n; j++)
                        if (both) assert_memory_equal(&d2[j], &dz[j], 4);
                        else assert_true(isnan(d2[j]));
                    free(dz); free(d2);
                }
            }
    assert_true(tried16 > 0);
    free(x); free(t); free(want);
    ct_cl_release(&by);
    ct_cl_release(&bz);
    ct_cl_release(&b2);
    ct_model_free(&m);
}

/* GELU's erf (CT_ERF, kernels/prelude.cl: a rational approximation) on a
 * dense grid over [-12, 12], through act_fwd (GELU) and act_bwd with dz = 1
 * (GELU'), one float and sixteen at a time, against float64's erf: GELU
 * within 1e-6 absolute plus 3e-7 relative (float32's erff alone is 4.5e-7
 * absolute on GELU), GELU' within 4e-7 plus 3e-7 relative. */
static void test_gelu_grid(void **state) {
    (void)state;
    CT_NEED_CL();
    ct_model m;
    make_model(&m, "[net]\nheight=1\nwidth=1\nchannels=2\nclasses=2\n[dense]\noutputs=2\n[softmax]\n", 1);
    enum { N = 24000 }; /* a multiple of 16 */
    cl_mem by = NULL, bz = NULL;
    assert_int_equal(ct_cl_alloc(&g_cl, &by, N * 4, "test y"), 0);
    assert_int_equal(ct_cl_alloc(&g_cl, &bz, N * 4, "test z"), 0);
    float *z = malloc(N * 4), *one = malloc(N * 4), *want = malloc(N * 4);
    for (int j = 0; j < N; j++) z[j] = -12.0f + 24.0f * (float)j / (N - 1), one[j] = 1.0f;
    for (int vw = 1; vw <= 16; vw += 15) {
        size_t gws = (size_t)(N / vw);
        char what[64];
        ct_cl_write(&g_cl, by, 0, N * 4, z);
        dev_poison(bz, N);
        ct_kargs(m.k_act_fwd, by, bz, CT_ACT_GELU, N, vw);
        ct_cl_run(&g_cl, m.k_act_fwd, "act_fwd", 1, &gws, NULL);
        float *y = dev_read(by, N);
        for (int j = 0; j < N; j++) want[j] = (float)ref_act(z[j], CT_ACT_GELU);
        snprintf(what, sizeof what, "GELU on [-12, 12], vw %d", vw);
        assert_true(ct_compare(what, y, want, N, 3e-7, 1e-6));
        ct_cl_write(&g_cl, by, 0, N * 4, one);
        ct_cl_write(&g_cl, bz, 0, N * 4, z);
        ct_kargs(m.k_act_bwd, by, bz, CT_ACT_GELU, N, vw, by, 0);
        ct_cl_run(&g_cl, m.k_act_bwd, "act_bwd", 1, &gws, NULL);
        float *d = dev_read(by, N);
        for (int j = 0; j < N; j++) want[j] = (float)ref_act_bwd(1.0f, z[j], CT_ACT_GELU);
        snprintf(what, sizeof what, "GELU' on [-12, 12], vw %d", vw);
        assert_true(ct_compare(what, d, want, N, 3e-7, 4e-7));
        free(y); free(d);
    }
    free(z); free(one); free(want);
    ct_cl_release(&by);
    ct_cl_release(&bz);
    ct_model_free(&m);
}

/* ---------------- accumulation and the whole passes ---------------- */

/* Parameter gradients accumulate: a second backward without zero_grad
 * doubles them; every dx is overwritten, not added to. */
static void test_accumulation(void **state) {
    (void)state;
    CT_NEED_CL();
    const char *cfg = "[net]\nheight=6\nwidth=6\nchannels=2\nclasses=4\n[maxpool]\nsize=1\n"
                      "[conv]\nfilters=3\nsize=3\npad=1\nactivation=relu\n[maxpool]\nsize=2\n"
                      "[dense]\noutputs=5\nactivation=relu\n[dense]\noutputs=4\n[softmax]\n";
    ct_model m;
    make_model(&m, cfg, 3);
    ct_rng g = ct_rng_make(900, 0, 0);
    float *P = set_random_params(&m, &g, 1);
    float *x = dev_rand(m.input, 3 * 6 * 6 * 2, &g, 1.0f);
    int32_t lab[3] = {0, 3, 2};
    ct_cl_write(&g_cl, m.labels, 0, sizeof lab, lab);
    ct_model_forward(&m, 3);
    ct_model_loss(&m, 3);
    ct_model_zero_grad(&m);
    ct_model_backward(&m, 3, NULL, NULL);
    size_t np = m.n_params;
    float *g1 = dev_read(m.grads, np), *dx1[CT_MAX_LAYERS] = {0};
    size_t nin[CT_MAX_LAYERS];
    double gmax = amax(g1, np);
    assert_true(gmax > 0);
    for (int i = 1; i < m.n_layers; i++) {
        ct_layer *L = &m.layers[i];
        nin[i] = (size_t)3 * L->ih * L->iw * L->ic;
        dx1[i] = dev_read(L->dx, nin[i]);
        assert_true(amax(dx1[i], nin[i]) > 0);
        dev_poison(L->dx, nin[i]);
    }
    ct_model_backward(&m, 3, NULL, NULL);
    float *g2 = dev_read(m.grads, np), *twice = malloc(np * 4);
    for (size_t j = 0; j < np; j++) twice[j] = 2 * g1[j];
    assert_true(ct_compare("grads after two backward passes", g2, twice, np, 1e-6, 1e-7 * gmax));
    for (int i = 1; i < m.n_layers; i++) {
        float *d = dev_read(m.layers[i].dx, nin[i]);
        char what[64];
        snprintf(what, sizeof what, "layer %d dx after two backward passes", i);
        assert_true(ct_compare(what, d, dx1[i], nin[i], 1e-6, 1e-9));
        free(d);
        free(dx1[i]);
    }
    /* zero_grad clears every gradient */
    ct_model_zero_grad(&m);
    float *g3 = dev_read(m.grads, np);
    for (size_t j = 0; j < np; j++) assert_true(g3[j] == 0.0f);
    /* the non-finite check finds a single NaN or Inf anywhere */
    assert_int_equal(ct_model_grads_nonfinite(&m), 0);
    float bad[2] = {NAN, INFINITY};
    for (int k = 0; k < 2; k++) {
        size_t at = k ? np - 1 : np / 2;
        ct_cl_write(&g_cl, m.grads, at * 4, 4, &bad[k]);
        assert_int_equal(ct_model_grads_nonfinite(&m), 1);
        ct_model_zero_grad(&m);
        assert_int_equal(ct_model_grads_nonfinite(&m), 0);
    }
    free(P); free(x); free(g1); free(g2); free(g3); free(twice);
    ct_model_free(&m);
}

/* Backward skips the frozen layers at the bottom (ct_model_groups_epoch sets
 * grad_from): a whitening-like conv (weights lr=0, bias for one epoch) and a
 * frozen conv below a trained batch norm. From epoch 1 the two convs get no
 * gradient (poisoned, they stay poisoned: no kernel wrote them), the trained
 * layers' gradients are bit-identical to epoch 0's full backward, and the
 * step's FLOPs drop by the convs' backward. */
static void test_frozen_prefix(void **state) {
    (void)state;
    CT_NEED_CL();
    const char *cfg = "[net]\nheight=6\nwidth=6\nchannels=2\nclasses=4\n"
                      "[conv]\nfilters=4\nsize=3\npad=1\nlr=0\nbias_epochs=1\nactivation=gelu\n"
                      "[conv]\nfilters=3\nsize=3\npad=1\nlr=0\nbias_lr=0\n"
                      "[batchnorm]\nlr=0\nactivation=relu\n[maxpool]\nsize=2\n[dense]\noutputs=4\n[softmax]\n";
    ct_model m;
    make_model(&m, cfg, 3);
    assert_int_equal(m.grad_from, 0);
    ct_rng g = ct_rng_make(910, 0, 0);
    float *P = set_random_params(&m, &g, 1);
    float *x = dev_rand(m.input, 3 * 6 * 6 * 2, &g, 1.0f);
    int32_t lab[3] = {1, 3, 0};
    ct_cl_write(&g_cl, m.labels, 0, sizeof lab, lab);
    size_t np = m.n_params, n1 = (size_t)3 * 6 * 6 * 4;
    float *g_[2];
    double flops[2];
    for (int e = 0; e < 2; e++) {
        ct_model_groups_epoch(&m, e);
        flops[e] = ct_model_step_flops(&m);
        ct_model_forward(&m, 3);
        ct_model_loss(&m, 3);
        ct_model_zero_grad(&m);
        if (e) dev_poison(m.grads, m.layers[2].w_off); /* the convs': backward adds to gradients */
        dev_poison(m.layers[1].dx, n1);
        ct_model_backward(&m, 3, NULL, NULL);
        g_[e] = dev_read(m.grads, np);
    }
    assert_int_equal(m.grad_from, 2);
    const ct_layer *C0 = &m.layers[0], *C1 = &m.layers[1];
    size_t below = C1->b_off + C1->n_b; /* the two convs' parameters come first */
    assert_true(C0->w_off == 0 && below <= m.layers[2].w_off);
    int epoch0_finite = 1;
    for (size_t j = 0; j < below; j++) {
        epoch0_finite &= isfinite(g_[0][j]);
        assert_true(isnan(g_[1][j])); /* not written */
    }
    assert_true(epoch0_finite);
    float *dx1 = dev_read(m.layers[1].dx, n1);
    for (size_t j = 0; j < n1; j++) assert_true(isnan(dx1[j])); /* layer 1's input gradient: not computed */
    assert_true(amax(g_[1] + below, np - below) > 0);
    assert_memory_equal(g_[0] + below, g_[1] + below, (np - below) * 4);
    /* the convs' backward: the first's weight gradient (once its forward, 2 x 6x6 outputs x 9 x 2x4: layer 0
     * has no input gradient), the second's weight and input gradients (twice its forward, 6x6 x 9 x 4x3) */
    double f_drop = 2.0 * 6 * 6 * 9 * (2 * 4) + 4.0 * 6 * 6 * 9 * (4 * 3);
    assert_true(fabs(flops[0] - flops[1] - f_drop) <= 1e-9 * flops[0]);
    ct_model_groups_epoch(&m, 0);
    assert_int_equal(m.grad_from, 0);
    free(dx1); free(g_[0]); free(g_[1]); free(x); free(P);
    ct_model_free(&m);
}

/* A frozen layer that runs the direct kernel (cifar-fast's whitening layer: 2x2 over RGB to 24 outputs,
 * weights lr=0, bias training, GELU) gets its bias gradient as im2col's run gets it, and no weight
 * gradient (exactly 0 after zero_grad: no kernel wrote it); the layers above get the same gradients. */
static void test_frozen_direct(void **state) {
    (void)state;
    CT_NEED_CL();
    const char *cfg = "[net]\nheight=9\nwidth=8\nchannels=3\nclasses=3\n"
                      "[conv]\nfilters=24\nsize=2\nlr=0\nbias_epochs=1\nactivation=gelu\n"
                      "[conv]\nfilters=16\nsize=3\npad=1\n[dense]\noutputs=3\n[softmax]\n";
    enum { B = 4 };
    float *g_[2];
    size_t np = 0;
    for (int a = 0; a < 2; a++) {
        g_conv_algo = a ? CT_CONV_DIRECT : CT_CONV_IM2COL;
        ct_model m;
        make_model(&m, cfg, B);
        assert_int_equal(ct_conv_tile(&m.layers[0]), a ? CT_TILE_DIRECT : 0);
        ct_rng g = ct_rng_make(42, 0, 0);
        float *P = set_random_params(&m, &g, 1);
        float *x = dev_rand(m.input, (size_t)B * 9 * 8 * 3, &g, 1.0f);
        int32_t lab[B] = {2, 0, 1, 1};
        ct_cl_write(&g_cl, m.labels, 0, sizeof lab, lab);
        ct_model_groups_epoch(&m, 0);
        assert_int_equal(m.grad_from, 0);
        ct_model_forward(&m, B);
        ct_model_loss(&m, B);
        ct_model_zero_grad(&m);
        ct_model_backward(&m, B, NULL, NULL);
        np = m.n_params;
        g_[a] = dev_read(m.grads, np);
        const ct_layer *L0 = &m.layers[0];
        for (size_t j = 0; j < L0->n_w; j++) assert_true(g_[a][L0->w_off + j] == 0.0f);
        assert_true(amax(g_[a] + L0->b_off, L0->n_b) > 0);
        free(P);
        free(x);
        ct_model_free(&m);
    }
    g_conv_algo = CT_CONV_IM2COL;
    /* the same sums in another order (the direct kernel's forward against im2col's GEMM) */
    assert_true(ct_compare("frozen direct layer: every gradient against im2col's", g_[1], g_[0], np, 1e-4,
                           1e-5 * amax(g_[0], np)));
    free(g_[0]);
    free(g_[1]);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_conv),
        cmocka_unit_test(test_conv_winograd),
        cmocka_unit_test(test_conv_direct),
        cmocka_unit_test(test_conv_no_bias),
        cmocka_unit_test(test_maxpool),
        cmocka_unit_test(test_maxpool_ties),
        cmocka_unit_test(test_maxpool_after_relu),
        cmocka_unit_test(test_dense),
        cmocka_unit_test(test_dense_scale),
        cmocka_unit_test(test_init_dirac),
        cmocka_unit_test(test_mnist_cnn_shapes),
        cmocka_unit_test(test_softmax_xent),
        cmocka_unit_test(test_softmax_xent_large),
        cmocka_unit_test(test_adam),
        cmocka_unit_test(test_sgd),
        cmocka_unit_test(test_adamw),
        cmocka_unit_test(test_nesterov),
        cmocka_unit_test(test_lookahead),
        cmocka_unit_test(test_optim_groups),
        cmocka_unit_test(test_optim_table),
        cmocka_unit_test(test_u8_input),
        cmocka_unit_test(test_act_kernels),
        cmocka_unit_test(test_gelu_grid),
        cmocka_unit_test(test_accumulation),
        cmocka_unit_test(test_frozen_prefix),
        cmocka_unit_test(test_frozen_direct),
    };
    return cmocka_run_group_tests(tests, ct_test_open, ct_test_close);
}
