/* test_bn.c: batch normalisation. The float64 reference is checked by
 * central differences; the device layer (kernels/bn.cl) against the
 * reference in training mode (output, running averages, dx, dgamma, dbeta,
 * linear, ReLU and GELU) and in evaluation mode, outputs poisoned with NaN,
 * on shapes with 1 to 1152 rows and odd channel counts. */
#include "ct_test.h"
#include "cltrain/layer.h"
#include "cltrain/ref.h"
#include "cltrain/ref/batchnorm.h"

static void check_ref_gradients(int act) {
    const int M = 7, C = 3;
    ct_rng r = ct_rng_make(5, 1, 2);
    float x[21], g[3], b[3], y[21], rr[21], dx[21], dg[3] = {0}, db[3] = {0};
    ct_fill_rand(x, 21, &r, 2);
    ct_fill_rand(g, 3, &r, 1.5f);
    ct_fill_rand(b, 3, &r, 1);
    ct_fill_rand(rr, 21, &r, 1);
    float z[21];
    ref_bn_forward(y, NULL, NULL, x, g, b, M, C, 1e-5f, act);
    ref_bn_forward(z, NULL, NULL, x, g, b, M, C, 1e-5f, 0);
    ref_bn_backward(dx, dg, db, rr, act == CT_ACT_GELU ? z : y, x, g, M, C, 1e-5f, act);
    double worst = 0;
    /* loss = sum(y * rr); perturb each input, gamma and beta */
    float *vars[3] = {x, g, b}, *grads[3] = {dx, dg, db};
    int counts[3] = {21, 3, 3};
    for (int v = 0; v < 3; v++)
        for (int i = 0; i < counts[v]; i++) {
            float keep = vars[v][i], h = 1e-2f;
            double lp = 0, lm = 0;
            vars[v][i] = keep + h;
            ref_bn_forward(y, NULL, NULL, x, g, b, M, C, 1e-5f, act);
            for (int k = 0; k < 21; k++) lp += (double)y[k] * rr[k];
            vars[v][i] = keep - h;
            ref_bn_forward(y, NULL, NULL, x, g, b, M, C, 1e-5f, act);
            for (int k = 0; k < 21; k++) lm += (double)y[k] * rr[k];
            vars[v][i] = keep;
            double fd = (lp - lm) / (2.0 * h), err = fabs(fd - grads[v][i]) / (fabs(fd) + 1e-2);
            if (err > worst) worst = err;
            if (err > 2e-3) fprintf(stderr, "# var %d [%d]: fd %.6f analytic %.6f\n", v, i, fd, grads[v][i]);
        }
    fprintf(stderr, "# batchnorm reference, %s: worst relative error vs central differences %.2e\n",
            ct_activations[act].name, worst);
    assert_true(worst < 2e-3);
}

static void test_ref_gradients(void **state) {
    (void)state;
    check_ref_gradients(CT_ACT_LINEAR);
    check_ref_gradients(CT_ACT_GELU); /* smooth, so no kink to step over */
}

/* x uniform in offset +- spread per element. x - mean carries the mean's
 * rounding, about float epsilon times the offset, which the normalisation
 * scales by 1/spread: the absolute tolerances grow with offset/spread. */
/* eps= and momentum= as given (PyTorch's convention: running = (1 - momentum)
 * running + momentum batch); constant: channel 0 holds 2.0 in every row, a
 * variance of exactly 0 that eps alone keeps finite */
