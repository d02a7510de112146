/* nn/layers/batchnorm.c: [batchnorm] with optional activation: per-channel
 * normalisation over the B*H*W rows with batch statistics in training and
 * the running averages in evaluation. Parameters in ct_bn_layout
 * (include/cltrain/layer.h): gamma, running mean, running variance, beta.
 * The running averages are state: no weight decay, gradient 0, averaged
 * over data-parallel ranks. An activation's backward is done here (act_inside),
 * from x, instead of by the sequencer over y. Kernels: kernels/bn.cl. Reference:
 * src/ref/bn.c; tests: tests/test_bn.c. */
#include "cltrain/layer.h"
#include <string.h>

enum { BN_CHUNK = 64 }; /* rows per partial sum */

/* momentum= is PyTorch's: running = (1 - momentum) * running + momentum * batch
 * statistic (the unbiased variance); 0.1 and eps 1e-5 by default, as PyTorch.
 * lr=0 freezes gamma at 1 (a BN without a trained scale); bias_lr= and
 * bias_decay= set beta's group (ct_model_groups). */
/* the layer's own values (ct_layer.priv): its epsilon and momentum */
#define EPS(L) ((L)->priv.f[0])
#define MOMENTUM(L) ((L)->priv.f[1])

static const ct_key keys[] = {
    CT_KEY_ACTIVATION, CT_KEY(momentum, CT_KEY_FLOAT, 0, 1), CT_KEY(eps, CT_KEY_FLOAT, 0, 1),
    CT_KEY(lr, CT_KEY_FLOAT, 0, 1000000), CT_KEY(bias_lr, CT_KEY_FLOAT, 0, 1000000), CT_KEY(bias_decay, CT_KEY_INT, 0, 1),
};

/* The type's state: bn.cl's kernels, and the per-chunk partial sums its layers share */
static const char *const kernels[] = {"bn_reduce", "bn_reduce8", "bn_reduce16", "bn_reduce32", "bn_reduce64", "bn_stats", "bn_stats_eval", "bn_fwd", "bn_grads", "bn_bwd_dx"};
enum { REDUCE, REDUCE8, REDUCE16, REDUCE32, REDUCE64, STATS, STATS_EVAL, FWD, GRADS, DX };
typedef struct bn_kind { ct_kernels ks; cl_mem p1, p2; size_t n; } bn_kind;
/* the per-layer buffers, in L->own: [mean, invstd] and [sum dy, sum dy*xhat], 2*C each; with GELU,
 * its derivative at every output, kept by a training forward for backward (bn.cl), and whether it is */
#define STATS_OF(L) ((L)->own[0])
#define SUMS_OF(L) ((L)->own[1])
#define DERIV_OF(L) ((L)->own[2])
#define KEPT(L) ((L)->priv.i[2])

static int build(ct_model *m, void **out) {
    bn_kind *k = ct_xcalloc(1, sizeof *k);
    *out = k;
    return ct_kernels_load(m, &k->ks, "bn.cl", "", kernels, (int)(sizeof kernels / sizeof *kernels));
}

static void release(void *v) {
    bn_kind *k = v;
    ct_kernels_unload(&k->ks);
    ct_cl_release(&k->p1);
    ct_cl_release(&k->p2);
    free(k);
}

static int shape(ct_model *m, ct_layer *L, const ct_sect *s) {
    (void)m;
    if (!(s->eps > 0)) /* the variance of a constant channel is 0 */
        return ct_fail(CT_EINPUT, "%s:%d: [batchnorm] eps=%g: must be above 0 (1/sqrt(variance + eps) of a constant channel)",
                       s->file, s->line, (double)s->eps);
    EPS(L) = s->eps;
    MOMENTUM(L) = s->momentum;
    L->oh = L->ih; L->ow = L->iw; L->oc = L->ic;
    L->n_w = 3 * (size_t)L->ic; /* gamma, running mean, running variance */
    L->n_b = (size_t)L->ic;     /* beta */
    return 0;
}

static int setup(ct_model *m, ct_layer *L, int batch, ct_needs *n) {
    (void)n;
    bn_kind *k = ct_layer_kind(m, L);
    size_t rows = (size_t)batch * L->oh * L->ow, part = (rows + BN_CHUNK - 1) / BN_CHUNK * (size_t)L->oc;
    int rc = 0;
    if (part > k->n) { /* the partial sums: as large as the largest layer needs */
        ct_cl_release(&k->p1);
        ct_cl_release(&k->p2);
        k->n = part;
        rc = ct_cl_alloc(m->cl, &k->p1, part * sizeof(float), "batch-norm partial sums");
        if (!rc) rc = ct_cl_alloc(m->cl, &k->p2, part * sizeof(float), "batch-norm partial sums");
    }
    if (!rc) rc = ct_cl_alloc(m->cl, &STATS_OF(L), 2 * (size_t)L->oc * sizeof(float), "batch-norm statistics");
    if (!rc) rc = ct_cl_alloc(m->cl, &SUMS_OF(L), 2 * (size_t)L->oc * sizeof(float), "batch-norm sums");
    if (!rc && L->act == CT_ACT_GELU) rc = ct_cl_alloc(m->cl, &DERIV_OF(L), rows * L->oc * sizeof(float), "batch-norm GELU derivative");
    KEPT(L) = 0;
    L->norm_next = 0; /* (the conv after it may set it: its setup follows) */
    return rc;
}

