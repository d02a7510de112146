/* test_cifar.c: the CIFAR-10 / CIFAR-100 loader and the .tar.gz reader, on
 * fixtures this test writes.
 *
 * Tiny batches whose every pixel depends on (record, channel, position)
 * must come back as NHWC exactly; class names come from the meta files or
 * the standard lists. Each kind of damage (size not a whole number of
 * records, empty, label out of range, missing batch, wrong data set, bad
 * names file) must give CT_EINPUT naming the file; single byte flips must
 * change exactly what they hit or be rejected; an unreachable mirror fails
 * fast with CT_ENET and says where to put the files; archives with '..' or
 * absolute paths are refused. Depends on libcltrain, zlib, cmocka. Run
 * clean under ASan too. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>
#include "ct_files.h"

#include "cltrain/cifar.h"
#include "cltrain/targz.h"
#include "cltrain/common.h"
#include <dirent.h>
#include <ftw.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

enum { REC10 = 3073, REC100 = 3074, PLANE = 1024, NB = 3 /* records per fixture batch */ };







static int exists(const char *path) {
    struct stat st;
    return lstat(path, &st) == 0;
}

static int count_entries(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return -1;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) n++;
    closedir(d);
    return n;
}

/* Every pixel of record i (global numbering) depends on i, channel and position. */
static uint8_t px(int i, int ch, int p) { return (uint8_t)(i * 31 + ch * 97 + p * 7 + (p >> 5) * 3 + 5); }
static uint8_t label10(int i) { return (uint8_t)((i * 3 + 1) % 10); }
static uint8_t coarse100(int i) { return (uint8_t)((i * 7 + 3) % 20); }
static uint8_t fine100(int i) { return (uint8_t)((i * 37 + 11) % 100); }

/* n records starting at global index first, in CIFAR-10 (label_bytes 1) or CIFAR-100 (2) layout. */
static uint8_t *make_records(int first, int n, int label_bytes, size_t *size) {
    int rec = label_bytes + 3 * PLANE;
    uint8_t *buf = malloc((size_t)n * rec);
    assert_non_null(buf);
    for (int r = 0; r < n; r++) {
        int i = first + r;
        uint8_t *o = buf + (size_t)r * rec;
        if (label_bytes == 1) o[0] = label10(i);
        else { o[0] = coarse100(i); o[1] = fine100(i); }
        for (int ch = 0; ch < 3; ch++)
            for (int p = 0; p < PLANE; p++) o[label_bytes + ch * PLANE + p] = px(i, ch, p);
    }
    *size = (size_t)n * rec;
    return buf;
}

static void write_records(const char *path, int first, int n, int label_bytes) {
    size_t size;
    uint8_t *buf = make_records(first, n, label_bytes, &size);
    ct_write_file(path, buf, size);
    free(buf);
}

static const char *const batch_names[6] = {
    "data_batch_1.bin", "data_batch_2.bin", "data_batch_3.bin", "data_batch_4.bin", "data_batch_5.bin", "test_batch.bin",
};
#define TEST_FIRST 1000 /* global index of the test batch's first record */

/* A CIFAR-10 folder: five batches of NB records (batch b starts at b*NB), a test batch, optionally names. */
static void write_c10(const char *folder, int meta) {
    char p[512];
    for (int b = 0; b < 6; b++) {
        snprintf(p, sizeof p, "%s/%s", folder, batch_names[b]);
        write_records(p, b < 5 ? b * NB : TEST_FIRST, NB, 1);
    }
    if (meta) {
        static const char names[] = "alpha\nbravo\r\ncharlie\ndelta  \necho\n\nfoxtrot\ngolf\nhotel\nindia\njuliet\n\n\n";
        snprintf(p, sizeof p, "%s/batches.meta.txt", folder);
        ct_write_file(p, names, sizeof names - 1);
    }
}

/* Image i of ds (record `first + i` of the fixture) must be the planes turned into HWC, pixel by pixel. */
static void check_images(const ct_dataset *ds, int n, int first_of(int)) {
    assert_int_equal(ds->n, n);
    assert_int_equal(ds->h, 32);
    assert_int_equal(ds->w, 32);
    assert_int_equal(ds->c, 3);
    for (int k = 0; k < n; k++) {
        int i = first_of(k);
        const uint8_t *img = ds->images + (size_t)k * 3072;
        for (int y = 0; y < 32; y++)
            for (int x = 0; x < 32; x++)
                for (int ch = 0; ch < 3; ch++)
                    if (img[(y * 32 + x) * 3 + ch] != px(i, ch, y * 32 + x))
                        fail_msg("image %d pixel (%d,%d) channel %d: got %u want %u", k, y, x, ch,
                                 img[(y * 32 + x) * 3 + ch], px(i, ch, y * 32 + x));
    }
}
static int train_index(int k) { return k; }
static int test_index(int k) { return TEST_FIRST + k; }

