/* train/onnx_import.c: an ONNX model (as torch.onnx.export or `cltrain
 * export` write it) turned into a cltrain model: .cfg text and weights
 * (onnx.h, ct_onnx_import).
 *
 * A small protobuf wire-format reader of the messages ONNX needs (ModelProto,
 * GraphProto, NodeProto, AttributeProto, TensorProto, ValueInfoProto; field
 * numbers from onnx.proto), like the encoder in onnx.c: libprotobuf-c would
 * need onnx.proto compiled into the build for six messages. The nodes are
 * walked in their (topological) order. Every tensor name is a constant (an
 * initializer, a Constant node, or small integer arithmetic on shapes that
 * exporters leave behind, evaluated here) or an activation: the output of a
 * cltrain layer, possibly seen through a subsampling Slice or a channel Pad
 * (a residual's option-A shortcut). Views, Relu/Gelu (merged into the layer
 * before, which must take activation=) and a final Softmax are handled here;
 * every other node is offered to the layer types in table order, and the
 * one whose ct_layer_ops.import takes it adds its layer, with its .cfg
 * section and its weights already in cltrain's layout (cltrain/onnx_nodes.h).
 * A layer must read the newest activation, since cltrain models are
 * sequences with [shortcut]s.
 * Depends on layer.h (the table; parsing the result), onnx_nodes.h, common.h. Tested by
 * tests/import.sh (PyTorch's exports against PyTorch's logits) and
 * tests/fuzz/fuzz_onnx.c. */
#include "cltrain/onnx.h"
#include "cltrain/layer.h"
#include "cltrain/common.h"
#include <math.h>
#include <string.h>

#define MAX_CONST 1000000 /* elements of a constant evaluated here (shape arithmetic, not weights) */
#define MAX_FOLDED 8000000 /* of all of them together */
enum { T_FLOAT = 1, T_UINT8 = 2, T_INT8 = 3, T_INT32 = 6, T_INT64 = 7, T_BOOL = 9, T_DOUBLE = 11 };
enum { A_FLOAT = 1, A_INT = 2, A_STRING = 3, A_TENSOR = 4, A_FLOATS = 6, A_INTS = 7 };

/* ---- protobuf ------------------------------------------------------------------ */

typedef struct pb { const uint8_t *p, *end; } pb;
typedef struct pbf { int field, wt; uint64_t v; const uint8_t *d; size_t n; } pbf;

static int varint(pb *r, uint64_t *v) {
    *v = 0;
    for (int s = 0; s < 64; s += 7) {
        if (r->p >= r->end) return -1;
        uint8_t b = *r->p++;
        *v |= (uint64_t)(b & 0x7f) << s;
        if (!(b & 0x80)) return 0;
    }
    return -1;
}
/* 1: a field read into f; 0: end of message; -1: damaged */
static int next(pb *r, pbf *f) {
    if (r->p >= r->end) return 0;
    uint64_t key;
    if (varint(r, &key)) return -1;
    f->field = (int)(key >> 3);
    f->wt = (int)(key & 7);
    f->d = NULL;
    f->n = 0;
    switch (f->wt) {
    case 0: return varint(r, &f->v) ? -1 : 1;
    case 1: if (r->end - r->p < 8) return -1; f->d = r->p; f->n = 8; r->p += 8; return 1;
    case 5: if (r->end - r->p < 4) return -1; f->d = r->p; f->n = 4; r->p += 4; return 1;
    case 2:
        if (varint(r, &f->v) || f->v > (uint64_t)(r->end - r->p)) return -1;
        f->d = r->p;
        f->n = (size_t)f->v;
        r->p += f->n;
        return 1;
    default: return -1;
    }
}
static pb sub(const pbf *f) { return (pb){f->d, f->d + f->n}; }
static char *str_of(const pbf *f) {
    char *s = ct_xmalloc(f->n + 1);
    memcpy(s, f->d, f->n);
    s[f->n] = 0;
    return s;
}

/* ---- the model as read --------------------------------------------------------- */

/* the shared types (cltrain/onnx_nodes.h) under short names */
typedef ct_onnx_tensor tensor;
typedef ct_onnx_attr attr;
typedef ct_onnx_node node;
typedef ct_onnx_act act;
typedef ct_onnx_val val;
typedef ct_onnx_layer lay;
typedef ct_onnx_imp imp;
typedef struct ct_onnx_vinfo { char *name; int ndim, elem; int64_t dims[8]; int dynamic[8]; } vinfo;

static void tensor_free(tensor *t) { free(t->v); free(t->f); memset(t, 0, sizeof *t); }

/* what cltrain imports, in words: the layer types' ONNX ops (ct_layer_ops.onnx_ops), then the importer's own */
static const char *supported(void) {
    static char text[1024];
    size_t n = (size_t)snprintf(text, sizeof text, "cltrain imports ");
    for (int t = 0; t < CT_LAYER_TYPES; t++)
        if (ct_layer_table[t]->import && n < sizeof text)
            n += (size_t)snprintf(text + n, sizeof text - n, "%s, ", ct_layer_table[t]->onnx_ops);
    if (n < sizeof text)
        snprintf(text + n, sizeof text - n, "Relu, Gelu (or its Erf/Tanh formula), Dropout, Identity, a final Softmax/LogSoftmax, "
                 "and constant shape arithmetic");
    return text;
}

/* TensorProto { dims = 1; data_type = 2; float_data = 4; int32_data = 5; int64_data = 7; name = 8;
 * raw_data = 9; double_data = 10; data_location = 14 } */

/* where a tensor's values lie in its message, found before any is decoded */
typedef struct {
    const uint8_t *raw;
    size_t raw_n;
    pb fd[4];  /* float_data, int32_data, int64_data, double_data, when packed */
    int nf[4]; /* 0 absent, 1 unpacked, 2 packed */
} tsrc;

/* Only locates the values, so that the shape and type can be checked before anything sized by them is allocated;
 * returns why the message cannot be read, or NULL. */
static const char *scan_tensor(pb r, tensor *t, char **name, tsrc *s) {
    pbf f;
    int rc, kind;
    while ((rc = next(&r, &f)) == 1) {
        if (f.field == 1 && f.wt == 0) {
            if (t->ndim == 8) return "more than 8 dimensions";
            t->dims[t->ndim++] = (int64_t)f.v;
        } else if (f.field == 1 && f.wt == 2) {
            pb d = sub(&f);
            uint64_t v;
            while (d.p < d.end) {
                if (varint(&d, &v) || t->ndim == 8) return "damaged";
                t->dims[t->ndim++] = (int64_t)v;
            }
        } else if (f.field == 2 && f.wt == 0) t->dtype = (int)f.v;
        else if (f.field == 8 && f.wt == 2) { if (name) { free(*name); *name = str_of(&f); } }
        else if (f.field == 9 && f.wt == 2) s->raw = f.d, s->raw_n = f.n;
        else if (f.field == 14 && f.wt == 0 && f.v == 1) return "weights in an external file (save with the weights inside)";
        else if ((kind = f.field == 4 ? 0 : f.field == 5 ? 1 : f.field == 7 ? 2 : f.field == 10 ? 3 : -1) >= 0) {
            if (f.wt == 2) { if (s->nf[kind]) return "split repeated field"; s->fd[kind] = sub(&f); s->nf[kind] = 2; }
            else { if (s->nf[kind] == 2) return "mixed repeated field"; s->nf[kind] = 1; }
        }
    }
    return rc < 0 ? "damaged" : NULL;
}

/* The element count, refused before it can overflow the allocations sized by it; returns why, or NULL. */
static const char *tensor_count(tensor *t) {
    t->n = 1;
    for (int i = 0; i < t->ndim; i++) {
        if (t->dims[i] < 0 || t->dims[i] > ((int64_t)1 << 32) || (t->dims[i] && t->n > ((int64_t)1 << 32) / t->dims[i]))
            return "bad dimensions";
        t->n *= t->dims[i];
    }
    return NULL;
}

/* bytes per value in raw_data; 0 marks a type cltrain does not read */
static int elem_size(int dtype) {
    return dtype == T_FLOAT || dtype == T_INT32 ? 4 : dtype == T_INT64 || dtype == T_DOUBLE ? 8
           : dtype == T_UINT8 || dtype == T_INT8 || dtype == T_BOOL ? 1 : 0;
}

/* which typed repeated field ONNX puts a type's values in: float_data for float; int32_data for int32, int8, uint8,
 * bool; int64_data; double_data */
static int typed_field(int dtype) { return dtype == T_FLOAT ? 0 : dtype == T_INT64 ? 2 : dtype == T_DOUBLE ? 3 : 1; }

