/* test_ref.c: finite-difference gradient checks of the float64 references in
 * src/ref (the specification every kernel is tested against), no device needed.
 *
 * Each check takes a scalar loss L = sum(y * r) with a fixed random r, so
 * dL/dy = r is the dy handed to the reference backward, and compares every
 * analytic gradient entry with the central difference
 * (L(p + e) - L(p - e)) / (actual step), the step read back from the float
 * values so float rounding of p +- e does not bias it. Conv, dense and pool
 * are piecewise linear, so the central difference is exact up to float
 * rounding of the outputs; entries whose +-e perturbation moves any ReLU
 * pre-activation across zero (a kink) are skipped and counted, and most must
 * remain. Max-pool inputs are distinct values at least 10*eps apart, so no
 * window changes its maximum. Softmax cross-entropy is smooth; its loss is
 * returned in double, so the difference is accurate to ~eps^2. GELU is
 * smooth too: its checks allow the central difference's own error,
 * eps^2/6 max|GELU'''| (< 0.8) per output touched (inputs, weights <= 1).
 * Every check prints its max abs / rel error. */
#include "ct_test.h"
#include "cltrain/ref.h"
#include "cltrain/ref/conv.h"
#include "cltrain/ref/maxpool.h"

/* ---------------- helpers ---------------- */

static double dot_r(const float *y, const double *r, size_t n) {
    double s = 0;
    for (size_t i = 0; i < n; i++) s += (double)y[i] * r[i];
    return s;
}

static void fill_r(double *r, size_t n, ct_rng *g) {
    for (size_t i = 0; i < n; i++) r[i] = 2.0 * ct_rng_uniform(g) - 1.0;
}

/* Loss evaluated at the current parameters; fills sign[] with the sign of
 * every ReLU pre-activation (or leaves it alone when there is no ReLU). */
typedef double (*eval_fn)(void *ctx, signed char *sign);

typedef struct fd_stats {
    double max_abs, max_rel;
    long checked, skipped, bad;
} fd_stats;

/* Central differences on every entry of p[0..n) against analytic g[0..n).
 * Pass when |fd - g| <= atol + rtol * |g|. nsign: length of the sign pattern (0: no kinks). */
static void fd_check(const char *what, float *p, const float *g, size_t n, float eps, eval_fn f, void *ctx,
                     size_t nsign, double rtol, double atol, fd_stats *st) {
    signed char *s1 = calloc(nsign + 1, 1), *s2 = calloc(nsign + 1, 1);
    for (size_t i = 0; i < n; i++) {
        float p0 = p[i];
        float hi = p0 + eps, lo = p0 - eps;
        p[i] = hi;
        double lp = f(ctx, s1);
        p[i] = lo;
        double lm = f(ctx, s2);
        p[i] = p0;
        if (nsign && memcmp(s1, s2, nsign)) { st->skipped++; continue; }
        double fd = (lp - lm) / ((double)hi - (double)lo);
        double d = fabs(fd - g[i]);
        st->checked++;
        if (d > st->max_abs) st->max_abs = d;
        if (fabs(g[i]) > 1e-3 && d / fabs(g[i]) > st->max_rel) st->max_rel = d / fabs(g[i]);
        if (!(d <= atol + rtol * fabs(g[i]))) {
            if (st->bad < 5) fprintf(stderr, "# %s[%zu]: analytic %.9g, central difference %.9g\n", what, i, g[i], fd);
            st->bad++;
        }
    }
    free(s1);
    free(s2);
}

/* Each float output rounds by at most 6e-8 * max|y| in each of the two
 * evaluations; over `touched` outputs the errors add like a random walk, and
 * the difference divides them by the 2*eps step: allow 4 of those. */
static double fd_atol(size_t touched, double ymax, float eps) {
    return 4.0 * sqrt(2.0 * (double)touched) * 6e-8 * ymax / (2.0 * eps);
}

static double amax(const float *x, size_t n) {
    double m = 0;
    for (size_t i = 0; i < n; i++) m = fmax(m, fabs(x[i]));
    return m;
}

