/* data/arrays.c: an image data set from NumPy arrays (arrays.h): the spec
 * string, the checks that turn a wrong file into one line (dtype, rank,
 * layout, labels against images), the held-out split, and the source the
 * producers read samples through (HWC floats, straight from the mapping).
 * Depends on npy.h, source.h. Tested by tests/arrays.sh. */
#include "cltrain/arrays.h"
#include <math.h>
#include <string.h>

#define MAX_CLASSES (1 << 20)

static int has_suffix(const char *s, const char *suf) {
    size_t n = strlen(s), k = strlen(suf);
    return n >= k && !strcmp(s + n - k, suf);
}

static const char *const layout_names[] = {"auto", "nhwc", "nchw", "nhw"};

static int parse_layout(const char *s, int *out) {
    for (int i = 1; i < 4; i++)
        if (!strcasecmp(s, layout_names[i])) { *out = i; return 0; }
    return ct_fail(CT_EINPUT, "--layout %s: expected NHWC, NCHW or NHW", s);
}

/* "A[,B]" into two keys */
static int keys(const char *opt, const char *s, size_t len, char out[2][64]) {
    const char *comma = memchr(s, ',', len);
    size_t a = comma ? (size_t)(comma - s) : len, b = comma ? len - a - 1 : 0;
    if (!a || a >= 64 || b >= 64 || (comma && (!b || memchr(comma + 1, ',', b))))
        return ct_fail(CT_EINPUT, "--%s %.*s: expected KEY or TRAINKEY,TESTKEY (names of the .npz's arrays)", opt, (int)len, s);
    memcpy(out[0], s, a);
    out[0][a] = 0;
    memcpy(out[1], comma ? comma + 1 : "", b);
    out[1][b] = 0;
    return 0;
}

int ct_arrays_spec_parse(ct_arrays_spec *s, const char *spec) {
    memset(s, 0, sizeof *s);
    const char *p = spec, *semi = strchr(p, ';');
    size_t flen = semi ? (size_t)(semi - p) : strlen(p);
    for (const char *f = p; f < p + flen;) {
        const char *c = memchr(f, ',', (size_t)(p + flen - f));
        size_t n = c ? (size_t)(c - f) : (size_t)(p + flen - f);
        if (s->n_files == 4 || !n || n >= CT_ARRAYS_SPEC) return ct_fail(CT_EINPUT, "%s: not an arrays spec (FILE.npz or X.npy,Y.npy[,XT.npy,YT.npy])", spec);
        memcpy(s->files[s->n_files], f, n);
        s->files[s->n_files++][n] = 0;
        f += n + (c ? 1 : 0);
    }
    int npz = s->n_files == 1 && has_suffix(s->files[0], ".npz");
    if (!npz && s->n_files != 2 && s->n_files != 4)
        return ct_fail(CT_EINPUT, "%s: give one .npz, or two or four .npy files (X Y [XTEST YTEST])", spec);
    if (npz) {
        strcpy(s->x[0], "x_train"), strcpy(s->x[1], "x_test");
        strcpy(s->y[0], "y_train"), strcpy(s->y[1], "y_test");
    }
    while (semi) {
        p = semi + 1;
        semi = strchr(p, ';');
        size_t n = semi ? (size_t)(semi - p) : strlen(p);
        int rc;
        if (n > 2 && !strncmp(p, "x=", 2) && npz) rc = keys("x", p + 2, n - 2, s->x);
        else if (n > 2 && !strncmp(p, "y=", 2) && npz) rc = keys("y", p + 2, n - 2, s->y);
        else if (n > 7 && n < 12 && !strncmp(p, "layout=", 7)) {
            char l[8];
            memcpy(l, p + 7, n - 7);
            l[n - 7] = 0;
            rc = parse_layout(l, &s->layout);
        } else
            rc = ct_fail(CT_EINPUT, "%s: unknown part '%.*s' of an arrays spec", spec, (int)n, p);
        if (rc) return rc;
    }
    return 0;
}

