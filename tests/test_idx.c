/* test_idx.c: the IDX / MNIST loader and the downloader, on fixtures this test writes.
 *
 * Every fixture lives in a mkdtemp folder removed at the end: tiny raw and
 * .gz IDX files that must round-trip exactly, then each kind of damage
 * (missing, wrong magic, absurd dimensions, truncation, count mismatch, bad
 * label, random byte flips in a .gz) that must give CT_EINPUT naming the
 * file. Downloads use file:// URLs and an unreachable http address, so no
 * network is needed; the real Fashion-MNIST is read when Debian's package is
 * installed. Depends on libcltrain, zlib, cmocka. Run clean under ASan too. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>
#include "ct_files.h"

#include "cltrain/common.h"
#include "cltrain/data.h"
#include "cltrain/download.h"
#include <dirent.h>
#include <errno.h>
#include <ftw.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>





static void put_be32(uint8_t *p, uint32_t v) {
    p[0] = (uint8_t)(v >> 24); p[1] = (uint8_t)(v >> 16); p[2] = (uint8_t)(v >> 8); p[3] = (uint8_t)v;
}

static void write_bytes(const char *path, const void *data, size_t n, int gz) {
    if (gz) {
        gzFile f = gzopen(path, "wb");
        assert_non_null(f);
        if (n) assert_int_equal(gzwrite(f, data, (unsigned)n), (int)n);
        assert_int_equal(gzclose(f), Z_OK);
    } else {
        ct_write_file(path, data, n);
    }
}


/* An IDX image file: magic, n, rows, cols, then data (extra bytes appended, or cut short by `cut`). */
static void write_images(const char *path, int gz, uint32_t magic, uint32_t n, uint32_t rows, uint32_t cols,
                         const uint8_t *pixels, size_t n_pixels) {
    size_t total = 16 + n_pixels;
    uint8_t *buf = malloc(total);
    assert_non_null(buf);
    put_be32(buf, magic); put_be32(buf + 4, n); put_be32(buf + 8, rows); put_be32(buf + 12, cols);
    if (n_pixels) memcpy(buf + 16, pixels, n_pixels);
    write_bytes(path, buf, total, gz);
    free(buf);
}

static void write_labels(const char *path, int gz, uint32_t magic, uint32_t n, const uint8_t *labels, size_t n_labels) {
    uint8_t *buf = malloc(8 + n_labels);
    assert_non_null(buf);
    put_be32(buf, magic); put_be32(buf + 4, n);
    if (n_labels) memcpy(buf + 8, labels, n_labels);
    write_bytes(path, buf, 8 + n_labels, gz);
    free(buf);
}

/* The standard fixture: N images of H x W with a pattern every byte of which matters. */
enum { N = 5, H = 3, W = 4 };
static void fixture_data(uint8_t *pixels, uint8_t *labels) {
    for (int i = 0; i < N * H * W; i++) pixels[i] = (uint8_t)(i * 37 + 11);
    for (int i = 0; i < N; i++) labels[i] = (uint8_t)((i * 3) % 10);
}

static void write_fixture(const char *dir, const char *stem, int gz, char *img_path, char *lab_path) {
    uint8_t px[N * H * W], lb[N];
    fixture_data(px, lb);
    sprintf(img_path, "%s/%s-images%s", dir, stem, gz ? ".gz" : "");
    sprintf(lab_path, "%s/%s-labels%s", dir, stem, gz ? ".gz" : "");
    write_images(img_path, gz, 0x803, N, H, W, px, sizeof px);
    write_labels(lab_path, gz, 0x801, N, lb, sizeof lb);
}

static void check_fixture(const ct_dataset *ds) {
    uint8_t px[N * H * W], lb[N];
    fixture_data(px, lb);
    assert_int_equal(ds->n, N);
    assert_int_equal(ds->h, H);
    assert_int_equal(ds->w, W);
    assert_int_equal(ds->c, 1);
    assert_int_equal(ds->n_classes, 10);
    assert_memory_equal(ds->images, px, sizeof px);
    assert_memory_equal(ds->labels, lb, sizeof lb);
    assert_null(ds->class_names);
}

