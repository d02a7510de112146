/* layer.h: the one table every layer type registers in. A layer type is a
 * file src/nn/layers/<name>.c giving a ct_layer_ops: the keys its .cfg
 * section takes, its output shape and parameter sizes, FLOPs, device setup,
 * forward, backward, initial values, which weights decay and which state the
 * optimizer must not move, its device state (build, release) and its ONNX
 * nodes, exported and imported. src/nn/model.c only sequences them, src/nn/cfg.c reads their sections. The recipe
 * for a new type is docs/ADDING_A_LAYER.md. Tested by tests/test_model.c
 * (parsing, the table itself) and tests/test_layers.c (device vs reference). */
#ifndef CLTRAIN_LAYER_H
#define CLTRAIN_LAYER_H
#include "cltrain/onnx_graph.h"
#include "cltrain/onnx_nodes.h"
#include "cltrain/layer_types.h"
#include <stddef.h>
#include <string.h>

/* Layer types: CT_L_CONV, ... in the order of cltrain/layer_types.h, the
 * one list of them; CT_LAYER_TYPES counts them. */
#define CT_LAYER_ENUM_(E, name) CT_L_##E,
enum { CT_LAYER_TYPE_LIST(CT_LAYER_ENUM_) CT_LAYER_TYPES };
#undef CT_LAYER_ENUM_

/* A parsed section: every key any layer takes, with the defaults set before
 * the section's own keys are read. has: bit (1 << index in the section's key
 * list) for each key given. */
/* a CT_KEY_FLOATS value: up to CT_PREP_MAX numbers and the line they were on */
typedef struct ct_key_list { int n, line; float v[CT_PREP_MAX]; } ct_key_list;

typedef union ct_sect_slot { int i; float f; } ct_sect_slot;
typedef struct ct_sect {
    const char *file;  /* for messages */
    int line;          /* the [section] header's line */
    const char *kind;  /* the section name as written */
    int height, width, channels, classes;      /* [net] */
    ct_key_list mean, std;                     /* [net]: the input normalisation (prep.h) */
    int filters, size, stride, pad, outputs, act, from, projection;
    /* parameter keys (the layers that take them copy them into ct_layer) */
    int bias, init, bias_decay, bias_epochs, whiten; /* [conv], [dense]: bias=0 (none), init=he|dirac|uniform; whiten=N */
    float lr, bias_lr, scale;                        /* lr multipliers of the weights and biases; [dense] scale= */
    float momentum, eps;                             /* [batchnorm] */
    /* a type's own keys (CT_KEY_OWN), which no other type reads: each slot an
     * int (CT_KEY_INT, CT_KEY_ACT) or a float (CT_KEY_PROB, CT_KEY_FLOAT);
     * 0 unless its defaults set them */
    ct_sect_slot own[8];
    unsigned has;
} ct_sect;

enum { CT_KEY_INT, CT_KEY_PROB, CT_KEY_ACT, CT_KEY_FLOATS, CT_KEY_FLOAT, CT_KEY_NAME };
/* A key a section takes, stored at off in ct_sect: an int in [lo, hi], a
 * probability in [0, 1), an activation, a comma-separated list of finite
 * numbers (a ct_key_list; lo 1: each > 0), a float in [lo, hi] (a number or a
 * fraction "1/9"), or one of the NULL-terminated names (an int: its index). */
typedef struct ct_key { const char *name; int type, lo, hi; size_t off; const char *const *names; } ct_key;
#define CT_KEY(field, t, lo, hi) {#field, t, lo, hi, offsetof(ct_sect, field), NULL}
/* a key of the type's own in slot k of ct_sect.own, so that a new type's new
 * key needs no ct_sect field: [dropout]'s CT_KEY_OWN("probability",
 * CT_KEY_PROB, 0, 0, 0) is read as s->own[0].f */
#define CT_KEY_OWN(name, t, lo, hi, k) {name, t, lo, hi, offsetof(ct_sect, own) + (k) * sizeof(ct_sect_slot), NULL}
#define CT_KEY_NAMES(field, list) {#field, CT_KEY_NAME, 0, 0, offsetof(ct_sect, field), list}
#define CT_KEY_ACTIVATION {"activation", CT_KEY_ACT, 0, 0, offsetof(ct_sect, act), NULL}
/* init= of [conv] and [dense]: He-normal (the default); Dirac (identity) on the
 * first min(in, out) filters of a convolution and PyTorch's default,
 * U(-1/sqrt(fan_in), 1/sqrt(fan_in)), on the rest; that default on all */