/* The load must fail with `code`, leave both sets empty, and name `word1` (and word2) on one line. */
static void expect_fail(int code, const char *dir, int kind, int fine, int download, const char *word1, const char *word2) {
    ct_dataset tr, te;
    memset(&tr, 0xAB, sizeof tr);
    memset(&te, 0xAB, sizeof te);
    int rc = ct_cifar_load(&tr, &te, dir, kind, fine, download);
    const char *msg = ct_last_error();
    print_message("# %s\n", msg);
    assert_int_equal(rc, code);
    if (word1 && !strstr(msg, word1)) fail_msg("message lacks '%s'", word1);
    if (word2 && !strstr(msg, word2)) fail_msg("message lacks '%s'", word2);
    assert_null(strchr(msg, '\n'));
    assert_null(tr.images);
    assert_null(te.images);
    assert_null(tr.class_names);
    assert_int_equal(tr.n, 0);
    assert_int_equal(te.n, 0);
}

static void test_cifar10_load(void **state) {
    (void)state;
    char dir[300], sub[400];
    fresh_dir(dir, sizeof dir);
    snprintf(sub, sizeof sub, "%s/cifar-10-batches-bin", dir);
    assert_int_equal(mkdir(sub, 0755), 0);
    write_c10(sub, 1);
    ct_dataset tr, te;
    assert_int_equal(ct_cifar_load(&tr, &te, dir, 10, 0, 0), 0);
    check_images(&tr, 5 * NB, train_index);
    check_images(&te, NB, test_index);
    for (int k = 0; k < 5 * NB; k++) assert_int_equal(tr.labels[k], label10(k));
    for (int k = 0; k < NB; k++) assert_int_equal(te.labels[k], label10(TEST_FIRST + k));
    assert_int_equal(tr.n_classes, 10);
    assert_int_equal(te.n_classes, 10);
    assert_non_null(tr.class_names);
    assert_string_equal(tr.class_names[0], "alpha");
    assert_string_equal(tr.class_names[1], "bravo");   /* CRLF */
    assert_string_equal(tr.class_names[3], "delta");   /* trailing spaces */
    assert_string_equal(tr.class_names[5], "foxtrot"); /* after a blank line */
    assert_string_equal(te.class_names[9], "juliet");
    assert_ptr_not_equal(tr.class_names, te.class_names); /* each set owns its names */
    ct_dataset_free(&tr);
    ct_dataset_free(&te);

    /* the batches in dir itself, no names file: the standard names */
    fresh_dir(dir, sizeof dir);
    write_c10(dir, 0);
    assert_int_equal(ct_cifar_load(&tr, NULL, dir, 10, 0, 0), 0);
    check_images(&tr, 5 * NB, train_index);
    assert_string_equal(tr.class_names[0], "airplane");
    assert_string_equal(tr.class_names[9], "truck");
    ct_dataset_free(&tr);
    /* only the test split wanted: the train batches may be missing */
    char p[512];
    snprintf(p, sizeof p, "%s/data_batch_2.bin", dir);
    assert_int_equal(unlink(p), 0);
    assert_int_equal(ct_cifar_load(NULL, &te, dir, 10, 0, 0), 0);
    check_images(&te, NB, test_index);
    ct_dataset_free(&te);
    assert_int_equal(ct_cifar_load(NULL, NULL, dir, 10, 0, 0), 0);
    expect_fail(CT_EINPUT, dir, 7, 0, 0, "kind 7", NULL);
}