/* The load must fail with CT_EINPUT, leave ds empty, and name `path` (and `word`) in the message. */
static void expect_bad(const char *img, const char *lab, int n_classes, const char *path, const char *word) {
    ct_dataset ds;
    memset(&ds, 0xAB, sizeof ds); /* the loader must not trust what it is given */
    int rc = ct_idx_load(&ds, img, lab, n_classes);
    const char *msg = ct_last_error();
    print_message("# %s\n", msg);
    assert_int_equal(rc, CT_EINPUT);
    assert_non_null(strstr(msg, path));
    if (word) assert_non_null(strstr(msg, word));
    assert_null(strchr(msg, '\n'));
    assert_null(ds.images);
    assert_null(ds.labels);
    assert_int_equal(ds.n, 0);
    ct_dataset_free(&ds);
}

static void test_raw_roundtrip(void **state) {
    (void)state;
    char dir[300], img[400], lab[400];
    fresh_dir(dir, sizeof dir);
    write_fixture(dir, "raw", 0, img, lab);
    ct_dataset ds;
    assert_int_equal(ct_idx_load(&ds, img, lab, 10), 0);
    check_fixture(&ds);
    ct_dataset_free(&ds);
    assert_null(ds.images);
    ct_dataset_free(&ds); /* twice is harmless */
    ct_dataset_free(NULL);
}

static void test_gz_roundtrip(void **state) {
    (void)state;
    char dir[300], img[400], lab[400];
    fresh_dir(dir, sizeof dir);
    write_fixture(dir, "gz", 1, img, lab);
    uint8_t head[2];
    assert_int_equal(read_bytes(img, head, 2), 2);
    assert_true(head[0] == 0x1f && head[1] == 0x8b); /* really compressed */
    ct_dataset ds;
    assert_int_equal(ct_idx_load(&ds, img, lab, 10), 0);
    check_fixture(&ds);
    ct_dataset_free(&ds);
}

static void test_missing_file(void **state) {
    (void)state;
    char dir[300], img[400], lab[400], nope[400];
    fresh_dir(dir, sizeof dir);
    write_fixture(dir, "m", 0, img, lab);
    snprintf(nope, sizeof nope, "%s/no-such-file", dir);
    expect_bad(nope, lab, 10, nope, "no such file");
    expect_bad(img, nope, 10, nope, "no such file");
    expect_bad(dir, lab, 10, dir, "is a folder"); /* refused before zlib opens it */
}

static void test_wrong_magic(void **state) {
    (void)state;
    char dir[300], img[400], lab[400], bad[400];
    uint8_t px[N * H * W], lb[N];
    fixture_data(px, lb);
    fresh_dir(dir, sizeof dir);
    write_fixture(dir, "w", 0, img, lab);
    expect_bad(lab, img, 10, lab, "swapped"); /* labels given as images */
    snprintf(bad, sizeof bad, "%s/bad-magic", dir);
    write_images(bad, 0, 0x00000c03, N, H, W, px, sizeof px);
    expect_bad(bad, lab, 10, bad, "0x00000c03");
    write_labels(bad, 1, 0x00000802, N, lb, sizeof lb);
    expect_bad(img, bad, 10, bad, "magic");
    write_bytes(bad, "", 0, 0);
    expect_bad(bad, lab, 10, bad, "empty");
    write_bytes(bad, "\0\0\x08", 3, 0);
    expect_bad(bad, lab, 10, bad, "too short");
    write_bytes(bad, "\0\0\x08\x03\0\0", 6, 1);
    expect_bad(bad, lab, 10, bad, "truncated");
    /* a text file is passed through by gzread and fails on its magic */
    write_bytes(bad, "hello, world\n", 13, 0);
    expect_bad(bad, lab, 10, bad, "magic");
}

