/* test_whiten.c: the whitening convolution's weights (cltrain/whiten.h).
 * The patch covariance against a float64 reference that gathers each patch
 * in PyTorch's unfold order (channel, row, column) and permutes; then the
 * property that defines the weights: with C the mean covariance, filter f
 * (d of them, then their negatives) satisfies f_i^T C f_j = 0 for i != j and
 * f_i^T C f_i = l_i / (l_i + 5e-4), l_i = 1 / |f_i|^2 - 5e-4 the eigenvalues,
 * largest first; and the errors: no patches, and a model that puts whiten=
 * anywhere but first. */
#include "ct_test.h"
#include "cltrain/whiten.h"
#include <math.h>

/* images [B, h, w, c] whose channels are correlated (the second is near the first) */
static float *correlated_images(int B, int h, int w, int c, ct_rng *g) {
    size_t n = (size_t)B * h * w * c;
    float *x = malloc(n * sizeof *x);
    for (size_t i = 0; i < n; i += (size_t)c) {
        float base = 2.0f * ct_rng_uniform(g) - 1.0f;
        for (int ch = 0; ch < c; ch++) x[i + ch] = base * (1.0f - 0.3f * ch) + 0.2f * (ct_rng_uniform(g) - 0.5f) + 0.1f * ch;
    }
    return x;
}

static void test_covariance_and_weights(void **state) {
    (void)state;
    const int B = 3, h = 7, w = 6, c = 3, k = 2, d = k * k * c;
    ct_rng g = ct_rng_make(31, 0, 0);
    float *x = correlated_images(B, h, w, c, &g);
    double *cov = calloc((size_t)d * d, sizeof *cov), *ref = calloc((size_t)d * d, sizeof *ref);
    long n = ct_whiten_accumulate(cov, x, B, h, w, c, k);
    assert_int_equal(n, (long)B * (h - k + 1) * (w - k + 1));
    /* the reference: patches as unfold gives them, p[ch][ky][kx], then into (ky, kx, ch) */
    for (int b = 0; b < B; b++)
        for (int y = 0; y + k <= h; y++)
            for (int xx = 0; xx + k <= w; xx++) {
                double pt[3][2][2], p[12];
                for (int ch = 0; ch < c; ch++)
                    for (int ky = 0; ky < k; ky++)
                        for (int kx = 0; kx < k; kx++) pt[ch][ky][kx] = x[(((size_t)b * h + y + ky) * w + xx + kx) * c + ch];
                for (int ch = 0; ch < c; ch++)
                    for (int ky = 0; ky < k; ky++)
                        for (int kx = 0; kx < k; kx++) p[(ky * k + kx) * c + ch] = pt[ch][ky][kx];
                for (int i = 0; i < d; i++)
                    for (int j = 0; j < d; j++) ref[i * d + j] += p[i] * p[j];
            }
    for (int i = 0; i < d; i++)
        for (int j = i; j < d; j++) assert_true(fabs(cov[i * d + j] - ref[i * d + j]) <= 1e-12 * fabs(ref[i * d + j]) + 1e-12);

    /* a [conv] size=2 filters=24 whiten=N layer over 3 channels */
    ct_model m;
    assert_int_equal(ct_model_parse(&m, "[net]\nheight=7\nwidth=6\nchannels=3\nclasses=2\n[conv]\nfilters=24\nsize=2\n"
                                        "whiten=3\nbias_epochs=3\n[dense]\noutputs=2\n[softmax]\n", "w.cfg"), 0);
    assert_int_equal(ct_whiten_layer(&m), 0);
    const ct_layer *L = &m.layers[0];
    assert_true(L->lr_w == 0.0f && L->lr_b == 1.0f && L->bias_until == 3); /* frozen weights, a bias that trains 3 epochs */
    float *p = calloc(m.n_params, sizeof *p);
    assert_int_equal(ct_whiten_weights(L, cov, n, p), 0);
    const float *W = p + L->w_off;
    double worst = 0, prev = INFINITY, first = 0;
    for (int f = 0; f < d; f++) {
        double nf = 0;
        for (int j = 0; j < d; j++) {
            nf += (double)W[j * 24 + f] * W[j * 24 + f];
            assert_true(W[j * 24 + f + d] == -W[j * 24 + f]); /* the negatives follow */
        }
        double lf = 1.0 / nf - CT_WHITEN_EPS;
        if (f == 0) first = lf;
        assert_true(lf <= prev * (1 + 1e-5) + 1e-9); /* largest first */
        prev = lf;
        for (int e = 0; e < d; e++) {
            double q = 0;
            for (int i = 0; i < d; i++)
                for (int j = 0; j < d; j++) q += (double)W[i * 24 + f] * (ref[i * d + j] / (double)n) * W[j * 24 + e];
            double want = e == f ? lf / (lf + CT_WHITEN_EPS) : 0.0;
            if (fabs(q - want) > worst) worst = fabs(q - want);
        }
    }
    fprintf(stderr, "# whitening 2x2x3: largest eigenvalue %.4g, smallest %.4g; worst |f^T C g - want| %.2e\n", first, prev,
            worst);
    assert_true(worst < 1e-5);
    /* nothing to compute from: one line, CT_EINPUT */
    assert_int_equal(ct_whiten_weights(L, cov, 0, p), CT_EINPUT);
    fprintf(stderr, "# %s\n", ct_last_error());
    assert_non_null(strstr(ct_last_error(), "no image patches"));
    assert_null(strchr(ct_last_error(), '\n'));
    ct_model_free(&m);
    /* not the first layer */
    assert_int_equal(ct_model_parse(&m, "[net]\nheight=7\nwidth=6\nchannels=3\nclasses=2\n[maxpool]\nsize=1\n[conv]\nfilters=24\n"
                                        "size=2\nwhiten=3\n[dense]\noutputs=2\n[softmax]\n", "w.cfg"), CT_EINPUT);
    fprintf(stderr, "# %s\n", ct_last_error());
    assert_non_null(strstr(ct_last_error(), "w.cfg:8: [conv] whiten= must be on the first layer"));
    ct_model_free(&m);
    free(x); free(cov); free(ref); free(p);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_covariance_and_weights),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
