/* fuzz_util.h: shared by the libFuzzer harnesses in tests/fuzz (see README):
 * a private temporary folder per process (loaders that take paths read the
 * input from files in it). tests/fuzz/run.sh passes -close_fd_mask=2, so the
 * scan's "skipping" lines stay out of the log; libFuzzer and the sanitizers
 * keep reporting on their own copy of stderr. */
#ifndef CT_FUZZ_UTIL_H
#define CT_FUZZ_UTIL_H
#include <fcntl.h>
#include <ftw.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char fz_dir[256];

static void fz_rmtree_at_exit(void);

/* The process's temporary folder, made on first use, removed at exit. */
static const char *fz_tmp(void) {
    if (!fz_dir[0]) {
        const char *base = getenv("TMPDIR");
        snprintf(fz_dir, sizeof fz_dir, "%s/cltrain-fuzz-XXXXXX", base && *base ? base : "/tmp");
        if (!mkdtemp(fz_dir)) { perror("mkdtemp"); abort(); }
        atexit(fz_rmtree_at_exit);
    }
    return fz_dir;
}

static int fz_rm(const char *p, const struct stat *st, int flag, struct FTW *ftw) {
    (void)st; (void)flag; (void)ftw;
    return remove(p);
}

/* Empty the folder path (or remove it when keep_top is 0). */
static void fz_rmtree(const char *path, int keep_top) {
    nftw(path, fz_rm, 16, FTW_DEPTH | FTW_PHYS);
    if (keep_top) mkdir(path, 0755);
}

static void fz_rmtree_at_exit(void) { if (fz_dir[0]) fz_rmtree(fz_dir, 0); }

/* tmp/NAME (folders on the way made), holding data[0..n). Returns the path (static). */
__attribute__((unused)) static const char *fz_write(const char *name, const uint8_t *data, size_t n) {
    static char path[512];
    snprintf(path, sizeof path, "%s/%s", fz_tmp(), name);
    for (char *s = path + strlen(fz_dir) + 1; (s = strchr(s, '/')); s++) {
        *s = 0;
        mkdir(path, 0755);
        *s = '/';
    }
    FILE *f = fopen(path, "wb");
    if (!f) { perror(path); abort(); }
    if (n && fwrite(data, 1, n, f) != n) abort();
    fclose(f);
    return path;
}
#endif
