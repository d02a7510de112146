/* test_augment.c: crop, flip, brightness, contrast and standardization, and
 * the augmenting ct_source.
 *
 * Flip twice is the identity; every crop is the zero-padded source at an
 * offset in [0, 2*pad] (each offset and both flips occur); standardized
 * images have mean 0 and standard deviation 1; the random draws come in the
 * documented order; level 0 is a pure function that never touches the rng;
 * and the same (seed, epoch, index) gives bit-identical floats from four
 * threads working in different orders; a model's normalisation (mean= and
 * std=) matches its float64 reference and follows the other pixel steps.
 * Depends on libcltrain, pthreads,
 * cmocka. Run clean under ASan and TSan too. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "cltrain/augment.h"
#include "cltrain/cifar.h"
#include "cltrain/common.h"
#include "cltrain/pipeline.h"
#include "cltrain/ref.h"
#include "cltrain/source.h"
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#define K255 (1.0f / 255.0f) /* the library scales by this product, not by a division */

static void rand_bytes(uint8_t *p, size_t n, uint64_t seed) {
    ct_rng r = ct_rng_make(seed, 17, 0);
    for (size_t i = 0; i < n; i++) p[i] = (uint8_t)ct_rng_below(&r, 256);
}

static void mean_std(const float *x, size_t n, double *mean, double *sd) {
    double s = 0, q = 0;
    for (size_t i = 0; i < n; i++) s += x[i];
    *mean = s / (double)n;
    for (size_t i = 0; i < n; i++) q += (x[i] - *mean) * (x[i] - *mean);
    *sd = sqrt(q / (double)n);
}

static void test_flip(void **state) {
    (void)state;
    /* odd and even widths, one and three channels */
    int shapes[4][3] = {{5, 7, 3}, {4, 8, 1}, {1, 1, 3}, {32, 32, 3}};
    for (int s = 0; s < 4; s++) {
        int h = shapes[s][0], w = shapes[s][1], c = shapes[s][2];
        size_t n = (size_t)h * w * c;
        float *orig = malloc(n * sizeof *orig), *img = malloc(n * sizeof *img);
        assert_non_null(orig);
        assert_non_null(img);
        for (size_t i = 0; i < n; i++) orig[i] = (float)i * 0.5f - 3.0f;
        memcpy(img, orig, n * sizeof *img);
        ct_augment_flip(img, h, w, c);
        for (int y = 0; y < h; y++)
            for (int x = 0; x < w; x++)
                for (int ch = 0; ch < c; ch++)
                    assert_true(img[((size_t)y * w + x) * c + ch] == orig[((size_t)y * w + (w - 1 - x)) * c + ch]);
        ct_augment_flip(img, h, w, c);
        assert_memory_equal(img, orig, n * sizeof *img);
        free(orig);
        free(img);
    }
}

/* The test's own reference: padded[y+dy][x'+dx] / 255 with x' mirrored when flip. */
static float ref_pixel(const uint8_t *src, int h, int w, int c, int pad, int dy, int dx, int flip, int y, int x, int ch) {
    int xx = flip ? w - 1 - x : x;
    int sy = y + dy - pad, sx = xx + dx - pad;
    if (sy < 0 || sy >= h || sx < 0 || sx >= w) return 0.0f;
    return (float)src[((size_t)sy * w + sx) * c + ch] * K255;
}

static void test_crop_in_bounds(void **state) {
    (void)state;
    enum { H = 5, W = 7, C = 2, PAD = 3, SPAN = 2 * PAD + 1 };
    uint8_t src[H * W * C];
    for (int i = 0; i < H * W * C; i++) src[i] = (uint8_t)(1 + i); /* distinct and non-zero: padding shows */
    ct_augment a = ct_augment_default(CT_AUG_BASIC);
    a.pad = PAD;
    a.standardize = 0;
    int seen[SPAN][SPAN][2] = {{{0}}};
    float out[H * W * C];
    for (int i = 0; i < 4000; i++) {
        ct_rng r = ct_rng_make(99, 1, (uint64_t)i);
        ct_augment_apply(&a, src, H, W, C, out, &r);
        /* exactly one (dy, dx, flip) in range explains every pixel */
        int matches = 0;
        for (int dy = 0; dy < SPAN; dy++)
            for (int dx = 0; dx < SPAN; dx++)
                for (int f = 0; f < 2; f++) {
                    int ok = 1;
                    for (int y = 0; y < H && ok; y++)
                        for (int x = 0; x < W && ok; x++)
                            for (int ch = 0; ch < C && ok; ch++)
                                ok = out[(y * W + x) * C + ch] == ref_pixel(src, H, W, C, PAD, dy, dx, f, y, x, ch);
                    if (ok) { matches++; seen[dy][dx][f]++; }
                }
        if (matches != 1) fail_msg("sample %d: %d crops explain the output", i, matches);
    }
    for (int dy = 0; dy < SPAN; dy++)
        for (int dx = 0; dx < SPAN; dx++)
            for (int f = 0; f < 2; f++)
                if (!seen[dy][dx][f]) fail_msg("offset (%d,%d) flip %d never drawn", dy, dx, f);

    /* the crop helper at its extreme offsets, and padding wider than the image */
    ct_augment_crop(out, src, H, W, C, PAD, 0, 0);
    assert_true(out[0] == 0.0f);
    assert_true(out[((PAD) * W + PAD) * C] == src[0] * K255);
    ct_augment_crop(out, src, H, W, C, PAD, 2 * PAD, 2 * PAD);
    assert_true(out[0] == src[(PAD * W + PAD) * C] * K255);
    assert_true(out[(H * W - 1) * C] == 0.0f);
    ct_augment_crop(out, src, H, W, C, 20, 0, 40);
    for (int i = 0; i < H * W * C; i++) assert_true(out[i] == 0.0f);
    ct_augment_crop(out, src, H, W, C, 20, 20, 20);
    for (int i = 0; i < H * W * C; i++) assert_true(out[i] == src[i] * K255);
}

