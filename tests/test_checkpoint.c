/* test_checkpoint.c: the checkpoint format in memory and on disk, no device.
 * Round trips of version 3 for every optimizer's state count; files of the
 * previous format (version 2, written here by a copy of the old writer) load
 * into the structured fields; and fields that are wrong although the CRC
 * matches (batch, optimizer, steps, state count, ranks, data set, the model's
 * parameter count and classes) are refused with one line naming the field.
 * Files made by an old cltrain binary are checked by tests/checkpoint.sh. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include "cltrain/checkpoint.h"
#include "cltrain/common.h"
#include "cltrain/optim.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

static const char *CFG = "[net]\nheight=4\nwidth=4\nchannels=1\nclasses=3\n[dense]\noutputs=3\n[softmax]\n";
enum { NP = 4 * 4 * 3 + 3 };

static char test_dir[256]; /* a temporary folder, removed at the end */
static const char *const files[] = {"rt.ckpt", "v2.ckpt", "bad.ckpt"};

static char *tmp_path(const char *name) {
    static char p[1024];
    snprintf(p, sizeof p, "%s/%s", test_dir, name);
    return p;
}

static float vals[CT_CKPT_MAX_STATE + 1][NP];

/* a valid state: optimizer kind, its state count, values that differ per buffer */
static ct_ckpt make(int kind) {
    ct_ckpt st = {.cfg = (char *)CFG, .seed = 9, .next_batch = 12, .batch = 32, .n_train = 100, .opt_kind = kind,
                  .opt_step = 11, .lr = 0.01f, .momentum = 0.9f, .wd = 5e-4f, .n_params = NP, .params = vals[0],
                  .n_state = ct_optim_types[kind]->n_state, .ranks = 1, .data = {.split = 0.1, .classes = 3}};
    snprintf(st.model_name, sizeof st.model_name, "tiny");
    snprintf(st.data.kind, sizeof st.data.kind, "images");
    snprintf(st.data.path, sizeof st.data.path, "/data/shapes");
    for (int i = 0; i < st.n_state; i++) st.state[i] = vals[i + 1];
    return st;
}