int ct_arrays_spec_make(char *out, const char *const *files, int n, const char *x, const char *y, const char *layout) {
    int npz = n == 1 && has_suffix(files[0], ".npz");
    if (!npz && n != 2 && n != 4)
        return ct_fail(CT_EINPUT, "arrays needs FILE.npz, or X.npy Y.npy [XTEST.npy YTEST.npy]; got %d file%s", n, n == 1 ? "" : "s");
    for (int i = 0; i < n; i++) {
        if (!npz && !has_suffix(files[i], ".npy"))
            return ct_fail(CT_EINPUT, "%s: expected a .npy file (or one .npz holding every array)", files[i]);
        if (strpbrk(files[i], ",;"))
            return ct_fail(CT_EINPUT, "%s: a name with ',' or ';' cannot be recorded in a checkpoint; rename it", files[i]);
    }
    if (!npz && (x || y)) return ct_fail(CT_EINPUT, "--x and --y name arrays in an .npz; .npy files are given in order X Y [XTEST YTEST]");
    int len = 0;
    for (int i = 0; i < n; i++) len += snprintf(out + len, CT_ARRAYS_SPEC - (size_t)(len < CT_ARRAYS_SPEC ? len : CT_ARRAYS_SPEC), "%s%s", i ? "," : "", files[i]);
    if (x) len += snprintf(out + len, CT_ARRAYS_SPEC - (size_t)(len < CT_ARRAYS_SPEC ? len : CT_ARRAYS_SPEC), ";x=%s", x);
    if (y) len += snprintf(out + len, CT_ARRAYS_SPEC - (size_t)(len < CT_ARRAYS_SPEC ? len : CT_ARRAYS_SPEC), ";y=%s", y);
    if (layout) len += snprintf(out + len, CT_ARRAYS_SPEC - (size_t)(len < CT_ARRAYS_SPEC ? len : CT_ARRAYS_SPEC), ";layout=%s", layout);
    if (len >= CT_ARRAYS_SPEC) return ct_fail(CT_EINPUT, "%s: file names too long to record (%d characters at most)", files[0], CT_ARRAYS_SPEC - 1);
    ct_arrays_spec s;
    return ct_arrays_spec_parse(&s, out); /* checks the keys and the layout */
}

void ct_arrays_close(ct_arrays *a) {
    for (int k = 0; k < 2; k++) {
        ct_array_free(&a->x[k]);
        ct_array_free(&a->y[k]);
        free(a->labels[k]);
        free(a->rows[k]);
    }
    if (a->class_names)
        for (int i = 0; i < a->n_classes; i++) free(a->class_names[i]);
    free(a->class_names);
    ct_npz_close(&a->npz);
    memset(a, 0, sizeof *a);
}

/* the name of array (x or y) k in messages */
static void name_of(const ct_arrays *a, int y, int k, char *out, size_t cap) {
    const ct_arrays_spec *s = &a->spec;
    if (s->n_files == 1) snprintf(out, cap, "%s: %s", s->files[0], y ? s->y[k] : s->x[k]);
    else snprintf(out, cap, "%s", s->files[2 * k + y]);
}

/* one array of the npz, by key */
static int npz_get(ct_arrays *a, const char *key, ct_array *out) {
    int i = ct_npz_find(&a->npz, key);
    if (i < 0) {
        char have[256] = "";
        for (int j = 0; j < a->npz.n && strlen(have) < 200; j++)
            snprintf(have + strlen(have), sizeof have - strlen(have), "%s%s", j ? ", " : "", a->npz.e[j].name);
        return ct_fail(CT_EINPUT, "%s: no array '%s' in it (it has %s); name the arrays with --x and --y", a->spec.files[0],
                       key, a->npz.n ? have : "none");
    }
    return ct_npz_array(&a->npz, i, out, 0);
}

