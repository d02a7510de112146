/* nn/layers/conv_winograd.c: [conv]'s 3x3 stride-1 convolutions chosen by
 * --conv (ct_conv_wino_tile) as Winograd F(2x2, 3x3) or F(4x4, 3x3):
 * transforms in kernels/winograd.cl around 16 or 36 GEMMs (one batched
 * launch), forward and both gradients; on a CPU, F(4x4)'s forward, data
 * gradient and small weight gradients as one fused kernel each.
 * Reference: src/ref/conv.c; tests: tests/test_layers.c (test_conv_winograd). */
#include "conv_kind.h"
#include <limits.h>
#include <string.h>

/* Winograd F(m x m, 3x3) (CT_CONV_WINO(L) = m): m x m output tiles over oh x ow
 * (forward, weight gradient) and over ih x iw (data gradient), for a batch of
 * B; n*n = (m + 2)^2 points in the transformed domain */
static int wn2(const ct_layer *L) { return (CT_CONV_WINO(L) + 2) * (CT_CONV_WINO(L) + 2); }
static int tiles_side(int side, int m) { return (side + m - 1) / m; }
static size_t tiles_out(const ct_layer *L, int B) {
    return (size_t)B * tiles_side(L->oh, CT_CONV_WINO(L)) * tiles_side(L->ow, CT_CONV_WINO(L));
}
static size_t tiles_in(const ct_layer *L, int B) {
    return (size_t)B * tiles_side(L->ih, CT_CONV_WINO(L)) * tiles_side(L->iw, CT_CONV_WINO(L));
}
static const struct ct_wino_kernels *wk(const ct_model *m, const ct_layer *L) { return &ct_conv_kind_of(m, L)->wino[CT_CONV_WINO(L) == 4]; }

/* wino_fused (CPU, F(4x4)): the most input channels (its tiles' V in private
 * memory), and wino_dw_fused's most channels in and out */
enum { WINO_FUSED_C = 64, WINO_DWF_C = 32 };

/* The fused kernels' tiles per work-item (FT), by CPU: 8, or 16 on an AMD one.
 * On the AVX-512 Xeon (PoCL; bench kernels, resnet20 and mnist-cnn) 8 tiles x
 * 16 outputs beat 4 x 32, 6 x 32, 4 x 64, 12 x 16 and 16 x 16 by 5-25%, an
 * earlier kernel, not measured there since. On a 2-core AMD EPYC (AVX-512,
 * family 26) 16 beat 8 in every one of 6 interleaved pairs of `bench train`
 * steps: resnet20 1.037x, cifar-cnn 1.022x, mnist-cnn 1.028x (batch 128),
 * cifar-fast at batch 1024 1.023x (4 pairs); 12, 24 and 32 were no better
 * than 16 there. m->wino_ft overrides it (tests run both). */
static int wino_ft(const ct_model *m) {
    if (m->wino_ft > 0) return m->wino_ft;
    return strstr(m->cl->vendor, "AMD") ? 16 : 8;
}
/* the most of U (bytes) one wino_fused work-item reads: its block of
 * outputs, kept in a core's L2 (2 MiB on the AVX-512 Xeon it was measured on)
 * for the work-items of every tile */
enum { WINO_FUSED_U = 1 << 20 };

/* U's row stride (floats) for n outputs per row, as the batched GEMMs read
 * it (B, ldb). On a CPU a stride that is a multiple of 512 bytes puts the
 * rows of a work-item's column panel into a few L1 sets, and the work-items
 * after it, which read the same panel, found it evicted: 16 floats more
 * (on PoCL, AVX-512, batch 1024) took cifar-fast's 256 -> 256 forward and
 * data-gradient products from 86-87 to 77 ms each, cifar-cnn's GEMMs
 * 14.6 -> 13.8 ms a step. */
static int u_ld(const ct_model *m, int n) { return m->cl->is_cpu && n % 128 == 0 ? n + 16 : n; }

#define R16(n) (((n) + 15) / 16 * 16)

/* wino_fused's outputs per work-item for cin -> kout: all kout, or the
 * fewest equal blocks (multiples of 16) whose U fits WINO_FUSED_U */
