/* augment.c: random crop, flip, brightness, contrast and per-image
 * standardization of one uint8 HWC image into floats.
 *
 * Pure functions of (settings, image, rng state): no globals, no
 * allocation but a copy for the reflect shift (--translate), sums in double in a fixed order, so producers on any thread
 * make the same bits. Depends on common.h. Tested by tests/test_augment.c. */
#include "cltrain/augment.h"
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

ct_augment ct_augment_default(int level) {
    ct_augment a = {
        .level = level, .pad = 4, .max_brightness = 63.0f / 255.0f,
        .contrast_lo = 0.2f, .contrast_hi = 1.8f, .standardize = 1,
    };
    return a;
}

ct_augment ct_augment_images(int level, int size) {
    ct_augment a = ct_augment_default(level);
    a.standardize = 0;
    a.pad = size / 8 > 1 ? size / 8 : 1; /* shift's translation at any size */
    if (size > 32) {
        a.resized_crop = 1;
        a.scale_lo = 0.25f;
    }
    return a;
}

int ct_augment_parse(ct_augment *a, const char *s) {
    static const char *const names[4] = {"none", "basic", "full", "shift"};
    CT_ASSERT(a);
    for (int i = 0; s && i < 4; i++) {
        if (strcmp(s, names[i]) == 0 || (s[0] == '0' + i && s[1] == '\0')) {
            a->level = i;
            return 0;
        }
    }
    return ct_fail(CT_EINPUT, "--augment: '%s' is not a level; use none (scale and standardise), shift (random "
                   "padded crop, no flip), basic (crop + flip) or full (crop, flip, brightness, contrast)", s ? s : "");
}

int ct_augment_parse_flip(ct_augment *a, const char *s) {
    CT_ASSERT(a);
    if (s && !strcmp(s, "random")) a->alternate = 0;
    else if (s && !strcmp(s, "alternate")) a->alternate = 1;
    else return ct_fail(CT_EINPUT, "--flip %s: unknown mode; use random (each image, each epoch) or alternate "
                        "(each image every other epoch)", s ? s : "");
    return 0;
}

int ct_augment_check_size(const ct_augment *a, int h, int w) {
    CT_ASSERT(a);
    if (a->reflect && a->level != CT_AUG_NONE && (a->pad >= h || a->pad >= w))
        return ct_fail(CT_EINPUT, "--translate %d: larger than the %dx%d images; use at most %d pixels", a->pad, h, w,
                       (h < w ? h : w) - 1);
    return 0;
}

