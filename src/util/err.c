/* err.c: per-thread last error, exit-code mapping, abort with location, small helpers.
 * Tested by every bad-input test (they read ct_last_error). */
#include "cltrain/common.h"
#include <errno.h>
#include <math.h>
#include <sys/stat.h>
#include <stdarg.h>
#include <string.h>
#include <time.h>

static _Thread_local char last_error[1024];

int ct_fail(int code, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_error, sizeof last_error, fmt, ap);
    va_end(ap);
    CT_DEBUG(1, "error %s: %s", ct_err_name(code), last_error);
    return code;
}

const char *ct_last_error(void) { return last_error[0] ? last_error : "unknown error"; }

const char *ct_err_name(int code) {
    switch (code) {
    case CT_OK: return "ok";
    case CT_EINPUT: return "bad input";
    case CT_EDEVICE: return "device error";
    case CT_ENOMEM: return "out of memory";
    case CT_EIO: return "i/o error";
    case CT_ENAN: return "non-finite value";
    case CT_ENET: return "download failed";
    case CT_EINTR: return "interrupted";
    case CT_EWRITE: return "write failed";
    default: return "error";
    }
}

int ct_exit_code(int code) {
    switch (code) {
    case CT_OK: return 0;
    case CT_EINPUT: case CT_EIO: case CT_ENET: return 2;
    default: return 1;
    }
}

int ct_debug_level(void) {
    static int level = -1;
    if (level < 0) {
        const char *s = getenv("CLTRAIN_DEBUG");
        level = s ? atoi(s) : 0;
    }
    return level;
}

void ct_abort(const char *what, const char *file, int line) {
    fprintf(stderr, "cltrain: bug: %s at %s:%d\n", what, file, line);
    abort();
}

void *ct_xmalloc(size_t n) {
    void *p = malloc(n ? n : 1);
    if (!p) ct_abort("out of host memory", __FILE__, __LINE__);
    return p;
}

void *ct_xcalloc(size_t n, size_t size) {
    void *p = calloc(n ? n : 1, size ? size : 1);
    if (!p) ct_abort("out of host memory", __FILE__, __LINE__);
    return p;
}

double ct_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

float ct_rng_normal(ct_rng *r) {
    float u1 = ct_rng_uniform(r), u2 = ct_rng_uniform(r);
    if (u1 < 1e-7f) u1 = 1e-7f;
    return sqrtf(-2.0f * logf(u1)) * cosf(6.28318530718f * u2);
}

int ct_mkdir_p(const char *dir) {
    char buf[4096];
    size_t n = strlen(dir);
    if (n == 0) return 0;
    if (n >= sizeof buf) { errno = ENAMETOOLONG; return -1; }
    memcpy(buf, dir, n + 1);
    for (size_t i = 1; i <= n; i++) {
        if (buf[i] != '/' && buf[i] != '\0') continue;
        char saved = buf[i];
        buf[i] = '\0';
        if (mkdir(buf, 0755) != 0 && errno != EEXIST) return -1;
        buf[i] = saved;
    }
    struct stat st;
    if (stat(dir, &st) != 0) return -1;
    if (!S_ISDIR(st.st_mode)) { errno = ENOTDIR; return -1; }
    return 0;
}