enum { CT_INIT_HE, CT_INIT_DIRAC, CT_INIT_UNIFORM };
extern const char *const ct_init_names[];
/* 1 if key number k of the section's list was given */
#define CT_HAS(s, k) (((s)->has >> (k)) & 1u)

/* What ct_model_setup must size for all layers together: the workspace
 * (floats: im2col columns, Winograd's V, ...), the ones vector, and two
 * further workspaces (floats; 0: none: Winograd's); and a running total of
 * what layers have allocated for themselves to keep (bytes). */
typedef struct ct_needs {
    size_t ws, ones, ws2, ws3;
    size_t kept;                /* bytes of per-layer buffers kept between forward and backward so far */
} ct_needs;

/* A layer's pass through its activation's gradient (ct_act_pass), as the sequencer runs it over the
 * layer's gradient dy, in place: dy = act'(dy) at t (the layer's output, or its pre-activation where
 * the gradient reads that), and with both (a dx_is_dy layer with a dx) also into dx2 */
typedef struct ct_act_grad { cl_mem t, dx2; int act, both; } ct_act_grad;

typedef struct ct_layer_ops {
    int type;                  /* its CT_L_* value (checked against its table slot) */
    const char *name, *alias;  /* section name, and a darknet alias or NULL */
    const ct_key *keys;        /* the keys its section takes; anything else is an error */
    int n_keys;
    void (*defaults)(ct_sect *s);  /* values before the keys are read; NULL: the common ones */
    /* From the section and L->ih/iw/ic: L's output shape, k/stride/pad,
     * n_w and n_b (the model then packs w_off and b_off). An error names
     * s->file, s->line and the section. */
    int (*shape)(ct_model *m, ct_layer *L, const ct_sect *s);
    double (*flops)(const ct_layer *L);  /* forward FLOPs per sample (multiply-add = 2); NULL: 0 */
    /* The type's device state (programs, kernels: OpenCL objects are per
     * context) into *kind, called by ct_model_setup at the type's first
     * layer; ct_layer_kind(m, L) returns it. release frees it (ct_model_free).
     * NULL: none. */
    int (*build)(ct_model *m, void **kind);
    void (*release)(void *kind);
    /* Per-layer buffers (in L->own) and GEMM shapes for batch `batch`; raises *n. NULL: none. */
    int (*setup)(ct_model *m, ct_layer *L, int batch, ct_needs *n);
    /* x: the layer's input [B, ih, iw, ic]; writes L->out */
    void (*forward)(ct_model *m, int i, cl_mem x, int B);
    /* dy: gradient of L's (activated) output, taken through the activation
     * in place (by the sequencer, or for a ReLU with L->relu_next by the next
     * layer's backward; with act_inside set, the backward applies it itself:
     * dy is as given);
     * parameter gradients accumulate, L->dx (when not NULL) is overwritten */
    void (*backward)(ct_model *m, int i, cl_mem x, cl_mem dy, int B);
    /* Non-NULL: it may be the model's last layer, its outputs the classes (the
     * softmax's logits), and this key of its section sets how many (the
     * model's rewrite to a data set's classes changes it) */
    const char *logits;
    int act_inside;            /* 1: backward takes dy through L's activation itself (batch norm: from x, or GELU's
                                  derivative kept by the forward; no pass over y) */
    int dx_is_dy;              /* 1: L->dx is dy through the activation, unchanged (a shortcut's): the sequencer's
                                  pass through the activation writes it as well as dy, and backward copies dy into
                                  L->dx only where that pass did not run (activation linear, or L->relu_next) */
    /* A layer reading a second, earlier output (L->from >= 0): add its
     * gradient w.r.t. that output into target [B, shape of layer from].
     * Called by the sequencer once layer from+1 has written target. With
     * ag (the last such add, where layer from has a pass through its
     * activation's gradient: ct_act_pass) it may do that pass too, in the
     * same kernel: it returns 1 when it did, and layer from's backward
     * skips it; 0 otherwise. */
    int (*backward_from)(ct_model *m, int i, cl_mem target, int B, const ct_act_grad *ag);
    /* What ct_model_summary prints after L's shape (conv: its algorithm); NULL: nothing */
    void (*summary)(const ct_layer *L, FILE *out);
    /* Initial parameters into p (the whole flat buffer); NULL: none */
    void (*init)(const ct_layer *L, int i, float *p, uint64_t seed);
    /* Its ONNX nodes (cltrain/onnx_graph.h) for layer i with the weights p:
     * x holds the input tensor's name and receives the output's; *rank4 is 1
     * when x is [N, C, H, W], 0 when [N, F], and is updated. NULL: export
     * refuses the model, naming the layer. */
    int (*onnx)(ct_onnx_graph *g, const ct_model *m, int i, const float *p, char *x, int *rank4);
    /* Its ONNX nodes on import (cltrain/onnx_nodes.h), asked in table order
     * for each node the importer does not handle itself: 1 when nd is not
     * one of its ops; else it takes nd: its layer added (ct_onnx_layer_add:
     * its .cfg section, its weights in cltrain's layout), 0, or the one
     * error line, < 0. onnx_ops names those ops for the importer's list of
     * what it takes. NULL: no ONNX node imports as this type. */
    int (*import)(ct_onnx_imp *im, const ct_onnx_node *nd);
    const char *onnx_ops;
    /* Mark (1) the parameters weight decay applies to; NULL: none */
    void (*decay)(const ct_layer *L, uint8_t *mask);
    /* State kept in the weights that the optimizer must not move (its
     * gradient stays 0) and data-parallel ranks average: count of floats,
     * first at *off. NULL: none. */
    size_t (*state)(const ct_layer *L, size_t *off);
} ct_layer_ops;

