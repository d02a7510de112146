/* nn/layers/conv.c: [conv] (alias [convolutional]): 2-D convolution as
 * im2col + GEMM with the bias and activation fused into the GEMM; weights
 * [k, k, ic, oc] (HWIO), bias [oc]. A 3x3 stride-1 convolution chosen by
 * --conv (ct_conv_wino_tile) runs as Winograd F(2x2, 3x3) or F(4x4, 3x3)
 * instead: transforms in kernels/winograd.cl around 16 or 36 GEMMs (one
 * batched launch), forward and both gradients. On a CPU the others (first
 * layers, strided and non-3x3 ones; outputs in 16s: ct_conv_rule) run as
 * kernels/conv_direct.cl, without im2col's columns: the forward, the weight
 * gradient and, with input channels in 16s, the data gradient.
 * Kernels: kernels/conv.cl (im2col, col2im) and the GEMM here;
 * Winograd in conv_winograd.c, the direct kernel in conv_direct.c. Reference: src/ref/conv.c; tests: tests/test_layers.c. */
#include "conv_kind.h"
#include <stdlib.h>
#include <string.h>

static const ct_key keys[] = {
    CT_KEY(filters, CT_KEY_INT, 1, 65536), CT_KEY(size, CT_KEY_INT, 1, 64), CT_KEY(stride, CT_KEY_INT, 1, 64),
    CT_KEY(pad, CT_KEY_INT, 0, 64), CT_KEY_ACTIVATION, CT_KEY(bias, CT_KEY_INT, 0, 1), CT_KEY_NAMES(init, ct_init_names),
    CT_KEY(lr, CT_KEY_FLOAT, 0, 1000000), CT_KEY(bias_lr, CT_KEY_FLOAT, 0, 1000000), CT_KEY(bias_decay, CT_KEY_INT, 0, 1),
    CT_KEY(bias_epochs, CT_KEY_INT, 0, 1000000), CT_KEY(whiten, CT_KEY_INT, 0, 1 << 30),
};
enum { K_INIT = 6, K_LR, K_BIAS_LR, K_BIAS_DECAY, K_BIAS_EPOCHS, K_WHITEN };

/* the keys a layer without a bias cannot take, and whiten='s demands (ct_whiten) */
static int check_keys(const ct_model *m, const ct_layer *L, const ct_sect *s) {
    static const int bias_keys[] = {K_BIAS_LR, K_BIAS_DECAY, K_BIAS_EPOCHS};
    for (int j = 0; j < 3 && !s->bias; j++)
        if (CT_HAS(s, bias_keys[j]))
            return ct_fail(CT_EINPUT, "%s:%d: [conv] %s= with bias=0: there is no bias; leave out one of them", s->file,
                           s->line, keys[bias_keys[j]].name);
    if (!s->whiten) return 0;
    if (L != m->layers) /* its statistics are of the images, not of an earlier layer's outputs */
        return ct_fail(CT_EINPUT, "%s:%d: [conv] whiten= must be on the first layer", s->file, s->line);
    int d = L->k * L->k * L->ic;
    if (L->oc != 2 * d)
        return ct_fail(CT_EINPUT, "%s:%d: [conv] whiten=%d needs filters=%d: the %d eigenvectors of the %dx%dx%d patches' "
                       "covariance and their negatives", s->file, s->line, s->whiten, 2 * d, d, L->k, L->k, L->ic);
    if (CT_HAS(s, K_LR) || CT_HAS(s, K_INIT))
        return ct_fail(CT_EINPUT, "%s:%d: [conv] whiten= sets and freezes the weights; leave out %s=", s->file, s->line,
                       CT_HAS(s, K_LR) ? "lr" : "init");
    return 0;
}

static int shape(ct_model *m, ct_layer *L, const ct_sect *s) {
    if (!CT_HAS(s, 0) || !CT_HAS(s, 1)) return ct_fail(CT_EINPUT, "%s:%d: [conv] needs filters= and size=", s->file, s->line);
    L->k = s->size; L->stride = s->stride; L->pad = s->pad;
    L->init = s->init;
    L->whiten = s->whiten;
    if (s->whiten) L->lr_w = 0.0f;
    if (L->ih + 2 * L->pad < L->k || L->iw + 2 * L->pad < L->k)
        return ct_fail(CT_EINPUT, "%s:%d: [conv] size=%d does not fit its %dx%d input (pad %d)", s->file, s->line, L->k,
                       L->ih, L->iw, L->pad);
    L->oh = (L->ih + 2 * L->pad - L->k) / L->stride + 1;
    L->ow = (L->iw + 2 * L->pad - L->k) / L->stride + 1;
    L->oc = s->filters;
    L->n_w = (size_t)L->k * L->k * L->ic * L->oc;
    L->n_b = s->bias ? (size_t)L->oc : 0;
    return check_keys(m, L, s);
}

