/* nn/layers/conv.c: [conv] (alias [convolutional]): 2-D convolution as
 * im2col + GEMM with the bias and ReLU fused into the GEMM; weights
 * [k, k, ic, oc] (HWIO), bias [oc]. A 3x3 stride-1 convolution chosen by
 * --conv (ct_conv_wino_tile) runs as Winograd F(2x2, 3x3) or F(4x4, 3x3)
 * instead: transforms in kernels/winograd.cl around 16 or 36 GEMMs (one
 * batched launch), forward and both gradients. On a CPU the others (first
 * layers, strided and non-3x3 ones; outputs in 16s: ct_conv_rule) run as
 * kernels/conv_direct.cl, without im2col's columns: the forward, the weight
 * gradient and, with input channels in 16s, the data gradient.
 * Kernels: kernels/conv.cl (im2col, col2im), kernels/winograd.cl,
 * kernels/conv_direct.cl and the GEMM. Reference: src/ref/conv.c; tests: tests/test_layers.c. */
#include "cltrain/layer.h"
#include <limits.h>
#include <string.h>

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

/* Winograd F(m x m, 3x3) (L->wino = m): m x m output tiles over oh x ow
 * (forward, weight gradient) and over ih x iw (data gradient), for a batch of
 * B; n*n = (m + 2)^2 points in the transformed domain */
static int wn2(const ct_layer *L) { return (L->wino + 2) * (L->wino + 2); }
static int tiles_side(int side, int m) { return (side + m - 1) / m; }
static size_t tiles_out(const ct_layer *L, int B) {
    return (size_t)B * tiles_side(L->oh, L->wino) * tiles_side(L->ow, L->wino);
}
static size_t tiles_in(const ct_layer *L, int B) {
    return (size_t)B * tiles_side(L->ih, L->wino) * tiles_side(L->iw, L->wino);
}
static const struct ct_wino_kernels *wk(const ct_model *m, const ct_layer *L) { return &m->wino[L->wino == 4]; }

/* wino_fused (CPU, F(4x4)): tiles per work-item, the most input channels
 * (its tiles' V in private memory). Tuned on PoCL, AVX-512 (bench kernels,
 * resnet20 and mnist-cnn): 8 tiles x 16 outputs beat 4 x 32, 6 x 32, 4 x 64,
 * 12 x 16 and 16 x 16 by 5-25%. */
enum { WINO_FT = 8, WINO_FUSED_C = 64, WINO_DWF_C = 32 };

/* winograd.cl for L's tile size, built by the first layer that needs it (a
 * model without Winograd layers, or with one tile size, compiles no more) */
static int wino_build(ct_model *m, const ct_layer *L) {
    struct ct_wino_kernels *w = &m->wino[L->wino == 4];
    if (w->p) return 0;
    /* 16-wide channel runs where a CPU has 16-wide registers: F(4x4) per-tile kernels 1.1-1.5x on AVX-512 */
    char opts[128];
    snprintf(opts, sizeof opts, "-DWINO_M=%d%s", L->wino == 4 ? 4 : 2,
             L->wino == 4 && m->cl->is_cpu && m->cl->float_width >= 16 ? " -DWINO_VW=16" : "");
    if (L->wino == 4 && m->cl->is_cpu) /* the fused kernel, for CPUs only (its private tiles) */
        snprintf(opts + strlen(opts), sizeof opts - strlen(opts), " -DWINO_FUSED -DFT=%d -DWINO_FUSED_C=%d -DWINO_DWF_C=%d",
                 WINO_FT, WINO_FUSED_C, WINO_DWF_C);
    int rc = ct_cl_build(m->cl, &w->p, "winograd.cl", opts);
    if (rc) return rc;
    w->in = ct_cl_kernel(w->p, "wino_in");
    w->w = ct_cl_kernel(w->p, "wino_w");
    w->out = ct_cl_kernel(w->p, "wino_out");
    w->dy = ct_cl_kernel(w->p, "wino_dy");
    w->dw = ct_cl_kernel(w->p, "wino_dw");
    w->w16 = ct_cl_kernel(w->p, "wino_w16");
    w->dw16 = ct_cl_kernel(w->p, "wino_dw16");
    if (L->wino == 4 && m->cl->is_cpu) {
        w->fused = ct_cl_kernel(w->p, "wino_fused");
        w->dw_fused = ct_cl_kernel(w->p, "wino_dw_fused");
    }
    return 0;
}

