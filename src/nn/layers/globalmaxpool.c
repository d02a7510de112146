/* nn/layers/globalmaxpool.c: [globalmaxpool]: global max pooling, one value
 * per channel, the largest over the input's pixels; it takes no keys. The
 * forward keeps each maximum's pixel (in own[0]) and the backward routes the
 * gradient there alone. Everything it is lives here: its kernels
 * (kernels/globalmaxpool.cl, built at its first layer), its buffer, its ONNX
 * node. Reference: src/ref/globalmaxpool.c; tests: tests/test_globalmaxpool.c. */
#include "cltrain/layer.h"
#include <string.h>

static const char *const kernels[] = {"globalmaxpool_fwd", "globalmaxpool_bwd"};
enum { FWD, BWD };
static int build(ct_model *m, void **kind) { return ct_kernels_build(m, kind, "globalmaxpool.cl", kernels, 2); }

static int shape(ct_model *m, ct_layer *L, const ct_sect *s) {
    (void)m;
    (void)s;
    L->oh = L->ow = 1;
    L->oc = L->ic;
    return 0;
}

/* own[0]: the pixel of each maximum, an int per output */
static int setup(ct_model *m, ct_layer *L, int batch, ct_needs *n) {
    (void)n;
    char what[64];
    snprintf(what, sizeof what, "layer %d maxima positions", (int)(L - m->layers));
    return ct_cl_alloc(m->cl, &L->own[0], ct_out_size(L) * batch * sizeof(cl_int), what);
}

static void forward(ct_model *m, int i, cl_mem x, int B) {
    ct_layer *L = &m->layers[i];
    cl_kernel k = ct_layer_kernel(m, L, FWD);
    int HW = L->ih * L->iw, vw = ct_channel_vw(m, L->oc);
    ct_kargs(k, L->out, L->own[0], x, HW, L->oc, B, vw);
    size_t g2[2] = {(size_t)(L->oc / vw), (size_t)B};
    ct_cl_run(m->cl, k, "globalmaxpool_fwd", 2, g2, NULL);
}

static void backward(ct_model *m, int i, cl_mem x, cl_mem dy, int B) {
    (void)x;
    ct_layer *L = &m->layers[i];
    if (!L->dx) return;
    cl_kernel k = ct_layer_kernel(m, L, BWD);
    int HW = L->ih * L->iw, n = B * HW, vw = ct_channel_vw(m, L->oc);
    ct_kargs(k, L->dx, dy, L->own[0], HW, L->oc, n, vw);
    size_t g2[2] = {(size_t)(L->oc / vw), (size_t)n};
    ct_cl_run(m->cl, k, "globalmaxpool_bwd", 2, g2, NULL);
}

static int onnx(ct_onnx_graph *g, const ct_model *m, int i, const float *p, char *x, int *rank4) {
    (void)p;
    const ct_layer *L = &m->layers[i];
    ct_onnx_to_4d(g, L->ic, L->ih, L->iw, x, rank4);
    ct_onnx_apply(g, "GlobalMaxPool", "globalmaxpool", x);
    return 0;
}

/* GlobalMaxPool: the activations after it see [N, C, 1, 1] */
static int import(ct_onnx_imp *im, const ct_onnx_node *nd) {
    if (strcmp(nd->op, "GlobalMaxPool")) return 1;
    const ct_onnx_act *x;
    int rc = ct_onnx_newest(im, nd, &x);
    if (rc) return rc;
    if (x->rank != 4) return ct_onnx_fail(im, nd, "its input is not [N, C, H, W]");
    ct_onnx_act y = {.rank = 4, .c = x->c, .h = 1, .w = 1, .step = 1};
    return ct_onnx_layer_add(im, nd, CT_L_GLOBALMAXPOOL, y, "[globalmaxpool]\n") ? 0 : CT_EINPUT;
}

const ct_layer_ops ct_layer_globalmaxpool = {
    .type = CT_L_GLOBALMAXPOOL, .name = "globalmaxpool", .keys = NULL, .n_keys = 0,
    .build = build, .release = ct_kernels_release, .shape = shape, .setup = setup, .forward = forward, .backward = backward,
    .onnx = onnx, .import = import, .onnx_ops = "GlobalMaxPool",
};