/* raw_data is unaligned little-endian bytes, hence memcpy; the length was checked by the caller */
static void decode_raw(tensor *t, const uint8_t *raw, int esz) {
    for (int64_t i = 0; i < t->n; i++) {
        const uint8_t *p = raw + (size_t)i * esz;
        double v;
        if (t->dtype == T_FLOAT) { float x; memcpy(&x, p, 4); v = x; }
        else if (t->dtype == T_DOUBLE) memcpy(&v, p, 8);
        else if (t->dtype == T_INT32) { int32_t x; memcpy(&x, p, 4); v = x; }
        else if (t->dtype == T_INT64) { int64_t x; memcpy(&x, p, 8); v = (double)x; }
        else if (t->dtype == T_INT8) v = (int8_t)*p;
        else v = *p;
        if (t->f) t->f[i] = (float)v;
        if (t->v) t->v[i] = v;
    }
}

/* Packed values come one varint or fixed-width word at a time, so their count is known only after decoding: *got
 * returns it for the caller to compare with the shape; returns why the field is unreadable, or NULL. */
static const char *decode_typed(tensor *t, pb d, int kind, int64_t *got) {
    *got = 0;
    while (d.p && d.p < d.end) {
        double v;
        if (kind == 0) { if (d.end - d.p < 4) return "damaged"; float x; memcpy(&x, d.p, 4); d.p += 4; v = x; }
        else if (kind == 3) { if (d.end - d.p < 8) return "damaged"; memcpy(&v, d.p, 8); d.p += 8; }
        else { uint64_t u; if (varint(&d, &u)) return "damaged"; v = kind == 2 ? (double)(int64_t)u : (double)(int32_t)u; }
        if (*got >= t->n) return "more values than its shape";
        if (t->f) t->f[*got] = (float)v;
        if (t->v) t->v[*got] = v;
        (*got)++;
    }
    return NULL;
}

static int read_tensor(pb r, tensor *t, char **name, const char *path) {
    memset(t, 0, sizeof *t);
    tsrc s = {0};
    const char *why = scan_tensor(r, t, name, &s);
    if (!why) why = tensor_count(t);
    int esz = elem_size(t->dtype);
    if (!why && !esz) why = "a data type cltrain does not read (float, double, int8/32/64, uint8, bool)";
    if (why) goto bad;
    int kd = typed_field(t->dtype);
    /* the values must be in the message: at most one per byte (varints), per 4 or 8 bytes, or raw */
    size_t avail = s.raw ? s.raw_n / (size_t)esz : kd == 0 ? (size_t)(s.fd[0].end - s.fd[0].p) / 4
                   : kd == 3 ? (size_t)(s.fd[3].end - s.fd[3].p) / 8 : (size_t)(s.fd[kd].end - s.fd[kd].p);
    if ((uint64_t)t->n > avail) {
        if (!s.raw && s.nf[kd] == 1) { why = "unpacked repeated values (write raw_data)"; goto bad; }
        return ct_fail(CT_EINPUT, "%s: tensor '%s': %zu data bytes for a shape of %lld elements of %d bytes", path,
                       name && *name ? *name : "?", s.raw ? s.raw_n : (size_t)(s.fd[kd].end - s.fd[kd].p), (long long)t->n, esz);
    }
    if (t->dtype == T_FLOAT || t->dtype == T_DOUBLE) t->f = malloc((size_t)t->n * sizeof(float) + 1);
    if (t->n <= MAX_CONST) t->v = malloc((size_t)t->n * sizeof(double) + 1);
    if ((t->dtype == T_FLOAT || t->dtype == T_DOUBLE) ? !t->f : !t->v) {
        why = t->n > MAX_CONST ? "a non-float tensor too large" : "out of memory";
        goto bad;
    }
    if (s.raw) {
        if (s.raw_n != (size_t)t->n * esz) {
            free(t->v), free(t->f), t->v = NULL, t->f = NULL;
            return ct_fail(CT_EINPUT, "%s: tensor '%s': %zu data bytes for a shape of %lld elements of %d bytes", path,
                           name && *name ? *name : "?", s.raw_n, (long long)t->n, esz);
        }
        decode_raw(t, s.raw, esz);
        return 0;
    }
    if (s.nf[kd] == 1 && t->n > 0) { why = "unpacked repeated values (write raw_data)"; goto bad; }
    int64_t got;
    if ((why = decode_typed(t, s.fd[kd], kd, &got))) goto bad;
    if (got != t->n) {
        free(t->v), free(t->f), t->v = NULL, t->f = NULL;
        return ct_fail(CT_EINPUT, "%s: tensor '%s': %lld values for a shape of %lld elements", path, name && *name ? *name : "?",
                       (long long)got, (long long)t->n);
    }
    return 0;
bad:
    free(t->v), free(t->f), t->v = NULL, t->f = NULL;
    return ct_fail(CT_EINPUT, "%s: tensor '%s': %s", path, name && *name ? *name : "?", why);
}

/* AttributeProto { name = 1; f = 2; i = 3; s = 4; t = 5; floats = 7; ints = 8; type = 20 } */
static int read_attr(pb r, attr *a, const char *path) {
    pbf f;
    int rc;
    while ((rc = next(&r, &f)) == 1) {
        if (f.field == 1 && f.wt == 2) { free(a->name); a->name = str_of(&f); }
        else if (f.field == 2 && f.wt == 5) memcpy(&a->f, f.d, 4);
        else if (f.field == 3 && f.wt == 0) a->i = (int64_t)f.v;
        else if (f.field == 4 && f.wt == 2) { free(a->s); a->s = str_of(&f); }
        else if (f.field == 20 && f.wt == 0) a->type = (int)f.v;
        else if (f.field == 5 && f.wt == 2) {
            if (a->t) { tensor_free(a->t); free(a->t); }
            a->t = ct_xcalloc(1, sizeof *a->t);
            if ((rc = read_tensor(sub(&f), a->t, NULL, path))) return rc;
        } else if (f.field == 8 && (f.wt == 0 || f.wt == 2)) {
            pb d = f.wt == 2 ? sub(&f) : (pb){0};
            uint64_t v = f.v;
            do {
                if (f.wt == 2 && varint(&d, &v)) return ct_fail(CT_EINPUT, "%s: damaged attribute", path);
                if (a->n_ints >= 64) return ct_fail(CT_EINPUT, "%s: attribute '%s' has more than 64 values", path, a->name ? a->name : "?");
                a->ints = realloc(a->ints, (size_t)(a->n_ints + 1) * sizeof *a->ints);
                a->ints[a->n_ints++] = (int64_t)v;
            } while (f.wt == 2 && d.p < d.end);
        }
    }
    return rc < 0 ? ct_fail(CT_EINPUT, "%s: damaged attribute", path) : 0;
}

static void push_str(char ***v, int *n, char *s) {
    *v = realloc(*v, (size_t)(*n + 1) * sizeof **v);
    (*v)[(*n)++] = s;
}

/* NodeProto { input = 1; output = 2; name = 3; op_type = 4; attribute = 5; domain = 7 } */
static int read_node(pb r, node *nd, const char *path) {
    pbf f;
    int rc;
    while ((rc = next(&r, &f)) == 1) {
        if (f.wt != 2) continue;
        if (f.field == 1) { if (nd->n_in >= 64) return ct_fail(CT_EINPUT, "%s: a node with over 64 inputs", path); push_str(&nd->in, &nd->n_in, str_of(&f)); }
        else if (f.field == 2) { if (nd->n_out >= 64) return ct_fail(CT_EINPUT, "%s: a node with over 64 outputs", path); push_str(&nd->out, &nd->n_out, str_of(&f)); }
        else if (f.field == 3) { free(nd->name); nd->name = str_of(&f); }
        else if (f.field == 4) { free(nd->op); nd->op = str_of(&f); }
        else if (f.field == 7) { free(nd->domain); nd->domain = str_of(&f); }
        else if (f.field == 5) {
            if (nd->n_at >= 64) return ct_fail(CT_EINPUT, "%s: a node with over 64 attributes", path);
            nd->at = realloc(nd->at, (size_t)(nd->n_at + 1) * sizeof *nd->at);
            memset(&nd->at[nd->n_at], 0, sizeof *nd->at);
            if ((rc = read_attr(sub(&f), &nd->at[nd->n_at++], path))) return rc;
        }
    }
    if (rc < 0) return ct_fail(CT_EINPUT, "%s: damaged node", path);
    if (!nd->op) return ct_fail(CT_EINPUT, "%s: a node without op_type", path);
    if (!nd->n_out) return ct_fail(CT_EINPUT, "%s: node '%s' (%s) has no output", path, nd->name ? nd->name : "", nd->op);
    if (!nd->name) nd->name = strdup("");
    return 0;
}