/* the image shape of x[k] under the layout */
static int shape_of(ct_arrays *a, int k, int *h, int *w, int *c) {
    const ct_array *x = &a->x[k];
    char nm[700];
    name_of(a, 0, k, nm, sizeof nm);
    if (!(x->kind == 'u' && x->size == 1) && x->kind != 'f')
        return ct_fail(CT_EINPUT, "%s: images of dtype %s; cltrain takes uint8 (0..255) or float32 images", nm, ct_array_dtype(x));
    if (x->ndim != 3 && x->ndim != 4)
        return ct_fail(CT_EINPUT, "%s: shape of %d dimension%s; images are (n, h, w), (n, h, w, c) or (n, c, h, w)%s", nm,
                       x->ndim, x->ndim == 1 ? "" : "s", x->ndim == 2 ? " (reshape flat rows, e.g. x.reshape(-1, 28, 28))" : "");
    int layout = a->spec.layout;
    if (!layout) {
        layout = x->ndim == 3 ? CT_LAYOUT_NHW : CT_LAYOUT_NHWC;
        if (x->ndim == 4 && x->shape[3] > 4 && x->shape[1] <= 4)
            return ct_fail(CT_EINPUT, "%s: shape (%lld, %lld, %lld, %lld) looks channels-first; give --layout NCHW (or --layout "
                           "NHWC if it is not)", nm, (long long)x->shape[0], (long long)x->shape[1], (long long)x->shape[2],
                           (long long)x->shape[3]);
    }
    if ((layout == CT_LAYOUT_NHW) != (x->ndim == 3))
        return ct_fail(CT_EINPUT, "%s: --layout %s needs %d dimensions, the array has %d", nm, layout_names[layout],
                       layout == CT_LAYOUT_NHW ? 3 : 4, x->ndim);
    a->layout = layout;
    int64_t H = x->shape[layout == CT_LAYOUT_NCHW ? 2 : 1], W = x->shape[layout == CT_LAYOUT_NCHW ? 3 : 2],
            C = layout == CT_LAYOUT_NHW ? 1 : x->shape[layout == CT_LAYOUT_NCHW ? 1 : 3];
    if (x->shape[0] < 1 || x->shape[0] > (1 << 30))
        return ct_fail(CT_EINPUT, "%s: %lld images; expected 1 to 2^30", nm, (long long)x->shape[0]);
    if (H < 1 || W < 1 || H > 16384 || W > 16384 || C < 1 || C > 4)
        return ct_fail(CT_EINPUT, "%s: images of %lldx%lld with %lld channels (%s); expected sides 1..16384 and 1 to 4 channels", nm,
                       (long long)H, (long long)W, (long long)C, layout_names[layout]);
    *h = (int)H, *w = (int)W, *c = (int)C;
    return 0;
}

/* y[k] as int32 labels, one per image of x[k]; *max gets the largest */
static int labels_of(ct_arrays *a, int k, int classes, int *max) {
    const ct_array *y = &a->y[k];
    char nm[700], xn[700];
    name_of(a, 1, k, nm, sizeof nm);
    name_of(a, 0, k, xn, sizeof xn);
    if (y->kind == 'f')
        return ct_fail(CT_EINPUT, "%s: labels of dtype %s; labels are integers (y.astype(np.int64))", nm, ct_array_dtype(y));
    if (!(y->ndim == 1 || (y->ndim == 2 && y->shape[1] == 1)))
        return ct_fail(CT_EINPUT, "%s: labels of %d dimensions%s; expected shape (n) or (n, 1) of class numbers%s", nm, y->ndim,
                       y->ndim == 2 ? " (n, k)" : "", y->ndim == 2 ? " (one-hot? use y.argmax(1))" : "");
    if (y->shape[0] != a->x[k].shape[0])
        return ct_fail(CT_EINPUT, "%s: %lld labels for the %lld images of %s; they must match", nm, (long long)y->shape[0],
                       (long long)a->x[k].shape[0], xn);
    int32_t *l = ct_xmalloc((size_t)y->shape[0] * sizeof *l + 1);
    for (int64_t i = 0; i < y->shape[0]; i++) {
        int64_t v = ct_array_int(y, i);
        if (v < 0 || v >= (classes ? classes : MAX_CLASSES)) {
            free(l);
            return classes ? ct_fail(CT_EINPUT, "%s: label %lld of row %lld; the model has %d classes", nm, (long long)v, (long long)i, classes)
                           : ct_fail(CT_EINPUT, "%s: label %lld of row %lld; expected class numbers 0..%d", nm, (long long)v,
                                     (long long)i, MAX_CLASSES - 1);
        }
        l[i] = (int32_t)v;
        if (v > *max) *max = (int)v;
    }
    a->labels[k] = l;
    return 0;
}

