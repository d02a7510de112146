/* nn/layers/maxpool.c: [maxpool]: window size=, stride= (default: size),
 * no padding, floor mode. The forward keeps each maximum's position for the
 * backward, and folds in the backward of a ReLU before it (layer.h). A 2x2
 * stride-2 pool after a linear layer that can pool its own output (a
 * Winograd conv on a CPU) is done by that layer's forward (ct_layer.pool_next,
 * .pooled), and its backward by that layer's too where it can read this
 * one's gradient (.dy_pooled).
 * Kernels: kernels/pool.cl (maxpool_fwd/bwd). Reference: src/ref/pool.c;
 * tests: tests/test_layers.c. */
#include "cltrain/layer.h"
#include <string.h>

static const ct_key keys[] = {CT_KEY(size, CT_KEY_INT, 1, 64), CT_KEY(stride, CT_KEY_INT, 1, 64)};

static const char *const kernels[] = {"maxpool_fwd", "maxpool_bwd"};
enum { FWD, BWD };
static int build(ct_model *m, void **kind) { return ct_kernels_build(m, kind, "pool.cl", kernels, 2); }

static int shape(ct_model *m, ct_layer *L, const ct_sect *s) {
    (void)m;
    if (!CT_HAS(s, 0)) return ct_fail(CT_EINPUT, "%s:%d: [maxpool] needs size=", s->file, s->line);
    L->k = s->size;
    L->stride = CT_HAS(s, 1) ? s->stride : s->size;
    if (L->ih < L->k || L->iw < L->k)
        return ct_fail(CT_EINPUT, "%s:%d: [maxpool] size=%d does not fit its %dx%d input", s->file, s->line, L->k, L->ih, L->iw);
    L->oh = (L->ih - L->k) / L->stride + 1;
    L->ow = (L->iw - L->k) / L->stride + 1;
    L->oc = L->ic;
    return 0;
}

/* The window positions of the maxima (own[0]); and when the input is a ReLU's output
 * that only this layer reads, the ReLU's backward is folded into this one's */
static int setup(ct_model *m, ct_layer *L, int batch, ct_needs *n) {
    (void)n;
    int i = (int)(L - m->layers), alone = i > 0 && ct_next_reads_alone(m, i - 1);
    if (i > 0) m->layers[i - 1].relu_next = alone && m->layers[i - 1].act == CT_ACT_RELU;
    if (i > 0) /* a producer that can pool its own output (conv_winograd.c's wino_fused) may do this forward */
        m->layers[i - 1].pool_next = alone && m->layers[i - 1].act == CT_ACT_LINEAR && L->k == 2 && L->stride == 2;
    char what[64];
    snprintf(what, sizeof what, "layer %d maxima positions", i);
    return ct_cl_alloc(m->cl, &L->own[0], ct_out_size(L) * batch * sizeof(cl_ushort), what);
}

/* whether layer i's input is a ReLU's output whose backward this layer does */
static int relu_in(const ct_model *m, int i) { return i > 0 && m->layers[i - 1].relu_next; }

static void forward(ct_model *m, int i, cl_mem x, int B) {
    ct_layer *L = &m->layers[i];
    if (m->whole_pass && i > 0 && m->layers[i - 1].pooled) return; /* the layer before wrote out and own[0] */
    cl_kernel k = ct_layer_kernel(m, L, FWD);
    ct_kargs(k, L->out, L->own[0], x, L->ih, L->iw, L->ic, L->k, L->stride, L->oh, L->ow, relu_in(m, i));
    size_t gws = (size_t)B * L->oh * L->ow;
    ct_cl_run(m->cl, k, "maxpool_fwd", 1, &gws, NULL);
}

static void backward(ct_model *m, int i, cl_mem x, cl_mem dy, int B) {
    (void)x;
    ct_layer *L = &m->layers[i];
    if (!L->dx || m->layers[i - 1].dy_pooled) return; /* (the layer before reads dy and own[0] itself) */
    cl_kernel k = ct_layer_kernel(m, L, BWD);
    ct_kargs(k, L->dx, dy, L->own[0], L->ih, L->iw, L->ic, L->k, L->stride, L->oh, L->ow);
    size_t gws = (size_t)B * L->ih * L->iw;
    ct_cl_run(m->cl, k, "maxpool_bwd", 1, &gws, NULL);
}

static int onnx(ct_onnx_graph *g, const ct_model *m, int i, const float *p, char *x, int *rank4) {
    (void)p;
    const ct_layer *L = &m->layers[i];
    char y[CT_ONNX_NAME];
    ct_onnx_to_4d(g, L->ic, L->ih, L->iw, x, rank4);
    ct_onnx_fresh(g, y, "maxpool");
    ct_onnx_begin(g, "MaxPool", (const char *const[]){x}, 1, y);
    ct_onnx_attr_ints(g, "kernel_shape", (const int64_t[]){L->k, L->k}, 2);
    ct_onnx_attr_ints(g, "strides", (const int64_t[]){L->stride, L->stride}, 2);
    ct_onnx_end(g);
    memcpy(x, y, CT_ONNX_NAME);
    return 0;
}

/* MaxPool: a square window, one stride, inside the input, floor mode */
static int import(ct_onnx_imp *im, const ct_onnx_node *nd) {
    if (strcmp(nd->op, "MaxPool")) return 1;
    const ct_onnx_act *x;
    int64_t k[2], st[2];
    int rc = ct_onnx_newest(im, nd, &x);
    if (rc) return rc;
    if (x->rank != 4) return ct_onnx_fail(im, nd, "its input is not [N, C, H, W]");
    if ((rc = ct_onnx_pool_window(im, nd, k, st))) return rc;
    if (k[0] != k[1] || st[0] != st[1] || k[0] < 1 || k[0] > 64 || st[0] < 1 || st[0] > 64 || k[0] > x->h || k[0] > x->w)
        return ct_onnx_fail(im, nd, "window %lldx%lld, strides %lld,%lld over %dx%d; cltrain's are square with one stride (1..64) inside the input",
                            (long long)k[0], (long long)k[1], (long long)st[0], (long long)st[1], x->h, x->w);
    if (ct_onnx_node_int(nd, "ceil_mode", 0) && ((x->h - k[0]) % st[0] || (x->w - k[0]) % st[0]))
        return ct_onnx_fail(im, nd, "ceil_mode=1 where it adds a partial window; cltrain pools in floor mode");
    if (nd->n_out > 1 && nd->out[1][0]) return ct_onnx_fail(im, nd, "its indices output is used");
    ct_onnx_act y = {.rank = 4, .c = x->c, .h = (int)((x->h - k[0]) / st[0] + 1), .w = (int)((x->w - k[0]) / st[0] + 1), .step = 1};
    return ct_onnx_layer_add(im, nd, CT_L_MAXPOOL, y, "[maxpool]\nsize=%d\nstride=%d\n", (int)k[0], (int)st[0]) ? 0 : CT_EINPUT;
}

const ct_layer_ops ct_layer_maxpool = {
    .type = CT_L_MAXPOOL, .name = "maxpool", .keys = keys, .n_keys = sizeof keys / sizeof *keys,
    .build = build, .release = ct_kernels_release, .shape = shape, .setup = setup, .forward = forward, .backward = backward,
    .onnx = onnx, .import = import, .onnx_ops = "MaxPool",
};
