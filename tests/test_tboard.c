/* test_tboard.c: --logdir output. The event file's framing and both CRCs are
 * checked here, every Event is decoded back, metrics.csv is checked, and
 * TensorBoard's own reader (tools/tb_read.py in the venv that
 * tools/setup-tensorboard.sh makes; make test runs it) must return every tag,
 * step and value written. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>
#include "cltrain/common.h"
#include "cltrain/tboard.h"

static const struct { const char *tag; int64_t step; double value; } pts[] = {
    {"train/loss", 0, 2.302585}, {"train/accuracy", 0, 0.1}, {"train/loss", 1, 1.5}, {"lr", 1, 3e-4},
    {"images_per_s", 50, 1275.25}, {"data_wait", 50, 0.0}, {"test/accuracy", 469, 0.8789},
    {"train/loss", 123456789012LL, -1e-20}, {"train/loss", 7, 3.4e38}, {"train/loss", 8, -42.5},
};
#define NPTS (sizeof pts / sizeof *pts)

static char dir[] = "/tmp/cltrain-tb-XXXXXX";
static char evpath[4300];

static uint64_t varint(const uint8_t **p, const uint8_t *end) {
    uint64_t v = 0;
    for (int s = 0; *p < end; s += 7) {
        uint8_t b = *(*p)++;
        v |= (uint64_t)(b & 0x7f) << s;
        if (!(b & 0x80)) return v;
    }
    fail_msg("varint runs past the record");
    return 0;
}
static uint32_t masked(uint32_t c) { return ((c >> 15) | (c << 17)) + 0xa282ead8u; }

/* CRC32C: the check value, and the hardware and table paths agree on every
 * length and alignment (the table path is forced with CLTRAIN_CRC_TABLE) */
static void test_crc32c(void **state) {
    (void)state;
    assert_int_equal(ct_crc32c("123456789", 9), 0xE3069283u);
    assert_int_equal(ct_crc32c("", 0), 0);
    uint8_t buf[300];
    ct_rng r = ct_rng_make(5, 6, 7);
    for (size_t i = 0; i < sizeof buf; i++) buf[i] = (uint8_t)ct_rng_next(&r);
    for (size_t off = 0; off < 9; off++)
        for (size_t n = 0; n + off <= sizeof buf; n += 7) {
            unsetenv("CLTRAIN_CRC_TABLE");
            uint32_t a = ct_crc32c(buf + off, n);
            setenv("CLTRAIN_CRC_TABLE", "1", 1);
            uint32_t b = ct_crc32c(buf + off, n);
            assert_int_equal(a, b);
        }
    unsetenv("CLTRAIN_CRC_TABLE");
}