static void test_cifar100_load(void **state) {
    (void)state;
    char dir[300], sub[400], p[512];
    fresh_dir(dir, sizeof dir);
    snprintf(sub, sizeof sub, "%s/cifar-100-binary", dir);
    assert_int_equal(mkdir(sub, 0755), 0);
    snprintf(p, sizeof p, "%s/train.bin", sub);
    write_records(p, 0, 7, 2);
    snprintf(p, sizeof p, "%s/test.bin", sub);
    write_records(p, TEST_FIRST, 4, 2);
    char names[2000] = "";
    for (int k = 0; k < 100; k++) snprintf(names + strlen(names), sizeof names - strlen(names), "f%d\n", k);
    snprintf(p, sizeof p, "%s/fine_label_names.txt", sub);
    ct_write_file(p, names, strlen(names));

    ct_dataset tr, te;
    assert_int_equal(ct_cifar_load(&tr, &te, dir, 100, 1, 0), 0);
    check_images(&tr, 7, train_index);
    check_images(&te, 4, test_index);
    assert_int_equal(tr.n_classes, 100);
    for (int k = 0; k < 7; k++) assert_int_equal(tr.labels[k], fine100(k));
    for (int k = 0; k < 4; k++) assert_int_equal(te.labels[k], fine100(TEST_FIRST + k));
    assert_string_equal(tr.class_names[42], "f42");
    ct_dataset_free(&tr);
    ct_dataset_free(&te);

    /* coarse labels; no coarse_label_names.txt: the standard 20 */
    assert_int_equal(ct_cifar_load(&tr, &te, dir, 100, 0, 0), 0);
    assert_int_equal(tr.n_classes, 20);
    for (int k = 0; k < 7; k++) assert_int_equal(tr.labels[k], coarse100(k));
    for (int k = 0; k < 4; k++) assert_int_equal(te.labels[k], coarse100(TEST_FIRST + k));
    assert_string_equal(tr.class_names[0], "aquatic_mammals");
    assert_string_equal(te.class_names[19], "vehicles_2");
    ct_dataset_free(&tr);
    ct_dataset_free(&te);

    /* a fine label of 100, a coarse label of 20: named with file and record */
    uint8_t *buf = malloc(7 * REC100);
    assert_non_null(buf);
    snprintf(p, sizeof p, "%s/train.bin", sub);
    assert_int_equal(read_bytes(p, buf, 7 * REC100), 7 * REC100);
    buf[5 * REC100 + 1] = 100;
    ct_write_file(p, buf, 7 * REC100);
    expect_fail(CT_EINPUT, dir, 100, 1, 0, "train.bin: record 5 has fine label 100", "0..99");
    buf[5 * REC100 + 1] = 0;
    buf[6 * REC100] = 20;
    ct_write_file(p, buf, 7 * REC100);
    expect_fail(CT_EINPUT, dir, 100, 1, 0, "train.bin: record 6 has coarse label 20", "0..19");
    /* CIFAR-10 records where CIFAR-100 ones belong */
    write_records(p, 0, 2, 1);
    expect_fail(CT_EINPUT, dir, 100, 0, 0, "6146 bytes is not a whole number of 3074-byte records", "CIFAR-10");
    free(buf);
    /* missing test.bin */
    write_records(p, 0, 7, 2);
    snprintf(p, sizeof p, "%s/test.bin", sub);
    assert_int_equal(unlink(p), 0);
    expect_fail(CT_EINPUT, dir, 100, 1, 0, "missing test.bin", "cifar-100-binary.tar.gz");
}