/* Indexed by CT_L_*, made from cltrain/layer_types.h (src/nn/layers/table.c) */
extern const ct_layer_ops *const ct_layer_table[CT_LAYER_TYPES];
static inline const ct_layer_ops *ct_layer_ops_of(const ct_layer *L) { return ct_layer_table[L->type]; }
/* its section name ("conv") */
static inline const char *ct_layer_name(const ct_layer *L) { return ct_layer_table[L->type]->name; }
/* the device state L's type built (ct_layer_ops.build) */
static inline void *ct_layer_kind(const ct_model *m, const ct_layer *L) { return m->kinds[L->type]; }

/* A program and its kernels, what most layer types' state is: load builds
 * file with opts and takes the n kernels named; unload releases them.
 * ct_kernels_build / ct_kernels_release are the ct_layer_ops.build and
 * .release of a type whose state is one ct_kernels; ct_layer_kernel(m, L, j)
 * is its j-th kernel. */
#define CT_MAX_KERNELS 12
typedef struct ct_kernels { cl_program p; cl_kernel k[CT_MAX_KERNELS]; int n; } ct_kernels;
int ct_kernels_load(ct_model *m, ct_kernels *ks, const char *file, const char *opts, const char *const *names, int n);
void ct_kernels_unload(ct_kernels *ks);
int ct_kernels_build(ct_model *m, void **kind, const char *file, const char *const *names, int n);
void ct_kernels_release(void *kind);
static inline cl_kernel ct_layer_kernel(const ct_model *m, const ct_layer *L, int j) {
    return ((const ct_kernels *)ct_layer_kind(m, L))->k[j];
}

/* Batch norm's parameters, the one place their layout is written: weights
 * gamma[C], running mean[C], running variance[C]; bias beta[C]. kernels/bn.cl
 * receives each offset. */
typedef struct ct_bn_slices { size_t gamma, mean, var, beta, C; } ct_bn_slices;
static inline ct_bn_slices ct_bn_layout(const ct_layer *L) {
    size_t C = (size_t)L->oc;
    ct_bn_slices s = {L->w_off, L->w_off + C, L->w_off + 2 * C, L->b_off, C};
    return s;
}

/* A batch norm's [mean, invstd] (2*C floats) from its last forward: what a conv that normalises the
 * batch norm's input as it loads it (ct_layer.normed) reads */
