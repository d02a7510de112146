/* cl.h: the OpenCL runtime cltrain runs on: device choice, context and
 * queues, kernel sources (embedded or from CLTRAIN_KERNEL_DIR), program
 * build with an on-disk binary cache, buffers, launches and error names.
 * Tested through every kernel test (tests/test_*.c). */
#ifndef CLTRAIN_CL_H
#define CLTRAIN_CL_H
#ifndef CL_TARGET_OPENCL_VERSION
#define CL_TARGET_OPENCL_VERSION 120
#endif
#include <limits.h>
#include <CL/cl.h>
#ifndef CL_PLATFORM_NOT_FOUND_KHR
#define CL_PLATFORM_NOT_FOUND_KHR -1001
#endif
#include "cltrain/common.h"

void ct_cl_die(cl_int e, const char *call, const char *file, int line) __attribute__((noreturn));
/* A call whose failure is a bug: print call, error name, file:line, abort. */
#define CL_CHECK(call) do { cl_int ct_e_ = (call); if (ct_e_ != CL_SUCCESS) ct_cl_die(ct_e_, #call, __FILE__, __LINE__); } while (0)

typedef struct ct_cl {
    cl_platform_id platform;
    cl_device_id device;
    cl_context ctx;
    cl_command_queue queue;  /* compute queue (in order) */
    cl_command_queue xfer;   /* transfer queue (in order), may equal queue */
    char platform_name[256], device_name[256], driver_version[128];
    char vendor[128];        /* CL_DEVICE_VENDOR (PoCL on a CPU: the CPU's, AuthenticAMD or GenuineIntel) */
    char device_version[128], platform_version[256];
    cl_device_type type;     /* CL_DEVICE_TYPE as the device reports it */
    /* The device class in force: which kernel shapes run (GEMM variant and
     * split, Winograd fused or not, direct convolutions, 16-wide kernels,
     * work-group sizes), not what the hardware is. Exactly one of is_cpu and
     * is_gpu is set. CLTRAIN_DEVICE_CLASS=cpu|gpu forces it on any device;
     * otherwise ct_cl_class_auto decides from the device type. */
    int dev_class;           /* CT_CLASS_CPU or CT_CLASS_GPU */
    const char *class_why;   /* "CLTRAIN_DEVICE_CLASS", "device type CPU", ... */
    int is_cpu, is_gpu;
    int compute_units;
    int float_width;         /* CL_DEVICE_NATIVE_VECTOR_WIDTH_FLOAT */
    size_t max_wg;           /* CL_DEVICE_MAX_WORK_GROUP_SIZE */
    cl_ulong global_mem, max_alloc, local_mem;
    int plat_index, dev_index;
    int sync;                /* CLTRAIN_SYNC=1: finish and check after every launch */
    int profile;             /* CLTRAIN_DEBUG>=2: per-kernel times */
    int cache_hits, cache_misses;
    int loop_limit;          /* ct_cl_loop_limit's answer once probed (0: none found) */
    int loop_probed;
} ct_cl;

enum { CT_CLASS_CPU = 0, CT_CLASS_GPU = 1 };
/* "cpu" or "gpu" */
const char *ct_cl_class_name(int cls);
/* The class a device type gets (CLTRAIN_DEVICE_CLASS=auto): CT_CLASS_CPU for a
 * device that reports the CPU type bit and not the GPU bit; CT_CLASS_GPU for
 * every other (GPU, accelerator, and a device reporting both the GPU and the
 * CPU bit, as Oclgrind does: the GPU shapes are the portable ones, since the
 * CPU-shaped kernels keep kilobytes of private arrays per work-item that a
 * GPU would spill, and a simulator is there to check work-groups, local
 * memory and barriers). *why says which rule applied (a static string). */
int ct_cl_class_auto(cl_device_type t, const char **why);
/* CLTRAIN_DEVICE_CLASS: *cls = CT_CLASS_CPU or CT_CLASS_GPU when forced, -1
 * for auto (unset, empty or "auto"); CT_EINPUT for any other value. */
int ct_cl_class_env(int *cls);