static void test_cifar10_damage(void **state) {
    (void)state;
    char dir[300], p[512];
    fresh_dir(dir, sizeof dir);
    write_c10(dir, 1);
    size_t size;
    uint8_t *buf = make_records(2 * NB, NB, 1, &size);

    /* one byte too many */
    snprintf(p, sizeof p, "%s/data_batch_3.bin", dir);
    uint8_t *more = calloc(1, size + 1);
    assert_non_null(more);
    memcpy(more, buf, size);
    ct_write_file(p, more, size + 1);
    expect_fail(CT_EINPUT, dir, 10, 0, 0, "data_batch_3.bin: 9220 bytes is not a whole number of 3073-byte records", NULL);
    free(more);
    /* truncated inside the last record */
    ct_write_file(p, buf, size - 100);
    expect_fail(CT_EINPUT, dir, 10, 0, 0, "data_batch_3.bin: 9119 bytes", "truncated");
    /* empty */
    ct_write_file(p, buf, 0);
    expect_fail(CT_EINPUT, dir, 10, 0, 0, "data_batch_3.bin: empty", NULL);
    /* CIFAR-100 records where CIFAR-10 ones belong */
    write_records(p, 0, 3, 2);
    expect_fail(CT_EINPUT, dir, 10, 0, 0, "data_batch_3.bin", "CIFAR-100");
    ct_write_file(p, buf, size);
    /* a label of 10 in record 2 of batch 2 */
    snprintf(p, sizeof p, "%s/data_batch_2.bin", dir);
    uint8_t *b2 = make_records(NB, NB, 1, &size);
    b2[2 * REC10] = 10;
    ct_write_file(p, b2, size);
    expect_fail(CT_EINPUT, dir, 10, 0, 0, "data_batch_2.bin: record 2 has label 10", "0..9");
    b2[2 * REC10] = 255;
    ct_write_file(p, b2, size);
    expect_fail(CT_EINPUT, dir, 10, 0, 0, "data_batch_2.bin: record 2 has label 255", NULL);
    /* the same in the test batch */
    b2[2 * REC10] = label10(NB + 2);
    ct_write_file(p, b2, size);
    free(b2);
    snprintf(p, sizeof p, "%s/test_batch.bin", dir);
    uint8_t *tb = make_records(TEST_FIRST, NB, 1, &size);
    tb[0] = 11;
    ct_write_file(p, tb, size);
    expect_fail(CT_EINPUT, dir, 10, 0, 0, "test_batch.bin: record 0 has label 11", NULL);
    tb[0] = 1;
    ct_write_file(p, tb, size);
    free(tb);
    /* a names file with nine names, or with a NUL */
    snprintf(p, sizeof p, "%s/batches.meta.txt", dir);
    ct_write_file(p, "a\nb\nc\nd\ne\nf\ng\nh\ni\n", 18);
    expect_fail(CT_EINPUT, dir, 10, 0, 0, "batches.meta.txt: 9 class names, expected 10", NULL);
    ct_write_file(p, "a\nb\nc\nd\ne\nf\ng\nh\ni\nj\0k\n", 22);
    expect_fail(CT_EINPUT, dir, 10, 0, 0, "batches.meta.txt: holds NUL bytes", NULL);
    assert_int_equal(unlink(p), 0);
    ct_dataset tr, te;
    assert_int_equal(ct_cifar_load(&tr, &te, dir, 10, 0, 0), 0); /* repaired */
    ct_dataset_free(&tr);
    ct_dataset_free(&te);

    /* missing batches: listed, with what the folder must hold and where to get it */
    snprintf(p, sizeof p, "%s/data_batch_4.bin", dir);
    assert_int_equal(unlink(p), 0);
    snprintf(p, sizeof p, "%s/test_batch.bin", dir);
    assert_int_equal(unlink(p), 0);
    expect_fail(CT_EINPUT, dir, 10, 0, 0, "holds only 4 of the 6 CIFAR-10 files it needs (missing data_batch_4.bin, "
                "test_batch.bin)", "data_batch_1.bin .. data_batch_5.bin");
    const char *msg = ct_last_error();
    assert_non_null(strstr(msg, dir));
    assert_non_null(strstr(msg, "cifar-10-binary.tar.gz"));
    assert_non_null(strstr(msg, "https://www.cs.toronto.edu/~kriz/cifar-10-binary.tar.gz"));
    assert_non_null(strstr(msg, "--data"));
    /* a folder named like a batch counts as missing */
    assert_int_equal(mkdir(p, 0755), 0);
    expect_fail(CT_EINPUT, dir, 10, 0, 0, "test_batch.bin", NULL);
    /* some batches there and downloading allowed: still one line, nothing fetched */
    setenv("CLTRAIN_CIFAR_MIRROR", "http://127.0.0.1:9/", 1);
    expect_fail(CT_EINPUT, dir, 10, 0, 1, "holds only 4 of the 6", NULL);
    unsetenv("CLTRAIN_CIFAR_MIRROR");
    /* nothing there at all */
    snprintf(p, sizeof p, "%s/nowhere", dir);
    expect_fail(CT_EINPUT, p, 10, 0, 0, "nowhere: missing data_batch_1.bin", NULL);
    free(buf);
}

/* One byte flipped anywhere: a pixel flip changes exactly that pixel, a label
 * flip changes that label or is rejected naming the file and record. Cuts
 * anywhere: a whole number of records loads, anything else is rejected. */
/* One set's files given to the other: a folder of CIFAR-100 files to cifar10
 * and the reverse are named as such; a CIFAR-100 file under a CIFAR-10 name
 * (or the reverse) whose size fits both record sizes fails on its labels with
 * a hint at the other set. Nothing is downloaded. */
