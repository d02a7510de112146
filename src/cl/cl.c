/* cl.c: OpenCL platform/device choice, context, queues, program build with an
 * on-disk binary cache (ggml-style: key = hash of prelude, source, options,
 * device, driver, device and platform versions; written to a temporary name,
 * then renamed; any mismatch quietly recompiles), buffers and launches.
 * Depends on the ICD loader only (libOpenCL.so.1). Tested through every kernel test (tests/test_*.c). */
#include "cltrain/cl.h"
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

extern const struct ct_embedded { const char *name; const char *src; } ct_embedded_kernels[];

const char *ct_cl_errstr(cl_int e) {
    switch (e) {
#define E(x) case x: return #x;
    E(CL_SUCCESS) E(CL_DEVICE_NOT_FOUND) E(CL_DEVICE_NOT_AVAILABLE) E(CL_COMPILER_NOT_AVAILABLE)
    E(CL_MEM_OBJECT_ALLOCATION_FAILURE) E(CL_OUT_OF_RESOURCES) E(CL_OUT_OF_HOST_MEMORY)
    E(CL_PROFILING_INFO_NOT_AVAILABLE) E(CL_MEM_COPY_OVERLAP) E(CL_IMAGE_FORMAT_MISMATCH)
    E(CL_IMAGE_FORMAT_NOT_SUPPORTED) E(CL_BUILD_PROGRAM_FAILURE) E(CL_MAP_FAILURE)
    E(CL_MISALIGNED_SUB_BUFFER_OFFSET) E(CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST)
    E(CL_COMPILE_PROGRAM_FAILURE) E(CL_LINKER_NOT_AVAILABLE) E(CL_LINK_PROGRAM_FAILURE)
    E(CL_INVALID_VALUE) E(CL_INVALID_DEVICE_TYPE) E(CL_INVALID_PLATFORM) E(CL_INVALID_DEVICE)
    E(CL_INVALID_CONTEXT) E(CL_INVALID_QUEUE_PROPERTIES) E(CL_INVALID_COMMAND_QUEUE)
    E(CL_INVALID_HOST_PTR) E(CL_INVALID_MEM_OBJECT) E(CL_INVALID_BINARY) E(CL_INVALID_BUILD_OPTIONS)
    E(CL_INVALID_PROGRAM) E(CL_INVALID_PROGRAM_EXECUTABLE) E(CL_INVALID_KERNEL_NAME)
    E(CL_INVALID_KERNEL_DEFINITION) E(CL_INVALID_KERNEL) E(CL_INVALID_ARG_INDEX)
    E(CL_INVALID_ARG_VALUE) E(CL_INVALID_ARG_SIZE) E(CL_INVALID_KERNEL_ARGS)
    E(CL_INVALID_WORK_DIMENSION) E(CL_INVALID_WORK_GROUP_SIZE) E(CL_INVALID_WORK_ITEM_SIZE)
    E(CL_INVALID_GLOBAL_OFFSET) E(CL_INVALID_EVENT_WAIT_LIST) E(CL_INVALID_EVENT)
    E(CL_INVALID_OPERATION) E(CL_INVALID_BUFFER_SIZE) E(CL_INVALID_GLOBAL_WORK_SIZE)
    E(CL_INVALID_PROPERTY) E(CL_PLATFORM_NOT_FOUND_KHR)
#undef E
    default: return "CL_UNKNOWN_ERROR";
    }
}

void ct_cl_die(cl_int e, const char *call, const char *file, int line) {
    fprintf(stderr, "cltrain: OpenCL call failed: %s -> %s (%d) at %s:%d\n", call, ct_cl_errstr(e), (int)e, file, line);
    abort();
}

const char *ct_cl_class_name(int cls) { return cls == CT_CLASS_GPU ? "gpu" : "cpu"; }

int ct_cl_class_auto(cl_device_type t, const char **why) {
    int gpu = !!(t & CL_DEVICE_TYPE_GPU), cpu = !!(t & CL_DEVICE_TYPE_CPU);
    if (cpu && !gpu) { *why = "device type CPU"; return CT_CLASS_CPU; }
    *why = gpu && cpu ? "device type GPU and CPU: GPU wins" : gpu ? "device type GPU" : "device type neither GPU nor CPU";
    return CT_CLASS_GPU;
}

int ct_cl_class_env(int *cls) {
    const char *s = getenv("CLTRAIN_DEVICE_CLASS");
    *cls = -1;
    if (!s || !*s || !strcmp(s, "auto")) return 0;
    if (!strcmp(s, "cpu")) *cls = CT_CLASS_CPU;
    else if (!strcmp(s, "gpu")) *cls = CT_CLASS_GPU;
    else return ct_fail(CT_EINPUT, "CLTRAIN_DEVICE_CLASS='%s': expected gpu, cpu or auto (unset: auto, from the device type)", s);
    return 0;
}

/* the class a device of type t runs with, and why */
static int device_class(cl_device_type t, int forced, const char **why) {
    if (forced >= 0) { *why = "CLTRAIN_DEVICE_CLASS"; return forced; }
    return ct_cl_class_auto(t, why);
}

/* ---- ICD files the loader skips without a word: a library that is missing or
 * broken, or that offers no platform. Each is checked the way the loader
 * loads it (dlopen, then its clIcdGetPlatformIDsKHR), so `cltrain devices`
 * can list it as unusable and say why. The vendor files are where ocl-icd
 * and the Khronos loader look: OCL_ICD_VENDORS (a folder or one .icd file),
 * OPENCL_VENDOR_PATH, else /etc/OpenCL/vendors; and OCL_ICD_FILENAMES. ---- */

