/* nn/layers/shortcut.c: [shortcut] from=N activation=relu|linear
 * projection=0|1: the residual connection of He et al. 2016. It adds the
 * output of an earlier layer (from < 0: relative, -1 being the previous
 * layer; from >= 0: that layer's index, as in darknet) to its input. When
 * the earlier output is larger (a stride-2 stage start) it is subsampled,
 * every S-th pixel. Without projection its missing channels are padded with
 * zeros (option A, no parameters); with projection=1 the subsampled pixels
 * go through a 1x1 convolution with bias, weights [SC, C] and bias [C]
 * (option B; also allowed where the shapes agree), run as im2col + GEMM on
 * the conv layer's path. He et al. follow their projection with batch
 * norm; a [batchnorm] cannot sit on the shortcut branch alone here, so the
 * bias carries the shift and the weights are He-normal like a conv's.
 * Where the layer before alone feeds it and the shapes agree (add_next), a
 * whole forward lets that layer write this one's output (batch norm's
 * kernel adds and activates). Its input's gradient is dy (dx_is_dy): the
 * sequencer's pass through the activation writes it; backward copies dy
 * only where that pass did not run. Backward also accumulates the
 * projection's weight and bias gradients, so a data-parallel bucket sees
 * them when this layer is done, and, through backward_from, adds dy's share
 * into the earlier output's gradient once the layer after it has written
 * that. Kernels: kernels/shortcut.cl,
 * im2col in kernels/conv.cl, the GEMM. Reference: src/ref/shortcut.c;
 * tests: tests/test_shortcut.c. */
#include "cltrain/layer.h"
#include <stdint.h>
#include <string.h>

static const ct_key keys[] = {CT_KEY(from, CT_KEY_INT, -CT_MAX_LAYERS, CT_MAX_LAYERS), CT_KEY_ACTIVATION,
                              CT_KEY(projection, CT_KEY_INT, 0, 1)};

/* The type's state: shortcut.cl's kernels, and conv.cl's im2col for a strided projection's gather */
static const char *const kernels[] = {"shortcut_fwd", "shortcut_bwd", "shortcut_bwd_act"}, *const conv_kernels[] = {"im2col"};
typedef struct shortcut_kind { ct_kernels ks, conv; } shortcut_kind;

static int build(ct_model *m, void **out) {
    shortcut_kind *k = ct_xcalloc(1, sizeof *k);
    *out = k;
    int rc = ct_kernels_load(m, &k->ks, "shortcut.cl", "", kernels, 3);
    return rc ? rc : ct_kernels_load(m, &k->conv, "conv.cl", "", conv_kernels, 1);
}

static void release(void *v) {
    shortcut_kind *k = v;
    ct_kernels_unload(&k->ks);
    ct_kernels_unload(&k->conv);
    free(k);
}
static const shortcut_kind *kind_of(const ct_model *m, const ct_layer *L) { return ct_layer_kind(m, L); }

/* the shape of the earlier output */
static void src_shape(const ct_model *m, const ct_layer *L, int *h, int *w, int *c) {
    if (L->from < 0) { *h = m->in_h; *w = m->in_w; *c = m->in_c; return; }
    const ct_layer *S = &m->layers[L->from];
    *h = S->oh; *w = S->ow; *c = S->oc;
}

/* 1 when the layer projects (option B): only then has it parameters */
static int projects(const ct_layer *L) { return L->n_w != 0; }