static void test_wrong_set(void **state) {
    (void)state;
    char dir[300], p[512];
    fresh_dir(dir, sizeof dir);
    setenv("CLTRAIN_CIFAR_MIRROR", "http://127.0.0.1:9/", 1);
    snprintf(p, sizeof p, "%s/train.bin", dir);
    write_records(p, 0, 8, 2);
    snprintf(p, sizeof p, "%s/test.bin", dir);
    write_records(p, TEST_FIRST, 8, 2);
    expect_fail(CT_EINPUT, dir, 10, 0, 1, "holds the CIFAR-100 files (train.bin and test.bin), not CIFAR-10",
                "cltrain cifar100");
    char dir2[300];
    fresh_dir(dir2, sizeof dir2);
    write_c10(dir2, 0);
    expect_fail(CT_EINPUT, dir2, 100, 1, 1, "holds the CIFAR-10 files", "cltrain cifar10");
    /* 3073 records of 3074 bytes are also 3074 records of 3073 bytes */
    snprintf(p, sizeof p, "%s/data_batch_1.bin", dir2);
    write_records(p, 0, 3073, 2);
    expect_fail(CT_EINPUT, dir2, 10, 0, 0, "data_batch_1.bin: record", "a CIFAR-100 file?");
    write_records(p, 0, NB, 1);
    char dir3[300];
    fresh_dir(dir3, sizeof dir3);
    snprintf(p, sizeof p, "%s/train.bin", dir3);
    size_t size;
    uint8_t *buf = make_records(0, 3074, 1, &size);
    for (int r = 0; r < 3074; r++) buf[(size_t)r * REC10] = 30; /* read as CIFAR-100: coarse label 30 */
    ct_write_file(p, buf, size);
    free(buf);
    snprintf(p, sizeof p, "%s/test.bin", dir3);
    write_records(p, TEST_FIRST, 8, 2);
    expect_fail(CT_EINPUT, dir3, 100, 1, 0, "train.bin: record 0 has coarse label 30", "a CIFAR-10 batch?");
    unsetenv("CLTRAIN_CIFAR_MIRROR");
}

static void test_byte_flips_and_cuts(void **state) {
    (void)state;
    char dir[300], p[512];
    fresh_dir(dir, sizeof dir);
    write_c10(dir, 0);
    size_t size;
    int accepted = 0, rejected = 0;
    for (int seed = 1; seed <= 200; seed++) {
        ct_rng r = ct_rng_make((uint64_t)seed, 3, 4);
        int b = (int)ct_rng_below(&r, 6);
        int first = b < 5 ? b * NB : TEST_FIRST;
        uint8_t *buf = make_records(first, NB, 1, &size);
        size_t at = seed % 3 ? ct_rng_below(&r, (uint32_t)size) : ct_rng_below(&r, NB) * REC10; /* a third hit a label */
        uint8_t x = (uint8_t)(1 + ct_rng_below(&r, 255));
        buf[at] ^= x;
        snprintf(p, sizeof p, "%s/%s", dir, batch_names[b]);
        ct_write_file(p, buf, size);
        ct_dataset tr, te;
        int rc = ct_cifar_load(&tr, &te, dir, 10, 0, 0);
        int rec = (int)(at / REC10), off = (int)(at % REC10);
        ct_dataset *ds = b < 5 ? &tr : &te;
        int k = (b < 5 ? b * NB : 0) + rec;
        if (off == 0 && buf[at] >= 10) {
            assert_int_equal(rc, CT_EINPUT);
            char want[64];
            snprintf(want, sizeof want, "%s: record %d has label %u", batch_names[b], rec, buf[at]);
            if (!strstr(ct_last_error(), want)) fail_msg("'%s' lacks '%s'", ct_last_error(), want);
            assert_null(tr.images);
            rejected++;
        } else {
            assert_int_equal(rc, 0);
            if (off == 0) {
                assert_int_equal(ds->labels[k], buf[at]);
            } else {
                int ch = (off - 1) / PLANE, q = (off - 1) % PLANE;
                assert_int_equal(ds->images[(size_t)k * 3072 + q * 3 + ch], px(first + rec, ch, q) ^ x);
            }
            accepted++;
            ct_dataset_free(&tr);
            ct_dataset_free(&te);
        }
        /* repair */
        free(buf);
        write_records(p, first, NB, 1);
    }
    print_message("# byte flips: %d loaded with exactly that byte changed, %d rejected\n", accepted, rejected);
    assert_true(rejected > 0 && accepted > 0);

    for (int seed = 1; seed <= 60; seed++) {
        ct_rng r = ct_rng_make((uint64_t)seed, 5, 6);
        int b = (int)ct_rng_below(&r, 6);
        int first = b < 5 ? b * NB : TEST_FIRST;
        uint8_t *buf = make_records(first, NB, 1, &size);
        /* seeds 1, 2: one or two whole records; 3: empty; others: anywhere */
        size_t cut = seed <= 2 ? (size_t)seed * REC10 : seed == 3 ? 0 : ct_rng_below(&r, (uint32_t)size);
        snprintf(p, sizeof p, "%s/%s", dir, batch_names[b]);
        ct_write_file(p, buf, cut);
        ct_dataset tr, te;
        int rc = ct_cifar_load(&tr, &te, dir, 10, 0, 0);
        if (cut > 0 && cut % REC10 == 0) {
            assert_int_equal(rc, 0);
            assert_int_equal((b < 5 ? tr.n : te.n), (b < 5 ? 4 * NB : 0) + (int)(cut / REC10));
            ct_dataset_free(&tr);
            ct_dataset_free(&te);
        } else {
            assert_int_equal(rc, CT_EINPUT);
            assert_non_null(strstr(ct_last_error(), batch_names[b]));
        }
        free(buf);
        write_records(p, first, NB, 1);
    }
}