static int setup(void **state) {
    (void)state;
    for (int b = 0; b <= CT_CKPT_MAX_STATE; b++)
        for (int i = 0; i < NP; i++) vals[b][i] = (float)(b * 1000 + i) * 0.25f - 3.0f;
    snprintf(test_dir, sizeof test_dir, "%s/cltrain-test-ckpt-XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    return mkdtemp(test_dir) ? 0 : -1;
}

static int teardown(void **state) {
    (void)state;
    for (size_t i = 0; i < sizeof files / sizeof *files; i++) unlink(tmp_path(files[i]));
    return rmdir(test_dir);
}

static void test_round_trip(void **state) {
    (void)state;
    static char *names[3] = {"disc", "square", "triangle"};
    for (int kind = 0; kind < CT_OPT_COUNT; kind++) {
        ct_ckpt st = make(kind), back;
        st.n_names = 3;
        st.class_names = names;
        assert_int_equal(ct_ckpt_save(&st, tmp_path("rt.ckpt")), 0);
        int rc = ct_ckpt_load(&back, tmp_path("rt.ckpt"));
        if (rc) fprintf(stderr, "# %s\n", ct_last_error());
        assert_int_equal(rc, 0);
        assert_int_equal(back.opt_kind, kind);
        assert_int_equal(back.n_state, ct_optim_types[kind]->n_state);
        assert_memory_equal(back.params, vals[0], sizeof vals[0]);
        for (int i = 0; i < back.n_state; i++) assert_memory_equal(back.state[i], vals[i + 1], sizeof vals[0]);
        assert_null(back.state[back.n_state]);
        assert_string_equal(back.data.kind, "images");
        assert_string_equal(back.data.path, "/data/shapes");
        assert_true(back.data.split == 0.1); /* exactly: eval reopens the same split */
        assert_int_equal(back.data.classes, 3);
        assert_true(back.hp_saved && back.lr == 0.01f && back.momentum == 0.9f && back.wd == 5e-4f);
        assert_int_equal(back.n_names, 3);
        assert_string_equal(back.class_names[2], "triangle");
        assert_int_equal((int)back.opt_step, 11);
        assert_true(back.lookahead == 0 && !back.average);
        ct_ckpt_free(&back);
    }
    /* the lookahead's rate and average (version 4) */
    ct_ckpt st = make(CT_OPT_NESTEROV), back;
    st.lookahead = 0.95f;
    st.average = vals[CT_CKPT_MAX_STATE];
    assert_int_equal(ct_ckpt_save(&st, tmp_path("rt.ckpt")), 0);
    assert_int_equal(ct_ckpt_load(&back, tmp_path("rt.ckpt")), 0);
    assert_true(back.lookahead == 0.95f);
    assert_non_null(back.average);
    assert_memory_equal(back.average, vals[CT_CKPT_MAX_STATE], sizeof vals[0]);
    assert_memory_equal(back.state[0], vals[1], sizeof vals[0]);
    ct_ckpt_free(&back);
    /* an average without a rate is refused */
    st.lookahead = 0;
    assert_int_equal(ct_ckpt_save(&st, tmp_path("rt.ckpt")), 0);
    assert_int_equal(ct_ckpt_load(&back, tmp_path("rt.ckpt")), CT_EINPUT);
    assert_non_null(strstr(ct_last_error(), "lookahead average"));
}

/* ---- the version 2 writer, as cltrain wrote it until the format became version 3 ---- */
typedef struct hdr2 {
    uint64_t seed;
    int64_t next_batch;
    int32_t batch, n_train, opt_kind, opt_step;
    uint64_t n_params;
    uint32_t cfg_len, pad;
    char model_name[256], dataset[32], data_dir[512];
} hdr2;

static void write_v2(const char *path, const char *dataset, int kind, int32_t batch) {
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    unsigned char buf[8192];
    size_t n = 0;
#define PUT(p, len) do { memcpy(buf + n, (p), (len)); n += (len); } while (0)
    uint32_t version = 2, hsize = sizeof(hdr2), ext_len = 8, nn = 0;
    int32_t ranks = 1;
    hdr2 h;
    memset(&h, 0, sizeof h);
    h = (hdr2){.seed = 5, .next_batch = 7, .batch = batch, .n_train = 64, .opt_kind = kind, .opt_step = 7, .n_params = NP,
               .cfg_len = (uint32_t)strlen(CFG)};
    snprintf(h.model_name, sizeof h.model_name, "tiny");
    snprintf(h.dataset, sizeof h.dataset, "%s", dataset);
    snprintf(h.data_dir, sizeof h.data_dir, "/data/x");
    PUT("CLTRCKPT", 8);
    PUT(&version, 4);
    PUT(&hsize, 4);
    PUT(&h, sizeof h);
    PUT(CFG, h.cfg_len);
    PUT(&ext_len, 4);
    PUT(&ranks, 4);
    PUT(&nn, 4);
    for (int b = 0; b < 3; b++) PUT(vals[b], sizeof vals[0]);
    uint32_t crc = (uint32_t)crc32(crc32(0, NULL, 0), buf, (uInt)n);
    PUT(&crc, 4);
#undef PUT
    assert_int_equal(fwrite(buf, 1, n, f), n);
    fclose(f);
}

static void test_version2(void **state) {
    (void)state;
    struct { const char *name, *kind; double split; int classes, opt, n_state; } cases[] = {
        {"images:0.250", "images", 0.25, 0, CT_OPT_ADAM, 2},
        {"cifar100-coarse", "cifar100", 0, 20, CT_OPT_SGD, 1},
        {"cifar100", "cifar100", 0, 100, CT_OPT_ADAM, 2},
        {"fashion-mnist", "fashion-mnist", 0, 10, CT_OPT_SGD, 1},
    };
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        write_v2(tmp_path("v2.ckpt"), cases[c].name, cases[c].opt, 16);
        ct_ckpt st;
        int rc = ct_ckpt_load(&st, tmp_path("v2.ckpt"));
        if (rc) fprintf(stderr, "# %s\n", ct_last_error());
        assert_int_equal(rc, 0);
        assert_string_equal(st.data.kind, cases[c].kind);
        assert_string_equal(st.data.path, "/data/x");
        assert_true(st.data.split == cases[c].split);
        assert_int_equal(st.data.classes, cases[c].classes);
        assert_int_equal(st.n_state, cases[c].n_state);  /* sgd's unused second buffer is dropped */
        assert_int_equal(st.hp_saved, 0);
        assert_memory_equal(st.params, vals[0], sizeof vals[0]);
        for (int i = 0; i < st.n_state; i++) assert_memory_equal(st.state[i], vals[i + 1], sizeof vals[0]);
        assert_int_equal(st.ranks, 1);
        ct_ckpt_free(&st);
    }
    /* version 2 files are validated too: finding 7's batch 100000 and kind 7 */
    write_v2(tmp_path("v2.ckpt"), "mnist", CT_OPT_ADAM, 100000);
    ct_ckpt st;
    assert_int_equal(ct_ckpt_load(&st, tmp_path("v2.ckpt")), CT_EINPUT);
    assert_non_null(strstr(ct_last_error(), "field batch is 100000"));
    write_v2(tmp_path("v2.ckpt"), "mnist", 7, 16);
    assert_int_equal(ct_ckpt_load(&st, tmp_path("v2.ckpt")), CT_EINPUT);
    assert_non_null(strstr(ct_last_error(), "field optimizer is 7"));
}