static int shape(ct_model *m, ct_layer *L, const ct_sect *s) {
    int i = m->n_layers, j = s->from < 0 ? i + s->from : s->from;
    if (!CT_HAS(s, 0)) return ct_fail(CT_EINPUT, "%s:%d: [shortcut] needs from= (e.g. from=-3, three layers back)", s->file, s->line);
    if (j < -1 || j >= i)
        return ct_fail(CT_EINPUT, "%s:%d: [shortcut] from=%d: layer %d is not an earlier layer (this is layer %d; -1 is the input)",
                       s->file, s->line, s->from, j, i);
    L->from = j;
    int sh, sw, sc;
    src_shape(m, L, &sh, &sw, &sc);
    /* the pixels (y*S, x*S) of the earlier output are exactly this input's grid: a 1x1 window of stride S */
    int S = (sh + L->ih - 1) / L->ih;
    if ((sw + L->iw - 1) / L->iw != S || (L->ih - 1) * S >= sh || (L->iw - 1) * S >= sw)
        return ct_fail(CT_EINPUT, "%s:%d: [shortcut] from=%d: layer %d's %dx%dx%d output cannot be added to this %dx%dx%d input "
                       "(its height and width must be this input's times one whole-number subsampling)",
                       s->file, s->line, s->from, j, sh, sw, sc, L->ih, L->iw, L->ic);
    if (sc > L->ic && !s->projection)
        return ct_fail(CT_EINPUT, "%s:%d: [shortcut] from=%d: layer %d's %dx%dx%d output cannot be added to this %dx%dx%d input "
                       "(it has more channels; projection=1 adds a 1x1 convolution that maps them)",
                       s->file, s->line, s->from, j, sh, sw, sc, L->ih, L->iw, L->ic);
    L->stride = S;
    L->oh = L->ih; L->ow = L->iw; L->oc = L->ic;
    if (s->projection) { /* a 1x1 convolution of stride S, no padding: the summary shows it as k1 sS p0 */
        L->k = 1; L->pad = 0;
        L->n_w = (size_t)sc * L->oc;
        L->n_b = (size_t)L->oc;
    }
    return 0;
}

/* the projection's multiply-adds; option A's additions are not counted */
static double flops(const ct_layer *L) { return 2.0 * L->oh * L->ow * (double)L->n_w; }

static int setup(ct_model *m, ct_layer *L, int batch, ct_needs *n) {
    int i = (int)(L - m->layers), sh, sw, sc;
    src_shape(m, L, &sh, &sw, &sc);
    if (i > 0) /* the layer before may do this forward: it alone feeds this one, which adds a same-shaped output */
        m->layers[i - 1].add_next = ct_next_reads_alone(m, i - 1) && !projects(L) && L->stride == 1 && sh == L->oh &&
                                    sw == L->ow && sc == L->oc && !L->act_in;
    if (!projects(L)) return 0;
    size_t rows = (size_t)batch * L->oh * L->ow;
    if (L->stride > 1 && rows * sc > n->ws) n->ws = rows * sc; /* the subsampled pixels; stride 1 reads them in place */
    if (rows > n->ones) n->ones = rows;
    return ct_layer_reserve_gemm(m, (int)rows, L->oc, sc);
}

/* The projection's input [B*oh*ow, sc]: the earlier output itself at stride 1, else its every S-th pixel gathered into m->ws. */
static cl_mem gather(ct_model *m, const ct_layer *L, int B) {
    int sh, sw, sc;
    src_shape(m, L, &sh, &sw, &sc);
    cl_mem src = ct_layer_output(m, L->from);
    if (L->stride == 1) return src;
    cl_kernel k = kind_of(m, L)->conv.k[0];
    ct_kargs(k, m->ws, src, sh, sw, sc, 1, 1, L->stride, 0, L->oh, L->ow);
    size_t gws = (size_t)B * L->oh * L->ow;
    ct_cl_run(m->cl, k, "im2col", 1, &gws, NULL);
    return m->ws;
}

/* out[B*oh*ow, oc] = act(x + col W + b), x copied into out and the GEMM adding to it (beta 1) */
static void forward_projection(ct_model *m, ct_layer *L, cl_mem x, int B) {
    int rows = B * L->oh * L->ow, sc = (int)(L->n_w / (size_t)L->oc);
    cl_mem col = gather(m, L, B);
    CL_CHECK(clEnqueueCopyBuffer(m->cl->queue, x, L->out, 0, 0, (size_t)rows * L->oc * 4, 0, NULL, NULL));
    ct_layer_gemm_forward(m, L, col, rows, sc, 1.0f, L->out, ct_fused_act(m, L));
}

/* channels per work-item of shortcut.cl: as for C, when SC allows it too */
static int vec16(const ct_model *m, int C, int SC) { return SC % 16 ? 1 : ct_channel_vw(m, C); }