static void test_standardize(void **state) {
    (void)state;
    enum { N = 32 * 32 * 3 };
    uint8_t src[N];
    float out[N];
    for (int level = 0; level <= 2; level++) {
        ct_augment a = ct_augment_default(level);
        a.pad = 0; /* with padding, the padding is the mean: test_standardized_crop */
        for (int i = 0; i < 50; i++) {
            rand_bytes(src, N, (uint64_t)i);
            if (i % 5 == 0) memset(src, 200, N / 2); /* a half-flat image */
            ct_rng r = ct_rng_make(5, 6, (uint64_t)i);
            ct_augment_apply(&a, src, 32, 32, 3, out, &r);
            double mean, sd;
            mean_std(out, N, &mean, &sd);
            if (fabs(mean) > 1e-4 || fabs(sd - 1.0) > 1e-4)
                fail_msg("level %d image %d: mean %.3g std %.9g", level, i, mean, sd);
        }
    }
    /* a flat image: stddev below 1/sqrt(n), so zeros, not a division by zero */
    memset(src, 77, N);
    ct_augment a = ct_augment_default(CT_AUG_NONE);
    ct_augment_apply(&a, src, 32, 32, 3, out, NULL);
    for (int i = 0; i < N; i++) assert_true(out[i] == 0.0f);
    /* TensorFlow's formula on a tiny image: (x - mean) / max(std, 1/sqrt(n)) */
    float t[4] = {0.0f, 0.0f, 0.0f, 0.004f};
    ct_augment_standardize(t, 4); /* std 0.0017 < 1/sqrt(4) = 0.5 */
    assert_true(fabsf(t[3] - (0.004f - 0.001f) / 0.5f) < 1e-7f);
    assert_true(fabsf(t[0] - (-0.001f) / 0.5f) < 1e-7f);
}

/* With standardization, a crop is the standardized whole image at one
 * (dy, dx, flip), and its padding is exactly 0 (the mean): the pixels that
 * remain do not change with the offset. Both levels, both paths. */
static void test_standardized_crop(void **state) {
    (void)state;
    enum { H = 7, W = 6, C = 3, N = H * W * C, PAD = 2, SPAN = 2 * PAD + 1 };
    uint8_t src[N];
    float whole[N], out[N], srcf[N];
    int seen[SPAN][SPAN][2] = {{{0}}};
    for (int i = 0; i < 3000; i++) {
        rand_bytes(src, N, (uint64_t)i + 100);
        for (int k = 0; k < N; k++) whole[k] = srcf[k] = (float)src[k] * K255;
        ct_augment_standardize(whole, N);
        ct_augment a = ct_augment_default(i % 2 ? CT_AUG_FULL : CT_AUG_BASIC);
        a.pad = PAD;
        ct_rng r = ct_rng_make(3, 4, (uint64_t)i);
        if (i % 4 < 2) ct_augment_apply(&a, src, H, W, C, out, &r);
        else ct_augment_apply_f(&a, srcf, H, W, C, out, &r);
        int matches = 0;
        for (int dy = 0; dy < SPAN; dy++)
            for (int dx = 0; dx < SPAN; dx++)
                for (int f = 0; f < 2; f++) {
                    int ok = 1;
                    for (int y = 0; y < H && ok; y++)
                        for (int x = 0; x < W && ok; x++) {
                            int xx = f ? W - 1 - x : x, sy = y + dy - PAD, sx = xx + dx - PAD;
                            int inside = sy >= 0 && sy < H && sx >= 0 && sx < W;
                            for (int ch = 0; ch < C && ok; ch++) {
                                float got = out[(y * W + x) * C + ch];
                                /* full's brightness cancels; its contrast does not, so only check padding there */
                                if (!inside) ok = got == 0.0f;
                                else if (a.level == CT_AUG_BASIC) ok = fabsf(got - whole[(sy * W + sx) * C + ch]) < 1e-5f;
                                else ok = got != 0.0f || whole[(sy * W + sx) * C + ch] == 0.0f;
                            }
                        }
                    if (ok) { matches++; if (a.level == CT_AUG_BASIC) seen[dy][dx][f]++; }
                }
        if (matches < 1 || (a.level == CT_AUG_BASIC && matches != 1))
            fail_msg("sample %d (level %d): %d crops explain the output", i, a.level, matches);
    }
    for (int dy = 0; dy < SPAN; dy++)
        for (int dx = 0; dx < SPAN; dx++)
            for (int f = 0; f < 2; f++)
                if (!seen[dy][dx][f]) fail_msg("offset (%d,%d) flip %d never drawn", dy, dx, f);
    /* the shift helper: every direction, and past the edge */
    float img[N];
    for (int oy = -H; oy <= H; oy++)
        for (int ox = -W; ox <= W; ox++) {
            for (int k = 0; k < N; k++) img[k] = srcf[k];
            ct_augment_shift(img, H, W, C, oy, ox);
            for (int y = 0; y < H; y++)
                for (int x = 0; x < W; x++)
                    for (int ch = 0; ch < C; ch++) {
                        int sy = y + oy, sx = x + ox;
                        float want = sy >= 0 && sy < H && sx >= 0 && sx < W ? srcf[(sy * W + sx) * C + ch] : 0.0f;
                        if (img[(y * W + x) * C + ch] != want) fail_msg("shift (%d,%d) at (%d,%d,%d)", oy, ox, y, x, ch);
                    }
        }
}

