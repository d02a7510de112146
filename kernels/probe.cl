/* probe.cl: device behaviours cltrain measures instead of assuming (cl.c).
 * ct_loop_probe: one work-item counts the iterations of a loop of n; each adds
 * in[i & 15] (= 1), so no compiler folds the loop. A device that ends a
 * work-item's loops early (Mesa 22.3's llvmpipe, after 65535 iterations in all)
 * writes fewer than n. Tested by test_gemm's test_native_long_k. */
__kernel void ct_loop_probe(__global int *out, __global const int *in, const int n) {
    int s = 0;
    for (int i = 0; i < n; i++) s += in[i & 15];
    out[0] = s;
}
