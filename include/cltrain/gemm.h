/* gemm.h: the matrix product every conv and dense layer runs on.
 * C = alpha * op(A) * op(B) + beta * C (+ bias[n]) (ReLU), row-major, float.
 * Paths: our kernels (default) and CLBlast's SGEMM as the reference path.
 * Ours come in three variants, each specialised by -D parameters:
 *   CT_GEMM_REG    kernels/gemm.cl: a register tile per work-item, no local
 *                  memory (shaped for CPUs); parameters TM, NV
 *   CT_GEMM_LOCAL  kernels/gemm_local.cl: local-memory tiles, double-buffered
 *                  across K, micro-tile per work-item (shaped for GPUs);
 *                  parameters TSM, TSN, TSK, WPTM, WPTN, VW
 *   CT_GEMM_IMG    kernels/gemm_img.cl: a scalar register tile per
 *                  work-item, A and B read through image views of their
 *                  buffers (shaped for llvmpipe); parameters TM, TN
 * plus a split-K chunk. The shipped choice per device class is the table in
 * src/nn/gemm_defaults.c; CLTRAIN_GEMM overrides it; a tuning database
 * written by `cltrain tune` (or --gemm auto) chooses per shape.
 * Tested by tests/test_gemm.c against src/ref/gemm.c (every candidate). */
#ifndef CLTRAIN_GEMM_H
#define CLTRAIN_GEMM_H
#include "cltrain/cl.h"

enum { CT_GEMM_NATIVE = 0, CT_GEMM_CLBLAST = 1, CT_GEMM_AUTO = 2 };
enum { CT_GEMM_REG = 0, CT_GEMM_LOCAL = 1, CT_GEMM_IMG = 2 };
enum { CT_GEMM_MAX_PROGS = 24, CT_GEMM_MAX_SHAPES = 256 };

/* One kernel variant and its parameters. p[] is {TM, NV} for CT_GEMM_REG,
 * {TSM, TSN, TSK, WPTM, WPTN, VW} for CT_GEMM_LOCAL and {TM, TN} for CT_GEMM_IMG; kchunk is the split-K
 * chunk, a launch argument (not a build option). */
typedef struct ct_gemm_cfg { int variant; int p[6]; int kchunk; } ct_gemm_cfg;

/* A row of the shipped table: device type (CL_DEVICE_TYPE_*, 0 = any), a
 * vendor substring (NULL = any) and the least native float vector width
 * (CL_DEVICE_NATIVE_VECTOR_WIDTH_FLOAT: 8 for AVX2, 16 for AVX-512; 0 = any)
 * select the row; the first match wins. */
typedef struct ct_gemm_default {
    const char *cls;
    unsigned long type;
    const char *vendor;
    int min_vec;
    ct_gemm_cfg cfg;
    /* > 0: shapes with N <= 16 (one float16 of columns) run the register
     * kernel with TM = narrow_tm, NV = 1 instead of cfg: cfg's second column
     * vector would be all edge (resnet20's 16-channel layers) */
    int narrow_tm;
    /* > 0: shapes with N >= 16 * wide_nv run the register kernel with NV =
     * wide_nv (TM of cfg): a wider tile of columns, each broadcast of A used
     * for more of them (mnist-cnn's dense layer, cifar-cnn's 128-channel
     * Winograd products) */
    int wide_nv;
    /* > 0: the row matches only devices whose native float vector width is
     * at most this (1: implementations that vectorise across work-items and
     * scalarise each work-item's own vectors and buffer loads, llvmpipe) */
    int max_vec;
    /* > 0: the wide tile's rows (TM) instead of cfg's: TM x wide_nv accumulators
     * and wide_nv column vectors must leave registers for the broadcast and the
     * addresses (6 x 4 on AVX-512's 32 spilled an accumulator every step of k) */
    int wide_tm;
} ct_gemm_default;
extern const ct_gemm_default ct_gemm_defaults[];
/* What `cltrain tune` tries (every entry is tested on PoCL), and its split-K chunks. */
extern const ct_gemm_cfg ct_gemm_candidates[];
extern const int ct_gemm_n_candidates;
extern const int ct_gemm_kchunks[];
extern const int ct_gemm_n_kchunks;

typedef struct ct_gemm_prog { ct_gemm_cfg cfg; cl_program prog; cl_kernel k; } ct_gemm_prog;

/* What one shape runs: our kernels with cfg, or CLBlast. */
typedef struct ct_gemm_choice { int transA, transB, M, N, K, path; ct_gemm_cfg cfg; int prog; } ct_gemm_choice;