static double flops(const ct_layer *L) { return 2.0 * L->oh * L->ow * L->oc * L->k * L->k * L->ic; }

/* conv.cl (im2col, col2im); winograd.cl and conv_direct.cl follow as layers need them */
static int build(ct_model *m, void **out) {
    ct_conv_kind *k = ct_xcalloc(1, sizeof *k);
    *out = k;
    int rc = ct_cl_build(m->cl, &k->p, "conv.cl", "");
    if (rc) return rc;
    k->im2col = ct_cl_kernel(k->p, "im2col");
    k->col2im = ct_cl_kernel(k->p, "col2im");
    return 0;
}

static void release_kernels(cl_kernel *ks, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (ks[i]) clReleaseKernel(ks[i]);
}

static void release(void *v) {
    ct_conv_kind *k = v;
    release_kernels((cl_kernel[]){k->im2col, k->col2im}, 2);
    if (k->p) clReleaseProgram(k->p);
    for (int i = 0; i < 2; i++) {
        struct ct_wino_kernels *w = &k->wino[i];
        release_kernels((cl_kernel[]){w->in, w->w, w->out, w->dy, w->dw, w->fused, w->dw_fused, w->w16, w->dw16,
                                      w->dy_pool, w->in_pool, w->out_pool}, 12);
        if (w->p) clReleaseProgram(w->p);
    }
    for (size_t i = 0; i < sizeof k->direct / sizeof *k->direct; i++) {
        struct ct_direct_kernels *d = &k->direct[i];
        release_kernels((cl_kernel[]){d->fwd, d->dw, d->wt, d->dx}, 4);
        if (d->p) clReleaseProgram(d->p);
    }
    free(k);
}

/* Winograd's tile side for L, or 0 (im2col): --conv, or under --conv auto the
 * tuning database's choice for this shape, else the shipped rule */
static int pick_tile(const ct_model *m, const ct_layer *L, int batch) {
    /* a device whose GEMM is the image kernel (llvmpipe: buffer loads per lane, gemm_defaults.c) gets
     * im2col + that GEMM, not the CPU's direct and fused Winograd kernels, which read buffers */
    int cpu_shapes = m->cl->is_cpu && m->gemm.def.variant != CT_GEMM_IMG;
    int rule = ct_conv_rule(m->conv_algo, L->k, L->stride, L->ic, L->oc, cpu_shapes);
    if (m->conv_algo != CT_CONV_AUTO || !ct_conv_tunable(L) || m->db_defaults) return rule;
    ct_conv_choice key = ct_conv_key(L, batch);
    const ct_conv_choice *c = ct_conv_find(&m->gemm, &key);
    if (c && c->tile == CT_TILE_DIRECT && !ct_conv_direct_fits(L->k, L->ic, L->oc)) return rule;
    return c ? c->tile : rule;
}

static int setup(ct_model *m, ct_layer *L, int batch, ct_needs *n) {
    size_t rows = (size_t)batch * L->oh * L->ow, kk = (size_t)L->k * L->k * L->ic;
    if (rows > n->ones) n->ones = rows;
    int tile = pick_tile(m, L, batch), rc;
    CT_CONV_WINO(L) = tile == CT_TILE_DIRECT ? 0 : tile;
    CT_CONV_DIRECT(L) = 0;
    if (tile == CT_TILE_DIRECT) {
        if ((rc = ct_conv_direct_setup(m, L, batch, n))) return rc;
        if (CT_CONV_DIRECT(L)) return 0;
    }
    if (CT_CONV_WINO(L)) return ct_conv_wino_setup(m, L, batch, n);
    if (rows * kk > n->ws) n->ws = rows * kk;
    size_t keep = rows * kk * sizeof(float);
    if (L->lr_w != 0.0f && n->kept + keep <= KEEP_BYTES) { /* for the weight gradient: none for frozen weights */
        char what[64];
        snprintf(what, sizeof what, "layer %d im2col columns", (int)(L - m->layers));
        if ((rc = ct_cl_alloc(m->cl, &CT_CONV_KEPT(L), keep, what))) return rc;
        n->kept += keep;
    }
    return ct_layer_reserve_gemm(m, (int)rows, L->oc, (int)kk);
}

/* im2col(x) into the kept columns (or the workspace), which it returns */
static cl_mem run_im2col(ct_model *m, const ct_layer *L, cl_mem x, int B) {
    cl_mem col = CT_CONV_KEPT(L) ? CT_CONV_KEPT(L) : m->ws;
    cl_kernel k = ct_conv_kind_of(m, L)->im2col;
    ct_kargs(k, col, x, L->ih, L->iw, L->ic, L->k, L->k, L->stride, L->pad, L->oh, L->ow);
    size_t gws = (size_t)B * L->oh * L->ow;
    ct_cl_run(m->cl, k, "im2col", 1, &gws, NULL);
    return col;
}