/* Whether a Winograd convolution from cin to kout channels runs as the one
 * fused kernel (wino_fused, kernels/winograd.cl): on a CPU, F(4x4), kout a
 * multiple of 16 and cin at most WINO_FUSED_C. It avoids writing and reading
 * V and M, which made the separate kernels memory-bound (bench kernels,
 * forward): resnet20's 16 -> 16 layers 3.6-4.4 -> 1.4-1.5 ms, its 32 -> 32
 * ones 1.7 -> 1.1-1.3, mnist-cnn's 32 -> 64 8.9 -> 4.7 ms. At 128 input
 * channels the batched GEMMs won (cifar-cnn's 8x8 layer: 4.9 against 7.7). */
static int fused(const ct_model *m, const ct_layer *L, int cin, int kout) {
    return !m->wino_unfused && m->cl->is_cpu && L->wino == 4 && kout % 16 == 0 && cin <= WINO_FUSED_C;
}

/* Whether L's weight gradient runs as wino_dw_fused: on a CPU, F(4x4), at
 * most WINO_DWF_C channels in and out (its dU in private memory), the
 * outputs a multiple of 16. */
static int dw_fused(const ct_model *m, const ct_layer *L) {
    return !m->wino_unfused && m->cl->is_cpu && L->wino == 4 && L->ic <= WINO_DWF_C && L->oc <= WINO_DWF_C &&
           L->oc % 16 == 0;
}

/* wino_dw_fused's work-items for T tiles (a few per compute unit) and the tiles each takes */
static int dw_splits(const ct_model *m, int T, int *per) {
    int S = 8 * (int)m->cl->compute_units, groups = (T + WINO_FT - 1) / WINO_FT;
    if (S > groups) S = groups;
    if (S < 1) S = 1;
    int p = (T + S - 1) / S;
    *per = (p + WINO_FT - 1) / WINO_FT * WINO_FT;
    return (T + *per - 1) / *per;
}

/* the fused kernel: y (OH x OW x kout) from x (H x W x cin) with U in ws3 (+ bias, act) */
static void wino_fused(ct_model *m, const ct_layer *L, cl_mem y, cl_mem x, int has_bias, int act, int H, int W, int cin,
                       int pad, int OH, int OW, int kout, int B) {
    int TH = tiles_side(OH, L->wino), TW = tiles_side(OW, L->wino), T = B * TH * TW;
    cl_kernel k = wk(m, L)->fused;
    ct_kargs(k, y, x, m->ws3, m->params, (int)L->b_off, has_bias, act, H, W, cin, pad, OH, OW, kout, TH, TW, T);
    size_t gws = (size_t)(T + WINO_FT - 1) / WINO_FT, lws = 1;
    ct_cl_run(m->cl, k, "wino_fused", 1, &gws, &lws);
}

static size_t max2(size_t a, size_t b) { return a > b ? a : b; }

/* The forward's V (Winograd) or im2col columns are kept for the weight
 * gradient, which then skips one of its two input transforms or its im2col,
 * while all the layers' buffers fit this budget (80 MB of V for cifar-cnn at
 * batch 128, 14 MB of columns for its first layer; the first layers of a
 * 128x128 VGG would take gigabytes, and recompute). */
#define KEEP_BYTES ((size_t)1 << 30)

/* Work-groups of the per-tile kernels (wino_in, wino_out, wino_dy). Left to
 * PoCL, F(4x4, 3x3)'s wino_in got 4096 work-items, each with several KiB of
 * private tiles kept for the whole group on its thread's stack: a crash. */