static void fd_report(const char *what, const fd_stats *st) {
    fprintf(stderr, "# %s: %ld checked, %ld skipped at ReLU kinks, max abs err %.3g, max rel err %.3g, %ld mismatches\n",
            what, st->checked, st->skipped, st->max_abs, st->max_rel, st->bad);
}

/* the central difference's error on a smooth activation (GELU, act 2) over `touched` outputs */
static double fd_smooth(int act, size_t touched, float eps) {
    return act == 2 ? (double)eps * eps / 6 * 0.8 * (double)touched : 0;
}
static const char *act_name(int act) { return act == 2 ? "gelu" : act ? "relu" : "linear"; }

/* ---------------- convolution ---------------- */

typedef struct conv_ctx {
    ref_conv_shape s;
    int act;
    float *x, *w, *b, *y, *z;
    double *r;
    size_t ny;
} conv_ctx;

static double conv_eval(void *vctx, signed char *sign) {
    conv_ctx *c = vctx;
    ref_conv_forward(&c->s, c->y, c->x, c->w, c->b, c->act);
    if (c->act == 1) {
        ref_conv_forward(&c->s, c->z, c->x, c->w, c->b, 0);
        for (size_t i = 0; i < c->ny; i++) sign[i] = c->z[i] > 0 ? 1 : c->z[i] < 0 ? -1 : 0;
    }
    return dot_r(c->y, c->r, c->ny);
}

static void check_conv(int B, int H, int W, int C, int K, int k, int stride, int pad, int act, uint64_t seed) {
    ct_rng g = ct_rng_make(seed, (uint64_t)H * 977 + W * 31 + C, (uint64_t)K * 131 + k * 17 + stride * 5 + pad * 2 + act);
    conv_ctx c = {.s = {B, H, W, C, K, k, k, stride, pad, (H + 2 * pad - k) / stride + 1, (W + 2 * pad - k) / stride + 1},
                  .act = act};
    size_t nx = (size_t)B * H * W * C, nw = (size_t)k * k * C * K, nb = (size_t)K;
    c.ny = (size_t)B * c.s.OH * c.s.OW * K;
    c.x = malloc(nx * 4); c.w = malloc(nw * 4); c.b = malloc(nb * 4);
    c.y = malloc(c.ny * 4); c.z = malloc(c.ny * 4); c.r = malloc(c.ny * 8);
    float *dx = malloc(nx * 4), *dw = calloc(nw, 4), *db = calloc(nb, 4), *dy = malloc(c.ny * 4);
    ct_fill_rand(c.x, nx, &g, 1);
    ct_fill_rand(c.w, nw, &g, 1);
    ct_fill_rand(c.b, nb, &g, 0.5f);
    fill_r(c.r, c.ny, &g);
    for (size_t i = 0; i < c.ny; i++) dy[i] = (float)c.r[i];
    ct_fill_nan(dx, nx);  /* dx is overwritten */
    ref_conv_forward(&c.s, c.y, c.x, c.w, c.b, act);
    ref_conv_forward(&c.s, c.z, c.x, c.w, c.b, 0);
    ref_conv_backward(&c.s, dx, dw, db, dy, act == 2 ? c.z : c.y, c.x, c.w, act);
    double ymax = amax(c.z, c.ny), rtol = 1e-4;
    float eps = 1e-2f;
    /* an input touches at most k*k*K outputs (fewer with stride), a weight or bias B*OH*OW */
    size_t touch_x = (size_t)k * k * K, touch_w = (size_t)B * c.s.OH * c.s.OW;
    fd_stats sx = {0}, sw = {0}, sb = {0};
    size_t nsign = act == 1 ? c.ny : 0;
    double ax = fd_atol(touch_x, ymax, eps) + fd_smooth(act, touch_x, eps), aw = fd_atol(touch_w, ymax, eps) + fd_smooth(act, touch_w, eps);
    fd_check("conv dx", c.x, dx, nx, eps, conv_eval, &c, nsign, rtol, ax, &sx);
    fd_check("conv dw", c.w, dw, nw, eps, conv_eval, &c, nsign, rtol, aw, &sw);
    fd_check("conv db", c.b, db, nb, eps, conv_eval, &c, nsign, rtol, aw, &sb);
    fprintf(stderr, "# conv B%d %dx%dx%d K%d k%d s%d p%d %s (max|y| %.3g, atol dx %.2g dw %.2g):\n", B, H, W, C, K, k,
            stride, pad, act_name(act), ymax, ax, aw);
    fd_report("  dx", &sx);
    fd_report("  dw", &sw);
    fd_report("  db", &sb);
    assert_int_equal(sx.bad + sw.bad + sb.bad, 0);
    /* the skip rule is exact, this only guards against checking little: with
     * C=1 and 13 filters an input feeds up to 117 pre-activations, so ~40% of
     * the inputs see a kink within +-1e-2; at least half must remain */
    assert_true(sx.checked * 2 >= (long)nx && sw.checked * 2 >= (long)nw);
    assert_true(sb.checked >= 1 || act);
    /* the ReLU mask: outputs are max(z, 0) of the linear outputs */
    if (act == 1) {
        ref_conv_forward(&c.s, c.y, c.x, c.w, c.b, 1);
        ref_conv_forward(&c.s, c.z, c.x, c.w, c.b, 0);
        for (size_t i = 0; i < c.ny; i++) assert_true(c.y[i] == (c.z[i] > 0 ? c.z[i] : 0.0f));
    }
    free(c.x); free(c.w); free(c.b); free(c.y); free(c.z); free(c.r);
    free(dx); free(dw); free(db); free(dy);
}

