/* conv_direct.cl: a convolution computed directly on a CPU, without im2col's
 * column buffer, NHWC, weights [KH][KW][CI][KO] (HWIO), KO outputs in 8s, as
 * KV = ceil(KO / 16) vectors (the last one half used where KO is not in 16s):
 *   direct_fwd:  y[p, :] = act(b + sum_j window(p)[j] * W[j, :]), each
 *                pixel's window in private memory against float16 weight rows
 *   direct_dw:   (KK <= 32: a first layer) per strip of pixels, partial
 *                dW[j, :] = sum_p window(p)[j] * dy[p, :] and db = sum_p dy[p, :],
 *                all KK rows in registers
 *   direct_dw_taps: (KK > 32) the same per strip and run of CHN channels of one tap
 *   direct_dx:   (CI in 16s) dx as a gather over the taps that cover each input pixel
 * The partial sums are added by the host (a GEMM with a row of ones).
 * im2col + GEMM wrote and reread KK floats per pixel in a column buffer
 * (18.9 MB for resnet20's first stride-2 layer), ran a first layer's
 * products with an inner dimension of 9 or 27, too short for the machine's
 * FLOP rate, and scattered the data gradient's columns back with col2im.
 * Built per shape: -DKH -DKW -DCI -DSTRIDE -DKO -DKV -DVG -DVB, -DCHN -DVT where
 * KK > 32, -DDX where CI is a multiple of 16 (VG, VB, VT: the output vectors
 * per pass of direct_fwd, direct_dw and direct_dw_taps, PX*VG, KK*VB and
 * CHN*VT accumulators). Work-groups of one work-item, each a run of pixels
 * (lws 1: no work-item loop around the 16-wide code).
 * Reference: src/ref/conv.c; tests: tests/test_layers.c (test_conv_direct). */
#define KK (KH * KW * CI)
#define PX 4 /* pixels per step of direct_fwd: each weight vector loaded once for PX of them */

/* output vector v of a row of KO floats at p: rows of KO in 16s are 64-byte aligned (whole-vector
 * accesses); otherwise each row's last vector is 8 floats (cifar-fast's whitening layer: 24) */
#if KO % 16 == 0
#define LDO(p, v) (*(__global const float16 *)(p))
#define STO(x, p, v) (*(__global float16 *)(p) = (x))
#else
#define LDO(p, v) load16_edge((p), KO - 16 * (v))
#define STO(x, p, v) store16_edge((x), (p), KO - 16 * (v))
#endif

/* window entry j of a window inside x that starts at s, rows rs floats apart (j a constant once unrolled) */
#define XOFF(j, rs) ((j) / (KW * CI) * (rs) + (j) % (KW * CI))
/* whether the window of output pixel (oy, ox) lies inside x */
#define INSIDE(oy, ox) \
    ((oy) * STRIDE - pad >= 0 && (ox) * STRIDE - pad >= 0 && (oy) * STRIDE - pad + KH <= H && (ox) * STRIDE - pad + KW <= W)
/* where that window starts in x (outside x when it sticks out) */
#define WINDOW_AT(b, oy, ox) (x + (((long)(b) * H + (oy) * STRIDE - pad) * W + (ox) * STRIDE - pad) * CI)

/* p[KK] = the window of output pixel (b, oy, ox), zeros outside x */
__attribute__((always_inline)) inline void window(float *p, __global const float *x, const int b, const int oy, const int ox, const int H, const int W,
                   const int pad) {
    __global const float *s = WINDOW_AT(b, oy, ox);
    if (INSIDE(oy, ox)) { /* KH runs of KW*CI floats */
#pragma unroll
        for (int ky = 0; ky < KH; ky++)
#pragma unroll
            for (int j = 0; j < KW * CI; j++) p[ky * KW * CI + j] = s[(long)ky * W * CI + j];
        return;
    }
    const int y0 = oy * STRIDE - pad, x0 = ox * STRIDE - pad;
    for (int ky = 0; ky < KH; ky++)
        for (int kx = 0; kx < KW; kx++) {
            const int in = y0 + ky >= 0 && y0 + ky < H && x0 + kx >= 0 && x0 + kx < W;
            for (int c = 0; c < CI; c++) p[(ky * KW + kx) * CI + c] = in ? s[((long)ky * W + kx) * CI + c] : 0.0f;
        }
}