static const size_t tile_lws = 64;

/* Winograd's tile side for L, or 0 (im2col): --conv, or under --conv auto the
 * tuning database's choice for this shape, else the shipped rule */
static int pick_tile(const ct_model *m, const ct_layer *L, int batch) {
    int rule = ct_conv_rule(m->conv_algo, L->k, L->stride, L->ic, L->oc, m->cl->is_cpu);
    if (m->conv_algo != CT_CONV_AUTO || !ct_conv_tunable(L) || m->db_defaults) return rule;
    ct_conv_choice key = ct_conv_key(L, batch);
    const ct_conv_choice *c = ct_conv_find(&m->gemm, &key);
    if (c && c->tile == CT_TILE_DIRECT && !ct_conv_direct_fits(L->k, L->ic, L->oc)) return rule;
    return c ? c->tile : rule;
}

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
 * L->direct; 0, or 1 when the model has no slot left (L then runs im2col) */
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
    int slots = (int)(sizeof m->direct / sizeof *m->direct), i = 0;
    while (i < slots && m->direct[i].p && strcmp(m->direct[i].opts, opts)) i++;
    if (i == slots) return 1;
    struct ct_direct_kernels *d = &m->direct[i];
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
    L->direct = i + 1;
    return 0;
}

/* y = act(conv(x) + b), the weights first copied to the (aligned) start of ws */
static void direct_forward(ct_model *m, const ct_layer *L, cl_mem x, int B) {
    const struct ct_direct_kernels *d = &m->direct[L->direct - 1];
    int rows = B * L->oh * L->ow, per = direct_per(m, rows);
    CL_CHECK(clEnqueueCopyBuffer(m->cl->queue, m->params, m->ws, L->w_off * sizeof(float), 0, L->n_w * sizeof(float), 0,
                                 NULL, NULL));
    ct_kargs(d->fwd, L->out, x, m->ws, m->params, (int)L->b_off, ct_fused_act(m, L), L->ih, L->iw, L->pad, L->oh, L->ow, rows, per);
    size_t gws = (size_t)((rows + per - 1) / per), one = 1;
    ct_cl_run(m->cl, d->fwd, "direct_fwd", 1, &gws, &one);
}

/* dW and db += the strips' partial sums (the bias follows the weights in the gradients) */
static void direct_weight_grad(ct_model *m, const ct_layer *L, cl_mem x, cl_mem dy, int B) {
    const struct ct_direct_kernels *d = &m->direct[L->direct - 1];
    int kk = direct_kk(L), rows = B * L->oh * L->ow, S = direct_strips(m, L, rows), per = (rows + S - 1) / S,
        n = (kk + 1) * L->oc;
    CT_ASSERT(L->b_off == L->w_off + L->n_w);
    ct_kargs(d->dw, m->ws, x, dy, L->ih, L->iw, L->pad, L->oh, L->ow, rows, per);
    size_t one[2] = {1, 1};
    if (kk <= DIRECT_KK) {
        size_t gws = (size_t)S;
        ct_cl_run(m->cl, d->dw, "direct_dw", 1, &gws, one);
    } else {
        size_t gws[2] = {(size_t)(kk / direct_chn(L)), (size_t)S};
        ct_cl_run(m->cl, d->dw, "direct_dw_taps", 2, gws, one);
    }
    ct_gemm_run(&m->gemm, 1, 0, 1, n, S, 1.0f, m->ones, 0, 1, m->ws, 0, n, 1.0f, m->grads, L->w_off, n, NULL, 0, 0);
}

