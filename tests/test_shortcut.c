/* test_shortcut.c: the [shortcut] residual layer. The float64 reference
 * (src/ref/shortcut.c) against central differences, with and without ReLU,
 * on a shape that subsamples (stride 2, odd sizes) and zero-pads channels;
 * the device kernels against it (outputs poisoned with NaN, odd batch);
 * the sequencer's routing of the gradient into the earlier layer (its own
 * gradient plus the shortcut's share); parsing, including the built-in
 * resnet20 (He et al. 2016: 0.27 M weights, 3 stages). */
#include "ct_test.h"
#include "cltrain/layer.h"
#include "cltrain/ref.h"

enum { B = 2, H = 3, W = 3, C = 5, SH = 5, SW = 6, SC = 3, S = 2 };
#define NA (B * H * W * C)
#define NS (B * SH * SW * SC)

static double loss_of(const float *a, const float *s, const float *r, int act) {
    float y[NA];
    ref_shortcut_forward(y, a, s, B, H, W, C, SH, SW, SC, S, act);
    double l = 0;
    for (int i = 0; i < NA; i++) l += (double)y[i] * r[i];
    return l;
}

static void test_ref_gradients(void **state) {
    (void)state;
    for (int act = 0; act < 2; act++) {
        ct_rng g = ct_rng_make(11, 2, (uint64_t)act);
        float a[NA], s[NS], r[NA], y[NA], da[NA], ds[NS] = {0};
        ct_fill_rand(a, NA, &g, 1);
        ct_fill_rand(s, NS, &g, 1);
        ct_fill_rand(r, NA, &g, 1);
        /* keep every sum 0.01 away from the ReLU's kink, where differences of step 1e-3 would straddle it */
        ref_shortcut_forward(y, a, s, B, H, W, C, SH, SW, SC, S, 0);
        for (int i = 0; i < NA; i++)
            if (fabsf(y[i]) < 0.01f) a[i] += 0.05f;
        ref_shortcut_forward(y, a, s, B, H, W, C, SH, SW, SC, S, act);
        ref_shortcut_backward(da, ds, r, y, B, H, W, C, SH, SW, SC, S, act);
        float *vars[2] = {a, s}, *grads[2] = {da, ds};
        int counts[2] = {NA, NS}, checked = 0, unsampled_zero = 1;
        double worst = 0, h = 1e-3;
        for (int v = 0; v < 2; v++)
            for (int i = 0; i < counts[v]; i++) {
                float keep = vars[v][i];
                vars[v][i] = keep + (float)h;
                double lp = loss_of(a, s, r, act);
                vars[v][i] = keep - (float)h;
                double lm = loss_of(a, s, r, act);
                vars[v][i] = keep;
                double fd = (lp - lm) / (2 * h);
                double err = fabs(fd - grads[v][i]);
                if (err > worst) worst = err;
                checked++;
                if (v == 1 && fd == 0 && grads[v][i] != 0) unsampled_zero = 0;
            }
        fprintf(stderr, "# shortcut reference, act %d: %d derivatives, worst abs error vs central differences %.2e\n", act,
                checked, worst);
        assert_int_equal(checked, NA + NS);
        assert_true(unsampled_zero);
        assert_true(worst < 1e-3);
    }
}

/* layer 0 (9x9x3) -> layer 1 conv stride 2 (5x5x5) -> layer 2 shortcut from=-2 (layer 0: subsampled, zero-padded) */
static const char *cfg =
    "[net]\nheight=9\nwidth=9\nchannels=2\nclasses=3\n[conv]\nfilters=3\nsize=1\n[conv]\nfilters=5\nsize=3\nstride=2\npad=1\n"
    "[shortcut]\nfrom=-2\nactivation=relu\n[avgpool]\n[dense]\noutputs=3\n[softmax]\n";

static void test_device(void **state) {
    (void)state;
    CT_NEED_CL();
    ct_model m;
    assert_int_equal(ct_model_parse(&m, cfg, "shortcut-test"), 0);
    assert_int_equal(ct_model_setup(&m, &g_cl, 4, CT_GEMM_NATIVE), 0);
    ct_model_init_weights(&m, 5);
    ct_layer *L0 = &m.layers[0], *L1 = &m.layers[1], *L = &m.layers[2];
    assert_int_equal(L->from, 0);
    assert_int_equal(L->stride, 2);
    const int b = 3; /* an odd batch, under the allocated 4 */
    size_t na = (size_t)b * ct_out_size(L), ns = (size_t)b * ct_out_size(L0);
    float *a = malloc(na * 4), *s = malloc(ns * 4), *want = malloc(na * 4), *got = malloc(na * 4), *dy = malloc(na * 4);
    float *ds = calloc(ns, 4), *own = malloc(ns * 4), *both = malloc(ns * 4), *da = malloc(na * 4);
    ct_rng g = ct_rng_make(9, 1, 1);
    ct_fill_rand(a, na, &g, 1);
    ct_fill_rand(s, ns, &g, 1);
    ct_fill_rand(dy, na, &g, 1);
    float *nan = malloc(na * 4);
    ct_fill_nan(nan, na);
    ct_cl_write(&g_cl, L0->out, 0, ns * 4, s);
    ct_cl_write(&g_cl, L1->out, 0, na * 4, a);
    ct_cl_write(&g_cl, L->out, 0, na * 4, nan);
    ct_layer_forward(&m, 2, b);
    ct_cl_read(&g_cl, L->out, 0, na * 4, got);
    ref_shortcut_forward(want, a, s, b, L->oh, L->ow, L->oc, L0->oh, L0->ow, L0->oc, 2, 1);
    assert_true(ct_compare("shortcut forward", got, want, na, 0, 0));
    /* backward: dx of the shortcut is the ReLU-masked dy */
    ct_cl_write(&g_cl, m.layers[3].dx, 0, na * 4, dy);
    ct_cl_write(&g_cl, L->dx, 0, na * 4, nan);
    ct_layer_backward(&m, 2, b);
    ct_cl_read(&g_cl, L->dx, 0, na * 4, got);
    ref_shortcut_backward(da, ds, dy, want, b, L->oh, L->ow, L->oc, L0->oh, L0->ow, L0->oc, 2, 1);
    assert_true(ct_compare("shortcut backward (its input)", got, da, na, 0, 0));
    /* layer 1's backward writes the gradient of layer 0's output; the shortcut adds its share */
    L->from = -2;
    ct_layer_backward(&m, 1, b);
    ct_cl_read(&g_cl, L1->dx, 0, ns * 4, own);
    L->from = 0;
    ct_layer_backward(&m, 1, b);
    ct_cl_read(&g_cl, L1->dx, 0, ns * 4, both);
    int shared = 0;
    for (size_t i = 0; i < ns; i++) {
        shared += ds[i] != 0;
        own[i] += ds[i];
    }
    fprintf(stderr, "# %d of %zu gradient values of layer 0's output get a share from the shortcut\n", shared, ns);
    assert_true(shared > 0 && (size_t)shared < ns);
    assert_true(ct_compare("gradient into layer 0 (conv's own + shortcut's)", both, own, ns, 1e-6, 1e-7));
    free(a); free(s); free(want); free(got); free(dy); free(ds); free(own); free(both); free(da); free(nan);
    ct_model_free(&m);
}

