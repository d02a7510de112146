/* ops.cl: small element-wise kernels: input conversion, ReLU backward,
 * the fused softmax cross-entropy, and the non-finite check.
 * Reference: src/ref/ops.c; tests: tests/test_layers.c. */

/* Input conversion rounds twice (multiply, then add), as the host's producers
 * do: the same batch gives the same floats on either side. */
#pragma OPENCL FP_CONTRACT OFF

/* x[i] = u8[i] * scale + shift: a batch of bytes arrives, floats are computed here */
__kernel void u8_to_f32(__global float *x, __global const uchar *u8, const int offU8, const float scale,
                        const float shift, const int n) {
    const int i = (int)get_global_id(0);
    if (i < n) x[i] = (float)u8[offU8 + i] * scale + shift;
}

/* Resident data: x[b, k] = data[idx[b], k] * scale + shift; gws = (sz, B) */
__kernel void gather_u8(__global float *x, __global int *labels, __global const uchar *data,
                        __global const uchar *lab, __global const int *idx, const int sz, const float scale,
                        const float shift) {
    const int k = (int)get_global_id(0), b = (int)get_global_id(1);
    if (k >= sz) return;
    const int i = idx[b];
    x[(size_t)b * sz + k] = (float)data[(size_t)i * sz + k] * scale + shift;
    if (k == 0) labels[b] = lab[i];
}

/* dz = CT_ACT_BWD(dz, t, act) in place: the gradient through an activation
 * fused into the layer before: t is its output (ReLU: dz where t > 0, else
 * 0) or, for an activation whose gradient needs it, its input (GELU).
 * gws = n / vw: vw = 16 (a CPU, n a multiple of 16) takes sixteen elements
 * as one vector, as bn.cl does: one float per work-item left GELU's erf and
 * exp scalar on PoCL, 7x the time per element of bn_fwd's GELU.
 * both = 1: the result into dz2 as well (a shortcut's input gradient, which
 * is its dy: ct_layer_ops.dx_is_dy), one pass instead of this and a copy. */
__kernel void act_bwd(__global float *dz, __global const float *t, const int act, const int n, const int vw,
                      __global float *dz2, const int both) {
    const int i = (int)get_global_id(0) * vw;
    if (i >= n) return;
    if (vw == 16) {
        const float16 g = vload16(0, dz + i), ti = vload16(0, t + i), r = CT_ACT_BWD(float16, g, ti, act);
        vstore16(r, 0, dz + i);
        if (both) vstore16(r, 0, dz2 + i);
        return;
    }
    const float g = dz[i], ti = t[i], r = CT_ACT_BWD(float, g, ti, act);
    dz[i] = r;
    if (both) dz2[i] = r;
}

/* y = act(y) in place, keeping its input in z: a layer whose activation's
 * gradient reads the input (GELU) runs its kernels linear while training,
 * then this. gws = n / vw, vw as in act_bwd. */
__kernel void act_fwd(__global float *y, __global float *z, const int act, const int n, const int vw) {
    const int i = (int)get_global_id(0) * vw;
    if (i >= n) return;
    if (vw == 16) {
        const float16 v = vload16(0, y + i);
        vstore16(v, 0, z + i);
        vstore16(CT_ACT(float16, v, act), 0, y + i);
        return;
    }
    const float v = y[i];
    z[i] = v;
    y[i] = CT_ACT(float, v, act);
}

/* One work-item per row. Numerically stable: log-sum-exp after subtracting the
 * row maximum, so no log(0) and no overflow on large logits. With label
 * smoothing e the target is q = (1-e)*onehot + e/C. Writes
 * loss[b] = logsumexp - sum_j q_j z_j, pred[b] = argmax (first maximum) and
 * dlogits = (softmax - q) * scale (scale = 1/B for a mean loss). */
__kernel void softmax_xent(__global float *loss, __global int *pred, __global float *dlogits,
                           __global const float *logits, __global const int *labels, const int offLabels,
                           const int B, const int C, const float scale, const float smooth) {
    const int b = (int)get_global_id(0);
    /* no early return: every kernel argument is read outside control flow that depends on the
     * work-item (Mesa's llvmpipe warns it then treats such a read as uniform) */
    const int bb = min(b, B - 1);
    __global const float *z = logits + (size_t)bb * C;
    float m = z[0];
    int arg = 0;
    for (int j = 1; j < C; j++)
        if (z[j] > m) { m = z[j]; arg = j; }
    float sum = 0.0f, gap = 0.0f; /* gap: sum of (m - z_j), for the smoothing term */
    for (int j = 0; j < C; j++) {
        sum += exp(z[j] - m);
        gap += m - z[j];
    }
    const int y = labels[offLabels + bb];
    /* (m - z[y]) + log(sum), not m + log(sum) - z[y]: that rounds to an ulp of m */
    float l = (m - z[y]) + log(sum);
    if (smooth != 0.0f) l = log(sum) + (1.0f - smooth) * (m - z[y]) + smooth * (gap / C);
    __global float *d = dlogits + (size_t)b * C;
    const float off = smooth / C, on = 1.0f - smooth + off;
    if (b < B) {
        loss[b] = l;
        pred[b] = arg;
        for (int j = 0; j < C; j++) d[j] = (exp(z[j] - m) / sum - (j == y ? on : off)) * scale;
    }
}

/* flag[0] = 1 if any of x[off..off+n) is NaN or Inf. A few work-items scan
 * it all: grid-stride on a GPU (neighbours read neighbours, coalesced), one
 * contiguous range each on a CPU (contiguous = 1), where a work-item runs its
 * whole loop before the next starts: grid-stride there touched every cache
 * line once per work-item and ran at a tenth of the memory speed. */
__kernel void nonfinite(__global int *flag, __global const float *x, const int off, const int n, const int contiguous) {
    const int g = (int)get_global_size(0), id = (int)get_global_id(0);
    int bad = 0;
    if (contiguous) {
        const int per = (n + g - 1) / g, lo = min(n, id * per), hi = min(n, lo + per);
        x += off;
        for (int i = lo; i < hi; i++) bad |= !isfinite(x[i]);
    } else {
        for (int i = id; i < n; i += g) bad |= !isfinite(x[off + i]);
    }
    if (bad) flag[0] = 1;
}
