/* nn/onnx_graph.c: an ONNX graph built node by node (see onnx_graph.h).
 * A hand encoder of the few protobuf messages ONNX needs (ModelProto,
 * GraphProto, NodeProto, AttributeProto, TensorProto, ValueInfoProto), like
 * the one in tboard.c but with growing buffers, since weights run to
 * hundreds of MB. Field numbers are onnx.proto's. Depends on no layer type:
 * the layer files call it. Tested by tests/onnx.sh. */
#include "cltrain/onnx_graph.h"
#include "cltrain/common.h"
#include <math.h>
#include <string.h>

enum { T_FLOAT = 1, T_INT64 = 7 };                         /* TensorProto.DataType */
enum { A_FLOAT = 1, A_INT = 2, A_INTS = 7 };               /* AttributeProto.AttributeType */

/* ---- protobuf wire format ---------------------------------------------------- */

typedef struct pbuf { uint8_t *b; size_t n, cap; int oom; } pbuf;

static void pb_raw(pbuf *p, const void *d, size_t n) {
    if (p->oom) return;
    if (p->n + n > p->cap) {
        size_t cap = p->cap ? p->cap : 256;
        while (cap < p->n + n) cap *= 2;
        uint8_t *nb = realloc(p->b, cap);
        if (!nb) { p->oom = 1; return; }
        p->b = nb;
        p->cap = cap;
    }
    if (n) memcpy(p->b + p->n, d, n);
    p->n += n;
}
static void pb_varint(pbuf *p, uint64_t v) {
    uint8_t t[10];
    int k = 0;
    while (v >= 0x80) { t[k++] = (uint8_t)(v | 0x80); v >>= 7; }
    t[k++] = (uint8_t)v;
    pb_raw(p, t, (size_t)k);
}
static void pb_int(pbuf *p, int field, int64_t v) { pb_varint(p, (uint64_t)field << 3); pb_varint(p, (uint64_t)v); }
static void pb_f32(pbuf *p, int field, float f) { pb_varint(p, (uint64_t)field << 3 | 5); pb_raw(p, &f, 4); }
static void pb_bytes(pbuf *p, int field, const void *d, size_t n) {
    pb_varint(p, (uint64_t)field << 3 | 2);
    pb_varint(p, n);
    pb_raw(p, d, n);
}
static void pb_str(pbuf *p, int field, const char *s) { pb_bytes(p, field, s, strlen(s)); }
/* append sub as a length-delimited field and free it */
static void pb_msg(pbuf *p, int field, pbuf *sub) {
    if (sub->oom) p->oom = 1;
    pb_bytes(p, field, sub->b, sub->n);
    free(sub->b);
    memset(sub, 0, sizeof *sub);
}

/* ---- graph pieces ------------------------------------------------------------ */

struct ct_onnx_graph {
    pbuf nodes, inits;        /* GraphProto.node (1) and .initializer (5), already framed */
    pbuf cur;                 /* the node between ct_onnx_begin and ct_onnx_end */
    int counter;              /* for fresh tensor names */
    char names[CT_MAX_LAYERS][32]; /* output tensor of each layer */
    int rank4[CT_MAX_LAYERS];      /* 1 when that tensor is [N, C, H, W], 0 for [N, F] */
    char input[32];                /* the prepared input (layer -1's output for [shortcut] from=-1) */
};
typedef struct ct_onnx_graph graph;

void ct_onnx_fresh(graph *g, char *out, const char *what) { snprintf(out, 32, "%s_%d", what, g->counter++); }

/* AttributeProto { name = 1; f = 2; i = 3; ints = 8; type = 20 } as NodeProto.attribute (5) */
void ct_onnx_attr_ints(graph *g, const char *name, const int64_t *v, int n) {
    pbuf a = {0}, *node = &g->cur;
    pb_str(&a, 1, name);
    for (int i = 0; i < n; i++) pb_int(&a, 8, v[i]);
    pb_int(&a, 20, A_INTS);
    pb_msg(node, 5, &a);
}
void ct_onnx_attr_int(graph *g, const char *name, int64_t v) {
    pbuf a = {0}, *node = &g->cur;
    pb_str(&a, 1, name);
    pb_int(&a, 3, v);
    pb_int(&a, 20, A_INT);
    pb_msg(node, 5, &a);
}
void ct_onnx_attr_float(graph *g, const char *name, float f) {
    pbuf a = {0}, *node = &g->cur;
    pb_str(&a, 1, name);
    pb_f32(&a, 2, f);
    pb_int(&a, 20, A_FLOAT);
    pb_msg(node, 5, &a);
}

