/* test_images.c: image folders, decoding, the decoding source and record
 * shards, on fixtures this test writes with stb_image_write.
 *
 * Solid-colour PNG, JPEG, BMP, TGA and GIF files must decode and resize to
 * their colour (JPEG within a few levels) as 1 and 3 channels, alpha blended
 * onto white, pixels in HWC order. Scanning: classes sorted, hidden and
 * foreign files ignored, unreadable images skipped and counted (or an error
 * with strict), every kind of bad folder one CT_EINPUT line, the val_split
 * split stable, disjoint and complete, DIR/train + DIR/test used as given.
 * The source replaces a file that fails to decode by the next good one, the
 * same way from any number of threads. Shards: what is written reads back
 * exactly; header damage, a damaged record (with its offset), truncation,
 * missing and mixed files are each CT_EINPUT; 2000 random byte flips and
 * cuts are always detected, never a wrong pixel. Damaged files decoders let
 * through (height 0, BMP/TGA shorter than their pixels, JPEG Huffman counts
 * past 256, PNG over the side limit, symlink loops) are refused and named,
 * and so are decompression bombs (a 104-byte GIF declaring 12545x4097, a
 * PNG header declaring more than deflate can carry, over 64 Mpx), while a
 * 4096x4096 1-bit white PNG, as compressed as PNG gets, decodes.
 * Run clean under ASan too. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>
#include "ct_files.h"

#include "cltrain/common.h"
#include "cltrain/datasets.h"
#include "cltrain/images.h"
#include "cltrain/pipeline.h"
#include "cltrain/shard.h"
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#define STB_IMAGE_WRITE_IMPLEMENTATION
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
#pragma GCC diagnostic ignored "-Wsign-compare"
#pragma GCC diagnostic ignored "-Wunused-parameter"
#include <stb/stb_image_write.h>
#pragma GCC diagnostic pop

enum { F_PNG, F_JPG, F_BMP, F_TGA, F_GIF };
static const char *const fmt_ext[] = {"png", "jpg", "bmp", "tga", "gif"};

/* a 1x1 GIF89a whose one pixel is colour 0 of a two-colour table: pure red */
static const uint8_t red_gif[] = {
    'G', 'I', 'F', '8', '9', 'a', 1, 0, 1, 0, 0x80, 0, 0, 0xFF, 0, 0, 0, 0, 0,
    ',', 0, 0, 0, 0, 1, 0, 1, 0, 0, 2, 2, 0x44, 0x01, 0, ';',
};

static void write_image(const char *path, int fmt, int w, int h, int comp, const uint8_t *buf) {
    int ok = 0;
    switch (fmt) {
    case F_PNG: ok = stbi_write_png(path, w, h, comp, buf, w * comp); break;
    case F_JPG: ok = stbi_write_jpg(path, w, h, comp, buf, 95); break;
    case F_BMP: ok = stbi_write_bmp(path, w, h, comp, buf); break;
    case F_TGA: ok = stbi_write_tga(path, w, h, comp, buf); break;
    default: fail_msg("no writer for format %d", fmt);
    }
    assert_true(ok);
}

/* A w x h image of comp channels, every pixel px[0..comp). */
static void write_solid(const char *path, int fmt, int w, int h, int comp, const uint8_t *px) {
    uint8_t *buf = malloc((size_t)w * h * comp);
    assert_non_null(buf);
    for (int i = 0; i < w * h; i++) memcpy(buf + (size_t)i * comp, px, (size_t)comp);
    write_image(path, fmt, w, h, comp, buf);
    free(buf);
}

static void mkdirs(const char *a, const char *b) {
    char p[512];
    snprintf(p, sizeof p, "%s/%s", a, b);
    assert_int_equal(ct_mkdir_p(p), 0);
}

/* the colour of file i of class c in the folder fixtures: unique per (c, i) */
static void file_colour(int c, int i, uint8_t px[3]) {
    px[0] = (uint8_t)(c * 50 + i * 7 + 3);
    px[1] = (uint8_t)(250 - c * 30 - i);
    px[2] = (uint8_t)(c * 40 + 11);
}

/* root/cls/i<k>.<ext> for k in 0..n-1, 8x8, lossless formats in turn */
static void make_class(const char *root, const char *cls, int c, int n) {
    mkdirs(root, cls);
    char p[600];
    for (int k = 0; k < n; k++) {
        int fmt = (int[]){F_PNG, F_BMP, F_TGA}[k % 3];
        uint8_t px[3];
        file_colour(c, k, px);
        snprintf(p, sizeof p, "%s/%s/i%d.%s", root, cls, k, fmt_ext[fmt]);
        write_solid(p, fmt, 8, 8, 3, px);
    }
}

/* A PNG of noise cut to half its size, its IDAT's length cut to match (so
 * every chunk fits in the file): the header check and stbi_info pass, the
 * decode fails. */
static void write_truncated_png(const char *path) {
    uint8_t buf[32 * 32 * 3];
    ct_rng r = ct_rng_make(5, 6, 7);
    for (size_t i = 0; i < sizeof buf; i++) buf[i] = (uint8_t)ct_rng_next(&r);
    write_image(path, F_PNG, 32, 32, 3, buf);
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    size_t n = (size_t)st.st_size / 2, idat = 8 + 25; /* signature, IHDR chunk */
    assert_int_equal(truncate(path, (off_t)n), 0);
    FILE *f = fopen(path, "r+b");
    assert_non_null(f);
    uint8_t hd[8];
    assert_int_equal(fseek(f, (long)idat, SEEK_SET), 0);
    assert_int_equal(fread(hd, 1, 8, f), 8);
    assert_memory_equal(hd + 4, "IDAT", 4);
    uint32_t len = (uint32_t)(n - idat - 12);
    uint8_t be[4] = {(uint8_t)(len >> 24), (uint8_t)(len >> 16), (uint8_t)(len >> 8), (uint8_t)len};
    assert_int_equal(fseek(f, (long)idat, SEEK_SET), 0);
    assert_int_equal(fwrite(be, 1, 4, f), 4);
    fclose(f);
}

static void expect_msg(int rc, int want, const char *w1, const char *w2) {
    const char *msg = ct_last_error();
    print_message("# %s\n", msg);
    assert_int_equal(rc, want);
    if (w1 && !strstr(msg, w1)) fail_msg("message '%s' lacks '%s'", msg, w1);
    if (w2 && !strstr(msg, w2)) fail_msg("message '%s' lacks '%s'", msg, w2);
    assert_null(strchr(msg, '\n'));
}

static void all_near(const uint8_t *out, int n, int comp, const int *want, int tol, const char *what) {
    for (int i = 0; i < n; i++)
        for (int k = 0; k < comp; k++)
            if (abs(out[i * comp + k] - want[k]) > tol)
                fail_msg("%s: pixel %d channel %d is %d, want %d +- %d", what, i, k, out[i * comp + k], want[k], tol);
}

/* ---- decoding ------------------------------------------------------------ */

static void test_decode_formats(void **state) {
    (void)state;
    char dir[300], p[400];
    fresh_dir(dir, sizeof dir);
    const uint8_t col[3] = {200, 100, 50};
    const int rgb[3] = {200, 100, 50}, y[1] = {(200 * 77 + 100 * 150 + 50 * 29) >> 8};
    uint8_t out[16 * 16 * 3];
    for (int fmt = F_PNG; fmt <= F_TGA; fmt++) {
        int tol = fmt == F_JPG ? 6 : 1;
        /* down (20x12 -> 8x8) and up (3x5 -> 16x16) */
        for (int up = 0; up < 2; up++) {
            snprintf(p, sizeof p, "%s/solid%d.%s", dir, up, fmt_ext[fmt]);
            write_solid(p, fmt, up ? 3 : 20, up ? 5 : 12, 3, col);
            int s = up ? 16 : 8;
            assert_int_equal(ct_image_decode(p, s, 3, out), 0);
            all_near(out, s * s, 3, rgb, tol, p);
            assert_int_equal(ct_image_decode(p, s, 1, out), 0);
            all_near(out, s * s, 1, y, tol, p);
        }
    }
    snprintf(p, sizeof p, "%s/red.gif", dir);
    ct_write_file(p, red_gif, sizeof red_gif);
    assert_int_equal(ct_image_decode(p, 4, 3, out), 0);
    all_near(out, 16, 3, (int[]){255, 0, 0}, 0, "red.gif");
    assert_int_equal(ct_image_decode(p, 4, 1, out), 0);
    all_near(out, 16, 1, (int[]){(255 * 77) >> 8}, 0, "red.gif as luminance");
    /* a grey PNG as RGB: replicated */
    snprintf(p, sizeof p, "%s/grey.png", dir);
    write_solid(p, F_PNG, 6, 6, 1, (uint8_t[]){77});
    assert_int_equal(ct_image_decode(p, 6, 3, out), 0);
    all_near(out, 36, 3, (int[]){77, 77, 77}, 0, "grey.png");
}

