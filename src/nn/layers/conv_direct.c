/* nn/layers/conv_direct.c: [conv] as kernels/conv_direct.cl, without
 * im2col's columns: on a CPU the first layers, strided and non-3x3 ones
 * (outputs in 16s: ct_conv_rule); the forward, the weight gradient and,
 * with input channels in 16s, the data gradient.
 * Reference: src/ref/conv.c; tests: tests/test_layers.c (test_conv_direct). */
#include "conv_kind.h"
#include <string.h>

/* ---- the direct kernel (kernels/conv_direct.cl) ----
 * Forward work-items take runs of `per` pixels (a multiple of its PX, 4),
 * about 64 runs per compute unit; the weight gradient's DIRECT_STRIPS per
 * compute unit each write a partial dW and db, which one GEMM with a row of
 * ones adds into the gradients. A layer with more than 32 inputs per output
 * splits its strips' weight gradient further into runs of up to DIRECT_CHN
 * channels of one tap (direct_dw_taps). */
enum { DIRECT_PX = 4, DIRECT_RUNS = 64, DIRECT_STRIPS = 8, DIRECT_KK = 32, DIRECT_CHN = 8 };

/* items per work-item when count of them are shared by DIRECT_RUNS work-items per compute unit */
static int direct_runs(const ct_model *m, int count) {
    int n = DIRECT_RUNS * (int)m->cl->compute_units;
    return (count + n - 1) / n;
}

/* direct_fwd's pixels per work-item: a multiple of its PX */
static int direct_per(const ct_model *m, int rows) {
    return (direct_runs(m, rows) + DIRECT_PX - 1) / DIRECT_PX * DIRECT_PX;
}

static int direct_kk(const ct_layer *L) { return L->k * L->k * L->ic; }

/* The weight gradient's strips for `rows` pixels: DIRECT_STRIPS per compute
 * unit, or more, so that a strip's dy (which direct_dw_taps' work-items each
 * read again) stays under DIRECT_STRIP_BYTES, in cache: cifar-tf's first
 * layer (25 taps, 64 outputs) took 12.4 ms with 16 strips of 2 MB of dy. */
enum { DIRECT_STRIP_BYTES = 256 << 10 };
static int direct_strips(const ct_model *m, const ct_layer *L, int rows) {
    int S = DIRECT_STRIPS * (int)m->cl->compute_units;
    size_t dy = (size_t)rows * L->oc * sizeof(float), cache = (size_t)S * DIRECT_STRIP_BYTES;
    if (direct_kk(L) > DIRECT_KK && dy > cache) S = (int)((dy + DIRECT_STRIP_BYTES - 1) / DIRECT_STRIP_BYTES);
    return S < rows ? S : rows;
}
/* direct_dw_taps' channels per work-item: the largest divisor of the input channels up to DIRECT_CHN */
static int direct_chn(const ct_layer *L) { return (int)ct_divisor_upto((size_t)L->ic, DIRECT_CHN); }

/* the output vectors per pass: the largest divisor of kv at most most (1 at least) */
static int vectors_per_pass(int kv, int most) { return (int)ct_divisor_upto((size_t)kv, (size_t)most); }

/* conv_direct.cl built for L's shape (shared by the layers of one shape) into
 * CT_CONV_DIRECT(L); 0, or 1 when the model has no slot left (L then runs im2col) */
static int direct_build(ct_model *m, ct_layer *L) {
    int kk = direct_kk(L), kv = L->oc / 16;
    /* the accumulators of a pass stay in registers: direct_fwd's PX*vg, direct_dw's kk*vb, direct_dw_taps' CHN*vt */
    int vg = vectors_per_pass(kv, 16 / DIRECT_PX), vb = vectors_per_pass(kv, kk <= 28 ? 28 / kk : 1);
    char opts[128];
    int n = snprintf(opts, sizeof opts, "-DKH=%d -DKW=%d -DCI=%d -DSTRIDE=%d -DKV=%d -DVG=%d -DVB=%d", L->k, L->k,
                     L->ic, L->stride, kv, vg, vb);
    if (kk > DIRECT_KK)
        n += snprintf(opts + n, sizeof opts - (size_t)n, " -DCHN=%d -DVT=%d", direct_chn(L),
                      vectors_per_pass(kv, 24 / direct_chn(L)));
    if (L->ic % 16 == 0) snprintf(opts + n, sizeof opts - (size_t)n, " -DDX");
    ct_conv_kind *ck = ct_conv_kind_of(m, L);
    int slots = (int)(sizeof ck->direct / sizeof *ck->direct), i = 0;
    while (i < slots && ck->direct[i].p && strcmp(ck->direct[i].opts, opts)) i++;
    if (i == slots) return 1;
    struct ct_direct_kernels *d = &ck->direct[i];
    if (!d->p) {
        int rc = ct_cl_build(m->cl, &d->p, "conv_direct.cl", opts);
        if (rc) return rc;
        snprintf(d->opts, sizeof d->opts, "%s", opts);
        d->fwd = ct_cl_kernel(d->p, "direct_fwd");
        d->dw = kk <= DIRECT_KK ? ct_cl_kernel(d->p, "direct_dw") : ct_cl_kernel(d->p, "direct_dw_taps");
        if (L->ic % 16 == 0) {
            d->wt = ct_cl_kernel(d->p, "direct_wt");
            d->dx = ct_cl_kernel(d->p, "direct_dx");
        }
    }
    CT_CONV_DIRECT(L) = i + 1;
    return 0;
}

