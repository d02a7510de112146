/* nn/layers/dense.c: [dense] (alias [connected]): y = act(s x W + b) as one
 * GEMM with bias and activation fused; weights [in_size, outputs], bias
 * [outputs] (none with bias=0); s = scale= (1), the GEMM's alpha.
 * Reference: ref_gemm (src/ref/gemm.c); tests: tests/test_layers.c. */
#include "cltrain/layer.h"
#include <stdlib.h>
#include <string.h>

static const ct_key keys[] = {
    CT_KEY(outputs, CT_KEY_INT, 1, 1 << 24), CT_KEY_ACTIVATION, CT_KEY(bias, CT_KEY_INT, 0, 1),
    CT_KEY_NAMES(init, ct_init_names), CT_KEY(lr, CT_KEY_FLOAT, 0, 1000000), CT_KEY(bias_lr, CT_KEY_FLOAT, 0, 1000000),
    CT_KEY(bias_decay, CT_KEY_INT, 0, 1), CT_KEY(scale, CT_KEY_FLOAT, -1000000, 1000000),
};
enum { K_INIT = 3, K_BIAS_LR = 5, K_BIAS_DECAY };

static int shape(ct_model *m, ct_layer *L, const ct_sect *s) {
    (void)m;
    if (!CT_HAS(s, 0)) return ct_fail(CT_EINPUT, "%s:%d: [dense] needs outputs=", s->file, s->line);
    if (s->init == CT_INIT_DIRAC)
        return ct_fail(CT_EINPUT, "%s:%d: [dense] init=dirac: Dirac is for convolutions; use he or uniform", s->file, s->line);
    if (!s->bias && (CT_HAS(s, K_BIAS_LR) || CT_HAS(s, K_BIAS_DECAY)))
        return ct_fail(CT_EINPUT, "%s:%d: [dense] %s= with bias=0: there is no bias; leave out one of them", s->file, s->line,
                       CT_HAS(s, K_BIAS_LR) ? "bias_lr" : "bias_decay");
    if (!(s->scale != 0)) return ct_fail(CT_EINPUT, "%s:%d: [dense] scale=0 would output zeros", s->file, s->line);
    L->oh = L->ow = 1;
    L->oc = s->outputs;
    L->n_w = ct_in_size(L) * L->oc;
    L->n_b = s->bias ? (size_t)L->oc : 0;
    L->init = s->init;
    L->scale = s->scale;
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
    if (L->n_b) ct_layer_bias_grad(m, dy, 0, B, L->oc, L->b_off);
    ct_layer_gemm_dw(m, L, x, dy, B, K);
    if (L->dx) ct_layer_gemm_dx(m, L, dy, B, K, 0.0f, L->dx);
}

/* Gemm: y = scale x W + b (alpha; a zero bias when it has none). The weights' rows are in cltrain's (h, w, c) order;
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
    float *zero = L->n_b ? NULL : ct_xcalloc((size_t)O, sizeof *zero);
    ct_onnx_init_f32(g, bn, bd, 1, L->n_b ? p + L->b_off : zero, (size_t)O);
    free(w);
    free(zero);
    ct_onnx_begin(g, "Gemm", (const char *const[]){x, wn, bn}, 3, y);
    if (L->scale != 1.0f) ct_onnx_attr_float(g, "alpha", L->scale);
    ct_onnx_end(g);
    memcpy(x, y, CT_ONNX_NAME);
    ct_onnx_activation(g, L->act, x);
    return 0;
}

/* A dense layer from x [N, K] (flattened from (c, h, w)) and ONNX's weights w
 * ([K][O], or [O][K] when trans) with bias (NULL: zeros): its rows go to
 * cltrain's (h, w, c) order */
static int import_dense(ct_onnx_imp *im, const ct_onnx_node *nd, const ct_onnx_act *x, const float *w, int64_t K, int64_t O,
                        int trans, const float *bias) {
    if (x->rank != 2) return ct_onnx_fail(im, nd, "its input is [N, C, H, W]; flatten it first");
    if (K != (int64_t)x->c * x->h * x->w)
        return ct_onnx_fail(im, nd, "weights for %lld inputs, its input has %d", (long long)K, x->c * x->h * x->w);
    int H = x->h, W = x->w, C = x->c;
    ct_onnx_layer *L = ct_onnx_layer_add(im, nd, CT_L_DENSE, (ct_onnx_act){.rank = 2, .c = (int)O, .h = 1, .w = 1, .step = 1},
                                         "[dense]\noutputs=%d\n", (int)O);
    if (!L) return CT_EINPUT;
    L->n_w = (size_t)(K * O), L->n_b = (size_t)O;
    L->w = ct_xmalloc(L->n_w * sizeof(float) + 1);
    for (int h = 0; h < H; h++)
        for (int xx = 0; xx < W; xx++)
            for (int c = 0; c < C; c++) {
                int64_t k = ((int64_t)c * H + h) * W + xx, to = ((int64_t)h * W + xx) * C + c;
                for (int64_t o = 0; o < O; o++) L->w[to * O + o] = trans ? w[o * K + k] : w[k * O + o];
            }
    L->b = ct_xcalloc((size_t)O, sizeof(float));
    if (bias) memcpy(L->b, bias, (size_t)O * sizeof(float));
    return 0;
}