typedef cl_int (*icd_get_platforms_fn)(cl_uint, cl_platform_id *, cl_uint *);

/* why the ICD library lib cannot be used (into why), or 0 when it offers a platform */
static int icd_unusable(const char *lib, char *why, size_t n) {
    void *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        const char *e = dlerror();
        snprintf(why, n, "cannot load it: %s", e ? e : "dlopen failed");
        return 1;
    }
    /* the loader asks the library's clGetExtensionFunctionAddress for it (cl_khr_icd) */
    typedef void *(*ext_fn)(const char *);
    ext_fn ext = (ext_fn)(uintptr_t)dlsym(h, "clGetExtensionFunctionAddress");
    icd_get_platforms_fn get = ext ? (icd_get_platforms_fn)(uintptr_t)ext("clIcdGetPlatformIDsKHR") : NULL;
    if (!get) get = (icd_get_platforms_fn)(uintptr_t)dlsym(h, "clIcdGetPlatformIDsKHR");
    cl_uint np = 0;
    int bad = 1;
    if (!get) snprintf(why, n, "not an OpenCL ICD (no clIcdGetPlatformIDsKHR)");
    else {
        cl_int e = get(0, NULL, &np);
        if (e != CL_SUCCESS) snprintf(why, n, "it offers no platform (%s)", ct_cl_errstr(e));
        else if (np == 0) snprintf(why, n, "it offers no platform");
        else bad = 0;
    }
    dlclose(h);
    return bad;
}

/* one vendor file: its first line names the library */
static void icd_check_file(const char *path, FILE *out, int *n_bad, char *first, size_t nfirst) {
    char lib[1024] = "", why[1200];
    FILE *f = fopen(path, "r");
    if (!f) return;
    if (!fgets(lib, sizeof lib, f)) lib[0] = 0;
    fclose(f);
    lib[strcspn(lib, "\r\n")] = 0;
    if (!lib[0]) snprintf(why, sizeof why, "the file names no library");
    else if (!icd_unusable(lib, why, sizeof why)) return;
    if (out) fprintf(out, "unusable: %s (%s): %s\n", path, lib, why);
    if (!*n_bad && first) snprintf(first, nfirst, "%.400s (%.200s): %.600s", path, lib, why);
    (*n_bad)++;
}