static void test_conv_grad_linear(void **state) {
    (void)state;
    /*         B  H  W  C  K  k  s  p */
    check_conv(1, 5, 5, 1, 1, 3, 1, 0, 0, 1);
    check_conv(2, 5, 7, 3, 5, 3, 1, 1, 0, 2);
    check_conv(1, 7, 6, 2, 3, 3, 2, 1, 0, 3);
    check_conv(2, 6, 5, 5, 7, 1, 1, 0, 0, 4);
    check_conv(1, 9, 7, 1, 13, 3, 2, 0, 0, 5);
    check_conv(1, 6, 6, 2, 2, 5, 1, 2, 0, 6);
    check_conv(1, 4, 5, 3, 2, 1, 2, 1, 0, 7);
}

static void test_conv_grad_relu(void **state) {
    (void)state;
    check_conv(2, 5, 7, 3, 5, 3, 1, 1, 1, 11);
    check_conv(1, 7, 7, 1, 13, 3, 2, 1, 1, 12);
    check_conv(2, 6, 5, 5, 3, 1, 1, 0, 1, 13);
    check_conv(1, 8, 7, 2, 3, 5, 2, 2, 1, 14);
}

static void test_conv_grad_gelu(void **state) {
    (void)state;
    check_conv(2, 5, 7, 3, 5, 3, 1, 1, 2, 15);
    check_conv(1, 7, 7, 1, 13, 3, 2, 1, 2, 16);
    check_conv(1, 8, 7, 2, 3, 5, 2, 2, 2, 17);
}

/* GELU(z) = z Phi(z) and its derivative against PyTorch 1.13 (nn.GELU() and
 * autograd, float64), and the derivative against central differences in double */
static void test_gelu(void **state) {
    (void)state;
    static const double z[] = {-3, -1, -0.5, 0, 0.5, 1, 3};
    static const double want[] = {-0.00404969409489031, -0.15865525393145702, -0.15426876936299344, 0,
                                  0.34573123063700656, 0.841344746068543, 2.99595030590511};
    static const double want_grad[] = {-0.01194564720418392, -0.08331547058768635, 0.13250487534383712, 0.5,
                                       0.8674951246561629, 1.0833154705876864, 1.011945647204184};
    for (int i = 0; i < 7; i++) {
        assert_true(fabs(ref_act(z[i], 2) - want[i]) < 1e-15);
        assert_true(fabs(ref_act_bwd(1.0, z[i], 2) - want_grad[i]) < 1e-15);
    }
    double worst = 0;
    for (double t = -6; t <= 6; t += 0.0625) {
        double h = 1e-5, fd = (ref_act(t + h, 2) - ref_act(t - h, 2)) / (2 * h);
        worst = fmax(worst, fabs(fd - ref_act_bwd(1.0, t, 2)));
    }
    fprintf(stderr, "# GELU' against central differences on [-6, 6]: max abs err %.3g\n", worst);
    assert_true(worst < 1e-9);
    assert_true(ref_act_bwd(2.0, 0.0, 2) == 1.0); /* GELU'(0) = 1/2 */
}