static void test_decode_alpha_and_layout(void **state) {
    (void)state;
    char dir[300], p[400];
    fresh_dir(dir, sizeof dir);
    uint8_t out[16 * 16 * 3];
    struct { uint8_t px[4]; int rgb[3]; } cases[] = {
        {{0, 0, 0, 0}, {255, 255, 255}},      /* fully transparent: white */
        {{0, 0, 0, 128}, {127, 127, 127}},    /* half-transparent black: mid grey */
        {{10, 200, 30, 255}, {10, 200, 30}},  /* opaque: as is */
    };
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
        snprintf(p, sizeof p, "%s/rgba%zu.png", dir, k);
        write_solid(p, F_PNG, 4, 4, 4, cases[k].px);
        assert_int_equal(ct_image_decode(p, 4, 3, out), 0);
        all_near(out, 16, 3, cases[k].rgb, 0, p);
    }
    snprintf(p, sizeof p, "%s/ga.png", dir); /* grey + alpha */
    write_solid(p, F_PNG, 4, 4, 2, (uint8_t[]){0, 0});
    assert_int_equal(ct_image_decode(p, 4, 1, out), 0);
    all_near(out, 16, 1, (int[]){255}, 0, "ga.png");
    /* HWC: R grows along x, G along y, at the file's own size (no resampling) */
    uint8_t img[16 * 16 * 3];
    for (int yy = 0; yy < 16; yy++)
        for (int x = 0; x < 16; x++) {
            img[(yy * 16 + x) * 3] = (uint8_t)(x * 16);
            img[(yy * 16 + x) * 3 + 1] = (uint8_t)(yy * 16);
            img[(yy * 16 + x) * 3 + 2] = 7;
        }
    snprintf(p, sizeof p, "%s/ramp.png", dir);
    write_image(p, F_PNG, 16, 16, 3, img);
    assert_int_equal(ct_image_decode(p, 16, 3, out), 0);
    assert_memory_equal(out, img, sizeof img);
    /* a wide image squeezed to a square keeps left dark, right bright */
    uint8_t wide[32 * 8];
    for (int yy = 0; yy < 8; yy++)
        for (int x = 0; x < 32; x++) wide[yy * 32 + x] = x < 16 ? 0 : 255;
    snprintf(p, sizeof p, "%s/wide.png", dir);
    write_image(p, F_PNG, 32, 8, 1, wide);
    assert_int_equal(ct_image_decode(p, 8, 1, out), 0);
    for (int yy = 0; yy < 8; yy++) {
        assert_true(out[yy * 8 + 0] < 10 && out[yy * 8 + 1] < 10);
        assert_true(out[yy * 8 + 6] > 245 && out[yy * 8 + 7] > 245);
    }
    /* errors name the file */
    snprintf(p, sizeof p, "%s/missing.png", dir);
    expect_msg(ct_image_decode(p, 8, 3, out), CT_EINPUT, "missing.png: No such file", NULL);
    snprintf(p, sizeof p, "%s/text.png", dir);
    ct_write_file(p, "not an image at all\n", 20);
    expect_msg(ct_image_decode(p, 8, 3, out), CT_EINPUT, "text.png: ", NULL);
    snprintf(p, sizeof p, "%s/trunc.png", dir);
    write_truncated_png(p);
    expect_msg(ct_image_decode(p, 8, 3, out), CT_EINPUT, "trunc.png: ", NULL);
}

/* ---- scanning ------------------------------------------------------------ */

static int find(const ct_imgdir_split *s, const char *path) {
    for (int i = 0; i < s->n; i++)
        if (!strcmp(s->paths[i], path)) return i;
    return -1;
}

/* every file of both splits once, labels matching the folder, each split sorted within a class */
static void check_cover(const ct_imgdir *d, int total) {
    assert_int_equal(d->split[0].n + d->split[1].n, total);
    for (int s = 0; s < 2; s++) {
        const ct_imgdir_split *sp = &d->split[s];
        for (int i = 0; i < sp->n; i++) {
            char want[300];
            snprintf(want, sizeof want, "/%s/", d->class_names[sp->labels[i]]);
            if (!strstr(sp->paths[i], want)) fail_msg("%s is not in class %s", sp->paths[i], want);
            assert_int_equal(find(&d->split[1 - s], sp->paths[i]), -1);
            assert_int_equal(find(sp, sp->paths[i]), i);
            if (i > 0) {
                assert_true(sp->labels[i] >= sp->labels[i - 1]);
                if (sp->labels[i] == sp->labels[i - 1]) assert_true(strcmp(sp->paths[i - 1], sp->paths[i]) < 0);
            }
        }
    }
}

static int same_split(const ct_imgdir_split *a, const ct_imgdir_split *b) {
    if (a->n != b->n) return 0;
    for (int i = 0; i < a->n; i++)
        if (strcmp(a->paths[i], b->paths[i]) || a->labels[i] != b->labels[i]) return 0;
    return 1;
}

static int count_class(const ct_imgdir_split *s, int c) {
    int n = 0;
    for (int i = 0; i < s->n; i++) n += s->labels[i] == c;
    return n;
}

static void test_scan_val_split(void **state) {
    (void)state;
    char root[300], p[600];
    fresh_dir(root, sizeof root);
    make_class(root, "emu", 2, 10);
    make_class(root, "cat", 0, 10);
    make_class(root, "dog", 1, 10);
    /* ignored: foreign files, hidden files and folders, nested folders */
    snprintf(p, sizeof p, "%s/notes.txt", root);
    ct_write_file(p, "hello", 5);
    snprintf(p, sizeof p, "%s/cat/readme.txt", root);
    ct_write_file(p, "hello", 5);
    snprintf(p, sizeof p, "%s/cat/.hidden.png", root);
    write_solid(p, F_PNG, 4, 4, 3, (uint8_t[]){1, 2, 3});
    make_class(root, ".cache", 0, 2);
    make_class(root, "cat/nested", 0, 2);
    snprintf(p, sizeof p, "%s/cat/UPPER.PNG", root); /* extensions in any case */
    write_solid(p, F_PNG, 4, 4, 3, (uint8_t[]){1, 2, 3});

    ct_imgdir d, d2;
    assert_int_equal(ct_imgdir_scan(&d, root, 0.2, 7, 0), 0);
    assert_int_equal(d.n_classes, 3);
    assert_string_equal(d.class_names[0], "cat");
    assert_string_equal(d.class_names[1], "dog");
    assert_string_equal(d.class_names[2], "emu");
    assert_int_equal(d.skipped, 0);
    assert_int_equal(d.folders, 0);
    check_cover(&d, 31);
    /* round(0.2 * 11) = 2, round(0.2 * 10) = 2 */
    for (int c = 0; c < 3; c++) assert_int_equal(count_class(&d.split[1], c), 2);
    snprintf(p, sizeof p, "%s/cat/UPPER.PNG", root);
    assert_true(find(&d.split[0], p) >= 0 || find(&d.split[1], p) >= 0);
    /* the same seed gives the same split; another seed another */
    assert_int_equal(ct_imgdir_scan(&d2, root, 0.2, 7, 0), 0);
    assert_true(same_split(&d.split[0], &d2.split[0]) && same_split(&d.split[1], &d2.split[1]));
    ct_imgdir_free(&d2);
    assert_int_equal(ct_imgdir_scan(&d2, root, 0.2, 8, 0), 0);
    assert_false(same_split(&d.split[1], &d2.split[1]));
    check_cover(&d2, 31);
    ct_imgdir_free(&d2);
    /* a new file in dog leaves cat's and emu's split alone */
    snprintf(p, sizeof p, "%s/dog/new.png", root);
    write_solid(p, F_PNG, 4, 4, 3, (uint8_t[]){9, 9, 9});
    assert_int_equal(ct_imgdir_scan(&d2, root, 0.2, 7, 0), 0);
    check_cover(&d2, 32);
    for (int i = 0; i < d.split[1].n; i++)
        if (d.split[1].labels[i] != 1) assert_true(find(&d2.split[1], d.split[1].paths[i]) >= 0);
    ct_imgdir_free(&d2);
    /* no test split at 0; at 0.99 every class keeps one training image */
    assert_int_equal(ct_imgdir_scan(&d2, root, 0, 7, 0), 0);
    assert_int_equal(d2.split[1].n, 0);
    assert_int_equal(d2.split[0].n, 32);
    ct_imgdir_free(&d2);
    assert_int_equal(ct_imgdir_scan(&d2, root, 0.99, 7, 0), 0);
    for (int c = 0; c < 3; c++) assert_int_equal(count_class(&d2.split[0], c), 1);
    ct_imgdir_free(&d2);
    expect_msg(ct_imgdir_scan(&d2, root, 1.0, 7, 0), CT_EINPUT, "0 <= F < 1", NULL);
    expect_msg(ct_imgdir_scan(&d2, root, -0.1, 7, 0), CT_EINPUT, "0 <= F < 1", NULL);
    ct_imgdir_free(&d);
    ct_imgdir_free(&d); /* twice is safe */
}