/* NodeProto { input = 1; output = 2; name = 3; op_type = 4; attribute = 5 }: starts a node
 * reading n_in tensors and writing `out`; attributes may be added before ct_onnx_end. */
void ct_onnx_begin(graph *g, const char *op, const char *const *in, int n_in, const char *out) {
    pbuf *nd = &g->cur;
    CT_ASSERT(nd->n == 0);
    for (int i = 0; i < n_in; i++) pb_str(nd, 1, in[i]);
    pb_str(nd, 2, out);
    pb_str(nd, 3, out);
    pb_str(nd, 4, op);
}
void ct_onnx_end(graph *g) { pb_msg(&g->nodes, 1, &g->cur); }
void ct_onnx_node1(graph *g, const char *op, const char *x, const char *out) {
    ct_onnx_begin(g, op, &x, 1, out);
    ct_onnx_end(g);
}
void ct_onnx_node2(graph *g, const char *op, const char *a, const char *b, const char *out) {
    const char *in[2] = {a, b};
    ct_onnx_begin(g, op, in, 2, out);
    ct_onnx_end(g);
}

/* TensorProto { dims = 1; data_type = 2; name = 8; raw_data = 9 }: a float initializer */
void ct_onnx_init_f32(graph *g, const char *name, const int64_t *dims, int rank, const float *v, size_t n) {
    pbuf t = {0};
    for (int i = 0; i < rank; i++) pb_int(&t, 1, dims[i]);
    pb_int(&t, 2, T_FLOAT);
    pb_str(&t, 8, name);
    pb_bytes(&t, 9, v, n * sizeof(float)); /* raw_data is little-endian, as the host (checked) */
    pb_msg(&g->inits, 5, &t);
}
void ct_onnx_init_i64(graph *g, const char *name, const int64_t *v, int n) {
    pbuf t = {0};
    int64_t dim = n;
    pb_int(&t, 1, dim);
    pb_int(&t, 2, T_INT64);
    pb_str(&t, 8, name);
    pb_bytes(&t, 9, v, (size_t)n * sizeof(int64_t));
    pb_msg(&g->inits, 5, &t);
}

/* ValueInfoProto { name = 1; type = 2 } with TypeProto.tensor_type (1) { elem_type = 1;
 * shape = 2 { dim = 1 { dim_value = 1 | dim_param = 2 } } }; dims[0] is the batch "N" */
static void value_info(pbuf *graph_pb, int field, const char *name, const int64_t *dims, int rank) {
    pbuf shape = {0}, tt = {0}, type = {0}, vi = {0};
    for (int i = 0; i < rank; i++) {
        pbuf d = {0};
        if (i == 0) pb_str(&d, 2, "N");
        else pb_int(&d, 1, dims[i]);
        pb_msg(&shape, 1, &d);
    }
    pb_int(&tt, 1, T_FLOAT);
    pb_msg(&tt, 2, &shape);
    pb_msg(&type, 1, &tt);
    pb_str(&vi, 1, name);
    pb_msg(&vi, 2, &type);
    pb_msg(graph_pb, field, &vi);
}

/* ---- what layers share -------------------------------------------------------- */

void ct_onnx_apply(graph *g, const char *op, const char *what, char *x) {
    char y[32];
    ct_onnx_fresh(g, y, what);
    ct_onnx_node1(g, op, x, y);
    memcpy(x, y, 32);
}

void ct_onnx_const(graph *g, char *name, const char *what, float v) {
    ct_onnx_fresh(g, name, what);
    ct_onnx_init_f32(g, name, NULL, 0, &v, 1);
}

/* GELU (erf form) is ONNX's Gelu from opset 20 on; at opset 13 it is written
 * as its formula, x/2 (1 + Erf(x/sqrt 2)). */
