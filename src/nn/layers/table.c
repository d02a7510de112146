/* nn/layers/table.c: the table of layer types, made from the one list in
 * cltrain/layer_types.h, and the helpers the layer files share.
 * tests/test_model.c checks each slot holds the ops of its own type. */
#include "cltrain/layer.h"
#include <math.h>
#include <string.h>

#define CT_LAYER_EXTERN_(E, name) extern const ct_layer_ops ct_layer_##name;
CT_LAYER_TYPE_LIST(CT_LAYER_EXTERN_)
#define CT_LAYER_SLOT_(E, name) [CT_L_##E] = &ct_layer_##name,
const ct_layer_ops *const ct_layer_table[CT_LAYER_TYPES] = {CT_LAYER_TYPE_LIST(CT_LAYER_SLOT_)};
_Static_assert(CT_LAYER_TYPES <= CT_MAX_LAYER_TYPES, "room in ct_model.kinds for every type");

const ct_activation ct_activations[CT_ACT_COUNT] = {
    [CT_ACT_LINEAR] = {"linear", 0},
    [CT_ACT_RELU] = {"relu", 0},
    [CT_ACT_GELU] = {"gelu", 1},
};

int ct_kernels_load(ct_model *m, ct_kernels *ks, const char *file, const char *opts, const char *const *names, int n) {
    CT_ASSERT(n <= CT_MAX_KERNELS);
    int rc = ct_cl_build(m->cl, &ks->p, file, opts);
    if (rc) return rc;
    for (ks->n = 0; ks->n < n; ks->n++) ks->k[ks->n] = ct_cl_kernel(ks->p, names[ks->n]);
    return 0;
}

void ct_kernels_unload(ct_kernels *ks) {
    for (int j = 0; j < ks->n; j++) clReleaseKernel(ks->k[j]);
    if (ks->p) clReleaseProgram(ks->p);
    memset(ks, 0, sizeof *ks);
}

int ct_kernels_build(ct_model *m, void **kind, const char *file, const char *const *names, int n) {
    ct_kernels *ks = ct_xcalloc(1, sizeof *ks);
    *kind = ks;
    return ct_kernels_load(m, ks, file, "", names, n);
}

void ct_kernels_release(void *kind) {
    ct_kernels_unload(kind);
    free(kind);
}

cl_mem ct_layer_output(const ct_model *m, int j) { return j < 0 ? m->input : m->layers[j].out; }

void ct_layer_init_he(const ct_layer *L, int i, float *p, uint64_t seed) {
    size_t fan_in = L->n_w / (size_t)L->oc;
    float std = sqrtf(2.0f / (float)fan_in);
    ct_rng r = ct_rng_make(seed, 0x1417, (uint64_t)i);
    for (size_t j = 0; j < L->n_w; j++) p[L->w_off + j] = std * ct_rng_normal(&r);
}

const char *const ct_init_names[] = {"he", "dirac", "uniform", NULL};

/* PyTorch's default for Conv2d and Linear weights (kaiming_uniform_ with a = sqrt(5)):
 * U(-1/sqrt(fan_in), 1/sqrt(fan_in)); Dirac: then filter o < min(ic, oc) is zero but
 * for a 1 at its centre tap (k/2, k/2) on input channel o, nn.init.dirac_'s identity */
void ct_layer_init_weights(const ct_layer *L, int i, float *p, uint64_t seed) {
    if (L->init == CT_INIT_HE) {
        ct_layer_init_he(L, i, p, seed);
        return;
    }
    size_t fan_in = L->n_w / (size_t)L->oc;
    float bound = 1.0f / sqrtf((float)fan_in);
    ct_rng r = ct_rng_make(seed, 0x1417, (uint64_t)i);
    float *w = p + L->w_off;
    for (size_t j = 0; j < L->n_w; j++) w[j] = bound * (2.0f * ct_rng_uniform(&r) - 1.0f);
    if (L->init != CT_INIT_DIRAC) return;
    int n = L->ic < L->oc ? L->ic : L->oc, k = L->k, centre = (k / 2) * k + k / 2;
    for (int o = 0; o < n; o++) {
        for (size_t j = 0; j < fan_in; j++) w[j * (size_t)L->oc + (size_t)o] = 0.0f;
        w[((size_t)centre * L->ic + (size_t)o) * L->oc + (size_t)o] = 1.0f;
    }
}

void ct_layer_decay_weights(const ct_layer *L, uint8_t *mask) { memset(mask + L->w_off, 1, L->n_w); }

void ct_layer_gemm_forward(ct_model *m, const ct_layer *L, cl_mem x, int rows, int K, float beta, cl_mem y, int act) {
    ct_gemm_run(&m->gemm, &(ct_gemm_desc){.M = rows, .N = L->oc, .K = K, .alpha = L->scale, .beta = beta, .A = x, .lda = K,
                                          .B = m->params, .offB = L->w_off, .ldb = L->oc, .C = y, .ldc = L->oc,
                                          .bias = L->n_b ? m->params : NULL, .offBias = L->b_off, .act = act});
}

void ct_layer_gemm_dw(ct_model *m, const ct_layer *L, cl_mem x, cl_mem dy, int rows, int K) {
    ct_gemm_run(&m->gemm, &(ct_gemm_desc){.transA = 1, .M = K, .N = L->oc, .K = rows, .alpha = L->scale, .beta = 1.0f, .A = x,
                                          .lda = K, .B = dy, .ldb = L->oc, .C = m->grads, .offC = L->w_off, .ldc = L->oc});
}

void ct_layer_gemm_dx(ct_model *m, const ct_layer *L, cl_mem dy, int rows, int K, float beta, cl_mem dx) {
    ct_gemm_run(&m->gemm, &(ct_gemm_desc){.transB = 1, .M = rows, .N = K, .K = L->oc, .alpha = L->scale, .beta = beta, .A = dy,
                                          .lda = L->oc, .B = m->params, .offB = L->w_off, .ldb = L->oc, .C = dx, .ldc = K});
}

void ct_layer_bias_grad(ct_model *m, cl_mem X, size_t offX, int R, int N, size_t off) {
    ct_gemm_run(&m->gemm, &(ct_gemm_desc){.transA = 1, .M = 1, .N = N, .K = R, .alpha = 1.0f, .beta = 1.0f, .A = m->ones,
                                          .lda = 1, .B = X, .offB = offX, .ldb = N, .C = m->grads, .offC = off, .ldc = N});
}

int ct_layer_reserve_gemm(ct_model *m, int M, int N, int K) {
    int rc;
    if ((rc = ct_gemm_reserve(&m->gemm, 0, 0, M, N, K))) return rc;
    if ((rc = ct_gemm_reserve(&m->gemm, 1, 0, K, N, M))) return rc;
    if ((rc = ct_gemm_reserve(&m->gemm, 1, 0, 1, N, M))) return rc;
    return ct_gemm_reserve(&m->gemm, 0, 1, M, K, N);
}