/* dx from dy by direct_dx (input channels in 16s), the turned weights and a row of zeros first in ws */
static void direct_data_grad(ct_model *m, const ct_layer *L, cl_mem dy, int B) {
    const struct ct_direct_kernels *d = &m->direct[L->direct - 1];
    ct_kargs(d->wt, m->ws, m->params, (int)L->w_off);
    size_t gw = L->n_w + (size_t)L->oc, one = 1;
    ct_cl_run(m->cl, d->wt, "direct_wt", 1, &gw, NULL);
    int lines = B * L->ih * L->stride, per = direct_runs(m, lines);
    ct_kargs(d->dx, L->dx, dy, m->ws, L->ih, L->iw, L->pad, L->oh, L->ow, lines, per);
    size_t gws = (size_t)((lines + per - 1) / per);
    ct_cl_run(m->cl, d->dx, "direct_dx", 1, &gws, &one);
}

static int setup(ct_model *m, ct_layer *L, int batch, ct_needs *n) {
    size_t rows = (size_t)batch * L->oh * L->ow, kk = (size_t)L->k * L->k * L->ic;
    if (rows > n->ones) n->ones = rows;
    int tile = pick_tile(m, L, batch), rc;
    L->wino = tile == CT_TILE_DIRECT ? 0 : tile;
    L->direct = 0;
    if (tile == CT_TILE_DIRECT && (rc = direct_build(m, L)) < 0) return rc;
    if (L->direct) { /* in ws: the strips' partial sums; direct_dx's turned weights (fewer), or im2col's dcol */
        int S = direct_strips(m, L, (int)rows), N = (int)(kk + 1) * L->oc, dcol = L->dx && L->ic % 16;
        size_t w = max2((size_t)S * (size_t)N, dcol ? rows * kk : 0);
        if ((size_t)S > n->ones) n->ones = (size_t)S; /* the GEMM's row of ones */
        if (w > n->ws) n->ws = w;
        if ((rc = ct_gemm_reserve(&m->gemm, 1, 0, 1, N, S))) return rc;
        return dcol ? ct_gemm_reserve(&m->gemm, 0, 1, (int)rows, (int)kk, L->oc) : 0;
    }
    if (!L->wino) {
        if (rows * kk > n->ws) n->ws = rows * kk;
        size_t keep = rows * kk * sizeof(float);
        if (n->kept + keep <= KEEP_BYTES) {
            char what[64];
            snprintf(what, sizeof what, "layer %d im2col columns", (int)(L - m->layers));
            if ((rc = ct_cl_alloc(m->cl, &L->fwd_keep, keep, what))) return rc;
            n->kept += keep;
        }
        return ct_layer_reserve_gemm(m, (int)rows, L->oc, (int)kk);
    }
    /* ws: V (or dy's V); ws2: M, the data gradient's M, or Z; ws3: U or dU */
    size_t T = tiles_out(L, batch), T2 = tiles_in(L, batch), C = (size_t)L->ic, K = (size_t)L->oc, P = (size_t)wn2(L);
    /* ws2 also holds wino_dy's per-tile sums of dy (T x K) after Z */
    size_t w1 = P * max2(T * C, T2 * K), w2 = max2(P * T * K + T * K, P * T2 * C), w3 = P * C * K;
    /* a fused weight gradient: its S partial dU and bias sums in ws; the bias gradient sums S rows, else T */
    int dwf = dw_fused(m, L), per, S = dw_splits(m, (int)T, &per);
    if (dwf) w1 = max2(w1, (size_t)S * (P * C * K + K));
    if (w1 > n->ws) n->ws = w1;
    if (w2 > n->ws2) n->ws2 = w2;
    if (w3 > n->ws3) n->ws3 = w3;
    if (T > INT_MAX / P || T2 > INT_MAX / P)
        return ct_fail(CT_EINPUT, "layer at line %d: %zu Winograd tiles for a batch of %d; use a smaller --batch",
                       L->line, T > T2 ? T : T2, batch);
    if ((rc = wino_build(m, L))) return rc;
    size_t keep = P * T * C * sizeof(float);
    if (!fused(m, L, L->ic, L->oc) && n->kept + keep <= KEEP_BYTES) { /* a fused forward makes no V */
        char what[64];
        snprintf(what, sizeof what, "layer %d Winograd input tiles", (int)(L - m->layers));
        if ((rc = ct_cl_alloc(m->cl, &L->fwd_keep, keep, what))) return rc;
        n->kept += keep;
    }
    if ((rc = ct_gemm_reserve(&m->gemm, 1, 0, 1, L->oc, dwf ? S : (int)T))) return rc; /* bias gradient, from tile sums */
    int np = wn2(L); /* each a batch of n*n products, one launch */
    if ((rc = ct_gemm_reserve_batched(&m->gemm, np, 0, 0, (int)T, L->oc, L->ic))) return rc;  /* forward */
    if ((rc = ct_gemm_reserve_batched(&m->gemm, np, 1, 0, L->ic, L->oc, (int)T))) return rc;  /* weight gradient */
    return ct_gemm_reserve_batched(&m->gemm, np, 0, 0, (int)T2, L->ic, L->oc);                /* data gradient */
}

