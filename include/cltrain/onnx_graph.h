/* onnx_graph.h: an ONNX graph built node by node. A layer type writes its
 * nodes with these from its ct_layer_ops.onnx (cltrain/layer.h); the
 * exporter (cltrain/onnx.h, src/train/onnx.c) writes the input preparation,
 * calls each layer's, and wraps the graph into a ModelProto (opset 13).
 * Tensors are named by char[CT_ONNX_NAME] strings; a layer's onnx gets its
 * input's name in x and leaves its output's there. Implemented by
 * src/nn/onnx_graph.c (a hand encoder of protobuf's wire format); tested by
 * tests/onnx.sh (onnx.checker and onnxruntime against cltrain). */
#ifndef CLTRAIN_ONNX_GRAPH_H
#define CLTRAIN_ONNX_GRAPH_H
#include "cltrain/onnx.h"

#define CT_ONNX_NAME 32
typedef struct ct_onnx_graph ct_onnx_graph;

/* a fresh tensor name "what_N" into out */
void ct_onnx_fresh(ct_onnx_graph *g, char *out, const char *what);
/* a node reading n_in tensors and writing out; attributes between begin and end */
void ct_onnx_begin(ct_onnx_graph *g, const char *op, const char *const *in, int n_in, const char *out);
void ct_onnx_attr_ints(ct_onnx_graph *g, const char *name, const int64_t *v, int n);
void ct_onnx_attr_int(ct_onnx_graph *g, const char *name, int64_t v);
void ct_onnx_attr_float(ct_onnx_graph *g, const char *name, float f);
void ct_onnx_end(ct_onnx_graph *g);
/* a node of one or two inputs and no attributes; ct_onnx_apply: op on x into a fresh "what_N", x renamed to it */
void ct_onnx_node1(ct_onnx_graph *g, const char *op, const char *x, const char *out);
void ct_onnx_node2(ct_onnx_graph *g, const char *op, const char *a, const char *b, const char *out);
void ct_onnx_apply(ct_onnx_graph *g, const char *op, const char *what, char *x);
/* initializers: float [dims] (rank 0: a scalar), int64 [n]; a fresh-named float scalar into name */
void ct_onnx_init_f32(ct_onnx_graph *g, const char *name, const int64_t *dims, int rank, const float *v, size_t n);
void ct_onnx_init_i64(ct_onnx_graph *g, const char *name, const int64_t *v, int n);
void ct_onnx_const(ct_onnx_graph *g, char *name, const char *what, float v);

/* What layers share. x is updated to the new output each time. */
/* activation act (CT_ACT_*) after x: Relu; GELU as its Erf formula (Gelu is opset 20) */
void ct_onnx_activation(ct_onnx_graph *g, int act, char *x);
/* a [N, F] tensor (after a dense layer) as [N, C, H, W] for a spatial layer; *rank4 becomes 1 */
void ct_onnx_to_4d(ct_onnx_graph *g, int C, int H, int W, char *x, int *rank4);
/* Conv of x with cltrain's HWIO weights w [k][k][C][O] (written OIHW) and bias b [O] */
void ct_onnx_conv(ct_onnx_graph *g, char *x, const float *w, const float *b, int k, int C, int O, int stride, int pad);
/* the output of layer j (-1: the prepared input) and whether it is [N, C, H, W] */
void ct_onnx_output_of(const ct_onnx_graph *g, int j, char *name, int *rank4);

/* The graph's life, for the exporter: new (the prepared input named later by
 * ct_onnx_set_output(g, -1, ...)), each layer's output recorded, and the
 * ModelProto of model m with outputs "logits" and "probabilities" from the
 * tensor x (*out malloc'd; CT_ENOMEM). free releases the graph. */
ct_onnx_graph *ct_onnx_graph_new(void);
void ct_onnx_set_output(ct_onnx_graph *g, int j, const char *name, int rank4);
int ct_onnx_graph_model(ct_onnx_graph *g, const ct_model *m, const ct_onnx_meta *meta, const char *x, uint8_t **out,
                        size_t *n);
void ct_onnx_graph_free(ct_onnx_graph *g);
#endif