/* ValueInfoProto { name = 1; type = 2 { tensor_type = 1 { elem_type = 1; shape = 2 { dim = 1 { dim_value = 1; dim_param = 2 } } } } } */
static int read_vinfo(pb r, vinfo *v, const char *path) {
    pbf f, g, h, d, e;
    int rc;
    while ((rc = next(&r, &f)) == 1) {
        if (f.field == 1 && f.wt == 2) { free(v->name); v->name = str_of(&f); }
        else if (f.field == 2 && f.wt == 2) {
            pb tp = sub(&f);
            while ((rc = next(&tp, &g)) == 1) {
                if (g.field != 1 || g.wt != 2) continue;
                pb tt = sub(&g);
                while ((rc = next(&tt, &h)) == 1) {
                    if (h.field == 1 && h.wt == 0) v->elem = (int)h.v;
                    else if (h.field == 2 && h.wt == 2) {
                        pb sh = sub(&h);
                        while ((rc = next(&sh, &d)) == 1) {
                            if (d.field != 1 || d.wt != 2) continue;
                            if (v->ndim == 8) return ct_fail(CT_EINPUT, "%s: an input or output of over 8 dimensions", path);
                            int k = v->ndim++;
                            v->dynamic[k] = 1;
                            pb dm = sub(&d);
                            while ((rc = next(&dm, &e)) == 1)
                                if (e.field == 1 && e.wt == 0) v->dims[k] = (int64_t)e.v, v->dynamic[k] = 0;
                            if (rc < 0) break;
                        }
                    }
                    if (rc < 0) break;
                }
                if (rc < 0) break;
            }
        }
        if (rc < 0) break;
    }
    return rc < 0 ? ct_fail(CT_EINPUT, "%s: damaged input or output description", path) : 0;
}

/* GraphProto { node = 1; initializer = 5; input = 11; output = 12 } */
static int read_graph(pb r, imp *im) {
    pbf f;
    int rc = 0, more = 0;
    while (!rc && (more = next(&r, &f)) == 1) {
        if (f.wt != 2) continue;
        if (f.field == 1) {
            if (im->n_nodes >= 100000) return ct_fail(CT_EINPUT, "%s: over 100000 nodes", im->path);
            im->nodes = realloc(im->nodes, (size_t)(im->n_nodes + 1) * sizeof *im->nodes);
            memset(&im->nodes[im->n_nodes], 0, sizeof *im->nodes);
            rc = read_node(sub(&f), &im->nodes[im->n_nodes++], im->path);
        } else if (f.field == 5) {
            im->inits = realloc(im->inits, (size_t)(im->n_inits + 1) * sizeof *im->inits);
            im->init_names = realloc(im->init_names, (size_t)(im->n_inits + 1) * sizeof *im->init_names);
            im->init_names[im->n_inits] = NULL;
            memset(&im->inits[im->n_inits], 0, sizeof *im->inits);
            rc = read_tensor(sub(&f), &im->inits[im->n_inits], &im->init_names[im->n_inits], im->path);
            im->n_inits++;
            if (!rc && !im->init_names[im->n_inits - 1]) rc = ct_fail(CT_EINPUT, "%s: an initializer without a name", im->path);
        } else if (f.field == 11 || f.field == 12) {
            vinfo **v = f.field == 11 ? &im->inputs : &im->outputs;
            int *n = f.field == 11 ? &im->n_inputs : &im->n_outputs;
            if (*n >= 10000) return ct_fail(CT_EINPUT, "%s: too many inputs or outputs", im->path);
            *v = realloc(*v, (size_t)(*n + 1) * sizeof **v);
            memset(&(*v)[*n], 0, sizeof **v);
            rc = read_vinfo(sub(&f), &(*v)[(*n)++], im->path);
        }
    }
    if (!rc && more < 0) rc = ct_fail(CT_EINPUT, "%s: damaged graph (truncated?)", im->path);
    return rc;
}

/* ModelProto { ir_version = 1; opset_import = 8 { domain = 1; version = 2 }; graph = 7; metadata_props = 14 { key = 1; value = 2 } } */
static int read_model(const uint8_t *buf, size_t len, imp *im) {
    pb r = {buf, buf + len};
    pbf f, g;
    int rc, graphs = 0;
    im->opset = -1;
    while ((rc = next(&r, &f)) == 1) {
        if (f.field == 8 && f.wt == 2) {
            pb o = sub(&f);
            char *dom = NULL;
            int64_t ver = 0;
            while ((rc = next(&o, &g)) == 1) {
                if (g.field == 1 && g.wt == 2) { free(dom); dom = str_of(&g); }
                else if (g.field == 2 && g.wt == 0) ver = (int64_t)g.v;
            }
            if (rc < 0) { free(dom); break; }
            if (!dom || !dom[0] || !strcmp(dom, "ai.onnx")) im->opset = (int)(ver > 1000 ? 1000 : ver);
            free(dom);
        } else if (f.field == 7 && f.wt == 2) {
            if (graphs++) return ct_fail(CT_EINPUT, "%s: two graphs", im->path);
            if ((rc = read_graph(sub(&f), im))) return rc;
        } else if (f.field == 14 && f.wt == 2) {
            pb o = sub(&f);
            char *k = NULL, *v = NULL;
            while ((rc = next(&o, &g)) == 1) {
                if (g.field == 1 && g.wt == 2) { free(k); k = str_of(&g); }
                else if (g.field == 2 && g.wt == 2) { free(v); v = str_of(&g); }
            }
            push_str(&im->meta_k, &im->n_meta, k ? k : strdup(""));
            im->n_meta--;
            push_str(&im->meta_v, &im->n_meta, v ? v : strdup(""));
            if (rc < 0) break;
        }
    }
    if (rc < 0)
        return ct_fail(CT_EINPUT, "%s: not an ONNX model, or truncated (the protobuf encoding breaks off)", im->path);
    if (!graphs) return ct_fail(CT_EINPUT, "%s: not an ONNX model (no graph); write it with torch.onnx.export", im->path);
    if (im->opset < 11 || im->opset > 21)
        return ct_fail(CT_EINPUT, "%s: opset %d; cltrain imports opsets 11 to 21 (torch.onnx.export(..., opset_version=13))",
                       im->path, im->opset);
    return 0;
}

/* ---- values ---------------------------------------------------------------------- */

/* a constant tensor (copied) */
static void set_const(imp *im, const char *name, const tensor *t) {
    val *v = ct_onnx_add_val(im, name, 1);
    v->t = *t;
    v->t.v = t->v ? ct_xmalloc((size_t)t->n * sizeof(double) + 1) : NULL;
    v->t.f = t->f ? ct_xmalloc((size_t)t->n * sizeof(float) + 1) : NULL;
    if (t->v) memcpy(v->t.v, t->v, (size_t)t->n * sizeof(double));
    if (t->f) memcpy(v->t.f, t->f, (size_t)t->n * sizeof(float));
}

/* ---- constant folding of shape arithmetic ---------------------------------------------- */

/* a value as an integer, clamped (a cast of an out-of-range double is undefined; NaN, the batch, is 0) */
static int64_t i64(double v) { return v != v ? 0 : v > 4e18 ? (int64_t)4e18 : v < -4e18 ? -(int64_t)4e18 : (int64_t)v; }

/* Constant: exporters write its value in several attribute forms; all become one constant tensor so that the shape
 * arithmetic reading it can be folded */
static int fold_constant(imp *im, const node *nd) {
    tensor t;
    const attr *at = ct_onnx_node_attr(nd, "value");
    if (at && at->t) { set_const(im, nd->out[0], at->t); return 0; }
    if ((at = ct_onnx_node_attr(nd, "value_float"))) { float f = at->f; double d = f; t = (tensor){.dtype = T_FLOAT, .n = 1, .v = &d, .f = &f}; set_const(im, nd->out[0], &t); return 0; }
    if ((at = ct_onnx_node_attr(nd, "value_int"))) { double d = (double)at->i; t = (tensor){.dtype = T_INT64, .n = 1, .v = &d}; set_const(im, nd->out[0], &t); return 0; }
    if ((at = ct_onnx_node_attr(nd, "value_ints"))) {
        double d[64];
        for (int i = 0; i < at->n_ints; i++) d[i] = (double)at->ints[i];
        t = (tensor){.dtype = T_INT64, .ndim = 1, .dims = {at->n_ints}, .n = at->n_ints, .v = d};
        set_const(im, nd->out[0], &t);
        return 0;
    }
    return ct_onnx_fail(im, nd, "a Constant without a value cltrain reads");
}

/* Shape: an activation's shape is known at import time except the batch (NaN), so the reshapes exporters compute
 * from it fold to constants; 1 when its input is not known yet */
