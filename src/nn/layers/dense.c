/* nn/layers/dense.c: [dense] (alias [connected]): y = act(x W + b) as one
 * GEMM with bias and ReLU fused; weights [in_size, outputs], bias [outputs].
 * Reference: ref_gemm (src/ref/gemm.c); tests: tests/test_layers.c. */
#include "cltrain/layer.h"

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
    ct_gemm_run(&m->gemm, 0, 0, B, L->oc, K, 1.0f, x, 0, K, m->params, L->w_off, L->oc, 0.0f, L->out, 0, L->oc,
                m->params, L->b_off, ct_fused_act(m, L));
}

/* db += 1^T dy ; dW += x^T dy ; dx = dy W^T */
static void backward(ct_model *m, int i, cl_mem x, cl_mem dy, int B) {
    ct_layer *L = &m->layers[i];
    int K = (int)ct_in_size(L);
    ct_gemm_run(&m->gemm, 1, 0, 1, L->oc, B, 1.0f, m->ones, 0, 1, dy, 0, L->oc, 1.0f, m->grads, L->b_off, L->oc, NULL, 0, 0);
    ct_gemm_run(&m->gemm, 1, 0, K, L->oc, B, 1.0f, x, 0, K, dy, 0, L->oc, 1.0f, m->grads, L->w_off, L->oc, NULL, 0, 0);
    if (L->dx)
        ct_gemm_run(&m->gemm, 0, 1, B, K, L->oc, 1.0f, dy, 0, L->oc, m->params, L->w_off, L->oc, 0.0f, L->dx, 0, K, NULL, 0, 0);
}

const ct_layer_ops ct_layer_dense = {
    .type = CT_L_DENSE, .name = "dense", .alias = "connected", .keys = keys, .n_keys = sizeof keys / sizeof *keys,
    .shape = shape, .flops = flops, .setup = setup, .forward = forward, .backward = backward,
    .init = ct_layer_init_he, .decay = ct_layer_decay_weights,
};