/* The tuning database of a device (cltrain tune writes it; src/nn/gemm_db.c):
 * the cache directory, keyed on platform and device names and the class. */
void ct_cl_tune_db_path(const char *platform, const char *device, int cls, char *out, size_t n);
/* The "speed GFLOPS" line of a tuning database (a training step's achieved
 * GFLOP/s, measured by cltrain tune), or 0 when it has none. */
double ct_cl_tune_db_speed(const char *path);

/* How many iterations of one simple loop a work-item of this device runs
 * before the device ends the loop early, or 0 when it ran all of the
 * probe's CT_LOOP_PROBE_N. Mesa's llvmpipe (rusticl, Mesa 22.3) caps every
 * loop of a kernel at 65535 iterations in all, counted over all of a
 * work-item's loops together (gallivm's LP_MAX_TGSI_LOOP_ITERATIONS, a
 * guard meant for graphics shaders), and then leaves the loops without an
 * error: a long GEMM or a Winograd tile loop silently gives wrong sums or
 * NaN. Measured by running a tiny kernel once (on the first call; cached
 * in cl), so the kernels that loop long can split their work below it
 * (src/nn/gemm.c) or not run (the fused Winograd kernels). A device
 * property test, not a vendor string. */
enum { CT_LOOP_PROBE_N = 1 << 17, CT_LOOP_SLACK = 4096 };
int ct_cl_loop_limit(ct_cl *cl);
/* How many pieces of work of `cost` loop iterations each one work-item may
 * take on this device, CT_LOOP_SLACK iterations left for its other loops
 * (0: not even one); LONG_MAX when the device has no loop limit. */
static inline long ct_cl_loop_room(ct_cl *cl, long cost) {
    int limit = ct_cl_loop_limit(cl);
    if (limit <= 0) return LONG_MAX;
    return limit > CT_LOOP_SLACK ? (limit - CT_LOOP_SLACK) / (cost > 0 ? cost : 1) : 0;
}

/* Print every platform and device with the PLATFORM:DEVICE index --device takes. */
int ct_cl_list(FILE *out);
/* Open a device: spec "P:D" or NULL (then CLTRAIN_DEVICE, else the first GPU, else the
 * device whose tuning database records the fastest training step, else the first CPU,
 * else the first device). A platform whose devices cannot be listed is skipped. */
int ct_cl_open(ct_cl *cl, const char *spec);
/* The same for data-parallel rank `rank`: spec may list one device per rank
 * ("0:0,0:1"); without a spec, the local_rank-th GPU of the node (mod count). */
int ct_cl_open_rank(ct_cl *cl, const char *spec, int rank, int local_rank);
void ct_cl_close(ct_cl *cl);
const char *ct_cl_errstr(cl_int e);

/* Build a program from kernels/<file> with the prelude prepended and -D options;
 * the binary is cached on disk, keyed on source, options and device/driver/platform. */
int ct_cl_build(ct_cl *cl, cl_program *out, const char *file, const char *options);
/* Source of kernels/<file>: CLTRAIN_KERNEL_DIR on disk, else the embedded copy. NULL if none. Caller frees. */
char *ct_kernel_source(const char *file);
cl_kernel ct_cl_kernel(cl_program p, const char *name);
/* The cache directory: CLTRAIN_CACHE_DIR, else $XDG_CACHE_HOME/cltrain, ~/.cache/cltrain, /tmp/cltrain-cache. */
void ct_cl_cache_dir(char *out, size_t n);
/* FNV-1a of s folded into h (with a separator), the program cache's hash; h starts at 0xcbf29ce484222325. */
uint64_t ct_hash_str(uint64_t h, const char *s);
/* Hash of the named kernel sources as ct_cl_build would read them (prelude.cl included when named). */
uint64_t ct_cl_source_hash(const char *const *files, int n);

/* Device buffer; failure names what, the size, and suggests a smaller batch. */
int ct_cl_alloc(ct_cl *cl, cl_mem *out, size_t bytes, const char *what);
void ct_cl_release(cl_mem *m);
void ct_cl_write(ct_cl *cl, cl_mem m, size_t off, size_t bytes, const void *src);
void ct_cl_read(ct_cl *cl, cl_mem m, size_t off, size_t bytes, void *dst);
void ct_cl_fill0(ct_cl *cl, cl_mem m, size_t off, size_t bytes);