static void test_bad_dimensions(void **state) {
    (void)state;
    char dir[300], img[400], lab[400], bad[400];
    uint8_t px[N * H * W], lb[N];
    fixture_data(px, lb);
    fresh_dir(dir, sizeof dir);
    write_fixture(dir, "d", 0, img, lab);
    snprintf(bad, sizeof bad, "%s/bad-dims", dir);
    write_images(bad, 0, 0x803, 0, H, W, NULL, 0);
    expect_bad(bad, lab, 10, bad, "0 images");
    write_images(bad, 0, 0x803, N, 0, W, px, sizeof px);
    expect_bad(bad, lab, 10, bad, "absurd");
    write_images(bad, 0, 0x803, N, H, 0, px, sizeof px);
    expect_bad(bad, lab, 10, bad, "absurd");
    write_images(bad, 0, 0x803, N, 100000, W, px, sizeof px);
    expect_bad(bad, lab, 10, bad, "absurd");
    /* each side plausible, the product not: must fail before allocating it */
    write_images(bad, 1, 0x803, 0xFFFFFFFFu, 28, 28, px, sizeof px);
    expect_bad(bad, lab, 10, bad, "absurd");
    write_images(bad, 0, 0x803, 20000000, 16384, 16384, px, sizeof px);
    expect_bad(bad, lab, 10, bad, "absurd");
    write_labels(bad, 0, 0x801, 0, NULL, 0);
    expect_bad(img, bad, 10, bad, "labels");
    /* a label count that disagrees with the images */
    write_labels(bad, 0, 0x801, N + 1, lb, sizeof lb);
    expect_bad(img, bad, 10, bad, "labels, but");
    write_labels(bad, 1, 0x801, N - 1, lb, N - 1);
    expect_bad(img, bad, 10, img, "same split");
    /* n_classes out of range */
    expect_bad(img, lab, 0, lab, "classes");
    expect_bad(img, lab, 257, lab, "classes");
}

static void test_truncated(void **state) {
    (void)state;
    char dir[300], img[400], lab[400], bad[400];
    uint8_t px[N * H * W], lb[N];
    fixture_data(px, lb);
    fresh_dir(dir, sizeof dir);
    write_fixture(dir, "t", 0, img, lab);
    snprintf(bad, sizeof bad, "%s/trunc", dir);
    write_images(bad, 0, 0x803, N, H, W, px, sizeof px - 7);
    expect_bad(bad, lab, 10, bad, "truncated: expected 60 bytes of image data, got 53");
    write_images(bad, 1, 0x803, N, H, W, px, sizeof px - 7);
    expect_bad(bad, lab, 10, bad, "truncated: expected 60 bytes of image data, got 53");
    write_labels(bad, 0, 0x801, N, lb, N - 2);
    expect_bad(img, bad, 10, bad, "truncated: expected 5 bytes of label data, got 3");
    write_images(bad, 0, 0x803, N, H, W, px, 0); /* header only */
    expect_bad(bad, lab, 10, bad, "got 0");
    uint8_t hdr[10] = {0, 0, 8, 3, 0, 0, 0, 5, 0, 0};
    write_bytes(bad, hdr, sizeof hdr, 0);
    expect_bad(bad, lab, 10, bad, "header");
    /* trailing bytes: the header undercounts */
    uint8_t more[N * H * W + 3] = {0};
    memcpy(more, px, sizeof px);
    write_images(bad, 0, 0x803, N, H, W, more, sizeof more);
    expect_bad(bad, lab, 10, bad, "unexpected data");
}

/* A header declaring 4 GB over a few bytes is "truncated" before (raw: the
 * file size) or without (.gz: the buffer grows with the data) allocating it:
 * checked in a child limited to 1 GiB of address space (not under a
 * sanitizer, which reserves more than that). */