/* a weight gradient's sums: acc[N][V] and the bias's bacc[V] */
#define ZERO_SUMS(acc, bacc, N, V)                 \
    _Pragma("unroll") for (int u = 0; u < V; u++) { \
        bacc[u] = 0.0f;                             \
        _Pragma("unroll") for (int i = 0; i < N; i++) acc[i][u] = 0.0f; \
    }

/* pixel r's (b, oy, ox), declared */
#define FIRST_PIXEL(r, b, oy, ox, OH, OW) int ox = (r) % (OW), oy = (r) / (OW) % (OH), b = (r) / (OW) / (OH);

/* the next pixel in (b, oy, ox) order */
#define NEXT_PIXEL(b, oy, ox, OH, OW) \
    if (++(ox) == (OW)) {             \
        (ox) = 0;                     \
        if (++(oy) == (OH)) {         \
            (oy) = 0;                 \
            (b)++;                    \
        }                             \
    }

/* the loops over a window: unrolled whole for a first layer's, by 8 for longer ones */
#if KK <= 32
#define J_UNROLL _Pragma("unroll")
#else
#define J_UNROLL _Pragma("unroll 8")
#endif

/* gws = ceil(rows / per) (per a multiple of PX), lws 1: pixels [g*per, g*per + per); wa: the weights
 * copied to a 64-byte aligned buffer (whole-vector loads: PoCL splits an unaligned vload16 in three) */
__kernel void direct_fwd(__global float *y, __global const float *x, __global const float16 *wa,
                         __global const float *params, const int b_off, const int act, const int H, const int W,
                         const int pad, const int OH, const int OW, const int rows, const int per) {
    const int r0 = (int)get_global_id(0) * per, r1 = min(r0 + per, rows);
    float16 bias[KV];
    for (int v = 0; v < KV; v++) bias[v] = load16_edge(params + b_off + 16 * v, KO - 16 * v);
    FIRST_PIXEL(r0, b, oy, ox, OH, OW)
    for (int r = r0; r < r1; r += PX) {
        /* the windows copied to private memory (read from x where they lie, a run of PX at a time, it was 1.3x slower) */
        float p[PX][KK];
        for (int q = 0; q < PX; q++) {
            if (r + q < r1) window(p[q], x, b, oy, ox, H, W, pad);
            else
                for (int j = 0; j < KK; j++) p[q][j] = 0.0f;
            NEXT_PIXEL(b, oy, ox, OH, OW)
        }
        for (int v0 = 0; v0 < KV; v0 += VG) {
            float16 acc[PX][VG];
#pragma unroll
            for (int q = 0; q < PX; q++)
#pragma unroll
                for (int u = 0; u < VG; u++) acc[q][u] = bias[v0 + u];
            J_UNROLL for (int j = 0; j < KK; j++) {
                float16 wv[VG];
#pragma unroll
                for (int u = 0; u < VG; u++) wv[u] = wa[j * KV + v0 + u];
#pragma unroll
                for (int q = 0; q < PX; q++) {
                    const float16 pq = (float16)(p[q][j]);
#pragma unroll
                    for (int u = 0; u < VG; u++) acc[q][u] = fma(pq, wv[u], acc[q][u]);
                }
            }
            for (int q = 0; q < PX && r + q < r1; q++)
#pragma unroll
                for (int u = 0; u < VG; u++) {
                    const float16 a = acc[q][u], o = CT_ACT(float16, a, act);
                    STO(o, y + (size_t)(r + q) * KO + (v0 + u) * 16, v0 + u);
                }
        }
    }
}

