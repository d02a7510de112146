/* nn/layers/avgpool.c: [avgpool]: global average pooling, one value per
 * channel; it takes no keys (a window size= is refused, not ignored).
 * Kernels: kernels/pool.cl (avgpool_fwd/bwd). Reference: src/ref/pool.c;
 * tests: tests/test_dropout.c. */
#include "cltrain/layer.h"
#include <string.h>

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

/* AveragePool over the whole input, GlobalAveragePool, ReduceMean over H and
 * W (keepdims=0: the output is [N, C]) */
static int import(ct_onnx_imp *im, const ct_onnx_node *nd) {
    int avg = !strcmp(nd->op, "AveragePool"), mean = !strcmp(nd->op, "ReduceMean");
    if (!avg && !mean && strcmp(nd->op, "GlobalAveragePool")) return 1;
    const ct_onnx_act *x;
    int rc = ct_onnx_newest(im, nd, &x), keep = 1;
    if (rc) return rc;
    if (mean) {
        int64_t axes[8];
        int na = ct_onnx_node_ints(nd, "axes", axes, 8);
        const ct_onnx_tensor *ta = ct_onnx_const_in(im, nd, 1);
        if (ta && ta->v && ta->n <= 8) {
            na = (int)ta->n;
            for (int i = 0; i < na; i++) axes[i] = ta->v[i] != ta->v[i] ? 0 : (int64_t)(ta->v[i] > 8 ? 8 : ta->v[i] < -8 ? -8 : ta->v[i]);
        }
        int hw = na == 2 && x->rank == 4;
        for (int i = 0; i < na && hw; i++) hw = axes[i] == 2 || axes[i] == 3 || axes[i] == -1 || axes[i] == -2;
        if (!hw || (axes[0] % 4 + 4) % 4 == (axes[1] % 4 + 4) % 4)
            return ct_onnx_fail(im, nd, "a mean over axes other than H and W; cltrain averages each channel over the whole image");
        keep = (int)ct_onnx_node_int(nd, "keepdims", 1);
    }
    if (x->rank != 4) return ct_onnx_fail(im, nd, "its input is not [N, C, H, W]");
    if (avg) {
        int64_t k[2], st[2];
        if ((rc = ct_onnx_pool_window(im, nd, k, st))) return rc;
        if (k[0] != x->h || k[1] != x->w)
            return ct_onnx_fail(im, nd, "a %lldx%lld average over a %dx%d input; cltrain averages whole inputs only (global average pooling)",
                                (long long)k[0], (long long)k[1], x->h, x->w);
    }
    ct_onnx_act y = {.rank = keep ? 4 : 2, .c = x->c, .h = 1, .w = 1, .step = 1};
    return ct_onnx_layer_add(im, nd, CT_L_AVGPOOL, y, "[avgpool]\n") ? 0 : CT_EINPUT;
}

const ct_layer_ops ct_layer_avgpool = {
    .type = CT_L_AVGPOOL, .name = "avgpool", .keys = NULL, .n_keys = 0,
    .build = build, .release = ct_kernels_release, .shape = shape, .forward = forward, .backward = backward,
    .onnx = onnx, .import = import, .onnx_ops = "AveragePool (over the whole input), GlobalAveragePool, ReduceMean over H and W",
};
