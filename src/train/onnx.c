/* train/onnx.c: the ONNX exporter (see onnx.h). A hand encoder of the few
 * protobuf messages ONNX needs (ModelProto, GraphProto, NodeProto,
 * AttributeProto, TensorProto, ValueInfoProto), like the one in tboard.c but
 * with growing buffers, since weights run to hundreds of MB. Field numbers
 * are onnx.proto's. Each layer adds its nodes through emit_layer, which
 * records the name of its output tensor in g->names[i] (a layer that reads an
 * earlier layer's output, such as a residual Add, looks it up there).
 * Tested by tests/onnx.sh (onnx.checker and onnxruntime against cltrain's
 * forward pass for every built-in model). */
#include "cltrain/onnx.h"
#include "cltrain/file.h"
#include "cltrain/common.h"
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <string.h>
#include <unistd.h>

#define BN_EPS 1e-5f /* as nn/model.c and kernels/bn.cl */
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

typedef struct graph {
    pbuf nodes, inits;        /* GraphProto.node (1) and .initializer (5), already framed */
    int counter;              /* for fresh tensor names */
    char names[CT_MAX_LAYERS][32]; /* output tensor of each layer */
    int rank4[CT_MAX_LAYERS];      /* 1 when that tensor is [N, C, H, W], 0 for [N, F] */
    char input[32];                /* the prepared input (layer -1's output for [shortcut] from=-1) */
} graph;

static void fresh(graph *g, char *out, const char *what) { snprintf(out, 32, "%s_%d", what, g->counter++); }

/* AttributeProto { name = 1; f = 2; i = 3; ints = 8; type = 20 } as NodeProto.attribute (5) */
static void attr_ints(pbuf *node, const char *name, const int64_t *v, int n) {
    pbuf a = {0};
    pb_str(&a, 1, name);
    for (int i = 0; i < n; i++) pb_int(&a, 8, v[i]);
    pb_int(&a, 20, A_INTS);
    pb_msg(node, 5, &a);
}
static void attr_int(pbuf *node, const char *name, int64_t v) {
    pbuf a = {0};
    pb_str(&a, 1, name);
    pb_int(&a, 3, v);
    pb_int(&a, 20, A_INT);
    pb_msg(node, 5, &a);
}
static void attr_float(pbuf *node, const char *name, float f) {
    pbuf a = {0};
    pb_str(&a, 1, name);
    pb_f32(&a, 2, f);
    pb_int(&a, 20, A_FLOAT);
    pb_msg(node, 5, &a);
}

/* NodeProto { input = 1; output = 2; name = 3; op_type = 4; attribute = 5 }: starts a node
 * reading n_in tensors and writing `out`; attributes may be added before node_end. */
static pbuf node_begin(const char *op, const char *const *in, int n_in, const char *out) {
    pbuf nd = {0};
    for (int i = 0; i < n_in; i++) pb_str(&nd, 1, in[i]);
    pb_str(&nd, 2, out);
    pb_str(&nd, 3, out);
    pb_str(&nd, 4, op);
    return nd;
}
static void node_end(graph *g, pbuf *nd) { pb_msg(&g->nodes, 1, nd); }
static void node1(graph *g, const char *op, const char *x, const char *out) {
    pbuf nd = node_begin(op, &x, 1, out);
    node_end(g, &nd);
}
static void node2(graph *g, const char *op, const char *a, const char *b, const char *out) {
    const char *in[2] = {a, b};
    pbuf nd = node_begin(op, in, 2, out);
    node_end(g, &nd);
}