/* The tuning database also says how a 3x3 stride-1 convolution of one shape
 * runs under --conv auto: tile 0 im2col + GEMM, 2 or 4 Winograd F(m x m, 3x3)
 * (cltrain tune times the three per layer shape; src/nn/layers/conv.c reads it). */
enum { CT_CONV_MAX_CHOICES = 64 };
typedef struct ct_conv_choice { int B, ih, iw, ic, oc, pad, tile; } ct_conv_choice;

typedef struct ct_gemm {
    ct_cl *cl;
    cl_kernel k_reduce, k_reduce16, k_transpose; /* from the first program (gemm.cl) */
    ct_gemm_cfg def;                  /* the shipped default or CLTRAIN_GEMM */
    ct_gemm_cfg narrow;               /* the shipped default for N <= 16 (the table's narrow_tm), or def */
    int narrow_prog;
    ct_gemm_cfg wide;                 /* the shipped default for N >= wide_n (the table's wide_nv), or def */
    int wide_prog, wide_n;
    const char *def_from;             /* "table row cpu", "CLTRAIN_GEMM", ... */
    int def_prog;
    ct_gemm_prog progs[CT_GEMM_MAX_PROGS];
    int n_progs;
    int mode;                         /* CT_GEMM_NATIVE, _CLBLAST or _AUTO */
    cl_mem work;                      /* split-K partials and transposed B; grows on demand (init time only) */
    size_t work_bytes;
    cl_mem view_buf[8], view_img[8];  /* image views of buffers for gemm_img.cl, kept until freed (see image_view) */
    int n_views;
    ct_gemm_choice choices[CT_GEMM_MAX_SHAPES]; /* per shape, from the database, the tuner or --gemm auto */
    int n_choices;
    int use_choices;                  /* 0: the default for every shape (for comparisons) */
    int shapes[CT_GEMM_MAX_SHAPES][5];/* every shape reserved: {transA, transB, M, N, K} */
    int n_shapes;
    ct_conv_choice convs[CT_CONV_MAX_CHOICES]; /* per conv shape, from the database or the tuner */
    int n_convs;
    char db_path[4200];               /* the tuning database of this device ("" when none is used) */
    double speed_gflops;              /* a training step's achieved GFLOP/s as cltrain tune measured it (0: not measured) */
} ct_gemm;

int ct_gemm_init(ct_gemm *g, ct_cl *cl, int mode);
void ct_gemm_free(ct_gemm *g);
/* Reserve workspace for a shape ahead of time, so no allocation happens while
 * training; also records the shape (the tuner's list). */
int ct_gemm_reserve(ct_gemm *g, int transA, int transB, int M, int N, int K);
/* The same for `count` products of one shape (Winograd's 16 or 36): product
 * i's A, B and C start i*strideA, i*strideB, i*strideC floats after product
 * 0's. One launch on our kernels; B not transposed, no bias. */
int ct_gemm_reserve_batched(ct_gemm *g, int count, int transA, int transB, int M, int N, int K);
void ct_gemm_run_batched(ct_gemm *g, int count, int transA, int M, int N, int K, float alpha, cl_mem A, size_t offA,
                         int lda, size_t strideA, cl_mem B, size_t offB, int ldb, size_t strideB, float beta, cl_mem C,
                         size_t offC, int ldc, size_t strideC);
/* One product C = alpha op(A) op(B) + beta C (+ bias[n]) (activation act,
 * CT_ACT_*): A is [M,K] (transA=0) or [K,M]; B is [K,N] (transB=0) or [N,K];
 * offsets in floats. Written with designated initializers, so each operand
 * is named where it is used; a field left out is 0 (NULL: no bias), so
 * alpha must be given. */
typedef struct ct_gemm_desc {
    int transA, transB, M, N, K;
    float alpha, beta;
    cl_mem A; size_t offA; int lda;
    cl_mem B; size_t offB; int ldb;
    cl_mem C; size_t offC; int ldc;
    cl_mem bias; size_t offBias; int act;
} ct_gemm_desc;
/* d's product, on the path --gemm chose (our kernels, CLBlast, or per shape) */
void ct_gemm_run(ct_gemm *g, const ct_gemm_desc *d);
/* Our kernels only, with the shape's choice (or the default) / with program
 * `prog` (from ct_gemm_prog_get) and split-K chunk `kchunk`. */
