/* nn/layers/batchnorm.c: [batchnorm] with optional activation: per-channel
 * normalisation over the B*H*W rows with batch statistics in training and
 * the running averages in evaluation. Parameters in ct_bn_layout
 * (include/cltrain/layer.h): gamma, running mean, running variance, beta.
 * The running averages are state: no weight decay, gradient 0, averaged
 * over data-parallel ranks. An activation's backward is done here (act_inside),
 * from x, instead of by the sequencer over y. Kernels: kernels/bn.cl. Reference:
 * src/ref/bn.c; tests: tests/test_bn.c. */
#include "cltrain/layer.h"

enum { BN_CHUNK = 64 }; /* rows per partial sum */
#define BN_EPS 1e-5f
#define BN_MOMENTUM 0.1f

static const ct_key keys[] = {CT_KEY_ACTIVATION};

static int shape(ct_model *m, ct_layer *L, const ct_sect *s) {
    (void)m;
    (void)s;
    L->oh = L->ih; L->ow = L->iw; L->oc = L->ic;
    L->n_w = 3 * (size_t)L->ic; /* gamma, running mean, running variance */
    L->n_b = (size_t)L->ic;     /* beta */
    return 0;
}

static int setup(ct_model *m, ct_layer *L, int batch, ct_needs *n) {
    size_t rows = (size_t)batch * L->oh * L->ow, part = (rows + BN_CHUNK - 1) / BN_CHUNK * (size_t)L->oc;
    if (part > n->bn_part) n->bn_part = part;
    int rc = ct_cl_alloc(m->cl, &L->bn_stats, 2 * (size_t)L->oc * sizeof(float), "batch-norm statistics");
    if (!rc) rc = ct_cl_alloc(m->cl, &L->bn_sums, 2 * (size_t)L->oc * sizeof(float), "batch-norm sums");
    return rc;
}

/* bn_reduce's partial sums into bn_p1, bn_p2 (mode 0: of x; 2: of dy and dy*xhat, dy through L's activation) */
static void reduce(ct_model *m, const ct_layer *L, cl_mem x, cl_mem dy, int M, int mode) {
    int C = L->oc, chunks = (M + BN_CHUNK - 1) / BN_CHUNK, chunk = BN_CHUNK, vw = C % 8 ? 1 : 8;
    cl_kernel k = vw == 8 ? m->k_bn_reduce8 : m->k_bn_reduce;
    ct_bn_slices p = ct_bn_layout(L);
    ct_kargs(k, m->bn_p1, m->bn_p2, x, dy, L->bn_stats, m->params, (int)p.gamma, (int)p.beta, mode ? L->act : 0, M, C,
             chunk, mode);
    size_t g2[2] = {(size_t)(C / vw), (size_t)chunks};
    ct_cl_run(m->cl, k, "bn_reduce", 2, g2, NULL);
}

static void forward(ct_model *m, int i, cl_mem x, int B) {
    ct_layer *L = &m->layers[i];
    ct_bn_slices p = ct_bn_layout(L);
    int M = B * L->oh * L->ow, C = L->oc, chunks = (M + BN_CHUNK - 1) / BN_CHUNK, chunk = BN_CHUNK;
    int offM = (int)p.mean, offV = (int)p.var;
    int vw = ct_channel_vw(m, C);
    size_t g1 = (size_t)C, ge[2] = {(size_t)(C / vw), (size_t)M};
    if (m->training) {
        reduce(m, L, x, x, M, 0);
        ct_kargs(m->k_bn_stats, L->bn_stats, m->bn_p1, m->bn_p2, chunks, chunk, M, C, BN_EPS, BN_MOMENTUM, m->params, offM,
                 offV);
        ct_cl_run(m->cl, m->k_bn_stats, "bn_stats", 1, &g1, NULL);
    } else {
        ct_kargs(m->k_bn_stats_eval, L->bn_stats, m->params, offM, offV, C, BN_EPS);
        ct_cl_run(m->cl, m->k_bn_stats_eval, "bn_stats_eval", 1, &g1, NULL);
    }
    ct_kargs(m->k_bn_fwd, L->out, x, L->bn_stats, m->params, (int)p.gamma, (int)p.beta, M, C, L->act, vw);
    ct_cl_run(m->cl, m->k_bn_fwd, "bn_fwd", 2, ge, NULL);
}

static void backward(ct_model *m, int i, cl_mem x, cl_mem dy, int B) {
    ct_layer *L = &m->layers[i];
    ct_bn_slices p = ct_bn_layout(L);
    int M = B * L->oh * L->ow, C = L->oc, chunks = (M + BN_CHUNK - 1) / BN_CHUNK;
    int vw = ct_channel_vw(m, C);
    size_t g1 = (size_t)C, ge[2] = {(size_t)(C / vw), (size_t)M};
    reduce(m, L, x, dy, M, 2);
    ct_kargs(m->k_bn_grads, L->bn_sums, m->bn_p1, m->bn_p2, chunks, C, m->grads, (int)p.gamma, (int)p.beta);
    ct_cl_run(m->cl, m->k_bn_grads, "bn_grads", 1, &g1, NULL);
    if (L->dx) {
        ct_kargs(m->k_bn_dx, L->dx, dy, x, L->bn_stats, L->bn_sums, m->params, (int)p.gamma, (int)p.beta, L->act, M, C, vw);
        ct_cl_run(m->cl, m->k_bn_dx, "bn_bwd_dx", 2, ge, NULL);
    }
}

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

const ct_layer_ops ct_layer_batchnorm = {
    .type = CT_L_BATCHNORM, .name = "batchnorm", .keys = keys, .n_keys = sizeof keys / sizeof *keys,
    .act_inside = 1, .shape = shape, .setup = setup, .forward = forward, .backward = backward, .init = init, .state = state,
};
