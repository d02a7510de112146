/* test_datasets.c: the table of data sets (data/registry.c) on fixtures this
 * test writes: every entry is complete and found by its command and its
 * checkpoint kind; an MNIST-format set and a CIFAR-10 set open for training
 * (both splits, the sources each needs, the fields checkpoints record) and
 * reopen from a checkpoint's data fields; bad options and missing folders
 * fail with CT_EINPUT and leave the set closed. Depends on libcltrain,
 * cmocka. Run clean under ASan too. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>
#include "ct_files.h"

#include "cltrain/datasets.h"
#include "cltrain/ref.h"
#include <math.h>
#include <string.h>

static void test_table(void **state) {
    (void)state;
    assert_string_equal(ct_dataset_list(), "mnist, fashion-mnist, cifar10, cifar100, images, arrays");
    for (int i = 0; i < ct_n_datasets; i++) {
        const ct_dataset_def *s = &ct_datasets[i];
        assert_non_null(s->name);
        assert_non_null(s->model);
        assert_true(s->open && s->reopen && s->describe);
        assert_ptr_equal(ct_dataset_find(s->name), s);
        assert_ptr_equal(ct_dataset_find_kind(s->kind), s);
        assert_true(s->default_path || s->from_files); /* a set without a default folder is named on the command line */
    }
    assert_null(ct_dataset_find("imagenet"));
    assert_null(ct_dataset_find_kind(""));
    /* the input preparation predict and export follow */
    assert_true(ct_dataset_find("cifar10")->standardize && ct_dataset_find("cifar100")->standardize);
    assert_false(ct_dataset_find("mnist")->standardize || ct_dataset_find("images")->standardize);
}

static void put_be32(uint8_t *p, uint32_t v) {
    p[0] = (uint8_t)(v >> 24); p[1] = (uint8_t)(v >> 16); p[2] = (uint8_t)(v >> 8); p[3] = (uint8_t)v;
}

/* dir/PREFIX-images-idx3-ubyte and -labels-idx1-ubyte with n 28x28 images, labels i % 10 */
static void write_idx(const char *dir, const char *prefix, int n) {
    char path[512];
    size_t sz = 16 + (size_t)n * 784;
    uint8_t *b = calloc(sz, 1), lab[8 + 16];
    assert_true(b && n <= 16);
    put_be32(b, 0x803); put_be32(b + 4, (uint32_t)n); put_be32(b + 8, 28); put_be32(b + 12, 28);
    for (size_t i = 16; i < sz; i++) b[i] = (uint8_t)(i * 7);
    snprintf(path, sizeof path, "%s/%s-images-idx3-ubyte", dir, prefix);
    ct_write_file(path, b, sz);
    put_be32(lab, 0x801); put_be32(lab + 4, (uint32_t)n);
    for (int i = 0; i < n; i++) lab[8 + i] = (uint8_t)(i % 10);
    snprintf(path, sizeof path, "%s/%s-labels-idx1-ubyte", dir, prefix);
    ct_write_file(path, lab, 8 + (size_t)n);
    free(b);
}

static void test_mnist(void **state) {
    (void)state;
    char dir[300];
    fresh_dir(dir, sizeof dir);
    write_idx(dir, "train", 6);
    write_idx(dir, "t10k", 3);
    ct_data_opts o;
    ct_data_opts_defaults(&o);
    o.path = dir;
    ct_data d;
    const ct_dataset_def *set = ct_dataset_find("fashion-mnist");
    assert_int_equal(ct_data_open(&d, set, &o), 0);
    assert_int_equal(d.train->n, 6);
    assert_int_equal(d.test->n, 3);
    assert_int_equal(d.train->h * d.train->w * d.train->c, 784);
    assert_null(d.src[0]); /* bytes / 255 straight from memory */
    assert_null(d.src[1]);
    assert_ptr_equal(d.path, dir);
    assert_string_equal(d.name, "fashion-mnist");
    assert_true(d.split == 0 && !d.class_names);
    assert_string_equal(d.test->class_names[0], "T-shirt/top");
    ct_data_close(&d);
    assert_null(d.train);
    /* reopen: the test split only, from the recorded folder */
    ct_ckpt_data rec = {.kind = "fashion-mnist", .classes = 10};
    assert_int_equal(ct_data_reopen(&d, set, &rec, dir, 1, 28, 1), 0);
    assert_null(d.train);
    assert_int_equal(d.test->n, 3);
    ct_data_close(&d);
    /* a folder without the files: CT_EINPUT, nothing left open */
    char empty[300];
    fresh_dir(empty, sizeof empty);
    o.path = empty;
    assert_int_equal(ct_data_open(&d, set, &o), CT_EINPUT);
    assert_null(d.def);
    assert_non_null(strstr(ct_last_error(), empty));
}

