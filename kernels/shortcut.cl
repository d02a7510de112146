/* shortcut.cl: the residual addition of [shortcut]. y = act(a + P(s)):
 * a [B, H, W, C] is the previous layer's output, s [B, SH, SW, SC] an
 * earlier one; P takes every S-th pixel of s and pads its SC <= C channels
 * with zeros (option A of He et al. 2016; the identity when the shapes
 * agree). Backward: da = dy is a copy (host side); the share of s is
 * added into the gradient buffer of s, each element at most once, so no
 * atomics. Reference: src/ref/shortcut.c; tests: tests/test_shortcut.c. */

/* the index in s of pixel p's channel c: the same pixel when the shapes
 * agree (no divisions: they cost more than the addition), else every S-th */
inline size_t src_index(int p, int c, int H, int W, int SH, int SW, int SC, int S) {
    if (S == 1 && SH == H && SW == W) return (size_t)p * SC + c;
    const int x = p % W, t = p / W, yy = t % H, b = t / H;
    return (((size_t)b * SH + (size_t)yy * S) * SW + (size_t)x * S) * SC + c;
}

/* gws = (C / vw, n = B*H*W): vw = 16 (a CPU, C and SC multiples of 16)
 * moves a pixel's 16 channels as one vector; one float per work-item ran
 * at about 60% of the memory speed on PoCL. */
__kernel void shortcut_fwd(__global float *y, __global const float *a, __global const float *s, const int H,
                           const int W, const int C, const int SH, const int SW, const int SC, const int S,
                           const int act, const int n, const int vw) {
    const int c = (int)get_global_id(0) * vw, p = (int)get_global_id(1);
    if (c >= C || p >= n) return;
    if (vw == 16) {
        float16 v = vload16(0, a + (size_t)p * C + c);
        if (c < SC) v += vload16(0, s + src_index(p, c, H, W, SH, SW, SC, S));
        v = CT_ACT(float16, v, act);
        vstore16(v, 0, y + (size_t)p * C + c);
        return;
    }
    float v = a[(size_t)p * C + c];
    if (c < SC) v += s[src_index(p, c, H, W, SH, SW, SC, S)];
    v = CT_ACT(float, v, act);
    y[(size_t)p * C + c] = v;
}

/* ds[b, y*S, x*S, c] += dy[b, y, x, c] for c < SC (dy already through the activation). gws = (SC / vw, n = B*H*W),
 * vw as in shortcut_fwd (SC and C multiples of 16).
 * With projection=1 the host passes dcol = dy W^T [n, SC] as dy and C = SC: the scatter of the 1x1 conv. */
__kernel void shortcut_bwd(__global float *ds, __global const float *dy, const int H, const int W, const int C,
                           const int SH, const int SW, const int SC, const int S, const int n, const int vw) {
    const int c = (int)get_global_id(0) * vw, p = (int)get_global_id(1);
    if (c >= SC || p >= n) return;
    const size_t o = src_index(p, c, H, W, SH, SW, SC, S);
    if (vw == 16) {
        vstore16(vload16(0, ds + o) + vload16(0, dy + (size_t)p * C + c), 0, ds + o);
        return;
    }
    ds[o] += dy[(size_t)p * C + c];
}

/* shortcut_bwd followed by the pass through the activation of the layer whose output ds is the
 * gradient of, as the sequencer's act_bwd (ops.cl) takes it: over every element of ds [B, SH, SW, SC]
 * (not only those that receive a share), ds + its share of dy where it has one, then act'( ) at t (that
 * layer's output, or its pre-activation where the gradient reads that) into ds, and with both into dx2
 * as well. The same operations as shortcut_bwd then act_bwd, in one pass: resnet20's block outputs,
 * which the next block's conv and shortcut both read. gws = (SC / vw, nq = B*SH*SW), vw as in
 * shortcut_fwd. */
__kernel void shortcut_bwd_act(__global float *ds, __global const float *dy, __global const float *t, const int act,
                               const int H, const int W, const int C, const int SH, const int SW, const int SC,
                               const int S, const int nq, const int vw, __global float *dx2, const int both) {
    const int c = (int)get_global_id(0) * vw, q = (int)get_global_id(1);
    if (c >= SC || q >= nq) return;
    const size_t o = (size_t)q * SC + c;
    int p = q; /* the pixel of dy whose share lands on q, or -1: every S-th (src_index's inverse) */
    if (!(S == 1 && SH == H && SW == W)) {
        const int xx = q % SW, r = q / SW, yy = r % SH, b = r / SH;
        p = yy % S || xx % S || yy / S >= H || xx / S >= W ? -1 : (b * H + yy / S) * W + xx / S;
    }
    if (vw == 16) {
        float16 g = vload16(0, ds + o);
        if (p >= 0) g += vload16(0, dy + (size_t)p * C + c);
        const float16 r = CT_ACT_BWD(float16, g, vload16(0, t + o), act);
        vstore16(r, 0, ds + o);
        if (both) vstore16(r, 0, dx2 + o);
        return;
    }
    float g = ds[o];
    if (p >= 0) g += dy[(size_t)p * C + c];
    const float r = CT_ACT_BWD(float, g, t[o], act);
    ds[o] = r;
    if (both) dx2[o] = r;
}
