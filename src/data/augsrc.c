/* augsrc.c: augmentation for any source of [0, 1] float images (image
 * folders, record shards, TFRecord): the inner source loads the sample, then
 * ct_augment_apply_f crops, flips and jitters it with the pipeline's
 * per-sample random numbers. Depends on augment.h, source.h (ct_source).
 * Tested by tests/test_augment.c. */
#include "cltrain/augment.h"
#include "cltrain/source.h"
#include <stdlib.h>
#include <string.h>

static int augsrc_load(void *vctx, int index, float *dst, int32_t *label, ct_rng *rng) {
    const ct_augsrc_ctx *c = vctx;
    const ct_source *in = c->inner;
    if (c->aug.level == CT_AUG_NONE && !c->aug.standardize && !c->aug.prep.c) return in->load(in->ctx, index, dst, label, rng);
    size_t n = (size_t)in->h * in->w * in->c;
    float *tmp = malloc(n * sizeof *tmp);
    if (!tmp) return ct_fail(CT_ENOMEM, "out of memory augmenting an image");
    int rc = in->load(in->ctx, index, tmp, label, rng);
    if (!rc) ct_augment_apply_f(&c->aug, tmp, in->h, in->w, in->c, dst, rng);
    free(tmp);
    return rc;
}

int ct_augsrc_init(ct_source *src, ct_augsrc_ctx *ctx, const ct_source *inner, const ct_augment *aug) {
    int rc = ct_augment_check(aug);
    if (rc) return rc;
    ctx->inner = inner;
    ctx->aug = *aug;
    *src = *inner;
    src->ctx = ctx;
    src->load = augsrc_load;
    return 0;
}