int ct_augment_check(const ct_augment *a) {
    CT_ASSERT(a);
    if (a->level < CT_AUG_NONE || a->level > CT_AUG_SHIFT)
        return ct_fail(CT_EINPUT, "augment: level %d; use 0 (none), 1 (basic), 2 (full) or 3 (shift)", a->level);
    if (a->pad < 0 || a->pad > 1024)
        return ct_fail(CT_EINPUT, "augment: crop padding %d; use 0..1024 pixels (4 for 32x32 images)", a->pad);
    if (!isfinite(a->max_brightness) || a->max_brightness < 0)
        return ct_fail(CT_EINPUT, "augment: max brightness %g; use a finite value >= 0 (63/255)", a->max_brightness);
    if (a->cutout < 0 || a->cutout > 4096)
        return ct_fail(CT_EINPUT, "--cutout %d: use 0 (off) .. 4096 pixels (8 to 16 for 32x32 images)", a->cutout);
    if (a->resized_crop && (!isfinite(a->scale_lo) || a->scale_lo <= 0 || a->scale_lo > 1))
        return ct_fail(CT_EINPUT, "augment: resized-crop area share %g; use 0 < share <= 1 (0.25)", a->scale_lo);
    if (!isfinite(a->contrast_lo) || !isfinite(a->contrast_hi) || a->contrast_lo < 0 || a->contrast_lo > a->contrast_hi)
        return ct_fail(CT_EINPUT, "augment: contrast range [%g, %g]; use 0 <= lo <= hi (0.2, 1.8)",
                       a->contrast_lo, a->contrast_hi);
    if (a->prep.c < 0 || a->prep.c > CT_PREP_MAX)
        return ct_fail(CT_EINPUT, "augment: normalisation of %d channels; use 0..%d", a->prep.c, CT_PREP_MAX);
    for (int k = 0; k < a->prep.c; k++)
        if (!isfinite(a->prep.mean[k]) || !isfinite(a->prep.std[k]) || !(a->prep.std[k] > 0))
            return ct_fail(CT_EINPUT, "augment: channel %d's normalisation mean %g std %g; use finite values, std > 0", k,
                           a->prep.mean[k], a->prep.std[k]);
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

/* Flip (basic, full), then (full) brightness and contrast, in the order of
 * the random numbers; returns whether the image was flipped. shift draws
 * nothing here. */
static int jitter(const ct_augment *a, float *img, int h, int w, int c, ct_rng *rng) {
    size_t n = (size_t)h * w * c;
    if (a->level == CT_AUG_SHIFT) return 0;
    /* alternate: the image's own first choice, reversed in odd epochs (no draw from the stream) */
    int flip = a->alternate ? (int)((rng->fixed >> 63) ^ (uint64_t)(rng->epoch > 0 ? rng->epoch & 1 : 0))
                            : (int)(ct_rng_next(rng) >> 63);
    if (flip) ct_augment_flip(img, h, w, c);
    if (a->level == CT_AUG_FULL) {
        float delta = (2.0f * ct_rng_uniform(rng) - 1.0f) * a->max_brightness;
        float f = a->contrast_lo + ct_rng_uniform(rng) * (a->contrast_hi - a->contrast_lo);
        for (size_t i = 0; i < n; i++) img[i] += delta;
        contrast(img, h, w, c, f);
    }
    return flip;
}

static void cutout(const ct_augment *a, float *dst, int h, int w, int c, ct_rng *rng) {
    if (a->level == CT_AUG_NONE || a->cutout <= 0) return;
    /* DeVries & Taylor 2017: the square may hang over the border; zero after standardising */
    int cy = (int)ct_rng_below(rng, (uint32_t)h) - a->cutout / 2, cx = (int)ct_rng_below(rng, (uint32_t)w) - a->cutout / 2;
    for (int y = cy < 0 ? 0 : cy; y < cy + a->cutout && y < h; y++)
        for (int x = cx < 0 ? 0 : cx; x < cx + a->cutout && x < w; x++)
            memset(dst + ((size_t)y * w + x) * c, 0, sizeof *dst * (size_t)c);
}

/* The steps after the crop (or a resized crop): jitter, the model's normalisation or standardize, cutout. */
static void finish(const ct_augment *a, float *dst, int h, int w, int c, ct_rng *rng) {
    if (a->level != CT_AUG_NONE) jitter(a, dst, h, w, c, rng);
    if (a->prep.c) ct_prep_apply(&a->prep, dst, (size_t)h * w);
    else if (a->standardize) ct_augment_standardize(dst, (size_t)h * w * c);
    cutout(a, dst, h, w, c, rng);
}

void ct_augment_shift(float *img, int h, int w, int c, int oy, int ox) {
    CT_ASSERT(img && h > 0 && w > 0 && c > 0);
    size_t n = (size_t)h * w * c;
    if (oy <= -h || oy >= h || ox <= -w || ox >= w) {
        memset(img, 0, n * sizeof *img);
        return;
    }
    /* every kept pixel moves by one flat offset; memmove, then zero what came from outside */
    ptrdiff_t off = ((ptrdiff_t)oy * w + ox) * c;
    if (off > 0) memmove(img, img + off, (n - (size_t)off) * sizeof *img);
    else if (off < 0) memmove(img - off, img, (n - (size_t)-off) * sizeof *img);
    for (int y = 0; y < h; y++) {
        float *row = img + (size_t)y * w * c;
        if (y + oy < 0 || y + oy >= h) {
            memset(row, 0, (size_t)w * c * sizeof *row);
            continue;
        }
        if (ox > 0) memset(row + (size_t)(w - ox) * c, 0, (size_t)ox * c * sizeof *row);
        if (ox < 0) memset(row, 0, (size_t)-ox * c * sizeof *row);
    }
}

static int reflect_at(int i, int n) {
    if (i < 0) i = -i;
    if (i >= n) i = 2 * (n - 1) - i;
    return i;
}

void ct_augment_shift_reflect(float *dst, const float *src, int h, int w, int c, int oy, int ox) {
    CT_ASSERT(dst && src && dst != src && h > 0 && w > 0 && c > 0);
    CT_ASSERT(oy > -h && oy < h && ox > -w && ox < w && (h > 1 || oy == 0) && (w > 1 || ox == 0));
    for (int y = 0; y < h; y++) {
        const float *row = src + (size_t)reflect_at(y + oy, h) * w * c;
        for (int x = 0; x < w; x++)
            memcpy(dst + ((size_t)y * w + x) * c, row + (size_t)reflect_at(x + ox, w) * c, sizeof *dst * (size_t)c);
    }
}

/* In place: the shift with zeros, or with reflection through a copy. */
static void shift_any(const ct_augment *a, float *img, int h, int w, int c, int oy, int ox) {
    if (!a->reflect) {
        ct_augment_shift(img, h, w, c, oy, ox);
        return;
    }
    if (!oy && !ox) return;
    size_t n = (size_t)h * w * c;
    float *tmp = ct_xmalloc(n * sizeof *tmp);
    memcpy(tmp, img, n * sizeof *tmp);
    ct_augment_shift_reflect(img, tmp, h, w, c, oy, ox);
    free(tmp);
}

/* The padded crop of a standardized image: img holds the whole h x w image
 * (x/255). Jitter and standardize it whole, then shift it to the crop; the
 * padding is 0 after standardizing, the image's mean. So a crop's pixels get
 * the values the uncropped test image gives them, whatever the offset (the
 * black padding standardized with the picture moved them by up to a third
 * of a standard deviation). (dy, dx) is in padded coordinates as in
 * ct_augment_crop; the geometry is crop-then-flip, as without standardizing. */
static void standardized_crop(const ct_augment *a, float *img, int h, int w, int c, int dy, int dx, ct_rng *rng) {
    int flip = jitter(a, img, h, w, c, rng);
    ct_augment_standardize(img, (size_t)h * w * c);
    shift_any(a, img, h, w, c, dy - a->pad, flip ? a->pad - dx : dx - a->pad);
    cutout(a, img, h, w, c, rng);
}

void ct_augment_apply(const ct_augment *a, const uint8_t *src, int h, int w, int c, float *dst, ct_rng *rng) {
    CT_ASSERT(a && src && dst && h > 0 && w > 0 && c > 0);
    CT_ASSERT(ct_augment_check(a) == 0 && (!a->resized_crop || a->level == CT_AUG_SHIFT));
    CT_ASSERT(!a->prep.c || a->prep.c == c);
    if (a->level == CT_AUG_NONE) {
        ct_augment_crop(dst, src, h, w, c, 0, 0, 0);
    } else {
        CT_ASSERT(rng);
        uint32_t span = 2u * (uint32_t)a->pad + 1;
        int dy = (int)ct_rng_below(rng, span), dx = (int)ct_rng_below(rng, span);
        if (a->standardize && !a->prep.c) {
            ct_augment_crop(dst, src, h, w, c, 0, 0, 0);
            standardized_crop(a, dst, h, w, c, dy, dx, rng);
            return;
        }
        if (a->reflect) {
            ct_augment_crop(dst, src, h, w, c, 0, 0, 0);
            shift_any(a, dst, h, w, c, dy - a->pad, dx - a->pad);
        } else {
            ct_augment_crop(dst, src, h, w, c, a->pad, dy, dx);
        }
    }
    finish(a, dst, h, w, c, rng);
}

void ct_augment_rrc_window(const ct_augment *a, int h, int w, ct_rng *rng, int *y0, int *x0, int *ch, int *cw) {
    const double lo = log(3.0 / 4.0), hi = log(4.0 / 3.0), area = (double)h * w;
    for (int attempt = 0; attempt < 10; attempt++) {
        double target = area * (a->scale_lo + (1.0 - a->scale_lo) * ct_rng_uniform(rng));
        double ratio = exp(lo + (hi - lo) * ct_rng_uniform(rng));
        int cwi = (int)lround(sqrt(target * ratio)), chi = (int)lround(sqrt(target / ratio));
        if (cwi >= 1 && cwi <= w && chi >= 1 && chi <= h) {
            *y0 = (int)ct_rng_below(rng, (uint32_t)(h - chi + 1));
            *x0 = (int)ct_rng_below(rng, (uint32_t)(w - cwi + 1));
            *ch = chi;
            *cw = cwi;
            return;
        }
    }
    *y0 = *x0 = 0;
    *ch = h;
    *cw = w;
}

/* Output index o of n, sampled from a window of `win` inputs: the two
 * neighbours a, b (window coordinates) and the weight of b. */
static float sample_at(int o, int n, int win, int *a, int *b) {
    double s = ((double)o + 0.5) * win / n - 0.5;
    if (s < 0) s = 0;
    if (s > win - 1) s = win - 1;
    *a = (int)s;
    *b = *a + 1 < win ? *a + 1 : *a;
    return (float)(s - *a);
}

void ct_augment_resize_window(float *dst, const float *src, int h, int w, int c, int y0, int x0, int ch, int cw) {
    CT_ASSERT(y0 >= 0 && x0 >= 0 && ch >= 1 && cw >= 1 && y0 + ch <= h && x0 + cw <= w);
    for (int y = 0; y < h; y++) {
        int ya, yb, xa, xb;
        float fy = sample_at(y, h, ch, &ya, &yb);
        for (int x = 0; x < w; x++) {
            float fx = sample_at(x, w, cw, &xa, &xb);
            const float *p00 = src + ((size_t)(y0 + ya) * w + x0 + xa) * c, *p01 = src + ((size_t)(y0 + ya) * w + x0 + xb) * c;
            const float *p10 = src + ((size_t)(y0 + yb) * w + x0 + xa) * c, *p11 = src + ((size_t)(y0 + yb) * w + x0 + xb) * c;
            float *o = dst + ((size_t)y * w + x) * c;
            for (int k = 0; k < c; k++) {
                float top = p00[k] + (p01[k] - p00[k]) * fx, bot = p10[k] + (p11[k] - p10[k]) * fx;
                o[k] = top + (bot - top) * fy;
            }
        }
    }
}

void ct_augment_apply_f(const ct_augment *a, const float *src, int h, int w, int c, float *dst, ct_rng *rng) {
    CT_ASSERT(a && src && dst && src != dst && h > 0 && w > 0 && c > 0);
    CT_ASSERT(ct_augment_check(a) == 0 && (!a->prep.c || a->prep.c == c));
    size_t n = (size_t)h * w * c;
    if (a->level == CT_AUG_NONE) {
        memcpy(dst, src, n * sizeof *dst);
    } else if (a->resized_crop && a->level != CT_AUG_SHIFT) {
        CT_ASSERT(rng);
        int y0, x0, ch, cw;
        ct_augment_rrc_window(a, h, w, rng, &y0, &x0, &ch, &cw);
        ct_augment_resize_window(dst, src, h, w, c, y0, x0, ch, cw);
    } else {
        CT_ASSERT(rng);
        uint32_t span = 2u * (uint32_t)a->pad + 1;
        int dy = (int)ct_rng_below(rng, span) - a->pad, dx = (int)ct_rng_below(rng, span) - a->pad;
        if (a->standardize && !a->prep.c) {
            memcpy(dst, src, n * sizeof *dst);
            standardized_crop(a, dst, h, w, c, dy + a->pad, dx + a->pad, rng);
            return;
        }
        if (a->reflect) {
            ct_augment_shift_reflect(dst, src, h, w, c, dy, dx);
            finish(a, dst, h, w, c, rng);
            return;
        }
        for (int y = 0; y < h; y++)
            for (int x = 0; x < w; x++) {
                int sy = y + dy, sx = x + dx;
                float *o = dst + ((size_t)y * w + x) * c;
                if (sy < 0 || sy >= h || sx < 0 || sx >= w) for (int k = 0; k < c; k++) o[k] = 0.0f;
                else memcpy(o, src + ((size_t)sy * w + sx) * c, sizeof *o * (size_t)c);
            }
    }
    finish(a, dst, h, w, c, rng);
}
