/* augment.c: random crop, flip, brightness, contrast and per-image
 * standardization of one uint8 HWC image into floats.
 *
 * Pure functions of (settings, image, rng state): no globals, no
 * allocation, sums in double in a fixed order, so producers on any thread
 * make the same bits. Depends on common.h. Tested by tests/test_augment.c. */
#include "cltrain/augment.h"
#include <math.h>
#include <string.h>

ct_augment ct_augment_default(int level) {
    ct_augment a = {
        .level = level, .pad = 4, .max_brightness = 63.0f / 255.0f,
        .contrast_lo = 0.2f, .contrast_hi = 1.8f, .standardize = 1,
    };
    return a;
}

int ct_augment_parse(ct_augment *a, const char *s) {
    static const char *const names[3] = {"none", "basic", "full"};
    CT_ASSERT(a);
    for (int i = 0; s && i < 3; i++) {
        if (strcmp(s, names[i]) == 0 || (s[0] == '0' + i && s[1] == '\0')) {
            a->level = i;
            return 0;
        }
    }
    return ct_fail(CT_EINPUT, "--augment: '%s' is not a level; use none (scale and standardise), "
                   "basic (random crop + flip) or full (crop, flip, brightness, contrast)", s ? s : "");
}

int ct_augment_check(const ct_augment *a) {
    CT_ASSERT(a);
    if (a->level < CT_AUG_NONE || a->level > CT_AUG_FULL)
        return ct_fail(CT_EINPUT, "augment: level %d; use 0 (none), 1 (basic) or 2 (full)", a->level);
    if (a->pad < 0 || a->pad > 1024)
        return ct_fail(CT_EINPUT, "augment: crop padding %d; use 0..1024 pixels (4 for 32x32 images)", a->pad);
    if (!isfinite(a->max_brightness) || a->max_brightness < 0)
        return ct_fail(CT_EINPUT, "augment: max brightness %g; use a finite value >= 0 (63/255)", a->max_brightness);
    if (!isfinite(a->contrast_lo) || !isfinite(a->contrast_hi) || a->contrast_lo < 0 || a->contrast_lo > a->contrast_hi)
        return ct_fail(CT_EINPUT, "augment: contrast range [%g, %g]; use 0 <= lo <= hi (0.2, 1.8)",
                       a->contrast_lo, a->contrast_hi);
    return 0;
}

void ct_augment_crop(float *dst, const uint8_t *src, int h, int w, int c, int pad, int dy, int dx) {
    CT_ASSERT(dst && src && h > 0 && w > 0 && c > 0 && pad >= 0);
    CT_ASSERT(dy >= 0 && dy <= 2 * pad && dx >= 0 && dx <= 2 * pad);
    const float k = 1.0f / 255.0f;
    for (int y = 0; y < h; y++) {
        int sy = y + dy - pad;
        float *row = dst + (size_t)y * w * c;
        if (sy < 0 || sy >= h) {
            memset(row, 0, sizeof *row * (size_t)w * c);
            continue;
        }
        for (int x = 0; x < w; x++) {
            int sx = x + dx - pad;
            float *o = row + (size_t)x * c;
            if (sx < 0 || sx >= w) {
                for (int ch = 0; ch < c; ch++) o[ch] = 0.0f;
                continue;
            }
            const uint8_t *s = src + ((size_t)sy * w + sx) * c;
            for (int ch = 0; ch < c; ch++) o[ch] = (float)s[ch] * k;
        }
    }
}

void ct_augment_flip(float *img, int h, int w, int c) {
    CT_ASSERT(img && h > 0 && w > 0 && c > 0);
    for (int y = 0; y < h; y++) {
        float *row = img + (size_t)y * w * c;
        for (int x = 0; x < w / 2; x++) {
            float *l = row + (size_t)x * c, *r = row + (size_t)(w - 1 - x) * c;
            for (int ch = 0; ch < c; ch++) {
                float t = l[ch];
                l[ch] = r[ch];
                r[ch] = t;
            }
        }
    }
}

void ct_augment_standardize(float *img, size_t n) {
    CT_ASSERT(img && n > 0);
    double sum = 0, sq = 0;
    for (size_t i = 0; i < n; i++) sum += img[i];
    double mean = sum / (double)n;
    for (size_t i = 0; i < n; i++) {
        double d = img[i] - mean;
        sq += d * d;
    }
    double sd = sqrt(sq / (double)n), floor_sd = 1.0 / sqrt((double)n);
    double inv = 1.0 / (sd > floor_sd ? sd : floor_sd);
    for (size_t i = 0; i < n; i++) img[i] = (float)((img[i] - mean) * inv);
}

/* (x - mean_c) * f + mean_c per channel, as tf.image.adjust_contrast. */
static void contrast(float *img, int h, int w, int c, float f) {
    size_t px = (size_t)h * w;
    for (int ch = 0; ch < c; ch++) {
        double sum = 0;
        for (size_t i = 0; i < px; i++) sum += img[i * c + ch];
        float mean = (float)(sum / (double)px);
        for (size_t i = 0; i < px; i++) img[i * c + ch] = (img[i * c + ch] - mean) * f + mean;
    }
}

void ct_augment_apply(const ct_augment *a, const uint8_t *src, int h, int w, int c, float *dst, ct_rng *rng) {
    CT_ASSERT(a && src && dst && h > 0 && w > 0 && c > 0);
    CT_ASSERT(ct_augment_check(a) == 0);
    size_t n = (size_t)h * w * c;
    if (a->level == CT_AUG_NONE) {
        ct_augment_crop(dst, src, h, w, c, 0, 0, 0);
    } else {
        CT_ASSERT(rng);
        uint32_t span = 2u * (uint32_t)a->pad + 1;
        int dy = (int)ct_rng_below(rng, span), dx = (int)ct_rng_below(rng, span);
        int flip = (int)(ct_rng_next(rng) >> 63);
        ct_augment_crop(dst, src, h, w, c, a->pad, dy, dx);
        if (flip) ct_augment_flip(dst, h, w, c);
        if (a->level == CT_AUG_FULL) {
            float delta = (2.0f * ct_rng_uniform(rng) - 1.0f) * a->max_brightness;
            float f = a->contrast_lo + ct_rng_uniform(rng) * (a->contrast_hi - a->contrast_lo);
            for (size_t i = 0; i < n; i++) dst[i] += delta;
            contrast(dst, h, w, c, f);
        }
    }
    if (a->standardize) ct_augment_standardize(dst, n);
}