/* V [n*n][T][C] of x's tiles (pad pad; the tile grid of an oh x ow output) into V */
static void wino_in(ct_model *m, const ct_layer *L, cl_mem V, cl_mem x, int H, int W, int C, int pad, int OH, int OW,
                    int B) {
    int TH = tiles_side(OH, L->wino), TW = tiles_side(OW, L->wino), T = B * TH * TW;
    cl_kernel k = wk(m, L)->in;
    ct_kargs(k, V, x, H, W, C, pad, TH, TW, T);
    size_t gws = (size_t)T;
    ct_cl_run(m->cl, k, "wino_in", 1, &gws, &tile_lws);
}

/* the n*n GEMMs M[xi] (T x N) = V[xi] (T x Kd) * U[xi] (Kd x N): V * ws3 -> ws2 */
static void wino_gemms(ct_model *m, const ct_layer *L, cl_mem V, int T, int N, int Kd) {
    ct_gemm_run_batched(&m->gemm, wn2(L), 0, T, N, Kd, 1.0f, V, 0, Kd, (size_t)T * Kd, m->ws3, 0, N, (size_t)Kd * N, 0.0f,
                        m->ws2, 0, N, (size_t)T * N);
}

/* y [B, OH, OW, N] = A^T M A (+ bias, act) from ws2 */
static void wino_out(ct_model *m, const ct_layer *L, cl_mem y, int has_bias, int act, int OH, int OW, int N, int B) {
    int TH = tiles_side(OH, L->wino), TW = tiles_side(OW, L->wino), T = B * TH * TW;
    cl_kernel k = wk(m, L)->out;
    ct_kargs(k, y, m->ws2, m->params, (int)L->b_off, has_bias, act, OH, OW, N, TH, TW, T);
    size_t gws = (size_t)T;
    ct_cl_run(m->cl, k, "wino_out", 1, &gws, &tile_lws);
}

/* U (ws3) from the weights, turned for the data gradient when flip; on a CPU 16 of U's contiguous index per
 * work-item (wino_w16) when they come in 16s */
static void wino_weights(ct_model *m, const ct_layer *L, int flip) {
    size_t K = (size_t)L->oc, C = (size_t)L->ic, gws[2] = {flip ? C : K, flip ? K : C};
    int wide = m->cl->is_cpu && gws[0] % 16 == 0;
    cl_kernel k = wide ? wk(m, L)->w16 : wk(m, L)->w;
    if (wide) gws[0] /= 16;
    size_t lws[2] = {ct_divisor_upto(gws[0], 16), 1}; /* (its private tiles, several KiB per work-item) */
    ct_kargs(k, m->ws3, m->params, (int)L->w_off, L->ic, L->oc, flip);
    ct_cl_run(m->cl, k, wide ? "wino_w16" : "wino_w", 2, gws, wide ? lws : NULL);
}