static int fold_shape(imp *im, const node *nd, const tensor *a) {
    tensor t;
    const act *x = ct_onnx_act_in(im, nd, 0);
    if (!x && a) { /* the shape of a constant */
        double d[8];
        for (int i = 0; i < a->ndim; i++) d[i] = (double)a->dims[i];
        t = (tensor){.dtype = T_INT64, .ndim = 1, .dims = {a->ndim}, .n = a->ndim, .v = d};
        set_const(im, nd->out[0], &t);
        return 0;
    }
    if (!x) return 1;
    double d[4] = {NAN, x->c + x->padc, x->h, x->w};
    int r = x->rank;
    if (r == 2) d[1] = (double)x->c * x->h * x->w;
    if (x->step > 1) d[2] = (x->h + x->step - 1) / x->step, d[3] = (x->w + x->step - 1) / x->step;
    t = (tensor){.dtype = T_INT64, .ndim = 1, .dims = {r}, .n = r, .v = d};
    set_const(im, nd->out[0], &t);
    return 0;
}

/* The folders below fill *t (its values allocated) and return 0, or return -1 for shapes or values out of range,
 * leaving nothing allocated: fold reports that once for all of them. */

/* ConstantOfShape: sizes come from the file, so each is bounded before the allocation */
static int fold_const_of_shape(const node *nd, const tensor *a, tensor *t) {
    const attr *at = ct_onnx_node_attr(nd, "value");
    double fill = at && at->t && at->t->v && at->t->n == 1 ? at->t->v[0] : 0;
    t->dtype = at && at->t ? at->t->dtype : T_FLOAT;
    t->ndim = (int)a->n;
    t->n = 1;
    if (a->n > 8) return -1;
    for (int i = 0; i < a->n; i++) {
        if (!(a->v[i] >= 0) || a->v[i] > MAX_CONST) return -1;
        t->dims[i] = (int64_t)a->v[i];
        t->n *= t->dims[i];
    }
    if (t->n > MAX_CONST) return -1;
    t->v = ct_xmalloc((size_t)t->n * sizeof(double) + 1);
    for (int64_t i = 0; i < t->n; i++) t->v[i] = fill;
    return 0;
}

/* Concat of 1-D constants, the way exporters assemble a target shape */
static int fold_concat(imp *im, const node *nd, const tensor *a, tensor *t) {
    int64_t n = 0;
    for (int k = 0; k < nd->n_in; k++) {
        const tensor *c = ct_onnx_const_in(im, nd, k);
        if (!c || !c->v || c->ndim != 1) return -1;
        n += c->n;
    }
    if (n > MAX_CONST) return -1;
    *t = (tensor){.dtype = a->dtype, .ndim = 1, .dims = {n}, .n = n, .v = ct_xmalloc((size_t)n * sizeof(double) + 1)};
    n = 0;
    for (int k = 0; k < nd->n_in; k++) {
        const tensor *c = ct_onnx_const_in(im, nd, k);
        memcpy(t->v + n, c->v, (size_t)c->n * sizeof(double));
        n += c->n;
    }
    return 0;
}

/* Reshape with ONNX's 0 (keep) and -1 (infer); the running product is bounded so that it cannot overflow */
static int fold_reshape(const tensor *a, const tensor *b, tensor *t) {
    if (!b || !b->v || b->n > 8) return -1;
    *t = (tensor){.dtype = a->dtype, .ndim = (int)b->n, .n = a->n};
    int64_t known = 1, infer = -1;
    for (int i = 0; i < b->n; i++) {
        int64_t d = i64(b->v[i]);
        if (d == 0 && i < a->ndim) d = a->dims[i];
        if (d == -1) { if (infer >= 0) return -1; infer = i; d = 1; }
        else if (d < 0 || d > MAX_CONST) return -1;
        t->dims[i] = d;
        known *= d ? d : 1;
        if (known > MAX_CONST) return -1; /* more than the tensor (at most MAX_CONST elements) holds */
    }
    if (infer >= 0) t->dims[infer] = known ? a->n / known : 0;
    int64_t n = 1;
    for (int i = 0; i < t->ndim; i++) n *= t->dims[i]; /* each factor and the product of the others at most MAX_CONST */
    if (n != a->n) return -1;
    t->v = ct_xmalloc((size_t)n * sizeof(double) + 1);
    memcpy(t->v, a->v, (size_t)n * sizeof(double));
    return 0;
}

/* Transpose, reversing the axes when perm is absent as ONNX specifies */
static int fold_transpose(const node *nd, const tensor *a, tensor *t) {
    int64_t perm[8];
    int np = ct_onnx_node_ints(nd, "perm", perm, 8);
    if (a->ndim > 8 || (np && np != a->ndim)) return -1;
    if (!np) for (int i = 0; i < a->ndim; i++) perm[i] = a->ndim - 1 - i;
    *t = (tensor){.dtype = a->dtype, .ndim = a->ndim, .n = a->n, .v = ct_xmalloc((size_t)a->n * sizeof(double) + 1)};
    int64_t st[8], idx[8] = {0};
    for (int i = a->ndim - 1, s = 1; i >= 0; i--) st[i] = s, s *= (int)a->dims[i];
    for (int i = 0; i < a->ndim; i++) {
        if (perm[i] < 0 || perm[i] >= a->ndim) { free(t->v); return -1; }
        t->dims[i] = a->dims[perm[i]];
    }
    for (int64_t o = 0; o < t->n; o++) {
        int64_t src = 0;
        for (int i = 0; i < t->ndim; i++) src += idx[i] * st[perm[i]];
        t->v[o] = a->v[src];
        for (int i = t->ndim - 1; i >= 0 && ++idx[i] == t->dims[i]; i--) idx[i] = 0;
    }
    return 0;
}

/* Slice with starts, ends, axes, steps as inputs (opset >= 10), clamped as numpy does, huge ends meaning "to the
 * end" */
static int fold_slice(imp *im, const node *nd, const tensor *a, const tensor *b, tensor *t) {
    const tensor *s = b, *e = ct_onnx_const_in(im, nd, 2), *ax = ct_onnx_const_in(im, nd, 3), *sp = ct_onnx_const_in(im, nd, 4);
    if (!s || !e || !s->v || !e->v || s->n != e->n || (ax && (!ax->v || ax->n != s->n)) || (sp && (!sp->v || sp->n != s->n)) || a->ndim > 8 || a->ndim < 1)
        return -1;
    int64_t lo[8], step[8], cnt[8];
    for (int i = 0; i < a->ndim; i++) lo[i] = 0, step[i] = 1, cnt[i] = a->dims[i];
    for (int j = 0; j < s->n; j++) {
        int64_t axis = ax ? i64(ax->v[j]) : j, st = sp ? i64(sp->v[j]) : 1;
        if (axis < 0) axis += a->ndim;
        if (axis < 0 || axis >= a->ndim || st == 0) return -1;
        int64_t D = a->dims[axis];
        double sv = s->v[j], ev = e->v[j];
        int64_t s0 = sv < -1e18 ? -D - 1 : sv > 1e18 ? D : (int64_t)sv, e0 = ev < -1e18 ? -D - 1 : ev > 1e18 ? D + 1 : (int64_t)ev;
        if (s0 < 0) s0 += D;
        if (e0 < 0) e0 += D;
        if (st > 0) { s0 = s0 < 0 ? 0 : s0 > D ? D : s0; e0 = e0 < 0 ? 0 : e0 > D ? D : e0; cnt[axis] = e0 > s0 ? (e0 - s0 + st - 1) / st : 0; }
        else { s0 = s0 < 0 ? -1 : s0 > D - 1 ? D - 1 : s0; e0 = e0 < -1 ? -1 : e0 > D - 1 ? D - 1 : e0; cnt[axis] = s0 > e0 ? (s0 - e0 - st - 1) / -st : 0; }
        lo[axis] = s0;
        step[axis] = st;
    }
    *t = (tensor){.dtype = a->dtype, .ndim = a->ndim, .n = 1};
    for (int i = 0; i < a->ndim; i++) t->dims[i] = cnt[i], t->n *= cnt[i];
    t->v = ct_xmalloc((size_t)t->n * sizeof(double) + 1);
    int64_t st[8], idx[8] = {0};
    for (int i = a->ndim - 1, sz = 1; i >= 0; i--) st[i] = sz, sz *= (int)a->dims[i];
    for (int64_t o = 0; o < t->n; o++) {
        int64_t src = 0;
        for (int i = 0; i < t->ndim; i++) src += (lo[i] + idx[i] * step[i]) * st[i];
        t->v[o] = a->v[src];
        for (int i = t->ndim - 1; i >= 0 && ++idx[i] == t->dims[i]; i--) idx[i] = 0;
    }
    return 0;
}