static void check_bn_keys(int B, int H, int W, int C, int act, uint64_t seed, float offset, float spread, float eps,
                          float mom, int constant) {
    const double k = 1.0 + offset / spread / 10.0;
    char cfg[512];
    snprintf(cfg, sizeof cfg, "[net]\nheight=%d\nwidth=%d\nchannels=%d\nclasses=3\n[maxpool]\nsize=1\n[batchnorm]\nactivation=%s\n"
             "momentum=%.9g\neps=%.9g\n[dense]\noutputs=3\n[softmax]\n", H, W, C, ct_activations[act].name, (double)mom,
             (double)eps);
    ct_model m;
    assert_int_equal(ct_model_parse(&m, cfg, "bn-test"), 0);
    assert_int_equal(ct_model_setup(&m, &g_cl, B, CT_GEMM_NATIVE), 0);
    ct_model_init_weights(&m, seed);
    ct_layer *L = &m.layers[1];
    assert_true(L->priv.f[0] == eps && L->priv.f[1] == mom); /* where src/nn/layers/batchnorm.c keeps them */
    int M = B * H * W;
    size_t n = (size_t)M * C;
    ct_rng r = ct_rng_make(seed, 3, 4);
    float *p = malloc(m.n_params * 4);
    ct_model_get_params(&m, p);
    float *gamma = p + L->w_off, *beta = p + L->b_off;
    ct_fill_rand(gamma, (size_t)C, &r, 1.5f);
    ct_fill_rand(beta, (size_t)C, &r, 1.0f);
    ct_model_set_params(&m, p);
    float *x = malloc(n * 4), *y = malloc(n * 4), *got = malloc(n * 4), *dy = malloc(n * 4), *dx = malloc(n * 4);
    ct_fill_rand(x, n, &r, spread);
    for (size_t i = 0; i < n; i++) x[i] = constant && i % (size_t)C == 0 ? 2.0f : x[i] + offset;
    ct_cl_write(&g_cl, m.input, 0, n * 4, x);
    /* the maxpool of size 1 copies x; poison what the batch norm writes */
    ct_layer_forward(&m, 0, B);
    float *nan = malloc(n * 4);
    ct_fill_nan(nan, n);
    ct_cl_write(&g_cl, L->out, 0, n * 4, nan);
    ct_cl_write(&g_cl, L->dx, 0, n * 4, nan);
    ct_layer_forward(&m, 1, B);
    double *mean = malloc(sizeof(double) * C), *is = malloc(sizeof(double) * C);
    ref_bn_forward(y, mean, is, x, gamma, beta, M, C, eps, act);
    ct_cl_read(&g_cl, L->out, 0, n * 4, got);
    char what[96];
    snprintf(what, sizeof what, "bn fwd B%d %dx%dx%d %s eps %g momentum %g%s", B, H, W, C, ct_activations[act].name,
             (double)eps, (double)mom, constant ? " constant channel" : "");
    assert_true(ct_compare(what, got, y, n, 1e-4, 1e-5 * k));
    /* running averages after one step from (0, 1), unbiased variance */
    float *run = malloc(sizeof(float) * 2 * C), *want_run = malloc(sizeof(float) * 2 * C);
    ct_cl_read(&g_cl, m.params, (L->w_off + C) * 4, 2 * (size_t)C * 4, run);
    for (int c = 0; c < C; c++) {
        double var = 1.0 / (is[c] * is[c]) - eps;
        want_run[c] = (float)(mom * mean[c]);
        want_run[C + c] = (float)(1.0 - mom + mom * var * M / (M > 1 ? M - 1 : 1));
    }
    snprintf(what, sizeof what, "bn running mean/var B%d %dx%dx%d", B, H, W, C);
    assert_true(ct_compare(what, run, want_run, 2 * (size_t)C, 1e-4, 1e-5));
    /* backward: dy arrives in the next layer's dx */
    ct_fill_rand(dy, n, &r, 1.0f);
    ct_cl_write(&g_cl, m.layers[2].dx, 0, n * 4, dy);
    ct_model_zero_grad(&m);
    ct_layer_backward(&m, 1, B);
    float *dg = calloc((size_t)C, 4), *db = calloc((size_t)C, 4), *gg = malloc(sizeof(float) * C);
    float *z = malloc(n * 4); /* GELU's gradient reads its input, recomputed by the kernels, never kept */
    ref_bn_forward(z, NULL, NULL, x, gamma, beta, M, C, eps, CT_ACT_LINEAR);
    assert_null(L->act_in);
    ref_bn_backward(dx, dg, db, dy, act == CT_ACT_GELU ? z : y, x, gamma, M, C, eps, act);
    free(z);
    ct_cl_read(&g_cl, L->dx, 0, n * 4, got);
    snprintf(what, sizeof what, "bn dx B%d %dx%dx%d", B, H, W, C);
    assert_true(ct_compare(what, got, dx, n, 1e-3, 1e-5 * k * sqrt(M)));
    ct_cl_read(&g_cl, m.grads, L->w_off * 4, (size_t)C * 4, gg);
    snprintf(what, sizeof what, "bn dgamma B%d %dx%dx%d", B, H, W, C);
    assert_true(ct_compare(what, gg, dg, (size_t)C, 1e-3, 1e-5 * k * sqrt(M)));
    ct_cl_read(&g_cl, m.grads, L->b_off * 4, (size_t)C * 4, gg);
    snprintf(what, sizeof what, "bn dbeta B%d %dx%dx%d", B, H, W, C);
    assert_true(ct_compare(what, gg, db, (size_t)C, 1e-3, 1e-5 * sqrt(M)));
    /* the running averages have no gradient, so no optimizer ever moves them */
    float *rg = malloc(sizeof(float) * 2 * C), *zero = calloc(2 * (size_t)C, 4);
    ct_cl_read(&g_cl, m.grads, (L->w_off + C) * 4, 2 * (size_t)C * 4, rg);
    assert_memory_equal(rg, zero, 2 * (size_t)C * 4);
    /* evaluation: the running averages replace the batch statistics */
    m.training = 0;
    ct_cl_write(&g_cl, L->out, 0, n * 4, nan);
    ct_layer_forward(&m, 1, B);
    ct_cl_read(&g_cl, L->out, 0, n * 4, got);
    for (size_t i = 0; i < n; i++) {
        int c = (int)(i % C);
        double v = gamma[c] * (x[i] - run[c]) / sqrt(run[C + c] + eps) + beta[c];
        y[i] = (float)ref_act(v, act);
    }
    snprintf(what, sizeof what, "bn eval B%d %dx%dx%d", B, H, W, C);
    assert_true(ct_compare(what, got, y, n, 1e-4, 1e-5));
    free(p); free(x); free(y); free(got); free(dy); free(dx); free(nan); free(mean); free(is); free(run); free(want_run);
    free(dg); free(db); free(gg); free(rg); free(zero);
    ct_model_free(&m);
}

