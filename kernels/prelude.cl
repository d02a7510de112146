/* prelude.cl: prepended by the host to every kernel file (see ct_cl_build).
 * Kernels are OpenCL C 1.2, specialised by -D tuning parameters. */
/* The activations, one line each in CT_ACT and CT_ACT_BWD; the values are
 * CT_ACT_* of include/cltrain/model.h, whose ct_activations table names them
 * and says which gradient reads the activation's input (GELU's) rather than
 * its output (ReLU's). Written as macros over the element type VT (float,
 * float8, float16), since OpenCL C 1.2 has no overloading; arguments are
 * evaluated more than once, so pass plain names.
 *   CT_ACT(VT, z, act): the activation of z.
 *   CT_ACT_BWD(VT, g, t, act): the gradient g of the activation's output
 *     taken through it: t is the output y for ReLU (g where y > 0, else 0),
 *     the input z for GELU (g * GELU'(z)).
 * GELU is the erf form, as PyTorch's nn.GELU() by default:
 * GELU(z) = z/2 (1 + erf(z/sqrt 2)), GELU'(z) = (1 + erf(z/sqrt 2))/2 + z phi(z)
 * with phi the standard normal density. */
#define CT_ACT_LINEAR 0
#define CT_ACT_RELU 1
#define CT_ACT_GELU 2
/* erf as a rational function, x P(x^2) / Q(x^2) on [-4, 4] and +-1 outside
 * (the minimax fit Eigen and TensorFlow use): within 1e-7 of erf up to
 * |x| = 3.9 and 3.3e-7 at most (float32's erff: 5e-8), a few
 * multiply-adds and a division that vectorise. The builtin erf took about
 * three quarters of batch norm + GELU's forward on PoCL (AVX-512). mad, not
 * fma: Mesa 22.3's llvmpipe runs a vector fma far slower than mul + add
 * (test_bn on rusticl: 92 s with fma, 3.3 s with mad). */
#define CT_ERF_DEF(VT)                                                                                   \
    inline VT ct_erf_##VT(const VT a) {                                                                  \
        const VT x = clamp(a, (VT)(-4.0f), (VT)(4.0f)), x2 = x * x;                                     \
        VT p = mad(x2, (VT)(-2.72614225801306e-10f), (VT)(2.77068142495902e-08f));                      \
        p = mad(x2, p, (VT)(-2.10102402082508e-06f));                                                    \
        p = mad(x2, p, (VT)(-5.69250639462346e-05f));                                                    \
        p = mad(x2, p, (VT)(-7.34990630326855e-04f));                                                    \
        p = mad(x2, p, (VT)(-2.95459980854025e-03f));                                                    \
        p = mad(x2, p, (VT)(-1.60960333262415e-02f));                                                    \
        VT q = mad(x2, (VT)(-1.45660718464996e-05f), (VT)(-2.13374055278905e-04f));                     \
        q = mad(x2, q, (VT)(-1.68282697438203e-03f));                                                    \
        q = mad(x2, q, (VT)(-7.37332916720468e-03f));                                                    \
        q = mad(x2, q, (VT)(-1.42647390514189e-02f));                                                    \
        return x * p / q;                                                                                \
    }
CT_ERF_DEF(float)
CT_ERF_DEF(float8)
CT_ERF_DEF(float16)
#define CT_ERF(VT, x) ct_erf_##VT(x)
/* GELU and GELU' from e = 1 + erf(z / sqrt 2), which both need (batch norm's
 * forward computes e once for the two) */
#define CT_GELU_E(VT, z) ((VT)(1.0f) + CT_ERF(VT, (z) * (VT)(M_SQRT1_2_F)))
#define CT_GELU_OF(VT, z, e) ((VT)(0.5f) * (z) * (e))
#define CT_GELU_GRAD_OF(VT, z, e) ((VT)(0.5f) * (e) + (z) * (VT)(0.3989422804014327f) * exp((VT)(-0.5f) * (z) * (z)))
#define CT_GELU(VT, z) CT_GELU_OF(VT, z, CT_GELU_E(VT, z))
#define CT_GELU_GRAD(VT, z) CT_GELU_GRAD_OF(VT, z, CT_GELU_E(VT, z))
#define CT_ACT(VT, z, act)                                                                               \
    ((act) == CT_ACT_RELU ? fmax((z), (VT)(0.0f)) : (act) == CT_ACT_GELU ? CT_GELU(VT, z) : (z))
#define CT_ACT_BWD(VT, g, t, act)                                                                        \
    ((act) == CT_ACT_RELU ? select((VT)(0.0f), (g), (t) > (VT)(0.0f))                                    \
                          : (act) == CT_ACT_GELU ? (g) * CT_GELU_GRAD(VT, t) : (g))
/* CT_PREFETCH(p): bring the cache line at p (a __global address; it need not be in a buffer) towards
 * the core, where the host says the kernels run as class cpu on PoCL (CT_POCL_CPU: LLVM compiles them
 * straight to the CPU's code); elsewhere nothing (SPIR-V's translator and Oclgrind refuse the
 * intrinsic). OpenCL's prefetch() compiles to nothing on PoCL. For reads the hardware's prefetchers
 * miss: a tile's six rows of an input the forward wrote long ago, read by a weight gradient
 * (wino_dw_fused, direct_dw_taps); a row streamed in order gains nothing (bn_reduce: 0.993x on
 * resnet20's step). */
#if defined(CT_POCL_CPU) && defined(__clang__)
#define CT_PREFETCH(p) __builtin_prefetch(p)
#else
#define CT_PREFETCH(p) ((void)0)
#endif
/* loads and stores of one float, of eight (float8) or of sixteen (float16), for kernels written
 * once over the element type by a macro (bn.cl, winograd.cl) */
#define LD1(p) (*(p))
#define ST1(v, p) (*(p) = (v))
#define LD8(p) vload8(0, (p))
#define ST8(v, p) vstore8((v), 0, (p))
#define LD16(p) vload16(0, (p))
#define ST16(v, p) vstore16((v), 0, (p))
/* 16 floats from p, the first `valid` of them real and the rest 0 (a partial vector at the end
 * of a row: gemm.cl's column blocks, wino_fused's outputs in 8s): one vector load where all 16
 * are real, one 8-wide load where 8 are, scalar loads only for the ragged rest. Scalar loads for
 * every vector of a partial column block ran the first conv's data gradient of cifar-fast
 * (N = 24) at 51 GFLOP/s. */
inline float16 load16_edge(__global const float *p, int valid) {
    if (valid >= 16) return vload16(0, p);
    if (valid == 8) return (float16)(vload8(0, p), (float8)(0.0f));
    float t[16];
    for (int j = 0; j < 16; j++) t[j] = j < valid ? p[j] : 0.0f;
    return vload16(0, t);
}
/* the first `valid` floats of x to p (at most 16): the store load16_edge pairs with */
inline void store16_edge(const float16 x, __global float *p, int valid) {
    if (valid >= 16) {
        vstore16(x, 0, p);
        return;
    }
    if (valid == 8) {
        vstore8(x.lo, 0, p);
        return;
    }
    float t[16];
    vstore16(x, 0, t);
    for (int j = 0; j < valid; j++) p[j] = t[j];
}