static void test_scan_train_test_folders(void **state) {
    (void)state;
    char root[300], tr[400], te[400];
    fresh_dir(root, sizeof root);
    snprintf(tr, sizeof tr, "%s/train", root);
    snprintf(te, sizeof te, "%s/test", root);
    make_class(tr, "a", 0, 5);
    make_class(tr, "b", 1, 4);
    make_class(te, "a", 0, 2);
    make_class(te, "b", 1, 3);
    ct_imgdir d;
    assert_int_equal(ct_imgdir_scan(&d, root, 0.5, 1, 0), 0);
    assert_int_equal(d.folders, 1);
    assert_int_equal(d.n_classes, 2);
    assert_int_equal(d.split[0].n, 9);
    assert_int_equal(d.split[1].n, 5);
    check_cover(&d, 14);
    for (int i = 0; i < d.split[1].n; i++) assert_non_null(strstr(d.split[1].paths[i], "/test/"));
    for (int i = 0; i < d.split[0].n; i++) assert_non_null(strstr(d.split[0].paths[i], "/train/"));
    ct_imgdir_free(&d);
    /* class lists differ */
    make_class(te, "c", 1, 1);
    expect_msg(ct_imgdir_scan(&d, root, 0.1, 1, 0), CT_EINPUT, "'c' is only in test/", NULL);
    assert_null(d.class_names);
    /* only train/ */
    char root2[300], tr2[400];
    fresh_dir(root2, sizeof root2);
    snprintf(tr2, sizeof tr2, "%s/train", root2);
    make_class(tr2, "a", 0, 2);
    make_class(tr2, "b", 0, 2);
    expect_msg(ct_imgdir_scan(&d, root2, 0.1, 1, 0), CT_EINPUT, "has train/ but no test/", NULL);
}

static void test_scan_errors(void **state) {
    (void)state;
    char root[300], p[600];
    ct_imgdir d;
    fresh_dir(root, sizeof root);
    snprintf(p, sizeof p, "%s/nowhere", root);
    expect_msg(ct_imgdir_scan(&d, p, 0.1, 1, 0), CT_EINPUT, "nowhere: No such file", "one sub-folder");
    assert_int_equal(d.n_classes, 0);
    snprintf(p, sizeof p, "%s/file", root);
    ct_write_file(p, "x", 1);
    expect_msg(ct_imgdir_scan(&d, p, 0.1, 1, 0), CT_EINPUT, "file: not a folder", NULL);
    /* an empty folder; images lying directly in it do not make classes */
    fresh_dir(root, sizeof root);
    snprintf(p, sizeof p, "%s/loose.png", root);
    write_solid(p, F_PNG, 4, 4, 3, (uint8_t[]){1, 2, 3});
    expect_msg(ct_imgdir_scan(&d, root, 0.1, 1, 0), CT_EINPUT, "no class sub-folders", NULL);
    make_class(root, "solo", 0, 3);
    expect_msg(ct_imgdir_scan(&d, root, 0.1, 1, 0), CT_EINPUT, "only one class folder (solo)", NULL);
    mkdirs(root, "vacant");
    expect_msg(ct_imgdir_scan(&d, root, 0.1, 1, 0), CT_EINPUT, "/vacant: class folder has no readable images", NULL);
    fresh_dir(root, sizeof root);
    mkdirs(root, "a");
    mkdirs(root, "b");
    snprintf(p, sizeof p, "%s/a/x.txt", root);
    ct_write_file(p, "x", 1);
    expect_msg(ct_imgdir_scan(&d, root, 0.1, 1, 0), CT_EINPUT, "no images in any class folder", NULL);
    assert_null(d.class_names);
    assert_int_equal(d.split[0].n, 0);
}

static void test_scan_skip_and_strict(void **state) {
    (void)state;
    char root[300], p[600];
    fresh_dir(root, sizeof root);
    make_class(root, "a", 0, 3);
    make_class(root, "b", 1, 3);
    snprintf(p, sizeof p, "%s/a/fake.png", root);
    ct_write_file(p, "this is text, not a PNG\n", 24);
    snprintf(p, sizeof p, "%s/a/short.jpg", root);
    ct_write_file(p, "\xff\xd8\xff", 3);
    snprintf(p, sizeof p, "%s/b/trunc.png", root); /* passes the header check */
    write_truncated_png(p);
    ct_imgdir d;
    assert_int_equal(ct_imgdir_scan(&d, root, 0, 1, 0), 0);
    assert_int_equal(d.skipped, 2);
    assert_int_equal(d.split[0].n, 7);
    assert_true(find(&d.split[0], p) >= 0);
    ct_imgdir_free(&d);
    expect_msg(ct_imgdir_scan(&d, root, 0, 1, 1), CT_EINPUT, "a/fake.png: not a readable image", "--strict");
    assert_int_equal(d.split[0].n, 0);
    /* a class whose only files are unreadable has no images */
    snprintf(p, sizeof p, "%s/c", root);
    mkdirs(root, "c");
    snprintf(p, sizeof p, "%s/c/bad.bmp", root);
    ct_write_file(p, "BM", 2);
    expect_msg(ct_imgdir_scan(&d, root, 0, 1, 0), CT_EINPUT, "/c: class folder has no readable images", NULL);
}

/* ---- damaged files that decoders let through ----------------------------- */

/* the 54-byte BMP of height 0 that made stb_image_resize abort */
static const uint8_t bmp_h0[] = {
    0x42, 0x4d, 0x36, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x36, 0x00, 0x00, 0x00, 0x28, 0x00, 0x00, 0x00,
    0x05, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x00, 0x18, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x13, 0x0b, 0x00, 0x00, 0x13, 0x0b, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
};

static void *slurp(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    *n = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    void *b = malloc(*n + 4096);
    assert_int_equal(fread(b, 1, *n, f), *n);
    fclose(f);
    return b;
}

/* A real JPEG with a DHT segment spliced in after SOI whose 16 counts add up
 * to 4080 codes (at most 256 fit): stb 2.27 wrote past its tables on this. */
static void write_bad_dht_jpeg(const char *path, const char *tmp) {
    uint8_t px[3] = {10, 200, 30};
    write_solid(tmp, F_JPG, 16, 16, 3, px);
    size_t n;
    uint8_t *j = slurp(tmp, &n);
    enum { SYMS = 300 };
    uint8_t seg[4 + 17 + SYMS];
    seg[0] = 0xFF, seg[1] = 0xC4, seg[2] = (uint8_t)((sizeof seg - 2) >> 8), seg[3] = (uint8_t)(sizeof seg - 2);
    seg[4] = 0x00; /* DC table 0 */
    memset(seg + 5, 255, 16);
    for (int i = 0; i < SYMS; i++) seg[21 + i] = (uint8_t)i;
    uint8_t *out = malloc(n + sizeof seg);
    memcpy(out, j, 2);
    memcpy(out + 2, seg, sizeof seg);
    memcpy(out + 2 + sizeof seg, j + 2, n - 2);
    ct_write_file(path, out, n + sizeof seg);
    free(out);
    free(j);
}

/* a 183-byte RLE TGA declaring 4112x4112 (it "decoded" in 1.2 s, mostly zeros) */
static void write_short_tga(const char *path) {
    uint8_t t[183];
    memset(t, 0, sizeof t);
    t[2] = 10;                      /* RLE true-colour */
    t[12] = 0x10, t[13] = 0x10;     /* width 4112 */
    t[14] = 0x10, t[15] = 0x10;     /* height 4112 */
    t[16] = 24;
    for (size_t i = 18; i + 4 <= sizeof t; i += 4) t[i] = 0xFF; /* 128-pixel runs */
    ct_write_file(path, t, sizeof t);
}

/* a PNG header declaring 20000 x 8 (its data does not matter: the size is refused first) */
static void write_wide_png(const char *path) {
    uint8_t p[33] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n', 0, 0, 0, 13, 'I', 'H', 'D', 'R',
                     0, 0, 0x4e, 0x20, 0, 0, 0, 8, 8, 2, 0, 0, 0, 0, 0, 0, 0};
    ct_write_file(path, p, sizeof p);
}