/* bn_reduce's partial sums into the kind's p1, p2 (mode 0: of x; 2: of dy and dy*xhat, dy through L's
 * activation; 3: the same through the kept derivative) */
static void reduce(ct_model *m, const ct_layer *L, cl_mem x, cl_mem dy, int M, int mode) {
    int C = L->oc, chunks = (M + BN_CHUNK - 1) / BN_CHUNK, chunk = BN_CHUNK;
    /* channels per work-item: on a CPU (ct_channel_vw 16) a whole run of a row, 64 or 32 at once (bn.cl) */
    int vw = ct_channel_vw(m, C) == 16 ? (C % 64 == 0 ? 64 : C % 32 == 0 ? 32 : 16) : C % 8 ? 1 : 8;
    const bn_kind *bk = ct_layer_kind(m, L);
    cl_kernel k = bk->ks.k[vw == 64 ? REDUCE64 : vw == 32 ? REDUCE32 : vw == 16 ? REDUCE16 : vw == 8 ? REDUCE8 : REDUCE];
    ct_bn_slices p = ct_bn_layout(L);
    ct_kargs(k, bk->p1, bk->p2, x, dy, mode == 3 ? DERIV_OF(L) : x, STATS_OF(L), m->params, (int)p.gamma, (int)p.beta, mode ? L->act : 0, M, C,
             chunk, mode);
    size_t g2[2] = {(size_t)(C / vw), (size_t)chunks};
    ct_cl_run(m->cl, k, "bn_reduce", 2, g2, NULL);
}

static void forward(ct_model *m, int i, cl_mem x, int B) {
    ct_layer *L = &m->layers[i];
    const bn_kind *bk = ct_layer_kind(m, L);
    const cl_kernel *k = bk->ks.k;
    ct_bn_slices p = ct_bn_layout(L);
    int M = B * L->oh * L->ow, C = L->oc, chunks = (M + BN_CHUNK - 1) / BN_CHUNK, chunk = BN_CHUNK;
    int offM = (int)p.mean, offV = (int)p.var;
    int vw = ct_channel_vw(m, C);
    size_t g1 = (size_t)C, ge[2] = {(size_t)(C / vw), (size_t)M};
    if (m->training) {
        reduce(m, L, x, x, M, 0);
        ct_kargs(k[STATS], STATS_OF(L), bk->p1, bk->p2, chunks, chunk, M, C, EPS(L), MOMENTUM(L), m->params, offM,
                 offV);
        ct_cl_run(m->cl, k[STATS], "bn_stats", 1, &g1, NULL);
    } else {
        ct_kargs(k[STATS_EVAL], STATS_OF(L), m->params, offM, offV, C, EPS(L));
        ct_cl_run(m->cl, k[STATS_EVAL], "bn_stats_eval", 1, &g1, NULL);
    }
    KEPT(L) = m->training && DERIV_OF(L);
    /* the [shortcut] after it (add_next), in a whole forward: its sum and activation into its output */
    const ct_layer *S = L->add_next && m->whole_pass && !KEPT(L) ? L + 1 : NULL;
    L->added = S != NULL;
    ct_kargs(k[FWD], S ? S->out : L->out, x, STATS_OF(L), m->params, (int)p.gamma, (int)p.beta, M, C, L->act, vw,
             KEPT(L) ? DERIV_OF(L) : L->out, KEPT(L), S ? ct_layer_output(m, S->from) : x, S != NULL, S ? S->act : 0);
    /* the conv after it normalises as it loads (norm_next): nothing to write */
    L->normed = L->norm_next && m->whole_pass && !KEPT(L) && !S;
    if (L->normed) return;
    ct_cl_run(m->cl, k[FWD], "bn_fwd", 2, ge, NULL);
}

static void backward(ct_model *m, int i, cl_mem x, cl_mem dy, int B) {
    ct_layer *L = &m->layers[i];
    const bn_kind *bk = ct_layer_kind(m, L);
    const cl_kernel *k = bk->ks.k;
    ct_bn_slices p = ct_bn_layout(L);
    int M = B * L->oh * L->ow, C = L->oc, chunks = (M + BN_CHUNK - 1) / BN_CHUNK;
    int vw = ct_channel_vw(m, C);
    size_t g1 = (size_t)C, ge[2] = {(size_t)(C / vw), (size_t)M};
    reduce(m, L, x, dy, M, KEPT(L) ? 3 : 2);
    ct_kargs(k[GRADS], SUMS_OF(L), bk->p1, bk->p2, chunks, C, m->grads, (int)p.gamma, (int)p.beta);
    ct_cl_run(m->cl, k[GRADS], "bn_grads", 1, &g1, NULL);
    if (L->dx) {
        ct_kargs(k[DX], L->dx, dy, x, STATS_OF(L), SUMS_OF(L), m->params, (int)p.gamma, (int)p.beta, L->act, M, C, vw,
                 KEPT(L) ? DERIV_OF(L) : x, KEPT(L));
        ct_cl_run(m->cl, k[DX], "bn_bwd_dx", 2, ge, NULL);
    }
}

