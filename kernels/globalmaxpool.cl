/* globalmaxpool.cl: global max pooling of [globalmaxpool]: y[b, c] = the
 * largest of x[b, :, :, c] over the H*W pixels, and the pixel it came from
 * (the first of equal maxima; a NaN is kept once met, so it stays visible);
 * the backward routes dy[b, c] to that pixel alone. Reference:
 * src/ref/globalmaxpool.c; tests: tests/test_globalmaxpool.c. */

/* gws = (C, B) */
__kernel void globalmaxpool_fwd(__global float *y, __global int *arg, __global const float *x, const int HW,
                                const int C, const int B) {
    const int c = (int)get_global_id(0), b = (int)get_global_id(1);
    if (c >= C || b >= B) return;
    __global const float *p = x + (size_t)b * HW * C + c;
    float m = p[0];
    int a = 0;
    for (int i = 1; i < HW && !isnan(m); i++) {
        const float v = p[(size_t)i * C];
        if (v > m || isnan(v)) { m = v; a = i; }
    }
    y[(size_t)b * C + c] = m;
    arg[(size_t)b * C + c] = a;
}

/* dx[b, p, c] = p == arg[b, c] ? dy[b, c] : 0 (overwrites). gws = (C, B*HW) */
__kernel void globalmaxpool_bwd(__global float *dx, __global const float *dy, __global const int *arg, const int HW,
                                const int C, const int n) {
    const int c = (int)get_global_id(0), i = (int)get_global_id(1);
    if (c >= C || i >= n) return;
    const size_t o = (size_t)(i / HW) * C + c;
    dx[(size_t)i * C + c] = arg[o] == i % HW ? dy[o] : 0.0f;
}