static int is_icd_name(const char *name) {
    size_t l = strlen(name);
    return l > 4 && !strcmp(name + l - 4, ".icd");
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* Check every ICD the loader would read; print the unusable ones to out (if
 * not NULL) and the first into first. Returns how many are unusable. */
static int icd_scan(FILE *out, char *first, size_t nfirst) {
    int n_bad = 0;
    if (first && nfirst) first[0] = 0;
    const char *dir = getenv("OCL_ICD_VENDORS");
    if (!dir || !*dir) dir = getenv("OPENCL_VENDOR_PATH");
    if (!dir || !*dir) dir = "/etc/OpenCL/vendors";
    struct stat st;
    if (stat(dir, &st) == 0 && S_ISREG(st.st_mode)) {
        icd_check_file(dir, out, &n_bad, first, nfirst);
    } else {
        DIR *d = opendir(dir);
        char *names[256];
        int nn = 0;
        for (struct dirent *e; d && (e = readdir(d)) && nn < 256;)
            if (is_icd_name(e->d_name)) names[nn++] = strdup(e->d_name);
        if (d) closedir(d);
        qsort(names, (size_t)nn, sizeof *names, cmp_str);
        for (int i = 0; i < nn; i++) {
            char path[4096];
            snprintf(path, sizeof path, "%s/%s", dir, names[i]);
            icd_check_file(path, out, &n_bad, first, nfirst);
            free(names[i]);
        }
    }
    const char *files = getenv("OCL_ICD_FILENAMES");
    while (files && *files) {
        size_t l = strcspn(files, ":");
        char lib[1024], why[1200];
        snprintf(lib, sizeof lib, "%.*s", (int)(l < sizeof lib ? l : sizeof lib - 1), files);
        if (lib[0] && icd_unusable(lib, why, sizeof why)) {
            if (out) fprintf(out, "unusable: OCL_ICD_FILENAMES entry %s: %s\n", lib, why);
            if (!n_bad && first) snprintf(first, nfirst, "OCL_ICD_FILENAMES entry %.400s: %.600s", lib, why);
            n_bad++;
        }
        files += l + (files[l] == ':');
    }
    return n_bad;
}

static int get_platforms(cl_platform_id **out, cl_uint *n) {
    *out = NULL;
    *n = 0;
    cl_int e = clGetPlatformIDs(0, NULL, n);
    if (e == CL_PLATFORM_NOT_FOUND_KHR || *n == 0) {
        char first[1500];
        int bad = icd_scan(NULL, first, sizeof first);
        if (bad)
            return ct_fail(CT_EDEVICE, "no usable OpenCL platform: %d ICD%s unusable, the first %s; fix or remove it, or install "
                                       "another driver (Debian: pocl-opencl-icd for the CPU) and check `clinfo`",
                           bad, bad == 1 ? " is" : "s are", first);
        return ct_fail(CT_EDEVICE, "no OpenCL platform found; install a driver (Debian: pocl-opencl-icd for the CPU, "
                                   "nvidia-opencl-icd, mesa-opencl-icd or intel-opencl-icd) and check `clinfo`");
    }
    CL_TRY(e);
    *out = ct_xcalloc(*n, sizeof **out);
    CL_TRY(clGetPlatformIDs(*n, *out, NULL));
    return 0;
}

static int get_devices(cl_platform_id p, cl_device_id **out, cl_uint *n) {
    *out = NULL;
    *n = 0;
    cl_int e = clGetDeviceIDs(p, CL_DEVICE_TYPE_ALL, 0, NULL, n);
    if (e == CL_DEVICE_NOT_FOUND) return 0;
    CL_TRY(e);
    *out = ct_xcalloc(*n, sizeof **out);
    CL_TRY(clGetDeviceIDs(p, CL_DEVICE_TYPE_ALL, *n, *out, NULL));
    return 0;
}

int ct_cl_list(FILE *out) {
    cl_platform_id *plats;
    cl_uint np;
    int forced;
    int rc = ct_cl_class_env(&forced);
    if (rc) return rc;
    rc = get_platforms(&plats, &np);
    if (rc) return rc;
    for (cl_uint p = 0; p < np; p++) {
        char name[256] = "", ver[256] = "";
        clGetPlatformInfo(plats[p], CL_PLATFORM_NAME, sizeof name, name, NULL);
        clGetPlatformInfo(plats[p], CL_PLATFORM_VERSION, sizeof ver, ver, NULL);
        fprintf(out, "platform %u: %s (%s)\n", p, name, ver);
        cl_device_id *devs;
        cl_uint nd;
        if (get_devices(plats[p], &devs, &nd)) {
            fprintf(out, "  unusable: %s\n", ct_last_error());
            continue;
        }
        if (nd == 0) fprintf(out, "  (no devices)\n");
        for (cl_uint d = 0; d < nd; d++) {
            char dn[256] = "", cver[128] = "";
            cl_device_type t = 0;
            cl_uint cu = 0, mhz = 0;
            cl_ulong gm = 0, lm = 0, ma = 0;
            clGetDeviceInfo(devs[d], CL_DEVICE_MAX_CLOCK_FREQUENCY, sizeof mhz, &mhz, NULL);
            clGetDeviceInfo(devs[d], CL_DEVICE_NAME, sizeof dn, dn, NULL);
            clGetDeviceInfo(devs[d], CL_DEVICE_OPENCL_C_VERSION, sizeof cver, cver, NULL);
            clGetDeviceInfo(devs[d], CL_DEVICE_TYPE, sizeof t, &t, NULL);
            clGetDeviceInfo(devs[d], CL_DEVICE_MAX_COMPUTE_UNITS, sizeof cu, &cu, NULL);
            clGetDeviceInfo(devs[d], CL_DEVICE_GLOBAL_MEM_SIZE, sizeof gm, &gm, NULL);
            clGetDeviceInfo(devs[d], CL_DEVICE_LOCAL_MEM_SIZE, sizeof lm, &lm, NULL);
            clGetDeviceInfo(devs[d], CL_DEVICE_MAX_MEM_ALLOC_SIZE, sizeof ma, &ma, NULL);
            const char *ts = (t & CL_DEVICE_TYPE_GPU) && (t & CL_DEVICE_TYPE_CPU) ? "GPU+CPU"
                           : (t & CL_DEVICE_TYPE_GPU) ? "GPU" : (t & CL_DEVICE_TYPE_CPU) ? "CPU"
                           : (t & CL_DEVICE_TYPE_ACCELERATOR) ? "accelerator" : "other";
            const char *why;
            int cls = device_class(t, forced, &why);
            fprintf(out, "  %u:%u  %-4s %s\n        compute units %u, max clock %u MHz, global memory %.1f GiB, local memory %.0f KiB, largest buffer %.0f MiB, %s\n"
                         "        kernels: class %s (%s)\n",
                    p, d, ts, dn, cu, mhz, (double)gm / (1 << 30), (double)lm / 1024, (double)ma / 1048576, cver,
                    ct_cl_class_name(cls), why);
        }
        free(devs);
    }
    free(plats);
    icd_scan(out, NULL, 0);
    return 0;
}

/* "P:D", two plain decimal numbers in 0..65535 (no sign, space or overflow, which strtol would let wrap) */
static int parse_index(const char *s, char stop, long *v, const char **rest) {
    char *end;
    if (*s < '0' || *s > '9') return -1;
    errno = 0;
    *v = strtol(s, &end, 10);
    if (errno == ERANGE || *v > 65535 || *end != stop) return -1;
    *rest = end;
    return 0;
}

static int parse_spec(const char *spec, int *p, int *d) {
    long a, b;
    const char *rest;
    if (parse_index(spec, ':', &a, &rest) || parse_index(rest + 1, 0, &b, &rest)) return -1;
    *p = (int)a;
    *d = (int)b;
    return 0;
}

static int open_nth(ct_cl *cl, const char *spec, const char *from, int nth);

int ct_cl_open(ct_cl *cl, const char *spec) { return ct_cl_open_rank(cl, spec, 0, 0); }

int ct_cl_open_rank(ct_cl *cl, const char *spec, int rank, int local_rank) {
    memset(cl, 0, sizeof *cl);
    int forced, rc = ct_cl_class_env(&forced);
    if (rc) return rc;
    const char *from = "--device";
    if (!spec || !*spec) { spec = getenv("CLTRAIN_DEVICE"); from = "CLTRAIN_DEVICE"; }
    if (spec && !*spec) spec = NULL;
    if (spec && strchr(spec, ',')) {
        /* a list: one device per rank */
        char buf[256];
        const char *p = spec;
        for (int r = 0; r < rank; r++) {
            p = strchr(p, ',');
            if (!p) return ct_fail(CT_EINPUT, "%s '%s' lists fewer devices than there are ranks (rank %d has none)", from, spec, rank);
            p++;
        }
        size_t len = strcspn(p, ",");
        snprintf(buf, sizeof buf, "%.*s", (int)(len < sizeof buf ? len : sizeof buf - 1), p);
        return open_nth(cl, buf, from, 0);
    }
    /* no choice given: the local_rank-th GPU of this node (round robin) */
    return open_nth(cl, spec, from, local_rank);
}

void ct_cl_tune_db_path(const char *platform, const char *device, int cls, char *out, size_t n) {
    char dir[4000];
    ct_cl_cache_dir(dir, sizeof dir);
    uint64_t h = ct_hash_str(ct_hash_str(0xcbf29ce484222325ull, platform), device);
    /* one database per class: what was measured with one class's kernel shapes is no choice for the other */
    if (cls != CT_CLASS_CPU) h = ct_hash_str(h, ct_cl_class_name(cls));
    snprintf(out, n, "%s/gemm-tune-%016llx.txt", dir, (unsigned long long)h);
}

double ct_cl_tune_db_speed(const char *path) {
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    char line[512];
    double v = 0;
    for (int i = 0; i < 64 && fgets(line, sizeof line, f); i++)
        if (sscanf(line, "speed %lf", &v) == 1) break;
    fclose(f);
    return v > 0 ? v : 0;
}

/* one device of the machine, for the default choice */
typedef struct { cl_platform_id p; cl_device_id d; int pi, di; cl_device_type t; } dev_ref;

/* the default device's index in devs when none is named (see ct_cl_open), -1 if none */
static int default_device(const dev_ref *devs, int n, int nth, int forced) {
    int n_gpus = 0;
    for (int i = 0; i < n; i++) n_gpus += !!(devs[i].t & CL_DEVICE_TYPE_GPU);
    if (n_gpus) { /* rank k of a node takes GPU k mod count */
        int skip = nth % n_gpus;
        for (int i = 0; i < n; i++)
            if ((devs[i].t & CL_DEVICE_TYPE_GPU) && skip-- == 0) return i;
    }
    int best = -1;
    double best_speed = 0;
    for (int i = 0; i < n && n > 1; i++) {
        char pn[256] = "", dn[256] = "", path[4200];
        const char *why;
        clGetPlatformInfo(devs[i].p, CL_PLATFORM_NAME, sizeof pn, pn, NULL);
        clGetDeviceInfo(devs[i].d, CL_DEVICE_NAME, sizeof dn, dn, NULL);
        ct_cl_tune_db_path(pn, dn, forced >= 0 ? forced : ct_cl_class_auto(devs[i].t, &why), path, sizeof path);
        double v = ct_cl_tune_db_speed(path);
        if (v > best_speed) { best_speed = v; best = i; }
    }
    if (best >= 0) {
        CT_DEBUG(1, "default device %d:%d: its tuning database records the fastest step (%.1f GFLOP/s)", devs[best].pi,
                 devs[best].di, best_speed);
        return best;
    }
    for (int i = 0; i < n; i++)
        if (devs[i].t & CL_DEVICE_TYPE_CPU) return i;
    return n ? 0 : -1;
}

static int open_nth(ct_cl *cl, const char *spec, const char *from, int nth) {
    int want_p = -1, want_d = -1;
    if (spec && parse_spec(spec, &want_p, &want_d))
        return ct_fail(CT_EINPUT, "%s '%s': expected PLATFORM:DEVICE such as 0:0 (each 0..65535); see `cltrain devices`", from, spec);
    cl_platform_id *plats;
    cl_uint np;
    int rc = get_platforms(&plats, &np);
    if (rc) return rc;
    int forced;
    ct_cl_class_env(&forced); /* checked by the caller */
    dev_ref all[256];
    int n = 0, pick = -1;
    for (cl_uint p = 0; p < np; p++) {
        if (want_p >= 0 && (int)p != want_p) continue;
        cl_device_id *devs;
        cl_uint nd;
        if (get_devices(plats[p], &devs, &nd)) {
            if (want_p >= 0) { free(plats); return CT_EDEVICE; } /* the platform asked for: its error */
            CT_DEBUG(1, "platform %u skipped: %s", p, ct_last_error());
            continue;
        }
        for (cl_uint d = 0; d < nd && n < 256; d++) {
            if (want_d >= 0 && (int)d != want_d) continue;
            dev_ref *r = &all[n++];
            *r = (dev_ref){plats[p], devs[d], (int)p, (int)d, 0};
            clGetDeviceInfo(devs[d], CL_DEVICE_TYPE, sizeof r->t, &r->t, NULL);
        }
        free(devs);
    }
    free(plats);
    if (want_p >= 0) pick = n ? 0 : -1;
    else pick = default_device(all, n, nth, forced);
    if (pick < 0) {
        if (spec) return ct_fail(CT_EINPUT, "%s '%s': no such device; `cltrain devices` lists the PLATFORM:DEVICE indices", from, spec);
        return ct_fail(CT_EDEVICE, "no OpenCL device found; check `clinfo` (Debian: pocl-opencl-icd gives a CPU device)");
    }
    cl->platform = all[pick].p;
    cl->device = all[pick].d;
    cl->plat_index = all[pick].pi;
    cl->dev_index = all[pick].di;
    cl->type = all[pick].t;
    cl->dev_class = device_class(cl->type, forced, &cl->class_why);
    cl->is_gpu = cl->dev_class == CT_CLASS_GPU;
    cl->is_cpu = !cl->is_gpu;
    clGetPlatformInfo(cl->platform, CL_PLATFORM_NAME, sizeof cl->platform_name, cl->platform_name, NULL);
    clGetPlatformInfo(cl->platform, CL_PLATFORM_VERSION, sizeof cl->platform_version, cl->platform_version, NULL);
    clGetDeviceInfo(cl->device, CL_DEVICE_NAME, sizeof cl->device_name, cl->device_name, NULL);
    clGetDeviceInfo(cl->device, CL_DEVICE_VENDOR, sizeof cl->vendor, cl->vendor, NULL);
    clGetDeviceInfo(cl->device, CL_DRIVER_VERSION, sizeof cl->driver_version, cl->driver_version, NULL);
    clGetDeviceInfo(cl->device, CL_DEVICE_VERSION, sizeof cl->device_version, cl->device_version, NULL);
    cl_uint cu = 1;
    clGetDeviceInfo(cl->device, CL_DEVICE_MAX_COMPUTE_UNITS, sizeof cu, &cu, NULL);
    cl->compute_units = (int)cu;
    cl_uint fw = 1;
    clGetDeviceInfo(cl->device, CL_DEVICE_NATIVE_VECTOR_WIDTH_FLOAT, sizeof fw, &fw, NULL);
    cl->float_width = (int)fw;
    clGetDeviceInfo(cl->device, CL_DEVICE_MAX_WORK_GROUP_SIZE, sizeof cl->max_wg, &cl->max_wg, NULL);
    clGetDeviceInfo(cl->device, CL_DEVICE_GLOBAL_MEM_SIZE, sizeof cl->global_mem, &cl->global_mem, NULL);
    clGetDeviceInfo(cl->device, CL_DEVICE_MAX_MEM_ALLOC_SIZE, sizeof cl->max_alloc, &cl->max_alloc, NULL);
    clGetDeviceInfo(cl->device, CL_DEVICE_LOCAL_MEM_SIZE, sizeof cl->local_mem, &cl->local_mem, NULL);
    const char *s = getenv("CLTRAIN_SYNC");
    cl->sync = s && atoi(s) > 0;
    cl->profile = ct_debug_level() >= 2;
    cl_int e;
    cl->ctx = clCreateContext(NULL, 1, &cl->device, NULL, NULL, &e);
    CL_TRY(e);
    cl->queue = clCreateCommandQueue(cl->ctx, cl->device, cl->profile ? CL_QUEUE_PROFILING_ENABLE : 0, &e);
    CL_TRY(e);
    cl->xfer = clCreateCommandQueue(cl->ctx, cl->device, 0, &e);
    if (e != CL_SUCCESS) cl->xfer = cl->queue;
    CT_DEBUG(1, "device %d:%d %s (%s, driver %s, %d compute units), class %s (%s)", cl->plat_index, cl->dev_index,
             cl->device_name, cl->platform_name, cl->driver_version, cl->compute_units, ct_cl_class_name(cl->dev_class),
             cl->class_why);
    return 0;
}

void ct_cl_close(ct_cl *cl) {
    if (cl->xfer && cl->xfer != cl->queue) clReleaseCommandQueue(cl->xfer);
    if (cl->queue) clReleaseCommandQueue(cl->queue);
    if (cl->ctx) clReleaseContext(cl->ctx);
    memset(cl, 0, sizeof *cl);
}

/* ---- kernel sources ---- */

char *ct_kernel_source(const char *file) {
    const char *dir = getenv("CLTRAIN_KERNEL_DIR");
    if (dir && *dir) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, file);
        FILE *f = fopen(path, "rb");
        if (!f) return NULL;
        fseek(f, 0, SEEK_END);
        long n = ftell(f);
        fseek(f, 0, SEEK_SET);
        char *s = ct_xmalloc((size_t)n + 1);
        size_t got = fread(s, 1, (size_t)n, f);
        fclose(f);
        s[got] = 0;
        return s;
    }
    for (const struct ct_embedded *e = ct_embedded_kernels; e->name; e++)
        if (!strcmp(e->name, file)) return strdup(e->src);
    return NULL;
}

