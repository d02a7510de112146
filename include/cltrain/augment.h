/* augment.h: per-sample image augmentation, uint8 HWC in, float HWC out.
 *
 * The CIFAR-10 tutorial's chain, in its order: random crop (zero padding of
 * `pad` pixels on each side, cropped back to h x w), horizontal flip with
 * p = 0.5, random brightness, random contrast, then TensorFlow's
 * per_image_standardization. With standardization on, its mean and standard
 * deviation come from the uncropped image and the padding is 0 after it (the
 * mean), so a crop's pixels keep the values the test image gives them. Every random number comes from the ct_rng the
 * caller passes, drawn in a fixed order, so one (seed, epoch, index) gives
 * bit-identical floats whichever producer thread makes the sample.
 * Depends on common.h only. Tested by tests/test_augment.c. */
#ifndef CLTRAIN_AUGMENT_H
#define CLTRAIN_AUGMENT_H
#include <stdint.h>
#include "cltrain/common.h"
#include "cltrain/prep.h"
#include "cltrain/source.h"

/* SHIFT is the padded crop alone (a translation by up to `pad` pixels): it
 * never mirrors, so it cannot turn one class into another (a mirrored digit
 * or glyph is another symbol or none), the default for image sets. */
enum { CT_AUG_NONE = 0, CT_AUG_BASIC = 1, CT_AUG_FULL = 2, CT_AUG_SHIFT = 3 };

typedef struct ct_augment {
    int level;            /* CT_AUG_NONE: x/255; SHIFT: padded crop; BASIC: crop + flip; FULL: crop + flip + brightness + contrast */
    int pad;              /* zero padding per side before the random crop (4) */
    float max_brightness; /* delta uniform in [-max, max], in [0,1] units (63/255) */
    float contrast_lo, contrast_hi; /* contrast factor uniform in [lo, hi) (0.2, 1.8) */
    int standardize;      /* 1: (x - mean) / max(stddev, 1/sqrt(h*w*c)) over the whole image */
    int resized_crop;     /* 1 (image sets larger than 32x32): basic and full take a random-resized crop instead of the padded crop */
    float scale_lo;       /* resized crop: area share uniform in [scale_lo, 1], aspect ratio log-uniform in [3/4, 4/3] */
    int cutout;           /* > 0 (training only): zero a cutout x cutout square centred on a uniform pixel, last */
    int reflect;          /* 1: the padded crop's padding mirrors the image (no edge repeat) instead of zeros:
                           * --translate N, a translation by up to N = pad pixels; pad < h and < w */
    int alternate;        /* 1 (--flip alternate): basic and full flip each image in every other epoch, starting
                           * from a random choice of its own (rng->fixed, rng->epoch), instead of at random */
    ct_prep prep;         /* c > 0: the model's normalisation (x / 255 - mean) / std per channel in place of
                           * standardize, after the pixel steps and before the cutout; the crop's padding is
                           * black (0 before it), as torchvision's RandomCrop before Normalize */
} ct_augment;

/* The tutorial's settings at `level`: pad 4, brightness 63/255, contrast
 * 0.2..1.8, standardize 1. */
ct_augment ct_augment_default(int level);

/* The settings for image folders, shards and TFRecord sets of side `size`:
 * no standardisation (x/255, as evaluation sees them); the padded crop with
 * pad = size/8 (at least 1); for size > 32, basic and full take a
 * random-resized crop instead (area 25-100%, aspect 3/4-4/3, bilinear back
 * to size x size), shift keeps the padded crop. */
ct_augment ct_augment_images(int level, int size);

/* Parse "none" | "basic" | "full" | "shift" (or "0" .. "3") into a->level,
 * keeping the other fields. CT_EINPUT with a message listing the choices. */
int ct_augment_parse(ct_augment *a, const char *s);

/* Parse "random" | "alternate" for --flip into a->alternate. CT_EINPUT with one line otherwise. */
int ct_augment_parse_flip(ct_augment *a, const char *s);

