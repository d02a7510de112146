/* dropout.cl: inverted dropout with masks that are never stored: element i
 * of step `step` in layer `layer` is kept when a hash of (seed, step, layer,
 * i) falls at or above p, so forward and backward agree, and a run is
 * reproducible whatever the device or thread timing. Kept values are scaled
 * by 1/(1-p); evaluation does not call these kernels.
 * Reference: src/ref/dropout.c (the same hash); tests: tests/test_dropout.c. */

inline uint ct_hash(uint a, uint b, uint c, uint d) {
    /* a few rounds of a murmur-style mixer: enough to decorrelate neighbours */
    uint h = a * 0x9E3779B1u ^ b * 0x85EBCA77u ^ c * 0xC2B2AE3Du ^ d * 0x27D4EB2Fu;
    h ^= h >> 16; h *= 0x7FEB352Du; h ^= h >> 15; h *= 0x846CA68Bu; h ^= h >> 16;
    return h;
}

/* in place on x (the layer's output buffer holds its input copy): gws = (n) */
__kernel void dropout_fwd(__global float *y, __global const float *x, const int n, const float p, const uint seed,
                          const uint step, const uint layer) {
    const int i = (int)get_global_id(0);
    if (i >= n) return;
    const float u = (float)(ct_hash(seed, step, layer, (uint)i) >> 8) * (1.0f / 16777216.0f);
    y[i] = u >= p ? x[i] / (1.0f - p) : 0.0f;
}

__kernel void dropout_bwd(__global float *dx, __global const float *dy, const int n, const float p, const uint seed,
                          const uint step, const uint layer) {
    const int i = (int)get_global_id(0);
    if (i >= n) return;
    const float u = (float)(ct_hash(seed, step, layer, (uint)i) >> 8) * (1.0f / 16777216.0f);
    dx[i] = u >= p ? dy[i] / (1.0f - p) : 0.0f;
}