/* Level 0: x/255 (then standardized), rng untouched and may be NULL, same bits every time. */
static void test_level0(void **state) {
    (void)state;
    enum { N = 8 * 6 * 3 };
    uint8_t src[N];
    float a0[N], a1[N];
    rand_bytes(src, N, 3);
    ct_augment a = ct_augment_default(CT_AUG_NONE);
    a.standardize = 0;
    ct_rng r = ct_rng_make(1, 2, 3), saved = r;
    ct_augment_apply(&a, src, 8, 6, 3, a0, &r);
    assert_memory_equal(&r, &saved, sizeof r);
    for (int i = 0; i < N; i++) assert_true(a0[i] == (float)src[i] * K255);
    a.standardize = 1;
    ct_augment_apply(&a, src, 8, 6, 3, a0, &r);
    ct_augment_apply(&a, src, 8, 6, 3, a1, NULL);
    assert_memory_equal(&r, &saved, sizeof r);
    assert_memory_equal(a0, a1, sizeof a0);
    /* against the formula, in double */
    double mean = 0, q = 0;
    for (int i = 0; i < N; i++) mean += src[i] / 255.0;
    mean /= N;
    for (int i = 0; i < N; i++) q += (src[i] / 255.0 - mean) * (src[i] / 255.0 - mean);
    double sd = fmax(sqrt(q / N), 1.0 / sqrt(N));
    for (int i = 0; i < N; i++) assert_true(fabs(a0[i] - (src[i] / 255.0 - mean) / sd) < 1e-5);
}

/* Draw order: crop, crop, flip, then brightness and contrast; with a neutral
 * brightness and contrast, full equals basic. Then each effect on its own. */
static void test_draw_order_and_effects(void **state) {
    (void)state;
    enum { H = 6, W = 5, C = 3, N = H * W * C };
    uint8_t src[N];
    float b[N], f[N];
    rand_bytes(src, N, 11);
    ct_augment basic = ct_augment_default(CT_AUG_BASIC), full = ct_augment_default(CT_AUG_FULL);
    basic.standardize = full.standardize = 0;
    full.max_brightness = 0;
    full.contrast_lo = full.contrast_hi = 1;
    for (int i = 0; i < 50; i++) {
        ct_rng r1 = ct_rng_make(7, 0, (uint64_t)i), r2 = r1;
        ct_augment_apply(&basic, src, H, W, C, b, &r1);
        ct_augment_apply(&full, src, H, W, C, f, &r2);
        for (int k = 0; k < N; k++) assert_true(fabsf(b[k] - f[k]) < 1e-6f); /* (x - m) * 1 + m rounds */
        ct_rng_next(&r1); /* full drew two more numbers */
        ct_rng_next(&r1);
        assert_memory_equal(&r1, &r2, sizeof r1);
    }
    /* brightness only: every pixel moved by the same delta, |delta| <= max */
    full = ct_augment_default(CT_AUG_FULL);
    full.standardize = 0;
    full.contrast_lo = full.contrast_hi = 1;
    double lo = 1, hi = -1;
    for (int i = 0; i < 200; i++) {
        ct_rng r1 = ct_rng_make(8, 0, (uint64_t)i), r2 = r1;
        ct_augment_apply(&basic, src, H, W, C, b, &r1);
        ct_augment_apply(&full, src, H, W, C, f, &r2);
        float d = f[0] - b[0];
        for (int k = 0; k < N; k++) assert_true(fabsf((f[k] - b[k]) - d) < 1e-6f);
        assert_true(fabsf(d) <= full.max_brightness + 1e-6f);
        if (d < lo) lo = d;
        if (d > hi) hi = d;
    }
    assert_true(lo < -0.8 * full.max_brightness && hi > 0.8 * full.max_brightness);
    /* contrast only: per channel, (x - mean) * factor + mean, factor in [lo, hi) */
    full.max_brightness = 0;
    full.contrast_lo = 0.2f;
    full.contrast_hi = 1.8f;
    double fmin = 9, fmax_seen = 0;
    for (int i = 0; i < 200; i++) {
        ct_rng r1 = ct_rng_make(9, 0, (uint64_t)i), r2 = r1;
        ct_augment_apply(&basic, src, H, W, C, b, &r1);
        ct_augment_apply(&full, src, H, W, C, f, &r2);
        double factor = -1;
        for (int ch = 0; ch < C; ch++) {
            double m = 0;
            for (int p = 0; p < H * W; p++) m += b[p * C + ch];
            m /= H * W;
            double dev = 0;
            int best = 0;
            for (int p = 0; p < H * W; p++)
                if (fabs(b[p * C + ch] - m) > dev) { dev = fabs(b[p * C + ch] - m); best = p; }
            if (dev < 1e-3) continue;
            double k = (f[best * C + ch] - m) / (b[best * C + ch] - m);
            if (factor < 0) factor = k;
            assert_true(fabs(k - factor) < 1e-3);
            for (int p = 0; p < H * W; p++)
                assert_true(fabs(f[p * C + ch] - ((b[p * C + ch] - m) * factor + m)) < 1e-5);
        }
        assert_true(factor >= 0.2 - 1e-4 && factor < 1.8 + 1e-4);
        if (factor < fmin) fmin = factor;
        if (factor > fmax_seen) fmax_seen = factor;
    }
    assert_true(fmin < 0.4 && fmax_seen > 1.6);
}

static void test_settings(void **state) {
    (void)state;
    ct_augment a = ct_augment_default(CT_AUG_FULL);
    assert_int_equal(a.pad, 4);
    assert_true(a.max_brightness == 63.0f / 255.0f);
    assert_int_equal(ct_augment_check(&a), 0);
    assert_int_equal(ct_augment_parse(&a, "none"), 0);
    assert_int_equal(a.level, CT_AUG_NONE);
    assert_int_equal(ct_augment_parse(&a, "basic"), 0);
    assert_int_equal(a.level, CT_AUG_BASIC);
    assert_int_equal(ct_augment_parse(&a, "2"), 0);
    assert_int_equal(a.level, CT_AUG_FULL);
    assert_int_equal(ct_augment_parse(&a, "fancy"), CT_EINPUT);
    assert_non_null(strstr(ct_last_error(), "'fancy'"));
    assert_non_null(strstr(ct_last_error(), "basic"));
    assert_int_equal(a.level, CT_AUG_FULL);
    assert_int_equal(ct_augment_parse(&a, "4"), CT_EINPUT);
    assert_int_equal(ct_augment_parse(&a, NULL), CT_EINPUT);
    ct_augment bad = a;
    bad.contrast_lo = 2;
    assert_int_equal(ct_augment_check(&bad), CT_EINPUT);
    assert_non_null(strstr(ct_last_error(), "contrast"));
    bad = a;
    bad.pad = -1;
    assert_int_equal(ct_augment_check(&bad), CT_EINPUT);
    bad = a;
    bad.max_brightness = NAN;
    assert_int_equal(ct_augment_check(&bad), CT_EINPUT);
    bad = a;
    bad.level = 4;
    assert_int_equal(ct_augment_check(&bad), CT_EINPUT);
    assert_int_equal(ct_augment_parse(&a, "shift"), 0);
    assert_int_equal(a.level, CT_AUG_SHIFT);
    assert_int_equal(ct_augment_check(&a), 0);
}