static int fused_kb(int cin, int kout) {
    size_t per16 = (size_t)36 * cin * 16 * sizeof(float); /* U of 16 outputs */
    int n16 = (kout + 15) / 16, max16 = (int)(WINO_FUSED_U / per16);
    if (max16 < 1) max16 = 1;
    int blocks = (n16 + max16 - 1) / max16;
    return 16 * ((n16 + blocks - 1) / blocks);
}

/* Whether the device ends a work-item's loops early (ct_cl_loop_limit: Mesa 22.3's llvmpipe, 65535 iterations
 * in all). The fused kernels loop over every tile, channel and point in one work-item: 8x8x64 -> 32 is some
 * 100000 iterations, and came out as NaN there. Such a device runs the separate kernels, whose work-items loop
 * over at most one tile's channels. */
static int loop_capped(const ct_model *m) { return ct_cl_loop_limit(m->cl) > 0; }

/* winograd.cl for L's tile size, built by the first layer that needs it (a
 * model without Winograd layers, or with one tile size, compiles no more) */
static int wino_build(ct_model *m, const ct_layer *L) {
    struct ct_wino_kernels *w = &ct_conv_kind_of(m, L)->wino[CT_CONV_WINO(L) == 4];
    if (w->p) return 0;
    /* 16-wide channel runs where a CPU has 16-wide registers: F(4x4) per-tile kernels 1.1-1.5x on AVX-512 */
    char opts[128];
    snprintf(opts, sizeof opts, "-DWINO_M=%d%s", CT_CONV_WINO(L) == 4 ? 4 : 2,
             CT_CONV_WINO(L) == 4 && m->cl->is_cpu && m->cl->float_width >= 16 ? " -DWINO_VW=16" : "");
    if (CT_CONV_WINO(L) == 4 && m->cl->is_cpu && !loop_capped(m)) /* the fused kernels, for CPUs only (their private tiles) */
        snprintf(opts + strlen(opts), sizeof opts - strlen(opts), " -DWINO_FUSED -DFT=%d -DWINO_FUSED_C=%d -DWINO_DWF_C=%d",
                 wino_ft(m), WINO_FUSED_C, WINO_DWF_C);
    int rc = ct_cl_build(m->cl, &w->p, "winograd.cl", opts);
    if (rc) return rc;
    w->in = ct_cl_kernel(w->p, "wino_in");
    w->w = ct_cl_kernel(w->p, "wino_w");
    w->out = ct_cl_kernel(w->p, "wino_out");
    w->dy = ct_cl_kernel(w->p, "wino_dy");
    w->dw = ct_cl_kernel(w->p, "wino_dw");
    w->w16 = ct_cl_kernel(w->p, "wino_w16");
    w->dw16 = ct_cl_kernel(w->p, "wino_dw16");
    if (CT_CONV_WINO(L) == 4 && m->cl->is_cpu && !loop_capped(m)) {
        w->fused = ct_cl_kernel(w->p, "wino_fused");
        w->dw_fused = ct_cl_kernel(w->p, "wino_dw_fused");
        w->dy_pool = ct_cl_kernel(w->p, "wino_dy_pool");
        w->in_pool = ct_cl_kernel(w->p, "wino_in_pool");
        w->out_pool = ct_cl_kernel(w->p, "wino_out_pool");
    }
    return 0;
}

/* Whether a Winograd convolution from cin to kout channels runs as the one
 * fused kernel (wino_fused, kernels/winograd.cl): on a CPU, F(4x4), kout a
 * multiple of 16 and cin at most WINO_FUSED_C. It avoids writing and reading
 * V and M, which made the separate kernels memory-bound (bench kernels,
 * forward): resnet20's 16 -> 16 layers 3.6-4.4 -> 1.4-1.5 ms, its 32 -> 32
 * ones 1.7 -> 1.1-1.3, mnist-cnn's 32 -> 64 8.9 -> 4.7 ms. At 128 input
 * channels the batched GEMMs won (cifar-cnn's 8x8 layer: 4.9 against 7.7).
 * It reads U packed (wino_w16's packed layout, each 16 outputs' rows
 * together): in rows 1 KB apart (64 -> 256) the 64 rows of a point fell into
 * four L1 sets, each work-item read U again from L2, and cifar-fast's 15x15
 * 64 -> 256 layer ran its forward at 86 GFLOP/s, 221 ms at batch 1024
 * against 203 ms separate; packed, with its outputs in blocks whose U stays
 * in L2 (fused_kb), 119 ms. */