static uint64_t fnv1a(uint64_t h, const char *s) {
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 0x100000001b3ull;
    return (h ^ 0xff) * 0x100000001b3ull; /* separator so ("ab","c") != ("a","bc") */
}

void ct_cl_cache_dir(char *out, size_t n) {
    const char *d = getenv("CLTRAIN_CACHE_DIR");
    if (d && *d) { snprintf(out, n, "%s", d); return; }
    const char *x = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    if (x && *x) snprintf(out, n, "%s/cltrain", x);
    else if (home && *home) snprintf(out, n, "%s/.cache/cltrain", home);
    else snprintf(out, n, "/tmp/cltrain-cache");
}

uint64_t ct_hash_str(uint64_t h, const char *s) { return fnv1a(h, s ? s : ""); }

uint64_t ct_cl_source_hash(const char *const *files, int n) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (int i = 0; i < n; i++) {
        char *src = ct_kernel_source(files[i]);
        h = fnv1a(h, files[i]);
        h = fnv1a(h, src ? src : "(missing)");
        free(src);
    }
    return h;
}

static void print_build_log(ct_cl *cl, cl_program p, const char *file, const char *opts) {
    size_t n = 0;
    clGetProgramBuildInfo(p, cl->device, CL_PROGRAM_BUILD_LOG, 0, NULL, &n);
    char *log = ct_xmalloc(n + 1);
    clGetProgramBuildInfo(p, cl->device, CL_PROGRAM_BUILD_LOG, n, log, NULL);
    log[n] = 0;
    fprintf(stderr, "cltrain: building kernels/%s with options '%s' failed:\n%s\n", file, opts, log);
    free(log);
}