static void check_bn_at(int B, int H, int W, int C, int act, uint64_t seed, float offset, float spread) {
    check_bn_keys(B, H, W, C, act, seed, offset, spread, 1e-5f, 0.1f, 0);
}

static void check_bn(int B, int H, int W, int C, int act, uint64_t seed) {
    check_bn_at(B, H, W, C, act, seed, 1.5f, 3.0f); /* a mean away from 0 */
}

static void test_device_vs_reference(void **state) {
    (void)state;
    CT_NEED_CL();
    check_bn(1, 1, 1, 5, 0, 1);    /* one row */
    check_bn(4, 5, 7, 3, 0, 2);    /* 140 rows: three chunks, the last partial */
    check_bn(2, 6, 6, 16, 1, 3);   /* C 16 and 48: bn_reduce16 on a CPU, bn_reduce8 on a GPU; 8: bn_reduce8; 5, 3 and 33: the scalar bn_reduce */
    check_bn(3, 4, 5, 48, 0, 7);   /* C a multiple of 16: bn_fwd and bn_bwd_dx move 16 channels at once */
    check_bn(3, 1, 1, 33, 1, 4);   /* after a dense layer */
    check_bn(8, 12, 12, 8, 1, 5);  /* 1152 rows, 18 chunks */
    check_bn(4, 5, 7, 3, CT_ACT_GELU, 8);  /* GELU: the scalar kernels */
    check_bn(2, 6, 6, 16, CT_ACT_GELU, 9); /* 16 channels at once (bn_reduce16 on a CPU) */
    check_bn(2, 6, 6, 8, CT_ACT_GELU, 10); /* bn_reduce8's GELU */
    /* a mean 300 times the spread: sum of squares minus squared sum would
     * lose about 5 digits of the variance here (22500 against 0.08) */
    check_bn_at(8, 12, 12, 8, 0, 6, 150.0f, 0.5f);
    /* C a multiple of 64 or 32: bn_reduce64 / bn_reduce32 on a CPU (a row's channels per work-item), every mode:
     * linear and ReLU (mode 2), GELU (mode 3, the kept derivative), the mean far from 0 (mode 0) */
    check_bn(3, 5, 7, 64, 0, 15);
    check_bn(3, 5, 7, 96, CT_ACT_GELU, 19); /* bn_reduce32: 32 channels at once */
    check_bn(4, 4, 4, 32, CT_ACT_RELU, 20);
    check_bn(2, 6, 6, 128, CT_ACT_RELU, 16);
    check_bn(2, 9, 9, 64, CT_ACT_GELU, 17); /* 162 rows: three chunks, the last partial */
    check_bn_at(2, 6, 6, 192, 0, 18, 150.0f, 0.5f);
}

/* eps=1e-12 and momentum=0.4 (the fast CIFAR model's), the first channel
 * constant: its variance is 0, 1/sqrt(0 + 1e-12) = 1e6 in float, and
 * every output, gradient and running average stays finite and matches */
static void test_eps_momentum(void **state) {
    (void)state;
    CT_NEED_CL();
    check_bn_keys(4, 5, 7, 3, 0, 11, 1.5f, 3.0f, 1e-12f, 0.4f, 0);
    check_bn_keys(2, 6, 6, 16, CT_ACT_GELU, 12, 1.5f, 3.0f, 1e-12f, 0.4f, 1);
    check_bn_keys(3, 4, 5, 48, 0, 13, 0.0f, 1.0f, 1e-12f, 0.4f, 1);
    check_bn_keys(2, 3, 3, 5, CT_ACT_RELU, 14, 0.0f, 1.0f, 1e-3f, 1.0f, 0); /* momentum 1: the last batch's alone */
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ref_gradients),
        cmocka_unit_test(test_device_vs_reference),
        cmocka_unit_test(test_eps_momentum),
    };
    return cmocka_run_group_tests(tests, ct_test_open, ct_test_close);
}