void ct_gemm_native(ct_gemm *g, int transA, int transB, int M, int N, int K, float alpha,
                    cl_mem A, size_t offA, int lda, cl_mem B, size_t offB, int ldb,
                    float beta, cl_mem C, size_t offC, int ldc, cl_mem bias, size_t offBias, int act);
void ct_gemm_native_with(ct_gemm *g, int prog, int kchunk, int transA, int transB, int M, int N, int K, float alpha,
                         cl_mem A, size_t offA, int lda, cl_mem B, size_t offB, int ldb,
                         float beta, cl_mem C, size_t offC, int ldc, cl_mem bias, size_t offBias, int act);
/* CLBlast only (bias and act applied by a second pass). */
int ct_gemm_clblast(ct_gemm *g, int transA, int transB, int M, int N, int K, float alpha,
                    cl_mem A, size_t offA, int lda, cl_mem B, size_t offB, int ldb,
                    float beta, cl_mem C, size_t offC, int ldc, cl_mem bias, size_t offBias, int act);

/* The program for cfg's variant and parameters, built on first use; its index,
 * or -1 with the reason (bad parameters, over the device's local memory or
 * work-group size, build failure) in ct_last_error(). */
int ct_gemm_prog_get(ct_gemm *g, const ct_gemm_cfg *cfg);
/* 0 when cfg fits the device's local memory and work-group size (else CT_EDEVICE saying which). */
int ct_gemm_cfg_fits(const ct_gemm *g, const ct_gemm_cfg *cfg);
/* 0 when cfg's parameters are consistent (else CT_EINPUT naming the rule). */
int ct_gemm_cfg_check(const ct_gemm_cfg *cfg);
/* "reg TM=6 NV=2 KCHUNK=512" / "local TSM=64 ... KCHUNK=128" */
void ct_gemm_cfg_str(const ct_gemm_cfg *cfg, char *out, size_t n);
/* The split count a shape gets with cfg (1: no split). */
int ct_gemm_splits(const ct_gemm *g, const ct_gemm_cfg *cfg, int transA, int M, int N, int K);
/* The shipped default for a shape of N columns: program and configuration. */
void ct_gemm_default_for(const ct_gemm *g, int N, int *prog, ct_gemm_cfg *cfg);
/* The choice recorded for a shape, or NULL. */
ct_gemm_choice *ct_gemm_find(ct_gemm *g, int transA, int transB, int M, int N, int K);
/* Record (or replace) a shape's choice; CT_EDEVICE when its program does not build. */
int ct_gemm_choose(ct_gemm *g, int transA, int transB, int M, int N, int K, int path, const ct_gemm_cfg *cfg);

/* 1 when a and b are the same conv shape (batch, input side and channels,
 * output channels, padding; the tile is not compared). */
int ct_conv_same_shape(const ct_conv_choice *a, const ct_conv_choice *b);
/* The conv choice recorded for key's shape, or NULL. */
const ct_conv_choice *ct_conv_find(const ct_gemm *g, const ct_conv_choice *key);
/* Record (or replace) a conv shape's choice; CT_EINPUT when the table is full or the tile is not 0, 1, 2 or 4. */
int ct_conv_choose(ct_gemm *g, const ct_conv_choice *c);

/* ---- tuning database (src/nn/gemm_db.c; the search ct_gemm_tune: src/nn/tune.c) ----
 * A text file in the cache directory, one per device (name and platform),
 * headed by the device, driver, device and platform versions and the hash of
 * the GEMM, im2col and Winograd kernel sources, then one `shape` line per
 * tuned GEMM shape and one `conv` line per tuned convolution shape, then
 * `end N` (N: the number of both). */
void ct_gemm_db_default_path(const ct_gemm *g, char *out, size_t n);
/* Load path into g's choices: 0 loaded, 1 no such file; CT_EINPUT when the
 * file is ignored (damaged, another device, driver or kernel source), with
 * the reason in ct_last_error(); g's choices are then left empty. */
int ct_gemm_db_load(ct_gemm *g, const char *path);
/* Write g's choices to path (a temporary name, then renamed). */
int ct_gemm_db_save(const ct_gemm *g, const char *path);
/* The search: for each reserved shape (largest first), validate every
 * candidate against a float64 reference on sampled entries, time it, keep it
 * when faster than the default by 3% or more. Stops at budget_s seconds;
 * progress lines go to log; a candidate skipped (it does not build or fit
 * this device) or rejected (a wrong result) is also said in one line on
 * notes when notes is not log. Returns the number of shapes given a choice. */
int ct_gemm_tune(ct_gemm *g, double budget_s, FILE *log, FILE *notes);
#endif
