/* source.h: the interface every data loader offers the input pipeline and
 * evaluation: a sample by index, as floats. No OpenCL here, so loaders
 * (src/data/) build and are tested without a device; the pipeline that
 * moves their samples into pinned device buffers is pipeline.h.
 * Implemented by cifar.h, images.h, shard.h, tfrecord.h and augment.h
 * (ct_augsrc); tested through them (tests/test_cifar.c, test_images.c,
 * test_augment.c) and by tests/test_pipeline.c. */
#ifndef CLTRAIN_SOURCE_H
#define CLTRAIN_SOURCE_H
#include "cltrain/common.h"

/* Where samples come from. load writes sample `index` as h*w*c floats into
 * dst and its label into *label, drawing any augmentation random numbers from
 * rng; it returns 0 or a negative CT_E* code with ct_fail's message (which
 * should name the file and record). Called from several threads at once. */
typedef int (*ct_source_load_fn)(void *ctx, int index, float *dst, int32_t *label, ct_rng *rng);
typedef struct ct_source {
    int n, h, w, c, n_classes;
    void *ctx;
    ct_source_load_fn load;
    int io_latency_us;     /* simulated storage latency per sample (a sleep), for the benchmark */
} ct_source;

/* A source of n samples of h x w x c in n_classes classes, each loaded by
 * load(ctx, ...); no simulated latency. */
static inline void ct_source_init(ct_source *src, int n, int h, int w, int c, int n_classes, void *ctx,
                                  ct_source_load_fn load) {
    *src = (ct_source){.n = n, .h = h, .w = w, .c = c, .n_classes = n_classes, .ctx = ctx, .load = load};
}
#endif
