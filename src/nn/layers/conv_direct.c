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

static int direct_kk(const ct_layer *L) { return L->k * L->k * L->ic; }
/* the output vectors of a pixel: outputs in 8s, the last vector half used where they are not in 16s */
static int direct_kv(const ct_layer *L) { return (L->oc + 15) / 16; }

/* the output vectors per pass: the largest divisor of kv at most most (1 at least) */
static int vectors_per_pass(int kv, int most) { return (int)ct_divisor_upto((size_t)kv, (size_t)most); }
/* direct_dw_taps' channels per work-item: the largest divisor of the input channels up to DIRECT_CHN */
static int direct_chn(const ct_layer *L) { return (int)ct_divisor_upto((size_t)L->ic, DIRECT_CHN); }

/* conv_direct.cl's build parameters for L: the accumulators of a pass stay in registers (direct_fwd's PX*VG,
 * direct_dw's KK*VB, direct_dw_taps' CHN*VT) */
typedef struct { long kh, kw, ci, kk, kv, ko, vg, vb, chn, vt; } direct_dims;
static direct_dims dims_of(const ct_layer *L) {
    direct_dims d = {L->k, L->k, L->ic, direct_kk(L), direct_kv(L), L->oc, 0, 0, direct_chn(L), 0};
    d.vg = vectors_per_pass((int)d.kv, 16 / DIRECT_PX);
    d.vb = vectors_per_pass((int)d.kv, d.kk <= 28 ? 28 / (int)d.kk : 1);
    d.vt = vectors_per_pass((int)d.kv, 24 / (int)d.chn);
    return d;
}

/* ---- a device that ends a work-item's loops early (ct_cl_loop_limit: Mesa 22.3's llvmpipe, 65535
 * iterations in all) ----
 * Each kernel's loop iterations per piece of its work, worst case: every loop counted with its exit test,
 * none taken as unrolled. Work-items then take no more pieces than fit: runs of PX pixels (forward), pixels
 * of a strip (weight gradient), image lines (data gradient). A layer whose single run or pixel does not fit
 * runs im2col, and one whose single line does not fit im2col's data gradient. */
static long window_cost(const direct_dims *d) { /* window(): a border window, element by element */
    return (d->kh + 1) + d->kh * (d->kw + 1) + d->kh * d->kw * (d->ci + 1);
}
static long fwd_run_cost(const direct_dims *d) { /* direct_fwd, one run of PX pixels */
    long px = DIRECT_PX, passes = d->kv / d->vg, acc = (px + 1) + px * (d->vg + 1);
    long win = window_cost(d) > d->kk + 1 ? window_cost(d) : d->kk + 1;
    return 1 + (px + 1) + px * win + (passes + 1) +
           passes * (2 * acc + (d->kk + 1) + d->kk * ((d->vg + 1) + (px + 1) + px * (d->vg + 1)));
}
static long dw_pixel_cost(const direct_dims *d) { /* direct_dw or direct_dw_taps, one pixel of a strip */
    if (d->kk <= DIRECT_KK) return (d->kv / d->vb) * (1 + window_cost(d) + (d->vb + 1) + d->vb * (d->kk + 1));
    return (d->kv / d->vt) * (1 + 2 * (d->vt + 1) + (d->chn + 1) + d->chn * (d->vt + 1));
}
static long dx_line_cost(const direct_dims *d, const ct_layer *L) { /* direct_dx, one line of dx */
    long cv = d->ci / 16, qx = cv >= 4 ? 4 : 8, runs = L->iw / (qx * L->stride) + 2;
    long out = (qx + 1) + qx * (cv + 1);
    long tap = (qx + 1) + (d->ko + 1) + d->ko * ((cv + 1) + (qx + 1) + qx * (cv + 1));
    return (runs + 1) + runs * (2 * out + (d->kh + 1) + d->kh * ((d->kw + 1) + d->kw * tap));
}

/* whether L's forward and weight gradient fit the device's loops at all */
static int direct_loops_fit(ct_model *m, const ct_layer *L) {
    direct_dims d = dims_of(L);
    return ct_cl_loop_room(m->cl, fwd_run_cost(&d)) >= 1 && ct_cl_loop_room(m->cl, dw_pixel_cost(&d)) >= 1;
}

