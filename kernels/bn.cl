/* bn.cl: batch normalisation over the rows of an NHWC tensor viewed as
 * [M = B*H*W, C]. Per-channel sums are taken in two stages: bn_reduce gives
 * one partial sum per (chunk of rows, channel) -- a work-group is all the
 * channels of one chunk, which stays in cache -- and bn_stats / bn_grads
 * combine the chunks. The variance is not sum of squares minus squared sum,
 * which cancels badly in float: each chunk (64 rows, in cache) gives its sum
 * and its squared deviations from its own mean, and bn_stats combines those
 * exactly (Chan, Golub and LeVeque 1979), so one pass over x does.
 * With an activation (act: CT_ACT in prelude.cl), the backward takes dy
 * through it itself: the pre-activation is recomputed from x exactly as
 * bn_fwd computed it (same operations, no contraction), so the sequencer's
 * pass over y (or a kept pre-activation, for GELU) is not needed. GELU's
 * derivative costs an erf and an exp per element, and both backward passes
 * need it: a training forward keeps it (d, keep = 1) where bn_fwd has GELU's
 * erf at hand already, and the backward reads it (mode 3, kept = 1).
 * Reference: src/ref/bn.c; tests: tests/test_bn.c. */
#pragma OPENCL FP_CONTRACT OFF

/* g (dy) through the activation, whose input gamma*(x-mean)*invstd+beta is recomputed as bn_fwd did */
#define ACT_BWD(VT, g, xv, gamma, mean, invstd, beta)                                                     \
    do {                                                                                                  \
        const VT z_ = (gamma) * ((xv) - (mean)) * (invstd) + (beta);                                      \
        g = CT_ACT_BWD(VT, g, z_, act);                                                                   \
    } while (0)

/* mode 0: p1 = sum x, p2 = sum (x - mean of the chunk)^2 over the chunk's
 * rows; mode 2: p1 = sum dy, p2 = sum dy * xhat (dy through the activation
 * act); mode 3: the same with dy times the kept derivative d. gws = (C / VW, chunks): bn_reduce8 (C a multiple of 8) reads eight
 * channels of a row at once, the same sums lane by lane; a scalar work-item
 * per channel read one float of every 128-byte row and ran at 3 GB/s on PoCL.
 * bn_reduce16 (a CPU, C a multiple of 16: ct_channel_vw) takes sixteen, as
 * the CPU's vectors do: measured when training still ran mode 2 with GELU, a
 * pass over 1024x15x15x64 took 40 ms as float8 (8x its mode-0 pass on PoCL)
 * and 30-33 ms as float16; training now runs mode 3 there. */
#define BN_REDUCE(NAME, VT, LD, ST, VW)                                                                  \
    __kernel void NAME(__global float *p1, __global float *p2, __global const float *x, __global const float *dy, \
                       __global const float *d, __global const float *stats, __global const float *params, const int offGamma,   \
                       const int offBeta, const int act, const int M, const int C, const int chunk,     \
                       const int mode) {                                                                \
        const int c = (int)get_global_id(0) * VW, k = (int)get_global_id(1);                            \
        if (c >= C) return;                                                                              \
        const int r0 = k * chunk, r1 = min(M, r0 + chunk);                                               \
        VT s1 = (VT)(0.0f), s2 = (VT)(0.0f);                                                             \
        if (mode == 0) {                                                                                 \
            for (int r = r0; r < r1; r++) s1 += LD(x + (size_t)r * C + c);                               \
            const VT mean = s1 / (float)(r1 - r0);                                                       \
            for (int r = r0; r < r1; r++) {                                                              \
                const VT d = LD(x + (size_t)r * C + c) - mean;                                           \
                s2 += d * d;                                                                             \
            }                                                                                            \
        } else {                                                                                         \
            const VT mean = LD(stats + c), invstd = LD(stats + C + c);                                   \
            const VT gamma = LD(params + offGamma + c), beta = LD(params + offBeta + c);                 \
            for (int r = r0; r < r1; r++) {                                                              \
                const VT xv = LD(x + (size_t)r * C + c);                                                 \
                VT g = LD(dy + (size_t)r * C + c);                                                       \
                if (mode == 3) g *= LD(d + (size_t)r * C + c);                                           \
                else if (act != CT_ACT_LINEAR) ACT_BWD(VT, g, xv, gamma, mean, invstd, beta);            \
                s1 += g;                                                                                 \
                s2 += g * (xv - mean) * invstd;                                                          \
            }                                                                                            \
        }                                                                                                \
        ST(s1, p1 + (size_t)k * C + c);                                                                  \
        ST(s2, p2 + (size_t)k * C + c);                                                                  \
    }