/* Offline: CT_ENET, fast, one line saying where to put the files, nothing left behind. */
static void test_download_unreachable(void **state) {
    (void)state;
    char dir[300], sub[400];
    fresh_dir(dir, sizeof dir);
    snprintf(sub, sizeof sub, "%s/cifar10", dir);
    setenv("CLTRAIN_CIFAR_MIRROR", "http://127.0.0.1:9/", 1);
    ct_dataset tr, te;
    double t0 = ct_now();
    int rc = ct_cifar_load(&tr, &te, sub, 10, 0, 1);
    double secs = ct_now() - t0;
    unsetenv("CLTRAIN_CIFAR_MIRROR");
    const char *msg = ct_last_error();
    print_message("# %.2f s: %s\n", secs, msg);
    assert_int_equal(rc, CT_ENET);
    assert_true(secs < 11.0);
    assert_non_null(strstr(msg, "CIFAR-10 is missing and could not be downloaded"));
    assert_non_null(strstr(msg, "127.0.0.1"));
    assert_non_null(strstr(msg, "put cifar-10-binary.tar.gz"));
    assert_non_null(strstr(msg, "cifar-10-batches-bin/"));
    assert_non_null(strstr(msg, sub));
    assert_non_null(strstr(msg, "--data"));
    assert_null(strchr(msg, '\n'));
    assert_true(count_entries(sub) <= 0); /* absent or empty */
    assert_null(tr.images);
    assert_null(te.images);
    /* CIFAR-100 the same way */
    setenv("CLTRAIN_CIFAR_MIRROR", "http://127.0.0.1:9", 1);
    rc = ct_cifar_load(&tr, &te, sub, 100, 1, 1);
    unsetenv("CLTRAIN_CIFAR_MIRROR");
    print_message("# %s\n", ct_last_error());
    assert_int_equal(rc, CT_ENET);
    assert_non_null(strstr(ct_last_error(), "127.0.0.1:9/cifar-100-binary.tar.gz"));
    assert_non_null(strstr(ct_last_error(), "put cifar-100-binary.tar.gz"));
}

/* ---- archives ------------------------------------------------------------ */

typedef struct tarbuf {
    uint8_t *data;
    size_t len, cap;
} tarbuf;

static void tb_put(tarbuf *t, const void *p, size_t n) {
    if (t->len + n > t->cap) {
        t->cap = (t->len + n) * 2 + 4096;
        t->data = realloc(t->data, t->cap);
        assert_non_null(t->data);
    }
    memcpy(t->data + t->len, p, n);
    t->len += n;
}

/* One ustar entry (old GNU format with an atime where POSIX keeps the name
 * prefix, when gnu is set); data may be NULL for size 0. */