static void test_decode_damaged(void **state) {
    (void)state;
    char root[300], p[600], q[600];
    fresh_dir(root, sizeof root);
    uint8_t out[8 * 8 * 3];
    snprintf(p, sizeof p, "%s/h0.bmp", root);
    ct_write_file(p, bmp_h0, sizeof bmp_h0);
    expect_msg(ct_image_decode(p, 8, 3, out), CT_EINPUT, "h0.bmp: width or height 0", NULL);
    snprintf(p, sizeof p, "%s/dht.jpg", root);
    snprintf(q, sizeof q, "%s/good.jpg", root);
    write_bad_dht_jpeg(p, q);
    assert_int_equal(ct_image_decode(q, 8, 3, out), 0);
    expect_msg(ct_image_decode(p, 8, 3, out), CT_EINPUT, "dht.jpg: corrupt JPEG Huffman table", NULL);
    snprintf(p, sizeof p, "%s/short.tga", root);
    write_short_tga(p);
    double t0 = ct_now();
    expect_msg(ct_image_decode(p, 8, 3, out), CT_EINPUT, "short.tga: truncated", NULL);
    assert_true(ct_now() - t0 < 0.1);
    /* BMP and TGA cut anywhere in their pixels: truncated, not zero-filled */
    uint8_t px[3] = {1, 2, 3};
    for (int fmt = F_BMP; fmt <= F_TGA; fmt++) {
        snprintf(p, sizeof p, "%s/cut.%s", root, fmt_ext[fmt]);
        write_solid(p, fmt, 40, 30, 3, px);
        assert_int_equal(ct_image_decode(p, 8, 3, out), 0);
        struct stat st;
        assert_int_equal(stat(p, &st), 0);
        for (off_t cut = st.st_size - 1; cut > 54; cut -= 397) {
            assert_int_equal(truncate(p, cut), 0);
            expect_msg(ct_image_decode(p, 8, 3, out), CT_EINPUT, "truncated", NULL);
        }
    }
    snprintf(p, sizeof p, "%s/wide.png", root);
    write_wide_png(p);
    expect_msg(ct_image_decode(p, 8, 3, out), CT_EINPUT, "wide.png: larger than 16384 pixels a side", NULL);
}

/* A 104-byte GIF declaring a 12545x4097 canvas around a 1x1 frame (the image
 * fuzzer's find): stb decoded and resized 200 MB for it, over 10 s. */
static const uint8_t gif_bomb[104] = {
    'G', 'I', 'F', '8', '9', 'a', 0x01, 0x31, 0x01, 0x10, 0x80, 0, 0, 0, 0, 0, 0xFF, 0xFF, 0xFF,
    ',', 0, 0, 0, 0, 1, 0, 1, 0, 0, 2, 2, 0x44, 0x01, 0, 0x21, 0xFE, 65,
    'c', 'c', 'c', 'c', 'c', 'c', 'c', 'c', 'c', 'c', 'c', 'c', 'c', 'c', 'c', 'c', 'c', 'c', 'c', 'c', 'c',
    'c', 'c', 'c', 'c', 'c', 'c', 'c', 'c', 'c', 'c', 'c', 'c', 'c', 'c', 'c', 'c', 'c', 'c', 'c', 'c', 'c',
    'c', 'c', 'c', 'c', 'c', 'c', 'c', 'c', 'c', 'c', 'c', 'c', 'c', 'c', 'c', 'c', 'c', 'c', 'c', 'c', 'c',
    'c', 'c', 0, ';',
};

static void png_chunk(FILE *f, const char *type, const uint8_t *data, uint32_t n) {
    uint8_t be[4] = {(uint8_t)(n >> 24), (uint8_t)(n >> 16), (uint8_t)(n >> 8), (uint8_t)n};
    fwrite(be, 1, 4, f);
    fwrite(type, 1, 4, f);
    if (n) fwrite(data, 1, n, f);
    uLong c = crc32(crc32(0, (const Bytef *)type, 4), data, n);
    uint8_t cb[4] = {(uint8_t)(c >> 24), (uint8_t)(c >> 16), (uint8_t)(c >> 8), (uint8_t)c};
    fwrite(cb, 1, 4, f);
}

/* A w x h 1-bit grey PNG, every pixel white, deflated at level 9: as many
 * pixels per byte as a real PNG gets (the check must let it through); with
 * empty_idat an empty IDAT chunk before the data (legal PNG).
 * Returns the file's size. */
static size_t write_solid_1bit_png_e(const char *path, uint32_t w, uint32_t h, int empty_idat);
static size_t write_solid_1bit_png(const char *path, uint32_t w, uint32_t h) {
    return write_solid_1bit_png_e(path, w, h, 0);
}
static size_t write_solid_1bit_png_e(const char *path, uint32_t w, uint32_t h, int empty_idat) {
    size_t row = 1 + (w + 7) / 8, raw_n = row * h;
    uint8_t *raw = malloc(raw_n);
    for (size_t y = 0; y < h; y++) {
        raw[y * row] = 0;
        memset(raw + y * row + 1, 0xFF, row - 1);
    }
    uLongf z_n = compressBound((uLong)raw_n);
    uint8_t *z = malloc(z_n);
    assert_int_equal(compress2(z, &z_n, raw, (uLong)raw_n, 9), Z_OK);
    uint8_t ihdr[13] = {(uint8_t)(w >> 24), (uint8_t)(w >> 16), (uint8_t)(w >> 8), (uint8_t)w,
                        (uint8_t)(h >> 24), (uint8_t)(h >> 16), (uint8_t)(h >> 8), (uint8_t)h, 1, 0, 0, 0, 0};
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    fwrite("\x89PNG\r\n\x1a\n", 1, 8, f);
    png_chunk(f, "IHDR", ihdr, 13);
    if (empty_idat) png_chunk(f, "IDAT", NULL, 0);
    png_chunk(f, "IDAT", z, (uint32_t)z_n);
    png_chunk(f, "IEND", NULL, 0);
    size_t n = (size_t)ftell(f);
    fclose(f);
    free(raw);
    free(z);
    return n;
}

/* Decompression bombs are refused from their header in no time, naming the
 * file, in the scan too; the most compressed real files still decode. */
static void test_decode_bombs(void **state) {
    (void)state;
    char root[300], p[600];
    fresh_dir(root, sizeof root);
    uint8_t out[8 * 8 * 3];
    snprintf(p, sizeof p, "%s/bomb.gif", root);
    ct_write_file(p, gif_bomb, sizeof gif_bomb);
    double t0 = ct_now();
    expect_msg(ct_image_decode(p, 8, 3, out), CT_EINPUT, "bomb.gif: declares 12545x4097 pixels in 104 bytes",
               "decompression bomb");
    assert_true(ct_now() - t0 < 0.1);
    int w, h;
    const char *why = NULL;
    assert_int_equal(ct_image_probe_mem(gif_bomb, sizeof gif_bomb, &w, &h, &why), 0);
    assert_non_null(strstr(why, "more than GIF's compression can carry"));
    /* the same canvas with 1 Mpx less height is within the canvas allowance: it decodes (white background) */
    uint8_t gif[sizeof red_gif];
    memcpy(gif, red_gif, sizeof gif);
    gif[6] = 0, gif[7] = 4, gif[8] = 0, gif[9] = 4; /* a 1024x1024 canvas around the 1x1 frame */
    assert_int_equal(ct_image_probe_mem(gif, sizeof gif, &w, &h, &why), 1);
    assert_int_equal(w, 1024);
    /* PNG at its best ratio: 4096 x 4096 white pixels of 1 bit, deflated */
    snprintf(p, sizeof p, "%s/white.png", root);
    size_t n = write_solid_1bit_png(p, 4096, 4096);
    print_message("# a 4096x4096 1-bit white PNG: %zu bytes, %.0f pixels per byte (the check allows %d)\n", n,
                  4096.0 * 4096 / (double)n, 8 * 1032);
    assert_int_equal(ct_image_decode(p, 8, 1, out), 0);
    for (int i = 0; i < 64; i++) assert_int_equal(out[i], 255);
    /* its header declaring 16384 x 4096 (the same bytes could not hold it) */
    size_t len;
    uint8_t *png = slurp(p, &len);
    png[16 + 2] = 0x40; /* width 0x4000 */
    why = NULL;
    assert_int_equal(ct_image_probe_mem(png, len, &w, &h, &why), 0);
    print_message("# %s\n", why);
    assert_non_null(strstr(why, "declares 16384x4096 pixels in"));
    free(png);
    /* over the absolute cap: 8192 x 8193 */
    snprintf(p, sizeof p, "%s/huge.png", root);
    write_wide_png(p);
    png = slurp(p, &len);
    png[16] = 0, png[17] = 0, png[18] = 0x20, png[19] = 0;  /* width 8192 */
    png[20] = 0, png[21] = 0, png[22] = 0x20, png[23] = 1;  /* height 8193 */
    ct_write_file(p, png, len);
    free(png);
    expect_msg(ct_image_decode(p, 8, 3, out), CT_EINPUT, "huge.png: 8192x8193 = 67117056 pixels, more than the 67108864 (64 Mpx)", NULL);
    /* the scan skips the bomb by name */
    make_class(root, "a", 0, 2);
    make_class(root, "b", 1, 2);
    snprintf(p, sizeof p, "%s/b/bomb.gif", root);
    ct_write_file(p, gif_bomb, sizeof gif_bomb);
    ct_imgdir d;
    expect_msg(ct_imgdir_scan(&d, root, 0, 1, 1), CT_EINPUT, "b/bomb.gif: not a readable image (declares 12545x4097", NULL);
}

/* An empty IDAT before the image data is legal PNG; stb would compute NULL +
 * 0 on it (undefined behaviour, found by the image fuzzer). Such a file is
 * decoded from a copy without its empty IDATs: same pixels, no UB. */
