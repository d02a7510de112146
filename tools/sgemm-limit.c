/* sgemm-limit: the machine's practical SGEMM speed, from OpenBLAS loaded at
 * run time (dlopen; cltrain itself never links a BLAS). Times sgemm_ at
 * N = 1024 and 2048 (best of 3 after a warm-up) on all cores OpenBLAS uses
 * by default, and prints one line per size and a last line
 * "limit GFLOPS" for `cltrain bench kernels` to read.
 * Usage: sgemm-limit [LIBRARY]   (default libopenblas.so.0)
 * Exit 3 when the library or its sgemm_ is missing. */
#define _POSIX_C_SOURCE 200809L
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

typedef void (*sgemm_fn)(const char *, const char *, const int *, const int *, const int *, const float *, const float *,
                         const int *, const float *, const int *, const float *, float *, const int *);

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
    const char *lib = argc > 1 ? argv[1] : "libopenblas.so.0";
    void *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        printf("sgemm-limit: %s not found (%s); Debian: apt-get install libopenblas0-pthread (tools/setup-deps.sh --bench)\n", lib, dlerror());
        return 3;
    }
    sgemm_fn sgemm = (sgemm_fn)dlsym(h, "sgemm_");
    if (!sgemm) {
        printf("sgemm-limit: %s has no sgemm_\n", lib);
        return 3;
    }
    int (*threads)(void) = (int (*)(void))dlsym(h, "openblas_get_num_threads");
    double limit = 0;
    for (int n = 1024; n <= 2048; n *= 2) {
        size_t nn = (size_t)n * n;
        float *a = malloc(nn * 4), *b = malloc(nn * 4), *c = malloc(nn * 4);
        if (!a || !b || !c) return 1;
        for (size_t i = 0; i < nn; i++) { a[i] = (float)(i % 7) * 0.1f; b[i] = (float)(i % 5) * 0.1f; c[i] = 0; }
        const float one = 1, zero = 0;
        double best = 1e30;
        for (int r = 0; r < 4; r++) {
            double t0 = now();
            sgemm("N", "N", &n, &n, &n, &one, a, &n, b, &n, &zero, c, &n);
            double t = now() - t0;
            if (r && t < best) best = t;
        }
        double gf = 2.0 * n * n * n / best * 1e-9;
        if (gf > limit) limit = gf;
        printf("sgemm-limit: %s, %d threads, sgemm %dx%dx%d: %.2f ms, %.1f GFLOP/s\n", lib, threads ? threads() : 0, n, n, n, best * 1e3, gf);
        free(a); free(b); free(c);
    }
    printf("limit %.1f\n", limit);
    return 0;
}
