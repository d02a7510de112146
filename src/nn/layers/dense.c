/* nn/layers/dense.c: [dense] (alias [connected]): y = act(x W + b) as one
 * GEMM with bias and ReLU fused; weights [in_size, outputs], bias [outputs].
 * Reference: ref_gemm (src/ref/gemm.c); tests: tests/test_layers.c. */
#include "cltrain/layer.h"
#include <string.h>

static const ct_key keys[] = {CT_KEY(outputs, CT_KEY_INT, 1, 1 << 24), CT_KEY_ACTIVATION};

static int shape(ct_model *m, ct_layer *L, const ct_sect *s) {
    (void)m;
    if (!CT_HAS(s, 0)) return ct_fail(CT_EINPUT, "%s:%d: [dense] needs outputs=", s->file, s->line);
    L->oh = L->ow = 1;
    L->oc = s->outputs;
    L->n_w = ct_in_size(L) * L->oc;
    L->n_b = (size_t)L->oc;
    return 0;
}

static double flops(const ct_layer *L) { return 2.0 * (double)L->n_w; }

static int setup(ct_model *m, ct_layer *L, int batch, ct_needs *n) {
    (void)n;
    return ct_layer_reserve_gemm(m, batch, L->oc, (int)ct_in_size(L));
}

static void forward(ct_model *m, int i, cl_mem x, int B) {
    ct_layer *L = &m->layers[i];
    int K = (int)ct_in_size(L);
    ct_layer_gemm_forward(m, L, x, B, K, 0.0f, L->out, ct_fused_act(m, L));
}

/* db += 1^T dy ; dW += x^T dy ; dx = dy W^T */
static void backward(ct_model *m, int i, cl_mem x, cl_mem dy, int B) {
    ct_layer *L = &m->layers[i];
    int K = (int)ct_in_size(L);
    ct_layer_bias_grad(m, dy, 0, B, L->oc, L->b_off);
    ct_layer_gemm_dw(m, L, x, dy, B, K);
    if (L->dx) ct_layer_gemm_dx(m, L, dy, B, K, 0.0f, L->dx);
}

/* Gemm: y = x W + b. The weights' rows are in cltrain's (h, w, c) order;
 * ONNX flattens NCHW, so after a spatial tensor they go to (c, h, w) order. */
static int onnx(ct_onnx_graph *g, const ct_model *m, int i, const float *p, char *x, int *rank4) {
    const ct_layer *L = &m->layers[i];
    int H = L->ih, W = L->iw, C = L->ic, O = L->oc;
    char y[CT_ONNX_NAME], wn[CT_ONNX_NAME], bn[CT_ONNX_NAME];
    if (*rank4) {
        ct_onnx_fresh(g, y, "flatten");
        ct_onnx_begin(g, "Flatten", (const char *const[]){x}, 1, y);
        ct_onnx_attr_int(g, "axis", 1);
        ct_onnx_end(g);
        memcpy(x, y, CT_ONNX_NAME);
        *rank4 = 0;
    }
    float *w = ct_xmalloc(L->n_w * sizeof *w);
    for (int h = 0; h < H; h++)
        for (int xx = 0; xx < W; xx++)
            for (int c = 0; c < C; c++)
                memcpy(w + (((size_t)c * H + h) * W + xx) * O, p + L->w_off + (((size_t)h * W + xx) * C + c) * O,
                       (size_t)O * sizeof *w);
    ct_onnx_fresh(g, wn, "W");
    ct_onnx_fresh(g, bn, "B");
    ct_onnx_fresh(g, y, "gemm");
    int64_t wd[2] = {(int64_t)H * W * C, O}, bd[1] = {O};
    ct_onnx_init_f32(g, wn, wd, 2, w, L->n_w);
    ct_onnx_init_f32(g, bn, bd, 1, p + L->b_off, L->n_b);
    free(w);
    ct_onnx_begin(g, "Gemm", (const char *const[]){x, wn, bn}, 3, y);
    ct_onnx_end(g);
    memcpy(x, y, CT_ONNX_NAME);
    ct_onnx_activation(g, L->act, x);
    return 0;
}

const ct_layer_ops ct_layer_dense = {
    .type = CT_L_DENSE, .name = "dense", .alias = "connected", .keys = keys, .n_keys = sizeof keys / sizeof *keys,
    .shape = shape, .flops = flops, .setup = setup, .forward = forward, .backward = backward,
    .onnx = onnx, .init = ct_layer_init_he, .decay = ct_layer_decay_weights,
};