#if KK <= 32
/* gws = S strips, lws 1: strip s's partial dW [KK][KO] and partial db [KO] at part + s*(KK + 1)*KO */
__kernel void direct_dw(__global float *part, __global const float *x, __global const float *dy, const int H,
                        const int W, const int pad, const int OH, const int OW, const int rows, const int per) {
    const int s = (int)get_global_id(0), r0 = s * per, r1 = min(r0 + per, rows);
    __global float *out = part + (size_t)s * (KK + 1) * KO;
    for (int v0 = 0; v0 < KV; v0 += VB) {
        float16 acc[KK][VB], bacc[VB];
        ZERO_SUMS(acc, bacc, KK, VB)
        FIRST_PIXEL(r0, b, oy, ox, OH, OW)
        const long rs = (long)W * CI;
        for (int r = r0; r < r1; r++) {
            /* a window inside x is read where it is; one on a border copied to p first */
            float p[KK];
            const int inside = INSIDE(oy, ox);
            __global const float *sw = WINDOW_AT(b, oy, ox);
            if (!inside) window(p, x, b, oy, ox, H, W, pad);
            NEXT_PIXEL(b, oy, ox, OH, OW)
#pragma unroll
            for (int u = 0; u < VB; u++) {
                const float16 d = LDO(dy + (size_t)r * KO + (v0 + u) * 16, v0 + u);
                bacc[u] += d;
                if (inside)
#pragma unroll
                    for (int j = 0; j < KK; j++) acc[j][u] = fma((float16)(sw[XOFF(j, rs)]), d, acc[j][u]);
                else
#pragma unroll
                    for (int j = 0; j < KK; j++) acc[j][u] = fma((float16)(p[j]), d, acc[j][u]);
            }
        }
#pragma unroll
        for (int u = 0; u < VB; u++) {
#pragma unroll
            for (int j = 0; j < KK; j++) STO(acc[j][u], out + j * KO + (v0 + u) * 16, v0 + u);
            STO(bacc[u], out + KK * KO + (v0 + u) * 16, v0 + u);
        }
    }
}

#endif

#ifdef CHN
/* The weight gradient of a layer with more inputs per output than direct_dw
 * holds in registers (CHN divides CI): work-item (c, s) sums, over
 * strip s's pixels, the CHN window entries [c*CHN, c*CHN + CHN) (one tap's
 * run of channels) times dy, and chunk 0 also db. A tap outside x adds
 * nothing. gws = (KK / CHN, S), lws 1: the chunks of one strip run in turn,
 * so its dy stays in cache. Partial sums as direct_dw's. */
__kernel void direct_dw_taps(__global float *part, __global const float *x, __global const float *dy, const int H,
                             const int W, const int pad, const int OH, const int OW, const int rows, const int per) {
    const int c = (int)get_global_id(0), s = (int)get_global_id(1), r0 = s * per, r1 = min(r0 + per, rows);
    const int j0 = c * CHN, tap = j0 / CI, ky = tap / KW, kx = tap % KW;
    __global float *out = part + (size_t)s * (KK + 1) * KO;
    for (int v0 = 0; v0 < KV; v0 += VT) {
        float16 acc[CHN][VT], bacc[VT];
        ZERO_SUMS(acc, bacc, CHN, VT)
        FIRST_PIXEL(r0, b, oy, ox, OH, OW)
        for (int r = r0; r < r1; r++) {
            float16 d[VT];
#pragma unroll
            for (int u = 0; u < VT; u++) d[u] = LDO(dy + (size_t)r * KO + (v0 + u) * 16, v0 + u);
            if (c == 0)
#pragma unroll
                for (int u = 0; u < VT; u++) bacc[u] += d[u];
            const int yy = oy * STRIDE - pad + ky, xx = ox * STRIDE - pad + kx;
            if (yy >= 0 && yy < H && xx >= 0 && xx < W) {
                __global const float *xs = x + (((long)b * H + yy) * W + xx) * CI + (j0 - tap * CI);
                CT_PREFETCH(xs + 8 * STRIDE * CI); /* eight pixels on (x from memory; stride 2 steps over lines) */
#pragma unroll
                for (int i = 0; i < CHN; i++) {
                    const float16 xi = (float16)(xs[i]);
#pragma unroll
                    for (int u = 0; u < VT; u++) acc[i][u] = fma(xi, d[u], acc[i][u]);
                }
            }
            NEXT_PIXEL(b, oy, ox, OH, OW)
        }
#pragma unroll
        for (int u = 0; u < VT; u++) {
#pragma unroll
            for (int i = 0; i < CHN; i++) STO(acc[i][u], out + (j0 + i) * KO + (v0 + u) * 16, v0 + u);
            if (c == 0) STO(bacc[u], out + KK * KO + (v0 + u) * 16, v0 + u);
        }
    }
}
#endif