static int fused(const ct_model *m, const ct_layer *L, int cin, int kout) {
    return !m->wino_unfused && m->cl->is_cpu && CT_CONV_WINO(L) == 4 && kout % 8 == 0 && cin <= WINO_FUSED_C &&
           !loop_capped(m);
}

/* Whether L's weight gradient runs as wino_dw_fused: on a CPU, F(4x4), at
 * most WINO_DWF_C channels in and out (its dU in private memory), the
 * outputs a multiple of 16. */
static int dw_fused(const ct_model *m, const ct_layer *L) {
    return !m->wino_unfused && m->cl->is_cpu && CT_CONV_WINO(L) == 4 && L->ic <= WINO_DWF_C && L->oc <= WINO_DWF_C &&
           L->oc % 16 == 0 && !loop_capped(m);
}

/* wino_dw_fused's work-items for T tiles (a few per compute unit) and the tiles each takes */
static int dw_splits(const ct_model *m, int T, int *per) {
    const int ft = wino_ft(m);
    int S = 8 * (int)m->cl->compute_units, groups = (T + ft - 1) / ft;
    if (S > groups) S = groups;
    if (S < 1) S = 1;
    int p = (T + S - 1) / S;
    *per = (p + ft - 1) / ft * ft;
    return (T + *per - 1) / *per;
}

/* The [batchnorm] before L that wrote no output in the last forward (ct_layer.normed), and *x then its
 * input: L's forward and weight gradient read that and normalise it as they load it. NULL (and *x
 * unchanged) when there is none. */
static const ct_layer *normed_in(const ct_model *m, const ct_layer *L, cl_mem *x) {
    int i = (int)(L - m->layers);
    if (i < 1 || !m->layers[i - 1].normed) return NULL;
    *x = ct_layer_output(m, i - 2);
    return &m->layers[i - 1];
}

/* Whether a [batchnorm] right before L may leave its output to L (ct_layer.norm_next): L's forward is
 * wino_fused and its weight gradient wino_dw_fused or wino_in (a fused forward keeps no V), which
 * normalise 16 channels at a time as they load */
static int can_normalise(const ct_model *m, const ct_layer *L) {
    int i = (int)(L - m->layers);
    if (i < 1 || m->layers[i - 1].type != CT_L_BATCHNORM || m->layers[i - 1].act == CT_ACT_GELU) return 0;
    return ct_next_reads_alone(m, i - 1) && !m->layers[i - 1].add_next && L->ic % 16 == 0 && fused(m, L, L->ic, L->oc);
}

/* a fused kernel's norm arguments from index at: N's statistics and parameters, or none (x in their place) */
static void norm_args(const ct_model *m, cl_kernel k, int at, const ct_layer *N, cl_mem x) {
    ct_bn_slices p = N ? ct_bn_layout(N) : (ct_bn_slices){0};
    CT_ARG(k, at, N != NULL);
    CT_ARG(k, at + 1, N ? ct_bn_stats(N) : x);
    CT_ARG(k, at + 2, m->params);
    CT_ARG(k, at + 3, (int)p.gamma);
    CT_ARG(k, at + 4, (int)p.beta);
    CT_ARG(k, at + 5, N ? N->act : 0);
}

/* the fused kernel: y (OH x OW x kout) from x (H x W x cin) with U in ws3 (+ bias, act); with P, a 2x2
 * stride-2 [maxpool] after L (ct_layer.pool_next), P's output and maxima positions instead of y; with
 * Q, such a pool whose gradient is xq (the data gradient of dy_pooled), x made from xq and Q's positions;
 * with N, the batch norm before L that wrote no output (normed_in), x that batch norm's input */