static void tb_entry_fmt(tarbuf *t, const char *name, char type, const void *data, size_t size, int gnu) {
    uint8_t h[512] = {0};
    size_t nl = strlen(name);
    assert_true(nl <= 100);
    memcpy(h, name, nl);
    snprintf((char *)h + 100, 8, "%07o", 0644);
    snprintf((char *)h + 108, 8, "%07o", 0);
    snprintf((char *)h + 116, 8, "%07o", 0);
    snprintf((char *)h + 124, 12, "%011lo", (unsigned long)size);
    snprintf((char *)h + 136, 12, "%011o", 0);
    h[156] = (uint8_t)type;
    if (gnu) {
        memcpy(h + 257, "ustar  ", 8);
        snprintf((char *)h + 345, 12, "%011o", 012345670);
    } else {
        memcpy(h + 257, "ustar", 6);
        memcpy(h + 263, "00", 2);
    }
    memset(h + 148, ' ', 8);
    unsigned sum = 0;
    for (int i = 0; i < 512; i++) sum += h[i];
    snprintf((char *)h + 148, 8, "%06o", sum);
    tb_put(t, h, 512);
    if (size) tb_put(t, data, size);
    static const uint8_t zero[512];
    if (size % 512) tb_put(t, zero, 512 - size % 512);
}

static void tb_entry(tarbuf *t, const char *name, char type, const void *data, size_t size) {
    tb_entry_fmt(t, name, type, data, size, 0);
}

static void tb_finish(tarbuf *t, const char *path) {
    static const uint8_t zero[1024];
    tb_put(t, zero, sizeof zero);
    gzFile f = gzopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(gzwrite(f, t->data, (unsigned)t->len), (int)t->len);
    assert_int_equal(gzclose(f), Z_OK);
    free(t->data);
    memset(t, 0, sizeof *t);
}

static void expect_refused(const char *name, char type) {
    char dir[300], arc[400], out[400], evil[512];
    fresh_dir(dir, sizeof dir);
    snprintf(arc, sizeof arc, "%s/evil.tar.gz", dir);
    snprintf(out, sizeof out, "%s/out", dir);
    tarbuf t = {0};
    tb_entry(&t, "ok.txt", '0', "fine", 4);
    tb_entry(&t, name, type, "pwned", 5);
    tb_finish(&t, arc);
    int n = -1;
    assert_int_equal(ct_targz_extract(arc, out, &n), CT_EINPUT);
    const char *msg = ct_last_error();
    print_message("# %s\n", msg);
    assert_non_null(strstr(msg, arc));
    assert_non_null(strstr(msg, name));
    assert_non_null(strstr(msg, "'..'"));
    assert_int_equal(n, 1); /* the entry before it was written */
    snprintf(evil, sizeof evil, "%s/evil", dir);
    assert_false(exists(evil));
}

static void test_tar_refuses_escapes(void **state) {
    (void)state;
    expect_refused("../evil", '0');
    expect_refused("a/../../evil", '0');
    expect_refused("..", '5');
    expect_refused("/tmp/cltrain-evil-absolute", '0');
    assert_false(exists("/tmp/cltrain-evil-absolute"));
}