static void test_png_empty_idat(void **state) {
    (void)state;
    char root[300], p[600], q[600];
    fresh_dir(root, sizeof root);
    snprintf(p, sizeof p, "%s/e.png", root);
    snprintf(q, sizeof q, "%s/plain.png", root);
    size_t n = write_solid_1bit_png_e(p, 9, 5, 1), n0 = write_solid_1bit_png(q, 9, 5);
    assert_int_equal(n, n0 + 12);
    size_t len, len0, m = 0;
    uint8_t *png = slurp(p, &len), *plain = slurp(q, &len0);
    uint8_t *c = ct_png_without_empty_idat(png, len, &m);
    assert_non_null(c);
    assert_int_equal(m, len0);
    assert_memory_equal(c, plain, len0);
    assert_null(ct_png_without_empty_idat(plain, len0, &m));
    uint8_t out[8 * 8];
    memset(out, 0, sizeof out);
    assert_int_equal(ct_image_decode(p, 8, 1, out), 0);
    for (int i = 0; i < 64; i++) assert_int_equal(out[i], 255);
    free(c);
    /* the fuzzer's input: IHDR, an empty IDAT, then garbage: the copy drops
     * the IDAT and keeps the garbage, which the decoder refuses */
    static const uint8_t found[] = {
        0x89, 0x50, 0x4e, 0x47, 0xd, 0xa, 0x1a, 0xa, 0x0, 0x0, 0x0, 0xd, 0x49, 0x48, 0x44, 0x52, 0x0, 0x0, 0x0, 0x2,
        0x0, 0x0, 0x0, 0x1, 0x8, 0x4, 0x0, 0x0, 0x0, 0x46, 0x0, 0x0, 0x0, 0x0, 0x0, 0x0, 0x0, 0x49, 0x44, 0x41, 0x54,
        0x78, 0x9c, 0x47, 0xd, 0xa, 0x1a, 0xa, 0x0, 0x0, 0x0, 0xd, 0x49, 0x48, 0x44, 0x52, 0x0, 0x0, 0x0, 0x2, 0x0,
        0x0, 0x49, 0x45, 0x4e, 0x44, 0xae, 0x42, 0x60, 0x82};
    c = ct_png_without_empty_idat(found, sizeof found, &m);
    assert_non_null(c);
    assert_int_equal(m, sizeof found - 12);
    assert_int_equal(ct_image_decode_mem(found, sizeof found, "found.png", 8, 1, out), CT_EINPUT);
    free(c);
    /* and one ending in an empty IDAT whose CRC is cut (stb acts on it without the CRC) */
    static const uint8_t cut[] = {0x89, 0x50, 0x4e, 0x47, 0xd, 0xa, 0x1a, 0xa, 0x0, 0x0, 0x0, 0xd, 0x49, 0x48,
                                  0x44, 0x52, 0x0, 0x0, 0x0, 0x2, 0x0, 0x0, 0x0, 0x1, 0x8, 0x4, 0x0, 0x0,
                                  0x0, 0x5e, 0x2b, 0xb7, 0x1, 0x0, 0x0, 0x0, 0x0, 0x49, 0x44, 0x41, 0x54, 0x42, 0x60, 0x82};
    c = ct_png_without_empty_idat(cut, sizeof cut, &m);
    assert_non_null(c);
    assert_int_equal(m, sizeof cut - 11);
    assert_int_equal(ct_image_decode_mem(cut, sizeof cut, "cut.png", 8, 1, out), CT_EINPUT);
    free(c);
    free(png);
    free(plain);
}

/* A PNG chunk longer than the file (the scan fuzzer's 114-byte input begins
 * so: a 2x1 IHDR, then an IDAT declaring 1,869,968,397 bytes, for which stb
 * reserved 2 GiB) is refused by the header check, so the scan skips it and
 * decoding says truncated; so is a PNG merely cut short. */
static void test_png_chunk_past_end(void **state) {
    (void)state;
    static const uint8_t big[] = {0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x48,
                                  0x44, 0x52, 0x00, 0x00, 0x00, 0x02, 0x00, 0x00, 0x00, 0x01, 0x08, 0x04, 0x00, 0x00,
                                  0x00, 0x5e, 0x2b, 0xb7, 0x01, 0x6f, 0x75, 0x74, 0x0d, 0x49, 0x44, 0x41, 0x54, 0x78,
                                  0x9c, 0x00, 0x00, 0x00, 0xca, 0xf1};
    const char *why = NULL;
    assert_int_equal(ct_image_header_check(big, sizeof big, CT_IMG_PNG, &why), 0);
    print_message("# %s\n", why);
    assert_non_null(strstr(why, "truncated: a chunk at byte 33 declares 1869968397 bytes"));
    uint8_t out[8 * 8 * 3];
    expect_msg(ct_image_decode_mem(big, sizeof big, "big.png", 8, 3, out), CT_EINPUT, "big.png: truncated", NULL);
    /* a PNG cut to half its size, chunk lengths as they were */
    char root[300], p[600];
    fresh_dir(root, sizeof root);
    make_class(root, "a", 0, 2);
    make_class(root, "b", 1, 2);
    uint8_t noise[16 * 16 * 3];
    ct_rng r = ct_rng_make(8, 9, 10);
    for (size_t i = 0; i < sizeof noise; i++) noise[i] = (uint8_t)ct_rng_next(&r);
    snprintf(p, sizeof p, "%s/b/cut.png", root);
    write_image(p, F_PNG, 16, 16, 3, noise);
    struct stat st;
    assert_int_equal(stat(p, &st), 0);
    assert_int_equal(truncate(p, st.st_size / 2), 0);
    snprintf(p, sizeof p, "%s/a/big.png", root);
    ct_write_file(p, big, sizeof big);
    ct_imgdir d;
    assert_int_equal(ct_imgdir_scan(&d, root, 0, 1, 0), 0);
    assert_int_equal(d.skipped, 2);
    assert_int_equal(d.split[0].n, 4);
    ct_imgdir_free(&d);
    expect_msg(ct_imgdir_scan(&d, root, 0, 1, 1), CT_EINPUT, "a/big.png: not a readable image (truncated: a chunk", NULL);
    unlink(p);
    expect_msg(ct_imgdir_scan(&d, root, 0, 1, 1), CT_EINPUT, "b/cut.png: not a readable image (truncated: a chunk", NULL);
}

/* The scan names each of them (and a symlink loop) as skipped, and --strict says why. */
static void test_scan_damaged(void **state) {
    (void)state;
    char root[300], p[600], q[600];
    fresh_dir(root, sizeof root);
    make_class(root, "a", 0, 2);
    make_class(root, "b", 1, 2);
    snprintf(p, sizeof p, "%s/a/h0.bmp", root);
    ct_write_file(p, bmp_h0, sizeof bmp_h0);
    snprintf(p, sizeof p, "%s/a/dht.jpg", root);
    snprintf(q, sizeof q, "%s/tmp.jpg", root);
    write_bad_dht_jpeg(p, q);
    snprintf(p, sizeof p, "%s/b/short.tga", root);
    write_short_tga(p);
    snprintf(p, sizeof p, "%s/b/loop.png", root);
    assert_int_equal(symlink(p, p), 0);
    ct_imgdir d;
    assert_int_equal(ct_imgdir_scan(&d, root, 0, 1, 0), 0);
    assert_int_equal(d.skipped, 4);
    assert_int_equal(d.split[0].n, 4);
    ct_imgdir_free(&d);
    expect_msg(ct_imgdir_scan(&d, root, 0, 1, 1), CT_EINPUT, "a/dht.jpg: not a readable image (corrupt JPEG Huffman", NULL);
    snprintf(p, sizeof p, "%s/a/dht.jpg", root);
    unlink(p);
    expect_msg(ct_imgdir_scan(&d, root, 0, 1, 1), CT_EINPUT, "a/h0.bmp: not a readable image (width or height 0", NULL);
    snprintf(p, sizeof p, "%s/a/h0.bmp", root);
    unlink(p);
    expect_msg(ct_imgdir_scan(&d, root, 0, 1, 1), CT_EINPUT, "b/loop.png: not a readable image (", "symbolic links");
    snprintf(p, sizeof p, "%s/b/loop.png", root);
    unlink(p);
    expect_msg(ct_imgdir_scan(&d, root, 0, 1, 1), CT_EINPUT, "b/short.tga: not a readable image (truncated", NULL);
    snprintf(p, sizeof p, "%s/b/short.tga", root);
    unlink(p);
    snprintf(p, sizeof p, "%s/b/wide.png", root);
    write_wide_png(p);
    expect_msg(ct_imgdir_scan(&d, root, 0, 1, 1), CT_EINPUT, "b/wide.png: not a readable image (larger than 16384", NULL);
}

/* ---- the decoding source ------------------------------------------------- */

typedef struct expect_tab { int n; float *img; int32_t *label; } expect_tab;