static void test_huge_header(void **state) {
    (void)state;
    char dir[300], img[400], lab[400], bad[400];
    uint8_t px[N * H * W], lb[1000];
    fixture_data(px, lb);
    memset(lb, 1, sizeof lb);
    fresh_dir(dir, sizeof dir);
    write_fixture(dir, "t", 0, img, lab);
    const char *san = getenv("CLTRAIN_SAN");
    for (int gz = 0; gz < 2; gz++) {
        /* the labels are short too: raw, the image file fails first; as a .gz they are read after it */
        snprintf(lab, sizeof lab, "%s/huge-labels%s", dir, gz ? ".gz" : "");
        write_labels(lab, gz, 0x801, 1000000, lb, sizeof lb);
        snprintf(bad, sizeof bad, "%s/huge%s", dir, gz ? ".gz" : "");
        write_images(bad, gz, 0x803, 1000000, 64, 64, px, sizeof px); /* 4.1 GB declared */
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
            struct rlimit rl = {(rlim_t)1 << 30, (rlim_t)1 << 30};
            if (!san || !*san) setrlimit(RLIMIT_AS, &rl);
            ct_dataset ds;
            int rc = ct_idx_load(&ds, bad, lab, 10);
            fprintf(stderr, "# %s\n", ct_last_error());
            _exit(rc == CT_EINPUT && strstr(ct_last_error(), "truncated") && strstr(ct_last_error(), bad) ? 0 : 1);
        }
        int st;
        assert_int_equal(waitpid(pid, &st, 0), pid);
        assert_true(WIFEXITED(st));
        assert_int_equal(WEXITSTATUS(st), 0);
    }
    (void)img;
}

/* A .gz cut anywhere must fail, never crash; cutting inside the data names the shortfall. */
static void test_truncated_gz(void **state) {
    (void)state;
    char dir[300], img[400], lab[400], bad[400];
    enum { BIG = 200 * 28 * 28 };
    uint8_t *px = malloc(BIG), lb[200], *gz = malloc(BIG + 4096);
    assert_non_null(px); assert_non_null(gz);
    ct_rng r = ct_rng_make(7, 0, 0);
    for (int i = 0; i < BIG; i++) px[i] = (uint8_t)(ct_rng_below(&r, 16) * (i % 28 > 5 ? 16 : 1));
    for (int i = 0; i < 200; i++) lb[i] = (uint8_t)(i % 10);
    fresh_dir(dir, sizeof dir);
    snprintf(img, sizeof img, "%s/img.gz", dir);
    snprintf(lab, sizeof lab, "%s/lab.gz", dir);
    snprintf(bad, sizeof bad, "%s/cut.gz", dir);
    write_images(img, 1, 0x803, 200, 28, 28, px, BIG);
    write_labels(lab, 1, 0x801, 200, lb, 200);
    ct_dataset ds;
    assert_int_equal(ct_idx_load(&ds, img, lab, 10), 0);
    assert_memory_equal(ds.images, px, BIG);
    ct_dataset_free(&ds);
    size_t n = read_bytes(img, gz, BIG + 4096);
    assert_true(n > 1000 && n < BIG);
    write_bytes(bad, gz, n / 2, 0);
    expect_bad(bad, lab, 10, bad, "truncated: expected 156800 bytes of image data, got");
    size_t cuts[] = {1, 2, 10, 20, n / 3, n - 8, n - 4, n - 1};
    for (size_t i = 0; i < sizeof cuts / sizeof cuts[0]; i++) {
        write_bytes(bad, gz, cuts[i], 0);
        expect_bad(bad, lab, 10, bad, NULL);
    }
    free(px);
    free(gz);
}

/* Random byte flips in a .gz: an error or, when zlib's CRC and length checks pass, the exact data. */
static void test_gz_byte_flips(void **state) {
    (void)state;
    char dir[300], img[400], lab[400], bad[400];
    enum { M = 64, S = 12 };
    uint8_t px[M * S * S], lb[M], orig[2][8192], buf[8192];
    for (int i = 0; i < M * S * S; i++) px[i] = (uint8_t)((i / S) % 7 * 30 + i % 3);
    for (int i = 0; i < M; i++) lb[i] = (uint8_t)(i % 10);
    fresh_dir(dir, sizeof dir);
    snprintf(img, sizeof img, "%s/img.gz", dir);
    snprintf(lab, sizeof lab, "%s/lab.gz", dir);
    snprintf(bad, sizeof bad, "%s/flip.gz", dir);
    write_images(img, 1, 0x803, M, S, S, px, sizeof px);
    write_labels(lab, 1, 0x801, M, lb, sizeof lb);
    size_t len[2] = {read_bytes(img, orig[0], sizeof orig[0]), read_bytes(lab, orig[1], sizeof orig[1])};
    int ok = 0, failed = 0;
    for (int seed = 1; seed <= 300; seed++) {
        ct_rng r = ct_rng_make((uint64_t)seed, 1, 2);
        int which = seed % 3 == 0; /* a third of the runs damage the labels */
        memcpy(buf, orig[which], len[which]);
        int flips = 1 + (int)ct_rng_below(&r, 4);
        for (int k = 0; k < flips; k++)
            buf[ct_rng_below(&r, (uint32_t)len[which])] ^= (uint8_t)(1 + ct_rng_below(&r, 255));
        write_bytes(bad, buf, len[which], 0);
        ct_dataset ds;
        int rc = which ? ct_idx_load(&ds, img, bad, 10) : ct_idx_load(&ds, bad, lab, 10);
        if (rc == 0) {
            assert_memory_equal(ds.images, px, sizeof px);
            assert_memory_equal(ds.labels, lb, sizeof lb);
            ok++;
        } else {
            assert_int_equal(rc, CT_EINPUT);
            assert_non_null(strstr(ct_last_error(), bad));
            assert_null(ds.images);
            failed++;
        }
        ct_dataset_free(&ds);
    }
    print_message("# byte flips: %d loaded intact (header fields zlib ignores), %d rejected\n", ok, failed);
    assert_true(failed > 200);
}