static void test_write_and_decode(void **state) {
    (void)state;
    ct_tboard t;
    assert_int_equal(ct_tboard_open(&t, dir), 0);
    snprintf(evpath, sizeof evpath, "%s", t.path);
    for (size_t i = 0; i < NPTS; i++) ct_tboard_scalar(&t, pts[i].tag, pts[i].step, pts[i].value);
    ct_tboard_close(&t);
    FILE *f = fopen(evpath, "rb");
    assert_non_null(f);
    uint8_t buf[4096];
    size_t n = fread(buf, 1, sizeof buf, f);
    fclose(f);
    const uint8_t *p = buf, *end = buf + n;
    size_t records = 0, scalars = 0;
    while (p < end) {
        uint64_t len;
        uint32_t lc, dc;
        assert_true(end - p >= 12);
        memcpy(&len, p, 8);
        memcpy(&lc, p + 8, 4);
        assert_int_equal(lc, masked(ct_crc32c(p, 8)));
        p += 12;
        assert_true((uint64_t)(end - p) >= len + 4);
        memcpy(&dc, p + len, 4);
        assert_int_equal(dc, masked(ct_crc32c(p, len)));
        const uint8_t *q = p, *qe = p + len;
        int64_t step = -1;
        char tag[256] = "";
        float value = 0;
        int has_version = 0, has_value = 0;
        while (q < qe) {
            uint64_t key = varint(&q, qe);
            int field = (int)(key >> 3), wt = (int)(key & 7);
            if (field == 1 && wt == 1) q += 8;
            else if (field == 2 && wt == 0) step = (int64_t)varint(&q, qe);
            else if (field == 3 && wt == 2) { uint64_t l = varint(&q, qe); has_version = l == 13 && !memcmp(q, "brain.Event:2", 13); q += l; }
            else if (field == 5 && wt == 2) {
                uint64_t l = varint(&q, qe);
                const uint8_t *s = q, *se = q + l;
                assert_int_equal(varint(&s, se), 1 << 3 | 2); /* Summary.value */
                uint64_t vl = varint(&s, se);
                const uint8_t *v = s, *ve = s + vl;
                while (v < ve) {
                    uint64_t k2 = varint(&v, ve);
                    if (k2 == (1 << 3 | 2)) { uint64_t tl = varint(&v, ve); memcpy(tag, v, tl); tag[tl] = 0; v += tl; }
                    else if (k2 == (2 << 3 | 5)) { memcpy(&value, v, 4); v += 4; has_value = 1; }
                    else fail_msg("unexpected field in Value");
                }
                q += l;
            } else fail_msg("unexpected field %d in Event", field);
        }
        if (records == 0) assert_true(has_version);
        else {
            assert_true(has_value);
            assert_string_equal(tag, pts[scalars].tag);
            assert_int_equal(step, pts[scalars].step);
            assert_true(value == (float)pts[scalars].value);
            scalars++;
        }
        records++;
        p += len + 4;
    }
    assert_int_equal(scalars, NPTS);
    /* metrics.csv */
    char csv[4300], line[512];
    snprintf(csv, sizeof csv, "%s/metrics.csv", dir);
    f = fopen(csv, "r");
    assert_non_null(f);
    assert_non_null(fgets(line, sizeof line, f));
    assert_string_equal(line, "step,tag,value,wall_time\n");
    for (size_t i = 0; i < NPTS; i++) {
        assert_non_null(fgets(line, sizeof line, f));
        long long st;
        char tg[128];
        double v;
        assert_int_equal(sscanf(line, "%lld,%127[^,],%lf,", &st, tg, &v), 3);
        assert_int_equal(st, pts[i].step);
        assert_string_equal(tg, pts[i].tag);
        assert_true(v == pts[i].value || fabs(v - pts[i].value) <= 1e-8 * fabs(pts[i].value));
    }
    fclose(f);
}

static void test_tensorboard_reads_it(void **state) {
    (void)state;
    const char *py = getenv("CLTRAIN_TB_PYTHON");
    if (!py) py = "build/tbvenv/bin/python";
    if (access(py, X_OK)) {
        /* TensorBoard comes from PyPI, which a machine with only Debian's mirror
         * lacks: skipped (and counted) there; CI installs it and must run it */
        if (!getenv("CI")) {
            fprintf(stderr, "# %s not found: run tools/setup-tensorboard.sh build/tbvenv to include this check\n", py);
            skip();
        }
        fail_msg("%s not found: run tools/setup-tensorboard.sh build/tbvenv (.ci/run does)", py);
    }
    char cmd[9000];
    snprintf(cmd, sizeof cmd, "'%s' tools/tb_read.py '%s'", py, evpath);
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    char tag[256];
    long long step;
    double v;
    size_t i = 0;
    while (fscanf(p, "%255s %lld %lf", tag, &step, &v) == 3) {
        assert_true(i < NPTS);
        assert_string_equal(tag, pts[i].tag);
        assert_int_equal(step, pts[i].step);
        assert_true((float)v == (float)pts[i].value);
        i++;
    }
    assert_int_equal(pclose(p), 0);
    assert_int_equal(i, NPTS);
}

static void test_bad_logdir(void **state) {
    (void)state;
    char bad[4300];
    snprintf(bad, sizeof bad, "%s/metrics.csv/sub", dir); /* under a regular file */
    ct_tboard t;
    assert_int_equal(ct_tboard_open(&t, bad), CT_EIO);
    assert_non_null(strstr(ct_last_error(), bad));
}

static int setup(void **state) {
    (void)state;
    return mkdtemp(dir) ? 0 : -1;
}
static int teardown(void **state) {
    (void)state;
    char cmd[200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    return system(cmd) == 0 ? 0 : -1;
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_crc32c),
        cmocka_unit_test(test_write_and_decode),
        cmocka_unit_test(test_tensorboard_reads_it),
        cmocka_unit_test(test_bad_logdir),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