static void load_all(const ct_source *src, expect_tab *t) {
    size_t m = (size_t)src->h * src->w * src->c;
    t->n = src->n;
    t->img = malloc((size_t)src->n * m * sizeof(float));
    t->label = malloc((size_t)src->n * sizeof(int32_t));
    assert_non_null(t->img);
    for (int i = 0; i < src->n; i++) assert_int_equal(src->load(src->ctx, i, t->img + i * m, &t->label[i], NULL), 0);
}

typedef struct hammer { const ct_source *src; const expect_tab *t; int id, bad; } hammer;

static void *hammer_run(void *arg) {
    hammer *h = arg;
    size_t m = (size_t)h->src->h * h->src->w * h->src->c;
    float *buf = malloc(m * sizeof(float));
    for (int rep = 0; rep < 30; rep++)
        for (int k = 0; k < h->src->n; k++) {
            int i = (k * 7 + h->id * 3 + rep) % h->src->n;
            int32_t l;
            if (h->src->load(h->src->ctx, i, buf, &l, NULL) || l != h->t->label[i] ||
                memcmp(buf, h->t->img + i * m, m * sizeof(float)))
                h->bad++;
        }
    free(buf);
    return NULL;
}

static void test_source_substitution(void **state) {
    (void)state;
    char root[300], p[600];
    fresh_dir(root, sizeof root);
    make_class(root, "a", 0, 4);
    make_class(root, "b", 1, 4);
    snprintf(p, sizeof p, "%s/a/i1x.png", root); /* index 2: i0 i1 i1x i2 i3 */
    write_truncated_png(p);
    snprintf(p, sizeof p, "%s/b/z.png", root);   /* the last index: wraps to 0 */
    write_truncated_png(p);
    ct_imgdir d;
    assert_int_equal(ct_imgdir_scan(&d, root, 0, 1, 0), 0);
    assert_int_equal(d.split[0].n, 10);
    ct_source src;
    ct_imgdir_src_ctx ctx;
    assert_int_equal(ct_imgdir_source_init(&src, &ctx, &d, CT_SPLIT_TRAIN, 8, 3), 0);
    assert_int_equal(src.n, 10);
    assert_int_equal(src.h, 8);
    assert_int_equal(src.c, 3);
    assert_int_equal(src.n_classes, 2);
    float img[8 * 8 * 3];
    int32_t label;
    /* a good file: its own colour / 255 */
    assert_int_equal(src.load(src.ctx, 1, img, &label, NULL), 0);
    uint8_t px[3];
    file_colour(0, 1, px);
    assert_int_equal(label, 0);
    for (int i = 0; i < 64; i++)
        for (int k = 0; k < 3; k++) assert_float_equal(img[i * 3 + k], px[k] / 255.0f, 1e-6);
    /* the truncated file: the next one (a/i2), reported once */
    for (int rep = 0; rep < 3; rep++) {
        assert_int_equal(src.load(src.ctx, 2, img, &label, NULL), 0);
        file_colour(0, 2, px);
        assert_int_equal(label, 0);
        assert_float_equal(img[0], px[0] / 255.0f, 1e-6);
        assert_int_equal(atomic_load(&ctx.failed), 1);
    }
    /* the last one wraps round to index 0 (a/i0) */
    assert_int_equal(src.load(src.ctx, 9, img, &label, NULL), 0);
    file_colour(0, 0, px);
    assert_int_equal(label, 0);
    assert_float_equal(img[0], px[0] / 255.0f, 1e-6);
    assert_int_equal(atomic_load(&ctx.failed), 2);
    /* the same from 4 threads at once, on a fresh context, as sequentially */
    expect_tab t;
    load_all(&src, &t);
    ct_source src2;
    ct_imgdir_src_ctx ctx2;
    assert_int_equal(ct_imgdir_source_init(&src2, &ctx2, &d, CT_SPLIT_TRAIN, 8, 3), 0);
    pthread_t th[4];
    hammer hm[4];
    for (int i = 0; i < 4; i++) {
        hm[i] = (hammer){&src2, &t, i, 0};
        assert_int_equal(pthread_create(&th[i], NULL, hammer_run, &hm[i]), 0);
    }
    for (int i = 0; i < 4; i++) {
        pthread_join(th[i], NULL);
        assert_int_equal(hm[i].bad, 0);
    }
    assert_int_equal(atomic_load(&ctx2.failed), 2);
    /* whole batches too, as the pipeline makes them */
    float b1[4 * 192], b2[4 * 192];
    int32_t l1[4], l2[4];
    int B1, B2;
    assert_int_equal(ct_batch_fill(&src, 3, 10, 4, 1, NULL, b1, l1, &B1), 0);
    assert_int_equal(ct_batch_fill(&src2, 3, 10, 4, 1, NULL, b2, l2, &B2), 0);
    assert_int_equal(B1, B2);
    assert_memory_equal(b1, b2, sizeof b1);
    assert_memory_equal(l1, l2, sizeof l1);
    free(t.img);
    free(t.label);
    ct_imgdir_source_free(&ctx2);
    /* strict: the error itself */
    ctx.strict = 1;
    expect_msg(src.load(src.ctx, 2, img, &label, NULL), CT_EINPUT, "i1x.png: ", NULL);
    ct_imgdir_source_free(&ctx);
    /* bad arguments */
    expect_msg(ct_imgdir_source_init(&src, &ctx, &d, CT_SPLIT_TEST, 8, 3), CT_EINPUT, "test split has no images", NULL);
    expect_msg(ct_imgdir_source_init(&src, &ctx, &d, CT_SPLIT_TRAIN, 8, 2), CT_EINPUT, "expected 1 or 3", NULL);
    expect_msg(ct_imgdir_source_init(&src, &ctx, &d, CT_SPLIT_TRAIN, 0, 3), CT_EINPUT, "image size 0", NULL);
    ct_imgdir_free(&d);
    /* nothing decodes */
    fresh_dir(root, sizeof root);
    mkdirs(root, "x");
    mkdirs(root, "y");
    snprintf(p, sizeof p, "%s/x/1.png", root);
    write_truncated_png(p);
    snprintf(p, sizeof p, "%s/y/1.png", root);
    write_truncated_png(p);
    assert_int_equal(ct_imgdir_scan(&d, root, 0, 1, 0), 0);
    assert_int_equal(ct_imgdir_source_init(&src, &ctx, &d, CT_SPLIT_TRAIN, 8, 1), 0);
    expect_msg(src.load(src.ctx, 1, img, &label, NULL), CT_EINPUT, "none of the 2 images", NULL);
    ct_imgdir_source_free(&ctx);
    ct_imgdir_free(&d);
}

/* ---- shards -------------------------------------------------------------- */

/* Pack d's splits into out as the pack command does (without its threads). */
static void pack(const ct_imgdir *d, const char *out, int size, int channels, long per_shard) {
    size_t m = (size_t)size * size * channels;
    uint8_t *px = malloc(m);
    for (int s = 0; s < 2; s++) {
        ct_shard_writer w;
        assert_int_equal(ct_shard_writer_open(&w, out, s ? "test" : "train", size, size, channels, d->n_classes,
                                              (const char *const *)d->class_names, per_shard), 0);
        for (int i = 0; i < d->split[s].n; i++) {
            assert_int_equal(ct_image_decode(d->split[s].paths[i], size, channels, px), 0);
            assert_int_equal(ct_shard_write(&w, d->split[s].labels[i], px), 0);
        }
        assert_int_equal(ct_shard_writer_close(&w), 0);
        assert_int_equal(w.n_records, d->split[s].n);
    }
    free(px);
}

static int exists(const char *dir, const char *name) {
    char p[600];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    struct stat st;
    return stat(p, &st) == 0;
}

