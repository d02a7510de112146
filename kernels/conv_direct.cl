/* conv_direct.cl: a convolution with few inputs per output (KH*KW*CI <= 32,
 * a network's first layer) computed directly on a CPU, NHWC, weights
 * [KH][KW][CI][KO] (HWIO), KO = 16*KV outputs:
 *   direct_fwd: y[p, :] = act(b + sum_j window(p)[j] * W[j, :])
 *   direct_dw:  per strip of pixels, partial dW[j, :] = sum_p window(p)[j] * dy[p, :]
 *               and partial db = sum_p dy[p, :], summed by the host (a GEMM with ones)
 * im2col + GEMM wrote and reread KK floats per pixel (27 for RGB) in a
 * column buffer and ran GEMMs whose inner dimension (KK) was too short to
 * reach the machine's FLOP rate; here each pixel's window stays in private
 * memory. Built per shape: -DKH -DKW -DCI -DSTRIDE -DKV -DVG -DVB (VG, VB: the
 * output vectors per pass of direct_fwd and direct_dw, PX*VG and KK*VB
 * accumulators). Work-groups of one
 * work-item, each a run of pixels (lws 1: no work-item loop around the
 * 16-wide code). Reference: src/ref/conv.c; tests: tests/test_layers.c. */
#define KK (KH * KW * CI)
#define KO (KV * 16)
#define PX 4 /* pixels per step of direct_fwd: each weight vector loaded once for PX of them */

/* p[KK] = the window of output pixel (b, oy, ox), zeros outside x */
__attribute__((always_inline)) inline void window(float *p, __global const float *x, const int b, const int oy, const int ox, const int H, const int W,
                   const int pad) {
    const int y0 = oy * STRIDE - pad, x0 = ox * STRIDE - pad;
    __global const float *s = x + (((long)b * H + y0) * W + x0) * CI;
    if (y0 >= 0 && x0 >= 0 && y0 + KH <= H && x0 + KW <= W) {
#pragma unroll
        for (int ky = 0; ky < KH; ky++)
#pragma unroll
            for (int j = 0; j < KW * CI; j++) p[ky * KW * CI + j] = s[(long)ky * W * CI + j];
        return;
    }
    for (int ky = 0; ky < KH; ky++)
        for (int kx = 0; kx < KW; kx++) {
            const int in = y0 + ky >= 0 && y0 + ky < H && x0 + kx >= 0 && x0 + kx < W;
            for (int c = 0; c < CI; c++) p[(ky * KW + kx) * CI + c] = in ? s[((long)ky * W + kx) * CI + c] : 0.0f;
        }
}

/* the next pixel in (b, oy, ox) order */
#define NEXT_PIXEL(b, oy, ox, OH, OW) \
    if (++(ox) == (OW)) {             \
        (ox) = 0;                     \
        if (++(oy) == (OH)) {         \
            (oy) = 0;                 \
            (b)++;                    \
        }                             \
    }

/* gws = ceil(rows / per) (per a multiple of PX), lws 1: pixels [g*per, g*per + per) */
__kernel void direct_fwd(__global float *y, __global const float *x, __global const float *params, const int w_off,
                         const int b_off, const int act, const int H, const int W, const int pad, const int OH,
                         const int OW, const int rows, const int per) {
    const int r0 = (int)get_global_id(0) * per, r1 = min(r0 + per, rows);
    float16 wl[KK * KV], bias[KV]; /* private copies: aligned whole-vector loads in the loop */
    for (int j = 0; j < KK * KV; j++) wl[j] = vload16(j, params + w_off);
    for (int v = 0; v < KV; v++) bias[v] = vload16(v, params + b_off);
    int ox = r0 % OW, t = r0 / OW, oy = t % OH, b = t / OH;
    for (int r = r0; r < r1; r += PX) {
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
#pragma unroll
            for (int j = 0; j < KK; j++) {
                float16 wv[VG];
#pragma unroll
                for (int u = 0; u < VG; u++) wv[u] = wl[j * KV + v0 + u];
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
                    const float16 o = act == CT_ACT_RELU ? fmax(acc[q][u], 0.0f) : acc[q][u];
                    /* rows of KO floats: 64-byte aligned */
                    *(__global float16 *)(y + (size_t)(r + q) * KO + (v0 + u) * 16) = o;
                }
        }
    }
}

/* gws = S strips, lws 1: strip s's partial dW [KK][KO] and partial db [KO] at part + s*(KK + 1)*KO */
__kernel void direct_dw(__global float *part, __global const float *x, __global const float *dy, const int H,
                        const int W, const int pad, const int OH, const int OW, const int rows, const int per) {
    const int s = (int)get_global_id(0), r0 = s * per, r1 = min(r0 + per, rows);
    __global float *out = part + (size_t)s * (KK + 1) * KO;
    for (int v0 = 0; v0 < KV; v0 += VB) {
        float16 acc[KK][VB], bacc[VB];
#pragma unroll
        for (int u = 0; u < VB; u++) {
            bacc[u] = 0.0f;
#pragma unroll
            for (int j = 0; j < KK; j++) acc[j][u] = 0.0f;
        }
        int ox = r0 % OW, t = r0 / OW, oy = t % OH, b = t / OH;
        for (int r = r0; r < r1; r++) {
            float p[KK];
            window(p, x, b, oy, ox, H, W, pad);
            NEXT_PIXEL(b, oy, ox, OH, OW)
#pragma unroll
            for (int u = 0; u < VB; u++) {
                const float16 d = *(__global const float16 *)(dy + (size_t)r * KO + (v0 + u) * 16);
                bacc[u] += d;
#pragma unroll
                for (int j = 0; j < KK; j++) acc[j][u] = fma((float16)(p[j]), d, acc[j][u]);
            }
        }
#pragma unroll
        for (int u = 0; u < VB; u++) {
#pragma unroll
            for (int j = 0; j < KK; j++) *(__global float16 *)(out + j * KO + (v0 + u) * 16) = acc[j][u];
            *(__global float16 *)(out + KK * KO + (v0 + u) * 16) = bacc[u];
        }
    }
}