/* ---- CLTRAIN_KERNEL_LOG=FILE: which programs were built and which kernels launched at which
 * shapes, appended one line each (O_APPEND: processes may share the file). tests/oclgrind.sh
 * reads it to prove every kernel of every file ran under the simulator. ---- */

static pthread_mutex_t klog_mu = PTHREAD_MUTEX_INITIALIZER;

static void klog(const char *line) {
    const char *path = getenv("CLTRAIN_KERNEL_LOG");
    if (!path || !*path) return;
    FILE *f = fopen(path, "a");
    if (!f) return;
    fputs(line, f);
    fclose(f);
}

static void klog_program(const ct_cl *cl, cl_program p, const char *file, const char *opts) {
    if (!getenv("CLTRAIN_KERNEL_LOG")) return;
    char names[2048] = "", line[4096];
    clGetProgramInfo(p, CL_PROGRAM_KERNEL_NAMES, sizeof names, names, NULL);
    snprintf(line, sizeof line, "program %s class %s kernels %s options %s\n", file, ct_cl_class_name(cl->dev_class), names, opts);
    klog(line);
}

/* each (kernel, class, dimensions, work-group size) once per process */
static void klog_launch(const ct_cl *cl, cl_kernel k, int dims, const size_t *g, const size_t *lws) {
    if (!getenv("CLTRAIN_KERNEL_LOG")) return;
    enum { SEEN = 1024 };
    static char seen[SEEN][128];
    static int n_seen;
    char name[64] = "", wg[48] = "default", key[128], line[256];
    clGetKernelInfo(k, CL_KERNEL_FUNCTION_NAME, sizeof name, name, NULL);
    if (lws) snprintf(wg, sizeof wg, "%zux%zux%zu", lws[0], dims > 1 ? lws[1] : 1, dims > 2 ? lws[2] : 1);
    snprintf(key, sizeof key, "%s %s %d %s", name, ct_cl_class_name(cl->dev_class), dims, wg);
    pthread_mutex_lock(&klog_mu);
    int found = 0;
    for (int i = 0; i < n_seen && !found; i++) found = !strcmp(seen[i], key);
    if (!found && n_seen < SEEN) snprintf(seen[n_seen++], sizeof seen[0], "%s", key);
    pthread_mutex_unlock(&klog_mu);
    if (found) return;
    snprintf(line, sizeof line, "launch %s class %s gws %zux%zux%zu lws %s\n", name, ct_cl_class_name(cl->dev_class), g[0],
             dims > 1 ? g[1] : 1, dims > 2 ? g[2] : 1, wg);
    klog(line);
}