void ct_onnx_activation(graph *g, int act, char *x) {
    char y[32];
    if (act == CT_ACT_RELU) {
        ct_onnx_apply(g, "Relu", "relu", x);
    } else if (act == CT_ACT_GELU) {
        char c[3][32], t[4][32];
        ct_onnx_const(g, c[0], "rsqrt2", (float)M_SQRT1_2);
        ct_onnx_const(g, c[1], "one", 1.0f);
        ct_onnx_const(g, c[2], "half", 0.5f);
        ct_onnx_fresh(g, t[0], "gelu_scaled");
        ct_onnx_node2(g, "Mul", x, c[0], t[0]);
        ct_onnx_fresh(g, t[1], "gelu_erf");
        ct_onnx_node1(g, "Erf", t[0], t[1]);
        ct_onnx_fresh(g, t[2], "gelu_1p");
        ct_onnx_node2(g, "Add", t[1], c[1], t[2]);
        ct_onnx_fresh(g, t[3], "gelu_x");
        ct_onnx_node2(g, "Mul", x, t[2], t[3]);
        ct_onnx_fresh(g, y, "gelu");
        ct_onnx_node2(g, "Mul", t[3], c[2], y);
        memcpy(x, y, 32);
    }
}

void ct_onnx_to_4d(graph *g, int C, int H, int W, char *x, int *rank4) {
    if (*rank4) return;
    char s[32], y[32];
    ct_onnx_fresh(g, s, "shape");
    ct_onnx_fresh(g, y, "reshape");
    int64_t dims[4] = {-1, C, H, W};
    ct_onnx_init_i64(g, s, dims, 4);
    ct_onnx_node2(g, "Reshape", x, s, y);
    memcpy(x, y, 32);
    *rank4 = 1;
}

/* Conv weights HWIO [k][k][C][O] -> OIHW [O][C][k][k]. */
void ct_onnx_conv(graph *g, char *x, const float *wt, const float *b, int k, int C, int O, int stride, int pad) {
    size_t nw = (size_t)k * k * C * O;
    float *w = ct_xmalloc(nw * sizeof *w);
    for (int o = 0; o < O; o++)
        for (int c = 0; c < C; c++)
            for (int ky = 0; ky < k; ky++)
                for (int kx = 0; kx < k; kx++)
                    w[(((size_t)o * C + c) * k + ky) * k + kx] = wt[(((size_t)ky * k + kx) * C + c) * O + o];
    char wn[32], bn[32], y[32];
    ct_onnx_fresh(g, wn, "W");
    ct_onnx_fresh(g, bn, "B");
    ct_onnx_fresh(g, y, "conv");
    int64_t wd[4] = {O, C, k, k}, bd[1] = {O};
    ct_onnx_init_f32(g, wn, wd, 4, w, nw);
    ct_onnx_init_f32(g, bn, bd, 1, b, (size_t)O);
    free(w);
    const char *in[3] = {x, wn, bn};
    ct_onnx_begin(g, "Conv", in, 3, y);
    int64_t ks[2] = {k, k}, st[2] = {stride, stride}, pd[4] = {pad, pad, pad, pad};
    ct_onnx_attr_ints(g, "kernel_shape", ks, 2);
    ct_onnx_attr_ints(g, "strides", st, 2);
    ct_onnx_attr_ints(g, "pads", pd, 4);
    ct_onnx_end(g);
    memcpy(x, y, 32);
}

void ct_onnx_output_of(const graph *g, int j, char *name, int *rank4) {
    memcpy(name, j < 0 ? g->input : g->names[j], 32);
    *rank4 = j < 0 ? 1 : g->rank4[j];
}

/* ---- the graph's life ----------------------------------------------------------- */

graph *ct_onnx_graph_new(void) { return ct_xcalloc(1, sizeof(graph)); }

void ct_onnx_set_output(graph *g, int j, const char *name, int rank4) {
    if (j < 0) { memcpy(g->input, name, 32); return; }
    memcpy(g->names[j], name, 32);
    g->rank4[j] = rank4;
}

void ct_onnx_graph_free(graph *g) {
    if (!g) return;
    free(g->nodes.b);
    free(g->inits.b);
    free(g->cur.b);
    free(g);
}