/* ---- the source, from four threads --------------------------------------- */

enum { NS = 96, SZ = 32 * 32 * 3, SEED = 1234, EPOCH = 3 };

typedef struct job {
    const ct_source *src;
    int stride, start;
    float *out;
    int32_t *labels;
} job;

static void *worker(void *p) {
    job *j = p;
    for (int k = 0; k < NS; k++) {
        int index = (j->start + k * j->stride) % NS;
        ct_rng r = ct_rng_make(SEED, EPOCH, (uint64_t)index);
        if (j->src->load(j->src->ctx, index, j->out + (size_t)index * SZ, j->labels + index, &r) != 0) return p;
    }
    return NULL;
}

static void test_source_threads(void **state) {
    (void)state;
    ct_dataset ds = {.n = NS, .h = 32, .w = 32, .c = 3, .n_classes = 10};
    ds.images = malloc((size_t)NS * SZ);
    ds.labels = malloc(NS);
    assert_non_null(ds.images);
    assert_non_null(ds.labels);
    rand_bytes(ds.images, (size_t)NS * SZ, 42);
    for (int i = 0; i < NS; i++) ds.labels[i] = (uint8_t)(i % 10);
    ct_cifar_ctx ctx = {&ds, ct_augment_default(CT_AUG_FULL)};
    ct_source src;
    memset(&src, 0x5A, sizeof src);
    ct_cifar_source_init(&src, &ctx);
    assert_int_equal(src.n, NS);
    assert_int_equal(src.h, 32);
    assert_int_equal(src.c, 3);
    assert_int_equal(src.n_classes, 10);
    assert_ptr_equal(src.ctx, &ctx);
    assert_int_equal(src.io_latency_us, 0);

    /* the reference, in order on this thread */
    float *want = malloc((size_t)NS * SZ * sizeof *want);
    int32_t want_labels[NS];
    assert_non_null(want);
    for (int i = 0; i < NS; i++) {
        ct_rng r = ct_rng_make(SEED, EPOCH, (uint64_t)i);
        assert_int_equal(src.load(src.ctx, i, want + (size_t)i * SZ, want_labels + i, &r), 0);
        assert_int_equal(want_labels[i], i % 10);
    }
    /* another epoch gives other crops */
    float *other = malloc(SZ * sizeof *other);
    int32_t lab;
    assert_non_null(other);
    ct_rng r = ct_rng_make(SEED, EPOCH + 1, 0);
    src.load(src.ctx, 0, other, &lab, &r);
    assert_true(memcmp(other, want, SZ * sizeof *other) != 0);
    free(other);

    enum { T = 4 };
    pthread_t th[T];
    job jobs[T];
    for (int t = 0; t < T; t++) {
        static const int strides[T] = {1, 5, 7, 11}; /* coprime to NS: each visits every index once */
        jobs[t] = (job){&src, strides[t], t * 17, malloc((size_t)NS * SZ * sizeof(float)),
                        malloc(NS * sizeof(int32_t))};
        assert_non_null(jobs[t].out);
        assert_non_null(jobs[t].labels);
        assert_int_equal(pthread_create(&th[t], NULL, worker, &jobs[t]), 0);
    }
    for (int t = 0; t < T; t++) {
        void *ret;
        assert_int_equal(pthread_join(th[t], &ret), 0);
        assert_null(ret);
        assert_memory_equal(jobs[t].out, want, (size_t)NS * SZ * sizeof *want);
        assert_memory_equal(jobs[t].labels, want_labels, sizeof want_labels);
        free(jobs[t].out);
        free(jobs[t].labels);
    }
    free(want);
    ct_dataset_free(&ds);
}

/* The float path with the padded crop makes the same bits as the byte path
 * on bytes / 255, at every level, from the same random numbers. */
static void test_float_path_matches(void **state) {
    (void)state;
    enum { H = 11, W = 9, C = 3, N = H * W * C };
    uint8_t img[N];
    float f[N], a[N], b[N];
    rand_bytes(img, N, 5);
    for (int i = 0; i < N; i++) f[i] = (float)img[i] * K255;
    for (int level = 0; level <= 2; level++)
        for (int std = 0; std <= 1; std++)
            for (uint64_t k = 0; k < 20; k++) {
                ct_augment au = ct_augment_default(level);
                au.pad = 3;
                au.standardize = std;
                ct_rng r1 = ct_rng_make(9, 1, k), r2 = ct_rng_make(9, 1, k);
                ct_augment_apply(&au, img, H, W, C, a, &r1);
                ct_augment_apply_f(&au, f, H, W, C, b, &r2);
                assert_memory_equal(a, b, sizeof a);
                assert_int_equal(ct_rng_next(&r1), ct_rng_next(&r2)); /* the same draws were taken */
            }
}

/* Random-resized crop: windows inside the image, area share and aspect ratio
 * within the ranges (up to rounding), all of them reached; the whole-image
 * window resizes to an exact copy; a linear ramp stays linear. */