static void test_label_range(void **state) {
    (void)state;
    char dir[300], img[400], lab[400], bad[400];
    uint8_t px[N * H * W], lb[N];
    fixture_data(px, lb);
    fresh_dir(dir, sizeof dir);
    write_fixture(dir, "l", 1, img, lab);
    snprintf(bad, sizeof bad, "%s/labels-bad", dir);
    lb[3] = 10;
    write_labels(bad, 0, 0x801, N, lb, sizeof lb);
    expect_bad(img, bad, 10, bad, "label 10 at record 3");
    /* labels 0..9: fine with 10 classes, not with 9 */
    expect_bad(img, lab, 9, lab, "label 9 at record 3");
    ct_dataset ds;
    lb[3] = 255;
    write_labels(bad, 0, 0x801, N, lb, sizeof lb);
    assert_int_equal(ct_idx_load(&ds, img, bad, 256), 0);
    assert_int_equal(ds.labels[3], 255);
    ct_dataset_free(&ds);
}

/* A folder in MNIST layout, mixing raw and .gz names. */
static void write_mnist_dir(const char *dir, int test_w) {
    uint8_t px[N * H * (W + 1)] = {0}, lb[N];
    char p[400];
    assert_true(test_w <= W + 1);
    fixture_data(px, lb);
    snprintf(p, sizeof p, "%s/train-images-idx3-ubyte", dir);
    write_images(p, 0, 0x803, N, H, W, px, N * H * W);
    snprintf(p, sizeof p, "%s/train-labels-idx1-ubyte.gz", dir);
    write_labels(p, 1, 0x801, N, lb, sizeof lb);
    snprintf(p, sizeof p, "%s/t10k-images-idx3-ubyte.gz", dir);
    write_images(p, 1, 0x803, N, H, (uint32_t)test_w, px, (size_t)(N * H * test_w));
    snprintf(p, sizeof p, "%s/t10k-labels-idx1-ubyte", dir);
    write_labels(p, 0, 0x801, N, lb, sizeof lb);
    /* a broken raw twin: the .gz must win */
    snprintf(p, sizeof p, "%s/t10k-images-idx3-ubyte", dir);
    write_bytes(p, "junk", 4, 0);
}

static void test_mnist_dir(void **state) {
    (void)state;
    char dir[300];
    fresh_dir(dir, sizeof dir);
    write_mnist_dir(dir, W);
    ct_dataset tr, te;
    assert_int_equal(ct_mnist_load(&tr, &te, dir, CT_FASHION_MNIST, 0), 0);
    assert_int_equal(tr.n, N);
    assert_int_equal(te.n, N);
    assert_int_equal(te.w, W);
    assert_memory_equal(tr.images, te.images, N * H * W);
    assert_non_null(tr.class_names);
    assert_string_equal(tr.class_names[0], "T-shirt/top");
    assert_string_equal(te.class_names[9], "Ankle boot");
    ct_dataset_free(&tr);
    ct_dataset_free(&te);
    assert_int_equal(ct_mnist_load(NULL, &te, dir, CT_MNIST, 0), 0);
    assert_string_equal(te.class_names[7], "7");
    ct_dataset_free(&te);
    assert_int_equal(ct_mnist_load(&tr, &te, dir, 99, 0), CT_EINPUT);
}

