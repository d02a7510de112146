/* nn/layers/table.c: the table of layer types (one line each) and the
 * helpers the layer files share. A _Static_assert keeps the table and the
 * CT_L_* enum the same length; tests/test_model.c checks each slot holds
 * the ops of its own type. */
#include "cltrain/layer.h"
#include <math.h>
#include <string.h>

extern const ct_layer_ops ct_layer_conv, ct_layer_maxpool, ct_layer_dense, ct_layer_batchnorm, ct_layer_avgpool,
    ct_layer_dropout, ct_layer_shortcut, ct_layer_globalmaxpool;

const ct_layer_ops *const ct_layer_table[] = {
    [CT_L_CONV] = &ct_layer_conv,
    [CT_L_MAXPOOL] = &ct_layer_maxpool,
    [CT_L_DENSE] = &ct_layer_dense,
    [CT_L_BATCHNORM] = &ct_layer_batchnorm,
    [CT_L_AVGPOOL] = &ct_layer_avgpool,
    [CT_L_DROPOUT] = &ct_layer_dropout,
    [CT_L_SHORTCUT] = &ct_layer_shortcut,
    [CT_L_GLOBALMAXPOOL] = &ct_layer_globalmaxpool,
};
_Static_assert(sizeof ct_layer_table / sizeof *ct_layer_table == CT_L_COUNT, "one ct_layer_table line per CT_L_* type");
_Static_assert(CT_L_COUNT <= CT_MAX_LAYER_TYPES, "room in ct_model.kinds for every type");

const char *const ct_layer_names[] = {
    [CT_L_CONV] = "conv", [CT_L_MAXPOOL] = "maxpool", [CT_L_DENSE] = "dense", [CT_L_BATCHNORM] = "batchnorm",
    [CT_L_AVGPOOL] = "avgpool", [CT_L_DROPOUT] = "dropout", [CT_L_SHORTCUT] = "shortcut",
    [CT_L_GLOBALMAXPOOL] = "globalmaxpool",
};
_Static_assert(sizeof ct_layer_names / sizeof *ct_layer_names == CT_L_COUNT, "one ct_layer_names entry per CT_L_* type");

const ct_activation ct_activations[CT_ACT_COUNT] = {
    [CT_ACT_LINEAR] = {"linear", 0},
    [CT_ACT_RELU] = {"relu", 0},
    [CT_ACT_GELU] = {"gelu", 1},
};

cl_mem ct_layer_output(const ct_model *m, int j) { return j < 0 ? m->input : m->layers[j].out; }

void ct_layer_init_he(const ct_layer *L, int i, float *p, uint64_t seed) {
    size_t fan_in = L->n_w / (size_t)L->oc;
    float std = sqrtf(2.0f / (float)fan_in);
    ct_rng r = ct_rng_make(seed, 0x1417, (uint64_t)i);
    for (size_t j = 0; j < L->n_w; j++) p[L->w_off + j] = std * ct_rng_normal(&r);
}

void ct_layer_decay_weights(const ct_layer *L, uint8_t *mask) { memset(mask + L->w_off, 1, L->n_w); }

int ct_layer_reserve_gemm(ct_model *m, int M, int N, int K) {
    int rc;
    if ((rc = ct_gemm_reserve(&m->gemm, 0, 0, M, N, K))) return rc;
    if ((rc = ct_gemm_reserve(&m->gemm, 1, 0, K, N, M))) return rc;
    if ((rc = ct_gemm_reserve(&m->gemm, 1, 0, 1, N, M))) return rc;
    return ct_gemm_reserve(&m->gemm, 0, 1, M, K, N);
}
