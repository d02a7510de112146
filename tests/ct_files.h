/* ct_files.h: file fixtures shared by the loader tests (test_idx.c,
 * test_cifar.c): one temporary root per test program, removed at the end,
 * a fresh empty folder per test so a leftover file shows, and whole-file
 * read/write helpers that fail the test on any error. Include after cmocka.h. */
#ifndef CT_FILES_H
#define CT_FILES_H
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

static char tmp_root[256];
static int dir_counter;

static int ct_rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
    (void)st; (void)flag; (void)ftw;
    return remove(path);
}

/* name: a word for the folder, e.g. "idx" -> $TMPDIR/cltrain-test-idx-XXXXXX */
static int ct_tmp_root_make(const char *name) {
    snprintf(tmp_root, sizeof tmp_root, "%s/cltrain-test-%s-XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp", name);
    return mkdtemp(tmp_root) ? 0 : -1;
}

static int group_teardown(void **state) {
    (void)state;
    return nftw(tmp_root, ct_rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

static void fresh_dir(char *out, size_t size) {
    snprintf(out, size, "%s/t%d", tmp_root, dir_counter++);
    assert_int_equal(mkdir(out, 0755), 0);
}

static void ct_write_file(const char *path, const void *data, size_t n) {
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    if (n) assert_int_equal(fwrite(data, 1, n, f), n);
    assert_int_equal(fclose(f), 0);
}

static size_t read_bytes(const char *path, uint8_t *buf, size_t cap) {
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    size_t n = fread(buf, 1, cap, f);
    fclose(f);
    return n;
}
#endif