/* Gather from a 1-D constant only (picking entries of a shape), negative indices counting from the end */
static int fold_gather(const node *nd, const tensor *a, const tensor *b, tensor *t) {
    if (!b || !b->v || a->ndim != 1 || ct_onnx_node_int(nd, "axis", 0) != 0 || b->n > MAX_CONST) return -1;
    *t = (tensor){.dtype = a->dtype, .ndim = b->ndim, .n = b->n, .v = ct_xmalloc((size_t)b->n * sizeof(double) + 1)};
    memcpy(t->dims, b->dims, sizeof t->dims);
    for (int64_t i = 0; i < b->n; i++) {
        int64_t k = i64(b->v[i]);
        if (k < 0) k += a->n;
        if (k < 0 || k >= a->n) { free(t->v); return -1; }
        t->v[i] = a->v[k];
    }
    return 0;
}

/* Unsqueeze and Squeeze together: both only change dims, their axes an input (opset >= 13) or an attribute */
static int fold_squeeze(const node *nd, const tensor *a, const tensor *b, tensor *t) {
    *t = (tensor){.dtype = a->dtype, .ndim = a->ndim, .n = a->n, .v = ct_xmalloc((size_t)a->n * sizeof(double) + 1)};
    memcpy(t->v, a->v, (size_t)a->n * sizeof(double));
    memcpy(t->dims, a->dims, sizeof t->dims);
    int64_t axes[8];
    int na = b && b->v && b->n <= 8 ? (int)b->n : ct_onnx_node_ints(nd, "axes", axes, 8);
    if (b && b->v && b->n <= 8) for (int i = 0; i < na; i++) axes[i] = i64(b->v[i]);
    if (na > 8) { free(t->v); return -1; }
    if (!strcmp(nd->op, "Unsqueeze")) {
        if (a->ndim + na > 8) { free(t->v); return -1; }
        for (int i = 0; i < na; i++) {
            int64_t ax = axes[i] < 0 ? axes[i] + t->ndim + 1 : axes[i];
            if (ax < 0 || ax > t->ndim) { free(t->v); return -1; }
            memmove(t->dims + ax + 1, t->dims + ax, (size_t)(t->ndim - ax) * sizeof *t->dims);
            t->dims[ax] = 1;
            t->ndim++;
        }
    } else {
        int nd2 = 0;
        for (int i = 0; i < a->ndim; i++) {
            int drop = 0;
            for (int j = 0; j < na; j++) drop |= axes[j] == i || axes[j] + a->ndim == i;
            if (!na) drop = a->dims[i] == 1;
            if (!drop) t->dims[nd2++] = a->dims[i];
        }
        t->ndim = nd2;
    }
    return 0;
}

/* Add, Sub, Mul, Div of same-sized tensors or with a scalar; integer division truncates as ONNX's does */
static int fold_arith(const char *op, const tensor *a, const tensor *b, tensor *t) {
    if (!b || !b->v || (a->n != b->n && ((a->n != 1 && b->n != 1) || !a->n || !b->n))) return -1; /* same size, or a scalar */
    const tensor *big = a->n >= b->n ? a : b;
    *t = (tensor){.dtype = a->dtype, .ndim = big->ndim, .n = big->n, .v = ct_xmalloc((size_t)big->n * sizeof(double) + 1)};
    memcpy(t->dims, big->dims, sizeof t->dims);
    int isint = a->dtype != T_FLOAT && a->dtype != T_DOUBLE;
    for (int64_t i = 0; i < t->n; i++) {
        double x = a->v[a->n == 1 ? 0 : i], y = b->v[b->n == 1 ? 0 : i];
        t->v[i] = op[0] == 'A' ? x + y : op[0] == 'S' ? x - y : op[0] == 'M' ? x * y : isint ? (y ? trunc(x / y) : NAN) : x / y;
    }
    return 0;
}

/* Evaluates a node at import time when all its inputs are constants (the shape arithmetic exporters emit around
 * flattens); 0 when folded, 1 when the node is not constant (a layer), below 0 on error. */
static int fold(imp *im, const node *nd) {
    const char *op = nd->op;
    const tensor *a = ct_onnx_const_in(im, nd, 0), *b = ct_onnx_const_in(im, nd, 1);
    if (!strcmp(op, "Constant")) return fold_constant(im, nd);
    if (!strcmp(op, "Shape")) return fold_shape(im, nd, a);
    /* every input present must be constant from here on */
    for (int k = 0; k < nd->n_in; k++)
        if (nd->in[k][0] && !ct_onnx_const_in(im, nd, k)) return 1;
    if (!a) return 1;
    if (!a->v) return ct_onnx_fail(im, nd, "constant arithmetic on a tensor of %lld elements (at most %d)", (long long)a->n, MAX_CONST);
    tensor t;
    memset(&t, 0, sizeof t);
    t.dtype = a->dtype;
    if (!strcmp(op, "Identity") || !strcmp(op, "Cast")) {
        t = *a;
        if (!strcmp(op, "Cast")) t.dtype = (int)ct_onnx_node_int(nd, "to", T_INT64), t.f = NULL;
        set_const(im, nd->out[0], &t);
        return 0;
    }
    int bad;
    if (!strcmp(op, "ConstantOfShape")) bad = fold_const_of_shape(nd, a, &t);
    else if (!strcmp(op, "Concat")) bad = fold_concat(im, nd, a, &t);
    else if (!strcmp(op, "Reshape")) bad = fold_reshape(a, b, &t);
    else if (!strcmp(op, "Transpose")) bad = fold_transpose(nd, a, &t);
    else if (!strcmp(op, "Slice")) bad = fold_slice(im, nd, a, b, &t);
    else if (!strcmp(op, "Gather")) bad = fold_gather(nd, a, b, &t);
    else if (!strcmp(op, "Unsqueeze") || !strcmp(op, "Squeeze")) bad = fold_squeeze(nd, a, b, &t);
    else if (!strcmp(op, "Add") || !strcmp(op, "Sub") || !strcmp(op, "Mul") || !strcmp(op, "Div")) bad = fold_arith(op, a, b, &t);
    else return 1;
    if (bad) return ct_onnx_fail(im, nd, "constant arithmetic cltrain cannot evaluate (shapes or values out of range)");
    if ((im->folded += t.n) > MAX_FOLDED) {
        free(t.v);
        return ct_onnx_fail(im, nd, "constant arithmetic beyond %d elements in all", MAX_FOLDED);
    }
    set_const(im, nd->out[0], &t);
    free(t.v);
    return 0;
}

/* ---- layers --------------------------------------------------------------------- */

/* how many nodes read tensor name */
static int readers(const imp *im, const char *name) {
    int n = 0;
    for (int i = 0; i < im->n_nodes; i++)
        for (int k = 0; k < im->nodes[i].n_in; k++) n += !strcmp(im->nodes[i].in[k], name);
    for (int i = 0; i < im->n_outputs; i++) n += im->outputs[i].name && !strcmp(im->outputs[i].name, name);
    return n;
}

static int graph_output(const imp *im, const char *name) {
    for (int i = 0; i < im->n_outputs; i++)
        if (im->outputs[i].name && !strcmp(im->outputs[i].name, name)) return 1;
    return 0;
}

/* 1 when layer type t takes activation= (cltrain applies Relu and Gelu inside such a layer) */
static int takes_activation(int t) {
    for (int k = 0; k < ct_layer_table[t]->n_keys; k++)
        if (ct_layer_table[t]->keys[k].type == CT_KEY_ACT) return 1;
    return 0;
}
/* their names: "conv, dense, ..." */
static const char *activated_types(void) {
    static char text[256];
    size_t n = 0;
    text[0] = 0;
    for (int t = 0; t < CT_LAYER_TYPES; t++)
        if (takes_activation(t) && n < sizeof text)
            n += (size_t)snprintf(text + n, sizeof text - n, "%s%s", n ? ", " : "", ct_layer_table[t]->name);
    return text;
}

/* ---- GELU as its formula: x/2 (1 + erf(x/sqrt 2)), or the tanh form x/2 (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) ---- */

enum { G_XS = 1, G_ERF, G_ERF1, G_XERF1, G_XH, G_X2, G_X3, G_CX3, G_INNER, G_IN2, G_TANH, G_TANH1, G_XTANH1 };

static int near(const tensor *c, double v) {
    return c && c->v && c->n == 1 && fabs(c->v[0] - v) <= 1e-5 * fabs(v);
}

/* the activation the node may apply GELU to: the newest, a layer's, seen whole, not yet activated */
static int gelu_base(imp *im, const act *x) {
    return x->layer >= 0 && x->layer == im->last.layer && x->step == 1 && !x->padc && !im->layers[x->layer].act;
}

