/* train/whiten.c: a fresh run's whitening layer (cltrain/whiten.h): the
 * first whiten=N training images (fewer where --limit-train or the set has
 * fewer: training's images, never others), in the data set's order and
 * prepared as the model sees them without augmentation
 * (ct_train_opts.plain_src, or the bytes * scale + shift that a set without a
 * source uploads), through the patch covariance into the layer's weights.
 * Tested by tests/test_whiten.c, tests/cifar.sh and tests/images.sh. */
#include "loop.h"
#include "cltrain/whiten.h"
#include <string.h>

int ct_train_whiten(ct_loop *loop) {
    ct_model *m = &loop->m;
    const ct_train_opts *o = &loop->o;
    int li = ct_whiten_layer(m);
    if (li < 0) return 0;
    const ct_layer *L = &m->layers[li];
    const ct_dataset *ds = loop->train;
    const ct_source *src = o->plain_src;
    if (!src && (o->train_src || !ds->images))
        return ct_fail(CT_EINPUT, "%s:%d: whiten=%d needs the training images as the model sees them, without augmentation, "
                       "which this caller did not give (ct_train_opts.plain_src); leave out whiten=", m->name, L->line,
                       L->whiten);
    /* the images training uses: --limit-train's first N, never others */
    int avail = o->limit_train > 0 && o->limit_train < ds->n ? o->limit_train : ds->n;
    int n = L->whiten < avail ? L->whiten : avail, B = m->batch, d = L->k * L->k * L->ic;
    if (n <= 0) return ct_fail(CT_EINPUT, "%s:%d: whiten=%d: the training set has no images", m->name, L->line, L->whiten);
    size_t sz = (size_t)m->in_h * m->in_w * m->in_c;
    double *cov = ct_xcalloc((size_t)d * d, sizeof *cov);
    float *x = ct_xmalloc((size_t)B * sz * sizeof *x);
    int32_t *lab = ct_xcalloc((size_t)B, sizeof *lab);
    long patches = 0;
    int rc = 0;
    for (int s = 0; s < n && !rc; s += B) {
        int nb = n - s < B ? n - s : B;
        if (src) {
            for (int i = 0; i < nb && !rc; i++) {
                ct_rng r = ct_rng_make(0, 0, (uint64_t)(s + i)); /* unused without augmentation, as evaluation's */
                rc = src->load(src->ctx, s + i, x + (size_t)i * sz, lab + i, &r);
            }
        } else { /* the device's conversion, as training uploads such a set */
            ct_model_set_batch(m, ds->images + (size_t)s * sz, lab, nb, o->scale, o->shift);
            ct_cl_read(m->cl, m->input, 0, (size_t)nb * sz * sizeof *x, x);
        }
        if (!rc) patches += ct_whiten_accumulate(cov, x, nb, m->in_h, m->in_w, m->in_c, L->k);
    }
    float *p = ct_xmalloc(m->n_params * sizeof *p);
    if (!rc) {
        ct_model_get_params(m, p);
        rc = ct_whiten_weights(L, cov, patches, p);
    }
    if (!rc) {
        ct_model_set_params(m, p);
        if (!o->quiet && loop->writer) {
            fprintf(loop->out, "whitening: layer %d from the first %d training images (%ld %dx%d patches", li, n, patches,
                    L->k, L->k);
            if (n < L->whiten)
                fprintf(loop->out, "; whiten=%d asks for more: %s", L->whiten,
                        avail < ds->n ? "--limit-train leaves no more" : "the training set has no more");
            fprintf(loop->out, ")\n");
        }
    }
    free(cov); free(x); free(lab); free(p);
    return rc;
}