static void test_resized_crop(void **state) {
    (void)state;
    enum { S = 64, C = 2, N = S * S * C };
    ct_augment au = ct_augment_images(CT_AUG_BASIC, S);
    assert_int_equal(au.resized_crop, 1);
    assert_int_equal(au.standardize, 0);
    assert_int_equal(ct_augment_check(&au), 0);
    ct_augment small = ct_augment_images(CT_AUG_BASIC, 32);
    assert_int_equal(small.resized_crop, 0);
    assert_int_equal(small.pad, 4);
    assert_int_equal(ct_augment_images(CT_AUG_BASIC, 8).pad, 1);
    assert_int_equal(ct_augment_images(CT_AUG_SHIFT, 64).pad, 8); /* shift translates at any size */
    double min_share = 1, max_share = 0, min_ratio = 9, max_ratio = 0;
    for (uint64_t k = 0; k < 2000; k++) {
        ct_rng r = ct_rng_make(4, 2, k);
        int y0, x0, ch, cw;
        ct_augment_rrc_window(&au, S, S, &r, &y0, &x0, &ch, &cw);
        assert_true(y0 >= 0 && x0 >= 0 && ch >= 1 && cw >= 1 && y0 + ch <= S && x0 + cw <= S);
        double share = (double)ch * cw / (S * S), ratio = (double)cw / ch;
        if (share < min_share) min_share = share;
        if (share > max_share) max_share = share;
        if (ratio < min_ratio) min_ratio = ratio;
        if (ratio > max_ratio) max_ratio = ratio;
    }
    print_message("# 2000 windows: area share %.3f..%.3f, aspect %.3f..%.3f\n", min_share, max_share, min_ratio, max_ratio);
    assert_true(min_share >= 0.25 * 0.9 && min_share < 0.3 && max_share > 0.9);
    assert_true(min_ratio >= 0.75 * 0.95 && min_ratio < 0.8 && max_ratio <= 4.0 / 3 * 1.05 && max_ratio > 1.25);
    static float src[N], dst[N];
    for (int y = 0; y < S; y++)
        for (int x = 0; x < S; x++) {
            src[(y * S + x) * C] = (float)x / S;
            src[(y * S + x) * C + 1] = (float)y / S;
        }
    ct_augment_resize_window(dst, src, S, S, C, 0, 0, S, S);
    assert_memory_equal(dst, src, sizeof src);
    /* a 32x16 window at (8, 20) stretched to 64x64: x' = 20 + (x + 0.5) * 16/64 - 0.5 inside the clamp */
    ct_augment_resize_window(dst, src, S, S, C, 8, 20, 32, 16);
    for (int y = 2; y < S - 2; y++)
        for (int x = 2; x < S - 2; x++) {
            double wx = (20 + (x + 0.5) * 16.0 / S - 0.5) / S, wy = (8 + (y + 0.5) * 32.0 / S - 0.5) / S;
            assert_true(fabs(dst[(y * S + x) * C] - wx) < 1e-5);
            assert_true(fabs(dst[(y * S + x) * C + 1] - wy) < 1e-5);
        }
    au.scale_lo = 0;
    assert_int_equal(ct_augment_check(&au), CT_EINPUT);
}

/* The augmenting source: level none passes the inner source through
 * untouched; basic is a function of (index, random numbers) only, differs
 * from the plain image, and keeps the label. */
typedef struct { float v[4 * 4 * 3]; } ramp_ctx;
static int ramp_load(void *ctx, int index, float *dst, int32_t *label, ct_rng *rng) {
    (void)rng;
    const ramp_ctx *c = ctx;
    for (int i = 0; i < 48; i++) dst[i] = c->v[i] * (float)(index + 1) / 8;
    *label = index % 3;
    return 0;
}

static void test_augsrc(void **state) {
    (void)state;
    ramp_ctx rc;
    for (int i = 0; i < 48; i++) rc.v[i] = (float)((i * 7) % 13) / 13;
    ct_source inner = {.n = 5, .h = 4, .w = 4, .c = 3, .n_classes = 3, .ctx = &rc, .load = ramp_load};
    ct_augment none = ct_augment_images(CT_AUG_NONE, 4), basic = ct_augment_images(CT_AUG_BASIC, 4);
    ct_augsrc_ctx c0, c1;
    ct_source s0, s1;
    assert_int_equal(ct_augsrc_init(&s0, &c0, &inner, &none), 0);
    assert_int_equal(ct_augsrc_init(&s1, &c1, &inner, &basic), 0);
    assert_int_equal(s1.n, 5);
    assert_int_equal(s1.h * s1.w * s1.c, 48);
    float plain[48], a[48], b[48];
    int32_t l0, l1, l2;
    int differ = 0;
    for (int i = 0; i < 5; i++) {
        ct_rng r0 = ct_rng_make(1, 0, (uint64_t)i), r1 = ct_rng_make(1, 0, (uint64_t)i), r2 = ct_rng_make(1, 0, (uint64_t)i);
        assert_int_equal(ramp_load(&rc, i, plain, &l0, NULL), 0);
        assert_int_equal(s0.load(s0.ctx, i, a, &l1, &r0), 0);
        assert_memory_equal(a, plain, sizeof a);
        assert_int_equal(s1.load(s1.ctx, i, a, &l1, &r1), 0);
        assert_int_equal(s1.load(s1.ctx, i, b, &l2, &r2), 0);
        assert_memory_equal(a, b, sizeof a);
        assert_int_equal(l1, l0);
        differ += memcmp(a, plain, sizeof a) != 0;
    }
    assert_true(differ >= 3);
    ct_augment bad = basic;
    bad.level = 7;
    assert_int_equal(ct_augsrc_init(&s1, &c1, &inner, &bad), CT_EINPUT);
}

/* A model's per-channel normalisation in place of standardisation: at level
 * none, on bytes and on floats, it matches ref_prep within 1e-6 relative at
 * shapes 1x1x1, 7x5x3 (primes) and 32x32x3 (poisoned outputs); with
 * augmentation it is the same crop, flip and jitter (the same draws) with
 * the normalisation last, the padding black before it (-mean/std after) and
 * the cutout 0 after it; through ct_augsrc the same. */