/* a CIFAR-10 set in dir: five training files of per records, one test file of per */
static void write_cifar(const char *dir, int per) {
    char path[512];
    uint8_t *b = malloc((size_t)per * 3073);
    assert_non_null(b);
    for (int f = 0; f < 6; f++) {
        for (int r = 0; r < per; r++) {
            b[r * 3073] = (uint8_t)((f + r) % 10);
            for (int k = 1; k < 3073; k++) b[r * 3073 + k] = (uint8_t)(k + r * 31 + f);
        }
        if (f < 5) snprintf(path, sizeof path, "%s/data_batch_%d.bin", dir, f + 1);
        else snprintf(path, sizeof path, "%s/test_batch.bin", dir);
        ct_write_file(path, b, (size_t)per * 3073);
    }
    free(b);
}

static void test_cifar(void **state) {
    (void)state;
    char dir[300];
    fresh_dir(dir, sizeof dir);
    write_cifar(dir, 2);
    const ct_dataset_def *set = ct_dataset_find("cifar10");
    ct_data_opts o;
    ct_data_opts_defaults(&o);
    o.path = dir;
    o.augment = "sideways";
    assert_int_equal(set->check(&o), CT_EINPUT);
    assert_non_null(strstr(ct_last_error(), "sideways"));
    o.augment = NULL;
    o.cutout = 8;
    assert_int_equal(set->check(&o), 0);
    ct_data d;
    assert_int_equal(ct_data_open(&d, set, &o), 0);
    assert_int_equal(d.train->n, 10);
    assert_int_equal(d.test->n, 2);
    assert_string_equal(d.augment, "full"); /* the default for CIFAR */
    assert_int_equal(d.cctx[0].aug.level, CT_AUG_FULL);
    assert_int_equal(d.cctx[0].aug.cutout, 8);
    assert_int_equal(d.cctx[1].aug.level, CT_AUG_NONE); /* evaluation is not augmented */
    /* both splits go through the standardising source, over the set's own pixels */
    assert_true(d.src[0] && d.src[1]);
    assert_int_equal(d.src[0]->n, 10);
    assert_int_equal(d.src[1]->n, 2);
    float x[3072];
    int32_t label;
    assert_int_equal(d.src[1]->load(d.src[1]->ctx, 1, x, &label, NULL), 0);
    assert_int_equal(label, d.test->labels[1]);
    double mean = 0;
    for (int k = 0; k < 3072; k++) mean += x[k];
    assert_true(fabs(mean / 3072) < 1e-3); /* per-image standardisation */
    ct_data_close(&d);
    ct_ckpt_data rec = {.kind = "cifar10", .classes = 10};
    assert_int_equal(ct_data_reopen(&d, set, &rec, dir, 1, 32, 3), 0);
    assert_true(d.test->n == 2 && d.src[1] && !d.src[0]);
    assert_string_equal(d.name, "cifar10");
    ct_data_close(&d);
}

/* A model's mean= and std= (ct_data_prepare): MNIST gets the scale and shift that give
 * (x / 255 - mean) / std; CIFAR's sources give the normalisation in place of
 * standardisation, on both splits (the float64 reference within 1e-6); a count other than
 * the images' channels is refused, naming the set. */