static void test_parse(void **state) {
    (void)state;
    ct_model m;
    int rc = ct_model_load(&m, "resnet20");
    if (rc) fprintf(stderr, "# %s\n", ct_last_error());
    assert_int_equal(rc, 0);
    size_t weights = 0;
    int shortcuts = 0, convs = 0;
    for (int i = 0; i < m.n_layers; i++) {
        const ct_layer *L = &m.layers[i];
        if (L->type == CT_L_CONV || L->type == CT_L_DENSE) weights += L->n_w;
        convs += L->type == CT_L_CONV;
        if (L->type == CT_L_SHORTCUT) {
            shortcuts++;
            assert_int_equal(L->from, i - 5);
            assert_int_equal(L->act, CT_ACT_RELU);
        }
    }
    /* 3*3*3*16 + 6*(9*16*16) + 9*16*32 + 5*(9*32*32) + 9*32*64 + 5*(9*64*64) + 64*10 */
    assert_int_equal(weights, 268336);
    assert_int_equal(convs, 19);
    assert_int_equal(shortcuts, 9);
    const ct_layer *st2 = &m.layers[2 + 3 * 5 + 4], *last = &m.layers[m.n_layers - 3];
    assert_int_equal(st2->type, CT_L_SHORTCUT);
    assert_int_equal(st2->stride, 2);
    assert_int_equal(st2->oh, 16);
    assert_int_equal(st2->oc, 32);
    assert_int_equal(last->type, CT_L_SHORTCUT);
    assert_int_equal(last->oh, 8);
    assert_int_equal(last->oc, 64);
    ct_model_free(&m);
    /* absolute index, and the input itself */
    const char *ok = "[net]\nheight=4\nwidth=4\nchannels=2\nclasses=2\n[conv]\nfilters=2\nsize=1\n[shortcut]\nfrom=0\n"
                     "[shortcut]\nfrom=-3\n[dense]\noutputs=2\n[softmax]\n";
    rc = ct_model_parse(&m, ok, "ok.cfg");
    if (rc) fprintf(stderr, "# %s\n", ct_last_error());
    assert_int_equal(rc, 0);
    assert_int_equal(m.layers[1].from, 0);
    assert_int_equal(m.layers[2].from, -1);
    ct_model_free(&m);
    static const struct { const char *why, *body, *want; } bad[] = {
        {"no from", "[shortcut]\nactivation=relu\n", "needs from="},
        {"from a later layer", "[shortcut]\nfrom=1\n", "not an earlier layer"},
        {"from before the input", "[shortcut]\nfrom=-3\n", "not an earlier layer"},
        {"more channels than its input", "[conv]\nfilters=1\nsize=1\n[shortcut]\nfrom=-2\n", "cannot be added"},
        {"a size that is no subsampling", "[conv]\nfilters=2\nsize=2\n[shortcut]\nfrom=-2\n", "cannot be added"},
        {"a key it does not take", "[shortcut]\nfrom=-1\nsize=2\n", "[shortcut] takes no key 'size'"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        char text[512];
        snprintf(text, sizeof text, "[net]\nheight=4\nwidth=4\nchannels=2\nclasses=2\n[conv]\nfilters=2\nsize=1\n%s[dense]\noutputs=2\n[softmax]\n",
                 bad[i].body);
        rc = ct_model_parse(&m, text, "bad.cfg");
        fprintf(stderr, "# %-30s -> %s\n", bad[i].why, rc ? ct_last_error() : "(accepted)");
        assert_int_equal(rc, CT_EINPUT);
        assert_non_null(strstr(ct_last_error(), bad[i].want));
        assert_non_null(strstr(ct_last_error(), "bad.cfg:"));
        ct_model_free(&m);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ref_gradients),
        cmocka_unit_test(test_device),
        cmocka_unit_test(test_parse),
    };
    return cmocka_run_group_tests(tests, ct_test_open, ct_test_close);
}
