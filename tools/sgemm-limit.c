/* sgemm-limit: the machine's practical SGEMM speed, from OpenBLAS loaded at
 * run time (dlopen; cltrain itself never links a BLAS), at its best.
 * OpenBLAS picks its kernels from its own CPU detection, which on some
 * machines falls back to a slow generic core (Prescott: 65 GFLOP/s where
 * SkylakeX gives 215-310). So the limit is measured with the detected core
 * and again with OPENBLAS_CORETYPE set to each core type this CPU supports
 * (from /proc/cpuinfo: Haswell, Zen, SkylakeX, Cooperlake, SapphireRapids),
 * each in a child process (OpenBLAS reads the variable when it loads), and
 * the fastest is the limit. Each child times sgemm_ at N = 1024 and 2048
 * (best of 3 after a warm-up) on all cores OpenBLAS uses by default. One
 * line per core type and size, then a last line "limit GFLOPS CORE" for
 * `cltrain bench kernels` to read.
 * Usage: sgemm-limit [LIBRARY]   (default libopenblas.so.0)
 * Exit 3 when the library or its sgemm_ is missing. */
#define _POSIX_C_SOURCE 200809L
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

typedef void (*sgemm_fn)(const char *, const char *, const int *, const int *, const int *, const float *, const float *,
                         const int *, const float *, const int *, const float *, float *, const int *);

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

/* one core type (the environment's OPENBLAS_CORETYPE, or none): "limit GFLOPS CORE" last */
static int measure(const char *lib) {
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
    char *(*corename)(void) = (char *(*)(void))dlsym(h, "openblas_get_corename");
    const char *core = corename ? corename() : "unknown";
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
        printf("sgemm-limit: %s, core %s, %d threads, sgemm %dx%dx%d: %.2f ms, %.1f GFLOP/s\n", lib, core,
               threads ? threads() : 0, n, n, n, best * 1e3, gf);
        free(a); free(b); free(c);
    }
    printf("limit %.1f %s\n", limit, core);
    return 0;
}

/* whether /proc/cpuinfo's first "flags" line has every flag of the space-separated list */
static int has_flags(const char *flags, const char *list) {
    char want[256];
    snprintf(want, sizeof want, "%s", list);
    for (char *save = NULL, *f = strtok_r(want, " ", &save); f; f = strtok_r(NULL, " ", &save)) {
        char pat[64];
        snprintf(pat, sizeof pat, " %s ", f);
        if (!strstr(flags, pat)) return 0;
    }
    return 1;
}

/* the core types worth trying on this CPU (OPENBLAS_CORETYPE names) */
static int candidates(const char **out) {
    static char flags[8192];
    char line[8192];
    int amd = 0, n = 0;
    flags[0] = 0;
    FILE *f = fopen("/proc/cpuinfo", "r");
    while (f && fgets(line, sizeof line, f)) {
        if (!strncmp(line, "vendor_id", 9) && strstr(line, "AMD")) amd = 1;
        if (!strncmp(line, "flags", 5) && !flags[0]) {
            line[strcspn(line, "\n")] = 0;
            snprintf(flags, sizeof flags, " %.8000s ", strchr(line, ':') ? strchr(line, ':') + 1 : line);
        }
    }
    if (f) fclose(f);
    const char *skx = "avx512f avx512cd avx512bw avx512dq avx512vl";
    if (has_flags(flags, "avx2 fma")) out[n++] = amd ? "Zen" : "Haswell";
    if (has_flags(flags, skx)) out[n++] = "SkylakeX";
    if (has_flags(flags, skx) && has_flags(flags, "avx512_bf16")) out[n++] = "Cooperlake";
    if (has_flags(flags, skx) && has_flags(flags, "avx512_bf16 amx_tile amx_bf16")) out[n++] = "SapphireRapids";
    return n;
}

/* run this program for one core type (NULL: OpenBLAS's own choice); its lines echoed, its limit and core returned */
static double child(const char *self, const char *lib, const char *coretype, char *core, size_t core_size) {
    int fd[2];
    if (pipe(fd)) return 0;
    pid_t pid = fork();
    if (pid == 0) {
        dup2(fd[1], 1);
        close(fd[0]);
        close(fd[1]);
        if (coretype) setenv("OPENBLAS_CORETYPE", coretype, 1);
        else unsetenv("OPENBLAS_CORETYPE");
        execl(self, self, "--one", lib, (char *)NULL);
        _exit(127);
    }
    close(fd[1]);
    FILE *p = fdopen(fd[0], "r");
    char line[512];
    double limit = 0;
    while (p && fgets(line, sizeof line, p)) {
        char name[64];
        if (sscanf(line, "limit %lf %63s", &limit, name) == 2) snprintf(core, core_size, "%s", name);
        else fputs(line, stdout);
    }
    if (p) fclose(p);
    int st;
    waitpid(pid, &st, 0);
    return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? limit : -(double)(WIFEXITED(st) ? WEXITSTATUS(st) : 1);
}

int main(int argc, char **argv) {
    if (argc > 1 && !strcmp(argv[1], "--one")) return measure(argc > 2 ? argv[2] : "libopenblas.so.0");
    const char *lib = argc > 1 ? argv[1] : "libopenblas.so.0";
    char self[4096];
    ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
    if (len <= 0) return measure(lib);
    self[len] = 0;
    setvbuf(stdout, NULL, _IOLBF, 0);
    const char *types[8];
    int n = candidates(types);
    char core[64] = "", best_core[64] = "";
    double best = child(self, lib, NULL, core, sizeof core);
    if (best < 0) return (int)-best; /* no OpenBLAS: its line is printed */
    snprintf(best_core, sizeof best_core, "%s", core);
    char auto_core[64];
    snprintf(auto_core, sizeof auto_core, "%s", core);
    for (int i = 0; i < n; i++) {
        if (!strcasecmp(types[i], auto_core)) continue; /* that is OpenBLAS's own choice, measured above */
        core[0] = 0;
        double g = child(self, lib, types[i], core, sizeof core);
        if (g > 0 && strcasecmp(core, types[i]))
            printf("sgemm-limit: OPENBLAS_CORETYPE=%s: this OpenBLAS ran core %s instead\n", types[i], core);
        if (g > best) {
            best = g;
            snprintf(best_core, sizeof best_core, "%s", core);
        }
    }
    printf("sgemm-limit: the fastest: core %s (OpenBLAS's own choice: %s)\n", best_core, auto_core);
    printf("limit %.1f %s\n", best, best_core);
    return 0;
}