static void wino_fused(ct_model *m, const ct_layer *L, cl_mem y, cl_mem x, int has_bias, int act, int H, int W, int cin,
                       int pad, int OH, int OW, int kout, int B, const ct_layer *P, const ct_layer *Q, cl_mem xq,
                       const ct_layer *N) {
    int TH = tiles_side(OH, CT_CONV_WINO(L)), TW = tiles_side(OW, CT_CONV_WINO(L)), T = B * TH * TW;
    cl_kernel k = wk(m, L)->fused;
    int KB = fused_kb(cin, kout);
    ct_kargs(k, y, x, m->ws3, m->params, (int)L->b_off, has_bias, act, H, W, cin, pad, OH, OW, kout, TH, TW, T, KB,
             P != NULL, P ? P->out : y, P ? P->own[0] : y, P ? P->oh : 0, P ? P->ow : 0,
             Q != NULL, Q ? xq : x, Q ? Q->own[0] : x, Q ? Q->oh : 0, Q ? Q->ow : 0);
    norm_args(m, k, 28, N, x);
    const int ft = wino_ft(m);
    size_t gws[2] = {(size_t)(T + ft - 1) / ft, (size_t)((kout + KB - 1) / KB)}, lws[2] = {1, 1};
    ct_cl_run(m->cl, k, "wino_fused", 2, gws, lws);
}


/* Work-groups of the per-tile kernels (wino_in, wino_out, wino_dy). Left to
 * PoCL, F(4x4, 3x3)'s wino_in got 4096 work-items, each with several KiB of
 * private tiles kept for the whole group on its thread's stack: a crash. */
static const size_t tile_lws = 64;

/* ws: V (or dy's V); ws2: M, the data gradient's M, or Z; ws3: U or dU */
int ct_conv_wino_setup(ct_model *m, ct_layer *L, int batch, ct_needs *n) {
    int rc;
    size_t T = tiles_out(L, batch), T2 = tiles_in(L, batch), C = (size_t)L->ic, K = (size_t)L->oc, P = (size_t)wn2(L);
    /* ws2 also holds wino_dy's per-tile sums of dy (T x K) after Z */
    size_t w1 = P * ct_max2(T * C, T2 * K), w2 = ct_max2(P * T * K + T * K, P * T2 * C);
    size_t w3 = P * ct_max2(C * ct_max2(u_ld(m, (int)K), R16(K)), K * ct_max2(u_ld(m, (int)C), R16(C))); /* U, its rows padded (u_ld), or packed in 16s */
    /* a fused weight gradient: its S partial dU and bias sums in ws; the bias gradient sums S rows, else T */
    if (L > m->layers) L[-1].norm_next = can_normalise(m, L);
    int dwf = dw_fused(m, L), per, S = dw_splits(m, (int)T, &per);
    if (dwf) w1 = ct_max2(w1, (size_t)S * (P * C * K + K));
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
        if ((rc = ct_cl_alloc(m->cl, &CT_CONV_KEPT(L), keep, what))) return rc;
        n->kept += keep;
    }
    if ((rc = ct_gemm_reserve(&m->gemm, 1, 0, 1, L->oc, dwf ? S : (int)T))) return rc; /* bias gradient, from tile sums */
    int np = wn2(L); /* each a batch of n*n products, one launch */
    if ((rc = ct_gemm_reserve_batched(&m->gemm, np, 0, 0, (int)T, L->oc, L->ic))) return rc;  /* forward */
    if ((rc = ct_gemm_reserve_batched(&m->gemm, np, 1, 0, L->ic, L->oc, (int)T))) return rc;  /* weight gradient */
    return ct_gemm_reserve_batched(&m->gemm, np, 0, 0, (int)T2, L->ic, L->oc);                /* data gradient */
}

/* V [n*n][T][C] of x's tiles (pad pad; the tile grid of an oh x ow output) into V; with N, x the input
 * of that batch norm, normalised as it loads (normed_in) */