cl_mem ct_bn_stats(const ct_layer *L);

/* shared by the layer files */
static inline size_t ct_in_size(const ct_layer *L) { return (size_t)L->ih * L->iw * L->ic; }
static inline size_t ct_out_size(const ct_layer *L) { return (size_t)L->oh * L->ow * L->oc; }
/* floats per work-item of the per-channel element-wise kernels (bn.cl,
 * shortcut.cl) over C channels: a CPU moves a pixel's channels 16 at a time
 * when C allows, a GPU one float per work-item (neighbours read neighbours) */
static inline int ct_channel_vw(const ct_model *m, int C) { return m->cl->is_cpu && C % 16 == 0 ? 16 : 1; }
/* The activation L's forward kernels apply. An activation whose gradient
 * reads its input (GELU) runs split while training, unless the layer's
 * backward recomputes that input (act_inside): the kernels write the
 * pre-activation (linear), then the sequencer applies the activation,
 * keeping its input in L->act_in. A layer below m->grad_from has no
 * backward (frozen: cifar-fast's whitening layer once its bias stops
 * training), so its kernels apply the activation themselves. */
static inline int ct_fused_act(const ct_model *m, const ct_layer *L) {
    return L->act_in && m->training && (int)(L - m->layers) >= m->grad_from ? CT_ACT_LINEAR : L->act;
}
/* Whether ct_layer_backward takes L's dy through its activation in a pass of
 * its own (act_bwd): not where the activation is linear, the next layer folds
 * a ReLU's backward into its own (relu_next) or L's backward does it
 * (act_inside). A dx_is_dy layer's backward copies dy only where it does not. */
static inline int ct_act_pass(const ct_layer *L) {
    return L->act != CT_ACT_LINEAR && !L->relu_next && !ct_layer_ops_of(L)->act_inside;
}
/* whether the layer after layer j reads j's output alone: no layer takes it
 * as a second input (from == j), the condition of the fusions across a
 * boundary (relu_next, pool_next, add_next) */
static inline int ct_next_reads_alone(const ct_model *m, int j) {
    for (int s = 0; s < m->n_layers; s++)
        if (m->layers[s].from == j) return 0;
    return 1;
}
/* the output of layer j, or the network input for j == -1 */
cl_mem ct_layer_output(const ct_model *m, int j);
/* He-normal weights, zero biases (stream (seed, 0x1417, i)) */
void ct_layer_init_he(const ct_layer *L, int i, float *p, uint64_t seed);
/* L->init's weights (CT_INIT_*; he: ct_layer_init_he), zero biases */
void ct_layer_init_weights(const ct_layer *L, int i, float *p, uint64_t seed);
/* weight decay on the weights, not the biases */
void ct_layer_decay_weights(const ct_layer *L, uint8_t *mask);
/* reserve the four GEMM shapes of y[M, N] = x[M, K] W[K, N] and its backward */
int ct_layer_reserve_gemm(ct_model *m, int M, int N, int K);
/* The products of a layer y = act(x W + b) with W [K, L->oc] at L->w_off and
 * b at L->b_off in the flat parameters, over `rows` rows:
 * forward  y[rows, oc] = act(s x[rows, K] W + b) + beta * y   (s: L->scale; no b when L->n_b is 0)
 * dW       grads[w_off] += s x^T dy
 * dx       dx[rows, K] = s dy W^T + beta * dx
 * bias     grads[off, off + N) += the sum of the R rows of X [R, N] from
 *          offset offX (1^T X: a bias gradient, or the sum of partial
 *          gradients), one GEMM with the model's row of ones (ct_needs.ones >= R) */
void ct_layer_gemm_forward(ct_model *m, const ct_layer *L, cl_mem x, int rows, int K, float beta, cl_mem y, int act);
void ct_layer_gemm_dw(ct_model *m, const ct_layer *L, cl_mem x, cl_mem dy, int rows, int K);
void ct_layer_gemm_dx(ct_model *m, const ct_layer *L, cl_mem dy, int rows, int K, float beta, cl_mem dx);
void ct_layer_bias_grad(ct_model *m, cl_mem X, size_t offX, int R, int N, size_t off);
#endif