/* Launch on the compute queue; gws is rounded up to a multiple of lws (lws may be NULL). */
void ct_cl_run(ct_cl *cl, cl_kernel k, const char *name, int dims, const size_t *gws, const size_t *lws);
/* The largest divisor of n that is at most most (1 at least): a work-group size that divides a
 * global size, or a count of vectors per pass. PoCL keeps every work-item's private arrays of a
 * work-group on one thread's stack, so kernels with kilobytes of them need small groups (left to
 * PoCL, wino_w16 on 256x256 weights got 2048 work-items and crashed). */
static inline size_t ct_divisor_upto(size_t n, size_t most) {
    size_t d = n < most ? n : most;
    while (d > 1 && n % d) d--;
    return d < 1 ? 1 : d;
}
void ct_cl_finish(ct_cl *cl);

/* Kernel arguments, typed: ct_kargs(k, a0, a1, ...) sets arguments 0, 1, ...
 * Each argument's C type picks its setter through _Generic, so the compiler
 * checks every call: cl_mem, int, unsigned (cl_uint) and float are accepted;
 * anything else (a double, a size_t, a pointer) is a compile-time error, not a
 * wrong argument size found by the driver at run time. At most 32 arguments. */
static inline void ct_karg_mem(cl_kernel k, cl_uint i, cl_mem v) { CL_CHECK(clSetKernelArg(k, i, sizeof v, &v)); }
static inline void ct_karg_int(cl_kernel k, cl_uint i, cl_int v) { CL_CHECK(clSetKernelArg(k, i, sizeof v, &v)); }
static inline void ct_karg_uint(cl_kernel k, cl_uint i, cl_uint v) { CL_CHECK(clSetKernelArg(k, i, sizeof v, &v)); }
static inline void ct_karg_float(cl_kernel k, cl_uint i, cl_float v) { CL_CHECK(clSetKernelArg(k, i, sizeof v, &v)); }
#define CT_KARG(k, i, v) _Generic((v), cl_mem: ct_karg_mem, int: ct_karg_int, unsigned: ct_karg_uint, float: ct_karg_float)((k), (i), (v))
#define CT_KA_1(k, i, v) CT_KARG(k, i, v)
#define CT_KA_2(k, i, v, ...) CT_KARG(k, i, v); CT_KA_1(k, i + 1, __VA_ARGS__)
#define CT_KA_3(k, i, v, ...) CT_KARG(k, i, v); CT_KA_2(k, i + 1, __VA_ARGS__)
#define CT_KA_4(k, i, v, ...) CT_KARG(k, i, v); CT_KA_3(k, i + 1, __VA_ARGS__)
#define CT_KA_5(k, i, v, ...) CT_KARG(k, i, v); CT_KA_4(k, i + 1, __VA_ARGS__)
#define CT_KA_6(k, i, v, ...) CT_KARG(k, i, v); CT_KA_5(k, i + 1, __VA_ARGS__)
#define CT_KA_7(k, i, v, ...) CT_KARG(k, i, v); CT_KA_6(k, i + 1, __VA_ARGS__)
#define CT_KA_8(k, i, v, ...) CT_KARG(k, i, v); CT_KA_7(k, i + 1, __VA_ARGS__)
#define CT_KA_9(k, i, v, ...) CT_KARG(k, i, v); CT_KA_8(k, i + 1, __VA_ARGS__)
#define CT_KA_10(k, i, v, ...) CT_KARG(k, i, v); CT_KA_9(k, i + 1, __VA_ARGS__)
#define CT_KA_11(k, i, v, ...) CT_KARG(k, i, v); CT_KA_10(k, i + 1, __VA_ARGS__)
#define CT_KA_12(k, i, v, ...) CT_KARG(k, i, v); CT_KA_11(k, i + 1, __VA_ARGS__)
#define CT_KA_13(k, i, v, ...) CT_KARG(k, i, v); CT_KA_12(k, i + 1, __VA_ARGS__)
#define CT_KA_14(k, i, v, ...) CT_KARG(k, i, v); CT_KA_13(k, i + 1, __VA_ARGS__)
#define CT_KA_15(k, i, v, ...) CT_KARG(k, i, v); CT_KA_14(k, i + 1, __VA_ARGS__)
#define CT_KA_16(k, i, v, ...) CT_KARG(k, i, v); CT_KA_15(k, i + 1, __VA_ARGS__)
#define CT_KA_17(k, i, v, ...) CT_KARG(k, i, v); CT_KA_16(k, i + 1, __VA_ARGS__)
#define CT_KA_18(k, i, v, ...) CT_KARG(k, i, v); CT_KA_17(k, i + 1, __VA_ARGS__)
#define CT_KA_19(k, i, v, ...) CT_KARG(k, i, v); CT_KA_18(k, i + 1, __VA_ARGS__)
#define CT_KA_20(k, i, v, ...) CT_KARG(k, i, v); CT_KA_19(k, i + 1, __VA_ARGS__)
#define CT_KA_21(k, i, v, ...) CT_KARG(k, i, v); CT_KA_20(k, i + 1, __VA_ARGS__)
#define CT_KA_22(k, i, v, ...) CT_KARG(k, i, v); CT_KA_21(k, i + 1, __VA_ARGS__)
#define CT_KA_23(k, i, v, ...) CT_KARG(k, i, v); CT_KA_22(k, i + 1, __VA_ARGS__)
#define CT_KA_24(k, i, v, ...) CT_KARG(k, i, v); CT_KA_23(k, i + 1, __VA_ARGS__)
#define CT_KA_25(k, i, v, ...) CT_KARG(k, i, v); CT_KA_24(k, i + 1, __VA_ARGS__)
#define CT_KA_26(k, i, v, ...) CT_KARG(k, i, v); CT_KA_25(k, i + 1, __VA_ARGS__)
#define CT_KA_27(k, i, v, ...) CT_KARG(k, i, v); CT_KA_26(k, i + 1, __VA_ARGS__)
#define CT_KA_28(k, i, v, ...) CT_KARG(k, i, v); CT_KA_27(k, i + 1, __VA_ARGS__)
#define CT_KA_29(k, i, v, ...) CT_KARG(k, i, v); CT_KA_28(k, i + 1, __VA_ARGS__)
#define CT_KA_30(k, i, v, ...) CT_KARG(k, i, v); CT_KA_29(k, i + 1, __VA_ARGS__)
#define CT_KA_31(k, i, v, ...) CT_KARG(k, i, v); CT_KA_30(k, i + 1, __VA_ARGS__)
#define CT_KA_32(k, i, v, ...) CT_KARG(k, i, v); CT_KA_31(k, i + 1, __VA_ARGS__)
#define CT_KA_N(_1, _2, _3, _4, _5, _6, _7, _8, _9, _10, _11, _12, _13, _14, _15, _16, _17, _18, _19, _20, _21, _22, _23, _24, \
                _25, _26, _27, _28, _29, _30, _31, _32, N, ...) CT_KA_##N
#define ct_kargs(k, ...) do { cl_kernel ct_k_ = (k); CT_KA_N(__VA_ARGS__, 32, 31, 30, 29, 28, 27, 26, 25, 24, 23, 22, 21, 20, 19, 18, 17, 16, 15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0)(ct_k_, 0u, __VA_ARGS__); } while (0)
/* One argument at index i, for kernels whose trailing arguments change per launch. */
#define CT_ARG(k, i, v) CT_KARG((k), (cl_uint)(i), (v))

/* A call whose failure the environment causes: record it and return CT_EDEVICE. */
#define CL_TRY(call) do { cl_int ct_e_ = (call); if (ct_e_ != CL_SUCCESS) return ct_fail(CT_EDEVICE, "%s failed: %s (%s:%d)", #call, ct_cl_errstr(ct_e_), __FILE__, __LINE__); } while (0)

static inline size_t ct_round_up(size_t x, size_t m) { return (x + m - 1) / m * m; }
#endif
