/* nn/layers/avgpool.c: [avgpool]: global average pooling, one value per
 * channel; it takes no keys (a window size= is refused, not ignored).
 * Kernels: kernels/pool.cl (avgpool_fwd/bwd). Reference: src/ref/pool.c;
 * tests: tests/test_dropout.c. */
#include "cltrain/layer.h"

static int shape(ct_model *m, ct_layer *L, const ct_sect *s) {
    (void)m;
    (void)s;
    L->oh = L->ow = 1;
    L->oc = L->ic;
    return 0;
}

static void forward(ct_model *m, int i, cl_mem x, int B) {
    ct_layer *L = &m->layers[i];
    int HW = L->ih * L->iw;
    ct_kargs(m->k_avg_fwd, L->out, x, HW, L->oc, B);
    size_t g2[2] = {(size_t)L->oc, (size_t)B};
    ct_cl_run(m->cl, m->k_avg_fwd, "avgpool_fwd", 2, g2, NULL);
}

static void backward(ct_model *m, int i, cl_mem x, cl_mem dy, int B) {
    (void)x;
    ct_layer *L = &m->layers[i];
    if (!L->dx) return;
    int HW = L->ih * L->iw, n = B * HW;
    ct_kargs(m->k_avg_bwd, L->dx, dy, HW, L->oc, n);
    size_t g2[2] = {(size_t)L->oc, (size_t)n};
    ct_cl_run(m->cl, m->k_avg_bwd, "avgpool_bwd", 2, g2, NULL);
}

const ct_layer_ops ct_layer_avgpool = {
    .type = CT_L_AVGPOOL, .name = "avgpool", .keys = NULL, .n_keys = 0,
    .shape = shape, .forward = forward, .backward = backward,
};