int ct_cl_build(ct_cl *cl, cl_program *out, const char *file, const char *options) {
    char *prelude = ct_kernel_source("prelude.cl");
    char *src = ct_kernel_source(file);
    if (!prelude || !src) {
        free(prelude);
        free(src);
        return ct_fail(CT_EDEVICE, "kernel source kernels/%s not found (CLTRAIN_KERNEL_DIR=%s)", file,
                       getenv("CLTRAIN_KERNEL_DIR") ? getenv("CLTRAIN_KERNEL_DIR") : "unset, embedded");
    }
    /* Training kernels never get -cl-fast-relaxed-math: NaN and Inf must stay visible. CT_POCL_CPU:
     * class cpu on PoCL, whose CPU drivers compile with LLVM straight to the host's code, so a prefetch
     * may be emitted (prelude.cl's CT_PREFETCH). Not elsewhere: Mesa's rusticl goes through SPIR-V,
     * whose translator refuses llvm.prefetch ("Unexpected llvm intrinsic"), and Oclgrind's interpreter
     * has none ("Undefined external function"). */
    int pocl_cpu = cl->is_cpu && strstr(cl->platform_name, "Portable Computing Language");
    char opts[2048];
    snprintf(opts, sizeof opts, "-cl-std=CL1.2%s %s", pocl_cpu ? " -DCT_POCL_CPU=1" : "", options ? options : "");
    uint64_t h = 0xcbf29ce484222325ull;
    h = fnv1a(h, prelude); h = fnv1a(h, src); h = fnv1a(h, opts);
    h = fnv1a(h, cl->device_name); h = fnv1a(h, cl->driver_version);
    h = fnv1a(h, cl->device_version); h = fnv1a(h, cl->platform_version);
    h = fnv1a(h, cl->platform_name);
    char dir[4096], path[4200];
    ct_cl_cache_dir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/%016llx.bin", dir, (unsigned long long)h);
    int no_cache = getenv("CLTRAIN_NO_CACHE") && atoi(getenv("CLTRAIN_NO_CACHE")) > 0;
    cl_int e;
    cl_program p = NULL;
    /* try the cache */
    FILE *f = no_cache ? NULL : fopen(path, "rb");
    if (f) {
        fseek(f, 0, SEEK_END);
        long n = ftell(f);
        fseek(f, 0, SEEK_SET);
        unsigned char *bin = n > 0 ? ct_xmalloc((size_t)n) : NULL;
        if (bin && fread(bin, 1, (size_t)n, f) == (size_t)n) {
            size_t len = (size_t)n;
            const unsigned char *b = bin;
            cl_int st;
            p = clCreateProgramWithBinary(cl->ctx, 1, &cl->device, &len, &b, &st, &e);
            if (p && (e != CL_SUCCESS || st != CL_SUCCESS || clBuildProgram(p, 1, &cl->device, opts, NULL, NULL) != CL_SUCCESS)) {
                clReleaseProgram(p);
                p = NULL;
            }
        }
        free(bin);
        fclose(f);
        if (p) {
            cl->cache_hits++;
            CT_DEBUG(1, "kernels/%s: cached binary %s", file, path);
        }
    }
    if (!p) {
        double t0 = ct_now();
        size_t lens[2] = {strlen(prelude), strlen(src)};
        const char *srcs[2] = {prelude, src};
        p = clCreateProgramWithSource(cl->ctx, 2, srcs, lens, &e);
        if (e != CL_SUCCESS) { free(prelude); free(src); CL_TRY(e); }
        e = clBuildProgram(p, 1, &cl->device, opts, NULL, NULL);
        if (e != CL_SUCCESS) {
            print_build_log(cl, p, file, opts);
            clReleaseProgram(p);
            free(prelude);
            free(src);
            return ct_fail(CT_EDEVICE, "building kernels/%s failed (%s); the build log is above", file, ct_cl_errstr(e));
        }
        cl->cache_misses++;
        CT_DEBUG(1, "kernels/%s: compiled in %.2f s with '%s'", file, ct_now() - t0, opts);
        /* store the binary: temporary name, then rename */
        size_t bsize = 0;
        if (!no_cache && clGetProgramInfo(p, CL_PROGRAM_BINARY_SIZES, sizeof bsize, &bsize, NULL) == CL_SUCCESS && bsize) {
            unsigned char *bin = ct_xmalloc(bsize);
            if (clGetProgramInfo(p, CL_PROGRAM_BINARIES, sizeof bin, &bin, NULL) == CL_SUCCESS) {
                ct_mkdir_p(dir);
                char tmp[4300];
                snprintf(tmp, sizeof tmp, "%s.tmp.%d", path, (int)getpid());
                FILE *w = fopen(tmp, "wb");
                if (w) {
                    int ok = fwrite(bin, 1, bsize, w) == bsize;
                    ok &= fclose(w) == 0;
                    if (ok) rename(tmp, path);
                    else unlink(tmp);
                }
            }
            free(bin);
        }
    }
    free(prelude);
    free(src);
    klog_program(cl, p, file, opts);
    *out = p;
    return 0;
}

