/* cl.h: the OpenCL runtime cltrain runs on: device choice, context and
 * queues, kernel sources (embedded or from CLTRAIN_KERNEL_DIR), program
 * build with an on-disk binary cache, buffers, launches and error names.
 * Tested by tests/test_cl.c and, through them, by every kernel test. */
#ifndef CLTRAIN_CL_H
#define CLTRAIN_CL_H
#ifndef CL_TARGET_OPENCL_VERSION
#define CL_TARGET_OPENCL_VERSION 120
#endif
#include <CL/cl.h>
#ifndef CL_PLATFORM_NOT_FOUND_KHR
#define CL_PLATFORM_NOT_FOUND_KHR -1001
#endif
#include "cltrain/common.h"

typedef struct ct_cl {
    cl_platform_id platform;
    cl_device_id device;
    cl_context ctx;
    cl_command_queue queue;  /* compute queue (in order) */
    cl_command_queue xfer;   /* transfer queue (in order), may equal queue */
    char platform_name[256], device_name[256], driver_version[128];
    char device_version[128], platform_version[256];
    int is_cpu, is_gpu;
    int compute_units;
    size_t max_wg;           /* CL_DEVICE_MAX_WORK_GROUP_SIZE */
    cl_ulong global_mem, max_alloc, local_mem;
    int plat_index, dev_index;
    int sync;                /* CLTRAIN_SYNC=1: finish and check after every launch */
    int profile;             /* CLTRAIN_DEBUG>=2: per-kernel times */
    double build_seconds;    /* time spent compiling (cache misses) */
    int cache_hits, cache_misses;
} ct_cl;

/* Print every platform and device with the PLATFORM:DEVICE index --device takes. */
int ct_cl_list(FILE *out);
/* Open a device: spec "P:D" or NULL (then CLTRAIN_DEVICE, else first GPU, else first device). */
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

/* Device buffer; failure names what, the size, and suggests a smaller batch. */
int ct_cl_alloc(ct_cl *cl, cl_mem *out, size_t bytes, const char *what);
void ct_cl_release(cl_mem *m);
void ct_cl_write(ct_cl *cl, cl_mem m, size_t off, size_t bytes, const void *src);
void ct_cl_read(ct_cl *cl, cl_mem m, size_t off, size_t bytes, void *dst);
void ct_cl_fill0(ct_cl *cl, cl_mem m, size_t off, size_t bytes);

/* Launch on the compute queue; gws is rounded up to a multiple of lws (lws may be NULL). */
void ct_cl_run(ct_cl *cl, cl_kernel k, const char *name, int dims, const size_t *gws, const size_t *lws);
void ct_cl_finish(ct_cl *cl);

/* Kernel arguments: CT_ARG(k, i, value) sets arg i to an lvalue of any type. */
#define CT_ARG(k, i, v) CL_CHECK(clSetKernelArg((k), (i), sizeof(v), &(v)))
void ct_cl_args(cl_kernel k, const char *fmt, ...);

void ct_cl_die(cl_int e, const char *call, const char *file, int line) __attribute__((noreturn));
/* A call whose failure is a bug: print call, error name, file:line, abort. */
#define CL_CHECK(call) do { cl_int ct_e_ = (call); if (ct_e_ != CL_SUCCESS) ct_cl_die(ct_e_, #call, __FILE__, __LINE__); } while (0)
/* A call whose failure the environment causes: record it and return CT_EDEVICE. */
#define CL_TRY(call) do { cl_int ct_e_ = (call); if (ct_e_ != CL_SUCCESS) return ct_fail(CT_EDEVICE, "%s failed: %s (%s:%d)", #call, ct_cl_errstr(ct_e_), __FILE__, __LINE__); } while (0)

static inline size_t ct_round_up(size_t x, size_t m) { return (x + m - 1) / m * m; }
#endif