static void forward(ct_model *m, int i, cl_mem x, int B) {
    ct_layer *L = &m->layers[i];
    if (m->whole_pass && i > 0 && m->layers[i - 1].added) return; /* the layer before wrote out (add_next) */
    if (projects(L)) { forward_projection(m, L, x, B); return; }
    int sh, sw, sc, n = B * L->oh * L->ow;
    src_shape(m, L, &sh, &sw, &sc);
    int vw = vec16(m, L->oc, sc);
    cl_kernel k = kind_of(m, L)->ks.k[0];
    ct_kargs(k, L->out, x, ct_layer_output(m, L->from), L->oh, L->ow, L->oc, sh, sw, sc, L->stride, ct_fused_act(m, L), n,
             vw);
    size_t g2[2] = {(size_t)(L->oc / vw), (size_t)n};
    ct_cl_run(m->cl, k, "shortcut_fwd", 2, g2, NULL);
}

/* the input's gradient is dy itself (written by the sequencer's pass through the activation where it ran:
 * dx_is_dy); with a projection also db += 1^T dy ; dW += col^T dy */
static void backward(ct_model *m, int i, cl_mem x, cl_mem dy, int B) {
    (void)x;
    ct_layer *L = &m->layers[i];
    int rows = B * L->oh * L->ow;
    if (L->dx && !ct_act_pass(L))
        CL_CHECK(clEnqueueCopyBuffer(m->cl->queue, dy, L->dx, 0, 0, (size_t)rows * L->oc * 4, 0, NULL, NULL));
    if (!projects(L)) return;
    int sc = (int)(L->n_w / (size_t)L->oc);
    ct_layer_bias_grad(m, dy, 0, rows, L->oc, L->b_off);
    cl_mem col = gather(m, L, B);
    ct_layer_gemm_dw(m, L, col, dy, rows, sc);
}

/* target [B, sh, sw, sc] += the subsampled dy: channel-cut (option A) or through W^T (projection).
 * With ag, but for a projection: also the pass through the activation of target's layer
 * (ct_act_grad), in the same kernel over all of target (shortcut_bwd_act); returns 1 then. */
static int backward_from(ct_model *m, int i, cl_mem target, int B, const ct_act_grad *ag) {
    ct_layer *L = &m->layers[i];
    cl_mem dy = i == m->n_layers - 1 ? m->dlogits : m->layers[i + 1].dx;
    int sh, sw, sc, n = B * L->oh * L->ow, C = L->oc;
    src_shape(m, L, &sh, &sw, &sc);
    if (ag && !projects(L)) {
        int vw = vec16(m, C, sc), nq = B * sh * sw;
        cl_kernel k = kind_of(m, L)->ks.k[2];
        ct_kargs(k, target, dy, ag->t, ag->act, L->oh, L->ow, C, sh, sw, sc, L->stride, nq, vw, ag->both ? ag->dx2 : target,
                 ag->both);
        size_t g2[2] = {(size_t)(sc / vw), (size_t)nq};
        ct_cl_run(m->cl, k, "shortcut_bwd_act", 2, g2, NULL);
        return 1;
    }
    cl_mem from = dy;
    if (projects(L)) {
        if (L->stride == 1) { /* target += dy W^T, in place */
            ct_layer_gemm_dx(m, L, dy, n, sc, 1.0f, target);
            return 0;
        }
        /* dcol = dy W^T into ws [n, sc], then scattered as a sc-channel dy */
        ct_layer_gemm_dx(m, L, dy, n, sc, 0.0f, m->ws);
        from = m->ws;
        C = sc;
    }
    int vw = vec16(m, C, sc);
    cl_kernel k = kind_of(m, L)->ks.k[1];
    ct_kargs(k, target, from, L->oh, L->ow, C, sh, sw, sc, L->stride, n, vw);
    size_t g2[2] = {(size_t)(sc / vw), (size_t)n};
    ct_cl_run(m->cl, k, "shortcut_bwd", 2, g2, NULL);
    return 0;
}

/* x + the earlier output, subsampled every stride-th pixel (Slice) and its
 * missing channels zero-padded (Pad): option A, as the kernel does it; or,
 * with a projection (option B), through a 1x1 Conv of that stride with bias. */