/* 1: nd was a step of GELU's formula (handled); 0: not one; < 0: an error */
static int gelu_step(imp *im, const node *nd) {
    const char *op = nd->op;
    val *a = nd->n_in > 0 && nd->in[0][0] ? ct_onnx_find(im, nd->in[0]) : NULL, *b = nd->n_in > 1 && nd->in[1][0] ? ct_onnx_find(im, nd->in[1]) : NULL;
    if (!a || (nd->n_in > 1 && !b)) return 0;
    val *x = NULL, *p = NULL, *p2 = NULL;
    const tensor *c = NULL;
    for (int k = 0; k < 2; k++) {
        val *v = k ? b : a;
        if (!v) continue;
        if (v->kind == 1) c = &v->t;
        else if (v->kind == 2) { if (x && x != v) return 0; x = v; }
        else if (p) p2 = v;
        else p = v;
    }
    int tag = 0, uses = 0, gelu = 0;
    const act *base = x ? &x->a : p ? &p->a : NULL;
    if (!base || (x && !gelu_base(im, &x->a))) return 0;
    if (p && x && (p->a.layer != x->a.layer)) return 0;
    if (p && p2 && p->a.layer != p2->a.layer) return 0;
    int px = p ? p->tag : 0, py = p2 ? p2->tag : 0;
    int twice = a == b; /* x * x */
    if (!strcmp(op, "Mul")) {
        if (x && near(c, M_SQRT1_2)) tag = G_XS, uses = 1;
        else if (x && near(c, 0.5)) tag = G_XH, uses = 1;
        else if (x && twice) tag = G_X2, uses = 2;
        else if (x && px == G_ERF1) tag = G_XERF1, uses = 1;
        else if (x && px == G_TANH1) tag = G_XTANH1, uses = 1;
        else if (x && px == G_X2) tag = G_X3, uses = 1;
        else if (px == G_X3 && near(c, 0.044715)) tag = G_CX3;
        else if (px == G_INNER && near(c, sqrt(2 / M_PI))) tag = G_IN2;
        else if ((px == G_XERF1 || px == G_XTANH1) && near(c, 0.5)) gelu = px == G_XERF1 ? 1 : 2;
        else if ((px == G_XH && (py == G_ERF1 || py == G_TANH1)) || (py == G_XH && (px == G_ERF1 || px == G_TANH1)))
            gelu = px == G_ERF1 || py == G_ERF1 ? 1 : 2;
    } else if (!strcmp(op, "Div")) {
        if (x && a == x && near(c, M_SQRT2)) tag = G_XS, uses = 1;
    } else if (!strcmp(op, "Pow")) {
        if (x && a == x && near(c, 3)) tag = G_X3, uses = 1;
    } else if (!strcmp(op, "Erf")) {
        if (px == G_XS && nd->n_in == 1) tag = G_ERF;
    } else if (!strcmp(op, "Tanh")) {
        if (px == G_IN2 && nd->n_in == 1) tag = G_TANH;
    } else if (!strcmp(op, "Add")) {
        if ((px == G_ERF || px == G_TANH) && near(c, 1)) tag = px == G_ERF ? G_ERF1 : G_TANH1;
        else if (x && px == G_CX3) tag = G_INNER, uses = 1;
    }
    if (!tag && !gelu) return 0;
    int total = uses + (p ? p->uses : 0) + (p2 ? p2->uses : 0);
    if (gelu) {
        lay *L = &im->layers[base->layer];
        const char *xname = NULL;
        for (int i = im->n_vals - 1; i >= 0 && !xname; i--)
            if (im->vals[i].kind == 2 && im->vals[i].a.layer == base->layer && !memcmp(&im->vals[i].a, base, sizeof *base))
                xname = im->vals[i].name;
        if (xname && readers(im, xname) > total)
            return ct_onnx_fail(im, nd, "GELU of a tensor that is also read elsewhere (before the GELU)");
        if (!takes_activation(L->type))
            return ct_onnx_fail(im, nd, "cltrain applies GELU inside a layer that takes activation= (%s); this one follows %s",
                                activated_types(), ct_layer_table[L->type]->name);
        L->act = CT_ACT_GELU;
        if (gelu == 2) ct_onnx_note(im, "GELU's tanh approximation imported as cltrain's GELU, the exact erf form (they differ by up to 3e-4 per value)");
        ct_onnx_set_act(im, nd->out[0], *base);
        return 1;
    }
    val *v = ct_onnx_add_val(im, nd->out[0], 3);
    v->a = *base;
    v->tag = tag;
    v->uses = total;
    return 1;
}

/* Slice as a view: a residual's subsampling (x[:, :, ::s, ::s]) costs no layer, the shortcut reads every step-th
 * pixel of an earlier output */
static int view_slice(imp *im, const node *nd, const act *x) {
    const tensor *s = ct_onnx_const_in(im, nd, 1), *e = ct_onnx_const_in(im, nd, 2), *ax = ct_onnx_const_in(im, nd, 3), *sp = ct_onnx_const_in(im, nd, 4);
    if (!x || x->rank != 4 || !s || !e || !s->v || !e->v || s->n != e->n || (ax && (!ax->v || ax->n != s->n)) || (sp && (!sp->v || sp->n != s->n)))
        return ct_onnx_fail(im, nd, "a Slice cltrain takes only as a residual's subsampling (x[:, :, ::s, ::s])");
    act v = *x;
    int step_h = 0, step_w = 0;
    int dims[4] = {0, x->c, x->h, x->w};
    for (int j = 0; j < s->n; j++) {
        int64_t axis = ax ? i64(ax->v[j]) : j, st = sp ? i64(sp->v[j]) : 1;
        if (axis < 0) axis += 4;
        if (axis < 0 || axis > 3 || s->v[j] != 0 || st < 1 || (axis > 0 && e->v[j] < dims[axis]) || (axis < 2 && st != 1))
            return ct_onnx_fail(im, nd, "a Slice cltrain takes only as a residual's subsampling (x[:, :, ::s, ::s]): from 0 to the end, "
                             "steps only along H and W");
        if (axis == 2) step_h = (int)st;
        if (axis == 3) step_w = (int)st;
    }
    if (step_h && step_w && step_h != step_w) return ct_onnx_fail(im, nd, "different steps along H and W");
    int st = step_h ? step_h : step_w ? step_w : 1;
    if (st > 1) {
        if (v.step > 1 && (step_h == 0) == (step_w == 0)) return ct_onnx_fail(im, nd, "subsampled twice");
        /* one axis at a time (PyTorch exports x[:, :, ::2, ::2] as two Slices): the first sets the step, the second must agree */
        if (v.step > 1 && v.step != st) return ct_onnx_fail(im, nd, "different steps along H and W");
        v.step = st;
    }
    ct_onnx_set_act(im, nd->out[0], v);
    return 0;
}

/* Pad as a view: a residual's zero channels appended, which cltrain's [shortcut] does itself */
static int view_pad(imp *im, const node *nd, const act *x) {
    const tensor *p = ct_onnx_const_in(im, nd, 1), *cv = ct_onnx_const_in(im, nd, 2);
    const attr *mode = ct_onnx_node_attr(nd, "mode");
    if (!x || x->rank != 4 || !p || !p->v || p->n != 8 || (cv && (!cv->v || cv->n != 1 || cv->v[0] != 0)) ||
        (mode && mode->s && strcmp(mode->s, "constant")))
        return ct_onnx_fail(im, nd, "a Pad cltrain takes only as a residual's zero channels appended");
    for (int i = 0; i < 8; i++)
        if (i != 5 && p->v[i] != 0) return ct_onnx_fail(im, nd, "pads other than channels at the end; cltrain's [shortcut] appends zero channels");
    if (!(p->v[5] >= 0 && p->v[5] <= 65536)) return ct_onnx_fail(im, nd, "pads out of range");
    act v = *x;
    v.padc += (int)p->v[5];
    ct_onnx_set_act(im, nd->out[0], v);
    return 0;
}

/* a final Softmax/LogSoftmax is dropped rather than refused: cltrain's loss and predict apply their own */
static int drop_softmax(imp *im, const node *nd, const act *x) {
    if (!x || !graph_output(im, nd->out[0]) || x->layer != im->last.layer || x->rank != 2)
        return ct_onnx_fail(im, nd, "only a final Softmax or LogSoftmax over the classes is dropped (cltrain's loss applies its own)");
    ct_onnx_note(im, "the final Softmax/LogSoftmax is dropped: cltrain's predict prints probabilities, --logits writes the logits before it");
    val *v = ct_onnx_add_val(im, nd->out[0], 2);
    v->a = *x;
    v->dropped = 1; /* an output that is its input's */
    return 0;
}

/* Relu and Gelu are no layers of their own in cltrain: they merge into the layer before, which must have no
 * activation yet and no other reader of its pre-activation output */
