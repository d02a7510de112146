/* onnx_nodes.h: an ONNX graph as `cltrain import` reads it, and what a layer
 * type's ct_layer_ops.import (cltrain/layer.h) uses to take its own nodes:
 * the node's attributes and constant inputs, the activation it reads, and a
 * new layer with its .cfg section and its weights in cltrain's layout. The
 * importer (src/train/onnx_import.c) reads the protobuf, folds constants,
 * handles views (Slice, Pad, flattens), Relu/Gelu (merged into the layer
 * before) and a final Softmax itself, and asks the layer table for every
 * other node. Implemented by src/nn/onnx_nodes.c; tested by tests/import.sh,
 * tests/onnx.sh and tests/fuzz/fuzz_onnx.c. */
#ifndef CLTRAIN_ONNX_NODES_H
#define CLTRAIN_ONNX_NODES_H
#include "cltrain/model.h"
#include <stdint.h>

/* a TensorProto: values as double (small integer tensors, scalars) and/or float (weights) */
typedef struct ct_onnx_tensor {
    int dtype, ndim;
    int64_t dims[8], n;
    double *v;       /* values (small integer tensors, scalars), or NULL */
    float *f;        /* values as floats (weights), or NULL */
} ct_onnx_tensor;

typedef struct ct_onnx_attr {
    char *name;
    int type;
    int64_t i;
    float f;
    char *s;
    int64_t *ints;
    int n_ints;
    ct_onnx_tensor *t;
} ct_onnx_attr;

typedef struct ct_onnx_node {
    char *op, *name, *domain;
    char **in, **out;
    int n_in, n_out;
    ct_onnx_attr *at;
    int n_at;
} ct_onnx_node;

/* an activation: layer `layer`'s output (-1: the model input), seen through a view */
typedef struct ct_onnx_act {
    int layer, rank, c, h, w; /* rank 4: [N, c, h, w]; rank 2: [N, c*h*w] in (c, h, w) order */
    int step, padc;           /* view: every step-th pixel, padc zero channels appended */
} ct_onnx_act;

/* a named tensor. kind: 1 constant, 2 activation, 3 a step of GELU's formula on activation a (tag: which step,
 * uses: reads of a); dropped: a Softmax output that is its input's */
typedef struct ct_onnx_val { char *name; int kind, dropped, tag, uses; ct_onnx_tensor t; ct_onnx_act a; } ct_onnx_val;

/* a layer being built: what its type's import wrote */
typedef struct ct_onnx_layer {
    int type;                 /* CT_L_*: its index in ct_layer_table */
    int act;                  /* CT_ACT_*: a Relu or Gelu merged into it */
    int oc;                   /* outputs per pixel (of the last layer: the classes) */
    int open;                 /* its type's mark while the graph is walked (dense: a MatMul an Add may still give
                                 the bias of) */
    float *w, *b;             /* its parameters in cltrain's layout, as many as its ct_layer's n_w and n_b, or NULL */
    size_t n_w, n_b;
    char sect[192];           /* its .cfg section ("[conv]\nfilters=8\n..."), activation= left to the importer */
    char node[96];            /* the node it came from, for a comment in the .cfg */
} ct_onnx_layer;

typedef struct ct_onnx_imp {
    const char *path;
    int opset;
    ct_onnx_node *nodes;
    int n_nodes;
    ct_onnx_tensor *inits;
    char **init_names;
    int n_inits;
    struct ct_onnx_vinfo *inputs, *outputs;
    int n_inputs, n_outputs;
    char **meta_k, **meta_v;
    int n_meta;
    ct_onnx_val *vals;
    int n_vals, cap_vals;
    ct_onnx_layer layers[CT_MAX_LAYERS];
    int n_layers;
    ct_onnx_act last;         /* the newest activation */
    int64_t folded;           /* elements made by constant folding so far (bounded) */
    char notes[512];
} ct_onnx_imp;

/* CT_EINPUT with one line: "PATH: node 'NAME' (OP): message" */
int ct_onnx_fail(const ct_onnx_imp *im, const ct_onnx_node *nd, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* a note for the user (once each) */
void ct_onnx_note(ct_onnx_imp *im, const char *s);

/* attribute name of nd, or NULL; its int (def when absent); its ints into out (returns how many it has, 0: absent) */
const ct_onnx_attr *ct_onnx_node_attr(const ct_onnx_node *nd, const char *name);
int64_t ct_onnx_node_int(const ct_onnx_node *nd, const char *name, int64_t def);
int ct_onnx_node_ints(const ct_onnx_node *nd, const char *name, int64_t *out, int cap);

/* the newest value named name, or NULL; a new one (kind as ct_onnx_val); name an activation */
ct_onnx_val *ct_onnx_find(ct_onnx_imp *im, const char *name);
ct_onnx_val *ct_onnx_add_val(ct_onnx_imp *im, const char *name, int kind);
void ct_onnx_set_act(ct_onnx_imp *im, const char *name, ct_onnx_act a);
/* input k of nd as a constant, or as an activation (NULL: absent, or the other kind) */
const ct_onnx_tensor *ct_onnx_const_in(ct_onnx_imp *im, const ct_onnx_node *nd, int k);
const ct_onnx_act *ct_onnx_act_in(ct_onnx_imp *im, const ct_onnx_node *nd, int k);
/* a layer's input: input 0 of nd into *x, which must be the newest activation seen whole (cltrain models are
 * sequences), else the error line */
int ct_onnx_newest(ct_onnx_imp *im, const ct_onnx_node *nd, const ct_onnx_act **x);
/* a 2-D pooling window over x without padding or dilation: k[2] and st[2] (stride 1 when absent), else the error */
int ct_onnx_pool_window(ct_onnx_imp *im, const ct_onnx_node *nd, int64_t k[2], int64_t st[2]);

/* A new layer of type `type` from nd, its .cfg section the printf of fmt; its output, `out` (whose .layer is set
 * to the new layer's), becomes the newest activation and nd's output 0. NULL after the error line when the model
 * would have too many layers. */
ct_onnx_layer *ct_onnx_layer_add(ct_onnx_imp *im, const ct_onnx_node *nd, int type, ct_onnx_act out, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
/* the floats of t, copied */
float *ct_onnx_floats(const ct_onnx_tensor *t);
#endif
