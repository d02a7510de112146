/* nn/onnx_nodes.c: the imported ONNX graph's named values, nodes' attributes
 * and inputs, and the layers being built (cltrain/onnx_nodes.h), shared by
 * the importer's walker (src/train/onnx_import.c) and the layer types'
 * ct_layer_ops.import. Depends on common.h. Tested by tests/import.sh and
 * tests/fuzz/fuzz_onnx.c. */
#include "cltrain/onnx_nodes.h"
#include "cltrain/common.h"
#include <stdarg.h>
#include <string.h>

int ct_onnx_fail(const ct_onnx_imp *im, const ct_onnx_node *nd, const char *fmt, ...) {
    char msg[600];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return ct_fail(CT_EINPUT, "%s: node '%s' (%s): %s", im->path, nd->name && nd->name[0] ? nd->name : nd->out[0], nd->op, msg);
}

void ct_onnx_note(ct_onnx_imp *im, const char *s) {
    if (strstr(im->notes, s)) return;
    snprintf(im->notes + strlen(im->notes), sizeof im->notes - strlen(im->notes), "%s%s", im->notes[0] ? "; " : "", s);
}

const ct_onnx_attr *ct_onnx_node_attr(const ct_onnx_node *nd, const char *name) {
    for (int i = 0; i < nd->n_at; i++)
        if (nd->at[i].name && !strcmp(nd->at[i].name, name)) return &nd->at[i];
    return NULL;
}

int64_t ct_onnx_node_int(const ct_onnx_node *nd, const char *name, int64_t def) {
    const ct_onnx_attr *a = ct_onnx_node_attr(nd, name);
    return a ? a->i : def;
}

int ct_onnx_node_ints(const ct_onnx_node *nd, const char *name, int64_t *out, int cap) {
    const ct_onnx_attr *a = ct_onnx_node_attr(nd, name);
    if (!a) return 0;
    int n = a->n_ints < cap ? a->n_ints : cap;
    if (n) memcpy(out, a->ints, (size_t)n * sizeof *out);
    return a->n_ints;
}

ct_onnx_val *ct_onnx_find(ct_onnx_imp *im, const char *name) {
    for (int i = im->n_vals - 1; i >= 0; i--)
        if (!strcmp(im->vals[i].name, name)) return &im->vals[i];
    return NULL;
}

ct_onnx_val *ct_onnx_add_val(ct_onnx_imp *im, const char *name, int kind) {
    if (im->n_vals == im->cap_vals) {
        im->cap_vals = im->cap_vals ? 2 * im->cap_vals : 256;
        im->vals = realloc(im->vals, (size_t)im->cap_vals * sizeof *im->vals);
    }
    ct_onnx_val *v = &im->vals[im->n_vals++];
    memset(v, 0, sizeof *v);
    v->name = strdup(name);
    v->kind = kind;
    return v;
}

void ct_onnx_set_act(ct_onnx_imp *im, const char *name, ct_onnx_act a) { ct_onnx_add_val(im, name, 2)->a = a; }

const ct_onnx_tensor *ct_onnx_const_in(ct_onnx_imp *im, const ct_onnx_node *nd, int k) {
    if (k >= nd->n_in || !nd->in[k][0]) return NULL;
    ct_onnx_val *v = ct_onnx_find(im, nd->in[k]);
    return v && v->kind == 1 ? &v->t : NULL;
}

const ct_onnx_act *ct_onnx_act_in(ct_onnx_imp *im, const ct_onnx_node *nd, int k) {
    if (k >= nd->n_in || !nd->in[k][0]) return NULL;
    ct_onnx_val *v = ct_onnx_find(im, nd->in[k]);
    return v && v->kind == 2 ? &v->a : NULL;
}

int ct_onnx_newest(ct_onnx_imp *im, const ct_onnx_node *nd, const ct_onnx_act **x) {
    *x = ct_onnx_act_in(im, nd, 0);
    if (!*x)
        return ct_onnx_fail(im, nd, "its input '%s' is %s", nd->n_in ? nd->in[0] : "",
                            nd->n_in && ct_onnx_find(im, nd->in[0]) ? "a constant, not an activation" : "not produced by an earlier node");
    if ((*x)->layer != im->last.layer || (*x)->step != 1 || (*x)->padc)
        return ct_onnx_fail(im, nd, "it reads an earlier activation than the newest; cltrain models are sequences of layers "
                            "(with residual Adds)");
    return 0;
}

int ct_onnx_pool_window(ct_onnx_imp *im, const ct_onnx_node *nd, int64_t k[2], int64_t st[2]) {
    int64_t kk[4] = {0}, ss[4] = {0}, pd[8] = {0}, dl[4] = {1, 1};
    int nk = ct_onnx_node_ints(nd, "kernel_shape", kk, 4), ns = ct_onnx_node_ints(nd, "strides", ss, 4);
    int np = ct_onnx_node_ints(nd, "pads", pd, 8), ndl = ct_onnx_node_ints(nd, "dilations", dl, 4);
    const ct_onnx_attr *ap = ct_onnx_node_attr(nd, "auto_pad");
    int padded = 0;
    for (int i = 0; i < np && i < 8; i++) padded |= pd[i] != 0;
    if (nk != 2 || (ap && ap->s && strcmp(ap->s, "NOTSET") && strcmp(ap->s, "VALID")) || padded || (ndl && (dl[0] != 1 || dl[1] != 1)))
        return ct_onnx_fail(im, nd, "a 2-D window without padding or dilation is what cltrain pools over");
    if (!ns) ss[0] = ss[1] = 1;
    k[0] = kk[0], k[1] = kk[1], st[0] = ss[0], st[1] = ss[1];
    return 0;
}

ct_onnx_layer *ct_onnx_layer_add(ct_onnx_imp *im, const ct_onnx_node *nd, int type, ct_onnx_act out, const char *fmt, ...) {
    if (im->n_layers == CT_MAX_LAYERS) {
        ct_onnx_fail(im, nd, "the model would have more than %d layers", CT_MAX_LAYERS);
        return NULL;
    }
    ct_onnx_layer *L = &im->layers[im->n_layers++];
    memset(L, 0, sizeof *L);
    L->type = type;
    L->oc = out.c;
    snprintf(L->node, sizeof L->node, "%s", nd->name[0] ? nd->name : nd->out[0]);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(L->sect, sizeof L->sect, fmt, ap);
    va_end(ap);
    out.layer = im->n_layers - 1;
    im->last = out;
    ct_onnx_set_act(im, nd->out[0], out);
    return L;
}

float *ct_onnx_floats(const ct_onnx_tensor *t) {
    float *f = ct_xmalloc((size_t)t->n * sizeof(float) + 1);
    memcpy(f, t->f, (size_t)t->n * sizeof(float));
    return f;
}