static void wino_in(ct_model *m, const ct_layer *L, cl_mem V, cl_mem x, int H, int W, int C, int pad, int OH, int OW,
                    int B, const ct_layer *N) {
    int TH = tiles_side(OH, CT_CONV_WINO(L)), TW = tiles_side(OW, CT_CONV_WINO(L)), T = B * TH * TW;
    cl_kernel k = wk(m, L)->in;
    ct_kargs(k, V, x, H, W, C, pad, TH, TW, T);
    norm_args(m, k, 9, N, x);
    size_t gws = (size_t)T;
    ct_cl_run(m->cl, k, "wino_in", 1, &gws, &tile_lws);
}

/* wino_in of the data gradient, dy (H x W x C) made from the gradient dyp of the 2x2 maxpool P after L
 * and P's positions (wino_in_pool) */
static void wino_in_pooled(ct_model *m, const ct_layer *L, cl_mem V, const ct_layer *P, cl_mem dyp, int H, int W, int C,
                           int pad, int OH, int OW, int B) {
    int TH = tiles_side(OH, CT_CONV_WINO(L)), TW = tiles_side(OW, CT_CONV_WINO(L)), T = B * TH * TW;
    cl_kernel k = wk(m, L)->in_pool;
    ct_kargs(k, V, dyp, P->own[0], H, W, C, pad, TH, TW, T, P->oh, P->ow);
    size_t gws = (size_t)T;
    ct_cl_run(m->cl, k, "wino_in_pool", 1, &gws, &tile_lws);
}

/* the maxpool after L whose gradient L's backward reads (dy_pooled), and that gradient */
static const ct_layer *pool_after(const ct_model *m, const ct_layer *L, cl_mem *dyp) {
    *dyp = NULL;
    if (!L->dy_pooled) return NULL;
    int j = (int)(L - m->layers) + 1;
    *dyp = j == m->n_layers - 1 ? m->dlogits : m->layers[j + 1].dx; /* as ct_layer_backward gives the pool its dy */
    return &m->layers[j];
}

/* the n*n GEMMs M[xi] (T x N) = V[xi] (T x Kd) * U[xi] (Kd x N): V * ws3 -> ws2 */
static void wino_gemms(ct_model *m, const ct_layer *L, cl_mem V, int T, int N, int Kd) {
    int ldu = u_ld(m, N);
    ct_gemm_run_batched(&m->gemm, wn2(L), 0, T, N, Kd, 1.0f, V, 0, Kd, (size_t)T * Kd, m->ws3, 0, ldu, (size_t)Kd * ldu, 0.0f,
                        m->ws2, 0, N, (size_t)T * N);
}

/* y [B, OH, OW, N] = A^T M A (+ bias, act) from ws2 */
/* Y = A^T M A from ws2 into y; with P, the 2x2 stride-2 maxpool after L (pool_next, act linear), into
 * P's output and positions instead (wino_out_pool) */
static void wino_out(ct_model *m, const ct_layer *L, cl_mem y, int has_bias, int act, int OH, int OW, int N, int B,
                     const ct_layer *P) {
    int TH = tiles_side(OH, CT_CONV_WINO(L)), TW = tiles_side(OW, CT_CONV_WINO(L)), T = B * TH * TW;
    cl_kernel k = P ? wk(m, L)->out_pool : wk(m, L)->out;
    if (P)
        ct_kargs(k, P->out, P->own[0], m->ws2, m->params, (int)L->b_off, has_bias, OH, OW, N, TH, TW, T, P->oh, P->ow);
    else
        ct_kargs(k, y, m->ws2, m->params, (int)L->b_off, has_bias, act, OH, OW, N, TH, TW, T);
    size_t gws = (size_t)T;
    ct_cl_run(m->cl, k, P ? "wino_out_pool" : "wino_out", 1, &gws, &tile_lws);
}

/* U (ws3) from the weights, turned for the data gradient when flip; on a CPU 16 of U's contiguous index per
 * work-item (wino_w16) when they come in 16s */