cl_kernel ct_cl_kernel(cl_program p, const char *name) {
    cl_int e;
    cl_kernel k = clCreateKernel(p, name, &e);
    if (e != CL_SUCCESS) {
        fprintf(stderr, "cltrain: kernel '%s' not found: %s\n", name, ct_cl_errstr(e));
        abort();
    }
    return k;
}

int ct_cl_alloc(ct_cl *cl, cl_mem *out, size_t bytes, const char *what) {
    if (bytes == 0) bytes = 4;
    if (bytes > cl->max_alloc)
        return ct_fail(CT_ENOMEM, "device buffer '%s' needs %.1f MiB but %s allows at most %.1f MiB in one buffer; try a smaller --batch-size",
                       what, (double)bytes / 1048576, cl->device_name, (double)cl->max_alloc / 1048576);
    cl_int e;
    *out = clCreateBuffer(cl->ctx, CL_MEM_READ_WRITE, bytes, NULL, &e);
    if (e != CL_SUCCESS || !*out)
        return ct_fail(CT_ENOMEM, "allocating device buffer '%s' (%.1f MiB) failed: %s; try a smaller --batch-size",
                       what, (double)bytes / 1048576, ct_cl_errstr(e));
    return 0;
}

void ct_cl_release(cl_mem *m) {
    if (*m) clReleaseMemObject(*m);
    *m = NULL;
}

void ct_cl_write(ct_cl *cl, cl_mem m, size_t off, size_t bytes, const void *src) {
    CL_CHECK(clEnqueueWriteBuffer(cl->queue, m, CL_TRUE, off, bytes, src, 0, NULL, NULL));
}

void ct_cl_read(ct_cl *cl, cl_mem m, size_t off, size_t bytes, void *dst) {
    CL_CHECK(clEnqueueReadBuffer(cl->queue, m, CL_TRUE, off, bytes, dst, 0, NULL, NULL));
}

void ct_cl_fill0(ct_cl *cl, cl_mem m, size_t off, size_t bytes) {
    float zero = 0;
    CT_ASSERT(off % 4 == 0 && bytes % 4 == 0);
    if (bytes) CL_CHECK(clEnqueueFillBuffer(cl->queue, m, &zero, sizeof zero, off, bytes, 0, NULL, NULL));
}

