/* test_dropout.c: dropout (masks from a hash of seed, step, layer, index:
 * device equals reference bit for bit, backward uses the forward's mask, a
 * new step draws a new mask, the kept fraction is 1-p, evaluation is the
 * identity) and global average pooling against its reference, including a
 * finite-difference check of the reference. Outputs poisoned with NaN. */
#include "ct_test.h"
#include "cltrain/model.h"
#include "cltrain/ref.h"
#include "cltrain/ref/avgpool.h"
#include "cltrain/ref/dropout.h"

static void test_dropout(void **state) {
    (void)state;
    CT_NEED_CL();
    const char *cfg = "[net]\nheight=5\nwidth=7\nchannels=3\nclasses=4\n[maxpool]\nsize=1\n[dropout]\nprobability=0.3\n"
                      "[dense]\noutputs=4\n[softmax]\n";
    ct_model m;
    assert_int_equal(ct_model_parse(&m, cfg, "drop-test"), 0);
    assert_float_equal(m.layers[1].priv.f[0], 0.3f, 1e-7); /* its rate, where src/nn/layers/dropout.c keeps it */
    assert_int_equal(ct_model_setup(&m, &g_cl, 9, CT_GEMM_NATIVE), 0);
    ct_model_init_weights(&m, 77);
    int B = 9;
    size_t n = (size_t)B * 105;
    ct_rng r = ct_rng_make(1, 2, 3);
    float *x = malloc(n * 4), *want = malloc(n * 4), *got = malloc(n * 4), *nan = malloc(n * 4), *prev = malloc(n * 4);
    ct_fill_rand(x, n, &r, 2);
    ct_fill_nan(nan, n);
    ct_cl_write(&g_cl, m.input, 0, n * 4, x);
    ct_layer_forward(&m, 0, B);
    for (int step = 0; step < 3; step++) {
        m.step = step;
        ct_cl_write(&g_cl, m.layers[1].out, 0, n * 4, nan);
        ct_layer_forward(&m, 1, B);
        ct_cl_read(&g_cl, m.layers[1].out, 0, n * 4, got);
        ref_dropout(want, x, (long)n, 0.3f, m.seed, (uint32_t)step, 1);
        assert_memory_equal(got, want, n * 4);
        size_t kept = 0;
        for (size_t i = 0; i < n; i++) kept += got[i] != 0;
        fprintf(stderr, "# dropout step %d: kept %zu of %zu (expect %.0f)\n", step, kept, n, 0.7 * n);
        assert_true(fabs((double)kept / n - 0.7) < 0.06);
        if (step) assert_memory_not_equal(got, prev, n * 4);
        memcpy(prev, got, n * 4);
        /* backward: the same mask, scaled */
        ct_cl_write(&g_cl, m.layers[2].dx, 0, n * 4, x); /* dy = x, so dx must equal the forward output */
        ct_cl_write(&g_cl, m.layers[1].dx, 0, n * 4, nan);
        ct_layer_backward(&m, 1, B);
        ct_cl_read(&g_cl, m.layers[1].dx, 0, n * 4, got);
        assert_memory_equal(got, want, n * 4);
    }
    m.training = 0;
    ct_cl_write(&g_cl, m.layers[1].out, 0, n * 4, nan);
    ct_layer_forward(&m, 1, B);
    ct_cl_read(&g_cl, m.layers[1].out, 0, n * 4, got);
    assert_memory_equal(got, x, n * 4);
    free(x); free(want); free(got); free(nan); free(prev);
    ct_model_free(&m);
}

static void test_avgpool(void **state) {
    (void)state;
    /* reference: linear, so central differences are exact up to rounding */
    float x[2 * 6 * 3], y[6], y2[6], rr[6], dx[36];
    ct_rng r = ct_rng_make(4, 5, 6);
    ct_fill_rand(x, 36, &r, 1);
    ct_fill_rand(rr, 6, &r, 1);
    ref_avgpool_backward(dx, rr, 2, 6, 3);
    for (int i = 0; i < 36; i++) {
        float keep = x[i];
        x[i] = keep + 0.01f; ref_avgpool_forward(y, x, 2, 6, 3);
        x[i] = keep - 0.01f; ref_avgpool_forward(y2, x, 2, 6, 3);
        x[i] = keep;
        double fd = 0;
        for (int k = 0; k < 6; k++) fd += ((double)y[k] - y2[k]) * rr[k];
        fd /= 0.02;
        assert_true(fabs(fd - dx[i]) < 1e-4);
    }
    CT_NEED_CL();
    const int shapes[][4] = {{1, 1, 1, 1}, {4, 5, 7, 3}, {3, 8, 8, 64}};
    for (size_t t = 0; t < 3; t++) {
        int B = shapes[t][0], H = shapes[t][1], W = shapes[t][2], C = shapes[t][3];
        char cfg[256];
        snprintf(cfg, sizeof cfg, "[net]\nheight=%d\nwidth=%d\nchannels=%d\nclasses=2\n[maxpool]\nsize=1\n[avgpool]\n"
                 "[dense]\noutputs=2\n[softmax]\n", H, W, C);
        ct_model m;
        assert_int_equal(ct_model_parse(&m, cfg, "avg-test"), 0);
        assert_int_equal(ct_model_setup(&m, &g_cl, B, CT_GEMM_NATIVE), 0);
        size_t n = (size_t)B * H * W * C, no = (size_t)B * C;
        float *xi = malloc(n * 4), *want = malloc(n * 4), *got = malloc(n * 4), *dy = malloc(no * 4);
        ct_fill_rand(xi, n, &r, 3);
        ct_fill_rand(dy, no, &r, 1);
        ct_cl_write(&g_cl, m.input, 0, n * 4, xi);
        ct_layer_forward(&m, 0, B);
        float *nan = malloc(n * 4);
        ct_fill_nan(nan, n);
        ct_cl_write(&g_cl, m.layers[1].out, 0, no * 4, nan);
        ct_layer_forward(&m, 1, B);
        ct_cl_read(&g_cl, m.layers[1].out, 0, no * 4, got);
        ref_avgpool_forward(want, xi, B, H * W, C);
        assert_true(ct_compare("avgpool fwd", got, want, no, 1e-5, 1e-6));
        ct_cl_write(&g_cl, m.layers[2].dx, 0, no * 4, dy);
        ct_cl_write(&g_cl, m.layers[1].dx, 0, n * 4, nan);
        ct_layer_backward(&m, 1, B);
        ct_cl_read(&g_cl, m.layers[1].dx, 0, n * 4, got);
        ref_avgpool_backward(want, dy, B, H * W, C);
        assert_true(ct_compare("avgpool bwd", got, want, n, 1e-6, 1e-7));
        free(xi); free(want); free(got); free(dy); free(nan);
        ct_model_free(&m);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_dropout), cmocka_unit_test(test_avgpool)};
    return cmocka_run_group_tests(tests, ct_test_open, ct_test_close);
}
