/* nn/whiten.c: a whitening convolution's weights from the patch covariance
 * (cltrain/whiten.h). LAPACKE_dsyev (Debian's liblapacke) decomposes the
 * d x d symmetric matrix (d = 12 for 2x2 RGB patches). Tested by tests/test_whiten.c.
 *
 * liblapacke is opened here, when a whitening layer is computed, not linked:
 * Debian's LAPACK is often OpenBLAS, whose library constructor starts a
 * thread pool in every process that links it, and whose threads never stop
 * retrying their buffer allocation under a memory limit (`ulimit -v`), so
 * every cltrain command would pay for one 12x12 decomposition. */
#include "cltrain/whiten.h"
#include <dlfcn.h>
#include <lapacke.h>
#include <math.h>
#include <string.h>

typedef lapack_int dsyev_fn(int layout, char jobz, char uplo, lapack_int n, double *a, lapack_int lda, double *w);

/* LAPACKE_dsyev from liblapacke.so.3 (kept open for the process), or NULL with why in *why */
static dsyev_fn *load_dsyev(const char **why) {
    static dsyev_fn *fn;
    if (fn) return fn;
    void *h = dlopen("liblapacke.so.3", RTLD_NOW | RTLD_LOCAL);
    if (!h) h = dlopen("liblapacke.so", RTLD_NOW | RTLD_LOCAL);
    if (!h) { *why = dlerror(); return NULL; }
    void *sym = dlsym(h, "LAPACKE_dsyev");
    if (!sym) { *why = dlerror(); return NULL; }
    memcpy(&fn, &sym, sizeof fn); /* POSIX: a dlsym result may be used as a function pointer */
    return fn;
}

int ct_whiten_layer(const ct_model *m) {
    for (int i = 0; i < m->n_layers; i++)
        if (m->layers[i].whiten) return i;
    return -1;
}

long ct_whiten_accumulate(double *cov, const float *x, int B, int h, int w, int c, int k) {
    int d = k * k * c;
    double p[d];
    long n = 0;
    for (int b = 0; b < B; b++)
        for (int y = 0; y + k <= h; y++)
            for (int xx = 0; xx + k <= w; xx++, n++) {
                for (int ky = 0; ky < k; ky++)
                    for (int kx = 0; kx < k; kx++)
                        for (int ch = 0; ch < c; ch++)
                            p[(ky * k + kx) * c + ch] = x[(((size_t)b * h + y + ky) * w + xx + kx) * c + ch];
                for (int i = 0; i < d; i++)
                    for (int j = i; j < d; j++) cov[i * d + j] += p[i] * p[j];
            }
    return n;
}

int ct_whiten_weights(const ct_layer *L, const double *cov, long n, float *params) {
    int d = L->k * L->k * L->ic;
    CT_ASSERT(L->oc == 2 * d);
    if (n <= 0) return ct_fail(CT_EINPUT, "layer at .cfg line %d: whiten= has no image patches to compute from", L->line);
    double a[d * d], val[d];
    for (int i = 0; i < d; i++) /* the upper triangle was summed; the mean, mirrored */
        for (int j = 0; j < d; j++) a[i * d + j] = (j >= i ? cov[i * d + j] : cov[j * d + i]) / (double)n;
    const char *why = "";
    dsyev_fn *dsyev = load_dsyev(&why);
    if (!dsyev)
        return ct_fail(CT_EINPUT, "layer at .cfg line %d: whiten= needs LAPACK (%s); install Debian's liblapacke", L->line,
                       why ? why : "not found");
    lapack_int info = dsyev(LAPACK_ROW_MAJOR, 'V', 'U', d, a, d, val);
    if (info) return ct_fail(CT_EIO, "layer at .cfg line %d: whiten=: LAPACK's dsyev failed (info %d)", L->line, (int)info);
    /* dsyev: ascending eigenvalues, eigenvector e in column e of a (row-major); filter f: the (d-1-f)-th */
    float *W = params + L->w_off;
    for (int f = 0; f < d; f++) {
        int e = d - 1 - f;
        double s = 1.0 / sqrt(val[e] + CT_WHITEN_EPS);
        for (int j = 0; j < d; j++) {
            float v = (float)(a[j * d + e] * s);
            W[(size_t)j * L->oc + (size_t)f] = v;
            W[(size_t)j * L->oc + (size_t)(f + d)] = -v;
        }
    }
    return 0;
}