void ct_cl_run(ct_cl *cl, cl_kernel k, const char *name, int dims, const size_t *gws, const size_t *lws) {
    size_t g[3];
    for (int i = 0; i < dims; i++) {
        g[i] = lws ? ct_round_up(gws[i], lws[i]) : gws[i];
        if (g[i] == 0) return;
    }
    klog_launch(cl, k, dims, g, lws);
    cl_event ev = NULL;
    double t_host = cl->profile ? ct_now() : 0;
    cl_int e = clEnqueueNDRangeKernel(cl->queue, k, (cl_uint)dims, NULL, g, lws, 0, NULL, cl->profile ? &ev : NULL);
    if (e != CL_SUCCESS) {
        fprintf(stderr, "cltrain: launching %s (gws %zu %zu %zu, lws %zu %zu %zu) failed\n", name, g[0],
                dims > 1 ? g[1] : 1, dims > 2 ? g[2] : 1, lws ? lws[0] : 0, lws && dims > 1 ? lws[1] : 0, lws && dims > 2 ? lws[2] : 0);
        ct_cl_die(e, "clEnqueueNDRangeKernel", __FILE__, __LINE__);
    }
    if (cl->sync) {
        e = clFinish(cl->queue);
        if (e != CL_SUCCESS) {
            fprintf(stderr, "cltrain: kernel %s failed\n", name);
            ct_cl_die(e, "clFinish", __FILE__, __LINE__);
        }
    }
    if (ev) {
        CL_CHECK(clWaitForEvents(1, &ev));
        t_host = ct_now() - t_host;
        cl_ulong t0 = 0, t1 = 0;
        clGetEventProfilingInfo(ev, CL_PROFILING_COMMAND_START, sizeof t0, &t0, NULL);
        clGetEventProfilingInfo(ev, CL_PROFILING_COMMAND_END, sizeof t1, &t1, NULL);
        /* the host's time too: it includes the queue's wait for earlier commands, but some
         * implementations (rusticl 22) report zero for every command */
        fprintf(stderr, "[cltrain] %-24s %9.3f ms  host %9.3f ms  gws %zu x %zu x %zu  lws %zu x %zu x %zu\n", name,
                (double)(t1 - t0) * 1e-6, t_host * 1e3, g[0], dims > 1 ? g[1] : 1, dims > 2 ? g[2] : 1,
                lws ? lws[0] : 0, lws && dims > 1 ? lws[1] : 0, lws && dims > 2 ? lws[2] : 0);
        clReleaseEvent(ev);
    }
}

void ct_cl_finish(ct_cl *cl) { CL_CHECK(clFinish(cl->queue)); }


/* ---- the device's loop limit (cl.h) ---- */

/* One work-item runs kernels/probe.cl's loop of n and reports how many iterations it counted. The program
 * goes through ct_cl_build's binary cache like every kernel: a source build on each start would cost a
 * compilation per process, and a driver preprocessing into its own cache fails under a file-size limit. */
static int loop_probe(ct_cl *cl, int n, int *counted) {
    cl_int e;
    cl_program p = NULL;
    if (ct_cl_build(cl, &p, "probe.cl", NULL) != CT_OK) return -1;
    int rc = -1;
    cl_kernel k = NULL;
    cl_mem out = NULL, in = NULL;
    int ones[16], got = -1;
    for (int i = 0; i < 16; i++) ones[i] = 1;
    k = clCreateKernel(p, "ct_loop_probe", &e);
    if (e != CL_SUCCESS) goto done;
    out = clCreateBuffer(cl->ctx, CL_MEM_WRITE_ONLY, sizeof(int), NULL, &e);
    if (e != CL_SUCCESS) goto done;
    in = clCreateBuffer(cl->ctx, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, sizeof ones, ones, &e);
    if (e != CL_SUCCESS) goto done;
    size_t one = 1;
    if (clSetKernelArg(k, 0, sizeof out, &out) || clSetKernelArg(k, 1, sizeof in, &in) || clSetKernelArg(k, 2, sizeof n, &n))
        goto done;
    ct_cl_run(cl, k, "ct_loop_probe", 1, &one, &one); /* logged for CLTRAIN_KERNEL_LOG like every launch */
    if (clEnqueueReadBuffer(cl->queue, out, CL_TRUE, 0, sizeof got, &got, 0, NULL, NULL)) goto done;
    *counted = got;
    rc = 0;
done:
    if (in) clReleaseMemObject(in);
    if (out) clReleaseMemObject(out);
    if (k) clReleaseKernel(k);
    clReleaseProgram(p);
    return rc;
}

int ct_cl_loop_limit(ct_cl *cl) {
    if (cl->loop_probed) return cl->loop_limit;
    cl->loop_probed = 1;
    int counted = 0;
    if (loop_probe(cl, CT_LOOP_PROBE_N, &counted)) {
        CT_DEBUG(1, "the loop-limit probe did not run on this device; assuming no limit");
        return cl->loop_limit = 0;
    }
    cl->loop_limit = counted > 0 && counted < CT_LOOP_PROBE_N ? counted : 0;
    if (cl->loop_limit)
        CT_DEBUG(1, "device %s ends a work-item's loops after %d iterations: long loops are split below that",
                 cl->device_name, cl->loop_limit);
    return cl->loop_limit;
}