static void test_prep(void **state) {
    (void)state;
    static const int shapes[][3] = {{1, 1, 1}, {7, 5, 3}, {32, 32, 3}, {6, 4, 4}};
    for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++) {
        int H = shapes[s][0], W = shapes[s][1], C = shapes[s][2], N = H * W * C;
        uint8_t *img = malloc((size_t)N);
        float *a = malloc(sizeof(float) * N), *f = malloc(sizeof(float) * N), *b = malloc(sizeof(float) * N);
        double *ref = malloc(sizeof(double) * N), mean[4], std[4];
        rand_bytes(img, (size_t)N, 40 + s);
        ct_rng r = ct_rng_make(3, 4, s);
        ct_augment au = ct_augment_default(CT_AUG_NONE); /* standardize on: the normalisation replaces it */
        au.prep.c = C;
        for (int k = 0; k < C; k++) {
            au.prep.mean[k] = (float)(ct_rng_uniform(&r) * 2 - 0.5);
            au.prep.std[k] = (float)(0.05 + ct_rng_uniform(&r) * 2);
            mean[k] = au.prep.mean[k];
            std[k] = au.prep.std[k];
        }
        assert_int_equal(ct_augment_check(&au), 0);
        ref_prep(ref, img, (long)H * W, C, mean, std);
        for (int i = 0; i < N; i++) f[i] = (float)img[i] * K255;
        for (int path = 0; path < 2; path++) {
            for (int i = 0; i < N; i++) a[i] = NAN;
            if (path) ct_augment_apply_f(&au, f, H, W, C, a, NULL);
            else ct_augment_apply(&au, img, H, W, C, a, NULL);
            double worst = 0;
            for (int i = 0; i < N; i++) {
                double e = fabs(a[i] - ref[i]) / (fabs(ref[i]) > 1 ? fabs(ref[i]) : 1);
                worst = e > worst || isnan(e) ? (isnan(e) ? INFINITY : e) : worst;
            }
            if (worst > 1e-6) fprintf(stderr, "# %dx%dx%d path %d: max rel error %g\n", H, W, C, path, worst);
            assert_true(worst <= 1e-6);
        }
        /* with augmentation: the plain chain (no standardisation), then the normalisation, bit for bit */
        for (int level = CT_AUG_BASIC; level <= CT_AUG_SHIFT; level++)
            for (uint64_t k = 0; k < 12; k++) {
                ct_augment plain = ct_augment_default(level), norm = plain;
                plain.standardize = 0;
                norm.prep = au.prep;
                norm.pad = plain.pad = 2;
                ct_rng r1 = ct_rng_make(9, 2, k), r2 = ct_rng_make(9, 2, k);
                ct_augment_apply(&plain, img, H, W, C, b, &r1);
                ct_prep_apply(&au.prep, b, (size_t)H * W);
                ct_augment_apply(&norm, img, H, W, C, a, &r2);
                assert_memory_equal(a, b, sizeof(float) * N);
                assert_int_equal(ct_rng_next(&r1), ct_rng_next(&r2));
            }
        /* the padding is black before the normalisation: a crop at the far corner shows -mean/std there */
        if (H > 1) {
            ct_augment sh = ct_augment_default(CT_AUG_SHIFT);
            sh.prep = au.prep;
            sh.pad = 1;
            int seen = 0;
            for (uint64_t k = 0; k < 64 && !seen; k++) {
                ct_rng r1 = ct_rng_make(1, 1, k);
                ct_augment_apply(&sh, img, H, W, C, a, &r1);
                ct_rng r2 = ct_rng_make(1, 1, k);
                int dy = (int)ct_rng_below(&r2, 3);
                if (dy != 0) continue;
                seen = 1; /* dy 0: row 0 is padding */
                for (int x = 0; x < W; x++)
                    for (int c = 0; c < C; c++) assert_true(fabs(a[x * C + c] - (0 - mean[c]) / std[c]) < 1e-6);
            }
            assert_true(seen);
        }
        free(img); free(a); free(f); free(b); free(ref);
    }
    /* cutout zeroes after the normalisation (the mean colour) */
    enum { S = 8, C3 = 3 };
    uint8_t img[S * S * C3];
    float a[S * S * C3];
    rand_bytes(img, sizeof img, 77);
    ct_augment cu = ct_augment_default(CT_AUG_BASIC);
    cu.standardize = 0;
    cu.cutout = 4;
    cu.prep = (ct_prep){.c = 3, .mean = {0.9f, 0.9f, 0.9f}, .std = {0.1f, 0.1f, 0.1f}};
    ct_rng r = ct_rng_make(5, 0, 1);
    ct_augment_apply(&cu, img, S, S, C3, a, &r);
    int zeros = 0;
    for (int i = 0; i < S * S * C3; i++) zeros += a[i] == 0.0f;
    assert_true(zeros >= 4 * C3);
    /* bad settings */
    ct_augment bad = ct_augment_default(CT_AUG_NONE);
    bad.prep.c = 1;
    bad.prep.std[0] = 0;
    assert_int_equal(ct_augment_check(&bad), CT_EINPUT);
    bad.prep.std[0] = 1;
    bad.prep.mean[0] = NAN;
    assert_int_equal(ct_augment_check(&bad), CT_EINPUT);
    bad.prep.mean[0] = 0;
    bad.prep.c = CT_PREP_MAX + 1;
    assert_int_equal(ct_augment_check(&bad), CT_EINPUT);
    /* through the augmenting source (image folders, arrays): level none with a normalisation is not a pass-through */
    ramp_ctx rc;
    for (int i = 0; i < 48; i++) rc.v[i] = (float)((i * 7) % 13) / 13;
    ct_source inner = {.n = 5, .h = 4, .w = 4, .c = 3, .n_classes = 3, .ctx = &rc, .load = ramp_load};
    ct_augment none = ct_augment_images(CT_AUG_NONE, 4);
    none.prep = (ct_prep){.c = 3, .mean = {0.1f, 0.2f, 0.3f}, .std = {0.5f, 0.25f, 2.0f}};
    ct_augsrc_ctx c0;
    ct_source s0;
    assert_int_equal(ct_augsrc_init(&s0, &c0, &inner, &none), 0);
    float plain[48], got[48];
    int32_t l0, l1;
    assert_int_equal(ramp_load(&rc, 2, plain, &l0, NULL), 0);
    ct_rng r0 = ct_rng_make(1, 0, 2);
    assert_int_equal(s0.load(s0.ctx, 2, got, &l1, &r0), 0);
    for (int i = 0; i < 48; i++) assert_true(fabs(got[i] - (plain[i] - none.prep.mean[i % 3]) / none.prep.std[i % 3]) < 1e-6);
}

