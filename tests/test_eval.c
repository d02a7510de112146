/* test_eval.c: ct_evaluate, with and without test-time augmentation.
 *
 * A small random network (7x5x3 input: an odd width, so the mirror keeps a
 * middle column) on random byte images, evaluated in batches of 8 over 29
 * images (a short last batch):
 * - plain evaluation agrees with logits read back after ct_model_forward
 *   and scored on the host (argmax, log-sum-exp cross-entropy in double);
 * - --tta flip agrees with the average of the logits of each image and of
 *   its mirror, both taken from plain forward passes;
 * - --tta flip-translate agrees with the weighted average of the logits of
 *   the six views built on the host by explicit reflect padding and crops;
 * - on images that equal their own mirror, tta gives the plain result;
 * - the same through a ct_source (floats made on the host).
 * Needs a device (skipped without one). */
#include "ct_test.h"
#include "cltrain/train.h"
#include "cltrain/cifar.h"

enum { H = 7, W = 5, C = 3, N = 29, B = 8, K = 4 };

static const char *cfg = "[net]\nheight=7\nwidth=5\nchannels=3\nclasses=4\n"
                         "[conv]\nfilters=6\nsize=3\npad=1\nactivation=relu\n"
                         "[dense]\noutputs=4\n[softmax]\n";

static void mirror(uint8_t *img) {
    for (int y = 0; y < H; y++)
        for (int x = 0; x < W / 2; x++)
            for (int c = 0; c < C; c++) {
                uint8_t *l = img + (y * W + x) * C + c, *r = img + (y * W + W - 1 - x) * C + c, t = *l;
                *l = *r;
                *r = t;
            }
}

/* The view airbench's TTA takes: pad by 1 with reflection, crop at offset
 * 1 + d (d = -1, 0, 1), then mirror when flip; written independently of
 * ct_tta_view's index mapping. */
static void pad_crop(uint8_t *img, int d) {
    uint8_t pad[(H + 2) * (W + 2) * C];
    for (int y = 0; y < H + 2; y++)
        for (int x = 0; x < W + 2; x++) {
            int sy = y == 0 ? 1 : y == H + 1 ? H - 2 : y - 1, sx = x == 0 ? 1 : x == W + 1 ? W - 2 : x - 1;
            memcpy(pad + (y * (W + 2) + x) * C, img + (sy * W + sx) * C, C);
        }
    for (int y = 0; y < H; y++)
        for (int x = 0; x < W; x++) memcpy(img + (y * W + x) * C, pad + ((y + 1 + d) * (W + 2) + x + 1 + d) * C, C);
}

/* Logits of every image of ds through plain forward passes, mirrored or
 * not, shifted by d (pad_crop) first. */
static void host_logits_at(ct_model *m, const ct_dataset *ds, int flip, int d, float *logits) {
    size_t sz = (size_t)H * W * C;
    uint8_t *img = malloc(sz * B);
    int32_t lab[B];
    for (int s = 0; s < ds->n; s += B) {
        int nb = ds->n - s < B ? ds->n - s : B;
        memcpy(img, ds->images + (size_t)s * sz, sz * nb);
        for (int i = 0; i < nb; i++) {
            lab[i] = ds->labels[s + i];
            pad_crop(img + (size_t)i * sz, d);
            if (flip) mirror(img + (size_t)i * sz);
        }
        ct_model_set_batch(m, img, lab, nb, 1.0f / 255, 0);
        ct_model_forward(m, nb);
        ct_cl_read(m->cl, m->layers[m->n_layers - 1].out, 0, sizeof(float) * nb * K, logits + (size_t)s * K);
    }
    free(img);
}

static void host_logits(ct_model *m, const ct_dataset *ds, int flip, float *logits) {
    host_logits_at(m, ds, flip, 0, logits);
}

/* Score logits like ct_evaluate: correct count and summed cross-entropy. */
static void score(const ct_dataset *ds, const float *z, int *correct, double *loss) {
    *correct = 0;
    *loss = 0;
    for (int i = 0; i < ds->n; i++) {
        double mx = -INFINITY, se = 0;
        int best = 0;
        for (int k = 0; k < K; k++)
            if (z[i * K + k] > mx) { mx = z[i * K + k]; best = k; }
        for (int k = 0; k < K; k++) se += exp(z[i * K + k] - mx);
        *correct += best == ds->labels[i];
        *loss += mx + log(se) - z[i * K + ds->labels[i]];
    }
}

static void check(const char *what, const ct_eval_result *ev, int correct, double loss) {
    fprintf(stderr, "# %s: %d/%d correct (want %d), loss %.9g (want %.9g)\n", what, ev->correct, ev->n, correct,
            ev->loss, loss);
    assert_int_equal(ev->n, N);
    assert_int_equal(ev->correct, correct);
    assert_true(fabs(ev->loss - loss) <= 1e-5 * fabs(loss) + 1e-6);
}