static void test_mnist_mismatch_and_missing(void **state) {
    (void)state;
    char dir[300], p[400];
    fresh_dir(dir, sizeof dir);
    write_mnist_dir(dir, W + 1);
    ct_dataset tr, te;
    assert_int_equal(ct_mnist_load(&tr, &te, dir, CT_MNIST, 0), CT_EINPUT);
    assert_non_null(strstr(ct_last_error(), "3x5"));
    assert_null(tr.images);
    assert_null(te.images);
    snprintf(p, sizeof p, "%s/t10k-labels-idx1-ubyte", dir);
    assert_int_equal(unlink(p), 0);
    assert_int_equal(ct_mnist_load(&tr, &te, dir, CT_MNIST, 0), CT_EINPUT);
    const char *msg = ct_last_error();
    print_message("# %s\n", msg);
    assert_non_null(strstr(msg, dir));
    assert_non_null(strstr(msg, "missing t10k-labels-idx1-ubyte[.gz];"));
    assert_non_null(strstr(msg, "train-images-idx3-ubyte.gz, train-labels-idx1-ubyte.gz"));
    assert_non_null(strstr(msg, "--data"));
    assert_null(tr.images);
    /* only the train split wanted: the missing test file does not matter */
    assert_int_equal(ct_mnist_load(&tr, NULL, dir, CT_MNIST, 0), 0);
    ct_dataset_free(&tr);
    snprintf(p, sizeof p, "%s/nowhere", dir);
    assert_int_equal(ct_mnist_load(&tr, &te, p, CT_FASHION_MNIST, 0), CT_EINPUT);
    assert_non_null(strstr(ct_last_error(), "dataset-fashion-mnist"));
}

static int count_entries(const char *dir) {
    DIR *d = opendir(dir);
    assert_non_null(d);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) n++;
    closedir(d);
    return n;
}

/* Offline: one line, CT_ENET, fast, pointing at --data, nothing left behind. */
static void test_download_unreachable(void **state) {
    (void)state;
    char dir[300], sub[400];
    fresh_dir(dir, sizeof dir);
    snprintf(sub, sizeof sub, "%s/mnist", dir);
    setenv("CLTRAIN_MNIST_MIRROR", "http://127.0.0.1:9/", 1);
    ct_dataset tr, te;
    double t0 = ct_now();
    int rc = ct_mnist_load(&tr, &te, sub, CT_MNIST, 1);
    double secs = ct_now() - t0;
    unsetenv("CLTRAIN_MNIST_MIRROR");
    const char *msg = ct_last_error();
    print_message("# %.2f s: %s\n", secs, msg);
    assert_int_equal(rc, CT_ENET);
    assert_true(secs < 11.0);
    assert_non_null(strstr(msg, "train-images-idx3-ubyte.gz is missing and could not be downloaded"));
    assert_non_null(strstr(msg, "127.0.0.1"));
    assert_non_null(strstr(msg, "--data"));
    assert_non_null(strstr(msg, "fashion-mnist"));
    assert_null(strchr(msg, '\n'));
    /* the folder the attempt created is removed again: nothing is left behind */
    struct stat st;
    assert_int_equal(stat(sub, &st), -1);
    assert_int_equal(errno, ENOENT);
    assert_null(tr.images);
}

