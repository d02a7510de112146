/* optim.cl: optimizer steps as single launches over the flat parameter,
 * gradient and moment buffers (llm.c style). Weight decay is decoupled (AdamW)
 * and applied only where decay_mask is 1 (weights, not biases): the mask is a
 * uchar per parameter. Reference: src/ref/ops.c; tests: tests/test_layers.c. */

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