static void test_shard_round_trip(void **state) {
    (void)state;
    char root[300], out[300];
    fresh_dir(root, sizeof root);
    fresh_dir(out, sizeof out);
    make_class(root, "a", 0, 6);
    make_class(root, "b", 1, 5);
    make_class(root, "c", 2, 4);
    ct_imgdir d;
    assert_int_equal(ct_imgdir_scan(&d, root, 0.25, 3, 0), 0);
    for (int channels = 1; channels <= 3; channels += 2) {
        int size = channels == 1 ? 5 : 8;
        pack(&d, out, size, channels, 3);
        for (int s = 0; s < 2; s++) {
            ct_shardset ss;
            assert_int_equal(ct_shardset_open(&ss, out, s ? "test" : "train"), 0);
            assert_int_equal(ss.n, d.split[s].n);
            assert_int_equal(ss.n_shards, (d.split[s].n + 2) / 3);
            assert_int_equal(ss.height, size);
            assert_int_equal(ss.width, size);
            assert_int_equal(ss.channels, channels);
            assert_int_equal(ss.n_classes, 3);
            for (int c = 0; c < 3; c++) assert_string_equal(ss.class_names[c], d.class_names[c]);
            size_t m = (size_t)size * size * channels;
            uint8_t want[192], got[192];
            float f[192];
            ct_source src;
            assert_int_equal(ct_shardset_source_init(&src, &ss), 0);
            assert_int_equal(src.n, ss.n);
            for (int i = 0; i < ss.n; i++) {
                int32_t label = -1, l2 = -1;
                assert_int_equal(ct_image_decode(d.split[s].paths[i], size, channels, want), 0);
                assert_int_equal(ct_shardset_read(&ss, i, &label, got), 0);
                assert_int_equal(label, d.split[s].labels[i]);
                assert_memory_equal(got, want, m);
                assert_int_equal(src.load(src.ctx, i, f, &l2, NULL), 0);
                assert_int_equal(l2, label);
                for (size_t k = 0; k < m; k++) assert_float_equal(f[k], want[k] / 255.0f, 1e-6);
            }
            ct_shardset_close(&ss);
            ct_shardset_close(&ss);
        }
    }
    assert_true(exists(out, "train-00003.shard"));
    /* a repack with fewer files removes the stale ones; no temporary file is left */
    pack(&d, out, 8, 3, 100);
    assert_true(exists(out, "train-00000.shard"));
    assert_false(exists(out, "train-00001.shard"));
    assert_false(exists(out, "train-00003.shard"));
    char cmd[700];
    snprintf(cmd, sizeof cmd, "ls -a '%s' | grep -q tmp", out);
    assert_int_not_equal(system(cmd), 0);
    ct_shardset ss;
    assert_int_equal(ct_shardset_open(&ss, out, "train"), 0);
    assert_int_equal(ss.n_shards, 1);
    ct_shardset_close(&ss);
    ct_imgdir_free(&d);
    /* an empty split is one file without records */
    assert_int_equal(ct_imgdir_scan(&d, root, 0, 3, 0), 0);
    pack(&d, out, 4, 1, 10);
    assert_int_equal(ct_shardset_open(&ss, out, "test"), 0);
    assert_int_equal(ss.n, 0);
    assert_int_equal(ss.n_shards, 1);
    ct_shardset_close(&ss);
    ct_imgdir_free(&d);
    /* writer arguments */
    ct_shard_writer w;
    const char *names[] = {"x", "y"};
    expect_msg(ct_shard_writer_open(&w, out, "Train", 4, 4, 3, 2, names, 10), CT_EINPUT, "'Train'", NULL);
    expect_msg(ct_shard_writer_open(&w, out, "train", 0, 4, 3, 2, names, 10), CT_EINPUT, "shape 0x4x3", NULL);
    expect_msg(ct_shard_writer_open(&w, out, "train", 4, 4, 3, 2, names, 0), CT_EINPUT, "0 records per shard", NULL);
    assert_int_equal(ct_shard_writer_open(&w, out, "w", 4, 4, 3, 2, names, 10), 0);
    uint8_t px[48] = {0};
    expect_msg(ct_shard_write(&w, 2, px), CT_EINPUT, "label 2 out of range", NULL);
    ct_shard_writer_abort(&w);
}

/* A small two-file pack (3 records each, 4x4x3) in dir; returns the files' bytes. */
enum { FZ_SIDE = 4, FZ_REC = 4 + FZ_SIDE * FZ_SIDE * 3 + 4, FZ_N = 6 };
static uint8_t fz_px(int i, int k) { return (uint8_t)(i * 37 + k * 11 + 1); }
static void small_pack(const char *dir, uint32_t salt, uint8_t *files[2], size_t sizes[2]) {
    ct_shard_writer w;
    const char *names[] = {"zero", "one", "two"};
    assert_int_equal(ct_shard_writer_open(&w, dir, "train", FZ_SIDE, FZ_SIDE, 3, 3, names, 3), 0);
    uint8_t px[FZ_SIDE * FZ_SIDE * 3];
    for (int i = 0; i < FZ_N; i++) {
        for (size_t k = 0; k < sizeof px; k++) px[k] = (uint8_t)(fz_px(i, (int)k) + salt);
        assert_int_equal(ct_shard_write(&w, i % 3, px), 0);
    }
    assert_int_equal(ct_shard_writer_close(&w), 0);
    assert_int_equal(w.n_shards, 2);
    for (int f = 0; f < 2 && files; f++) {
        char p[400];
        snprintf(p, sizeof p, "%s/train-%05d.shard", dir, f);
        files[f] = malloc(1 << 16);
        sizes[f] = read_bytes(p, files[f], 1 << 16);
    }
}

static void put_file(const char *dir, int f, const uint8_t *data, size_t n) {
    char p[400];
    snprintf(p, sizeof p, "%s/train-%05d.shard", dir, f);
    ct_write_file(p, data, n);
}

static void expect_open_fail(const char *dir, const char *w1, const char *w2) {
    ct_shardset ss;
    memset(&ss, 0x5A, sizeof ss);
    expect_msg(ct_shardset_open(&ss, dir, "train"), CT_EINPUT, w1, w2);
    assert_null(ss.shards);
    assert_int_equal(ss.n, 0);
}

static void test_shard_damage(void **state) {
    (void)state;
    char dir[300], other[300], p[400], want[200];
    fresh_dir(dir, sizeof dir);
    fresh_dir(other, sizeof other);
    uint8_t *f[2], *g[2];
    size_t n[2], gn[2];
    small_pack(dir, 0, f, n);
    small_pack(other, 1, g, gn);
    uint8_t *buf = malloc(1 << 16);
    const size_t H = n[0] - 3 * FZ_REC;
    assert_int_equal(H, CT_SHARD_FIXED + 4 + (4 + 4) + (4 + 3) + (4 + 3));
    assert_int_equal(n[1], n[0]);
    /* a byte of the header */
    memcpy(buf, f[0], n[0]);
    buf[20] ^= 0x40;
    put_file(dir, 0, buf, n[0]);
    expect_open_fail(dir, "train-00000.shard: header CRC mismatch", "re-run cltrain pack");
    memcpy(buf, f[0], n[0]);
    buf[H - 6] ^= 1; /* inside the last class name */
    put_file(dir, 0, buf, n[0]);
    expect_open_fail(dir, "header CRC mismatch", NULL);
    memcpy(buf, f[0], n[0]);
    buf[8] = 2;
    put_file(dir, 0, buf, n[0]);
    expect_open_fail(dir, "version 2", "newer");
    memcpy(buf, f[0], n[0]);
    buf[0] = 'X';
    put_file(dir, 0, buf, n[0]);
    expect_open_fail(dir, "not a cltrain shard", NULL);
    /* a record: open works, that record fails with its offset, the others read */
    memcpy(buf, f[0], n[0]);
    buf[H + FZ_REC + 10] ^= 0x08;
    put_file(dir, 0, buf, n[0]);
    ct_shardset ss;
    assert_int_equal(ct_shardset_open(&ss, dir, "train"), 0);
    uint8_t px[FZ_SIDE * FZ_SIDE * 3];
    int32_t label;
    snprintf(want, sizeof want, "train-00000.shard: record 1 at offset %zu: CRC mismatch (damaged shard; re-run cltrain pack)",
             H + FZ_REC);
    expect_msg(ct_shardset_read(&ss, 1, &label, px), CT_EINPUT, want, NULL);
    assert_int_equal(ct_shardset_read(&ss, 0, &label, px), 0);
    assert_int_equal(ct_shardset_read(&ss, 4, &label, px), 0);
    assert_int_equal(label, 1);
    assert_int_equal(px[5], fz_px(4, 5));
    ct_source src;
    float fl[48];
    assert_int_equal(ct_shardset_source_init(&src, &ss), 0);
    expect_msg(src.load(src.ctx, 1, fl, &label, NULL), CT_EINPUT, want, NULL);
    ct_shardset_close(&ss);
    /* the label (covered by the CRC too) */
    memcpy(buf, f[0], n[0]);
    buf[H + 2 * FZ_REC] = 7;
    put_file(dir, 0, buf, n[0]);
    assert_int_equal(ct_shardset_open(&ss, dir, "train"), 0);
    snprintf(want, sizeof want, "record 2 at offset %zu: CRC mismatch", H + 2 * FZ_REC);
    expect_msg(ct_shardset_read(&ss, 2, &label, px), CT_EINPUT, want, NULL);
    ct_shardset_close(&ss);
    put_file(dir, 0, f[0], n[0]);
    /* truncated, or grown */
    put_file(dir, 1, f[1], n[1] - 1);
    expect_open_fail(dir, "train-00001.shard: truncated", NULL);
    put_file(dir, 1, f[1], H - 2);
    expect_open_fail(dir, "train-00001.shard", NULL);
    put_file(dir, 1, f[1], 10);
    expect_open_fail(dir, "train-00001.shard: truncated", NULL);
    memcpy(buf, f[1], n[1]);
    put_file(dir, 1, buf, n[1] + 5);
    expect_open_fail(dir, "train-00001.shard: wrong size", NULL);
    /* a file missing, a file of another pack, a file of another split */
    snprintf(p, sizeof p, "%s/train-00001.shard", dir);
    unlink(p);
    expect_open_fail(dir, "1 shard files, its headers say 2", "missing");
    put_file(dir, 1, g[1], gn[1]);
    expect_open_fail(dir, "train-00001.shard: from another pack", NULL);
    put_file(dir, 1, f[1], n[1]);
    snprintf(p, sizeof p, "%s/train-00000.shard", dir);
    unlink(p);
    put_file(dir, 2, f[1], n[1]);
    expect_open_fail(dir, "missing", NULL);
    snprintf(p, sizeof p, "%s/train-00002.shard", dir);
    unlink(p);
    put_file(dir, 0, f[0], n[0]);
    assert_int_equal(ct_shardset_open(&ss, dir, "train"), 0);
    assert_int_equal(ss.n, FZ_N);
    ct_shardset_close(&ss);
    snprintf(p, sizeof p, "%s/test-00000.shard", dir);
    ct_write_file(p, f[0], n[0]);
    expect_msg(ct_shardset_open(&ss, dir, "test"), CT_EINPUT, "holds split 'train', not 'test'", NULL);
    expect_msg(ct_shardset_open(&ss, dir, "valid"), CT_EINPUT, "no valid-*.shard files", NULL);
    snprintf(p, sizeof p, "%s/none", dir);
    expect_msg(ct_shardset_open(&ss, p, "train"), CT_EINPUT, "none: cannot open", NULL);
    for (int k = 0; k < 2; k++) {
        free(f[k]);
        free(g[k]);
    }
    free(buf);
}

