/* pool.cl: max pooling, NHWC, window K, stride S, floor mode. Ties go to the
 * first maximum in (ky, kx) order, in forward and backward alike; backward
 * is a gather over the windows that contain an input (no atomics, overwrites
 * dx). One work-item per pixel handles all channels, 16 at a time when C is
 * a multiple of 16. Reference: src/ref/pool.c; tests: tests/test_layers.c. */

/* gws = (B*OH*OW) */
__kernel void maxpool_fwd(__global float *y, __global const float *x, const int H, const int W, const int C,
                          const int K, const int S, const int OH, const int OW) {
    const int o = (int)get_global_id(0);
    const int ox = o % OW, t = o / OW, oy = t % OH, b = t / OH;
    __global const float *base = x + (((size_t)b * H + oy * S) * W + ox * S) * C;
    __global float *out = y + (size_t)o * C;
    if ((C & 15) == 0) {
        for (int c = 0; c < C; c += 16) {
            float16 m = vload16(0, base + c);
            for (int ky = 0; ky < K; ky++)
                for (int kx = 0; kx < K; kx++) {
                    const float16 v = vload16(0, base + ((size_t)ky * W + kx) * C + c);
                    m = select(m, v, v > m);
                }
            vstore16(m, 0, out + c);
        }
    } else {
        for (int c = 0; c < C; c++) {
            float m = base[c];
            for (int ky = 0; ky < K; ky++)
                for (int kx = 0; kx < K; kx++) {
                    const float v = base[((size_t)ky * W + kx) * C + c];
                    if (v > m) m = v;
                }
            out[c] = m;
        }
    }
}

/* gws = (B*H*W) */
__kernel void maxpool_bwd(__global float *dx, __global const float *dy, __global const float *x, const int H,
                          const int W, const int C, const int K, const int S, const int OH, const int OW) {
    const int pix = (int)get_global_id(0);
    const int xx = pix % W, t = pix / W, y = t % H, b = t / H;
    __global float *out = dx + (size_t)pix * C;
    /* windows (oy, ox) with oy*S <= y < oy*S + K */
    const int oy_lo = y < K ? 0 : (y - K) / S + 1, ox_lo = xx < K ? 0 : (xx - K) / S + 1;
    const int oy_hi = min(y / S, OH - 1), ox_hi = min(xx / S, OW - 1);
    const int vec = (C & 15) == 0;
    for (int c = 0; c < C; c += vec ? 16 : 1) {
        float16 g = (float16)(0.0f);
        for (int oy = oy_lo; oy <= oy_hi; oy++)
            for (int ox = ox_lo; ox <= ox_hi; ox++) {
                const int mine = (y - oy * S) * K + (xx - ox * S);
                __global const float *base = x + (((size_t)b * H + oy * S) * W + ox * S) * C + c;
                __global const float *gy = dy + (((size_t)b * OH + oy) * OW + ox) * C + c;
                if (vec) {
                    float16 m = vload16(0, base);
                    int16 arg = (int16)(0);
                    for (int ky = 0; ky < K; ky++)
                        for (int kx = 0; kx < K; kx++) {
                            const float16 v = vload16(0, base + ((size_t)ky * W + kx) * C);
                            const int16 gt = v > m;
                            m = select(m, v, gt);
                            arg = select(arg, (int16)(ky * K + kx), gt);
                        }
                    g += select((float16)(0.0f), vload16(0, gy), arg == (int16)(mine));
                } else {
                    float m = base[0];
                    int arg = 0;
                    for (int ky = 0; ky < K; ky++)
                        for (int kx = 0; kx < K; kx++) {
                            const float v = base[((size_t)ky * W + kx) * C];
                            if (v > m) { m = v; arg = ky * K + kx; }
                        }
                    if (arg == mine) g.s0 += gy[0];
                }
            }
        if (vec) vstore16(g, 0, out + c);
        else out[c] = g.s0;
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