static void meta_prop(pbuf *model, const char *key, const char *value) {
    pbuf e = {0};
    pb_str(&e, 1, key);
    pb_str(&e, 2, value);
    pb_msg(model, 14, &e);
}

static void model_meta(pbuf *model, const ct_model *m, const ct_onnx_meta *meta) {
    char crc[16];
    snprintf(crc, sizeof crc, "%08x", meta->ckpt_crc);
    meta_prop(model, "cltrain.version", CT_VERSION);
    meta_prop(model, "cltrain.checkpoint_crc32", crc);
    meta_prop(model, "cltrain.model", m->name);
    meta_prop(model, "cltrain.dataset", meta->dataset ? meta->dataset : "");
    if (m->prep.c) {
        /* the words, and each list alone (cltrain import reads them back) */
        char d[2 * CT_PREP_MAX * 20 + 16], words[sizeof d + 160];
        ct_prep_describe(&m->prep, d, sizeof d);
        snprintf(words, sizeof words, "pixels: float NCHW, raw 0..255; the graph divides by 255, then normalises each "
                 "channel ((x - mean) / std, %s)", d);
        meta_prop(model, "cltrain.input", words);
        char *sp = strchr(d, ' ');
        *sp = 0;
        meta_prop(model, "cltrain.mean", d + 5);
        meta_prop(model, "cltrain.std", sp + 5);
    } else {
        meta_prop(model, "cltrain.input",
                  meta->standardize ? "pixels: float NCHW, raw 0..255; the graph divides by 255, then standardises each "
                                      "image ((x - mean) / max(stddev, 1/sqrt(C*H*W)))"
                                    : "pixels: float NCHW, raw 0..255; the graph divides by 255");
    }
    if (meta->n_names > 0 && meta->class_names) {
        pbuf names = {0};
        for (int i = 0; i < meta->n_names; i++) {
            if (i) pb_raw(&names, "\n", 1);
            pb_raw(&names, meta->class_names[i], strlen(meta->class_names[i]));
        }
        pb_raw(&names, "", 1);
        if (!names.oom) meta_prop(model, "cltrain.classes", (const char *)names.b);
        else model->oom = 1;
        free(names.b);
    }
}

int ct_onnx_graph_model(graph *g, const ct_model *m, const ct_onnx_meta *meta, const char *x, uint8_t **out, size_t *n) {
    pbuf gp = {0}, model = {0};
    ct_onnx_node1(g, "Identity", x, "logits");
    ct_onnx_begin(g, "Softmax", (const char *const[]){"logits"}, 1, "probabilities");
    ct_onnx_attr_int(g, "axis", 1);
    ct_onnx_end(g);
    /* GraphProto { node = 1; name = 2; initializer = 5; input = 11; output = 12 } */
    pb_raw(&gp, g->nodes.b, g->nodes.n);
    pb_str(&gp, 2, m->name);
    pb_raw(&gp, g->inits.b, g->inits.n);
    gp.oom |= g->nodes.oom | g->inits.oom;
    value_info(&gp, 11, "pixels", (const int64_t[]){0, m->in_c, m->in_h, m->in_w}, 4);
    value_info(&gp, 12, "logits", (const int64_t[]){0, m->n_classes}, 2);
    value_info(&gp, 12, "probabilities", (const int64_t[]){0, m->n_classes}, 2);
    /* ModelProto { ir_version = 1; producer_name = 2; producer_version = 3; graph = 7;
     * opset_import = 8 { domain = 1; version = 2 }; metadata_props = 14 } */
    pb_int(&model, 1, 7);
    pb_str(&model, 2, "cltrain");
    pb_str(&model, 3, CT_VERSION);
    pbuf ops = {0};
    pb_str(&ops, 1, "");
    pb_int(&ops, 2, 13);
    pb_msg(&model, 8, &ops);
    model_meta(&model, m, meta);
    pb_msg(&model, 7, &gp);
    free(gp.b);
    if (model.oom) {
        free(model.b);
        return ct_fail(CT_ENOMEM, "%s: out of memory encoding the ONNX model", m->name);
    }
    *out = model.b;
    *n = model.n;
    return 0;
}