/* Cutout: after everything else, an N x N square (clipped at the border)
 * is zero and the rest equals the augmentation without cutout; the square's
 * centre is the last draw. */
static void test_cutout(void **state) {
    (void)state;
    enum { S = 16, C = 3, N = S * S * C, Q = 6 };
    uint8_t img[N];
    float a[N], b[N];
    rand_bytes(img, N, 8);
    int clipped = 0;
    for (uint64_t k = 0; k < 40; k++) {
        ct_augment au = ct_augment_default(CT_AUG_FULL);
        ct_rng r1 = ct_rng_make(2, 3, k), r2 = ct_rng_make(2, 3, k);
        ct_augment_apply(&au, img, S, S, C, a, &r1);
        au.cutout = Q;
        ct_augment_apply(&au, img, S, S, C, b, &r2);
        int cy = (int)ct_rng_below(&r1, S) - Q / 2, cx = (int)ct_rng_below(&r1, S) - Q / 2, zeros = 0;
        for (int y = 0; y < S; y++)
            for (int x = 0; x < S; x++)
                for (int ch = 0; ch < C; ch++) {
                    int in = y >= cy && y < cy + Q && x >= cx && x < cx + Q;
                    float want = in ? 0.0f : a[(y * S + x) * C + ch];
                    assert_true(b[(y * S + x) * C + ch] == want);
                    zeros += in;
                }
        clipped += zeros < Q * Q * C;
        assert_true(zeros > 0);
    }
    assert_true(clipped > 0 && clipped < 40);
    ct_augment au = ct_augment_default(CT_AUG_NONE);
    au.cutout = Q; /* evaluation: never */
    ct_augment_apply(&au, img, S, S, C, b, NULL);
    ct_augment_apply(&(ct_augment){.level = CT_AUG_NONE, .pad = 4, .max_brightness = 63.0f / 255, .contrast_lo = 0.2f,
                                   .contrast_hi = 1.8f, .standardize = 1}, img, S, S, C, a, NULL);
    assert_memory_equal(a, b, sizeof a);
    au.cutout = -1;
    assert_int_equal(ct_augment_check(&au), CT_EINPUT);
}


/* --translate: the reflect shift against explicit reflect padding and a
 * crop (PyTorch's F.pad(mode='reflect'): no edge repeat); the augmentation
 * with reflect on gives one of the (2 pad + 1)^2 shifts, mirrored only when
 * the level flips, every shift reached, on the float path and on the
 * standardised byte path; a translation as large as the image is refused. */
static void pad_reflect_ref(float *out, const float *img, int h, int w, int c, int p, int dy, int dx) {
    int ph = h + 2 * p, pw = w + 2 * p;
    float *pad = malloc(sizeof(float) * (size_t)ph * pw * c);
    for (int y = 0; y < ph; y++)
        for (int x = 0; x < pw; x++) {
            int sy = y - p, sx = x - p;
            while (sy < 0 || sy >= h) sy = sy < 0 ? -sy : 2 * (h - 1) - sy;
            while (sx < 0 || sx >= w) sx = sx < 0 ? -sx : 2 * (w - 1) - sx;
            for (int k = 0; k < c; k++) pad[((size_t)y * pw + x) * c + k] = img[((size_t)sy * w + sx) * c + k];
        }
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++)
            for (int k = 0; k < c; k++) out[((size_t)y * w + x) * c + k] = pad[((size_t)(y + p + dy) * pw + x + p + dx) * c + k];
    free(pad);
}