/* dw and db accumulate, dx is overwritten */
static void test_conv_accumulates(void **state) {
    (void)state;
    ct_rng g = ct_rng_make(21, 0, 0);
    ref_conv_shape s = {2, 5, 6, 3, 4, 3, 3, 1, 1, 5, 6};
    size_t nx = 2 * 5 * 6 * 3, nw = 3 * 3 * 3 * 4, ny = 2 * 5 * 6 * 4;
    float *x = malloc(nx * 4), *w = malloc(nw * 4), *y = malloc(ny * 4), *dy = malloc(ny * 4);
    float *dx1 = malloc(nx * 4), *dx2 = malloc(nx * 4), *dw1 = calloc(nw, 4), *dw2 = malloc(nw * 4), *db1 = calloc(4, 4), *db2 = malloc(16);
    ct_fill_rand(x, nx, &g, 1);
    ct_fill_rand(w, nw, &g, 1);
    ct_fill_rand(dy, ny, &g, 1);
    ref_conv_forward(&s, y, x, w, NULL, 1);
    ref_conv_backward(&s, dx1, dw1, db1, dy, y, x, w, 1);
    ct_fill_rand(dw2, nw, &g, 1);
    ct_fill_rand(db2, 4, &g, 1);
    float *dw0 = malloc(nw * 4), db0[4];
    memcpy(dw0, dw2, nw * 4);
    memcpy(db0, db2, 16);
    ct_fill_rand(dx2, nx, &g, 100);
    ref_conv_backward(&s, dx2, dw2, db2, dy, y, x, w, 1);
    for (size_t i = 0; i < nw; i++) dw0[i] += dw1[i];
    for (int i = 0; i < 4; i++) db0[i] += db1[i];
    assert_true(ct_compare("conv dw accumulated", dw2, dw0, nw, 1e-6, 1e-6));
    assert_true(ct_compare("conv db accumulated", db2, db0, 4, 1e-6, 1e-6));
    assert_true(ct_compare("conv dx overwritten", dx2, dx1, nx, 0, 0));
    free(x); free(w); free(y); free(dy); free(dx1); free(dx2); free(dw1); free(dw2); free(db1); free(db2); free(dw0);
}

/* ---------------- max pooling ---------------- */

typedef struct pool_ctx {
    int B, H, W, C, k, st, OH, OW;
    float *x, *y;
    double *r;
    size_t ny;
} pool_ctx;

static double pool_eval(void *vctx, signed char *sign) {
    pool_ctx *c = vctx;
    (void)sign;
    ref_maxpool_forward(c->y, c->x, c->B, c->H, c->W, c->C, c->k, c->st, c->OH, c->OW);
    return dot_r(c->y, c->r, c->ny);
}