/* TensorProto { dims = 1; data_type = 2; name = 8; raw_data = 9 }: a float initializer */
static void init_f32(graph *g, const char *name, const int64_t *dims, int rank, const float *v, size_t n) {
    pbuf t = {0};
    for (int i = 0; i < rank; i++) pb_int(&t, 1, dims[i]);
    pb_int(&t, 2, T_FLOAT);
    pb_str(&t, 8, name);
    pb_bytes(&t, 9, v, n * sizeof(float)); /* raw_data is little-endian, as the host (checked) */
    pb_msg(&g->inits, 5, &t);
}
static void init_i64(graph *g, const char *name, const int64_t *v, int n) {
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

/* ---- layers ------------------------------------------------------------------ */

/* a scalar float constant */
static void const_f32(graph *g, char *name, const char *what, float v) {
    fresh(g, name, what);
    init_f32(g, name, NULL, 0, &v, 1);
}

/* The layer's activation after x. GELU (erf form) is ONNX's Gelu from opset
 * 20 on; at opset 13 it is written as its formula, x/2 (1 + Erf(x/sqrt 2)). */
static void relu_if(graph *g, const ct_layer *L, char *x) {
    char y[32];
    if (L->act == CT_ACT_RELU) {
        fresh(g, y, "relu");
        node1(g, "Relu", x, y);
        memcpy(x, y, 32);
    } else if (L->act == CT_ACT_GELU) {
        char c[3][32], t[4][32];
        const_f32(g, c[0], "rsqrt2", (float)M_SQRT1_2);
        const_f32(g, c[1], "one", 1.0f);
        const_f32(g, c[2], "half", 0.5f);
        fresh(g, t[0], "gelu_scaled");
        node2(g, "Mul", x, c[0], t[0]);
        fresh(g, t[1], "gelu_erf");
        node1(g, "Erf", t[0], t[1]);
        fresh(g, t[2], "gelu_1p");
        node2(g, "Add", t[1], c[1], t[2]);
        fresh(g, t[3], "gelu_x");
        node2(g, "Mul", x, t[2], t[3]);
        fresh(g, y, "gelu");
        node2(g, "Mul", t[3], c[2], y);
        memcpy(x, y, 32);
    }
}

/* a [N, F] tensor (after a dense layer) as [N, F, 1, 1] for a spatial layer */
static void to_4d(graph *g, const ct_layer *L, char *x, int *rank4) {
    if (*rank4) return;
    char s[32], y[32];
    fresh(g, s, "shape");
    fresh(g, y, "reshape");
    int64_t dims[4] = {-1, L->ic, L->ih, L->iw};
    init_i64(g, s, dims, 4);
    node2(g, "Reshape", x, s, y);
    memcpy(x, y, 32);
    *rank4 = 1;
}

/* Conv weights HWIO [k][k][ic][oc] -> OIHW [oc][ic][k][k]. */
static void emit_conv(graph *g, const ct_layer *L, const float *p, char *x) {
    int k = L->k, C = L->ic, O = L->oc;
    float *w = ct_xmalloc(L->n_w * sizeof *w);
    for (int o = 0; o < O; o++)
        for (int c = 0; c < C; c++)
            for (int ky = 0; ky < k; ky++)
                for (int kx = 0; kx < k; kx++)
                    w[(((size_t)o * C + c) * k + ky) * k + kx] = p[L->w_off + (((size_t)ky * k + kx) * C + c) * O + o];
    char wn[32], bn[32], y[32];
    fresh(g, wn, "W");
    fresh(g, bn, "B");
    fresh(g, y, "conv");
    int64_t wd[4] = {O, C, k, k}, bd[1] = {O};
    init_f32(g, wn, wd, 4, w, L->n_w);
    init_f32(g, bn, bd, 1, p + L->b_off, L->n_b);
    free(w);
    const char *in[3] = {x, wn, bn};
    pbuf nd = node_begin("Conv", in, 3, y);
    int64_t ks[2] = {k, k}, st[2] = {L->stride, L->stride}, pd[4] = {L->pad, L->pad, L->pad, L->pad};
    attr_ints(&nd, "kernel_shape", ks, 2);
    attr_ints(&nd, "strides", st, 2);
    attr_ints(&nd, "pads", pd, 4);
    node_end(g, &nd);
    memcpy(x, y, 32);
}

/* Dense weights [K][out] with K in cltrain's (h, w, c) order; ONNX flattens
 * NCHW, so the rows go to (c, h, w) order. Gemm: y = x W + b. */
static void emit_dense(graph *g, const ct_layer *L, const float *p, char *x, int *rank4) {
    int H = L->ih, W = L->iw, C = L->ic, O = L->oc;
    char y[32];
    if (*rank4) {
        fresh(g, y, "flatten");
        pbuf nd = node_begin("Flatten", (const char *const[]){x}, 1, y);
        attr_int(&nd, "axis", 1);
        node_end(g, &nd);
        memcpy(x, y, 32);
        *rank4 = 0;
    }
    float *w = ct_xmalloc(L->n_w * sizeof *w);
    for (int h = 0; h < H; h++)
        for (int xx = 0; xx < W; xx++)
            for (int c = 0; c < C; c++)
                memcpy(w + (((size_t)c * H + h) * W + xx) * O, p + L->w_off + (((size_t)h * W + xx) * C + c) * O,
                       (size_t)O * sizeof *w);
    char wn[32], bn[32];
    fresh(g, wn, "W");
    fresh(g, bn, "B");
    fresh(g, y, "gemm");
    int64_t wd[2] = {(int64_t)H * W * C, O}, bd[1] = {O};
    init_f32(g, wn, wd, 2, w, L->n_w);
    init_f32(g, bn, bd, 1, p + L->b_off, L->n_b);
    free(w);
    const char *in[3] = {x, wn, bn};
    pbuf nd = node_begin("Gemm", in, 3, y);
    node_end(g, &nd);
    memcpy(x, y, 32);
}

/* Batch norm weights: gamma, running mean, running variance (each C), then beta. */
static void emit_bn(graph *g, const ct_layer *L, const float *p, char *x) {
    int C = L->oc;
    char nm[4][32], y[32];
    const char *what[4] = {"gamma", "beta", "mean", "var"};
    const float *src[4] = {p + L->w_off, p + L->b_off, p + L->w_off + C, p + L->w_off + 2 * (size_t)C};
    int64_t d[1] = {C};
    for (int j = 0; j < 4; j++) {
        fresh(g, nm[j], what[j]);
        init_f32(g, nm[j], d, 1, src[j], (size_t)C);
    }
    fresh(g, y, "bn");
    const char *in[5] = {x, nm[0], nm[1], nm[2], nm[3]};
    pbuf nd = node_begin("BatchNormalization", in, 5, y);
    attr_float(&nd, "epsilon", BN_EPS);
    node_end(g, &nd);
    memcpy(x, y, 32);
}

/* [shortcut]: x + the earlier output, subsampled every stride-th pixel
 * (Slice) and its missing channels zero-padded (Pad): option A, as the
 * layer's kernel does it; or, with a projection (option B), through a 1x1
 * Conv of that stride with bias, weights [sc][oc] as a 1x1 HWIO kernel. */
static void emit_shortcut(graph *g, const ct_model *m, const ct_layer *L, const float *p, char *x, int *rank4) {
    to_4d(g, L, x, rank4);
    int sh = m->in_h, sw = m->in_w, sc = m->in_c, r4 = 1;
    char src[32], y[32], t[4][32];
    memcpy(src, L->from < 0 ? g->input : g->names[L->from], 32);
    if (L->from >= 0) {
        const ct_layer *S = &m->layers[L->from];
        sh = S->oh; sw = S->ow; sc = S->oc; r4 = g->rank4[L->from];
    }
    if (!r4) {
        fresh(g, t[0], "shape");
        fresh(g, y, "reshape");
        init_i64(g, t[0], (const int64_t[]){-1, sc, sh, sw}, 4);
        node2(g, "Reshape", src, t[0], y);
        memcpy(src, y, 32);
    }
    if (L->n_w) {
        const ct_layer P = {.k = 1, .stride = L->stride, .pad = 0, .ic = sc, .oc = L->oc,
                            .w_off = L->w_off, .b_off = L->b_off, .n_w = L->n_w, .n_b = L->n_b};
        emit_conv(g, &P, p, src);
    } else if (L->stride > 1) {
        const char *what[4] = {"starts", "ends", "axes", "steps"};
        const int64_t v[4][2] = {{0, 0}, {INT64_MAX, INT64_MAX}, {2, 3}, {L->stride, L->stride}};
        for (int j = 0; j < 4; j++) {
            fresh(g, t[j], what[j]);
            init_i64(g, t[j], v[j], 2);
        }
        fresh(g, y, "subsample");
        pbuf nd = node_begin("Slice", (const char *const[]){src, t[0], t[1], t[2], t[3]}, 5, y);
        node_end(g, &nd);
        memcpy(src, y, 32);
    }
    if (!L->n_w && sc < L->ic) {
        fresh(g, t[0], "pads");
        init_i64(g, t[0], (const int64_t[]){0, 0, 0, 0, 0, L->ic - sc, 0, 0}, 8);
        fresh(g, y, "padchannels");
        node2(g, "Pad", src, t[0], y);
        memcpy(src, y, 32);
    }
    fresh(g, y, "add");
    node2(g, "Add", x, src, y);
    memcpy(x, y, 32);
    relu_if(g, L, x);
}

/* Layer i reads x (updated to its output; rank4: x is [N, C, H, W], else [N, F]). */
static int emit_layer(graph *g, const ct_model *m, int i, const float *p, char *x, int *rank4) {
    const ct_layer *L = &m->layers[i];
    char y[32];
    switch (L->type) {
    case CT_L_CONV:
        to_4d(g, L, x, rank4);
        emit_conv(g, L, p, x);
        relu_if(g, L, x);
        break;
    case CT_L_MAXPOOL: {
        to_4d(g, L, x, rank4);
        fresh(g, y, "maxpool");
        pbuf nd = node_begin("MaxPool", (const char *const[]){x}, 1, y);
        attr_ints(&nd, "kernel_shape", (const int64_t[]){L->k, L->k}, 2);
        attr_ints(&nd, "strides", (const int64_t[]){L->stride, L->stride}, 2);
        node_end(g, &nd);
        memcpy(x, y, 32);
        break;
    }
    case CT_L_AVGPOOL:
        to_4d(g, L, x, rank4);
        fresh(g, y, "avgpool");
        node1(g, "GlobalAveragePool", x, y);
        memcpy(x, y, 32);
        break;
    case CT_L_GLOBALMAXPOOL:
        to_4d(g, L, x, rank4);
        fresh(g, y, "globalmaxpool");
        node1(g, "GlobalMaxPool", x, y);
        memcpy(x, y, 32);
        break;
    case CT_L_DROPOUT: break; /* identity at inference */
    case CT_L_BATCHNORM:
        emit_bn(g, L, p, x);
        relu_if(g, L, x);
        break;
    case CT_L_DENSE:
        emit_dense(g, L, p, x, rank4);
        relu_if(g, L, x);
        break;
    case CT_L_SHORTCUT:
        emit_shortcut(g, m, L, p, x, rank4);
        break;
    default:
        return ct_fail(CT_EINPUT, "%s: layer %d (type %d, line %d) has no ONNX form in this exporter", m->name, i,
                       L->type, L->line);
    }
    memcpy(g->names[i], x, 32);
    g->rank4[i] = *rank4;
    return 0;
}

/* x / 255, then per-image standardisation as ct_augment_standardize:
 * (x - mean) / max(stddev, 1 / sqrt(C*H*W)) over each image. */
static void emit_input(graph *g, const ct_model *m, int standardize, char *x) {
    char c255[32], y[32];
    fresh(g, c255, "c255");
    float v255 = 255.0f;
    init_f32(g, c255, NULL, 0, &v255, 1);
    fresh(g, y, "scaled");
    node2(g, "Div", "pixels", c255, y);
    memcpy(x, y, 32);
    if (!standardize) return;
    char mean[32], d[32], d2[32], var[32], sd[32], fl[32], sdf[32];
    const int64_t axes[3] = {1, 2, 3};
    fresh(g, mean, "mean");
    pbuf nd = node_begin("ReduceMean", (const char *const[]){x}, 1, mean);
    attr_ints(&nd, "axes", axes, 3);
    node_end(g, &nd);
    fresh(g, d, "centred");
    node2(g, "Sub", x, mean, d);
    fresh(g, d2, "sq");
    node2(g, "Mul", d, d, d2);
    fresh(g, var, "var");
    nd = node_begin("ReduceMean", (const char *const[]){d2}, 1, var);
    attr_ints(&nd, "axes", axes, 3);
    node_end(g, &nd);
    fresh(g, sd, "sd");
    node1(g, "Sqrt", var, sd);
    fresh(g, fl, "sd_floor");
    float floor_sd = (float)(1.0 / sqrt((double)m->in_h * m->in_w * m->in_c));
    init_f32(g, fl, NULL, 0, &floor_sd, 1);
    fresh(g, sdf, "sd_max");
    node2(g, "Max", sd, fl, sdf);
    fresh(g, y, "standardized");
    node2(g, "Div", d, sdf, y);
    memcpy(x, y, 32);
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
    meta_prop(model, "cltrain.input",
              meta->standardize ? "pixels: float NCHW, raw 0..255; the graph divides by 255, then standardises each "
                                  "image ((x - mean) / max(stddev, 1/sqrt(C*H*W)))"
                                : "pixels: float NCHW, raw 0..255; the graph divides by 255");
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

int ct_onnx_encode(const ct_model *m, const float *params, const ct_onnx_meta *meta, uint8_t **out, size_t *n) {
    uint32_t one = 1;
    CT_ASSERT(*(uint8_t *)&one == 1 && sizeof(float) == 4);
    *out = NULL;
    *n = 0;
    if (m->n_params > ((size_t)1 << 29) - ((size_t)1 << 24))
        return ct_fail(CT_EINPUT, "%s: %zu parameters (%.1f GiB) exceed the 2 GiB a single ONNX file can hold", m->name,
                       m->n_params, (double)m->n_params * 4 / (1 << 30));
    graph *g = ct_xcalloc(1, sizeof *g);
    char x[32];
    int rank4 = 1, rc = 0;
    emit_input(g, m, meta->standardize, x);
    memcpy(g->input, x, 32);
    for (int i = 0; i < m->n_layers && !rc; i++) rc = emit_layer(g, m, i, params, x, &rank4);
    pbuf gp = {0}, model = {0};
    if (!rc) {
        node1(g, "Identity", x, "logits");
        pbuf nd = node_begin("Softmax", (const char *const[]){"logits"}, 1, "probabilities");
        attr_int(&nd, "axis", 1);
        node_end(g, &nd);
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
        if (model.oom) rc = ct_fail(CT_ENOMEM, "%s: out of memory encoding the ONNX model", m->name);
    }
    free(g->nodes.b);
    free(g->inits.b);
    free(g);
    free(gp.b);
    if (rc) {
        free(model.b);
        return rc;
    }
    *out = model.b;
    *n = model.n;
    return 0;
}

int ct_write_file_atomic(const char *path, const void *data, size_t n) {
    char tmp[4200];
    int rc = ct_file_check_target(path, "output"); /* never rename over a device, FIFO or folder */
    if (rc) return rc;
    snprintf(tmp, sizeof tmp, "%s.tmp.%d", path, (int)getpid());
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) return ct_fail(CT_EIO, "%s: cannot write (%s); check the folder exists and is writable", path, strerror(errno));
    int e = 0;
    const uint8_t *p = data;
    while (n && !e) {
        ssize_t k = write(fd, p, n);
        if (k < 0 && errno == EINTR) continue;
        if (k < 0) e = errno;
        else { p += k; n -= (size_t)k; }
    }
    if (!e && fsync(fd)) e = errno;
    if (close(fd) && !e) e = errno;
    if (e) unlink(tmp);
    else e = ct_file_replace(tmp, path);
    return e ? ct_fail(CT_EIO, "%s: cannot write (%s); nothing was written", path, strerror(e)) : 0;
}
