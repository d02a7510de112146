/* test_globalmaxpool.c: [globalmaxpool]. The float64 reference against
 * central differences (distinct inputs, so no maximum changes within the
 * step) and on ties and NaN; the device layer against the reference:
 * outputs poisoned with NaN, an odd batch under the allocated one, odd
 * sizes, 1 to 67 channels, one pixel; the gradient reaches the maximum's
 * pixel alone (every other dx exactly 0); parsing (it takes no keys) and a
 * model that trains with it. */
#include "ct_test.h"
#include "cltrain/layer.h"
#include "cltrain/optim.h"
#include "cltrain/ref.h"
#include "cltrain/ref/globalmaxpool.h"

static void test_ref_gradient(void **state) {
    (void)state;
    enum { B = 2, HW = 6, C = 3, N = B * HW * C };
    float x[N], y[B * C], y2[B * C], dx[N];
    double r[B * C];
    /* distinct values 0.05 apart in a shuffled order: a step of 1e-3 moves no maximum */
    for (int i = 0; i < N; i++) x[i] = 0.05f * (float)((i * 17) % N) - 0.9f;
    ct_rng g = ct_rng_make(3, 1, 4);
    float dy[B * C];
    for (int i = 0; i < B * C; i++) dy[i] = (float)(r[i] = 2 * ct_rng_uniform(&g) - 1);
    ref_globalmaxpool_backward(dx, dy, x, B, HW, C);
    double worst = 0;
    int nonzero = 0;
    for (int i = 0; i < N; i++) {
        float keep = x[i];
        double lp = 0, lm = 0;
        x[i] = keep + 1e-3f;
        ref_globalmaxpool_forward(y, x, B, HW, C);
        x[i] = keep - 1e-3f;
        ref_globalmaxpool_forward(y2, x, B, HW, C);
        x[i] = keep;
        for (int j = 0; j < B * C; j++) { lp += y[j] * r[j]; lm += y2[j] * r[j]; }
        double fd = (lp - lm) / ((double)(keep + 1e-3f) - (double)(keep - 1e-3f));
        worst = fmax(worst, fabs(fd - dx[i]));
        nonzero += dx[i] != 0;
    }
    fprintf(stderr, "# globalmaxpool reference: %d inputs, %d with a gradient, worst abs error vs central differences %.2e\n",
            N, nonzero, worst);
    assert_true(worst < 1e-4);
    assert_int_equal(nonzero, B * C); /* one pixel per (image, channel) */
    /* ties: the first; a NaN wins and stays */
    float t[4] = {1, 3, 3, 2};
    assert_int_equal(ref_globalmaxpool_arg(t, 0, 4, 1, 0), 1);
    t[2] = NAN;
    assert_int_equal(ref_globalmaxpool_arg(t, 0, 4, 1, 0), 2);
    t[0] = NAN;
    assert_int_equal(ref_globalmaxpool_arg(t, 0, 4, 1, 0), 0);
}

/* where want is NaN, got must be too: both set to 0 so that ct_compare, which fails on NaN, checks the rest */
static void nan_match(float *got, float *want, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (isnan(want[i])) {
            assert_true(isnan(got[i]));
            got[i] = want[i] = 0.0f;
        }
}

/* [globalmaxpool] as layer 1 of a model (after an identity [maxpool], so it has a dx) */
static void check_device(int batch, int B, int H, int W, int C, uint64_t seed, int ties) {
    char cfg[512];
    snprintf(cfg, sizeof cfg, "[net]\nheight=%d\nwidth=%d\nchannels=%d\nclasses=2\n[maxpool]\nsize=1\n[globalmaxpool]\n"
             "[dense]\noutputs=2\n[softmax]\n", H, W, C);
    ct_model m;
    int rc = ct_model_parse(&m, cfg, "gmp-test");
    if (rc) fprintf(stderr, "# %s\n", ct_last_error());
    assert_int_equal(rc, 0);
    assert_int_equal(ct_model_setup(&m, &g_cl, batch, CT_GEMM_NATIVE), 0);
    ct_layer *L = &m.layers[1];
    assert_true(L->oh == 1 && L->ow == 1 && L->oc == C);
    size_t n = (size_t)B * H * W * C, no = (size_t)B * C;
    ct_rng r = ct_rng_make(seed, 5, (uint64_t)C);
    float *x = malloc(n * 4), *got = malloc(n * 4), *want = malloc(n * 4), *dy = malloc(no * 4), *nan = malloc(n * 4);
    ct_fill_rand(x, n, &r, 2);
    if (ties) /* values in {-1, 0, 1}: many equal maxima, the first wins */
        for (size_t i = 0; i < n; i++) x[i] = (float)(int)(x[i] * 1.4f);
    if (ties == 2) /* and a NaN in every 7th (image, channel), at a pixel that varies: it wins and stays */
        for (size_t bc = 0; bc < (size_t)B * C; bc += 7) x[(bc / C * H * W + bc % (H * W)) * C + bc % C] = NAN;
    ct_fill_rand(dy, no, &r, 1);
    ct_fill_nan(nan, n);
    ct_cl_write(&g_cl, m.input, 0, n * 4, x);
    ct_layer_forward(&m, 0, B);
    ct_cl_write(&g_cl, L->out, 0, no * 4, nan);
    ct_layer_forward(&m, 1, B);
    ct_cl_read(&g_cl, L->out, 0, no * 4, got);
    ref_globalmaxpool_forward(want, x, B, H * W, C);
    char what[96];
    snprintf(what, sizeof what, "globalmaxpool fwd B%d %dx%dx%d%s", B, H, W, C, ties == 2 ? " ties, NaN" : ties ? " ties" : "");
    nan_match(got, want, no);
    assert_true(ct_compare(what, got, want, no, 0, 0)); /* a copy of one input: exact */
    ct_cl_write(&g_cl, m.layers[2].dx, 0, no * 4, dy);
    ct_cl_write(&g_cl, L->dx, 0, n * 4, nan);
    ct_layer_backward(&m, 1, B);
    ct_cl_read(&g_cl, L->dx, 0, n * 4, got);
    ref_globalmaxpool_backward(want, dy, x, B, H * W, C);
    snprintf(what, sizeof what, "globalmaxpool bwd B%d %dx%dx%d%s", B, H, W, C, ties == 2 ? " ties, NaN" : ties ? " ties" : "");
    nan_match(got, want, n);
    assert_true(ct_compare(what, got, want, n, 0, 0));
    size_t routed = 0;
    for (size_t i = 0; i < n; i++) routed += got[i] != 0;
    assert_true(routed <= no);
    free(x); free(got); free(want); free(dy); free(nan);
    ct_model_free(&m);
}