static void check_pool(int B, int H, int W, int C, int k, int st, uint64_t seed) {
    ct_rng g = ct_rng_make(seed, (uint64_t)H * 100 + W, (uint64_t)C * 10 + k);
    pool_ctx c = {B, H, W, C, k, st, (H - k) / st + 1, (W - k) / st + 1, NULL, NULL, NULL, 0};
    size_t nx = (size_t)B * H * W * C;
    c.ny = (size_t)B * c.OH * c.OW * C;
    c.x = malloc(nx * 4); c.y = malloc(c.ny * 4); c.r = malloc(c.ny * 8);
    float *dx = malloc(nx * 4), *dy = malloc(c.ny * 4), *y2 = malloc(c.ny * 4);
    /* distinct values 0.1 apart (a shuffled ramp, shifted negative in part), so
     * a +-1e-2 step never changes a window's maximum */
    for (size_t i = 0; i < nx; i++) c.x[i] = 0.1f * (float)i - 0.05f * (float)nx;
    for (size_t i = nx; i > 1; i--) {
        size_t j = ct_rng_below(&g, (uint32_t)i);
        float t = c.x[i - 1]; c.x[i - 1] = c.x[j]; c.x[j] = t;
    }
    fill_r(c.r, c.ny, &g);
    for (size_t i = 0; i < c.ny; i++) dy[i] = (float)c.r[i];
    ct_fill_nan(dx, nx);
    ref_maxpool_forward(c.y, c.x, B, H, W, C, k, st, c.OH, c.OW);
    ref_maxpool_backward(dx, dy, c.x, B, H, W, C, k, st, c.OH, c.OW);
    /* forward: every output is the maximum of its window */
    for (int b = 0; b < B; b++)
        for (int oy = 0; oy < c.OH; oy++)
            for (int ox = 0; ox < c.OW; ox++)
                for (int ch = 0; ch < C; ch++) {
                    float m = -INFINITY;
                    for (int ky = 0; ky < k; ky++)
                        for (int kx = 0; kx < k; kx++)
                            m = fmaxf(m, c.x[(((size_t)b * H + oy * st + ky) * W + ox * st + kx) * C + ch]);
                    y2[(((size_t)b * c.OH + oy) * c.OW + ox) * C + ch] = m;
                }
    char what[96];
    snprintf(what, sizeof what, "maxpool B%d %dx%dx%d k%d s%d forward", B, H, W, C, k, st);
    assert_true(ct_compare(what, c.y, y2, c.ny, 0, 0));
    fd_stats sx = {0};
    /* piecewise linear with no kink crossed: the difference is exact up to rounding of y */
    size_t touch = (size_t)((k + st - 1) / st) * ((k + st - 1) / st);  /* windows holding one input */
    fd_check("maxpool dx", c.x, dx, nx, 1e-2f, pool_eval, &c, 0, 1e-4, fd_atol(touch, amax(c.y, c.ny), 1e-2f), &sx);
    snprintf(what, sizeof what, "maxpool B%d %dx%dx%d k%d s%d dx", B, H, W, C, k, st);
    fd_report(what, &sx);
    assert_int_equal(sx.bad, 0);
    assert_int_equal(sx.checked, (long)nx);
    free(c.x); free(c.y); free(c.r); free(dx); free(dy); free(y2);
}

static void test_maxpool_grad(void **state) {
    (void)state;
    check_pool(1, 4, 4, 1, 2, 2, 1);
    check_pool(2, 7, 9, 3, 2, 2, 2);   /* odd sizes: last row and column dropped (floor) */
    check_pool(1, 7, 7, 2, 3, 2, 3);   /* overlapping windows: gradients add up */
    check_pool(2, 5, 6, 5, 1, 1, 4);   /* identity */
    check_pool(1, 9, 8, 1, 3, 1, 5);
}

/* ties go to the first maximum in (ky, kx) order, forward and backward */
static void test_maxpool_ties(void **state) {
    (void)state;
    float x[2 * 4 * 4 * 2], y[2 * 2 * 2 * 2], dy[2 * 2 * 2 * 2], dx[2 * 4 * 4 * 2];
    for (int i = 0; i < 64; i++) x[i] = -3.0f;
    for (int i = 0; i < 16; i++) dy[i] = (float)(i + 1);
    ref_maxpool_forward(y, x, 2, 4, 4, 2, 2, 2, 2, 2);
    ref_maxpool_backward(dx, dy, x, 2, 4, 4, 2, 2, 2, 2, 2);
    for (int i = 0; i < 16; i++) assert_true(y[i] == -3.0f);
    for (int b = 0; b < 2; b++)
        for (int yy = 0; yy < 4; yy++)
            for (int xx = 0; xx < 4; xx++)
                for (int c = 0; c < 2; c++) {
                    float want = (yy % 2 == 0 && xx % 2 == 0) ? dy[((b * 2 + yy / 2) * 2 + xx / 2) * 2 + c] : 0.0f;
                    assert_true(dx[((b * 4 + yy) * 4 + xx) * 2 + c] == want);
                }
}

/* ---------------- dense (y = x W + b through ref_gemm) ---------------- */

typedef struct dense_ctx {
    int B, I, O, act;
    float *x, *w, *b, *y, *z;
    double *r;
} dense_ctx;

