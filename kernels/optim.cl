/* optim.cl: optimizer steps as single launches over the flat parameter,
 * gradient and state buffers (llm.c style). Each parameter belongs to a group
 * (its uchar in decay_mask; ct_model_groups in include/cltrain/model.h):
 * groups[2 g] multiplies the learning rate, groups[2 g + 1] the weight decay
 * (0: none; 1/lr multiplier where it decays, so that lr * wd is the same in
 * every group, as PyTorch groups with weight_decay = wd / multiplier). Group
 * multipliers of 1 give the plain step's values exactly.
 * Adam's decay is decoupled from the moments (lr*wd*p, PyTorch's AdamW form).
 * One table entry per kernel in src/optim/<name>.c.
 * A work-item updates OPT_VW consecutive parameters: 16 on a CPU (one
 * AVX-512 vector per array; one per work-item ran at half the memory speed
 * on PoCL), 1 on a GPU, where neighbouring work-items read neighbours.
 * Reference: src/ref/optim.c; tests: tests/test_layers.c. */

#ifndef OPT_VW
#define OPT_VW 1
#endif
#if OPT_VW == 16
#define floatv float16
/* x[i .. i+16), the part below n (zeros past it) */
inline float16 ld(__global const float *x, const int i, const int n) {
    if (i + 16 <= n) return vload16(0, x + i);
    float t[16];
    for (int j = 0; j < 16; j++) t[j] = i + j < n ? x[i + j] : 0.0f;
    return vload16(0, t);
}
inline void st(const float16 v, __global float *x, const int i, const int n) {
    if (i + 16 <= n) {
        vstore16(v, 0, x + i);
        return;
    }
    float t[16];
    vstore16(v, 0, t);
    for (int j = 0; j < 16 && i + j < n; j++) x[i + j] = t[j];
}
/* the multipliers of the groups of parameters [i, i+16): groups[2 g + which] (ct_model_groups) */
inline float16 group_of(__global const uchar *mask, __global const float *groups, const int i, const int n,
                        const int which) {
    float t[16];
    for (int j = 0; j < 16; j++) t[j] = groups[2 * (i + j < n ? mask[i + j] : 0) + which];
    return vload16(0, t);
}
#else
#define floatv float
inline float ld(__global const float *x, const int i, const int n) { (void)n; return x[i]; }
inline void st(const float v, __global float *x, const int i, const int n) { (void)n; x[i] = v; }
inline float group_of(__global const uchar *mask, __global const float *groups, const int i, const int n, const int which) {
    (void)n;
    return groups[2 * mask[i] + which];
}
#endif

/* Adam's moment update, shared by adam_step and adamw_step: m = b1*m + (1-b1)*g
 * and v = b2*v + (1-b2)*g^2, stored; returns mhat/(sqrt(vhat)+eps) with the
 * bias corrections bc1 = 1 - b1^t, bc2 = 1 - b2^t (computed on the host in double). */
inline floatv adam_moments(__global float *m, __global float *v, const floatv gi, const int i, const int n, const float b1,
                           const float b2, const float eps, const float bc1, const float bc2) {
    const floatv mi = b1 * ld(m, i, n) + (1.0f - b1) * gi;
    const floatv vi = b2 * ld(v, i, n) + (1.0f - b2) * gi * gi;
    st(mi, m, i, n);
    st(vi, v, i, n);
    const floatv mhat = mi / bc1, vhat = vi / bc2;
    return mhat / (sqrt(vhat) + eps);
}

/* skip[0] != 0 (set by `nonfinite` over the gradients earlier in the queue):
 * a NaN or Inf gradient leaves parameters and moments untouched. */
__kernel void adam_step(__global float *p, __global float *m, __global float *v, __global const float *g,
                        __global const uchar *decay_mask, __global const float *groups, __global const int *skip, const int n,
                        const float lr, const float b1, const float b2, const float eps, const float wd, const float bc1,
                        const float bc2) {
    const int i = (int)get_global_id(0) * OPT_VW;
    if (i >= n || skip[0]) return;
    floatv upd = adam_moments(m, v, ld(g, i, n), i, n, b1, b2, eps, bc1, bc2);
    const floatv pi = ld(p, i, n), wdm = group_of(decay_mask, groups, i, n, 1);
    upd = select(upd, upd + (wd * wdm) * pi, wdm != (floatv)(0.0f));
    st(pi - (lr * group_of(decay_mask, groups, i, n, 0)) * upd, p, i, n);
}