static int fuse_activation(imp *im, const node *nd, const act *x) {
    const attr *ap = ct_onnx_node_attr(nd, "approximate");
    int gelu = nd->op[0] == 'G';
    if (gelu && ap && ap->s && !strcmp(ap->s, "tanh"))
        ct_onnx_note(im, "GELU's tanh approximation imported as cltrain's GELU, the exact erf form (they differ by up to 3e-4 per value)");
    lay *L = x->layer >= 0 ? &im->layers[x->layer] : NULL;
    if (!L || L->act || !takes_activation(L->type))
        return ct_onnx_fail(im, nd, "cltrain applies %s inside a layer that takes activation= (%s); this one follows %s",
                            gelu ? "GELU" : "ReLU", activated_types(), L ? ct_layer_table[L->type]->name : "the input");
    if (readers(im, nd->in[0]) > 1) return ct_onnx_fail(im, nd, "its input is also read elsewhere (before the activation)");
    L->act = gelu ? CT_ACT_GELU : CT_ACT_RELU;
    ct_onnx_set_act(im, nd->out[0], *x);
    return 0;
}

/* Flatten, Reshape and Squeeze only as the flatten before Gemm or MatMul, which cltrain's dense layer does itself */
static int view_flatten(imp *im, const node *nd, const act *x) {
    const char *op = nd->op;
    if (!strcmp(op, "Flatten") && ct_onnx_node_int(nd, "axis", 1) != 1) return ct_onnx_fail(im, nd, "Flatten with axis %lld; cltrain flattens after the batch", (long long)ct_onnx_node_int(nd, "axis", 1));
    if (!strcmp(op, "Reshape")) {
        const tensor *s = ct_onnx_const_in(im, nd, 1);
        int64_t F = (int64_t)x->c * x->h * x->w;
        if (!s || !s->v || s->n != 2 || !(isnan(s->v[0]) || s->v[0] == -1 || s->v[0] == 0) || !(s->v[1] == F || s->v[1] == -1))
            return ct_onnx_fail(im, nd, "a Reshape to other than [N, %lld] (a flatten before Gemm or MatMul)", (long long)F);
    }
    if (!strcmp(op, "Squeeze") && (x->rank != 4 || x->h != 1 || x->w != 1))
        return ct_onnx_fail(im, nd, "a Squeeze of other than [N, C, 1, 1]");
    act v = *x;
    v.rank = 2;
    ct_onnx_set_act(im, nd->out[0], v);
    return 0;
}

/* A node no view or folding took: the layer type whose ct_layer_ops.import takes it, or a Relu, Gelu or flatten
 * on the newest activation */
static int ask_layers(imp *im, const node *nd) {
    const char *op = nd->op;
    for (int t = 0; t < CT_LAYER_TYPES; t++) {
        int rc = ct_layer_table[t]->import ? ct_layer_table[t]->import(im, nd) : 1;
        if (rc <= 0) return rc;
    }
    int relu = !strcmp(op, "Relu") || !strcmp(op, "Gelu"), flat = !strcmp(op, "Flatten") || !strcmp(op, "Reshape") || !strcmp(op, "Squeeze");
    if (!relu && !flat) return ct_onnx_fail(im, nd, "not an op cltrain imports; %s", supported());
    const act *x;
    int rc = ct_onnx_newest(im, nd, &x);
    return rc ? rc : relu ? fuse_activation(im, nd, x) : view_flatten(im, nd, x);
}

/* Maps one ONNX node onto cltrain's layers: folded when constant, a view when it only re-reads an earlier output,
 * otherwise a layer; 0 when handled, below 0 after the one error line */
static int do_node(imp *im, const node *nd) {
    const char *op = nd->op;
    if (nd->domain && nd->domain[0] && strcmp(nd->domain, "ai.onnx"))
        return ct_onnx_fail(im, nd, "an op of domain '%s'; %s", nd->domain, supported());
    int rc = fold(im, nd);
    if (rc <= 0) return rc;
    if ((rc = gelu_step(im, nd))) return rc < 0 ? rc : 0;
    const act *x = ct_onnx_act_in(im, nd, 0);
    /* views and a dropped Softmax: no layer, and their input may be any earlier output */
    if (!strcmp(op, "Identity") || !strcmp(op, "Dropout")) {
        if (!x) return ct_onnx_fail(im, nd, "its input is not known");
        if (nd->n_out > 1 && nd->out[1][0] && readers(im, nd->out[1])) return ct_onnx_fail(im, nd, "its mask output is used");
        ct_onnx_set_act(im, nd->out[0], *x);
        return 0;
    }
    if (!strcmp(op, "Slice")) return view_slice(im, nd, x);
    if (!strcmp(op, "Pad")) return view_pad(im, nd, x);
    if (!strcmp(op, "Softmax") || !strcmp(op, "LogSoftmax")) return drop_softmax(im, nd, x);
    return ask_layers(im, nd);
}

/* ---- the result ------------------------------------------------------------------ */

/* the .cfg text of the layers their types' import wrote, parsed for the parameters' offsets, and the parameters */
static int emit(imp *im, const vinfo *in, ct_onnx_imported *out) {
    size_t cap = 4096 + (size_t)im->n_layers * (sizeof im->layers[0].sect + 256), n = 0;
    char *cfg = ct_xmalloc(cap);
    const lay *last = &im->layers[im->n_layers - 1];
#define P(...) (n += (size_t)snprintf(cfg + n, cap - n, __VA_ARGS__))
    P("# imported from %s\n[net]\nheight=%lld\nwidth=%lld\nchannels=%lld\nclasses=%d\n", im->path, (long long)in->dims[2],
      (long long)in->dims[3], (long long)in->dims[1], last->oc);
    for (int i = 0; i < im->n_layers; i++) {
        const lay *L = &im->layers[i];
        P("\n# %s\n%s", L->node, L->sect);
        if (L->act) P("activation=%s\n", ct_activations[L->act].name);
    }
    P("\n[softmax]\n");
#undef P
    ct_model m;
    int rc = ct_model_parse(&m, cfg, "imported");
    if (rc) {
        rc = ct_fail(CT_EINPUT, "%s: the converted model does not fit cltrain: %s", im->path, ct_last_error());
        free(cfg);
        return rc;
    }
    float *p = ct_xcalloc(m.n_params ? m.n_params : 1, sizeof(float));
    for (int i = 0; i < im->n_layers; i++) {
        const lay *L = &im->layers[i];
        const ct_layer *M = &m.layers[i];
        /* as many as the parsed layer holds, which its section's keys decide */
        CT_ASSERT((!L->w || L->n_w == M->n_w) && (!L->b || L->n_b == M->n_b));
        if (L->w) memcpy(p + M->w_off, L->w, L->n_w * sizeof(float));
        if (L->b) memcpy(p + M->b_off, L->b, L->n_b * sizeof(float));
    }
    out->cfg = cfg;
    out->params = p;
    out->n_params = m.n_params;
    out->n_layers = m.n_layers;
    ct_model_free(&m);
    return 0;
}

static void imp_free(imp *im) {
    for (int i = 0; i < im->n_nodes; i++) {
        node *nd = &im->nodes[i];
        for (int k = 0; k < nd->n_in; k++) free(nd->in[k]);
        for (int k = 0; k < nd->n_out; k++) free(nd->out[k]);
        for (int k = 0; k < nd->n_at; k++) {
            free(nd->at[k].name), free(nd->at[k].s), free(nd->at[k].ints);
            if (nd->at[k].t) tensor_free(nd->at[k].t), free(nd->at[k].t);
        }
        free(nd->in), free(nd->out), free(nd->at), free(nd->op), free(nd->name), free(nd->domain);
    }
    free(im->nodes);
    for (int i = 0; i < im->n_inits; i++) tensor_free(&im->inits[i]), free(im->init_names[i]);
    free(im->inits), free(im->init_names);
    for (int i = 0; i < im->n_inputs; i++) free(im->inputs[i].name);
    for (int i = 0; i < im->n_outputs; i++) free(im->outputs[i].name);
    free(im->inputs), free(im->outputs);
    for (int i = 0; i < im->n_meta; i++) free(im->meta_k[i]), free(im->meta_v[i]);
    free(im->meta_k), free(im->meta_v);
    for (int i = 0; i < im->n_vals; i++) free(im->vals[i].name), tensor_free(&im->vals[i].t);
    free(im->vals);
    for (int i = 0; i < im->n_layers; i++) {
        lay *L = &im->layers[i];
        free(L->w), free(L->b);
    }
}

static const char *meta(const imp *im, const char *key) {
    for (int i = 0; i < im->n_meta; i++)
        if (!strcmp(im->meta_k[i], key)) return im->meta_v[i];
    return NULL;
}