static void wino_weights(ct_model *m, const ct_layer *L, int flip) {
    size_t K = (size_t)L->oc, C = (size_t)L->ic, gws[2] = {flip ? C : K, flip ? K : C};
    int wide = m->cl->is_cpu && gws[0] % 16 == 0;
    cl_kernel k = wide ? wk(m, L)->w16 : wk(m, L)->w;
    if (wide) gws[0] /= 16;
    size_t lws[2] = {ct_divisor_upto(gws[0], 16), 1}; /* (its private tiles, several KiB per work-item) */
    /* this U's inputs and outputs (swapped for the data gradient); wino_fused reads U packed,
     * [n*n][ceil(kout / 16)][cin][16] (a CPU, kout a multiple of 8: wino_w16, or wino_w for kout in 8s) */
    int cin = flip ? L->oc : L->ic, kout = flip ? L->ic : L->oc;
    int packed = fused(m, L, cin, kout), ldu = u_ld(m, kout);
    if (packed && !wide) gws[0] = R16(gws[0]); /* kout in 8s: wino_w writes the zeros of its last 16 */
    if (wide)
        ct_kargs(k, m->ws3, m->params, (int)L->w_off, L->ic, L->oc, flip, packed, ldu);
    else
        ct_kargs(k, m->ws3, m->params, (int)L->w_off, L->ic, L->oc, flip, ldu, packed);
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

void ct_conv_wino_forward(ct_model *m, ct_layer *L, cl_mem x, int B) {
    cl_mem V = CT_CONV_KEPT(L) ? CT_CONV_KEPT(L) : m->ws;
    /* The 2x2 stride-2 maxpool after it (pool_next), in a whole forward, on a CPU (the pooling kernels
     * are built with the fused ones), F(4x4), outputs in 16s: pooled in the same pass into the pool's
     * output and positions (pooled). It saves writing the full output and the pool's pass over it
     * (cifar-fast at batch 1024: first conv and pool 77.6 -> 49.7 ms, 64 -> 256 and pool 132.8 -> 104.8
     * ms). Its next backward then reads the pool's gradient and those positions itself (dy_pooled)
     * unless its weight gradient is wino_dw_fused, which reads dy: the pool writes no full-size dy
     * (the 64 -> 256 layer's maxpool_bwd, 17 ms, goes; its wino_dy 41.6 -> 31.7 ms). */
    ct_layer *P = L->pool_next && m->whole_pass && L->oc % 16 == 0 && wk(m, L)->out_pool ? L + 1 : NULL;
    L->pooled = P != NULL;
    L->dy_pooled = P && !dw_fused(m, L);
    wino_weights(m, L, 0);
    const ct_layer *N = normed_in(m, L, &x); /* the batch norm before wrote no output: its input, normalised as it loads */
    CT_ASSERT(!N || (fused(m, L, L->ic, L->oc) && !CT_CONV_KEPT(L)));
    if (fused(m, L, L->ic, L->oc)) {
        wino_fused(m, L, L->out, x, L->n_b != 0, ct_fused_act(m, L), L->ih, L->iw, L->ic, L->pad, L->oh, L->ow, L->oc, B, P, NULL, NULL, N);
        return;
    }
    wino_in(m, L, V, x, L->ih, L->iw, L->ic, L->pad, L->oh, L->ow, B, NULL);
    wino_gemms(m, L, V, (int)tiles_out(L, B), L->oc, L->ic);
    wino_out(m, L, L->out, L->n_b != 0, ct_fused_act(m, L), L->oh, L->ow, L->oc, B, P);
}

/* The weight gradient through memory: V (kept, or wino_in again), Z = A dY
 * A^T and the tile sums of dy (wino_dy), the bias gradient from those sums,
 * dU[xi] = V[xi]^T Z[xi] (36 GEMMs), dW += G^T dU G (wino_dw) */
static void wino_weight_grad(ct_model *m, const ct_layer *L, cl_mem x, cl_mem dy, int B) {
    int T = (int)tiles_out(L, B), TH = tiles_side(L->oh, CT_CONV_WINO(L)), TW = tiles_side(L->ow, CT_CONV_WINO(L)), C = L->ic, K = L->oc;
    const struct ct_wino_kernels *w = wk(m, L);
    cl_mem V = CT_CONV_KEPT(L);
    const ct_layer *N = normed_in(m, L, &x);
    CT_ASSERT(!(V && N)); /* (a forward that normalised as it loaded, wino_fused, keeps no V) */
    if (!V) wino_in(m, L, V = m->ws, x, L->ih, L->iw, C, L->pad, L->oh, L->ow, B, N);
    size_t zs = (size_t)wn2(L) * T * K; /* the tile sums of dy follow Z in ws2 */
    size_t gws = (size_t)T;
    cl_mem dyp;
    const ct_layer *P = pool_after(m, L, &dyp);
    if (P) {
        ct_kargs(w->dy_pool, m->ws2, m->ws2, (int)zs, dyp, P->own[0], L->oh, L->ow, K, TH, TW, T, P->oh, P->ow);
        ct_cl_run(m->cl, w->dy_pool, "wino_dy_pool", 1, &gws, &tile_lws);
    } else {
        ct_kargs(w->dy, m->ws2, m->ws2, (int)zs, dy, L->oh, L->ow, K, TH, TW, T);
        ct_cl_run(m->cl, w->dy, "wino_dy", 1, &gws, &tile_lws);
    }
    if (L->n_b) ct_layer_bias_grad(m, m->ws2, zs, T, K, L->b_off);
    ct_gemm_run_batched(&m->gemm, wn2(L), 1, C, K, T, 1.0f, V, 0, C, (size_t)T * C, m->ws2, 0, K, (size_t)T * K, 0.0f,
                        m->ws3, 0, K, (size_t)C * K);
    wino_dw_sum(m, L, m->ws3, 1);
}

/* dW += G^T (sum over tiles of V .* A dY A^T) G (V: the forward's, when
 * kept); dx = the data gradient's Winograd convolution of dy (pad 2 - pad,
 * weights turned, C and K swapped). x is the input of the last forward. */
void ct_conv_wino_backward(ct_model *m, const ct_layer *L, cl_mem x, cl_mem dy, int B) {
    int T = (int)tiles_out(L, B), TH = tiles_side(L->oh, CT_CONV_WINO(L)), TW = tiles_side(L->ow, CT_CONV_WINO(L)), C = L->ic, K = L->oc;
    const struct ct_wino_kernels *w = wk(m, L);
    if (dw_fused(m, L)) { /* partial dU and tile sums of dy into ws, then summed */
        CT_ASSERT(!L->dy_pooled);
        int per, S = dw_splits(m, T, &per);
        size_t P = (size_t)wn2(L) * C * K, gs = (size_t)S, one = 1;
        const ct_layer *N = normed_in(m, L, &x); /* (as the forward read it) */
        ct_kargs(w->dw_fused, m->ws, x, dy, L->ih, L->iw, C, L->pad, L->oh, L->ow, K, TH, TW, T, per, S);
        norm_args(m, w->dw_fused, 15, N, x);
        ct_cl_run(m->cl, w->dw_fused, "wino_dw_fused", 1, &gs, &one);
        if (L->n_b) ct_layer_bias_grad(m, m->ws, (size_t)S * P, S, K, L->b_off);
        wino_dw_sum(m, L, m->ws, S);
    } else {
        wino_weight_grad(m, L, x, dy, B);
    }
    if (!L->dx) return;
    wino_weights(m, L, 1);
    cl_mem dyp;
    const ct_layer *P = pool_after(m, L, &dyp);
    if (fused(m, L, K, C)) {
        wino_fused(m, L, L->dx, dy, 0, 0, L->oh, L->ow, K, 2 - L->pad, L->ih, L->iw, C, B, NULL, P, dyp, NULL);
        return;
    }
    if (P)
        wino_in_pooled(m, L, m->ws, P, dyp, L->oh, L->ow, K, 2 - L->pad, L->ih, L->iw, B);
    else
        wino_in(m, L, m->ws, dy, L->oh, L->ow, K, 2 - L->pad, L->ih, L->iw, B, NULL);
    wino_gemms(m, L, m->ws, (int)tiles_in(L, B), C, K);
    wino_out(m, L, L->dx, 0, 0, L->ih, L->iw, C, B, NULL);
}
