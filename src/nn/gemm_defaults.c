/* nn/gemm_defaults.c: the shipped GEMM choice per device class (the class in
 * force, CLTRAIN_DEVICE_CLASS or the device type: cl.h), and the
 * candidates `cltrain tune` searches. One table each, read top to bottom;
 * the first row whose device type, vendor and vector width match is used
 * (ct_gemm_init).
 * A tuning database (`cltrain tune`) overrides these per shape, and
 * CLTRAIN_GEMM overrides both. Every candidate below is tested against the
 * float64 reference on PoCL by tests/test_gemm.c. */
#include "cltrain/gemm.h"

#define REG(tm, nv, kc) {CT_GEMM_REG, {tm, nv, 0, 0, 0, 0}, kc}
#define LOCAL(tsm, tsn, tsk, wptm, wptn, vw, kc) {CT_GEMM_LOCAL, {tsm, tsn, tsk, wptm, wptn, vw}, kc}
#define IMG(tm, tn, kc) {CT_GEMM_IMG, {tm, tn, 0, 0, 0, 0}, kc}

/* The register kernel keeps TM x NV float16 accumulators in registers: TM*NV
 * zmm registers with AVX-512 (32 of them), twice as many ymm halves with AVX2
 * (16 of them). So TM=6 NV=2 fits AVX-512 but spills on AVX2, where TM=6
 * NV=1 is the classic 6x16 micro-kernel (12 accumulators, 2 for B, 1 for
 * the broadcast A), checked in PoCL's generated code. */
const ct_gemm_default ct_gemm_defaults[] = {
    /* class       device type          vendor contains    min vector  variant and parameters, narrow TM, wide NV   where the figure comes from */
    /* A CPU device with native float vector width 1 vectorises across work-items and turns every buffer
     * load of a work-item into a per-lane loop (Mesa's llvmpipe under rusticl); its image reads are vector
     * gathers. rusticl 22.3, llvmpipe, 2 cores: 256^3 at 6.9 GFLOP/s against 0.55 for a 4x4 buffer tile
     * and 0.38 for gemm.cl's shape (BENCHMARKS.md, "rusticl: why it was slow") */
    {"cpu-scalar", CL_DEVICE_TYPE_CPU, NULL,                     0,  IMG(4, 4, 512), 0, 0, 1, 0},
    {"cpu-avx512", CL_DEVICE_TYPE_CPU, NULL,                     16, REG(6, 2, 512), 6, 4, 0, 5},         /* PoCL, 2 cores, Intel Xeon (Skylake): bench kernels; narrow: cltrain tune on resnet20 (N=16 shapes 2-2.4x); wide (N >= 64): mnist-cnn's dense layer forward 1.78 -> 1.06 ms, bench train mnist-cnn 1.05-1.08x, cifar-cnn 1.02-1.03x; wide 5 x 4, not 6 x 4 (no spilled accumulator): cifar-fast's GEMMs at batch 1024 887 -> 852 ms a step, bench train 0.967x wall (batch 1024), mnist-cnn 0.974x, cifar-cnn 0.991x, resnet20 1.006x, cifar-fast 1.004x (batch 128) */
    {"cpu",        CL_DEVICE_TYPE_CPU, NULL,                     0,  REG(6, 1, 512), 0, 0, 0, 0},               /* PoCL, 2 cores, AMD EPYC (AVX2): cltrain tune, BENCHMARKS.md */
    {"nvidia",     CL_DEVICE_TYPE_GPU, "NVIDIA",                 0,  LOCAL(64, 64, 16, 4, 4, 4, 128), 0, 0, 0, 0}, /* estimate (16x16 work-items, 4x4 each); H200: split 128 beat 512 */
    {"amd",        CL_DEVICE_TYPE_GPU, "Advanced Micro Devices", 0,  LOCAL(64, 64, 16, 4, 4, 4, 128), 0, 0, 0, 0}, /* estimate, not measured */
    {"amd",        CL_DEVICE_TYPE_GPU, "AMD",                    0,  LOCAL(64, 64, 16, 4, 4, 4, 128), 0, 0, 0, 0}, /* estimate, not measured */
    {"intel",      CL_DEVICE_TYPE_GPU, "Intel",                  0,  LOCAL(32, 32, 16, 4, 4, 4, 128), 0, 0, 0, 0}, /* estimate: smaller work-groups */
    {"gpu",        CL_DEVICE_TYPE_GPU, NULL,                     0,  LOCAL(32, 32, 16, 4, 4, 4, 128), 0, 0, 0, 0}, /* any other GPU (and class gpu on a CPU): 64 work-items, 4 KiB of local memory, the smallest demands */
    {"fallback",   0,                  NULL,                     0,  REG(4, 1, 128), 0, 0, 0, 0},               /* reached by no class; gemm.cl's build parameters when the default is local, and the default when a local one does not fit */
    {NULL, 0, NULL, 0, REG(0, 0, 0), 0, 0, 0, 0},
};

/* The search space of `cltrain tune`. Split-K chunks are tried separately
 * (ct_gemm_kchunks) on shapes that split; the kchunk here is the one used
 * on shapes that do not. */
const ct_gemm_cfg ct_gemm_candidates[] = {
    REG(6, 1, 512), REG(5, 1, 512), REG(4, 1, 128),  /* fit AVX2's 16 registers */
    REG(6, 2, 512), REG(4, 2, 512), REG(8, 2, 512), REG(8, 1, 512), /* fit AVX-512's 32 */
    REG(6, 4, 512), /* AVX-512: 24 accumulators, a 64-column tile; cltrain tune picks it for mnist-cnn's dense forward (NN 128x128x9216: 1.54 -> 1.25 ms) */
    REG(5, 4, 512), /* AVX-512: 20 accumulators, the cpu-avx512 row's wide tile (6 x 4 spilled one) */
    LOCAL(64, 64, 16, 4, 4, 4, 128),   /* 256 work-items */
    LOCAL(128, 128, 16, 8, 8, 4, 128), /* 256 work-items, 32 KiB of local memory */
    LOCAL(128, 64, 16, 8, 4, 4, 128),  /* 256 work-items */
    LOCAL(32, 32, 16, 4, 4, 4, 128),   /* 64 work-items */
    LOCAL(64, 64, 8, 8, 8, 2, 128),    /* 64 work-items, 8x8 micro-tile */
    LOCAL(32, 64, 32, 4, 8, 8, 128),   /* 64 work-items, 8-wide loads */
    LOCAL(32, 32, 16, 4, 8, 4, 128),   /* 32 work-items: what rusticl on llvmpipe allows a kernel (CL_KERNEL_WORK_GROUP_SIZE) */
    /* not the image GEMM: the cpu-scalar row's rule picks it, and on every other device measured (PoCL) images are
     * the slow path (0.3-0.4 GFLOP/s at 256^3 against 3-10 from buffers); test_gemm checks it as a default */
};
const int ct_gemm_n_candidates = (int)(sizeof ct_gemm_candidates / sizeof *ct_gemm_candidates);
const int ct_gemm_kchunks[] = {128, 256, 512, 1024};
const int ct_gemm_n_kchunks = (int)(sizeof ct_gemm_kchunks / sizeof *ct_gemm_kchunks);
