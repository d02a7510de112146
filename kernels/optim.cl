/* optim.cl: optimizer steps as single launches over the flat parameter,
 * gradient and state buffers (llm.c style). Weight decay is applied only where
 * decay_mask is 1 (weights, not biases): the mask is a uchar per parameter.
 * Adam's decay is decoupled from the moments (lr*wd*p, PyTorch's AdamW form).
 * One table entry per kernel in src/optim/<name>.c.
 * Reference: src/ref/optim.c; tests: tests/test_layers.c. */

/* bc1 = 1 - b1^t, bc2 = 1 - b2^t: computed on the host in double */
/* skip[0] != 0 (set by `nonfinite` over the gradients earlier in the queue):
 * a NaN or Inf gradient leaves parameters and moments untouched. */
__kernel void adam_step(__global float *p, __global float *m, __global float *v, __global const float *g,
                        __global const uchar *decay_mask, __global const int *skip, const int n, const float lr, const float b1,
                        const float b2, const float eps, const float wd, const float bc1, const float bc2) {
    const int i = (int)get_global_id(0);
    if (i >= n || skip[0]) return;
    const float gi = g[i];
    const float mi = b1 * m[i] + (1.0f - b1) * gi;
    const float vi = b2 * v[i] + (1.0f - b2) * gi * gi;
    m[i] = mi;
    v[i] = vi;
    const float mhat = mi / bc1, vhat = vi / bc2;
    float upd = mhat / (sqrt(vhat) + eps);
    if (decay_mask[i]) upd += wd * p[i];
    p[i] -= lr * upd;
}

/* PyTorch's SGD with momentum: buf = momentum*buf + (g + wd*p); p -= lr*buf */
__kernel void sgd_step(__global float *p, __global float *buf, __global const float *g,
                       __global const uchar *decay_mask, __global const int *skip, const int n, const float lr, const float momentum,
                       const float wd) {
    const int i = (int)get_global_id(0);
    if (i >= n || skip[0]) return;
    float gi = g[i];
    if (decay_mask[i]) gi += wd * p[i];
    const float b = momentum * buf[i] + gi;
    buf[i] = b;
    p[i] -= lr * b;
}

/* AdamW with the decay decoupled from the learning rate as in Loshchilov and
 * Hutter (2019), Algorithm 2: p -= lr*mhat/(sqrt(vhat)+eps) + wdt*p, where
 * wdt = wd * lr/lr_base (the schedule's factor, computed on the host), so
 * --weight-decay is the decay per step at the base rate, independent of --lr.
 * (adam_step's decay is lr*wd*p: PyTorch's AdamW form.) */
__kernel void adamw_step(__global float *p, __global float *m, __global float *v, __global const float *g,
                         __global const uchar *decay_mask, __global const int *skip, const int n, const float lr, const float b1,
                         const float b2, const float eps, const float wdt, const float bc1, const float bc2) {
    const int i = (int)get_global_id(0);
    if (i >= n || skip[0]) return;
    const float gi = g[i];
    const float mi = b1 * m[i] + (1.0f - b1) * gi;
    const float vi = b2 * v[i] + (1.0f - b2) * gi * gi;
    m[i] = mi;
    v[i] = vi;
    const float mhat = mi / bc1, vhat = vi / bc2;
    const float pi = p[i];
    float np = pi - lr * (mhat / (sqrt(vhat) + eps));
    if (decay_mask[i]) np -= wdt * pi;
    p[i] = np;
}

/* PyTorch's SGD with Nesterov momentum: g' = g + wd*p; buf = momentum*buf + g';
 * p -= lr*(g' + momentum*buf) */
__kernel void nesterov_step(__global float *p, __global float *buf, __global const float *g,
                            __global const uchar *decay_mask, __global const int *skip, const int n, const float lr,
                            const float momentum, const float wd) {
    const int i = (int)get_global_id(0);
    if (i >= n || skip[0]) return;
    float gi = g[i];
    if (decay_mask[i]) gi += wd * p[i];
    const float b = momentum * buf[i] + gi;
    buf[i] = b;
    p[i] -= lr * (gi + momentum * b);
}
