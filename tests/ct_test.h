/* ct_test.h: helpers shared by the kernel tests: open the device (or skip
 * when no OpenCL platform exists), fresh random inputs from a fixed seed,
 * NaN-poisoned outputs, and a relative-error comparison that prints the max
 * abs/rel error and the first mismatches. */
#ifndef CT_TEST_H
#define CT_TEST_H
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include "cltrain/cl.h"
#include "cltrain/model.h"

static ct_cl g_cl;
static int g_have_cl;

static inline int ct_test_open(void **state) {
    (void)state;
    if (!g_have_cl) {
        int rc = ct_cl_open(&g_cl, NULL);
        if (rc == 0) g_have_cl = 1;
        else if (rc == CT_EINPUT) { /* CLTRAIN_DEVICE_CLASS or CLTRAIN_DEVICE misspelt: a failure, not a skip */
            fprintf(stderr, "# %s\n", ct_last_error());
            exit(1);
        } else fprintf(stderr, "# no OpenCL device: %s\n", ct_last_error());
        if (rc == 0) fprintf(stderr, "# device %s (%s), class %s (%s)\n", g_cl.device_name, g_cl.platform_name,
                             ct_cl_class_name(g_cl.dev_class), g_cl.class_why);
    }
    return 0;
}
static inline int ct_test_close(void **state) {
    (void)state;
    if (g_have_cl) ct_cl_close(&g_cl);
    g_have_cl = 0;
    return 0;
}
#define CT_NEED_CL() do { if (!g_have_cl) skip(); } while (0)

/* CLTRAIN_TEST_SUBSET=device: the kernel tests check a stated subset (each
 * test says which and why: what the class in force runs on the device, and
 * one case per kernel variant of the others) for a slow second OpenCL
 * implementation (tests/rusticl.sh: Mesa's llvmpipe compiles each kernel
 * variant in 10-40 s and runs it 20-400x slower than PoCL). Unset: all of
 * it, as every PoCL pass runs. Any other value: one line and exit 2. */
static inline int ct_test_subset(void) {
    static int said = -1;
    if (said >= 0) return said;
    const char *s = getenv("CLTRAIN_TEST_SUBSET");
    said = s && *s;
    if (said && strcmp(s, "device")) {
        fprintf(stderr, "# CLTRAIN_TEST_SUBSET=%s: expected 'device' or nothing\n", s);
        exit(2);
    }
    if (said) fprintf(stderr, "# CLTRAIN_TEST_SUBSET=device: a subset runs (each test says which)\n");
    return said;
}

static inline void ct_fill_rand(float *x, size_t n, ct_rng *r, float scale) {
    for (size_t i = 0; i < n; i++) x[i] = (2.0f * ct_rng_uniform(r) - 1.0f) * scale;
}
static inline void ct_fill_nan(float *x, size_t n) {
    for (size_t i = 0; i < n; i++) x[i] = NAN;
}
static inline cl_mem ct_test_buf(const float *host, size_t n) {
    cl_mem m;
    assert_int_equal(ct_cl_alloc(&g_cl, &m, n * sizeof(float) + 4, "test"), 0);
    if (host) ct_cl_write(&g_cl, m, 0, n * sizeof(float), host);
    return m;
}
static inline cl_mem ct_test_nanbuf(size_t n) {
    float *t = malloc(n * sizeof(float) + 4);
    ct_fill_nan(t, n + 1);
    cl_mem m = ct_test_buf(t, n + 1);
    free(t);
    return m;
}

/* Compare got against want: |got - want| <= atol + rtol * |want| everywhere (NaN fails). */
/* A model's forward, whole (ct_model_forward: the fusions across layers) or each layer by itself (its
 * own kernels): the tests of those fusions compare the two */
static inline void ct_test_forward(ct_model *m, int B, int whole) {
    if (whole) ct_model_forward(m, B);
    else
        for (int i = 0; i < m->n_layers; i++) ct_layer_forward(m, i, B);
}

static inline int ct_compare(const char *what, const float *got, const float *want, size_t n, double rtol, double atol) {
    double max_abs = 0, max_rel = 0;
    size_t bad = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)got[i] - want[i]);
        double rel = d / (fabs(want[i]) + 1e-30);
        if (!(d <= atol + rtol * fabs(want[i]))) {
            if (bad < 5) fprintf(stderr, "# %s[%zu]: got %.9g want %.9g\n", what, i, got[i], want[i]);
            bad++;
        }
        if (d > max_abs || d != d) max_abs = d;
        if (fabs(want[i]) > 1e-3 && rel > max_rel) max_rel = rel;
    }
    fprintf(stderr, "# %s: n=%zu max abs err %.3g, max rel err %.3g, %zu mismatches\n", what, n, max_abs, max_rel, bad);
    return bad == 0;
}
#endif