/* whether L's data gradient runs direct_dx: input channels in 16s, and one line within the device's loops */
int ct_conv_direct_dx(ct_model *m, const ct_layer *L) {
    if (L->ic % 16) return 0;
    direct_dims d = dims_of(L);
    return ct_cl_loop_room(m->cl, dx_line_cost(&d, L)) >= 1;
}

/* direct_fwd's pixels per work-item: a multiple of its PX */
static int direct_per(ct_model *m, const ct_layer *L, int rows) {
    long runs = (direct_runs(m, rows) + DIRECT_PX - 1) / DIRECT_PX;
    direct_dims d = dims_of(L);
    long room = ct_cl_loop_room(m->cl, fwd_run_cost(&d));
    if (runs > room) runs = room > 1 ? room : 1;
    return (int)runs * DIRECT_PX;
}

/* The weight gradient's strips for `rows` pixels: DIRECT_STRIPS per compute
 * unit, or more, so that a strip's dy (which direct_dw_taps' work-items each
 * read again) stays under DIRECT_STRIP_BYTES, in cache: cifar-tf's first
 * layer (25 taps, 64 outputs) took 12.4 ms with 16 strips of 2 MB of dy. */
enum { DIRECT_STRIP_BYTES = 256 << 10 };
static int direct_strips(ct_model *m, const ct_layer *L, int rows) {
    int S = DIRECT_STRIPS * (int)m->cl->compute_units;
    size_t dy = (size_t)rows * L->oc * sizeof(float), cache = (size_t)S * DIRECT_STRIP_BYTES;
    if (direct_kk(L) > DIRECT_KK && dy > cache) S = (int)((dy + DIRECT_STRIP_BYTES - 1) / DIRECT_STRIP_BYTES);
    direct_dims d = dims_of(L);
    long room = ct_cl_loop_room(m->cl, dw_pixel_cost(&d)); /* each strip's pixels within the device's loops */
    if (room >= 1 && (rows + S - 1) / S > room) S = (int)((rows + room - 1) / room);
    return S < rows ? S : rows;
}

/* conv_direct.cl built for L's shape (shared by the layers of one shape) into
 * CT_CONV_DIRECT(L); 0, or 1 when the model has no slot left or the device's
 * loops are too short for L's smallest pieces (L then runs im2col) */
static int direct_build(ct_model *m, ct_layer *L) {
    if (!direct_loops_fit(m, L)) return 1;
    direct_dims d = dims_of(L);
    int kk = (int)d.kk, dx = ct_conv_direct_dx(m, L);
    char opts[128];
    int n = snprintf(opts, sizeof opts, "-DKH=%d -DKW=%d -DCI=%d -DSTRIDE=%d -DKO=%d -DKV=%d -DVG=%d -DVB=%d", L->k,
                     L->k, L->ic, L->stride, L->oc, (int)d.kv, (int)d.vg, (int)d.vb);
    if (kk > DIRECT_KK) n += snprintf(opts + n, sizeof opts - (size_t)n, " -DCHN=%d -DVT=%d", (int)d.chn, (int)d.vt);
    if (dx) snprintf(opts + n, sizeof opts - (size_t)n, " -DDX");
    ct_conv_kind *ck = ct_conv_kind_of(m, L);
    int slots = (int)(sizeof ck->direct / sizeof *ck->direct), i = 0;
    while (i < slots && ck->direct[i].p && strcmp(ck->direct[i].opts, opts)) i++;
    if (i == slots) return 1;
    struct ct_direct_kernels *dk = &ck->direct[i];
    if (!dk->p) {
        int rc = ct_cl_build(m->cl, &dk->p, "conv_direct.cl", opts);
        if (rc) return rc;
        snprintf(dk->opts, sizeof dk->opts, "%s", opts);
        dk->fwd = ct_cl_kernel(dk->p, "direct_fwd");
        dk->dw = kk <= DIRECT_KK ? ct_cl_kernel(dk->p, "direct_dw") : ct_cl_kernel(dk->p, "direct_dw_taps");
        if (dx) {
            dk->wt = ct_cl_kernel(dk->p, "direct_wt");
            dk->dx = ct_cl_kernel(dk->p, "direct_dx");
        }
    }
    CT_CONV_DIRECT(L) = i + 1;
    return 0;
}

