/* nn/layers/avgpool.c: [avgpool]: global average pooling, one value per
 * channel; it takes no keys (a window size= is refused, not ignored).
 * Kernels: kernels/pool.cl (avgpool_fwd/bwd). Reference: src/ref/pool.c;
 * tests: tests/test_dropout.c. */
#include "cltrain/layer.h"

static const char *const kernels[] = {"avgpool_fwd", "avgpool_bwd"};
enum { FWD, BWD };
static int build(ct_model *m, void **kind) { return ct_kernels_build(m, kind, "pool.cl", kernels, 2); }

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
    cl_kernel k = ct_layer_kernel(m, L, FWD);
    ct_kargs(k, L->out, x, HW, L->oc, B);
    size_t g2[2] = {(size_t)L->oc, (size_t)B};
    ct_cl_run(m->cl, k, "avgpool_fwd", 2, g2, NULL);
}

static void backward(ct_model *m, int i, cl_mem x, cl_mem dy, int B) {
    (void)x;
    ct_layer *L = &m->layers[i];
    if (!L->dx) return;
    int HW = L->ih * L->iw, n = B * HW;
    cl_kernel k = ct_layer_kernel(m, L, BWD);
    ct_kargs(k, L->dx, dy, HW, L->oc, n);
    size_t g2[2] = {(size_t)L->oc, (size_t)n};
    ct_cl_run(m->cl, k, "avgpool_bwd", 2, g2, NULL);
}

static int onnx(ct_onnx_graph *g, const ct_model *m, int i, const float *p, char *x, int *rank4) {
    (void)p;
    const ct_layer *L = &m->layers[i];
    ct_onnx_to_4d(g, L->ic, L->ih, L->iw, x, rank4);
    ct_onnx_apply(g, "GlobalAveragePool", "avgpool", x);
    return 0;
}

const ct_layer_ops ct_layer_avgpool = {
    .type = CT_L_AVGPOOL, .name = "avgpool", .keys = NULL, .n_keys = 0,
    .build = build, .release = ct_kernels_release, .shape = shape, .forward = forward, .backward = backward,
    .onnx = onnx,
};