static void test_translate_reflect(void **state) {
    (void)state;
    enum { S = 9, C = 2, P = 2, N = S * S * C };
    float img[N], out[N], want[N], tmp[N];
    ct_rng r = ct_rng_make(5, 1, 2);
    for (int i = 0; i < N; i++) img[i] = ct_rng_uniform(&r);
    for (int dy = -P; dy <= P; dy++)
        for (int dx = -P; dx <= P; dx++) {
            ct_augment_shift_reflect(out, img, S, S, C, dy, dx);
            pad_reflect_ref(want, img, S, S, C, P, dy, dx);
            assert_memory_equal(out, want, sizeof out);
        }
    for (int level = CT_AUG_BASIC; level <= CT_AUG_SHIFT; level += CT_AUG_SHIFT - CT_AUG_BASIC) {
        ct_augment a = ct_augment_images(level, S);
        a.pad = P;
        a.reflect = 1;
        assert_int_equal(ct_augment_check(&a), 0);
        assert_int_equal(ct_augment_check_size(&a, S, S), 0);
        int seen[2 * P + 1][2 * P + 1] = {{0}}, flipped = 0;
        for (uint64_t k = 0; k < 400; k++) {
            ct_rng q = ct_rng_make(9, 0, k);
            ct_augment_apply_f(&a, img, S, S, C, out, &q);
            int found = 0;
            for (int f = 0; f < 2 && !found; f++)
                for (int dy = -P; dy <= P && !found; dy++)
                    for (int dx = -P; dx <= P && !found; dx++) {
                        pad_reflect_ref(want, img, S, S, C, P, dy, dx);
                        if (f) ct_augment_flip(want, S, S, C);
                        if (!memcmp(out, want, sizeof out)) found = 1, seen[dy + P][dx + P]++, flipped += f;
                    }
            if (!found) fail_msg("level %d sample %d: not a reflect shift of the image", level, (int)k);
        }
        for (int y = 0; y <= 2 * P; y++)
            for (int x = 0; x <= 2 * P; x++) assert_true(seen[y][x] > 0);
        if (level == CT_AUG_SHIFT) assert_int_equal(flipped, 0);
        else assert_true(flipped > 100 && flipped < 300);
    }
    /* the standardised byte path (CIFAR's): the same shift of the standardised image */
    uint8_t bytes[N];
    for (int i = 0; i < N; i++) bytes[i] = (uint8_t)(ct_rng_next(&r) >> 56);
    ct_augment a = ct_augment_default(CT_AUG_SHIFT);
    a.pad = P;
    a.reflect = 1;
    for (int i = 0; i < N; i++) tmp[i] = bytes[i] / 255.0f;
    ct_augment_standardize(tmp, N);
    for (uint64_t k = 0; k < 50; k++) {
        ct_rng q = ct_rng_make(3, 0, k), q2 = q;
        ct_augment_apply(&a, bytes, S, S, C, out, &q);
        int dy = (int)ct_rng_below(&q2, 2 * P + 1) - P, dx = (int)ct_rng_below(&q2, 2 * P + 1) - P;
        pad_reflect_ref(want, tmp, S, S, C, P, dy, dx);
        for (int i = 0; i < N; i++) assert_true(fabsf(out[i] - want[i]) < 1e-6f);
    }
    /* too large: pad must stay below the side */
    a.pad = S;
    assert_int_equal(ct_augment_check_size(&a, S, S), CT_EINPUT);
    assert_non_null(strstr(ct_last_error(), "--translate 9"));
    assert_null(strchr(ct_last_error(), '\n'));
    a.pad = S - 1;
    assert_int_equal(ct_augment_check_size(&a, S, S), 0);
}

/* --flip alternate: each image flips in every other epoch, from a first
 * choice of its own (rng->fixed) that differs between images; the pipeline
 * gives a sample the same `fixed` in every epoch (by image, whatever its
 * position) and its epoch. */
typedef struct { int n; } tag_ctx;
static int tag_load(void *ctx, int index, float *dst, int32_t *label, ct_rng *rng) {
    (void)ctx;
    dst[0] = (float)index;
    dst[1] = (float)(rng->fixed >> 40);
    dst[2] = (float)rng->epoch;
    *label = 0;
    return 0;
}

static void test_alternate_flip(void **state) {
    (void)state;
    enum { S = 6, C = 1, N = S * S * C };
    float img[N], out[N], mir[N];
    for (int i = 0; i < N; i++) img[i] = (float)i;
    memcpy(mir, img, sizeof mir);
    ct_augment_flip(mir, S, S, C);
    ct_augment a = ct_augment_images(CT_AUG_BASIC, S);
    a.pad = 0;
    assert_int_equal(ct_augment_parse_flip(&a, "alternate"), 0);
    assert_int_equal(a.alternate, 1);
    int first[2] = {0, 0};
    for (uint64_t k = 0; k < 64; k++) {
        ct_rng f = ct_rng_make(11, 0, k);
        uint64_t fixed = ct_rng_next(&f);
        int f0 = -1;
        for (int e = 0; e < 5; e++) {
            ct_rng q = ct_rng_make(1, (uint64_t)e, k * 7);
            q.epoch = e;
            q.fixed = fixed;
            ct_augment_apply_f(&a, img, S, S, C, out, &q);
            int flipped = !memcmp(out, mir, sizeof out);
            assert_true(flipped || !memcmp(out, img, sizeof out));
            if (e == 0) f0 = flipped, first[flipped]++;
            else assert_int_equal(flipped, f0 ^ (e & 1));
        }
    }
    assert_true(first[0] > 16 && first[1] > 16);
    assert_int_equal(ct_augment_parse_flip(&a, "random"), 0);
    assert_int_equal(a.alternate, 0);
    assert_int_equal(ct_augment_parse_flip(&a, "sometimes"), CT_EINPUT);
    assert_non_null(strstr(ct_last_error(), "--flip sometimes"));

    /* the pipeline: fixed by image across epochs (the order changes), epoch as counted */
    enum { NI = 10, BS = 4 };
    tag_ctx tc = {NI};
    ct_source src = {.n = NI, .h = 1, .w = 3, .c = 1, .n_classes = 1, .ctx = &tc, .load = tag_load};
    float fixed_of[NI], got[BS * 3];
    int32_t lab[BS];
    int seen = 0, moved = 0;
    for (int64_t seq = 0; seq < 9; seq++) { /* 3 batches per epoch, 3 epochs */
        int B;
        assert_int_equal(ct_batch_fill(&src, 42, NI, BS, seq, NULL, got, lab, &B), 0);
        for (int j = 0; j < B; j++) {
            int idx = (int)got[j * 3];
            assert_int_equal((int)got[j * 3 + 2], (int)(seq / 3));
            if (seq < 3) fixed_of[idx] = got[j * 3 + 1], seen++;
            else assert_true(fixed_of[idx] == got[j * 3 + 1]);
            moved += seq >= 3 && j + (seq % 3) * BS != idx;
        }
    }
    assert_int_equal(seen, NI);
    assert_true(moved > 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_flip),
        cmocka_unit_test(test_crop_in_bounds),
        cmocka_unit_test(test_standardize),
        cmocka_unit_test(test_standardized_crop),
        cmocka_unit_test(test_level0),
        cmocka_unit_test(test_draw_order_and_effects),
        cmocka_unit_test(test_settings),
        cmocka_unit_test(test_source_threads),
        cmocka_unit_test(test_float_path_matches),
        cmocka_unit_test(test_resized_crop),
        cmocka_unit_test(test_augsrc),
        cmocka_unit_test(test_prep),
        cmocka_unit_test(test_cutout),
        cmocka_unit_test(test_translate_reflect),
        cmocka_unit_test(test_alternate_flip),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
