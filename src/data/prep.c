/* data/prep.c: a model's per-channel input normalisation (prep.h), applied
 * by the producers after augmentation's pixel steps. The reference is
 * ref_prep (ref/prep.c); tests/test_augment.c compares them.
 * Depends on prep.h, common.h. */
#include "cltrain/prep.h"
#include "cltrain/common.h"
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void ct_prep_apply(const ct_prep *p, float *img, size_t px) {
    CT_ASSERT(p && img && p->c > 0 && p->c <= CT_PREP_MAX);
    int c = p->c;
    for (size_t i = 0; i < px; i++, img += c)
        for (int k = 0; k < c; k++) img[k] = (img[k] - p->mean[k]) / p->std[k];
}

int ct_prep_is_unit(const ct_prep *p) {
    for (int k = 0; k < p->c; k++)
        if (p->mean[k] != 0.0f || p->std[k] != 1.0f) return 0;
    return 1;
}

/* each value in the fewest digits that read back as the same float */
static void list(char *buf, size_t cap, const float *v, int n) {
    for (int k = 0; k < n; k++) {
        char t[32];
        for (int digits = 6; digits <= 9; digits++) {
            snprintf(t, sizeof t, "%.*g", digits, (double)v[k]);
            if (strtof(t, NULL) == v[k]) break;
        }
        size_t l = strlen(buf);
        snprintf(buf + l, cap - l, "%s%s", k ? "," : "", t);
    }
}

void ct_prep_describe(const ct_prep *p, char *buf, size_t cap) {
    buf[0] = 0;
    if (!p->c) return;
    snprintf(buf, cap, "mean=");
    list(buf, cap, p->mean, p->c);
    snprintf(buf + strlen(buf), cap - strlen(buf), " std=");
    list(buf, cap, p->std, p->c);
}

int ct_prep_parse_list(const char *s, int positive, float *out, int *n, const char **why) {
    static char msg[160];
    *n = 0;
    const char *p = s;
    for (;;) {
        while (*p == ' ' || *p == '\t') p++;
        char *end;
        errno = 0;
        double d = strtod(p, &end);
        if (end == p) {
            snprintf(msg, sizeof msg, "value %d is not a number", *n + 1);
            *why = msg;
            return -1;
        }
        if (!isfinite(d) || errno == ERANGE || fabs(d) > 1e30) {
            snprintf(msg, sizeof msg, "value %d (%.*s) is not a finite number", *n + 1, (int)(end - p), p);
            *why = msg;
            return -1;
        }
        if (positive && !((float)d > 0)) {
            snprintf(msg, sizeof msg, "value %d (%.*s) must be > 0", *n + 1, (int)(end - p), p);
            *why = msg;
            return -1;
        }
        if (*n == CT_PREP_MAX) {
            snprintf(msg, sizeof msg, "more than %d values", CT_PREP_MAX);
            *why = msg;
            return -1;
        }
        out[(*n)++] = (float)d;
        p = end;
        while (*p == ' ' || *p == '\t') p++;
        if (!*p) return 0;
        if (*p != ',') {
            snprintf(msg, sizeof msg, "'%.20s' after value %d; separate the values with commas", p, *n);
            *why = msg;
            return -1;
        }
        p++;
    }
}