static int onnx(ct_onnx_graph *g, const ct_model *m, int i, const float *p, char *x, int *rank4) {
    const ct_layer *L = &m->layers[i];
    ct_onnx_to_4d(g, L->ic, L->ih, L->iw, x, rank4);
    int sh, sw, sc, r4;
    char src[CT_ONNX_NAME], y[CT_ONNX_NAME], t[4][CT_ONNX_NAME];
    src_shape(m, L, &sh, &sw, &sc);
    ct_onnx_output_of(g, L->from, src, &r4);
    ct_onnx_to_4d(g, sc, sh, sw, src, &r4);
    if (projects(L)) {
        ct_onnx_conv(g, src, p + L->w_off, p + L->b_off, 1, sc, L->oc, L->stride, 0);
    } else if (L->stride > 1) {
        const char *what[4] = {"starts", "ends", "axes", "steps"};
        const int64_t v[4][2] = {{0, 0}, {INT64_MAX, INT64_MAX}, {2, 3}, {L->stride, L->stride}};
        for (int j = 0; j < 4; j++) {
            ct_onnx_fresh(g, t[j], what[j]);
            ct_onnx_init_i64(g, t[j], v[j], 2);
        }
        ct_onnx_fresh(g, y, "subsample");
        ct_onnx_begin(g, "Slice", (const char *const[]){src, t[0], t[1], t[2], t[3]}, 5, y);
        ct_onnx_end(g);
        memcpy(src, y, CT_ONNX_NAME);
    }
    if (!projects(L) && sc < L->ic) {
        ct_onnx_fresh(g, t[0], "pads");
        ct_onnx_init_i64(g, t[0], (const int64_t[]){0, 0, 0, 0, 0, L->ic - sc, 0, 0}, 8);
        ct_onnx_fresh(g, y, "padchannels");
        ct_onnx_node2(g, "Pad", src, t[0], y);
        memcpy(src, y, CT_ONNX_NAME);
    }
    ct_onnx_fresh(g, y, "add");
    ct_onnx_node2(g, "Add", x, src, y);
    memcpy(x, y, CT_ONNX_NAME);
    ct_onnx_activation(g, L->act, x);
    return 0;
}

/* Add of two activations: the newest, and an earlier output seen through a
 * subsampling Slice and a channel Pad (option A) */
static int import(ct_onnx_imp *im, const ct_onnx_node *nd) {
    if (strcmp(nd->op, "Add")) return 1;
    const ct_onnx_act *a = ct_onnx_act_in(im, nd, 0), *b = ct_onnx_act_in(im, nd, 1);
    if (!a || !b) return ct_onnx_fail(im, nd, "its inputs are not two activations (a residual) or a MatMul's output and a bias");
    const ct_onnx_act *cur = a, *oth = b;
    if (!(a->layer == im->last.layer && a->step == 1 && !a->padc)) cur = b, oth = a;
    if (!(cur->layer == im->last.layer && cur->step == 1 && !cur->padc) || oth->layer == cur->layer)
        return ct_onnx_fail(im, nd, "a residual Add must add an earlier output to the newest one");
    if (cur->rank != 4 || oth->rank != 4) return ct_onnx_fail(im, nd, "residual of flattened tensors");
    int sh = oth->h, sw = oth->w, sc = oth->c, S = (sh + cur->h - 1) / cur->h;
    int vh = (sh + oth->step - 1) / oth->step, vw = (sw + oth->step - 1) / oth->step;
    if (vh != cur->h || vw != cur->w || sc + oth->padc != cur->c || (S != oth->step && !(S == 1 && oth->step == 1)))
        return ct_onnx_fail(im, nd, "adds a %dx%dx%d tensor (subsampled by %d, %d zero channels added) to a %dx%dx%d one; cltrain's "
                            "[shortcut] subsamples an earlier output and appends zero channels", sc, sh, sw, oth->step, oth->padc,
                            cur->c, cur->h, cur->w);
    if (sc > cur->c) return ct_onnx_fail(im, nd, "the earlier output has more channels");
    /* from= counts back when negative, so the model input (layer -1) is written relative: -1 - this layer's index */
    int from = oth->layer >= 0 ? oth->layer : -1 - im->n_layers;
    return ct_onnx_layer_add(im, nd, CT_L_SHORTCUT, *cur, "[shortcut]\nfrom=%d\n", from) ? 0 : CT_EINPUT;
}

const ct_layer_ops ct_layer_shortcut = {
    .type = CT_L_SHORTCUT, .name = "shortcut", .keys = keys, .n_keys = sizeof keys / sizeof *keys,
    .build = build, .release = release, .shape = shape, .flops = flops, .setup = setup, .forward = forward,
    .backward = backward, .backward_from = backward_from, .dx_is_dy = 1,
    .onnx = onnx, .import = import, .onnx_ops = "Add (residuals)", .init = ct_layer_init_he, .decay = ct_layer_decay_weights,
};
