/* nn/layers/conv.c: [conv] (alias [convolutional]): 2-D convolution as
 * im2col + GEMM with the bias and ReLU fused into the GEMM; weights
 * [k, k, ic, oc] (HWIO), bias [oc]. Kernels: kernels/conv.cl (im2col,
 * col2im) and the GEMM. Reference: src/ref/conv.c; tests: tests/test_layers.c. */
#include "cltrain/layer.h"

static const ct_key keys[] = {
    CT_KEY(filters, CT_KEY_INT, 1, 65536), CT_KEY(size, CT_KEY_INT, 1, 64), CT_KEY(stride, CT_KEY_INT, 1, 64),
    CT_KEY(pad, CT_KEY_INT, 0, 64), CT_KEY_ACTIVATION,
};

static int shape(ct_model *m, ct_layer *L, const ct_sect *s) {
    (void)m;
    if (!CT_HAS(s, 0) || !CT_HAS(s, 1)) return ct_fail(CT_EINPUT, "%s:%d: [conv] needs filters= and size=", s->file, s->line);
    L->k = s->size; L->stride = s->stride; L->pad = s->pad;
    if (L->ih + 2 * L->pad < L->k || L->iw + 2 * L->pad < L->k)
        return ct_fail(CT_EINPUT, "%s:%d: [conv] size=%d does not fit its %dx%d input (pad %d)", s->file, s->line, L->k,
                       L->ih, L->iw, L->pad);
    L->oh = (L->ih + 2 * L->pad - L->k) / L->stride + 1;
    L->ow = (L->iw + 2 * L->pad - L->k) / L->stride + 1;
    L->oc = s->filters;
    L->n_w = (size_t)L->k * L->k * L->ic * L->oc;
    L->n_b = (size_t)L->oc;
    return 0;
}

static double flops(const ct_layer *L) { return 2.0 * L->oh * L->ow * L->oc * L->k * L->k * L->ic; }

static int setup(ct_model *m, ct_layer *L, int batch, ct_needs *n) {
    size_t rows = (size_t)batch * L->oh * L->ow, kk = (size_t)L->k * L->k * L->ic;
    if (rows * kk > n->ws) n->ws = rows * kk;
    if (rows > n->ones) n->ones = rows;
    return ct_layer_reserve_gemm(m, (int)rows, L->oc, (int)kk);
}

static void run_im2col(ct_model *m, const ct_layer *L, cl_mem x, int B) {
    ct_kargs(m->k_im2col, m->ws, x, L->ih, L->iw, L->ic, L->k, L->k, L->stride, L->pad, L->oh, L->ow);
    size_t gws = (size_t)B * L->oh * L->ow;
    ct_cl_run(m->cl, m->k_im2col, "im2col", 1, &gws, NULL);
}

/* out[B*oh*ow, oc] = act(im2col(x) W + b) */
static void forward(ct_model *m, int i, cl_mem x, int B) {
    ct_layer *L = &m->layers[i];
    int rows = B * L->oh * L->ow, kk = L->k * L->k * L->ic;
    run_im2col(m, L, x, B);
    ct_gemm_run(&m->gemm, 0, 0, rows, L->oc, kk, 1.0f, m->ws, 0, kk, m->params, L->w_off, L->oc, 0.0f, L->out, 0,
                L->oc, m->params, L->b_off, L->act);
}

/* db += 1^T dy ; dW += col^T dy ; dcol = dy W^T ; dx = col2im(dcol) */
static void backward(ct_model *m, int i, cl_mem x, cl_mem dy, int B) {
    ct_layer *L = &m->layers[i];
    int rows = B * L->oh * L->ow, kk = L->k * L->k * L->ic;
    ct_gemm_run(&m->gemm, 1, 0, 1, L->oc, rows, 1.0f, m->ones, 0, 1, dy, 0, L->oc, 1.0f, m->grads, L->b_off, L->oc, NULL, 0, 0);
    run_im2col(m, L, x, B);
    ct_gemm_run(&m->gemm, 1, 0, kk, L->oc, rows, 1.0f, m->ws, 0, kk, dy, 0, L->oc, 1.0f, m->grads, L->w_off, L->oc, NULL, 0, 0);
    if (!L->dx) return;
    ct_gemm_run(&m->gemm, 0, 1, rows, kk, L->oc, 1.0f, dy, 0, L->oc, m->params, L->w_off, L->oc, 0.0f, m->ws, 0, kk, NULL, 0, 0);
    ct_kargs(m->k_col2im, L->dx, m->ws, L->ih, L->iw, L->ic, L->k, L->k, L->stride, L->pad, L->oh, L->ow);
    size_t gws = (size_t)B * L->ih * L->iw;
    ct_cl_run(m->cl, m->k_col2im, "col2im", 1, &gws, NULL);
}

const ct_layer_ops ct_layer_conv = {
    .type = CT_L_CONV, .name = "conv", .alias = "convolutional", .keys = keys, .n_keys = sizeof keys / sizeof *keys,
    .shape = shape, .flops = flops, .setup = setup, .forward = forward, .backward = backward,
    .init = ct_layer_init_he, .decay = ct_layer_decay_weights,
};