/* out[B*oh*ow, oc] = act(im2col(x) W + b) */
static void forward(ct_model *m, int i, cl_mem x, int B) {
    ct_layer *L = &m->layers[i];
    L->pooled = L->dy_pooled = 0; /* set by the Winograd forward where it fuses with the pool after it (pool_next) */
    if (CT_CONV_WINO(L)) {
        ct_conv_wino_forward(m, L, x, B);
        return;
    }
    if (CT_CONV_DIRECT(L)) {
        ct_conv_direct_forward(m, L, x, B);
        return;
    }
    int rows = B * L->oh * L->ow, kk = L->k * L->k * L->ic;
    cl_mem col = run_im2col(m, L, x, B);
    ct_layer_gemm_forward(m, L, col, rows, kk, 0.0f, L->out, ct_fused_act(m, L));
}

/* db += 1^T dy ; dW += col^T dy (or the direct kernel's sums) ; dcol = dy W^T ; dx = col2im(dcol).
 * x is the input of the last forward. */
static void backward(ct_model *m, int i, cl_mem x, cl_mem dy, int B) {
    ct_layer *L = &m->layers[i];
    int rows = B * L->oh * L->ow, kk = L->k * L->k * L->ic;
    if (CT_CONV_WINO(L)) { /* the bias gradient from wino_dy's tile sums */
        ct_conv_wino_backward(m, L, x, dy, B);
        return;
    }
    if (CT_CONV_DIRECT(L)) {
        ct_conv_direct_weight_grad(m, L, x, dy, B);
    } else {
        if (L->n_b) ct_layer_bias_grad(m, dy, 0, rows, L->oc, L->b_off);
        if (L->lr_w != 0.0f) { /* frozen weights (whiten=) get no gradient: cifar-fast's first layer, 14 ms a step at batch 1024 */
            cl_mem col = CT_CONV_KEPT(L) ? CT_CONV_KEPT(L) : run_im2col(m, L, x, B); /* kept: the last forward's */
            ct_layer_gemm_dw(m, L, col, dy, rows, kk);
        }
    }
    if (!L->dx) return;
    if (CT_CONV_DIRECT(L) && ct_conv_direct_dx(m, L)) {
        ct_conv_direct_data_grad(m, L, dy, B);
        return;
    }
    ct_layer_gemm_dx(m, L, dy, rows, kk, 0.0f, m->ws);
    cl_kernel k = ct_conv_kind_of(m, L)->col2im;
    ct_kargs(k, L->dx, m->ws, L->ih, L->iw, L->ic, L->k, L->k, L->stride, L->pad, L->oh, L->ow);
    size_t gws = (size_t)B * L->ih * L->iw;
    ct_cl_run(m->cl, k, "col2im", 1, &gws, NULL);
}

static int onnx(ct_onnx_graph *g, const ct_model *m, int i, const float *p, char *x, int *rank4) {
    (void)m;
    const ct_layer *L = &m->layers[i];
    ct_onnx_to_4d(g, L->ic, L->ih, L->iw, x, rank4);
    float *zero = L->n_b ? NULL : ct_xcalloc((size_t)L->oc, sizeof *zero); /* ONNX's Conv with a zero bias */
    ct_onnx_conv(g, x, p + L->w_off, L->n_b ? p + L->b_off : zero, L->k, L->ic, L->oc, L->stride, L->pad);
    free(zero);
    ct_onnx_activation(g, L->act, x);
    return 0;
}

/* Conv: square kernels, one stride, equal padding, no groups or dilation;
 * weights OIHW -> HWIO */
