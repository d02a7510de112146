/* globalmaxpool.cl: global max pooling of [globalmaxpool]: y[b, c] = the
 * largest of x[b, :, :, c] over the H*W pixels, and the pixel it came from
 * (the first of equal maxima; a NaN is kept once met, so it stays visible);
 * the backward routes dy[b, c] to that pixel alone. Reference:
 * src/ref/globalmaxpool.c; tests: tests/test_globalmaxpool.c. */

/* gws = (C / vw, B): vw = 16 (a CPU, C in 16s) takes 16 channels of a pixel as one vector; one
 * channel a work-item read rows C floats apart, 4 ms for cifar-fast's 3x3x256 at batch 1024 */
__kernel void globalmaxpool_fwd(__global float *y, __global int *arg, __global const float *x, const int HW,
                                const int C, const int B, const int vw) {
    const int c = (int)get_global_id(0) * vw, b = (int)get_global_id(1);
    if (c >= C || b >= B) return;
    __global const float *p = x + (size_t)b * HW * C + c;
    if (vw == 16) { /* per lane as below: a NaN met stays */
        float16 m = vload16(0, p);
        int16 a = (int16)(0);
        for (int i = 1; i < HW; i++) {
            const float16 v = vload16(0, p + (size_t)i * C);
            const int16 take = (isgreater(v, m) | isnan(v)) & ~isnan(m);
            m = select(m, v, take);
            a = select(a, (int16)(i), take);
        }
        vstore16(m, 0, y + (size_t)b * C + c);
        vstore16(a, 0, arg + (size_t)b * C + c);
        return;
    }
    float m = p[0];
    int a = 0;
    for (int i = 1; i < HW && !isnan(m); i++) {
        const float v = p[(size_t)i * C];
        if (v > m || isnan(v)) { m = v; a = i; }
    }
    y[(size_t)b * C + c] = m;
    arg[(size_t)b * C + c] = a;
}

/* dx[b, p, c] = p == arg[b, c] ? dy[b, c] : 0 (overwrites). gws = (C / vw, B*HW) */
__kernel void globalmaxpool_bwd(__global float *dx, __global const float *dy, __global const int *arg, const int HW,
                                const int C, const int n, const int vw) {
    const int c = (int)get_global_id(0) * vw, i = (int)get_global_id(1);
    if (c >= C || i >= n) return;
    const size_t o = (size_t)(i / HW) * C + c;
    if (vw == 16) {
        vstore16(select((float16)(0.0f), vload16(0, dy + o), vload16(0, arg + o) == (int16)(i % HW)), 0,
                 dx + (size_t)i * C + c);
        return;
    }
    dx[(size_t)i * C + c] = arg[o] == i % HW ? dy[o] : 0.0f;
}