/* a valid CRC over wrong fields: each refused, naming the field */
static void test_bad_fields(void **state) {
    (void)state;
    static char *two[2] = {"a", "b"};
    struct { const char *what, *want; } cases[] = {
        {"batch", "field batch is 100000"},          {"kind", "field optimizer is 7"},
        {"step", "field optimizer step is -1"},      {"step-ahead", "field optimizer step is 13"},
        {"next", "field next batch is -5"},          {"n_train", "field samples per epoch is 0"},
        {"ranks", "field ranks is 70000"},             {"n_state", "field state buffers is 1"},
        {"data", "field data set is 'imagenet'"},    {"split", "held-out share"},
        {"n_params", "does not parse"},              {"names", "field class names is 2"},
        {"lr", "hyper-parameters out of range"},     {"cfg", "does not parse"},
    };
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        ct_ckpt st = make(CT_OPT_ADAM);
        const char *w = cases[c].what;
        char cfg[256];
        if (!strcmp(w, "batch")) st.batch = 100000;
        if (!strcmp(w, "kind")) st.opt_kind = 7, st.n_state = 2;
        if (!strcmp(w, "step")) st.opt_step = -1;
        if (!strcmp(w, "step-ahead")) st.opt_step = 13;
        if (!strcmp(w, "next")) st.next_batch = -5;
        if (!strcmp(w, "n_train")) st.n_train = 0;
        if (!strcmp(w, "ranks")) st.ranks = 70000;
        if (!strcmp(w, "n_state")) st.n_state = 1;
        if (!strcmp(w, "data")) snprintf(st.data.kind, sizeof st.data.kind, "imagenet");
        if (!strcmp(w, "split")) st.data.split = 2.0;
        if (!strcmp(w, "names")) st.n_names = 2, st.class_names = two;
        if (!strcmp(w, "lr")) st.lr = -1;
        if (!strcmp(w, "cfg")) st.cfg = "[net]\nheight=4\n[bogus]\n";
        if (!strcmp(w, "n_params")) {
            /* the same byte count, another model: 5x5 input gives 78 parameters, not 51 */
            snprintf(cfg, sizeof cfg, "%s", CFG);
            cfg[strlen("[net]\nheight=")] = '5';
            st.cfg = cfg;
            cases[c].want = "field parameter count is 51";
        }
        assert_int_equal(ct_ckpt_save(&st, tmp_path("bad.ckpt")), 0);
        ct_ckpt back;
        int rc = ct_ckpt_load(&back, tmp_path("bad.ckpt"));
        fprintf(stderr, "# %s: %s\n", w, ct_last_error());
        assert_int_equal(rc, CT_EINPUT);
        assert_non_null(strstr(ct_last_error(), cases[c].want));
        assert_non_null(strstr(ct_last_error(), "bad.ckpt"));
        assert_null(strchr(ct_last_error(), '\n'));
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_version2),
        cmocka_unit_test(test_bad_fields),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