static double dense_eval(void *vctx, signed char *sign) {
    dense_ctx *c = vctx;
    size_t ny = (size_t)c->B * c->O;
    ref_gemm(0, 0, c->B, c->O, c->I, 1.0f, c->x, c->I, c->w, c->O, 0.0f, c->y, c->O, c->b, c->act);
    if (c->act == 1) {
        ref_gemm(0, 0, c->B, c->O, c->I, 1.0f, c->x, c->I, c->w, c->O, 0.0f, c->z, c->O, c->b, 0);
        for (size_t i = 0; i < ny; i++) sign[i] = c->z[i] > 0 ? 1 : c->z[i] < 0 ? -1 : 0;
    }
    return dot_r(c->y, c->r, ny);
}

static void check_dense(int B, int I, int O, int act, uint64_t seed) {
    ct_rng g = ct_rng_make(seed, (uint64_t)B * 1000 + I, (uint64_t)O * 2 + act);
    dense_ctx c = {B, I, O, act, NULL, NULL, NULL, NULL, NULL, NULL};
    size_t nx = (size_t)B * I, nw = (size_t)I * O, ny = (size_t)B * O;
    c.x = malloc(nx * 4); c.w = malloc(nw * 4); c.b = malloc(O * 4); c.y = malloc(ny * 4); c.z = malloc(ny * 4);
    c.r = malloc(ny * 8);
    float *dy = malloc(ny * 4), *dx = malloc(nx * 4), *dw = malloc(nw * 4), *db = malloc(O * 4), *ones = malloc(B * 4);
    ct_fill_rand(c.x, nx, &g, 1);
    ct_fill_rand(c.w, nw, &g, 1);
    ct_fill_rand(c.b, O, &g, 0.5f);
    fill_r(c.r, ny, &g);
    for (int i = 0; i < B; i++) ones[i] = 1;
    ref_gemm(0, 0, B, O, I, 1.0f, c.x, I, c.w, O, 0.0f, c.y, O, c.b, act);
    ref_gemm(0, 0, B, O, I, 1.0f, c.x, I, c.w, O, 0.0f, c.z, O, c.b, 0);
    /* dy = r through the activation (as the device's act_bwd does), then the three products */
    for (size_t i = 0; i < ny; i++) dy[i] = (float)ref_act_bwd(c.r[i], act == 2 ? c.z[i] : c.y[i], act);
    ref_gemm(1, 0, I, O, B, 1.0f, c.x, I, dy, O, 0.0f, dw, O, NULL, 0);   /* dW = x^T dy */
    ref_gemm(1, 0, 1, O, B, 1.0f, ones, 1, dy, O, 0.0f, db, O, NULL, 0);  /* db = 1^T dy */
    ref_gemm(0, 1, B, I, O, 1.0f, dy, O, c.w, O, 0.0f, dx, I, NULL, 0);   /* dx = dy W^T */
    fd_stats sx = {0}, sw = {0}, sb = {0};
    size_t nsign = act == 1 ? ny : 0;
    double ymax = amax(c.z, ny), rtol = 1e-4;
    float eps = 1e-2f;
    /* an input touches O outputs, a weight or bias B */
    double ax = fd_atol((size_t)O, ymax, eps) + fd_smooth(act, (size_t)O, eps);
    double aw = fd_atol((size_t)B, ymax, eps) + fd_smooth(act, (size_t)B, eps);
    fd_check("dense dx", c.x, dx, nx, eps, dense_eval, &c, nsign, rtol, ax, &sx);
    fd_check("dense dw", c.w, dw, nw, eps, dense_eval, &c, nsign, rtol, aw, &sw);
    fd_check("dense db", c.b, db, O, eps, dense_eval, &c, nsign, rtol, aw, &sb);
    fprintf(stderr, "# dense B%d %d->%d %s (max|y| %.3g, atol dx %.2g dw %.2g):\n", B, I, O, act_name(act), ymax, ax, aw);
    fd_report("  dx", &sx);
    fd_report("  dw", &sw);
    fd_report("  db", &sb);
    assert_int_equal(sx.bad + sw.bad + sb.bad, 0);
    assert_true(sx.checked * 2 >= (long)nx && sw.checked * 2 >= (long)nw);
    free(c.x); free(c.w); free(c.b); free(c.y); free(c.z); free(c.r);
    free(dy); free(dx); free(dw); free(db); free(ones);
}