/* Gemm: B (transB) and C constants, alpha and beta folded in */
static int import_gemm(ct_onnx_imp *im, const ct_onnx_node *nd, const ct_onnx_act *x) {
    const ct_onnx_tensor *W = ct_onnx_const_in(im, nd, 1), *C = ct_onnx_const_in(im, nd, 2);
    if (!W || !W->f || W->ndim != 2) return ct_onnx_fail(im, nd, "its B is not a constant 2-D float tensor");
    if (ct_onnx_node_int(nd, "transA", 0)) return ct_onnx_fail(im, nd, "transA=1");
    const ct_onnx_attr *al = ct_onnx_node_attr(nd, "alpha"), *be = ct_onnx_node_attr(nd, "beta");
    int tb = (int)ct_onnx_node_int(nd, "transB", 0);
    int64_t K = tb ? W->dims[1] : W->dims[0], O = tb ? W->dims[0] : W->dims[1];
    if (O < 1 || O > (1 << 24)) return ct_onnx_fail(im, nd, "%lld outputs", (long long)O);
    if (C && (!C->f || (C->n != O && C->n != 1))) return ct_onnx_fail(im, nd, "its C is not a constant of %lld floats", (long long)O);
    if (nd->n_in > 2 && nd->in[2][0] && !C) return ct_onnx_fail(im, nd, "its C is not a constant");
    float *bias = ct_xcalloc((size_t)O, sizeof(float));
    for (int64_t o = 0; C && o < O; o++) bias[o] = C->f[C->n == 1 ? 0 : o] * (be ? be->f : 1.0f);
    float *w = ct_onnx_floats(W);
    if (al) for (int64_t i = 0; i < W->n; i++) w[i] *= al->f;
    int rc = import_dense(im, nd, x, w, K, O, tb, bias);
    free(w);
    free(bias);
    return rc;
}

/* Add of a constant: the bias of the MatMul just before (L->open) */
static int import_bias(ct_onnx_imp *im, const ct_onnx_node *nd, const ct_onnx_act *x, const ct_onnx_tensor *c) {
    ct_onnx_layer *L = im->n_layers ? &im->layers[im->n_layers - 1] : NULL;
    if (!L || x->layer != im->n_layers - 1 || L->type != CT_L_DENSE || !L->open || !c->f || c->n != L->oc)
        return ct_onnx_fail(im, nd, "adds a constant; cltrain takes that only as the bias right after a MatMul");
    memcpy(L->b, c->f, (size_t)L->oc * sizeof(float));
    L->open = 0;
    ct_onnx_set_act(im, nd->out[0], *x);
    return 0;
}

/* Gemm; MatMul, whose bias an Add of a constant right after gives */
static int import(ct_onnx_imp *im, const ct_onnx_node *nd) {
    const ct_onnx_act *x;
    int rc;
    if (!strcmp(nd->op, "Add")) {
        const ct_onnx_act *a = ct_onnx_act_in(im, nd, 0), *b = ct_onnx_act_in(im, nd, 1);
        const ct_onnx_tensor *c = ct_onnx_const_in(im, nd, a ? 1 : 0);
        return (a || b) && c ? import_bias(im, nd, a ? a : b, c) : 1;
    }
    if (strcmp(nd->op, "Gemm") && strcmp(nd->op, "MatMul")) return 1;
    if ((rc = ct_onnx_newest(im, nd, &x))) return rc;
    if (!strcmp(nd->op, "Gemm")) return import_gemm(im, nd, x);
    const ct_onnx_tensor *W = ct_onnx_const_in(im, nd, 1);
    if (!W || !W->f || W->ndim != 2) return ct_onnx_fail(im, nd, "its second input is not a constant 2-D float tensor");
    rc = import_dense(im, nd, x, W->f, W->dims[0], W->dims[1], 0, NULL);
    if (!rc) im->layers[im->n_layers - 1].open = 1;
    return rc;
}

const ct_layer_ops ct_layer_dense = {
    .type = CT_L_DENSE, .name = "dense", .alias = "connected", .keys = keys, .n_keys = sizeof keys / sizeof *keys,
    .shape = shape, .flops = flops, .setup = setup, .forward = forward, .backward = backward,
    .onnx = onnx, .import = import, .onnx_ops = "Gemm or MatMul+Add after Flatten/Reshape/Squeeze", .logits = "outputs",
    .init = ct_layer_init_weights, .decay = ct_layer_decay_weights,
};
