/* pool.cl: max pooling, NHWC, window K, stride S, floor mode. Ties go to the
 * first maximum in (ky, kx) order. The forward also writes each maximum's
 * window position (ky*K + kx, a ushort per output) for the backward, a gather
 * over the windows that contain an input (no atomics, overwrites dx) that
 * reads dy and those positions, not x again. When the input came through a
 * ReLU that no other layer reads (relu_in), a maximum that is not above 0 gets
 * position NO_ARG: the ReLU's backward would zero its gradient, so the pool's
 * backward passes none and the ReLU pass is skipped (src/nn/layers/maxpool.c).
 * One work-item per pixel handles all channels, 16 at a time when C is a
 * multiple of 16. Reference: src/ref/pool.c; tests: tests/test_layers.c. */

#define NO_ARG 0xFFFF

/* gws = (B*OH*OW) */
__kernel void maxpool_fwd(__global float *y, __global ushort *arg, __global const float *x, const int H, const int W,
                          const int C, const int K, const int S, const int OH, const int OW, const int relu_in) {
    const int o = (int)get_global_id(0);
    const int ox = o % OW, t = o / OW, oy = t % OH, b = t / OH;
    __global const float *base = x + (((size_t)b * H + oy * S) * W + ox * S) * C;
    __global float *out = y + (size_t)o * C;
    __global ushort *pos = arg + (size_t)o * C;
    if ((C & 15) == 0) {
        for (int c = 0; c < C; c += 16) {
            float16 m = vload16(0, base + c);
            int16 a = (int16)(0);
            for (int ky = 0; ky < K; ky++)
                for (int kx = 0; kx < K; kx++) {
                    const float16 v = vload16(0, base + ((size_t)ky * W + kx) * C + c);
                    const int16 gt = v > m;
                    m = select(m, v, gt);
                    a = select(a, (int16)(ky * K + kx), gt);
                }
            if (relu_in) a = select((int16)(NO_ARG), a, m > (float16)(0.0f));
            vstore16(m, 0, out + c);
            *(__global ushort16 *)(pos + c) = convert_ushort16(a); /* aligned: o*C + c is a multiple of 16 */
        }
    } else {
        for (int c = 0; c < C; c++) {
            float m = base[c];
            int a = 0;
            for (int ky = 0; ky < K; ky++)
                for (int kx = 0; kx < K; kx++) {
                    const float v = base[((size_t)ky * W + kx) * C + c];
                    if (v > m) { m = v; a = ky * K + kx; }
                }
            out[c] = m;
            pos[c] = relu_in && !(m > 0.0f) ? NO_ARG : (ushort)a;
        }
    }
}

/* gws = (B*H*W) */
__kernel void maxpool_bwd(__global float *dx, __global const float *dy, __global const ushort *arg, const int H,
                          const int W, const int C, const int K, const int S, const int OH, const int OW) {
    const int pix = (int)get_global_id(0);
    const int xx = pix % W, t = pix / W, y = t % H, b = t / H;
    __global float *out = dx + (size_t)pix * C;
    /* windows (oy, ox) with oy*S <= y < oy*S + K */
    const int oy_lo = y < K ? 0 : (y - K) / S + 1, ox_lo = xx < K ? 0 : (xx - K) / S + 1;
    const int oy_hi = min(y / S, OH - 1), ox_hi = min(xx / S, OW - 1);
    if ((C & 15) == 0) {
        for (int c = 0; c < C; c += 16) {
            float16 g = (float16)(0.0f);
            for (int oy = oy_lo; oy <= oy_hi; oy++)
                for (int ox = ox_lo; ox <= ox_hi; ox++) {
                    const int mine = (y - oy * S) * K + (xx - ox * S);
                    const size_t o = (((size_t)b * OH + oy) * OW + ox) * C + c;
                    g += select((float16)(0.0f), vload16(0, dy + o), convert_int16(*(__global const ushort16 *)(arg + o)) == (int16)(mine));
                }
            vstore16(g, 0, out + c);
        }
    } else {
        for (int c = 0; c < C; c++) {
            float g = 0.0f;
            for (int oy = oy_lo; oy <= oy_hi; oy++)
                for (int ox = ox_lo; ox <= ox_hi; ox++) {
                    const size_t o = (((size_t)b * OH + oy) * OW + ox) * C + c;
                    if (arg[o] == (y - oy * S) * K + (xx - ox * S)) g += dy[o];
                }
            out[c] = g;
        }
    }
}

/* Global average pooling: y[b, c] = mean over the H*W pixels of x[b, :, :, c]. gws = (C, B) */
__kernel void avgpool_fwd(__global float *y, __global const float *x, const int HW, const int C, const int B) {
    const int c = (int)get_global_id(0), b = (int)get_global_id(1);
    if (c >= C || b >= B) return;
    float s = 0.0f;
    for (int p = 0; p < HW; p++) s += x[((size_t)b * HW + p) * C + c];
    y[(size_t)b * C + c] = s / HW;
}

/* dx[b, p, c] = dy[b, c] / HW (overwrites). gws = (C, B*HW) */
__kernel void avgpool_bwd(__global float *dx, __global const float *dy, const int HW, const int C, const int n) {
    const int c = (int)get_global_id(0), i = (int)get_global_id(1);
    if (c >= C || i >= n) return;
    dx[(size_t)i * C + c] = dy[(size_t)(i / HW) * C + c] / HW;
}