/* A cifar-10-binary.tar.gz lying in dir is unpacked and loaded, links and pax headers skipped. */
static void test_local_archive(void **state) {
    (void)state;
    char dir[300], stage[400], arc[400], p[512], name[200];
    fresh_dir(dir, sizeof dir);
    fresh_dir(stage, sizeof stage);
    write_c10(stage, 1);
    tarbuf t = {0};
    tb_entry(&t, "cifar-10-batches-bin/", '5', NULL, 0);
    tb_entry(&t, "pax", 'x', "30 path=cifar-10-batches-bin/x\n", 31);
    tb_entry(&t, "cifar-10-batches-bin/link", '2', NULL, 0);
    for (int b = 0; b < 7; b++) {
        const char *f = b < 6 ? batch_names[b] : "batches.meta.txt";
        snprintf(p, sizeof p, "%s/%s", stage, f);
        uint8_t *buf = malloc(NB * REC10 + 1);
        assert_non_null(buf);
        size_t n = read_bytes(p, buf, NB * REC10 + 1);
        snprintf(name, sizeof name, "./cifar-10-batches-bin/%s", f);
        tb_entry_fmt(&t, name, '0', buf, n, b % 2); /* as old GNU tar writes them, for half */
        free(buf);
    }
    /* a GNU long name for an extra file */
    char longname[200];
    memset(longname, 'n', sizeof longname);
    memcpy(longname, "cifar-10-batches-bin/", 21);
    longname[150] = '\0';
    tb_entry(&t, "././@LongLink", 'L', longname, 151);
    tb_entry(&t, "cifar-10-batches-bin/nnnnnnnnn", '0', "long", 4);
    snprintf(arc, sizeof arc, "%s/cifar-10-binary.tar.gz", dir);
    tb_finish(&t, arc);

    ct_dataset tr, te;
    assert_int_equal(ct_cifar_load(&tr, &te, dir, 10, 0, 0), 0);
    check_images(&tr, 5 * NB, train_index);
    check_images(&te, NB, test_index);
    assert_string_equal(tr.class_names[2], "charlie");
    ct_dataset_free(&tr);
    ct_dataset_free(&te);
    snprintf(p, sizeof p, "%s/cifar-10-batches-bin/link", dir);
    assert_false(exists(p));
    snprintf(p, sizeof p, "%s/%s", dir, longname);
    assert_true(exists(p));
    snprintf(p, sizeof p, "%s/cifar-10-batches-bin", dir);
    assert_int_equal(count_entries(p), 8); /* 6 batches, the names, the long-named file */

    /* damaged copies of the archive: an error naming it, or (rarely) the same files; never a crash */
    uint8_t *gz = malloc(1 << 20);
    assert_non_null(gz);
    size_t len = read_bytes(arc, gz, 1 << 20);
    assert_true(len > 100 && len < (1 << 20));
    char bad[400], out[400];
    snprintf(bad, sizeof bad, "%s/bad.tar.gz", dir);
    int failed = 0;
    for (int seed = 1; seed <= 120; seed++) {
        ct_rng r = ct_rng_make((uint64_t)seed, 9, 9);
        uint8_t *copy = malloc(len);
        assert_non_null(copy);
        memcpy(copy, gz, len);
        size_t n = len;
        if (seed % 4 == 0) n = ct_rng_below(&r, (uint32_t)len);
        else copy[ct_rng_below(&r, (uint32_t)len)] ^= (uint8_t)(1 + ct_rng_below(&r, 255));
        ct_write_file(bad, copy, n);
        free(copy);
        snprintf(out, sizeof out, "%s/flip%d", dir, seed);
        int rc = ct_targz_extract(bad, out, NULL);
        if (rc != 0) {
            assert_int_equal(rc, CT_EINPUT);
            assert_non_null(strstr(ct_last_error(), bad));
            failed++;
        }
    }
    print_message("# damaged archives: %d of 120 rejected\n", failed);
    assert_true(failed > 100);
    free(gz);

    /* not an archive at all; a missing one */
    ct_write_file(bad, "hello, world\n", 13);
    assert_int_equal(ct_targz_extract(bad, dir, NULL), CT_EINPUT);
    assert_non_null(strstr(ct_last_error(), "truncated archive"));
    uint8_t junk[1024];
    memset(junk, 'x', sizeof junk);
    ct_write_file(bad, junk, sizeof junk);
    assert_int_equal(ct_targz_extract(bad, dir, NULL), CT_EINPUT);
    assert_non_null(strstr(ct_last_error(), "not a tar archive"));
    snprintf(p, sizeof p, "%s/none.tar.gz", dir);
    assert_int_equal(ct_targz_extract(p, dir, NULL), CT_EINPUT);
    assert_non_null(strstr(ct_last_error(), "No such file"));
    /* an archive without the batches: the load says so */
    char dir2[300];
    fresh_dir(dir2, sizeof dir2);
    snprintf(arc, sizeof arc, "%s/cifar-10-binary.tar.gz", dir2);
    tb_entry(&t, "README", '0', "nothing here", 12);
    tb_finish(&t, arc);
    expect_fail(CT_EINPUT, dir2, 10, 0, 0, "cifar-10-binary.tar.gz; it is not the CIFAR-10 binary version", "missing data_batch_1.bin");
}

static int group_setup(void **state) {
    (void)state;
    return ct_tmp_root_make("cifar");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cifar10_load),
        cmocka_unit_test(test_cifar100_load),
        cmocka_unit_test(test_cifar10_damage),
        cmocka_unit_test(test_wrong_set),
        cmocka_unit_test(test_byte_flips_and_cuts),
        cmocka_unit_test(test_download_unreachable),
        cmocka_unit_test(test_tar_refuses_escapes),
        cmocka_unit_test(test_local_archive),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