/* Random single-byte changes and cuts of either file: always detected, at
 * open or at read, as CT_EINPUT; a record that reads is the original. */
static void test_shard_fuzz(void **state) {
    (void)state;
    char dir[300];
    fresh_dir(dir, sizeof dir);
    uint8_t *f[2];
    size_t n[2];
    small_pack(dir, 0, f, n);
    uint8_t *buf = malloc(1 << 16);
    ct_rng r = ct_rng_make(2024, 1, 2);
    int at_open = 0, at_read = 0;
    for (int it = 0; it < 2000; it++) {
        int which = (int)ct_rng_below(&r, 2), cut = ct_rng_below(&r, 10) < 3;
        size_t len = n[which];
        memcpy(buf, f[which], len);
        if (cut) len = ct_rng_below(&r, (uint32_t)len);
        else buf[ct_rng_below(&r, (uint32_t)len)] ^= (uint8_t)(1 + ct_rng_below(&r, 255));
        put_file(dir, which, buf, len);
        ct_shardset ss;
        int rc = ct_shardset_open(&ss, dir, "train");
        if (rc) {
            assert_int_equal(rc, CT_EINPUT);
            at_open++;
        } else {
            assert_int_equal(ss.n, FZ_N);
            int errors = 0;
            for (int i = 0; i < FZ_N; i++) {
                uint8_t px[FZ_SIDE * FZ_SIDE * 3];
                int32_t label;
                rc = ct_shardset_read(&ss, i, &label, px);
                if (rc) {
                    assert_int_equal(rc, CT_EINPUT);
                    assert_non_null(strstr(ct_last_error(), "CRC mismatch"));
                    errors++;
                    continue;
                }
                assert_int_equal(label, i % 3);
                for (size_t k = 0; k < sizeof px; k++)
                    if (px[k] != fz_px(i, (int)k)) fail_msg("iteration %d: record %d byte %zu silently wrong", it, i, k);
            }
            ct_shardset_close(&ss);
            if (errors != 1) fail_msg("iteration %d: a changed byte went unnoticed (%d read errors)", it, errors);
            at_read++;
        }
        put_file(dir, which, f[which], n[which]);
    }
    print_message("# fuzz: %d rejected at open, %d at read\n", at_open, at_read);
    assert_true(at_open > 0 && at_read > 0);
    free(buf);
    free(f[0]);
    free(f[1]);
}


/* The default augmentation of an image set never mirrors: digits and
 * glyphs change class under a flip (a mirrored 7 or L is no digit). A
 * 1-channel set of an asymmetric "7"-like glyph per class, opened as
 * `cltrain images DIR --channels 1` opens it (no --augment), must give
 * training samples that are each a translation of the decoded image (zero
 * where it moved in from outside) and never of its mirror, over many
 * (epoch, index) draws; some must move, so the default still augments.
 * Checked at 28x28 and at 48x48 (above 32, where basic would take the
 * random-resized crop). --augment basic must still flip (opt-in). */
static void glyph(uint8_t *img, int s, int variant) {
    memset(img, 0, (size_t)s * s);
    int m = s / 5;
    for (int x = m; x < s - m; x++) img[m * s + x] = 255;                 /* the bar of a 7 */
    for (int y = m; y < s - m; y++) img[y * s + (s - m - 1 - (y - m) / 3)] = 200; /* its stem, leaning */
    img[(s / 2) * s + m + variant] = 90;                                  /* a dot that tells the classes apart */
}

static int matches_shift(const float *out, const float *img, int s, int mirror, int maxd) {
    for (int dy = -maxd; dy <= maxd; dy++)
        for (int dx = -maxd; dx <= maxd; dx++) {
            int ok = 1;
            for (int y = 0; y < s && ok; y++)
                for (int x = 0; x < s && ok; x++) {
                    int sy = y + dy, sx = mirror ? s - 1 - (x + dx) : x + dx;
                    float want = sy < 0 || sy >= s || sx < 0 || sx >= s ? 0.0f : img[sy * s + sx];
                    ok = fabsf(out[y * s + x] - want) < 1e-6f;
                }
            if (ok) return 1 + (dy != 0 || dx != 0);
        }
    return 0;
}

static void default_never_flips(int s) {
    char dir[300], sub[400], path[500];
    fresh_dir(dir, sizeof dir);
    uint8_t img[64 * 64];
    for (int k = 0; k < 2; k++) {
        snprintf(sub, sizeof sub, "%s/class%d", dir, k);
        assert_int_equal(mkdir(sub, 0755), 0);
        for (int i = 0; i < 6; i++) {
            glyph(img, s, k * 3 + i % 3);
            snprintf(path, sizeof path, "%s/%d.png", sub, i);
            write_image(path, F_PNG, s, s, 1, img);
        }
    }
    for (int pass = 0; pass < 2; pass++) {
        ct_data_opts o;
        ct_data_opts_defaults(&o);
        o.path = dir;
        o.size = s;
        o.channels = 1;
        o.val_split = 0.0;
        o.augment = pass ? "basic" : NULL;
        ct_data d;
        assert_int_equal(ct_data_open(&d, ct_dataset_find("images"), &o), 0);
        if (!pass) assert_int_equal(d.aug.level, CT_AUG_SHIFT);
        const ct_source *aug = d.src[0], *plain = d.actx.inner;
        assert_int_equal(aug->h, s);
        float x[64 * 64], y[64 * 64];
        int32_t l0, l1;
        int moved = 0, mirrored = 0, other = 0;
        for (int e = 0; e < 8; e++)
            for (int i = 0; i < aug->n; i++) {
                ct_rng r = ct_rng_make(7, (uint64_t)e, (uint64_t)i);
                assert_int_equal(plain->load(plain->ctx, i, x, &l0, NULL), 0);
                assert_int_equal(aug->load(aug->ctx, i, y, &l1, &r), 0);
                assert_int_equal(l0, l1);
                int m = matches_shift(y, x, s, 0, d.aug.pad);
                if (m == 2) moved++;
                if (!m && matches_shift(y, x, s, 1, d.aug.pad)) mirrored++;
                else if (!m) other++;
            }
        if (!pass) {
            if (mirrored || other)
                fail_msg("%dx%d, default augmentation: %d samples mirrored, %d not a translation", s, s, mirrored, other);
            assert_true(moved >= aug->n * 8 / 2);
        } else if (s <= 32) {
            assert_true(mirrored > 0); /* basic (opt-in) still flips */
        }
        ct_data_close(&d);
    }
}

static void test_default_never_flips(void **state) {
    (void)state;
    default_never_flips(28);
    default_never_flips(48);
}

static int group_setup(void **state) {
    (void)state;
    return ct_tmp_root_make("images");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_decode_formats),
        cmocka_unit_test(test_decode_alpha_and_layout),
        cmocka_unit_test(test_scan_val_split),
        cmocka_unit_test(test_scan_train_test_folders),
        cmocka_unit_test(test_scan_errors),
        cmocka_unit_test(test_scan_skip_and_strict),
        cmocka_unit_test(test_decode_damaged),
        cmocka_unit_test(test_scan_damaged),
        cmocka_unit_test(test_decode_bombs),
        cmocka_unit_test(test_png_empty_idat),
        cmocka_unit_test(test_png_chunk_past_end),
        cmocka_unit_test(test_source_substitution),
        cmocka_unit_test(test_shard_round_trip),
        cmocka_unit_test(test_shard_damage),
        cmocka_unit_test(test_shard_fuzz),
        cmocka_unit_test(test_default_never_flips),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
