/* nn/layers/shortcut.c: [shortcut] from=N activation=relu|linear: the
 * residual connection of He et al. 2016. It adds the output of an earlier
 * layer (from < 0: relative, -1 being the previous layer; from >= 0: that
 * layer's index, as in darknet) to its input. When the earlier output is
 * larger (a stride-2 stage start) it is subsampled, every S-th pixel, and
 * when it has fewer channels they are padded with zeros (option A, no
 * parameters). Backward copies dy to its input's gradient and, through
 * backward_from, adds dy's share into the earlier output's gradient once
 * the layer after it has written that. Kernels: kernels/shortcut.cl.
 * Reference: src/ref/shortcut.c; tests: tests/test_shortcut.c. */
#include "cltrain/layer.h"

static const ct_key keys[] = {CT_KEY(from, CT_KEY_INT, -CT_MAX_LAYERS, CT_MAX_LAYERS), CT_KEY_ACTIVATION};

/* the shape of the earlier output */
static void src_shape(const ct_model *m, const ct_layer *L, int *h, int *w, int *c) {
    if (L->from < 0) { *h = m->in_h; *w = m->in_w; *c = m->in_c; return; }
    const ct_layer *S = &m->layers[L->from];
    *h = S->oh; *w = S->ow; *c = S->oc;
}

static int shape(ct_model *m, ct_layer *L, const ct_sect *s) {
    int i = m->n_layers, j = s->from < 0 ? i + s->from : s->from;
    if (!CT_HAS(s, 0)) return ct_fail(CT_EINPUT, "%s:%d: [shortcut] needs from= (e.g. from=-3, three layers back)", s->file, s->line);
    if (j < -1 || j >= i)
        return ct_fail(CT_EINPUT, "%s:%d: [shortcut] from=%d: layer %d is not an earlier layer (this is layer %d; -1 is the input)",
                       s->file, s->line, s->from, j, i);
    L->from = j;
    int sh, sw, sc;
    src_shape(m, L, &sh, &sw, &sc);
    int S = (sh + L->ih - 1) / L->ih;
    if (sc > L->ic || (sw + L->iw - 1) / L->iw != S || (L->ih - 1) * S >= sh || (L->iw - 1) * S >= sw)
        return ct_fail(CT_EINPUT, "%s:%d: [shortcut] from=%d: layer %d's %dx%dx%d output cannot be added to this %dx%dx%d input "
                       "(it needs as many or fewer channels and one whole-number subsampling of height and width)",
                       s->file, s->line, s->from, j, sh, sw, sc, L->ih, L->iw, L->ic);
    L->stride = S;
    L->oh = L->ih; L->ow = L->iw; L->oc = L->ic;
    return 0;
}

static void forward(ct_model *m, int i, cl_mem x, int B) {
    ct_layer *L = &m->layers[i];
    int sh, sw, sc, n = B * L->oh * L->ow;
    src_shape(m, L, &sh, &sw, &sc);
    ct_kargs(m->k_short_fwd, L->out, x, ct_layer_output(m, L->from), L->oh, L->ow, L->oc, sh, sw, sc, L->stride, L->act, n);
    size_t g2[2] = {(size_t)L->oc, (size_t)n};
    ct_cl_run(m->cl, m->k_short_fwd, "shortcut_fwd", 2, g2, NULL);
}

/* the input's gradient is dy itself */
static void backward(ct_model *m, int i, cl_mem x, cl_mem dy, int B) {
    (void)x;
    ct_layer *L = &m->layers[i];
    if (L->dx) CL_CHECK(clEnqueueCopyBuffer(m->cl->queue, dy, L->dx, 0, 0, (size_t)B * ct_out_size(L) * 4, 0, NULL, NULL));
}

/* target [B, sh, sw, sc] += the subsampled, channel-cut dy */
static void backward_from(ct_model *m, int i, cl_mem target, int B) {
    ct_layer *L = &m->layers[i];
    cl_mem dy = i == m->n_layers - 1 ? m->dlogits : m->layers[i + 1].dx;
    int sh, sw, sc, n = B * L->oh * L->ow;
    src_shape(m, L, &sh, &sw, &sc);
    ct_kargs(m->k_short_bwd, target, dy, L->oh, L->ow, L->oc, sh, sw, sc, L->stride, n);
    size_t g2[2] = {(size_t)sc, (size_t)n};
    ct_cl_run(m->cl, m->k_short_bwd, "shortcut_bwd", 2, g2, NULL);
}

const ct_layer_ops ct_layer_shortcut = {
    .type = CT_L_SHORTCUT, .name = "shortcut", .keys = keys, .n_keys = sizeof keys / sizeof *keys,
    .shape = shape, .forward = forward, .backward = backward, .backward_from = backward_from,
};