/* dW += G^T dU G, dU the sum of S partials in dU (wino_dw, or 16 outputs per work-item on a CPU: wino_dw16) */
static void wino_dw_sum(ct_model *m, const ct_layer *L, cl_mem dU, int S) {
    const struct ct_wino_kernels *w = wk(m, L);
    int C = L->ic, K = L->oc, wide = m->cl->is_cpu && K % 16 == 0;
    size_t gw[2] = {(size_t)(wide ? K / 16 : K), (size_t)C}, lws[2] = {ct_divisor_upto(gw[0], 16), 1};
    cl_kernel k = wide ? w->dw16 : w->dw;
    ct_kargs(k, m->grads, (int)L->w_off, dU, C, K, S);
    ct_cl_run(m->cl, k, wide ? "wino_dw16" : "wino_dw", 2, gw, wide ? lws : NULL);
}

static void wino_forward(ct_model *m, const ct_layer *L, cl_mem x, int B) {
    cl_mem V = L->fwd_keep ? L->fwd_keep : m->ws;
    wino_weights(m, L, 0);
    if (fused(m, L, L->ic, L->oc)) {
        wino_fused(m, L, L->out, x, 1, ct_fused_act(m, L), L->ih, L->iw, L->ic, L->pad, L->oh, L->ow, L->oc, B);
        return;
    }
    wino_in(m, L, V, x, L->ih, L->iw, L->ic, L->pad, L->oh, L->ow, B);
    wino_gemms(m, L, V, (int)tiles_out(L, B), L->oc, L->ic);
    wino_out(m, L, L->out, 1, ct_fused_act(m, L), L->oh, L->ow, L->oc, B);
}

/* The weight gradient through memory: V (kept, or wino_in again), Z = A dY
 * A^T and the tile sums of dy (wino_dy), the bias gradient from those sums,
 * dU[xi] = V[xi]^T Z[xi] (36 GEMMs), dW += G^T dU G (wino_dw) */
static void wino_weight_grad(ct_model *m, const ct_layer *L, cl_mem x, cl_mem dy, int B) {
    int T = (int)tiles_out(L, B), TH = tiles_side(L->oh, L->wino), TW = tiles_side(L->ow, L->wino), C = L->ic, K = L->oc;
    const struct ct_wino_kernels *w = wk(m, L);
    cl_mem V = L->fwd_keep;
    if (!V) wino_in(m, L, V = m->ws, x, L->ih, L->iw, C, L->pad, L->oh, L->ow, B);
    size_t zs = (size_t)wn2(L) * T * K; /* the tile sums of dy follow Z in ws2 */
    ct_kargs(w->dy, m->ws2, m->ws2, (int)zs, dy, L->oh, L->ow, K, TH, TW, T);
    size_t gws = (size_t)T;
    ct_cl_run(m->cl, w->dy, "wino_dy", 1, &gws, &tile_lws);
    ct_gemm_run(&m->gemm, 1, 0, 1, K, T, 1.0f, m->ones, 0, 1, m->ws2, zs, K, 1.0f, m->grads, L->b_off, K, NULL, 0, 0);
    ct_gemm_run_batched(&m->gemm, wn2(L), 1, C, K, T, 1.0f, V, 0, C, (size_t)T * C, m->ws2, 0, K, (size_t)T * K, 0.0f,
                        m->ws3, 0, K, (size_t)C * K);
    wino_dw_sum(m, L, m->ws3, 1);
}

/* dW += G^T (sum over tiles of V .* A dY A^T) G (V: the forward's, when
 * kept); dx = the data gradient's Winograd convolution of dy (pad 2 - pad,
 * weights turned, C and K swapped). x is the input of the last forward. */