/* --val-split of each class of pair 0 into the test split, seeded as image folders */
static void hold_out(ct_arrays *a, double val_split, uint64_t seed) {
    int n = (int)a->x[0].shape[0], C = a->n_classes;
    int *count = ct_xcalloc((size_t)C, sizeof *count), **of = ct_xcalloc((size_t)C, sizeof *of);
    unsigned char *to_test = ct_xcalloc((size_t)n, 1);
    for (int i = 0; i < n; i++) count[a->labels[0][i]]++;
    for (int c = 0; c < C; c++) of[c] = ct_xmalloc((size_t)count[c] * sizeof(int) + 1), count[c] = 0;
    for (int i = 0; i < n; i++) of[a->labels[0][i]][count[a->labels[0][i]]++] = i;
    for (int c = 0; c < C; c++) {
        int m = count[c], k = (int)(val_split * m + 0.5);
        if (k > m - 1) k = m - 1;
        char name[16];
        snprintf(name, sizeof name, "%d", c);
        ct_rng r = ct_rng_make(seed, ct_crc32c(name, strlen(name)), 0);
        for (int i = m - 1; i > 0; i--) {
            int j = (int)ct_rng_below(&r, (uint32_t)i + 1), t = of[c][i];
            of[c][i] = of[c][j], of[c][j] = t;
        }
        for (int i = 0; i < k; i++) to_test[of[c][i]] = 1;
        free(of[c]);
    }
    for (int k = 0; k < 2; k++) {
        a->rows[k] = ct_xmalloc((size_t)n * sizeof(int) + 1);
        a->ds[k].n = 0;
    }
    for (int i = 0; i < n; i++) a->rows[to_test[i]][a->ds[to_test[i]].n++] = i;
    a->from[0] = a->from[1] = 0;
    free(count);
    free(of);
    free(to_test);
}

static int arrays_load(void *vctx, int index, float *dst, int32_t *label, ct_rng *rng) {
    (void)rng;
    const ct_arrays_src_ctx *c = vctx;
    const ct_arrays *a = c->set;
    int k = c->split, p = a->from[k];
    int64_t row = a->rows[k] ? a->rows[k][index] : index;
    const ct_array *x = &a->x[p];
    size_t hw = (size_t)a->h * a->w, n = hw * a->c;
    int64_t base = row * (int64_t)n;
    *label = a->labels[p][row];
    if (x->kind == 'u') {
        const uint8_t *px = x->data + base;
        if (a->layout != CT_LAYOUT_NCHW)
            for (size_t j = 0; j < n; j++) dst[j] = (float)px[j] * (1.0f / 255.0f); /* as IDX, shards and folders */
        else
            for (size_t ch = 0; ch < (size_t)a->c; ch++)
                for (size_t j = 0; j < hw; j++) dst[j * a->c + ch] = (float)px[ch * hw + j] * (1.0f / 255.0f);
        return 0;
    }
    int bad = 0;
    for (size_t j = 0; j < n; j++) {
        size_t to = a->layout != CT_LAYOUT_NCHW ? j : (j % hw) * a->c + j / hw;
        float v = ct_array_float(x, base + (int64_t)j);
        bad |= !isfinite(v);
        dst[to] = v;
    }
    if (bad) {
        char nm[700];
        name_of(a, 0, p, nm, sizeof nm);
        return ct_fail(CT_EINPUT, "%s: image %lld holds NaN or Inf", nm, (long long)row);
    }
    return 0;
}

void ct_arrays_bytes(const ct_arrays *a, int k, int i, uint8_t *dst) {
    size_t n = (size_t)a->h * a->w * a->c;
    float *f = ct_xmalloc(n * sizeof *f);
    int32_t l;
    const ct_arrays_src_ctx c = {a, k};
    arrays_load((void *)&c, i, f, &l, NULL); /* NaN and Inf: written as 0 and 255 below */
    for (size_t j = 0; j < n; j++) {
        float v = f[j] * 255.0f; /* uint8 images: exactly their bytes again */
        dst[j] = !(v > 0) ? 0 : v >= 255 ? 255 : (uint8_t)lrintf(v);
    }
    free(f);
}