void ct_onnx_imported_free(ct_onnx_imported *r) {
    free(r->cfg);
    free(r->params);
    for (int i = 0; i < r->n_names; i++) free(r->class_names[i]);
    free(r->class_names);
    memset(r, 0, sizeof *r);
}

/* cltrain export's Div by 255, Sub of its mean and Div by its std per channel ([1, C, 1, 1] constants): the
 * model's [net] mean= and std=, from the metadata (cltrain.mean, cltrain.std) and checked against the graph's
 * constants; *first: the node after them */
static int own_normalisation(ct_onnx_imp *im, int c, ct_prep *p, int *first) {
    const char *key[2] = {"cltrain.mean", "cltrain.std"}, *why;
    float *v[2] = {p->mean, p->std};
    int n;
    for (int j = 0; j < 2; j++) {
        const char *s = meta(im, key[j]);
        if (!s) return ct_fail(CT_EINPUT, "%s: metadata has %s but no %s; export the checkpoint again", im->path, key[1 - j], key[j]);
        if (ct_prep_parse_list(s, j, v[j], &n, &why))
            return ct_fail(CT_EINPUT, "%s: metadata %s '%.40s': %s; export the checkpoint again", im->path, key[j], s, why);
        if (n != c)
            return ct_fail(CT_EINPUT, "%s: metadata %s has %d values for an input of %d channels; export the checkpoint again",
                           im->path, key[j], n, c);
    }
    p->c = c;
    static const char *const ops[3] = {"Div", "Sub", "Div"};
    for (int k = 0; k < 3; k++) {
        const ct_onnx_node *nd = k < im->n_nodes ? &im->nodes[k] : NULL;
        const ct_onnx_tensor *t = nd && nd->n_in == 2 && nd->n_out >= 1 && nd->out[0] ? ct_onnx_const_in(im, nd, 1) : NULL;
        int same = t && !strcmp(nd->op, ops[k]) && (k ? t->n == c : t->n == 1) && t->f;
        for (int i = 0; same && i < (k ? c : 1); i++) same = t->f[i] == (k ? v[k - 1][i] : 255.0f);
        if (!same)
            return ct_fail(CT_EINPUT, "%s: its metadata gives cltrain's input normalisation (%s), but node %d of the graph is not "
                           "its %s; export the checkpoint again", im->path, meta(im, "cltrain.input"), k,
                           k == 0 ? "Div by 255" : k == 1 ? "Sub of cltrain.mean" : "Div by cltrain.std");
    }
    *first = 3;
    ct_onnx_note(im, "the input preparation of cltrain's export (x / 255, then its model's mean and std) is the model's");
    return 0;
}

int ct_onnx_import(const uint8_t *buf, size_t len, const char *path, ct_onnx_imported *out) {
    memset(out, 0, sizeof *out);
    imp *im = ct_xcalloc(1, sizeof *im);
    im->path = path;
    int rc = read_model(buf, len, im);
    /* the model input: the graph input that is not an initializer */
    const vinfo *in = NULL;
    for (int i = 0; !rc && i < im->n_inputs; i++) {
        int init = 0;
        for (int j = 0; j < im->n_inits && !init; j++) init = im->inputs[i].name && !strcmp(im->init_names[j], im->inputs[i].name);
        if (init) continue;
        if (in) rc = ct_fail(CT_EINPUT, "%s: two inputs ('%s' and '%s'); cltrain models take one image tensor", path, in->name, im->inputs[i].name);
        in = &im->inputs[i];
    }
    if (!rc && !in) rc = ct_fail(CT_EINPUT, "%s: the graph has no input", path);
    if (!rc && (!in->name || in->ndim != 4 || (in->elem && in->elem != T_FLOAT)))
        rc = ct_fail(CT_EINPUT, "%s: input '%s' is not a float [N, C, H, W] tensor", path, in->name ? in->name : "");
    for (int k = 1; !rc && k < 4; k++)
        if (in->dynamic[k] || in->dims[k] < 1 || in->dims[k] > 16384)
            rc = ct_fail(CT_EINPUT, "%s: input '%s' has a dynamic or out-of-range %s (%s); export with a fixed C, H and W (only the "
                         "batch may vary)", path, in->name, k == 1 ? "channel count" : k == 2 ? "height" : "width",
                         in->dynamic[k] ? "dynamic" : "not 1..16384");
    if (!rc && !im->n_nodes) rc = ct_fail(CT_EINPUT, "%s: the graph has no nodes", path);
    if (!rc) {
        for (int i = 0; i < im->n_inits; i++) set_const(im, im->init_names[i], &im->inits[i]);
        im->last = (act){.layer = -1, .rank = 4, .c = (int)in->dims[1], .h = (int)in->dims[2], .w = (int)in->dims[3], .step = 1};
        ct_onnx_set_act(im, in->name, im->last);
    }
    /* cltrain's own export: pixels / 255 (and the model's normalisation or per-image standardisation) lead the
     * graph; the model's [net] keys or the data set prepare them */
    int first = 0;
    const char *prep = meta(im, "cltrain.input"), *ds = meta(im, "cltrain.dataset");
    if (!rc && prep && (meta(im, "cltrain.mean") || meta(im, "cltrain.std"))) {
        rc = own_normalisation(im, (int)in->dims[1], &out->prep, &first);
        if (!rc) {
            ct_onnx_set_act(im, im->nodes[first - 1].out[0], im->last);
            snprintf(out->dataset, sizeof out->dataset, "%s", ds ? ds : "");
        }
    } else if (!rc && prep && im->n_nodes && !strcmp(im->nodes[0].op, "Div")) {
        int std = strstr(prep, "standardis") != NULL;
        first = 1;
        if (std)
            while (first < im->n_nodes && strncmp(im->nodes[first - 1].out[0], "standardized", 12)) first++;
        if (first >= im->n_nodes) rc = ct_fail(CT_EINPUT, "%s: says it is cltrain's export, but its input preparation is not", path);
        else {
            ct_onnx_set_act(im, im->nodes[first - 1].out[0], im->last);
            snprintf(out->dataset, sizeof out->dataset, "%s", ds ? ds : "");
            ct_onnx_note(im, std ? "the input preparation of cltrain's export (x / 255, per-image standardisation) is the data set's"
                         : "the input preparation of cltrain's export (x / 255) is the data set's");
        }
    }
    for (int i = first; !rc && i < im->n_nodes; i++) rc = do_node(im, &im->nodes[i]);
    /* the output: one graph output, the newest layer's, a dense layer's [N, classes] */
    /* the logits: the one output that is not a dropped Softmax (cltrain's export has both), else the Softmax's input */
    const act *res = NULL, *soft = NULL;
    for (int i = 0; !rc && i < im->n_outputs; i++) {
        val *v = im->outputs[i].name ? ct_onnx_find(im, im->outputs[i].name) : NULL;
        if (!v || v->kind != 2) rc = ct_fail(CT_EINPUT, "%s: output '%s' is not computed by the graph", path, im->outputs[i].name ? im->outputs[i].name : "");
        else if (v->dropped) soft = soft ? soft : &v->a;
        else if (res) rc = ct_fail(CT_EINPUT, "%s: two outputs; cltrain models have one (the logits)", path);
        else res = &v->a;
    }
    if (!rc && !res) res = soft;
    if (!rc && !res) rc = ct_fail(CT_EINPUT, "%s: the graph has no output", path);
    if (!rc && (res->layer != im->n_layers - 1 || res->layer < 0 || !ct_layer_table[im->layers[res->layer].type]->logits ||
                im->layers[res->layer].act))
        rc = ct_fail(CT_EINPUT, "%s: the output must be the logits of a final Gemm or MatMul (a dense layer without ReLU), as "
                     "cltrain's softmax cross-entropy reads them", path);
    if (!rc) rc = emit(im, in, out);
    const char *cls = meta(im, "cltrain.classes");
    if (!rc && cls) {
        int n = 1;
        for (const char *q = cls; *q; q++) n += *q == '\n';
        if (n == im->layers[im->n_layers - 1].oc) {
            out->class_names = ct_xcalloc((size_t)n, sizeof(char *));
            for (const char *q = cls; out->n_names < n; q = strchr(q, '\n') + 1) {
                const char *e = strchr(q, '\n');
                size_t l = e ? (size_t)(e - q) : strlen(q);
                out->class_names[out->n_names] = ct_xmalloc(l + 1);
                memcpy(out->class_names[out->n_names], q, l);
                out->class_names[out->n_names++][l] = 0;
                if (!e) break;
            }
        }
    }
    snprintf(out->notes, sizeof out->notes, "%s", im->notes);
    const char *mn = meta(im, "cltrain.model");
    snprintf(out->model_name, sizeof out->model_name, "%s", mn ? mn : "");
    imp_free(im);
    free(im);
    if (rc) ct_onnx_imported_free(out);
    return rc;
}
