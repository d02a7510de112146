/* nn/layers/globalmaxpool.c: [globalmaxpool]: global max pooling, one value
 * per channel, the largest over the input's pixels; it takes no keys. The
 * forward keeps each maximum's pixel (in own[0]) and the backward routes the
 * gradient there alone. Everything it is lives here: its kernels
 * (kernels/globalmaxpool.cl, built at its first layer), its buffer, its ONNX
 * node. Reference: src/ref/globalmaxpool.c; tests: tests/test_globalmaxpool.c. */
#include "cltrain/layer.h"

typedef struct kind { cl_program p; cl_kernel fwd, bwd; } kind;

static int build(ct_model *m, void **out) {
    kind *k = ct_xcalloc(1, sizeof *k);
    *out = k;
    int rc = ct_cl_build(m->cl, &k->p, "globalmaxpool.cl", "");
    if (rc) return rc;
    k->fwd = ct_cl_kernel(k->p, "globalmaxpool_fwd");
    k->bwd = ct_cl_kernel(k->p, "globalmaxpool_bwd");
    return 0;
}

static void release(void *v) {
    kind *k = v;
    if (k->fwd) clReleaseKernel(k->fwd);
    if (k->bwd) clReleaseKernel(k->bwd);
    if (k->p) clReleaseProgram(k->p);
    free(k);
}

static int shape(ct_model *m, ct_layer *L, const ct_sect *s) {
    (void)m;
    (void)s;
    L->oh = L->ow = 1;
    L->oc = L->ic;
    return 0;
}

/* own[0]: the pixel of each maximum, an int per output */
static int setup(ct_model *m, ct_layer *L, int batch, ct_needs *n) {
    (void)n;
    char what[64];
    snprintf(what, sizeof what, "layer %d maxima positions", (int)(L - m->layers));
    return ct_cl_alloc(m->cl, &L->own[0], ct_out_size(L) * batch * sizeof(cl_int), what);
}

static void forward(ct_model *m, int i, cl_mem x, int B) {
    ct_layer *L = &m->layers[i];
    kind *k = ct_layer_kind(m, L);
    int HW = L->ih * L->iw;
    ct_kargs(k->fwd, L->out, L->own[0], x, HW, L->oc, B);
    size_t g2[2] = {(size_t)L->oc, (size_t)B};
    ct_cl_run(m->cl, k->fwd, "globalmaxpool_fwd", 2, g2, NULL);
}

static void backward(ct_model *m, int i, cl_mem x, cl_mem dy, int B) {
    (void)x;
    ct_layer *L = &m->layers[i];
    if (!L->dx) return;
    kind *k = ct_layer_kind(m, L);
    int HW = L->ih * L->iw, n = B * HW;
    ct_kargs(k->bwd, L->dx, dy, L->own[0], HW, L->oc, n);
    size_t g2[2] = {(size_t)L->oc, (size_t)n};
    ct_cl_run(m->cl, k->bwd, "globalmaxpool_bwd", 2, g2, NULL);
}

const ct_layer_ops ct_layer_globalmaxpool = {
    .type = CT_L_GLOBALMAXPOOL, .name = "globalmaxpool", .keys = NULL, .n_keys = 0,
    .build = build, .release = release, .shape = shape, .setup = setup, .forward = forward, .backward = backward,
};