static void test_dense_grad(void **state) {
    (void)state;
    check_dense(1, 1, 1, 0, 1);
    check_dense(3, 7, 5, 0, 2);
    check_dense(4, 17, 13, 1, 3);
    check_dense(2, 36, 3, 0, 4);
    check_dense(5, 23, 2, 1, 5);
    check_dense(4, 17, 13, 2, 6);
    check_dense(3, 9, 31, 2, 7);
}

/* ---------------- softmax cross-entropy ---------------- */

typedef struct xent_ctx {
    float *z;
    const int32_t *lab;
    int B, C;
    double e;  /* label smoothing */
} xent_ctx;

static double xent_eval(void *vctx, signed char *sign) {
    xent_ctx *c = vctx;
    (void)sign;
    return ref_softmax_xent_smooth(NULL, c->z, c->lab, c->B, c->C, c->e, NULL) / c->B;  /* the mean loss */
}

static void check_xent(int B, int C, float scale, uint64_t seed, double e) {
    ct_rng g = ct_rng_make(seed, (uint64_t)B, (uint64_t)C);
    size_t n = (size_t)B * C;
    float *z = malloc(n * 4), *dl = malloc(n * 4);
    int32_t *lab = malloc(B * 4);
    ct_fill_rand(z, n, &g, scale);
    for (int b = 0; b < B; b++) lab[b] = (int32_t)ct_rng_below(&g, (uint32_t)C);
    ct_fill_nan(dl, n);
    int correct = -1;
    double loss = ref_softmax_xent_smooth(dl, z, lab, B, C, e, &correct);
    /* the loss is the sum over rows of (1-e) * -log softmax[label] + e * mean_j -log softmax[j];
     * correct counts argmax == label */
    double want = 0;
    int want_ok = 0;
    for (int b = 0; b < B; b++) {
        double s = 0;
        int arg = 0;
        for (int j = 0; j < C; j++) {
            s += exp((double)z[b * C + j]);
            if (z[b * C + j] > z[b * C + arg]) arg = j;
        }
        double mean_z = 0;
        for (int j = 0; j < C; j++) mean_z += (double)z[b * C + j] / C;
        want += (1 - e) * (log(s) - z[b * C + lab[b]]) + e * (log(s) - mean_z);
        want_ok += arg == lab[b];
    }
    if (!(fabs(loss - want) <= 1e-12 * (1 + fabs(want)))) fprintf(stderr, "# loss %.15g want %.15g\n", loss, want);
    assert_true(fabs(loss - want) <= 1e-12 * (1 + fabs(want)));
    assert_int_equal(correct, want_ok);
    xent_ctx c = {z, lab, B, C, e};
    fd_stats st = {0};
    /* smooth: truncation error ~eps^2/6 * |third derivative| <= ~1e-7; dlogits rounded to float */
    fd_check("xent dlogits", z, dl, n, 1e-3f, xent_eval, &c, 0, 1e-4, 2e-7, &st);
    char what[64];
    snprintf(what, sizeof what, "softmax_xent B%d C%d scale %g smoothing %g", B, C, scale, e);
    fd_report(what, &st);
    assert_int_equal(st.bad, 0);
    assert_int_equal(st.checked, (long)n);
    /* each row of dlogits sums to zero */
    for (int b = 0; b < B; b++) {
        double s = 0;
        for (int j = 0; j < C; j++) s += dl[b * C + j];
        assert_true(fabs(s) < 1e-6);
    }
    free(z); free(dl); free(lab);
}

static void test_softmax_xent_grad(void **state) {
    (void)state;
    check_xent(1, 2, 1, 1, 0);
    check_xent(4, 7, 3, 2, 0);
    check_xent(5, 10, 5, 3, 0);
    check_xent(3, 37, 2, 4, 0);
    check_xent(1, 2, 1, 5, 0.5);
    check_xent(4, 7, 3, 6, 0.1);
    check_xent(5, 10, 5, 7, 0.25);
    check_xent(3, 37, 2, 8, 0.9);
}

