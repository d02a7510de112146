/* conv.cl: the data movement around the conv GEMMs, NHWC layout.
 *   im2col: col[(b,oy,ox), (ky,kx,c)] = x[b, oy*s-p+ky, ox*s-p+kx, c] or 0
 *   col2im: dx[b,y,x,c] = sum of dcol entries that im2col read from (b,y,x,c)
 *           (a gather, so no atomics; overwrites dx)
 * conv forward = im2col + GEMM(col, W[KH*KW*C, K]) with bias and ReLU fused.
 * Reference: src/ref/conv.c; tests: tests/test_conv.c. */

/* gws = (C, KH*KW, B*OH*OW) */
__kernel void im2col(__global float *col, __global const float *x, const int H, const int W, const int C,
                     const int KH, const int KW, const int stride, const int pad, const int OH, const int OW) {
    const int c = (int)get_global_id(0), kk = (int)get_global_id(1), row = (int)get_global_id(2);
    if (c >= C) return;
    const int ky = kk / KW, kx = kk % KW;
    const int ox = row % OW, t = row / OW, oy = t % OH, b = t / OH;
    const int y = oy * stride - pad + ky, xx = ox * stride - pad + kx;
    float v = 0.0f;
    if (y >= 0 && y < H && xx >= 0 && xx < W) v = x[(((size_t)b * H + y) * W + xx) * C + c];
    col[((size_t)row * KH * KW + kk) * C + c] = v;
}

/* gws = (C, B*H*W) */
__kernel void col2im(__global float *dx, __global const float *dcol, const int H, const int W, const int C,
                     const int KH, const int KW, const int stride, const int pad, const int OH, const int OW) {
    const int c = (int)get_global_id(0), pix = (int)get_global_id(1);
    if (c >= C) return;
    const int xx = pix % W, t = pix / W, y = t % H, b = t / H;
    float sum = 0.0f;
    for (int ky = 0; ky < KH; ky++) {
        const int ny = y + pad - ky;
        if (ny < 0 || ny % stride) continue;
        const int oy = ny / stride;
        if (oy >= OH) continue;
        for (int kx = 0; kx < KW; kx++) {
            const int nx = xx + pad - kx;
            if (nx < 0 || nx % stride) continue;
            const int ox = nx / stride;
            if (ox >= OW) continue;
            sum += dcol[((((size_t)b * OH + oy) * OW + ox) * KH * KW + ky * KW + kx) * C + c];
        }
    }
    dx[(size_t)pix * C + c] = sum;
}