static int import(ct_onnx_imp *im, const ct_onnx_node *nd) {
    if (strcmp(nd->op, "Conv")) return 1;
    const ct_onnx_act *x;
    int rc = ct_onnx_newest(im, nd, &x);
    if (rc) return rc;
    const ct_onnx_tensor *W = ct_onnx_const_in(im, nd, 1), *B = ct_onnx_const_in(im, nd, 2);
    if (!W || !W->f || W->ndim != 4) return ct_onnx_fail(im, nd, "its weights are not a constant 4-D float tensor");
    if (nd->n_in > 2 && nd->in[2][0] && (!B || !B->f || B->n != W->dims[0]))
        return ct_onnx_fail(im, nd, "its bias is not a constant of %lld floats", (long long)W->dims[0]);
    if (x->rank != 4) return ct_onnx_fail(im, nd, "its input is not [N, C, H, W]");
    int64_t O = W->dims[0], I = W->dims[1], kh = W->dims[2], kw = W->dims[3], st[4] = {1, 1}, pd[8] = {0}, dl[4] = {1, 1};
    int ns = ct_onnx_node_ints(nd, "strides", st, 4), np = ct_onnx_node_ints(nd, "pads", pd, 8);
    int ndl = ct_onnx_node_ints(nd, "dilations", dl, 4);
    const ct_onnx_attr *ap = ct_onnx_node_attr(nd, "auto_pad");
    if (ct_onnx_node_int(nd, "group", 1) != 1)
        return ct_onnx_fail(im, nd, "grouped convolution (group=%lld); cltrain convolves all channels", (long long)ct_onnx_node_int(nd, "group", 1));
    if (ap && ap->s && strcmp(ap->s, "NOTSET")) return ct_onnx_fail(im, nd, "auto_pad %s; export with explicit pads", ap->s);
    if (I != x->c) return ct_onnx_fail(im, nd, "weights for %lld input channels, its input has %d", (long long)I, x->c);
    if (kh != kw || (ns && (ns != 2 || st[0] != st[1])) || (np && (np != 4 || pd[0] != pd[1] || pd[0] != pd[2] || pd[0] != pd[3])) ||
        (ndl && (dl[0] != 1 || dl[1] != 1)))
        return ct_onnx_fail(im, nd, "kernel %lldx%lld, strides %lld,%lld, pads %lld,%lld,%lld,%lld, dilation %lld: cltrain's convolutions "
                            "are square with one stride, equal padding on every side and no dilation", (long long)kh, (long long)kw,
                            (long long)st[0], (long long)st[1], (long long)pd[0], (long long)pd[1], (long long)pd[2], (long long)pd[3],
                            (long long)dl[0]);
    if (kh < 1 || kh > 64 || st[0] < 1 || st[0] > 64 || pd[0] < 0 || pd[0] > 64 || O < 1 || O > 65536)
        return ct_onnx_fail(im, nd, "kernel %lld, stride %lld, pad %lld, %lld filters: out of cltrain's ranges (1..64, 1..64, 0..64, 1..65536)",
                            (long long)kh, (long long)st[0], (long long)pd[0], (long long)O);
    int k = (int)kh, C = x->c, oh = (int)((x->h + 2 * pd[0] - kh) / st[0] + 1), ow = (int)((x->w + 2 * pd[0] - kh) / st[0] + 1);
    if (oh < 1 || ow < 1) return ct_onnx_fail(im, nd, "its %dx%d input is smaller than the kernel", x->h, x->w);
    ct_onnx_layer *L = ct_onnx_layer_add(im, nd, CT_L_CONV, (ct_onnx_act){.rank = 4, .c = (int)O, .h = oh, .w = ow, .step = 1},
                                         "[conv]\nfilters=%d\nsize=%d\nstride=%d\npad=%d\n", (int)O, k, (int)st[0], (int)pd[0]);
    if (!L) return CT_EINPUT;
    L->n_w = (size_t)k * k * C * O, L->n_b = (size_t)O;
    L->w = ct_xmalloc(L->n_w * sizeof(float));
    for (int o = 0; o < O; o++)
        for (int c = 0; c < C; c++)
            for (int ky = 0; ky < k; ky++)
                for (int kx = 0; kx < k; kx++)
                    L->w[(((size_t)ky * k + kx) * C + c) * O + o] = W->f[(((size_t)o * C + c) * k + ky) * k + kx];
    L->b = B ? ct_onnx_floats(B) : ct_xcalloc((size_t)O, sizeof(float));
    return 0;
}

int ct_conv_tile(const ct_layer *L) {
    if (L->type != CT_L_CONV) return 0;
    return CT_CONV_DIRECT(L) ? CT_TILE_DIRECT : CT_CONV_WINO(L);
}

void ct_conv_use_im2col(ct_layer *L) {
    CT_ASSERT(L->type == CT_L_CONV && !CT_CONV_WINO(L));
    CT_CONV_DIRECT(L) = 0;
}

/* its algorithm, after the shape in the model's summary */
static void summary(const ct_layer *L, FILE *out) {
    if (CT_CONV_WINO(L)) fprintf(out, " wino%d", CT_CONV_WINO(L));
    if (CT_CONV_DIRECT(L)) fprintf(out, " direct");
}

const ct_layer_ops ct_layer_conv = {
    .type = CT_L_CONV, .name = "conv", .alias = "convolutional", .keys = keys, .n_keys = sizeof keys / sizeof *keys,
    .build = build, .release = release, .shape = shape, .flops = flops, .setup = setup, .forward = forward, .backward = backward,
    .summary = summary, .onnx = onnx, .import = import, .onnx_ops = "Conv", .init = ct_layer_init_weights, .decay = ct_layer_decay_weights,
};