static void test_download_file_urls(void **state) {
    (void)state;
    char dir[300], src[400], dest[512], sub[400], src_url[500];
    static const char fox[] = "The quick brown fox jumps over the lazy dog";
    fresh_dir(dir, sizeof dir);
    snprintf(src, sizeof src, "%s/fox.txt", dir);
    write_bytes(src, fox, strlen(fox), 0);
    snprintf(src_url, sizeof src_url, "file://%s", src);
    snprintf(sub, sizeof sub, "%s/a/b", dir);
    snprintf(dest, sizeof dest, "%s/fox.out", sub);
    const char *urls[] = {"file:///nonexistent/cltrain/fox.txt", src_url};
    /* the first mirror fails, the second serves the file; the MD5 is the well-known one */
    assert_int_equal(ct_download(urls, 2, dest, "9E107D9D372BB6826BD81D3542A419D6"), 0);
    uint8_t buf[100];
    assert_int_equal(read_bytes(dest, buf, sizeof buf), strlen(fox));
    assert_memory_equal(buf, fox, strlen(fox));
    struct stat st;
    assert_int_equal(stat(dest, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0644);
    assert_int_equal(count_entries(sub), 1);
    /* checksum mismatch: fails, dest untouched, no temporary left */
    assert_int_equal(unlink(dest), 0);
    assert_int_equal(ct_download(urls + 1, 1, dest, "00000000000000000000000000000000"), CT_ENET);
    print_message("# %s\n", ct_last_error());
    assert_non_null(strstr(ct_last_error(), "checksum mismatch"));
    assert_int_equal(count_entries(sub), 0);
    /* all mirrors fail: the last one is named */
    assert_int_equal(ct_download(urls, 1, dest, NULL), CT_ENET);
    assert_non_null(strstr(ct_last_error(), "/nonexistent/cltrain/fox.txt"));
    assert_int_equal(count_entries(sub), 0);
    /* a malformed checksum or no URL is the caller's error */
    assert_int_equal(ct_download(urls, 2, dest, "abc"), CT_EINPUT);
    assert_int_equal(ct_download(urls, 0, dest, NULL), CT_EINPUT);
    /* a destination folder that cannot be created */
    snprintf(dest, sizeof dest, "%s/sub", src); /* under a regular file */
    assert_int_equal(ct_download(urls + 1, 1, dest, NULL), CT_EIO);
}

/* The real Fashion-MNIST from Debian's dataset-fashion-mnist, when installed. */
static void test_fashion_mnist_real(void **state) {
    (void)state;
    const char *dir = "/usr/share/datasets/fashion-mnist";
    struct stat st;
    if (stat(dir, &st) != 0) skip();
    ct_dataset tr, te;
    double t0 = ct_now();
    int rc = ct_mnist_load(&tr, &te, dir, CT_FASHION_MNIST, 0);
    if (rc) print_message("# %s\n", ct_last_error());
    assert_int_equal(rc, 0);
    print_message("# loaded Fashion-MNIST in %.2f s\n", ct_now() - t0);
    assert_int_equal(tr.n, 60000);
    assert_int_equal(te.n, 10000);
    assert_int_equal(tr.h, 28);
    assert_int_equal(tr.w, 28);
    assert_int_equal(tr.c, 1);
    assert_int_equal(te.h, 28);
    assert_int_equal(tr.n_classes, 10);
    int count[10] = {0};
    for (int i = 0; i < tr.n; i++) { assert_true(tr.labels[i] < 10); count[tr.labels[i]]++; }
    for (int k = 0; k < 10; k++) assert_int_equal(count[k], 6000); /* the set is balanced */
    for (int i = 0; i < te.n; i++) assert_true(te.labels[i] < 10);
    unsigned long sum = 0;
    for (size_t i = 0; i < (size_t)28 * 28 * 100; i++) sum += tr.images[i];
    assert_true(sum > 0); /* images are not blank */
    ct_dataset_free(&tr);
    ct_dataset_free(&te);
}

static int group_setup(void **state) {
    (void)state;
    return ct_tmp_root_make("idx");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_raw_roundtrip),
        cmocka_unit_test(test_gz_roundtrip),
        cmocka_unit_test(test_missing_file),
        cmocka_unit_test(test_wrong_magic),
        cmocka_unit_test(test_bad_dimensions),
        cmocka_unit_test(test_huge_header),
        cmocka_unit_test(test_truncated),
        cmocka_unit_test(test_truncated_gz),
        cmocka_unit_test(test_gz_byte_flips),
        cmocka_unit_test(test_label_range),
        cmocka_unit_test(test_mnist_dir),
        cmocka_unit_test(test_mnist_mismatch_and_missing),
        cmocka_unit_test(test_download_unreachable),
        cmocka_unit_test(test_download_file_urls),
        cmocka_unit_test(test_fashion_mnist_real),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