BN_REDUCE(bn_reduce, float, LD1, ST1, 1)
BN_REDUCE(bn_reduce8, float8, LD8, ST8, 8)
BN_REDUCE(bn_reduce16, float16, LD16, ST16, 16)

/* bn_reduce64 and bn_reduce32 (a CPU, C a multiple of 64 or 32): the same sums, 64 or 32
 * channels of a row (four or two float16: 256 or 128 bytes) per work-item. bn_reduce16's work-items each read one 64-byte line of every row,
 * rows C floats apart, in as many streams as arrays: the hardware's prefetchers did not follow
 * them, and its backward pass (mode 3, three arrays) ran at about 14 GB/s against bn_bwd_dx's
 * 35 on the same data (cifar-fast, 1024 x 8 x 8 x 256, PoCL). */
#define BN_REDUCE_ROW(NAME, NBV)                                                                                \
__kernel void NAME(__global float *p1, __global float *p2, __global const float *x, __global const float *dy,   \
                          __global const float *d, __global const float *stats, __global const float *params,   \
                          const int offGamma, const int offBeta, const int act, const int M, const int C,       \
                          const int chunk, const int mode) {                                                    \
    const int c = (int)get_global_id(0) * (16 * NBV), k = (int)get_global_id(1);                                \
    if (c >= C) return;                                                                                         \
    const int r0 = k * chunk, r1 = min(M, r0 + chunk);                                                          \
    float16 s1[NBV], s2[NBV];                                                                                   \
    _Pragma("unroll") for (int v = 0; v < NBV; v++) s1[v] = s2[v] = (float16)(0.0f);                            \
    if (mode == 0) {                                                                                            \
        for (int r = r0; r < r1; r++)                                                                           \
            _Pragma("unroll") for (int v = 0; v < NBV; v++) s1[v] += vload16(v, x + (size_t)r * C + c);         \
        float16 mean[NBV];                                                                                      \
        _Pragma("unroll") for (int v = 0; v < NBV; v++) mean[v] = s1[v] / (float)(r1 - r0);                     \
        for (int r = r0; r < r1; r++)                                                                           \
            _Pragma("unroll") for (int v = 0; v < NBV; v++) {                                                   \
                const float16 dv = vload16(v, x + (size_t)r * C + c) - mean[v];                                 \
                s2[v] += dv * dv;                                                                               \
            }                                                                                                   \
    } else {                                                                                                    \
        float16 mean[NBV], invstd[NBV], gamma[NBV], beta[NBV];                                                  \
        _Pragma("unroll") for (int v = 0; v < NBV; v++) {                                                       \
            mean[v] = vload16(v, stats + c);                                                                    \
            invstd[v] = vload16(v, stats + C + c);                                                              \
            gamma[v] = vload16(v, params + offGamma + c);                                                       \
            beta[v] = vload16(v, params + offBeta + c);                                                         \
        }                                                                                                       \
        for (int r = r0; r < r1; r++)                                                                           \
            _Pragma("unroll") for (int v = 0; v < NBV; v++) {                                                   \
                const size_t i = (size_t)r * C + c;                                                             \
                const float16 xv = vload16(v, x + i);                                                           \
                float16 g = vload16(v, dy + i);                                                                 \
                if (mode == 3) g *= vload16(v, d + i);                                                          \
                else if (act != CT_ACT_LINEAR) ACT_BWD(float16, g, xv, gamma[v], mean[v], invstd[v], beta[v]);  \
                s1[v] += g;                                                                                     \
                s2[v] += g * (xv - mean[v]) * invstd[v];                                                        \
            }                                                                                                   \
    }                                                                                                           \
    _Pragma("unroll") for (int v = 0; v < NBV; v++) {                                                           \
        vstore16(s1[v], v, p1 + (size_t)k * C + c);                                                             \
        vstore16(s2[v], v, p2 + (size_t)k * C + c);                                                             \
    }                                                                                                           \
}
BN_REDUCE_ROW(bn_reduce32, 2)
BN_REDUCE_ROW(bn_reduce64, 4)

