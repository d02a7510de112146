/* common.h: error codes, the last-error message, checks that never compile out.
 *
 * Errors caused by the environment or the user (bad file, no device) are
 * returned as negative CT_E* codes with a message kept per thread
 * (ct_fail / ct_last_error). Bugs abort with the call text and file:line
 * (CT_ASSERT). main() maps codes to exit status with ct_exit_code. */
#ifndef CLTRAIN_COMMON_H
#define CLTRAIN_COMMON_H
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define CT_VERSION "0.1.0"

enum {
    CT_OK = 0,
    CT_EINPUT = -2,   /* bad usage or bad input (exit 2) */
    CT_EDEVICE = -3,  /* OpenCL failure the environment caused (exit 1) */
    CT_ENOMEM = -4,   /* host or device allocation failed (exit 1) */
    CT_EIO = -5,      /* read/write failure (exit 2 when it names a user file) */
    CT_ENAN = -6,     /* training diverged (exit 1) */
    CT_ENET = -7,     /* download failed (exit 2: tells where to put files) */
    CT_EINTR = -8,    /* interrupted by a signal */
    CT_EWRITE = -9,   /* saving failed during training, e.g. the disk is full (exit 1) */
};

/* Store a one-line message for the calling thread and return code. */
int ct_fail(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
const char *ct_last_error(void);
const char *ct_err_name(int code);
int ct_exit_code(int code);

/* Verbosity: CLTRAIN_DEBUG=1 prints device and build details, 2 per-kernel times. */
int ct_debug_level(void);
#define CT_DEBUG(lvl, ...) do { if (ct_debug_level() >= (lvl)) { fprintf(stderr, "[cltrain] " __VA_ARGS__); fputc('\n', stderr); } } while (0)

void ct_abort(const char *what, const char *file, int line) __attribute__((noreturn));
#define CT_ASSERT(cond) do { if (!(cond)) ct_abort("assertion failed: " #cond, __FILE__, __LINE__); } while (0)

/* Allocation that aborts on failure, for small host structures only. */
void *ct_xmalloc(size_t n);
void *ct_xcalloc(size_t n, size_t size);

/* mkdir -p: 0, or -1 with errno set (also when dir exists but is no folder). */
int ct_mkdir_p(const char *dir);

/* CRC32C (Castagnoli) of n bytes: hardware crc32 on x86-64 with SSE4.2, else slice-by-8. */
uint32_t ct_crc32c(const void *data, size_t n);

/* Monotonic seconds. */
double ct_now(void);

/* Deterministic random numbers: splitmix64 seeding a xoshiro128+ style stream.
 * The input pipeline also says which sample the stream is for: `epoch` (-1
 * outside the pipeline) and `fixed`, a random number of the sample's own
 * that is the same in every epoch, for augmentations that alternate by
 * epoch (alternating flips); ct_rng_make sets them to -1 and 0. */
typedef struct { uint64_t s; int64_t epoch; uint64_t fixed; } ct_rng;
static inline uint64_t ct_rng_next(ct_rng *r) {
    uint64_t z = (r->s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
static inline ct_rng ct_rng_make(uint64_t seed, uint64_t a, uint64_t b) {
    ct_rng r = {seed * 0x9E3779B97F4A7C15ull ^ (a + 0x632BE59BD9B4E019ull) * 0xD1B54A32D192ED03ull ^ (b + 1) * 0x8CB92BA72F3D8DD7ull,
                -1, 0};
    ct_rng_next(&r);
    return r;
}
static inline float ct_rng_uniform(ct_rng *r) { return (float)(ct_rng_next(r) >> 40) * (1.0f / 16777216.0f); }
static inline uint32_t ct_rng_below(ct_rng *r, uint32_t n) { return (uint32_t)(((ct_rng_next(r) >> 32) * (uint64_t)n) >> 32); }
float ct_rng_normal(ct_rng *r);

#endif