static void run(ct_model *m, ct_dataset *ds, const ct_source *src) {
    float *z0 = malloc(sizeof(float) * N * K), *z1 = malloc(sizeof(float) * N * K);
    int correct;
    double loss;
    ct_eval_result ev;
    host_logits(m, ds, 0, z0);
    score(ds, z0, &correct, &loss);
    assert_int_equal(ct_evaluate(m, ds, src, 0, 1.0f / 255, 0, CT_TTA_NONE, &ev, NULL), 0);
    check(src ? "plain, source" : "plain", &ev, correct, loss);
    ct_eval_free(&ev);
    host_logits(m, ds, 1, z1);
    for (int i = 0; i < N * K; i++) z1[i] = 0.5f * (z0[i] + z1[i]);
    score(ds, z1, &correct, &loss);
    assert_int_equal(ct_evaluate(m, ds, src, 0, 1.0f / 255, 0, CT_TTA_FLIP, &ev, NULL), 0);
    check(src ? "tta flip, source" : "tta flip", &ev, correct, loss);
    ct_eval_free(&ev);
    /* flip-translate: 1/4 each unshifted, 1/8 each shifted up-left and down-right, mirrored or not */
    float *zt = malloc(sizeof(float) * N * K), *acc = calloc((size_t)N * K, sizeof(float));
    for (int d = -1; d <= 1; d++)
        for (int f = 0; f < 2; f++) {
            host_logits_at(m, ds, f, d, zt);
            for (int i = 0; i < N * K; i++) acc[i] += (d ? 0.125f : 0.25f) * zt[i];
        }
    score(ds, acc, &correct, &loss);
    assert_int_equal(ct_evaluate(m, ds, src, 0, 1.0f / 255, 0, CT_TTA_FLIP_TRANSLATE, &ev, NULL), 0);
    check(src ? "tta flip-translate, source" : "tta flip-translate", &ev, correct, loss);
    ct_eval_free(&ev);
    /* both modes again, each with the plain result from the same pass: that of the plain evaluation */
    for (int t = CT_TTA_FLIP; t <= CT_TTA_FLIP_TRANSLATE; t++) {
        ct_eval_result pl, ref;
        assert_int_equal(ct_evaluate(m, ds, src, 0, 1.0f / 255, 0, CT_TTA_NONE, &ref, NULL), 0);
        memset(&pl, 0xff, sizeof pl); /* poisoned */
        assert_int_equal(ct_evaluate(m, ds, src, 0, 1.0f / 255, 0, t, &ev, &pl), 0);
        if (t == CT_TTA_FLIP_TRANSLATE) check("tta flip-translate with plain", &ev, correct, loss);
        score(ds, z0, &correct, &loss);
        check(t == CT_TTA_FLIP ? "plain from tta flip" : "plain from tta flip-translate", &pl, correct, loss);
        assert_int_equal(pl.n_classes, K);
        assert_memory_equal(pl.confusion, ref.confusion, sizeof(int) * K * K);
        if (t == CT_TTA_FLIP) score(ds, acc, &correct, &loss); /* flip-translate's scores for the next round */
        ct_eval_free(&pl);
        ct_eval_free(&ref);
        ct_eval_free(&ev);
    }
    free(zt);
    free(acc);
    free(z0);
    free(z1);
}

static void test_tta(void **state) {
    (void)state;
    CT_NEED_CL();
    ct_model m;
    assert_int_equal(ct_model_parse(&m, cfg, "tta.cfg"), 0);
    assert_int_equal(ct_model_setup(&m, &g_cl, B, CT_GEMM_NATIVE), 0);
    ct_model_init_weights(&m, 7);
    m.training = 0;
    ct_dataset ds = {.n = N, .h = H, .w = W, .c = C, .n_classes = K};
    ds.images = malloc((size_t)N * H * W * C);
    ds.labels = malloc(N);
    ct_rng r = ct_rng_make(3, 0, 0);
    for (size_t i = 0; i < (size_t)N * H * W * C; i++) ds.images[i] = (uint8_t)(ct_rng_next(&r) >> 56);
    for (int i = 0; i < N; i++) ds.labels[i] = (uint8_t)ct_rng_below(&r, K);
    run(&m, &ds, NULL);
    /* through a source: the CIFAR source without augmentation (x/255, then standardised) would differ from
     * bytes/255, so standardisation is off to compare with the byte path's logits */
    ct_cifar_ctx ctx = {&ds, ct_augment_default(CT_AUG_NONE)};
    ctx.aug.standardize = 0;
    ct_source src;
    ct_cifar_source_init(&src, &ctx);
    run(&m, &ds, &src);

    /* symmetric images: the mirror changes nothing, so neither does tta */
    for (int i = 0; i < N; i++) {
        uint8_t *img = ds.images + (size_t)i * H * W * C;
        for (int y = 0; y < H; y++)
            for (int x = 0; x < W / 2; x++)
                memcpy(img + (y * W + W - 1 - x) * C, img + (y * W + x) * C, C);
    }
    ct_eval_result a, b;
    assert_int_equal(ct_evaluate(&m, &ds, NULL, 0, 1.0f / 255, 0, CT_TTA_NONE, &a, NULL), 0);
    assert_int_equal(ct_evaluate(&m, &ds, NULL, 0, 1.0f / 255, 0, CT_TTA_FLIP, &b, NULL), 0);
    check("symmetric", &b, a.correct, a.loss);
    ct_eval_free(&a);
    ct_eval_free(&b);
    free(ds.images);
    free(ds.labels);
    ct_model_free(&m);
}

static void test_tta_parse(void **state) {
    (void)state;
    int t = -1;
    assert_int_equal(ct_tta_parse("flip", &t), 0);
    assert_int_equal(t, CT_TTA_FLIP);
    assert_int_equal(ct_tta_parse("none", &t), 0);
    assert_int_equal(t, CT_TTA_NONE);
    assert_int_equal(ct_tta_parse("flip-translate", &t), 0);
    assert_int_equal(t, CT_TTA_FLIP_TRANSLATE);
    assert_int_equal(ct_tta_views(t), 6);
    assert_int_equal(ct_tta_parse("crop", &t), CT_EINPUT);
    assert_non_null(strstr(ct_last_error(), "--tta crop"));
    assert_null(strchr(ct_last_error(), '\n'));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tta_parse),
        cmocka_unit_test(test_tta),
    };
    return cmocka_run_group_tests(tests, ct_test_open, ct_test_close);
}
