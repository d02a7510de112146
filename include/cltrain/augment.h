/* augment.h: per-sample image augmentation, uint8 HWC in, float HWC out.
 *
 * The CIFAR-10 tutorial's chain, in its order: random crop (zero padding of
 * `pad` pixels on each side, cropped back to h x w), horizontal flip with
 * p = 0.5, random brightness, random contrast, then TensorFlow's
 * per_image_standardization. Every random number comes from the ct_rng the
 * caller passes, drawn in a fixed order, so one (seed, epoch, index) gives
 * bit-identical floats whichever producer thread makes the sample.
 * Depends on common.h only. Tested by tests/test_augment.c. */
#ifndef CLTRAIN_AUGMENT_H
#define CLTRAIN_AUGMENT_H
#include <stdint.h>
#include "cltrain/common.h"

enum { CT_AUG_NONE = 0, CT_AUG_BASIC = 1, CT_AUG_FULL = 2 };

typedef struct ct_augment {
    int level;            /* CT_AUG_NONE: x/255; BASIC: crop + flip; FULL: crop + flip + brightness + contrast */
    int pad;              /* zero padding per side before the random crop (4) */
    float max_brightness; /* delta uniform in [-max, max], in [0,1] units (63/255) */
    float contrast_lo, contrast_hi; /* contrast factor uniform in [lo, hi) (0.2, 1.8) */
    int standardize;      /* 1: (x - mean) / max(stddev, 1/sqrt(h*w*c)) over the whole image */
} ct_augment;

/* The tutorial's settings at `level`: pad 4, brightness 63/255, contrast
 * 0.2..1.8, standardize 1. */
ct_augment ct_augment_default(int level);

/* Parse "none" | "basic" | "full" (or "0" | "1" | "2") into a->level,
 * keeping the other fields. CT_EINPUT with a message listing the choices. */
int ct_augment_parse(ct_augment *a, const char *s);

/* CT_EINPUT (message names the field) unless level is 0..2, pad 0..1024,
 * max_brightness >= 0 and 0 <= contrast_lo <= contrast_hi, all finite. */
int ct_augment_check(const ct_augment *a);

/* Augment one image. src: h*w*c bytes, HWC; dst: h*w*c floats, HWC.
 * Random numbers are drawn from rng in this order: crop dy, crop dx, flip
 * (level >= 1), brightness, contrast (level 2). At level 0 rng is not used
 * and may be NULL. a must pass ct_augment_check (checked: a bad one aborts). */
void ct_augment_apply(const ct_augment *a, const uint8_t *src, int h, int w, int c, float *dst, ct_rng *rng);

/* The steps, exposed for tests and for other pipelines. */
/* dst[y][x] = padded[y + dy][x + dx] / 255, where padded is src with `pad`
 * zero pixels on every side; 0 <= dy, dx <= 2 * pad. */
void ct_augment_crop(float *dst, const uint8_t *src, int h, int w, int c, int pad, int dy, int dx);
/* Mirror an HWC image left-right in place. */
void ct_augment_flip(float *img, int h, int w, int c);
/* Per-image standardization in place over all n = h*w*c values (sums in double). */
void ct_augment_standardize(float *img, size_t n);

#endif