/* stats = [mean[C], invstd[C]] from bn_reduce's mode-0 partials: the mean,
 * then the squared deviations as the sum over chunks of their own plus
 * n_k (mean_k - mean)^2; and the running averages (mean at run[offMean],
 * unbiased variance at run[offVar]: the offsets of ct_bn_layout,
 * include/cltrain/layer.h) updated with momentum. gws = (C) */
__kernel void bn_stats(__global float *stats, __global const float *p1, __global const float *p2, const int chunks,
                       const int chunk, const int M, const int C, const float eps, const float momentum,
                       __global float *run, const int offMean, const int offVar) {
    const int c = (int)get_global_id(0);
    if (c >= C) return;
    float s = 0.0f;
    for (int k = 0; k < chunks; k++) s += p1[(size_t)k * C + c];
    const float mean = s / M;
    float q = 0.0f;
    for (int k = 0; k < chunks; k++) {
        const int nk = min(chunk, M - k * chunk);
        const float d = p1[(size_t)k * C + c] / nk - mean;
        q += p2[(size_t)k * C + c] + nk * d * d;
    }
    const float var = q / M;
    stats[c] = mean;
    stats[C + c] = rsqrt(var + eps);
    run[offMean + c] = (1.0f - momentum) * run[offMean + c] + momentum * mean;
    run[offVar + c] = (1.0f - momentum) * run[offVar + c] + momentum * var * M / max(M - 1, 1);
}

/* Evaluation: stats from the running averages (mean at run[offMean], variance at run[offVar]). gws = (C) */
__kernel void bn_stats_eval(__global float *stats, __global const float *run, const int offMean, const int offVar,
                            const int C, const float eps) {
    const int c = (int)get_global_id(0);
    if (c >= C) return;
    stats[c] = run[offMean + c];
    stats[C + c] = rsqrt(run[offVar + c] + eps);
}

/* y = act(gamma * (x - mean) * invstd + beta), and with keep (GELU, training) d = GELU'(its input). gws = (C / vw, M):
 * vw = 16 (C a multiple of 16) moves a row's 16 channels as one vector: one
 * float per work-item ran at 11 GB/s on PoCL (per-channel loads that might
 * alias y stayed in the loop, unvectorised).
 * add = 1 (not with keep): y = act2(that + s), s of y's shape: the [shortcut]
 * after the layer (ct_layer.add_next) done here, as shortcut_fwd does it,
 * without writing and reading back the batch norm's output. */
