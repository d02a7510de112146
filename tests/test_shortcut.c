/* test_shortcut.c: the [shortcut] residual layer. The float64 reference
 * (src/ref/shortcut.c) against central differences, linear, ReLU and GELU,
 * on a shape that subsamples (stride 2, odd sizes) and zero-pads channels;
 * the device kernels against it (outputs poisoned with NaN, odd batch);
 * the sequencer's routing of the gradient into the earlier layer (its own
 * gradient plus the shortcut's share). The same for projection=1 (option B:
 * a 1x1 convolution with bias; its weight and bias gradients too), at stride
 * 2 and at stride 1 with fewer channels. A batch norm that does the
 * shortcut after it in a whole forward (add_next) against the same model
 * run layer by layer. Parsing, including the built-ins resnet20 (He et al.
 * 2016: 0.27 M weights, 3 stages) and resnet20b. */
#include "ct_test.h"
#include "cltrain/layer.h"
#include "cltrain/ref.h"
#include "cltrain/ref/shortcut.h"

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
    for (int act = 0; act < CT_ACT_COUNT; act++) {
        ct_rng g = ct_rng_make(11, 2, (uint64_t)act);
        float a[NA], s[NS], r[NA], y[NA], da[NA], ds[NS] = {0};
        ct_fill_rand(a, NA, &g, 1);
        ct_fill_rand(s, NS, &g, 1);
        ct_fill_rand(r, NA, &g, 1);
        /* keep every sum 0.01 away from the ReLU's kink, where differences of step 1e-3 would straddle it */
        ref_shortcut_forward(y, a, s, B, H, W, C, SH, SW, SC, S, 0);
        for (int i = 0; i < NA; i++)
            if (fabsf(y[i]) < 0.01f) a[i] += 0.05f;
        float z[NA]; /* GELU's gradient reads its input */
        ref_shortcut_forward(z, a, s, B, H, W, C, SH, SW, SC, S, 0);
        ref_shortcut_forward(y, a, s, B, H, W, C, SH, SW, SC, S, act);
        ref_shortcut_backward(da, ds, r, act == CT_ACT_GELU ? z : y, B, H, W, C, SH, SW, SC, S, act);
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

/* option B: the same shape, the earlier output with more channels (SP) than the sum, through a 1x1 conv w [SP, C] + bias */
enum { SP = 7 };
#define NSP (B * SH * SW * SP)

static double loss_of_proj(const float *a, const float *s, const float *w, const float *bias, const float *r, int act) {
    float y[NA];
    ref_shortcut_proj_forward(y, a, s, w, bias, B, H, W, C, SH, SW, SP, S, act);
    double l = 0;
    for (int i = 0; i < NA; i++) l += (double)y[i] * r[i];
    return l;
}

static void test_ref_proj_gradients(void **state) {
    (void)state;
    for (int act = 0; act < CT_ACT_COUNT; act++) {
        ct_rng g = ct_rng_make(12, 2, (uint64_t)act);
        float a[NA], s[NSP], w[SP * C], bias[C], r[NA], y[NA], da[NA], ds[NSP] = {0}, dw[SP * C] = {0}, db[C] = {0};
        ct_fill_rand(a, NA, &g, 1);
        ct_fill_rand(s, NSP, &g, 1);
        ct_fill_rand(w, SP * C, &g, 0.5f);
        ct_fill_rand(bias, C, &g, 0.5f);
        ct_fill_rand(r, NA, &g, 1);
        ref_shortcut_proj_forward(y, a, s, w, bias, B, H, W, C, SH, SW, SP, S, 0);
        for (int i = 0; i < NA; i++) /* away from the ReLU's kink, as above */
            if (fabsf(y[i]) < 0.02f) a[i] += 0.1f;
        float z[NA];
        ref_shortcut_proj_forward(z, a, s, w, bias, B, H, W, C, SH, SW, SP, S, 0);
        ref_shortcut_proj_forward(y, a, s, w, bias, B, H, W, C, SH, SW, SP, S, act);
        ref_shortcut_proj_backward(da, ds, dw, db, r, act == CT_ACT_GELU ? z : y, s, w, B, H, W, C, SH, SW, SP, S, act);
        float *vars[4] = {a, s, w, bias}, *grads[4] = {da, ds, dw, db};
        int counts[4] = {NA, NSP, SP * C, C}, checked = 0, unsampled = 0, unsampled_zero = 1;
        double worst = 0, h = 1e-3;
        for (int v = 0; v < 4; v++)
            for (int i = 0; i < counts[v]; i++) {
                float keep = vars[v][i];
                vars[v][i] = keep + (float)h;
                double lp = loss_of_proj(a, s, w, bias, r, act);
                vars[v][i] = keep - (float)h;
                double lm = loss_of_proj(a, s, w, bias, r, act);
                vars[v][i] = keep;
                double fd = (lp - lm) / (2 * h);
                double err = fabs(fd - grads[v][i]);
                if (err > worst) worst = err;
                checked++;
                if (v == 1 && fd == 0) {
                    unsampled++;
                    if (grads[v][i] != 0) unsampled_zero = 0;
                }
            }
        fprintf(stderr, "# shortcut projection reference, act %d: %d derivatives (%d pixels of s unsampled), worst abs error %.2e\n",
                act, checked, unsampled, worst);
        assert_int_equal(checked, NA + NSP + SP * C + C);
        assert_true(unsampled > 0 && unsampled_zero);
        assert_true(worst < 1e-3);
    }
}

/* layer 0 (9x9x3) -> layer 1 conv stride 2 (5x5x5) -> layer 2 shortcut from=-2 (layer 0: subsampled, zero-padded) */
static const char *cfg =
    "[net]\nheight=9\nwidth=9\nchannels=2\nclasses=3\n[conv]\nfilters=3\nsize=1\n[conv]\nfilters=5\nsize=3\nstride=2\npad=1\n"
    "[shortcut]\nfrom=-2\nactivation=relu\n[avgpool]\n[dense]\noutputs=3\n[softmax]\n";
/* the same at stride 1 with as many channels: the identity shortcut (its own path in shortcut.cl) */
static const char *cfg_identity =
    "[net]\nheight=9\nwidth=7\nchannels=2\nclasses=3\n[conv]\nfilters=5\nsize=1\n[conv]\nfilters=5\nsize=3\npad=1\n"
    "[shortcut]\nfrom=-2\nactivation=relu\n[avgpool]\n[dense]\noutputs=3\n[softmax]\n";

/* both again with channel counts that are multiples of 16: a CPU's 16-wide paths in shortcut.cl */
static const char *cfg_wide =
    "[net]\nheight=9\nwidth=9\nchannels=2\nclasses=3\n[conv]\nfilters=16\nsize=1\n[conv]\nfilters=32\nsize=3\nstride=2\n"
    "pad=1\n[shortcut]\nfrom=-2\nactivation=relu\n[avgpool]\n[dense]\noutputs=3\n[softmax]\n";
static const char *cfg_wide_identity =
    "[net]\nheight=9\nwidth=7\nchannels=2\nclasses=3\n[conv]\nfilters=32\nsize=1\n[conv]\nfilters=32\nsize=3\npad=1\n"
    "[shortcut]\nfrom=-2\nactivation=relu\n[avgpool]\n[dense]\noutputs=3\n[softmax]\n";

/* Layer 1's backward with the shortcut (layer 2, from layer 0) cut off and then
 * routed: own gets layer 1's gradient of layer 0's output plus the shortcut's
 * reference share ds, both what the device wrote with the share added.
 * Returns how many of the ns values get a share. */
static int routed_share(ct_model *m, int b, const float *ds, size_t ns, float *own, float *both) {
    ct_layer *L = &m->layers[2], *L1 = &m->layers[1];
    L->from = -2;
    ct_layer_backward(m, 1, b);
    ct_cl_read(&g_cl, L1->dx, 0, ns * 4, own);
    L->from = 0;
    ct_layer_backward(m, 1, b);
    ct_cl_read(&g_cl, L1->dx, 0, ns * 4, both);
    int shared = 0;
    for (size_t i = 0; i < ns; i++) {
        shared += ds[i] != 0;
        own[i] += ds[i];
    }
    return shared;
}

static void check_device(const char *relu_text, int stride, int act) {
    ct_model m;
    char text[1024];
    snprintf(text, sizeof text, "%s", relu_text);
    char *at = strstr(text, "activation=relu");
    memcpy(at + 11, ct_activations[act].name, 4); /* relu, gelu */
    double tol = act == CT_ACT_GELU ? 1e-6 : 0;
    assert_int_equal(ct_model_parse(&m, text, "shortcut-test"), 0);
    assert_int_equal(ct_model_setup(&m, &g_cl, 4, CT_GEMM_NATIVE), 0);
    ct_model_init_weights(&m, 5);
    ct_layer *L0 = &m.layers[0], *L1 = &m.layers[1], *L = &m.layers[2];
    assert_int_equal(L->from, 0);
    assert_int_equal(L->stride, stride);
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
    ref_shortcut_forward(want, a, s, b, L->oh, L->ow, L->oc, L0->oh, L0->ow, L0->oc, stride, act);
    if (act == CT_ACT_GELU) { /* evaluation: fused into shortcut_fwd */
        m.training = 0;
        ct_layer_forward(&m, 2, b);
        ct_cl_read(&g_cl, L->out, 0, na * 4, got);
        assert_true(ct_compare("shortcut forward (GELU fused)", got, want, na, tol, tol));
        ct_cl_write(&g_cl, L->out, 0, na * 4, nan);
        m.training = 1;
    }
    ct_layer_forward(&m, 2, b);
    ct_cl_read(&g_cl, L->out, 0, na * 4, got);
    assert_true(ct_compare("shortcut forward", got, want, na, tol, tol));
    float *t = want; /* what the activation's gradient reads: its output, or for GELU the input kept */
    if (act == CT_ACT_GELU) {
        t = malloc(na * 4);
        ct_cl_read(&g_cl, L->act_in, 0, na * 4, t);
    }
    /* backward: dx of the shortcut is dy through the activation */
    ct_cl_write(&g_cl, m.layers[3].dx, 0, na * 4, dy);
    ct_cl_write(&g_cl, L->dx, 0, na * 4, nan);
    ct_layer_backward(&m, 2, b);
    ct_cl_read(&g_cl, L->dx, 0, na * 4, got);
    ref_shortcut_backward(da, ds, dy, t, b, L->oh, L->ow, L->oc, L0->oh, L0->ow, L0->oc, stride, act);
    if (t != want) free(t);
    assert_true(ct_compare("shortcut backward (its input)", got, da, na, tol, tol));
    /* layer 1's backward writes the gradient of layer 0's output; the shortcut adds its share */
    int shared = routed_share(&m, b, ds, ns, own, both);
    fprintf(stderr, "# stride %d: %d of %zu gradient values of layer 0's output get a share from the shortcut\n", stride,
            shared, ns);
    /* subsampled: only every S-th pixel's first SC channels; identity: all but those ReLU zeroed (all with GELU) */
    assert_true(shared > 0 && ((size_t)shared < ns || (stride == 1 && act == CT_ACT_GELU)));
    if (stride == 1) assert_true((size_t)shared > ns / 4);
    assert_true(ct_compare("gradient into layer 0 (conv's own + shortcut's)", both, own, ns, 1e-6, tol ? 4 * tol : 1e-7));
    free(a); free(s); free(want); free(got); free(dy); free(ds); free(own); free(both); free(da); free(nan);
    ct_model_free(&m);
}

static void test_device(void **state) {
    (void)state;
    CT_NEED_CL();
    for (int act = CT_ACT_RELU; act <= CT_ACT_GELU; act++) {
        check_device(cfg, 2, act);
        check_device(cfg_identity, 1, act);
        check_device(cfg_wide, 2, act);
        check_device(cfg_wide_identity, 1, act);
    }
}

/* Layer 2, a projecting shortcut from layer 0 over layer 1, against the
 * reference: forward, its input's gradient, its weight and bias gradients
 * (accumulated), and the share added into layer 0's gradient. */
static void check_projection(const char *text, int want_stride, int act) {
    ct_model m;
    int rc = ct_model_parse(&m, text, "projection-test");
    if (rc) fprintf(stderr, "# %s\n", ct_last_error());
    assert_int_equal(rc, 0);
    assert_int_equal(ct_model_setup(&m, &g_cl, 4, CT_GEMM_NATIVE), 0);
    ct_model_init_weights(&m, 5);
    ct_layer *L0 = &m.layers[0], *L1 = &m.layers[1], *L = &m.layers[2];
    const int sc = L0->oc, b = 3; /* an odd batch, under the allocated 4 */
    assert_int_equal(L->from, 0);
    assert_int_equal(L->stride, want_stride);
    assert_int_equal(L->n_w, (size_t)sc * L->oc);
    assert_int_equal(L->n_b, (size_t)L->oc);
    /* He-normal weights, zero bias; weight decay on the weights only */
    float *p = malloc(m.n_params * 4);
    uint8_t *mask = malloc(m.n_params);
    ct_model_get_params(&m, p);
    ct_cl_read(&g_cl, m.decay_mask, 0, m.n_params, mask);
    double ss = 0;
    for (size_t j = 0; j < L->n_w; j++) { ss += (double)p[L->w_off + j] * p[L->w_off + j]; assert_int_equal(mask[L->w_off + j], 1); }
    for (size_t j = 0; j < L->n_b; j++) { assert_true(p[L->b_off + j] == 0.0f); assert_int_equal(mask[L->b_off + j], 0); }
    fprintf(stderr, "# projection %dx%d: initial weight rms %.3f (He: %.3f)\n", sc, L->oc, sqrt(ss / (double)L->n_w), sqrt(2.0 / sc));
    assert_true(ss > 0);
    /* fresh random parameters everywhere, so the bias is not zero */
    ct_rng g = ct_rng_make(21, 3, (uint64_t)want_stride);
    ct_fill_rand(p, m.n_params, &g, 0.5f);
    ct_model_set_params(&m, p);
    size_t na = (size_t)b * ct_out_size(L), ns = (size_t)b * ct_out_size(L0);
    float *a = malloc(na * 4), *s = malloc(ns * 4), *want = malloc(na * 4), *got = malloc(na * 4), *dy = malloc(na * 4);
    float *ds = calloc(ns, 4), *own = malloc(ns * 4), *both = malloc(ns * 4), *da = malloc(na * 4), *nan = malloc(na * 4);
    float *dw = calloc(L->n_w, 4), *db = calloc(L->n_b, 4), *gw = malloc((L->n_w + L->n_b) * 4);
    ct_fill_rand(a, na, &g, 1);
    ct_fill_rand(s, ns, &g, 1);
    ct_fill_rand(dy, na, &g, 1);
    ct_fill_nan(nan, na);
    ct_cl_write(&g_cl, L0->out, 0, ns * 4, s);
    ct_cl_write(&g_cl, L1->out, 0, na * 4, a);
    ct_cl_write(&g_cl, L->out, 0, na * 4, nan);
    ct_layer_forward(&m, 2, b);
    ct_cl_read(&g_cl, L->out, 0, na * 4, got);
    ref_shortcut_proj_forward(want, a, s, p + L->w_off, p + L->b_off, b, L->oh, L->ow, L->oc, L0->oh, L0->ow, sc,
                              want_stride, act);
    assert_true(ct_compare("projection shortcut forward", got, want, na, 1e-5, 1e-5));
    ct_model_zero_grad(&m);
    ct_cl_write(&g_cl, m.layers[3].dx, 0, na * 4, dy);
    ct_cl_write(&g_cl, L->dx, 0, na * 4, nan);
    ct_layer_backward(&m, 2, b);
    ct_cl_read(&g_cl, L->dx, 0, na * 4, got);
    float *t = want; /* GELU's gradient reads its input: what the forward kept */
    if (act == CT_ACT_GELU) {
        t = malloc(na * 4);
        ct_cl_read(&g_cl, L->act_in, 0, na * 4, t);
    }
    ref_shortcut_proj_backward(da, ds, dw, db, dy, t, s, p + L->w_off, b, L->oh, L->ow, L->oc, L0->oh, L0->ow, sc,
                               want_stride, act);
    if (t != want) free(t);
    assert_true(ct_compare("projection shortcut backward (its input)", got, da, na, act == CT_ACT_GELU ? 1e-5 : 0, act == CT_ACT_GELU ? 1e-6 : 0));
    ct_cl_read(&g_cl, m.grads, L->w_off * 4, L->n_w * 4, gw);
    ct_cl_read(&g_cl, m.grads, L->b_off * 4, L->n_b * 4, gw + L->n_w);
    assert_true(ct_compare("projection weight gradient", gw, dw, L->n_w, 1e-4, 1e-5));
    assert_true(ct_compare("projection bias gradient", gw + L->n_w, db, L->n_b, 1e-4, 1e-5));
    /* layer 1's backward writes the gradient of layer 0's output; the projection adds dy W^T at the sampled pixels */
    int shared = routed_share(&m, b, ds, ns, own, both);
    fprintf(stderr, "# stride %d: %d of %zu gradient values of layer 0's output get a share from the projection\n",
            want_stride, shared, ns);
    assert_true(shared > 0 && (want_stride == 1 ? (size_t)shared == ns : (size_t)shared < ns));
    assert_true(ct_compare("gradient into layer 0 (conv's own + projection's)", both, own, ns, 1e-5, 1e-6));
    free(a); free(s); free(want); free(got); free(dy); free(ds); free(own); free(both); free(da); free(nan);
    free(dw); free(db); free(gw); free(p); free(mask);
    ct_model_free(&m);
}

static void test_device_projection(void **state) {
    (void)state;
    CT_NEED_CL();
    /* stride 2, 3 -> 5 channels, ReLU: the gather into the workspace and the scatter back */
    check_projection("[net]\nheight=9\nwidth=9\nchannels=2\nclasses=3\n[conv]\nfilters=3\nsize=1\n[conv]\nfilters=5\nsize=3\n"
                     "stride=2\npad=1\n[shortcut]\nfrom=-2\nprojection=1\nactivation=relu\n[avgpool]\n[dense]\noutputs=3\n[softmax]\n",
                     2, 1);
    /* stride 1, 7 -> 5 channels (fewer), linear: the earlier output read in place, its gradient added by the GEMM */
    check_projection("[net]\nheight=7\nwidth=7\nchannels=2\nclasses=3\n[conv]\nfilters=7\nsize=1\n[conv]\nfilters=5\nsize=3\n"
                     "pad=1\n[shortcut]\nfrom=-2\nprojection=1\n[avgpool]\n[dense]\noutputs=3\n[softmax]\n",
                     1, 0);
    /* stride 2 with GELU: the GEMM linear, then act_fwd keeping its input for the backward */
    check_projection("[net]\nheight=9\nwidth=9\nchannels=2\nclasses=3\n[conv]\nfilters=3\nsize=1\n[conv]\nfilters=5\nsize=3\n"
                     "stride=2\npad=1\n[shortcut]\nfrom=-2\nprojection=1\nactivation=gelu\n[avgpool]\n[dense]\noutputs=3\n[softmax]\n",
                     2, CT_ACT_GELU);
}

/* conv, batch norm + ReLU (the block's input), conv, batch norm, then a shortcut from the block's input
 * with ReLU, as resnet20's blocks are. In a whole forward (ct_model_forward) the second batch norm writes
 * the shortcut's output itself (add_next: its bn_fwd adds and activates) and leaves its own output
 * unwritten; layer by layer each layer runs its own kernels. The shortcut's output, the logits, the loss
 * and every parameter gradient must agree to the bit (the same operations), training and evaluating.
 * fuse = 0: a second shortcut also reads that batch norm's output, which must then be written. */
static void check_bn_add_fused(int C0, int fuse) {
    enum { NB = 5 };
    char text[768];
    snprintf(text, sizeof text,
             "[net]\nheight=9\nwidth=7\nchannels=3\nclasses=3\n[conv]\nfilters=%d\nsize=3\npad=1\n"
             "[batchnorm]\nactivation=relu\n[conv]\nfilters=%d\nsize=3\npad=1\n[batchnorm]\n"
             "[shortcut]\nfrom=-3\nactivation=relu\n%s[avgpool]\n[dense]\noutputs=3\n[softmax]\n",
             C0, C0, fuse ? "" : "[shortcut]\nfrom=-2\n");
    ct_model m;
    assert_int_equal(ct_model_parse(&m, text, "bn-add.cfg"), 0);
    int rc = ct_model_setup(&m, &g_cl, NB, CT_GEMM_NATIVE);
    if (rc) fprintf(stderr, "# %s\n", ct_last_error());
    assert_int_equal(rc, 0);
    ct_model_init_weights(&m, 11);
    ct_layer *bn = &m.layers[3], *sc = &m.layers[4], *last = &m.layers[m.n_layers - 1];
    assert_int_equal(bn->add_next, fuse);
    ct_rng g = ct_rng_make(4242, 0, 0);
    uint8_t img[NB * 9 * 7 * 3];
    int32_t lab[NB];
    for (size_t i = 0; i < sizeof img; i++) img[i] = (uint8_t)ct_rng_below(&g, 256);
    for (int b = 0; b < NB; b++) lab[b] = (int32_t)ct_rng_below(&g, 3);
    size_t ny = (size_t)NB * ct_out_size(sc), nl = (size_t)NB * 3;
    float *poison = malloc(ny * 4), *y[2], *lg[2], *gr[2], loss[2], first;
    ct_fill_nan(poison, ny);
    for (int v = 0; v < 2; v++) { y[v] = malloc(ny * 4); lg[v] = malloc(nl * 4); gr[v] = malloc(m.n_params * 4); }
    int32_t pred[NB];
    for (int train = 1; train >= 0; train--) {
        m.training = train;
        for (int v = 0; v < 2; v++) { /* 0: layer by layer; 1: the whole forward */
            ct_model_set_batch(&m, img, lab, NB, 1.0f / 255.0f, 0.0f);
            ct_model_zero_grad(&m);
            ct_cl_write(m.cl, bn->out, 0, ny * 4, poison);
            ct_cl_write(m.cl, sc->out, 0, ny * 4, poison);
            ct_test_forward(&m, NB, v);
            assert_int_equal(bn->added, v && fuse);
            ct_cl_read(m.cl, bn->out, 0, 4, &first);
            assert_int_equal(isnan(first) != 0, v && fuse); /* its own output: stale where it added */
            ct_model_loss(&m, NB);
            if (train) ct_model_backward(&m, NB, NULL, NULL);
            loss[v] = (float)ct_model_read_results(&m, NB, pred);
            ct_cl_read(m.cl, sc->out, 0, ny * 4, y[v]);
            ct_cl_read(m.cl, last->out, 0, nl * 4, lg[v]);
            ct_cl_read(m.cl, m.grads, 0, m.n_params * 4, gr[v]);
        }
        fprintf(stderr, "# %d channels, %s: batch norm added %d (expected %d), loss %g and %g\n", C0,
                train ? "training" : "evaluating", bn->added, fuse, (double)loss[0], (double)loss[1]);
        for (size_t i = 0; i < ny; i++) assert_false(isnan(y[0][i]));
        assert_memory_equal(y[0], y[1], ny * 4);
        assert_memory_equal(lg[0], lg[1], nl * 4);
        if (train) assert_memory_equal(gr[0], gr[1], m.n_params * 4);
        assert_true(loss[0] == loss[1] && loss[0] > 0);
    }
    for (int v = 0; v < 2; v++) { free(y[v]); free(lg[v]); free(gr[v]); }
    free(poison);
    ct_model_free(&m);
}

static void test_bn_add_fused(void **state) {
    (void)state;
    CT_NEED_CL();
    check_bn_add_fused(16, 1); /* a CPU's 16-wide bn_fwd */
    check_bn_add_fused(8, 1);  /* one channel a work-item */
    check_bn_add_fused(16, 0); /* another reader of the batch norm's output: no fusion */
}

/* The last add into a layer's gradient (a shortcut's backward_from) takes it through that layer's
 * activation in the same kernel (shortcut_bwd_act) where the layer has that pass (ct_act_pass) and the
 * add is the identity: the same operations as the add and then act_bwd. Against the same model with
 * every such pass apart (act_apart): the logits, the loss and every parameter gradient to the bit.
 * folds: how many passes per backward ran in an add. */
static void check_act_folded(const char *text, int folds) {
    enum { NB = 5 };
    ct_model m;
    assert_int_equal(ct_model_parse(&m, text, "act-fold.cfg"), 0);
    int rc = ct_model_setup(&m, &g_cl, NB, CT_GEMM_NATIVE);
    if (rc) fprintf(stderr, "# %s\n", ct_last_error());
    assert_int_equal(rc, 0);
    ct_model_init_weights(&m, 21);
    ct_rng g = ct_rng_make(777, 0, 0);
    uint8_t img[NB * 9 * 7 * 3];
    int32_t lab[NB], pred[NB];
    for (size_t i = 0; i < sizeof img; i++) img[i] = (uint8_t)ct_rng_below(&g, 256);
    for (int b = 0; b < NB; b++) lab[b] = (int32_t)ct_rng_below(&g, 3);
    float *gr[2], loss[2];
    long done[2];
    for (int v = 0; v < 2; v++) { /* 0: apart; 1: in the adds */
        gr[v] = malloc(m.n_params * 4);
        m.act_apart = !v;
        m.act_folded = 0;
        ct_model_set_batch(&m, img, lab, NB, 1.0f / 255.0f, 0.0f);
        ct_model_zero_grad(&m);
        ct_model_forward(&m, NB);
        ct_model_loss(&m, NB);
        ct_model_backward(&m, NB, NULL, NULL);
        loss[v] = (float)ct_model_read_results(&m, NB, pred);
        ct_cl_read(m.cl, m.grads, 0, m.n_params * 4, gr[v]);
        done[v] = m.act_folded;
    }
    fprintf(stderr, "# %ld of the activation passes in an add (expected %d), loss %.9g and %.9g\n", done[1], folds,
            (double)loss[0], (double)loss[1]);
    assert_int_equal(done[0], 0);
    assert_int_equal(done[1], folds);
    assert_memory_equal(gr[0], gr[1], m.n_params * 4);
    assert_true(loss[0] == loss[1] && loss[0] > 0);
    for (int v = 0; v < 2; v++) free(gr[v]);
    ct_model_free(&m);
}

static void test_act_folded(void **state) {
    (void)state;
    CT_NEED_CL();
    /* two of resnet20's identity blocks: the second block's shortcut adds into the gradient of the first
     * block's output and takes it through the first block's ReLU (a shortcut: its dx as well) */
    const char *blocks = "[net]\nheight=9\nwidth=7\nchannels=3\nclasses=3\n[conv]\nfilters=%d\nsize=3\npad=1\n"
                         "[batchnorm]\nactivation=relu\n"
                         "[conv]\nfilters=%d\nsize=3\npad=1\n[batchnorm]\nactivation=relu\n[conv]\nfilters=%d\nsize=3\npad=1\n"
                         "[batchnorm]\n[shortcut]\nfrom=-5\nactivation=relu\n"
                         "[conv]\nfilters=%d\nsize=3\npad=1\n[batchnorm]\nactivation=relu\n[conv]\nfilters=%d\nsize=3\npad=1\n"
                         "[batchnorm]\n[shortcut]\nfrom=-5\nactivation=relu\n[avgpool]\n[dense]\noutputs=3\n[softmax]\n";
    char text[1024];
    for (int ch = 16; ch >= 5; ch -= 11) { /* 16: a CPU's 16-wide path; 5: one channel a work-item */
        snprintf(text, sizeof text, blocks, ch, ch, ch, ch, ch);
        check_act_folded(text, 1);
    }
    /* a conv's ReLU and GELU (no dx of its own: the pass in place only); GELU's reads the kept input */
    check_act_folded("[net]\nheight=9\nwidth=7\nchannels=3\nclasses=3\n[conv]\nfilters=16\nsize=1\n"
                     "[conv]\nfilters=16\nsize=1\nactivation=relu\n[conv]\nfilters=16\nsize=3\npad=1\n"
                     "[shortcut]\nfrom=-2\nactivation=relu\n[avgpool]\n[dense]\noutputs=3\n[softmax]\n", 1);
    check_act_folded("[net]\nheight=9\nwidth=7\nchannels=3\nclasses=3\n[conv]\nfilters=16\nsize=1\n"
                     "[conv]\nfilters=16\nsize=1\nactivation=gelu\n[conv]\nfilters=16\nsize=3\npad=1\n"
                     "[shortcut]\nfrom=-2\nactivation=relu\n[avgpool]\n[dense]\noutputs=3\n[softmax]\n", 1);
    /* subsampled (stride 2, odd sizes: 9x7 to 5x4): the share lands on every other pixel, the pass
     * covers all; with the channels padded (16 to 32, as resnet20's downsampling blocks; 5 to 8) */
    const char *sub = "[net]\nheight=9\nwidth=7\nchannels=3\nclasses=3\n[conv]\nfilters=%d\nsize=1\n"
                      "[conv]\nfilters=%d\nsize=1\nactivation=relu\n[conv]\nfilters=%d\nsize=3\npad=1\nstride=2\n"
                      "[shortcut]\nfrom=-2\nactivation=relu\n[avgpool]\n[dense]\noutputs=3\n[softmax]\n";
    const int subs[3][2] = {{16, 16}, {16, 32}, {5, 8}};
    for (int j = 0; j < 3; j++) {
        snprintf(text, sizeof text, sub, subs[j][0], subs[j][0], subs[j][1]);
        check_act_folded(text, 1);
    }
    /* a projection (a 1x1 conv on the shortcut): its share comes through a GEMM; the pass stays apart */
    check_act_folded("[net]\nheight=9\nwidth=7\nchannels=3\nclasses=3\n[conv]\nfilters=16\nsize=1\n"
                     "[conv]\nfilters=16\nsize=1\nactivation=relu\n[conv]\nfilters=32\nsize=3\npad=1\nstride=2\n"
                     "[shortcut]\nfrom=-2\nprojection=1\nactivation=relu\n[avgpool]\n[dense]\noutputs=3\n[softmax]\n", 0);
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
    size_t n20 = m.n_params;
    ct_model_free(&m);
    /* resnet20b: option B at the two stage starts, 1x1 convolutions 16->32 and 32->64 with bias */
    rc = ct_model_load(&m, "resnet20b");
    if (rc) fprintf(stderr, "# %s\n", ct_last_error());
    assert_int_equal(rc, 0);
    int projections = 0;
    for (int i = 0; i < m.n_layers; i++) {
        const ct_layer *L = &m.layers[i];
        if (L->type != CT_L_SHORTCUT || !L->n_w) continue;
        projections++;
        assert_int_equal(L->stride, 2);
        assert_int_equal(L->n_w, (size_t)m.layers[L->from].oc * L->oc);
        assert_int_equal(L->n_b, (size_t)L->oc);
    }
    assert_int_equal(projections, 2);
    assert_int_equal(m.n_params, n20 + 16 * 32 + 32 * 64 + 32 + 64);
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
        {"more channels: the hint", "[conv]\nfilters=1\nsize=1\n[shortcut]\nfrom=-2\n", "projection=1 adds a 1x1"},
        {"projection out of range", "[shortcut]\nfrom=-1\nprojection=2\n", "projection=2 is not a whole number in 0..1"},
        {"projection, no subsampling", "[conv]\nfilters=2\nsize=2\n[shortcut]\nfrom=-2\nprojection=1\n", "whole-number subsampling"},
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
        cmocka_unit_test(test_ref_proj_gradients),
        cmocka_unit_test(test_device),
        cmocka_unit_test(test_device_projection),
        cmocka_unit_test(test_bn_add_fused),
        cmocka_unit_test(test_act_folded),
        cmocka_unit_test(test_parse),
    };
    return cmocka_run_group_tests(tests, ct_test_open, ct_test_close);
}