/* no overflow, no log(0) on logits of magnitude 1e4 */
static void test_softmax_xent_large(void **state) {
    (void)state;
    float z[4 * 3] = {1e4f, 9999.0f, -1e4f,     /* label 1: loss 1 + log(1 + e^-1) */
                      1e4f, 9999.0f, -1e4f,     /* label 2: loss 2e4 + log(1 + e^-1) */
                      -1e4f, -1e4f, -1e4f,      /* label 0: log 3, a tie: argmax is the first */
                      -1e4f, 1e4f, 1e4f};       /* label 0: 2e4 + log 2 */
    int32_t lab[4] = {1, 2, 0, 0};
    float dl[12];
    ct_fill_nan(dl, 12);
    int correct = -1;
    double loss = ref_softmax_xent(dl, z, lab, 4, 3, &correct);
    double l1 = log1p(exp(-1.0));
    double want[4] = {1 + l1, 2e4 + l1, log(3.0), 2e4 + log(2.0)};
    double sum = want[0] + want[1] + want[2] + want[3];
    fprintf(stderr, "# large logits: loss %.12g want %.12g\n", loss, sum);
    assert_true(isfinite(loss));
    assert_true(fabs(loss - sum) <= 1e-9 * sum);
    assert_int_equal(correct, 1);  /* row 2: the tie goes to class 0 */
    for (int i = 0; i < 12; i++) assert_true(isfinite(dl[i]));
    double p0 = 1 / (1 + exp(-1.0));  /* softmax of row 0 */
    float want_dl[12] = {(float)(p0 / 4), (float)((1 - p0 - 1) / 4), 0, (float)(p0 / 4), (float)((1 - p0) / 4), -0.25f,
                         (float)((1.0 / 3 - 1) / 4), (float)(1.0 / 12), (float)(1.0 / 12), -0.25f, 0.125f, 0.125f};
    assert_true(ct_compare("large-logit dlogits", dl, want_dl, 12, 1e-6, 1e-9));
}

/* ---------------- optimizers: one step by hand ---------------- */

static void test_optim_by_hand(void **state) {
    (void)state;
    /* Adam's first step moves each parameter by lr * g/(|g| + eps') = ~lr * sign(g), plus lr*wd*p */
    float p[4] = {1, -2, 0.5f, 0}, m[4] = {0}, v[4] = {0}, gr[4] = {0.3f, -4, 0, 1e-3f};
    ref_adam(p, m, v, gr, 4, 0.1f, 0.9f, 0.999f, 1e-8f, 0.01f, 1);
    float want[4] = {1 - 0.1f * (1 + 0.01f), -2 - 0.1f * (-1 - 0.02f), 0.5f - 0.1f * 0.005f, -0.1f};
    assert_true(ct_compare("adam step 1", p, want, 4, 1e-5, 1e-6));
    float wm[4] = {0.03f, -0.4f, 0, 1e-4f}, wv[4] = {0.3f * 0.3f * 0.001f, 16 * 0.001f, 0, 1e-9f};
    assert_true(ct_compare("adam m", m, wm, 4, 1e-6, 0));
    assert_true(ct_compare("adam v", v, wv, 4, 1e-4, 0));
    /* SGD with momentum (PyTorch): buf = mu*buf + g + wd*p; p -= lr*buf */
    float q[2] = {1, -1}, buf[2] = {0.5f, 0}, g2[2] = {1, 2};
    ref_sgd(q, buf, g2, 2, 0.1f, 0.9f, 0.1f);
    float wbuf[2] = {0.45f + 1 + 0.1f, 2 - 0.1f}, wq[2] = {1 - 0.155f, -1 - 0.19f};
    assert_true(ct_compare("sgd buf", buf, wbuf, 2, 1e-6, 1e-7));
    assert_true(ct_compare("sgd p", q, wq, 2, 1e-6, 1e-7));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_conv_grad_linear),
        cmocka_unit_test(test_conv_grad_relu),
        cmocka_unit_test(test_conv_grad_gelu),
        cmocka_unit_test(test_gelu),
        cmocka_unit_test(test_conv_accumulates),
        cmocka_unit_test(test_maxpool_grad),
        cmocka_unit_test(test_maxpool_ties),
        cmocka_unit_test(test_dense_grad),
        cmocka_unit_test(test_softmax_xent_grad),
        cmocka_unit_test(test_softmax_xent_large),
        cmocka_unit_test(test_optim_by_hand),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