/* SGD's gradient with weight decay, g + wd*p where the mask says (PyTorch's
 * form), and its momentum buffer buf = momentum*buf + g', stored and returned:
 * shared by sgd_step and nesterov_step. */
inline floatv decayed_grad(__global const float *g, __global const uchar *decay_mask, __global const float *groups,
                           const floatv pi, const int i, const int n, const float wd) {
    const floatv g0 = ld(g, i, n), wdm = group_of(decay_mask, groups, i, n, 1);
    return select(g0, g0 + (wd * wdm) * pi, wdm != (floatv)(0.0f));
}
inline floatv momentum_update(__global float *buf, const floatv gi, const int i, const int n, const float momentum) {
    const floatv b = momentum * ld(buf, i, n) + gi;
    st(b, buf, i, n);
    return b;
}

/* PyTorch's SGD with momentum: buf = momentum*buf + (g + wd*p); p -= lr*buf */
__kernel void sgd_step(__global float *p, __global float *buf, __global const float *g,
                       __global const uchar *decay_mask, __global const float *groups, __global const int *skip, const int n,
                       const float lr, const float momentum, const float wd) {
    const int i = (int)get_global_id(0) * OPT_VW;
    if (i >= n || skip[0]) return;
    const floatv pi = ld(p, i, n), gi = decayed_grad(g, decay_mask, groups, pi, i, n, wd);
    st(pi - (lr * group_of(decay_mask, groups, i, n, 0)) * momentum_update(buf, gi, i, n, momentum), p, i, n);
}

/* AdamW with the decay decoupled from the learning rate as in Loshchilov and
 * Hutter (2019), Algorithm 2: p -= lr*mhat/(sqrt(vhat)+eps) + wdt*p, where
 * wdt = wd * lr/lr_base (the schedule's factor, computed on the host), so
 * --weight-decay is the decay per step at the base rate, independent of --lr.
 * (adam_step's decay is lr*wd*p: PyTorch's AdamW form.) A group's lr
 * multiplier scales the first term; every decaying group decays by wdt. */
__kernel void adamw_step(__global float *p, __global float *m, __global float *v, __global const float *g,
                         __global const uchar *decay_mask, __global const float *groups, __global const int *skip, const int n,
                         const float lr, const float b1, const float b2, const float eps, const float wdt, const float bc1,
                         const float bc2) {
    const int i = (int)get_global_id(0) * OPT_VW;
    if (i >= n || skip[0]) return;
    const floatv upd = adam_moments(m, v, ld(g, i, n), i, n, b1, b2, eps, bc1, bc2);
    const floatv pi = ld(p, i, n);
    const floatv np = pi - (lr * group_of(decay_mask, groups, i, n, 0)) * upd;
    st(select(np, np - wdt * pi, group_of(decay_mask, groups, i, n, 1) != (floatv)(0.0f)), p, i, n);
}

/* PyTorch's SGD with Nesterov momentum: g' = g + wd*p; buf = momentum*buf + g';
 * p -= lr*(g' + momentum*buf) */
__kernel void nesterov_step(__global float *p, __global float *buf, __global const float *g,
                            __global const uchar *decay_mask, __global const float *groups, __global const int *skip,
                            const int n, const float lr, const float momentum, const float wd) {
    const int i = (int)get_global_id(0) * OPT_VW;
    if (i >= n || skip[0]) return;
    const floatv pi = ld(p, i, n), gi = decayed_grad(g, decay_mask, groups, pi, i, n, wd);
    const floatv b = momentum_update(buf, gi, i, n, momentum);
    st(pi - (lr * group_of(decay_mask, groups, i, n, 0)) * (gi + momentum * b), p, i, n);
}

/* The lookahead / moving average of the weights (cltrain/lookahead.h): the
 * average moves towards the parameters by w = 1 - decay, and the parameters
 * to the average. Over every parameter (batch-norm running statistics too),
 * no mask, no NaN guard (the step before had its own). */
__kernel void lookahead_step(__global float *p, __global float *avg, const int n, const float w) {
    const int i = (int)get_global_id(0) * OPT_VW;
    if (i >= n) return;
    const floatv a = ld(avg, i, n);
    const floatv v = a + w * (ld(p, i, n) - a);
    st(v, avg, i, n);
    st(v, p, i, n);
}