static void wino_backward(ct_model *m, const ct_layer *L, cl_mem x, cl_mem dy, int B) {
    int T = (int)tiles_out(L, B), TH = tiles_side(L->oh, L->wino), TW = tiles_side(L->ow, L->wino), C = L->ic, K = L->oc;
    const struct ct_wino_kernels *w = wk(m, L);
    if (dw_fused(m, L)) { /* partial dU and tile sums of dy into ws, then summed */
        int per, S = dw_splits(m, T, &per);
        size_t P = (size_t)wn2(L) * C * K, gs = (size_t)S, one = 1;
        ct_kargs(w->dw_fused, m->ws, x, dy, L->ih, L->iw, C, L->pad, L->oh, L->ow, K, TH, TW, T, per, S);
        ct_cl_run(m->cl, w->dw_fused, "wino_dw_fused", 1, &gs, &one);
        ct_gemm_run(&m->gemm, 1, 0, 1, K, S, 1.0f, m->ones, 0, 1, m->ws, (size_t)S * P, K, 1.0f, m->grads, L->b_off, K, NULL,
                    0, 0);
        wino_dw_sum(m, L, m->ws, S);
    } else {
        wino_weight_grad(m, L, x, dy, B);
    }
    if (!L->dx) return;
    wino_weights(m, L, 1);
    if (fused(m, L, K, C)) {
        wino_fused(m, L, L->dx, dy, 0, 0, L->oh, L->ow, K, 2 - L->pad, L->ih, L->iw, C, B);
        return;
    }
    wino_in(m, L, m->ws, dy, L->oh, L->ow, K, 2 - L->pad, L->ih, L->iw, B);
    wino_gemms(m, L, m->ws, (int)tiles_in(L, B), C, K);
    wino_out(m, L, L->dx, 0, 0, L->ih, L->iw, C, B);
}

/* im2col(x) into the kept columns (or the workspace), which it returns */
static cl_mem run_im2col(ct_model *m, const ct_layer *L, cl_mem x, int B) {
    cl_mem col = L->fwd_keep ? L->fwd_keep : m->ws;
    ct_kargs(m->k_im2col, col, x, L->ih, L->iw, L->ic, L->k, L->k, L->stride, L->pad, L->oh, L->ow);
    size_t gws = (size_t)B * L->oh * L->ow;
    ct_cl_run(m->cl, m->k_im2col, "im2col", 1, &gws, NULL);
    return col;
}

/* out[B*oh*ow, oc] = act(im2col(x) W + b) */
static void forward(ct_model *m, int i, cl_mem x, int B) {
    ct_layer *L = &m->layers[i];
    if (L->wino) {
        wino_forward(m, L, x, B);
        return;
    }
    if (L->direct) {
        direct_forward(m, L, x, B);
        return;
    }
    int rows = B * L->oh * L->ow, kk = L->k * L->k * L->ic;
    cl_mem col = run_im2col(m, L, x, B);
    ct_gemm_run(&m->gemm, 0, 0, rows, L->oc, kk, 1.0f, col, 0, kk, m->params, L->w_off, L->oc, 0.0f, L->out, 0,
                L->oc, m->params, L->b_off, ct_fused_act(m, L));
}

/* db += 1^T dy ; dW += col^T dy (or the direct kernel's sums) ; dcol = dy W^T ; dx = col2im(dcol).
 * x is the input of the last forward. */
static void backward(ct_model *m, int i, cl_mem x, cl_mem dy, int B) {
    ct_layer *L = &m->layers[i];
    int rows = B * L->oh * L->ow, kk = L->k * L->k * L->ic;
    if (L->wino) { /* the bias gradient from wino_dy's tile sums */
        wino_backward(m, L, x, dy, B);
        return;
    }
    if (L->direct) {
        direct_weight_grad(m, L, x, dy, B);
    } else {
        ct_gemm_run(&m->gemm, 1, 0, 1, L->oc, rows, 1.0f, m->ones, 0, 1, dy, 0, L->oc, 1.0f, m->grads, L->b_off, L->oc,
                    NULL, 0, 0);
        cl_mem col = L->fwd_keep ? L->fwd_keep : run_im2col(m, L, x, B); /* kept: the last forward's */
        ct_gemm_run(&m->gemm, 1, 0, kk, L->oc, rows, 1.0f, col, 0, kk, dy, 0, L->oc, 1.0f, m->grads, L->w_off, L->oc, NULL,
                    0, 0);
    }
    if (!L->dx) return;
    if (L->direct && L->ic % 16 == 0) {
        direct_data_grad(m, L, dy, B);
        return;
    }
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