/* y = act(conv(x) + b), the weights first copied to the (aligned) start of ws, in rows of whole
 * vectors: outputs not in 16s get each row padded with zeros to the next 16 */
void ct_conv_direct_forward(ct_model *m, const ct_layer *L, cl_mem x, int B) {
    const struct ct_direct_kernels *d = &ct_conv_kind_of(m, L)->direct[CT_CONV_DIRECT(L) - 1];
    int rows = B * L->oh * L->ow, per = direct_per(m, L, rows);
    if (L->oc % 16 == 0) {
        CL_CHECK(clEnqueueCopyBuffer(m->cl->queue, m->params, m->ws, L->w_off * sizeof(float), 0, L->n_w * sizeof(float),
                                     0, NULL, NULL));
    } else {
        size_t kk = (size_t)direct_kk(L), ko = (size_t)L->oc * sizeof(float), pitch = (size_t)direct_kv(L) * 16 * sizeof(float);
        ct_cl_fill0(m->cl, m->ws, 0, kk * pitch);
        size_t src[3] = {L->w_off * sizeof(float), 0, 0}, dst[3] = {0, 0, 0}, region[3] = {ko, kk, 1};
        CL_CHECK(clEnqueueCopyBufferRect(m->cl->queue, m->params, m->ws, src, dst, region, ko, 0, pitch, 0, 0, NULL, NULL));
    }
    /* no bias: a buffer of zeros in its place */
    ct_kargs(d->fwd, L->out, x, m->ws, L->n_b ? m->params : CT_DIRECT_ZEROS(L), L->n_b ? (int)L->b_off : 0, ct_fused_act(m, L), L->ih, L->iw, L->pad, L->oh, L->ow, rows, per);
    size_t gws = (size_t)((rows + per - 1) / per), one = 1;
    ct_cl_run(m->cl, d->fwd, "direct_fwd", 1, &gws, &one);
}

/* dW and db += the strips' partial sums (the bias follows the weights in the gradients) */
void ct_conv_direct_weight_grad(ct_model *m, const ct_layer *L, cl_mem x, cl_mem dy, int B) {
    if (L->lr_w == 0.0f) { /* frozen weights (whiten=) get no gradient, as im2col's: the bias's alone */
        if (L->n_b) ct_layer_bias_grad(m, dy, 0, B * L->oh * L->ow, L->oc, L->b_off);
        return;
    }
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
    direct_dims dd = dims_of(L);
    long room = ct_cl_loop_room(m->cl, dx_line_cost(&dd, L)); /* at least 1: ct_conv_direct_dx */
    if (per > room) per = (int)room;
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
    int S = direct_strips(m, L, (int)rows), N = (int)(kk + 1) * L->oc, dcol = L->dx && !ct_conv_direct_dx(m, L);
    size_t w = ct_max2((size_t)S * (size_t)N, dcol ? rows * kk : 0);
    w = ct_max2(w, kk * (size_t)direct_kv(L) * 16); /* the forward's padded weights */
    if ((size_t)S > n->ones) n->ones = (size_t)S; /* the GEMM's row of ones */
    if (w > n->ws) n->ws = w;
    if ((rc = ct_gemm_reserve(&m->gemm, 1, 0, 1, L->n_b ? N : N - L->oc, S))) return rc;
    if (L->lr_w == 0.0f && L->n_b) { /* frozen weights: the bias gradient as im2col's, a row of ones times dy */
        if (rows > n->ones) n->ones = rows;
        if ((rc = ct_gemm_reserve(&m->gemm, 1, 0, 1, L->oc, (int)rows))) return rc;
    }
    if (!L->n_b) { /* the forward's bias, zeros */
        if ((rc = ct_cl_alloc(m->cl, &CT_DIRECT_ZEROS(L), (size_t)L->oc * sizeof(float), "zero bias"))) return rc;
        ct_cl_fill0(m->cl, CT_DIRECT_ZEROS(L), 0, (size_t)L->oc * sizeof(float));
    }
    return dcol ? ct_gemm_reserve(&m->gemm, 0, 1, (int)rows, (int)kk, L->oc) : 0;
}
