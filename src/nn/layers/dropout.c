/* nn/layers/dropout.c: [dropout] probability= (default 0.5): inverted
 * dropout in training, the identity in evaluation. The mask hashes (seed,
 * step, layer, index), so backward recomputes it instead of storing it.
 * Kernels: kernels/dropout.cl. Reference: src/ref/dropout.c; tests:
 * tests/test_dropout.c. */
#include "cltrain/layer.h"

/* the layer's own value (ct_layer.priv): its rate */
#define RATE(L) ((L)->priv.f[0])

static const ct_key keys[] = {CT_KEY_OWN("probability", CT_KEY_PROB, 0, 0, 0)};

static const char *const kernels[] = {"dropout_fwd", "dropout_bwd"};
enum { FWD, BWD };
static int build(ct_model *m, void **kind) { return ct_kernels_build(m, kind, "dropout.cl", kernels, 2); }

static int shape(ct_model *m, ct_layer *L, const ct_sect *s) {
    (void)m;
    L->oh = L->ih; L->ow = L->iw; L->oc = L->ic;
    RATE(L) = s->own[0].f;
    return 0;
}

/* dropout_fwd and dropout_bwd take the same arguments: the mask of (seed, step, layer) */
static void run_dropout(ct_model *m, cl_kernel k, const char *name, cl_mem out, cl_mem in, int n, float p, int layer) {
    ct_kargs(k, out, in, n, p);
    cl_uint seed = m->seed, step = (cl_uint)m->step, lay = (cl_uint)layer;
    CT_ARG(k, 4, seed);
    CT_ARG(k, 5, step);
    CT_ARG(k, 6, lay);
    size_t g1 = (size_t)n;
    ct_cl_run(m->cl, k, name, 1, &g1, NULL);
}

static void forward(ct_model *m, int i, cl_mem x, int B) {
    ct_layer *L = &m->layers[i];
    size_t n = (size_t)B * ct_out_size(L);
    if (!m->training || RATE(L) == 0.0f)
        CL_CHECK(clEnqueueCopyBuffer(m->cl->queue, x, L->out, 0, 0, n * 4, 0, NULL, NULL));
    else
        run_dropout(m, ct_layer_kernel(m, L, FWD), "dropout_fwd", L->out, x, (int)n, RATE(L), i);
}

static void backward(ct_model *m, int i, cl_mem x, cl_mem dy, int B) {
    (void)x;
    ct_layer *L = &m->layers[i];
    if (L->dx) run_dropout(m, ct_layer_kernel(m, L, BWD), "dropout_bwd", L->dx, dy, B * (int)ct_out_size(L), RATE(L), i);
}

static void defaults(ct_sect *s) { s->own[0].f = 0.5f; }

/* the identity at inference: no node */
static int onnx(ct_onnx_graph *g, const ct_model *m, int i, const float *p, char *x, int *rank4) {
    (void)g; (void)m; (void)i; (void)p; (void)x; (void)rank4;
    return 0;
}

const ct_layer_ops ct_layer_dropout = {
    .type = CT_L_DROPOUT, .name = "dropout", .keys = keys, .n_keys = sizeof keys / sizeof *keys,
    .defaults = defaults, .build = build, .release = ct_kernels_release, .shape = shape, .forward = forward, .backward = backward,
    .onnx = onnx,
};