#ifdef DX
/* The data gradient, CI a multiple of 16: dx[b, y, x, :] = sum over the taps
 * (ky, kx) whose window covers (y, x) of dy[b, oy, ox, :] . W[ky, kx, :, :]^T,
 * a gather (no column buffer, no atomics; overwrites dx). A work-item takes
 * input rows of one x phase mod STRIDE, QX pixels of it at a time, which
 * share their taps and so each weight vector loaded. */
#define CV (CI / 16)
#define QX (CV >= 4 ? 4 : 8)

/* gws = KK*KO + KO: wt[tap][k][c] = W[tap][c][k], then KO zeros (the dy row of a tap outside dy) */
__kernel void direct_wt(__global float *wt, __global const float *params, const int w_off) {
    const int i = (int)get_global_id(0);
    if (i >= KK * KO) {
        wt[i] = 0.0f;
        return;
    }
    const int t = i / (KO * CI), k = (i / CI) % KO, c = i % CI;
    wt[i] = params[w_off + (t * CI + c) * KO + k];
}

/* gws = ceil(lines / per), lws 1, lines = B*H*STRIDE: line l is row l / STRIDE, phase l % STRIDE */
__kernel void direct_dx(__global float *dx, __global const float *dy, __global const float *wt, const int H,
                        const int W, const int pad, const int OH, const int OW, const int lines, const int per) {
    const int l0 = (int)get_global_id(0) * per, l1 = min(l0 + per, lines);
    __global const float *zero = wt + KK * KO;
    for (int l = l0; l < l1; l++) {
        const int px = l % STRIDE, by = l / STRIDE, y = by % H, b = by / H;
        for (int x0 = px; x0 < W; x0 += QX * STRIDE) {
            float16 acc[QX][CV];
#pragma unroll
            for (int q = 0; q < QX; q++)
#pragma unroll
                for (int v = 0; v < CV; v++) acc[q][v] = 0.0f;
            for (int ky = 0; ky < KH; ky++) {
                const int ny = y + pad - ky;
                if (ny < 0 || ny % STRIDE || ny / STRIDE >= OH) continue;
                __global const float *dyrow = dy + ((long)b * OH + ny / STRIDE) * OW * KO;
                for (int kx = 0; kx < KW; kx++) {
                    const int nx0 = x0 + pad - kx;
                    if (nx0 % STRIDE) continue; /* the phase's pixels all miss this tap */
                    __global const float *d[QX];
#pragma unroll
                    for (int q = 0; q < QX; q++) {
                        const int nx = nx0 + q * STRIDE;
                        d[q] = nx >= 0 && nx / STRIDE < OW ? dyrow + (nx / STRIDE) * KO : zero;
                    }
                    __global const float16 *w = (__global const float16 *)(wt + (ky * KW + kx) * KO * CI);
#pragma unroll 8
                    for (int k = 0; k < KO; k++) {
                        float16 wv[CV];
#pragma unroll
                        for (int v = 0; v < CV; v++) wv[v] = w[k * CV + v];
#pragma unroll
                        for (int q = 0; q < QX; q++) {
                            const float16 dq = (float16)(d[q][k]);
#pragma unroll
                            for (int v = 0; v < CV; v++) acc[q][v] = fma(dq, wv[v], acc[q][v]);
                        }
                    }
                }
            }
#pragma unroll
            for (int q = 0; q < QX; q++) {
                const int x = x0 + q * STRIDE;
                if (x < W)
#pragma unroll
                    for (int v = 0; v < CV; v++)
                        *(__global float16 *)(dx + (((long)b * H + y) * W + x) * CI + v * 16) = acc[q][v];
            }
        }
    }
}
#endif