static void test_device(void **state) {
    (void)state;
    CT_NEED_CL();
    /*          batch B  H  W   C  seed ties */
    check_device(3, 3, 5, 7, 3, 1, 0);
    check_device(4, 3, 8, 8, 16, 2, 0);  /* an odd batch under the allocated 4 */
    check_device(2, 2, 1, 1, 5, 3, 0);   /* one pixel: the identity */
    check_device(2, 2, 9, 5, 67, 4, 0);  /* more channels than a 64-wide work-group */
    check_device(2, 2, 6, 6, 8, 5, 1);
    /* 16 channels a work-item on a CPU (ct_channel_vw): ties and NaN per lane, cifar-fast's 3x3x256 */
    check_device(3, 3, 3, 3, 32, 6, 1);
    check_device(2, 2, 4, 5, 48, 7, 2);
    check_device(2, 2, 5, 3, 5, 8, 2);   /* the same, one channel a work-item */
    check_device(4, 4, 3, 3, 256, 9, 0);
}

static void test_parse_and_train(void **state) {
    (void)state;
    ct_model m;
    int rc = ct_model_parse(&m, "[net]\nheight=4\nwidth=4\nchannels=2\nclasses=2\n[globalmaxpool]\nsize=2\n[dense]\noutputs=2\n[softmax]\n", "bad.cfg");
    assert_int_equal(rc, CT_EINPUT);
    fprintf(stderr, "# %s\n", ct_last_error());
    assert_non_null(strstr(ct_last_error(), "bad.cfg:7: size=2: [globalmaxpool] takes no key 'size'"));
    CT_NEED_CL();
    /* a small net with it learns: conv, GELU, global max pool, dense on 4 fixed images */
    rc = ct_model_parse(&m, "[net]\nheight=6\nwidth=6\nchannels=1\nclasses=2\n[conv]\nfilters=8\nsize=3\npad=1\n"
                            "activation=gelu\n[globalmaxpool]\n[dense]\noutputs=2\n[softmax]\n", "gmp.cfg");
    assert_int_equal(rc, 0);
    assert_int_equal(ct_model_setup(&m, &g_cl, 4, CT_GEMM_NATIVE), 0);
    ct_model_init_weights(&m, 9);
    uint8_t img[4 * 36] = {0};
    int32_t lab[4] = {0, 1, 0, 1};
    for (int b = 0; b < 4; b++) img[b * 36 + (lab[b] ? 35 : 14)] = 255; /* a dot: centre or corner */
    ct_optim_hparams hp = {.kind = CT_OPT_ADAM, .lr = 1e-2f, .b1 = 0.9f, .b2 = 0.999f, .eps = 1e-8f};
    ct_optim_state o;
    assert_int_equal(ct_optim_setup(&o, &m, &hp), 0);
    double first = 0, last = 0;
    for (int step = 0; step < 60; step++) {
        ct_model_set_batch(&m, img, lab, 4, 1.0f / 255, 0);
        ct_model_zero_grad(&m);
        ct_model_forward(&m, 4);
        ct_model_loss(&m, 4);
        ct_model_backward(&m, 4, NULL, NULL);
        ct_model_guard_grads(&m);
        ct_optim_step(&o, hp.lr);
        double l = ct_model_read_results(&m, 4, NULL) / 4;
        if (!step) first = l;
        last = l;
    }
    fprintf(stderr, "# conv + GELU + globalmaxpool: loss %.4f -> %.4f in 60 steps\n", first, last);
    assert_true(last < 0.5 * first);
    ct_optim_free(&o);
    ct_model_free(&m);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ref_gradient),
        cmocka_unit_test(test_device),
        cmocka_unit_test(test_parse_and_train),
    };
    return cmocka_run_group_tests(tests, ct_test_open, ct_test_close);
}
