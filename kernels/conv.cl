/* conv.cl: the data movement around the conv GEMMs, NHWC layout.
 *   im2col: col[(b,oy,ox), (ky,kx,c)] = x[b, oy*s-p+ky, ox*s-p+kx, c] or 0
 *   col2im: dx[b,y,x,c] = sum of dcol entries that im2col read from (b,y,x,c)
 *           (a gather, so no atomics; overwrites dx)
 * conv forward = im2col + GEMM(col, W[KH*KW*C, K]) with bias and ReLU fused.
 * One work-item per pixel moves whole channel runs, 16 floats at a time when
 * C is a multiple of 16: index arithmetic once per pixel, not per float.
 * Reference: src/ref/conv.c; tests: tests/test_layers.c. */

inline void copy_run(__global float *dst, __global const float *src, const int C) {
    if ((C & 15) == 0)
        for (int c = 0; c < C; c += 16) vstore16(vload16(0, src + c), 0, dst + c);
    else
        for (int c = 0; c < C; c++) dst[c] = src[c];
}

inline void zero_run(__global float *dst, const int C) {
    if ((C & 15) == 0)
        for (int c = 0; c < C; c += 16) vstore16((float16)(0.0f), 0, dst + c);
    else
        for (int c = 0; c < C; c++) dst[c] = 0.0f;
}

/* gws = (B*OH*OW): one output pixel's row of KH*KW*C */
__kernel void im2col(__global float *col, __global const float *x, const int H, const int W, const int C,
                     const int KH, const int KW, const int stride, const int pad, const int OH, const int OW) {
    const int row = (int)get_global_id(0);
    const int ox = row % OW, t = row / OW, oy = t % OH, b = t / OH;
    __global float *dst = col + (size_t)row * KH * KW * C;
    for (int ky = 0; ky < KH; ky++) {
        const int y = oy * stride - pad + ky;
        for (int kx = 0; kx < KW; kx++, dst += C) {
            const int xx = ox * stride - pad + kx;
            if (y >= 0 && y < H && xx >= 0 && xx < W) copy_run(dst, x + (((size_t)b * H + y) * W + xx) * C, C);
            else zero_run(dst, C);
        }
    }
}

/* gws = (B*H*W): one input pixel's C gradients, summed over the windows that read it */
__kernel void col2im(__global float *dx, __global const float *dcol, const int H, const int W, const int C,
                     const int KH, const int KW, const int stride, const int pad, const int OH, const int OW) {
    const int pix = (int)get_global_id(0);
    const int xx = pix % W, t = pix / W, y = t % H, b = t / H;
    __global float *out = dx + (size_t)pix * C;
    const int vec = (C & 15) == 0;
    for (int c0 = 0; c0 < C; c0 += vec ? 16 : 1) {
        float16 acc = (float16)(0.0f);
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
                __global const float *src = dcol + ((((size_t)b * OH + oy) * OW + ox) * KH * KW + ky * KW + kx) * C + c0;
                if (vec) acc += vload16(0, src);
                else acc.s0 += src[0];
            }
        }
        if (vec) vstore16(acc, 0, out + c0);
        else out[c0] = acc.s0;
    }
}