int ct_arrays_open(ct_arrays *a, const char *spec, double val_split, uint64_t seed, int need_train, int classes) {
    memset(a, 0, sizeof *a);
    int rc = ct_arrays_spec_parse(&a->spec, spec);
    if (rc) return rc;
    ct_arrays_spec *s = &a->spec;
    int npz = s->n_files == 1, test = npz ? s->x[1][0] || s->y[1][0] : s->n_files == 4;
    if (npz) {
        if ((rc = ct_npz_open(&a->npz, s->files[0]))) goto out;
        /* the default test keys are optional (a held-out split without them), given ones are not */
        int dx = ct_npz_find(&a->npz, s->x[1]) >= 0, dy = ct_npz_find(&a->npz, s->y[1]) >= 0;
        if (test && !dx && !dy && !strcmp(s->x[1], "x_test") && !strcmp(s->y[1], "y_test")) test = 0;
        if (test && (!s->x[1][0] || !s->y[1][0])) {
            rc = ct_fail(CT_EINPUT, "%s: --x and --y must both name a test array, or neither", s->files[0]);
            goto out;
        }
    }
    a->held_out = !test;
    for (int k = 0; k < 2 && !rc; k++) {
        if (k == 1 && !test) break;
        if (k == 0 && test && !need_train) continue; /* eval: only the test arrays */
        if (npz) rc = npz_get(a, s->x[k], &a->x[k]) ? -1 : npz_get(a, s->y[k], &a->y[k]);
        else rc = ct_npy_open(&a->x[k], s->files[2 * k]) ? -1 : ct_npy_open(&a->y[k], s->files[2 * k + 1]);
        if (rc == -1) rc = CT_EINPUT;
    }
    if (rc) goto out;
    int max = -1, first = a->x[0].count ? 0 : 1;
    for (int k = first; k < 2 && !rc; k++) {
        if (!a->x[k].data && !a->x[k].count) continue;
        int h = 0, w = 0, c = 0;
        if ((rc = shape_of(a, k, &h, &w, &c))) break;
        if (k > first && (h != a->h || w != a->w || c != a->c)) {
            char nm[700];
            name_of(a, 0, 1, nm, sizeof nm);
            rc = ct_fail(CT_EINPUT, "%s: test images of %dx%dx%d, training images of %dx%dx%d; they must match", nm, h, w, c,
                         a->h, a->w, a->c);
            break;
        }
        a->h = h, a->w = w, a->c = c;
        rc = labels_of(a, k, classes, &max);
    }
    if (rc) goto out;
    a->n_classes = classes ? classes : max + 1;
    if (a->n_classes < 2 && need_train) {
        rc = ct_fail(CT_EINPUT, "%s: every label is %d; training needs at least two classes", s->files[npz ? 0 : 1], max);
        goto out;
    }
    if (a->held_out) hold_out(a, val_split, seed);
    else
        for (int k = 0; k < 2; k++) a->ds[k].n = (int)a->x[k].shape[0], a->from[k] = k;
    a->class_names = ct_xcalloc((size_t)a->n_classes, sizeof(char *));
    for (int i = 0; i < a->n_classes; i++) {
        char nm[16];
        snprintf(nm, sizeof nm, "%d", i);
        a->class_names[i] = strdup(nm);
    }
    for (int k = 0; k < 2; k++) {
        a->ctx[k] = (ct_arrays_src_ctx){a, k};
        ct_source_init(&a->src[k], a->ds[k].n, a->h, a->w, a->c, a->n_classes, &a->ctx[k], arrays_load);
        a->ds[k] = (ct_dataset){.n = a->ds[k].n, .h = a->h, .w = a->w, .c = a->c, .n_classes = a->n_classes,
                                .class_names = a->class_names};
    }
out:
    if (rc) ct_arrays_close(a);
    return rc;
}