/* CT_EINPUT naming --translate when the padding (a reflect translation)
 * reaches h or w: a reflection needs pad < side. */
int ct_augment_check_size(const ct_augment *a, int h, int w);

/* CT_EINPUT (message names the field) unless level is 0..3, pad 0..1024,
 * max_brightness >= 0 and 0 <= contrast_lo <= contrast_hi, all finite, and
 * prep has 0..CT_PREP_MAX channels with finite means and stds > 0. */
int ct_augment_check(const ct_augment *a);

/* Augment one image. src: h*w*c bytes, HWC; dst: h*w*c floats, HWC.
 * With a->prep.c > 0, c must equal it (checked).
 * Random numbers are drawn from rng in this order: crop dy, crop dx, flip
 * (basic and full), brightness, contrast (full). At level 0 rng is not used
 * and may be NULL. a must pass ct_augment_check (checked: a bad one aborts). */
void ct_augment_apply(const ct_augment *a, const uint8_t *src, int h, int w, int c, float *dst, ct_rng *rng);

/* The same on an image that is already floats in [0, 1] (a decoded image
 * file or a shard record): src and dst are h*w*c floats, HWC, distinct.
 * Random numbers in this order: the crop (padded: dy, dx; resized: area,
 * log-ratio per attempt, up to 10 attempts, then y0, x0), flip (basic, full), brightness,
 * contrast, then the cutout centre (y, x) when cutout > 0. With resized_crop = 0 it gives the bits ct_augment_apply gives
 * for src = bytes / 255. */
void ct_augment_apply_f(const ct_augment *a, const float *src, int h, int w, int c, float *dst, ct_rng *rng);

/* The steps, exposed for tests and for other pipelines. */
/* The random-resized crop's window for an h x w image: rows y0..y0+ch-1,
 * columns x0..x0+cw-1, drawn as torchvision's RandomResizedCrop does (10
 * attempts, then the whole image). */
void ct_augment_rrc_window(const ct_augment *a, int h, int w, ct_rng *rng, int *y0, int *x0, int *ch, int *cw);
/* dst (h x w) = the window of src resized bilinearly (pixel centres aligned, edges clamped). */
void ct_augment_resize_window(float *dst, const float *src, int h, int w, int c, int y0, int x0, int ch, int cw);
/* dst[y][x] = padded[y + dy][x + dx] / 255, where padded is src with `pad`
 * zero pixels on every side; 0 <= dy, dx <= 2 * pad. */
void ct_augment_crop(float *dst, const uint8_t *src, int h, int w, int c, int pad, int dy, int dx);
/* In place: img[y][x] = img[y + oy][x + ox], 0 where that falls outside. */
void ct_augment_shift(float *img, int h, int w, int c, int oy, int ox);
/* dst[y][x] = src[r(y + oy, h)][r(x + ox, w)] where r reflects without
 * repeating the edge (-1 -> 1, n -> n - 2), as PyTorch's reflect padding;
 * |oy| < h, |ox| < w. dst and src distinct. */
void ct_augment_shift_reflect(float *dst, const float *src, int h, int w, int c, int oy, int ox);
/* Mirror an HWC image left-right in place. */
void ct_augment_flip(float *img, int h, int w, int c);
/* Per-image standardization in place over all n = h*w*c values (sums in double). */
void ct_augment_standardize(float *img, size_t n);

/* A ct_source that augments another one's samples: inner.load gives floats
 * in [0, 1] (image folders, shards, TFRecord), then ct_augment_apply_f with
 * this source's random numbers, which come only from (seed, epoch, index),
 * so any producer count makes the same batches. inner is copied. */
typedef struct ct_augsrc_ctx {
    const struct ct_source *inner;
    ct_augment aug;
} ct_augsrc_ctx;
/* Fill src to read inner through ctx (which must outlive src). CT_EINPUT if aug fails ct_augment_check. */
int ct_augsrc_init(struct ct_source *src, ct_augsrc_ctx *ctx, const struct ct_source *inner, const ct_augment *aug);

#endif