cl_mem ct_bn_stats(const ct_layer *L) { return STATS_OF(L); }

/* gamma 1, running mean 0, running variance 1, beta 0 */
static void init(const ct_layer *L, int i, float *w, uint64_t seed) {
    (void)i;
    (void)seed;
    ct_bn_slices p = ct_bn_layout(L);
    for (size_t c = 0; c < p.C; c++) w[p.gamma + c] = w[p.var + c] = 1.0f;
}

/* the running mean and variance, contiguous */
static size_t state(const ct_layer *L, size_t *off) {
    ct_bn_slices p = ct_bn_layout(L);
    *off = p.mean;
    return 2 * p.C;
}

/* BatchNormalization with the running statistics, then the activation */
static int onnx(ct_onnx_graph *g, const ct_model *m, int i, const float *p, char *x, int *rank4) {
    (void)rank4;
    const ct_layer *L = &m->layers[i];
    ct_bn_slices s = ct_bn_layout(L);
    char nm[4][CT_ONNX_NAME], y[CT_ONNX_NAME];
    const char *what[4] = {"gamma", "beta", "mean", "var"};
    const float *src[4] = {p + s.gamma, p + s.beta, p + s.mean, p + s.var};
    int64_t d[1] = {(int64_t)s.C};
    for (int j = 0; j < 4; j++) {
        ct_onnx_fresh(g, nm[j], what[j]);
        ct_onnx_init_f32(g, nm[j], d, 1, src[j], s.C);
    }
    ct_onnx_fresh(g, y, "bn");
    ct_onnx_begin(g, "BatchNormalization", (const char *const[]){x, nm[0], nm[1], nm[2], nm[3]}, 5, y);
    ct_onnx_attr_float(g, "epsilon", EPS(L));
    ct_onnx_end(g);
    memcpy(x, y, CT_ONNX_NAME);
    ct_onnx_activation(g, L->act, x);
    return 0;
}

/* BatchNormalization in eval mode over channels; ONNX's epsilon moves into
 * the variance, cltrain's being fixed */
static int import(ct_onnx_imp *im, const ct_onnx_node *nd) {
    if (strcmp(nd->op, "BatchNormalization")) return 1;
    const ct_onnx_act *x;
    int rc = ct_onnx_newest(im, nd, &x);
    if (rc) return rc;
    const ct_onnx_tensor *p[4];
    int C = x->rank == 4 ? x->c : x->c * x->h * x->w;
    for (int k = 0; k < 4; k++)
        if (!(p[k] = ct_onnx_const_in(im, nd, k + 1)) || !p[k]->f || p[k]->n != C)
            return ct_onnx_fail(im, nd, "its scale, bias, mean and variance must be constants of %d floats", C);
    if (ct_onnx_node_int(nd, "training_mode", 0)) return ct_onnx_fail(im, nd, "training_mode=1; export the model in eval mode");
    if (nd->n_out > 1) return ct_onnx_fail(im, nd, "it outputs running statistics (training mode); export in eval mode");
    const ct_onnx_attr *e = ct_onnx_node_attr(nd, "epsilon");
    double eps = e ? e->f : 1e-5, ours = 1e-5; /* cltrain's BN_EPS, as ONNX writes it */
    if (x->rank == 2 && x->h * x->w != 1) return ct_onnx_fail(im, nd, "batch norm over a flattened image; cltrain normalises channels");
    float *w = ct_xmalloc(3 * (size_t)C * sizeof(float)); /* ct_bn_layout: gamma, mean, variance; bias beta */
    for (int c = 0; c < C; c++) {
        double v = (double)p[3]->f[c] + eps - ours; /* the rest of ONNX's epsilon moves into the variance */
        if (!(v > 0) && !(v == 0 && eps == ours)) {
            free(w);
            return ct_onnx_fail(im, nd, "epsilon %g with a variance below %g; cltrain's epsilon is %g", eps, ours - eps, ours);
        }
        w[c] = p[0]->f[c], w[C + c] = p[2]->f[c], w[2 * C + c] = (float)v;
    }
    ct_onnx_act y = *x;
    ct_onnx_layer *L = ct_onnx_layer_add(im, nd, CT_L_BATCHNORM, y, "[batchnorm]\n");
    if (!L) { free(w); return CT_EINPUT; }
    L->oc = C;
    L->w = w, L->n_w = 3 * (size_t)C;
    L->b = ct_onnx_floats(p[1]), L->n_b = (size_t)C;
    return 0;
}

const ct_layer_ops ct_layer_batchnorm = {
    .type = CT_L_BATCHNORM, .name = "batchnorm", .keys = keys, .n_keys = sizeof keys / sizeof *keys,
    .act_inside = 1, .build = build, .release = release, .shape = shape, .setup = setup, .forward = forward, .backward = backward, .init = init, .state = state,
    .onnx = onnx, .import = import, .onnx_ops = "BatchNormalization",
};