/* y = act(conv(x) + b), the weights first copied to the (aligned) start of ws */
void ct_conv_direct_forward(ct_model *m, const ct_layer *L, cl_mem x, int B) {
    const struct ct_direct_kernels *d = &ct_conv_kind_of(m, L)->direct[CT_CONV_DIRECT(L) - 1];
    int rows = B * L->oh * L->ow, per = direct_per(m, rows);
    CL_CHECK(clEnqueueCopyBuffer(m->cl->queue, m->params, m->ws, L->w_off * sizeof(float), 0, L->n_w * sizeof(float), 0,
                                 NULL, NULL));
    /* no bias: a buffer of zeros in its place */
    ct_kargs(d->fwd, L->out, x, m->ws, L->n_b ? m->params : CT_DIRECT_ZEROS(L), L->n_b ? (int)L->b_off : 0, ct_fused_act(m, L), L->ih, L->iw, L->pad, L->oh, L->ow, rows, per);
    size_t gws = (size_t)((rows + per - 1) / per), one = 1;
    ct_cl_run(m->cl, d->fwd, "direct_fwd", 1, &gws, &one);
}

/* dW and db += the strips' partial sums (the bias follows the weights in the gradients) */
void ct_conv_direct_weight_grad(ct_model *m, const ct_layer *L, cl_mem x, cl_mem dy, int B) {
    const struct ct_direct_kernels *d = &ct_conv_kind_of(m, L)->direct[CT_CONV_DIRECT(L) - 1];
    int kk = direct_kk(L), rows = B * L->oh * L->ow, S = direct_strips(m, L, rows), per = (rows + S - 1) / S,
        n = (kk + 1) * L->oc;
    CT_ASSERT(L->b_off == L->w_off + L->n_w);
    if (!L->n_b) n -= L->oc; /* each strip's dW only, its bias sums left */
    ct_kargs(d->dw, m->ws, x, dy, L->ih, L->iw, L->pad, L->oh, L->ow, rows, per);
    size_t one[2] = {1, 1};
    if (kk <= DIRECT_KK) {
        size_t gws = (size_t)S;
        ct_cl_run(m->cl, d->dw, "direct_dw", 1, &gws, one);
    } else {
        size_t gws[2] = {(size_t)(kk / direct_chn(L)), (size_t)S};
        ct_cl_run(m->cl, d->dw, "direct_dw_taps", 2, gws, one);
    }
    ct_gemm_run(&m->gemm, &(ct_gemm_desc){.transA = 1, .M = 1, .N = n, .K = S, .alpha = 1.0f, .beta = 1.0f, .A = m->ones,
                                          .lda = 1, .B = m->ws, .ldb = (kk + 1) * L->oc, .C = m->grads, .offC = L->w_off,
                                          .ldc = n});
}

/* dx from dy by direct_dx (input channels in 16s), the turned weights and a row of zeros first in ws */
void ct_conv_direct_data_grad(ct_model *m, const ct_layer *L, cl_mem dy, int B) {
    const struct ct_direct_kernels *d = &ct_conv_kind_of(m, L)->direct[CT_CONV_DIRECT(L) - 1];
    ct_kargs(d->wt, m->ws, m->params, (int)L->w_off);
    size_t gw = L->n_w + (size_t)L->oc, one = 1;
    ct_cl_run(m->cl, d->wt, "direct_wt", 1, &gw, NULL);
    int lines = B * L->ih * L->stride, per = direct_runs(m, lines);
    ct_kargs(d->dx, L->dx, dy, m->ws, L->ih, L->iw, L->pad, L->oh, L->ow, lines, per);
    size_t gws = (size_t)((lines + per - 1) / per);
    ct_cl_run(m->cl, d->dx, "direct_dx", 1, &gws, &one);
}

int ct_conv_direct_setup(ct_model *m, ct_layer *L, int batch, ct_needs *n) {
    int rc = direct_build(m, L);
    if (rc < 0) return rc;
    if (!CT_CONV_DIRECT(L)) return 0;
    /* in ws: the strips' partial sums; direct_dx's turned weights (fewer), or im2col's dcol */
    size_t rows = (size_t)batch * L->oh * L->ow, kk = (size_t)L->k * L->k * L->ic;
    int S = direct_strips(m, L, (int)rows), N = (int)(kk + 1) * L->oc, dcol = L->dx && L->ic % 16;
    size_t w = ct_max2((size_t)S * (size_t)N, dcol ? rows * kk : 0);
    if ((size_t)S > n->ones) n->ones = (size_t)S; /* the GEMM's row of ones */
    if (w > n->ws) n->ws = w;
    if ((rc = ct_gemm_reserve(&m->gemm, 1, 0, 1, L->n_b ? N : N - L->oc, S))) return rc;
    if (!L->n_b) { /* the forward's bias, zeros */
        if ((rc = ct_cl_alloc(m->cl, &CT_DIRECT_ZEROS(L), (size_t)L->oc * sizeof(float), "zero bias"))) return rc;
        ct_cl_fill0(m->cl, CT_DIRECT_ZEROS(L), 0, (size_t)L->oc * sizeof(float));
    }
    return dcol ? ct_gemm_reserve(&m->gemm, 0, 1, (int)rows, (int)kk, L->oc) : 0;
}