static void test_prepare(void **state) {
    (void)state;
    char dir[300];
    fresh_dir(dir, sizeof dir);
    write_idx(dir, "train", 4);
    write_idx(dir, "t10k", 2);
    ct_data_opts o;
    ct_data_opts_defaults(&o);
    o.path = dir;
    ct_data d;
    const ct_dataset_def *set = ct_dataset_find("mnist");
    assert_int_equal(ct_data_open(&d, set, &o), 0);
    ct_prep p1 = {.c = 1, .mean = {0.1307f}, .std = {0.3081f}}, none = {0};
    float scale = 1.0f / 255, shift = 0;
    assert_int_equal(ct_data_prepare(&d, &none, &scale, &shift), 0);
    assert_true(scale == 1.0f / 255 && shift == 0);
    assert_int_equal(ct_data_prepare(&d, &p1, &scale, &shift), 0);
    for (int v = 0; v < 256; v += 5) {
        double want = (v / 255.0 - 0.1307f) / 0.3081f;
        assert_true(fabs(v * scale + shift - want) < 1e-6 * fmax(1, fabs(want)));
    }
    ct_data_close(&d);
    ct_prep p3 = {.c = 3, .mean = {0.4914f, 0.4822f, 0.4465f}, .std = {0.2470f, 0.2435f, 0.2616f}};
    assert_int_equal(ct_data_open(&d, set, &o), 0);
    assert_int_equal(ct_data_prepare(&d, &p3, &scale, &shift), CT_EINPUT);
    fprintf(stderr, "# %s\n", ct_last_error());
    assert_non_null(strstr(ct_last_error(), dir));
    assert_non_null(strstr(ct_last_error(), "3 channels, but these images have 1"));
    ct_data_close(&d);

    fresh_dir(dir, sizeof dir);
    write_cifar(dir, 2);
    set = ct_dataset_find("cifar10");
    assert_int_equal(ct_data_open(&d, set, &o), 0);
    assert_int_equal(ct_data_prepare(&d, &p3, &scale, &shift), 0);
    float x[3072];
    double ref[3072], mean[3], std[3];
    for (int k = 0; k < 3; k++) mean[k] = p3.mean[k], std[k] = p3.std[k];
    uint8_t hwc[3072];
    const ct_dataset *ds = d.test;
    memcpy(hwc, ds->images + 3072, 3072); /* test image 1, HWC as loaded */
    ref_prep(ref, hwc, 1024, 3, mean, std);
    int32_t label;
    for (int i = 0; i < 3072; i++) x[i] = NAN;
    assert_int_equal(d.src[1]->load(d.src[1]->ctx, 1, x, &label, NULL), 0);
    for (int i = 0; i < 3072; i++) assert_true(fabs(x[i] - ref[i]) <= 1e-6 * fmax(1, fabs(ref[i])));
    ct_rng r = ct_rng_make(1, 0, 0);
    assert_int_equal(d.src[0]->load(d.src[0]->ctx, 0, x, &label, &r), 0); /* training: augmented, then normalised */
    for (int i = 0; i < 3072; i++) assert_true(isfinite(x[i]) && fabs(x[i]) < 20);
    assert_true(d.cctx[0].aug.prep.c == 3 && d.cctx[0].aug.prep.std[2] == p3.std[2]);
    ct_data_close(&d);
    ct_ckpt_data rec = {.kind = "cifar10", .classes = 10};
    assert_int_equal(ct_data_reopen(&d, set, &rec, dir, 1, 32, 3), 0);
    assert_int_equal(ct_data_prepare(&d, &p3, &scale, &shift), 0);
    for (int i = 0; i < 3072; i++) x[i] = NAN;
    assert_int_equal(d.src[1]->load(d.src[1]->ctx, 1, x, &label, NULL), 0);
    for (int i = 0; i < 3072; i++) assert_true(fabs(x[i] - ref[i]) <= 1e-6 * fmax(1, fabs(ref[i])));
    ct_data_close(&d);
}

int main(void) {
    (void)read_bytes; /* ct_files.h helper this test does not need */
    if (ct_tmp_root_make("datasets")) return 1;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_table),
        cmocka_unit_test(test_mnist),
        cmocka_unit_test(test_cifar),
        cmocka_unit_test(test_prepare),
    };
    return cmocka_run_group_tests(tests, NULL, group_teardown);
}