__kernel void bn_fwd(__global float *y, __global const float *x, __global const float *stats,
                     __global const float *params, const int offGamma, const int offBeta, const int M, const int C,
                     const int act, const int vw, __global float *d, const int keep, __global const float *s,
                     const int add, const int act2) {
    const int c = (int)get_global_id(0) * vw, r = (int)get_global_id(1);
    if (c >= C || r >= M) return;
    const size_t i = (size_t)r * C + c;
    if (vw == 16) {
        float16 v = vload16(0, params + offGamma + c) * (vload16(0, x + i) - vload16(0, stats + c)) *
                        vload16(0, stats + C + c) + vload16(0, params + offBeta + c);
        if (keep) { /* GELU and its derivative from one erf */
            const float16 e = CT_GELU_E(float16, v);
            vstore16(CT_GELU_GRAD_OF(float16, v, e), 0, d + i);
            vstore16(CT_GELU_OF(float16, v, e), 0, y + i);
            return;
        }
        v = CT_ACT(float16, v, act);
        if (add) {
            v += vload16(0, s + i);
            v = CT_ACT(float16, v, act2);
        }
        vstore16(v, 0, y + i);
        return;
    }
    float v = params[offGamma + c] * (x[i] - stats[c]) * stats[C + c] + params[offBeta + c];
    if (keep) {
        const float e = CT_GELU_E(float, v);
        d[i] = CT_GELU_GRAD_OF(float, v, e);
        y[i] = CT_GELU_OF(float, v, e);
        return;
    }
    v = CT_ACT(float, v, act);
    if (add) {
        v += s[i];
        v = CT_ACT(float, v, act2);
    }
    y[i] = v;
}

/* sums = [sum dy[C], sum dy*xhat[C]] from the partials; dgamma += , dbeta += . gws = (C) */
__kernel void bn_grads(__global float *sums, __global const float *p1, __global const float *p2, const int chunks,
                       const int C, __global float *grads, const int offGamma, const int offBeta) {
    const int c = (int)get_global_id(0);
    if (c >= C) return;
    float s1 = 0.0f, s2 = 0.0f;
    for (int k = 0; k < chunks; k++) {
        s1 += p1[(size_t)k * C + c];
        s2 += p2[(size_t)k * C + c];
    }
    sums[c] = s1;
    sums[C + c] = s2;
    grads[offBeta + c] += s1;
    grads[offGamma + c] += s2;
}

/* dx = gamma * invstd * (dy - sum_dy / M - xhat * sum_dyxhat / M), dy through
 * the activation act (kept: times d, the derivative bn_fwd kept). gws = (C / vw, M), vw as in bn_fwd */
__kernel void bn_bwd_dx(__global float *dx, __global const float *dy, __global const float *x,
                        __global const float *stats, __global const float *sums, __global const float *params,
                        const int offGamma, const int offBeta, const int act, const int M, const int C, const int vw,
                        __global const float *d, const int kept) {
    const int c = (int)get_global_id(0) * vw, r = (int)get_global_id(1);
    if (c >= C || r >= M) return;
    const size_t i = (size_t)r * C + c;
    if (vw == 16) {
        const float16 mean = vload16(0, stats + c), invstd = vload16(0, stats + C + c), xv = vload16(0, x + i);
        const float16 gamma = vload16(0, params + offGamma + c), xhat = (xv - mean) * invstd;
        float16 g = vload16(0, dy + i);
        if (kept) g *= vload16(0, d + i);
        else if (act != CT_ACT_LINEAR) {
            const float16 beta = vload16(0, params + offBeta + c);
            ACT_BWD(float16, g, xv, gamma, mean, invstd, beta);
        }
        vstore16(gamma * invstd * (g - vload16(0, sums + c) / M - xhat * vload16(0, sums + C + c) / M), 0, dx + i);
        return;
    }
    const float mean = stats[c], invstd = stats[C + c], xv = x[i], gamma = params[offGamma + c], xhat = (xv - mean) * invstd;
    float g = dy[i];
    if (kept) g *= d[i];
    else if (act != CT_ACT_LINEAR) {
        const float beta = params[offBeta + c];
        ACT_BWD(float, g, xv, gamma, mean, invstd, beta);
    }
    dx[i] = gamma * invstd * (g - sums[c] / M - xhat * sums[C + c] / M);
}
