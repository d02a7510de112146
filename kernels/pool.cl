/* pool.cl: max pooling, NHWC, window K, stride S, floor mode. Ties go to the
 * first maximum in (ky, kx) order, in forward and backward alike; backward
 * is a gather over the windows that contain an input (no atomics, overwrites dx).
 * Reference: src/ref/pool.c; tests: tests/test_pool.c. */

/* gws = (C, B*OH*OW) */
__kernel void maxpool_fwd(__global float *y, __global const float *x, const int H, const int W, const int C,
                          const int K, const int S, const int OH, const int OW) {
    const int c = (int)get_global_id(0), o = (int)get_global_id(1);
    if (c >= C) return;
    const int ox = o % OW, t = o / OW, oy = t % OH, b = t / OH;
    float m = -INFINITY;
    for (int ky = 0; ky < K; ky++)
        for (int kx = 0; kx < K; kx++) {
            const float v = x[(((size_t)b * H + oy * S + ky) * W + ox * S + kx) * C + c];
            if (v > m || (ky == 0 && kx == 0)) m = v;
        }
    y[(size_t)o * C + c] = m;
}

/* gws = (C, B*H*W) */
__kernel void maxpool_bwd(__global float *dx, __global const float *dy, __global const float *x, const int H,
                          const int W, const int C, const int K, const int S, const int OH, const int OW) {
    const int c = (int)get_global_id(0), pix = (int)get_global_id(1);
    if (c >= C) return;
    const int xx = pix % W, t = pix / W, y = t % H, b = t / H;
    float g = 0.0f;
    /* windows oy with oy*S <= y < oy*S + K */
    const int oy_lo = y < K ? 0 : (y - K) / S + 1, ox_lo = xx < K ? 0 : (xx - K) / S + 1;
    for (int oy = oy_lo; oy <= y / S && oy < OH; oy++)
        for (int ox = ox_lo; ox <= xx / S && ox < OW; ox++) {
            int best = 0;
            float m = 0.0f;
            for (int ky = 0; ky < K; ky++)
                for (int kx = 0; kx < K; kx++) {
                    const float v = x[(((size_t)b * H + oy * S + ky) * W + ox * S + kx) * C + c];
                    if (v > m || (ky == 0 && kx == 0)) { m = v; best = ky * K + kx; }
                }
            if (best == (y - oy * S) * K + (xx - ox * S)) g += dy[(((size_t)b * OH + oy) * OW + ox) * C + c];
        }
    dx[(size_t)pix * C + c] = g;
}
