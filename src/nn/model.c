/* nn/model.c: .cfg parsing (inih, one call per section), shape inference and
 * validation, device buffers, forward/backward of conv (im2col + GEMM with
 * bias and ReLU fused), max-pool and dense layers, softmax cross-entropy and
 * the optimizer launch. Nothing is allocated after ct_model_setup.
 * Tested by tests/test_layers.c and tests/test_model.c. */
#include "cltrain/model.h"
#include <ctype.h>
#include <errno.h>
#include <ini.h>
#include <math.h>
#include <string.h>

extern const struct ct_embedded { const char *name; const char *src; } ct_embedded_models[];

/* ---------------- parsing ---------------- */

const char *const ct_layer_names[] = {"conv", "maxpool", "dense", "batchnorm", "avgpool", "dropout"};
enum { BN_CHUNK = 64 };            /* rows per partial sum */
#define BN_EPS 1e-5f
#define BN_MOMENTUM 0.1f

typedef struct sect {
    const char *file;
    int line;        /* line being parsed; the [section] header's once the section is read */
    int kind;        /* -1 net, else CT_L_* ; -2 softmax */
    int filters, size, stride, pad, outputs, act, height, width, channels, classes;
    int has_filters, has_size, has_outputs;
    float prob;
    int err;
} sect;

static int parse_int(sect *s, const char *name, const char *value, int *out, int lo, int hi, int lineno) {
    char *end;
    errno = 0;
    long v = strtol(value, &end, 10);
    while (*end && isspace((unsigned char)*end)) end++;
    if (end == value || *end || errno || v < lo || v > hi) {
        s->err = ct_fail(CT_EINPUT, "%s:%d: %s=%s is not a whole number in %d..%d", s->file, lineno, name, value, lo, hi);
        return 0;
    }
    *out = (int)v;
    return 1;
}

static int handler(void *user, const char *section, const char *name, const char *value) {
    sect *s = user;
    (void)section;
    if (s->err) return 0;
    int line = s->line;
    if (!strcmp(name, "activation")) {
        if (!strcmp(value, "relu")) s->act = CT_ACT_RELU;
        else if (!strcmp(value, "linear")) s->act = CT_ACT_LINEAR;
        else { s->err = ct_fail(CT_EINPUT, "%s:%d: activation=%s: expected relu or linear", s->file, line, value); return 0; }
        return 1;
    }
    if (!strcmp(name, "probability")) {
        char *end;
        double v = strtod(value, &end);
        while (*end && isspace((unsigned char)*end)) end++;
        if (end == value || *end || !(v >= 0 && v < 1)) {
            s->err = ct_fail(CT_EINPUT, "%s:%d: probability=%s is not a number in [0, 1)", s->file, line, value);
            return 0;
        }
        s->prob = (float)v;
        return 1;
    }
    struct { const char *n; int *p; int lo, hi; int *has; } keys[] = {
        {"filters", &s->filters, 1, 65536, &s->has_filters}, {"size", &s->size, 1, 64, &s->has_size},
        {"stride", &s->stride, 1, 64, NULL}, {"pad", &s->pad, 0, 64, NULL},
        {"outputs", &s->outputs, 1, 1 << 24, &s->has_outputs}, {"height", &s->height, 1, 65536, NULL},
        {"width", &s->width, 1, 65536, NULL}, {"channels", &s->channels, 1, 4096, NULL},
        {"classes", &s->classes, 2, 65536, NULL},
    };
    for (size_t i = 0; i < sizeof keys / sizeof *keys; i++)
        if (!strcmp(name, keys[i].n)) {
            if (!parse_int(s, name, value, keys[i].p, keys[i].lo, keys[i].hi, line)) return 0;
            if (keys[i].has) *keys[i].has = 1;
            return 1;
        }
    s->err = ct_fail(CT_EINPUT, "%s:%d: unknown key '%s' in this section", s->file, line, name);
    return 0;
}

static int add_layer(ct_model *m, const sect *s, int *h, int *w, int *c) {
    if (m->n_layers >= CT_MAX_LAYERS) return ct_fail(CT_EINPUT, "%s:%d: more than %d layers", s->file, s->line, CT_MAX_LAYERS);
    ct_layer *L = &m->layers[m->n_layers];
    memset(L, 0, sizeof *L);
    L->type = s->kind;
    L->act = s->act;
    L->line = s->line;
    L->ih = *h; L->iw = *w; L->ic = *c;
    switch (s->kind) {
    case CT_L_CONV:
        if (!s->has_filters || !s->has_size)
            return ct_fail(CT_EINPUT, "%s:%d: [conv] needs filters= and size=", s->file, s->line);
        L->k = s->size; L->stride = s->stride; L->pad = s->pad;
        L->oh = (*h + 2 * L->pad - L->k) / L->stride + 1;
        L->ow = (*w + 2 * L->pad - L->k) / L->stride + 1;
        if (*h + 2 * L->pad < L->k || *w + 2 * L->pad < L->k)
            return ct_fail(CT_EINPUT, "%s:%d: [conv] size=%d does not fit its %dx%d input (pad %d)", s->file, s->line, L->k, *h, *w, L->pad);
        L->oc = s->filters;
        L->n_w = (size_t)L->k * L->k * L->ic * L->oc;
        L->n_b = (size_t)L->oc;
        m->flops_fwd += 2.0 * L->oh * L->ow * L->oc * L->k * L->k * L->ic;
        break;
    case CT_L_MAXPOOL:
        if (!s->has_size) return ct_fail(CT_EINPUT, "%s:%d: [maxpool] needs size=", s->file, s->line);
        L->k = s->size;
        L->stride = s->stride ? s->stride : s->size;
        if (*h < L->k || *w < L->k)
            return ct_fail(CT_EINPUT, "%s:%d: [maxpool] size=%d does not fit its %dx%d input", s->file, s->line, L->k, *h, *w);
        L->oh = (*h - L->k) / L->stride + 1;
        L->ow = (*w - L->k) / L->stride + 1;
        L->oc = *c;
        break;
    case CT_L_DENSE:
        if (!s->has_outputs) return ct_fail(CT_EINPUT, "%s:%d: [dense] needs outputs=", s->file, s->line);
        L->oh = L->ow = 1;
        L->oc = s->outputs;
        L->n_w = (size_t)*h * *w * *c * L->oc;
        L->n_b = (size_t)L->oc;
        m->flops_fwd += 2.0 * (double)L->n_w;
        break;
    case CT_L_AVGPOOL: /* global: one value per channel */
        L->oh = L->ow = 1;
        L->oc = *c;
        break;
    case CT_L_DROPOUT:
        L->oh = *h; L->ow = *w; L->oc = *c;
        L->prob = s->prob;
        break;
    case CT_L_BATCHNORM:
        /* weights: gamma, then the running mean and variance (state the optimizer never
         * moves: their gradients stay 0); bias: beta */
        L->oh = *h; L->ow = *w; L->oc = *c;
        L->n_w = 3 * (size_t)*c;
        L->n_b = (size_t)*c;
        break;
    }
    if ((double)L->oh * L->ow * L->oc > 1e9) return ct_fail(CT_EINPUT, "%s:%d: layer output is absurdly large", s->file, s->line);
    L->w_off = m->n_params;
    m->n_params += L->n_w;
    L->b_off = m->n_params;
    m->n_params += L->n_b;
    *h = L->oh; *w = L->ow; *c = L->oc;
    m->n_layers++;
    return 0;
}

int ct_model_parse(ct_model *m, const char *text, const char *name) {
    memset(m, 0, sizeof *m);
    snprintf(m->name, sizeof m->name, "%s", name);
    m->cfg = strdup(text);
    const char *p = text;
    int line = 1, have_net = 0, have_softmax = 0, h = 0, w = 0, c = 0;
    /* skip leading blank and comment lines */
    while (*p) {
        const char *eol = strchr(p, '\n');
        size_t len = eol ? (size_t)(eol - p) : strlen(p);
        const char *q = p;
        while (q < p + len && isspace((unsigned char)*q)) q++;
        if (q < p + len && *q == '[') break;
        if (q < p + len && *q != '#' && *q != ';')
            return ct_fail(CT_EINPUT, "%s:%d: expected a [section] header, got '%.*s'", name, line, (int)len, p);
        if (!eol) { p += len; break; }
        p = eol + 1;
        line++;
    }
    while (*p) {
        /* one section: header line plus every line up to the next header */
        const char *hdr_end = strchr(p, '\n');
        size_t hlen = hdr_end ? (size_t)(hdr_end - p) : strlen(p);
        const char *q = p;
        while (isspace((unsigned char)*q)) q++;
        const char *close = memchr(q, ']', hlen - (size_t)(q - p));
        if (*q != '[' || !close) return ct_fail(CT_EINPUT, "%s:%d: malformed section header", name, line);
        char kind[32];
        snprintf(kind, sizeof kind, "%.*s", (int)(close - q - 1), q + 1);
        const char *body = hdr_end ? hdr_end + 1 : p + hlen;
        const char *next = body;
        int body_lines = 0;
        while (*next) {
            const char *r = next;
            while (*r == ' ' || *r == '\t') r++;
            if (*r == '[') break;
            const char *e = strchr(next, '\n');
            body_lines++;
            next = e ? e + 1 : next + strlen(next);
        }
        sect s = {.file = name, .line = line, .stride = 1, .act = CT_ACT_LINEAR, .prob = 0.5f};
        if (!strcmp(kind, "net")) s.kind = -1;
        else if (!strcmp(kind, "conv") || !strcmp(kind, "convolutional")) s.kind = CT_L_CONV;
        else if (!strcmp(kind, "maxpool")) s.kind = CT_L_MAXPOOL;
        else if (!strcmp(kind, "dense") || !strcmp(kind, "connected")) s.kind = CT_L_DENSE;
        else if (!strcmp(kind, "batchnorm")) s.kind = CT_L_BATCHNORM;
        else if (!strcmp(kind, "avgpool")) s.kind = CT_L_AVGPOOL;
        else if (!strcmp(kind, "dropout")) s.kind = CT_L_DROPOUT;
        else if (!strcmp(kind, "softmax")) s.kind = -2;
        else return ct_fail(CT_EINPUT, "%s:%d: unknown layer [%s]; known: net, conv, maxpool, avgpool, dense, batchnorm, dropout, softmax", name, line, kind);
        if (s.kind == CT_L_MAXPOOL) s.stride = 0;
        /* inih parses one line at a time here, so every message names the key's own line */
        const char *lp = body;
        for (int k = 1; lp < next; k++) {
            const char *e = memchr(lp, '\n', (size_t)(next - lp));
            size_t len = e ? (size_t)(e - lp) : (size_t)(next - lp);
            char *one = strndup(lp, len);
            s.line = line + k;
            int r = ini_parse_string(one, handler, &s);
            free(one);
            if (s.err) return s.err;
            if (r != 0) return ct_fail(CT_EINPUT, "%s:%d: cannot parse this line (expected key=value)", name, line + k);
            lp = e ? e + 1 : next;
        }
        s.line = line;
        if (s.kind == -1) {
            if (have_net || m->n_layers) return ct_fail(CT_EINPUT, "%s:%d: [net] must come first, once", name, line);
            if (!s.height || !s.width || !s.channels || !s.classes)
                return ct_fail(CT_EINPUT, "%s:%d: [net] needs height=, width=, channels= and classes=", name, line);
            have_net = 1;
            m->in_h = h = s.height; m->in_w = w = s.width; m->in_c = c = s.channels; m->n_classes = s.classes;
        } else if (s.kind == -2) {
            have_softmax = 1;
        } else {
            if (!have_net) return ct_fail(CT_EINPUT, "%s:%d: a [net] section with the input shape must come first", name, line);
            if (have_softmax) return ct_fail(CT_EINPUT, "%s:%d: [softmax] must be the last section", name, line);
            int rc = add_layer(m, &s, &h, &w, &c);
            if (rc) return rc;
        }
        line += 1 + body_lines;
        p = next;
    }
    if (!have_net) return ct_fail(CT_EINPUT, "%s: no [net] section", name);
    if (!m->n_layers) return ct_fail(CT_EINPUT, "%s: no layers", name);
    ct_layer *last = &m->layers[m->n_layers - 1];
    if (last->type != CT_L_DENSE || last->oc != m->n_classes)
        return ct_fail(CT_EINPUT, "%s: the last layer must be a [dense] with outputs=%d (classes), followed by [softmax]", name, m->n_classes);
    if (!have_softmax) return ct_fail(CT_EINPUT, "%s: missing the final [softmax] section", name);
    return 0;
}

/* The text of --model SPEC: a file when it contains '/' or ends in .cfg, else a
 * built-in. *text is malloc'd. */
static int model_text(const char *spec, char **text) {
    *text = NULL;
    size_t n = strlen(spec);
    if (strchr(spec, '/') || (n > 4 && !strcmp(spec + n - 4, ".cfg"))) {
        FILE *f = fopen(spec, "rb");
        if (!f) return ct_fail(CT_EINPUT, "%s: cannot open model file: %s", spec, strerror(errno));
        char *buf = ct_xmalloc(1 << 20);
        size_t got = fread(buf, 1, (1 << 20) - 1, f);
        int toolong = !feof(f);
        fclose(f);
        if (toolong) { free(buf); return ct_fail(CT_EINPUT, "%s: model file larger than 1 MiB", spec); }
        buf[got] = 0;
        if (strlen(buf) != got) { free(buf); return ct_fail(CT_EINPUT, "%s: not a text file", spec); }
        *text = buf;
        return 0;
    }
    char want[300];
    snprintf(want, sizeof want, "%s.cfg", spec);
    for (const struct ct_embedded *e = ct_embedded_models; e->name; e++)
        if (!strcmp(e->name, want)) { *text = strdup(e->src); return 0; }
    char known[1024] = "";
    for (const struct ct_embedded *e = ct_embedded_models; e->name; e++) {
        size_t l = strlen(known);
        snprintf(known + l, sizeof known - l, "%s%.*s", l ? ", " : "", (int)(strlen(e->name) - 4), e->name);
    }
    return ct_fail(CT_EINPUT, "--model %s: no such built-in model (built-ins: %s) and not a .cfg file", spec, known);
}

int ct_model_load(ct_model *m, const char *spec) {
    memset(m, 0, sizeof *m); /* every failure leaves *m safe to ct_model_free */
    char *text;
    int rc = model_text(spec, &text);
    if (!rc) rc = ct_model_parse(m, text, spec);
    free(text);
    return rc;
}

/* the key of a "key = value" line, trimmed, or "" */
static void line_key(const char *l, size_t len, char *key, size_t cap) {
    size_t i = 0, k = 0;
    while (i < len && isspace((unsigned char)l[i])) i++;
    while (i < len && l[i] != '=' && !isspace((unsigned char)l[i]) && k + 1 < cap) key[k++] = l[i++];
    while (i < len && isspace((unsigned char)l[i])) i++;
    if (i >= len || l[i] != '=') k = 0;
    key[k] = 0;
}

int ct_model_load_shaped(ct_model *m, const char *spec, int h, int w, int c, int classes) {
    memset(m, 0, sizeof *m);
    char *text;
    int rc = model_text(spec, &text);
    if (rc) return rc;
    /* pass 1: where the last [dense] section starts; pass 2: rewrite the
     * [net] shape and that section's outputs, line by line */
    const char *last_dense = NULL;
    for (const char *p = text; *p;) {
        const char *q = p;
        while (*q == ' ' || *q == '\t') q++;
        if (!strncmp(q, "[dense]", 7) || !strncmp(q, "[connected]", 11)) last_dense = p;
        const char *e = strchr(p, '\n');
        p = e ? e + 1 : p + strlen(p);
    }
    size_t cap = strlen(text) + 256, used = 0;
    char *out = ct_xmalloc(cap);
    int section = 0; /* 1: [net], 2: the last [dense] */
    for (const char *p = text; *p;) {
        const char *e = strchr(p, '\n');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        const char *q = p;
        while (*q == ' ' || *q == '\t') q++;
        if (*q == '[') section = !strncmp(q, "[net]", 5) ? 1 : p == last_dense ? 2 : 0;
        char key[32];
        line_key(p, len, key, sizeof key);
        int v = -1;
        if (section == 1 && !strcmp(key, "height")) v = h;
        else if (section == 1 && !strcmp(key, "width")) v = w;
        else if (section == 1 && !strcmp(key, "channels")) v = c;
        else if (section == 1 && !strcmp(key, "classes")) v = classes;
        else if (section == 2 && !strcmp(key, "outputs")) v = classes;
        if (v >= 0) used += (size_t)snprintf(out + used, cap - used, "%s=%d\n", key, v);
        else used += (size_t)snprintf(out + used, cap - used, "%.*s\n", (int)len, p);
        p = e ? e + 1 : p + len;
    }
    free(text);
    rc = ct_model_parse(m, out, spec);
    free(out);
    return rc;
}

int ct_model_check_input(const ct_model *m, int h, int w, int c, int n_classes, const char *data_name) {
    if (h != m->in_h || w != m->in_w || c != m->in_c)
        return ct_fail(CT_EINPUT, "model %s expects %dx%dx%d input but %s has %dx%dx%d images; pick another --model",
                       m->name, m->in_h, m->in_w, m->in_c, data_name, h, w, c);
    if (n_classes != m->n_classes)
        return ct_fail(CT_EINPUT, "model %s has %d classes but %s has %d; pick another --model", m->name, m->n_classes, data_name, n_classes);
    return 0;
}

void ct_model_summary(const ct_model *m, FILE *out) {
    fprintf(out, "model %s: input %dx%dx%d, %d classes, %zu parameters, %.1f MFLOP/image forward\n", m->name, m->in_h,
            m->in_w, m->in_c, m->n_classes, m->n_params, m->flops_fwd * 1e-6);
    for (int i = 0; i < m->n_layers; i++) {
        const ct_layer *L = &m->layers[i];
        fprintf(out, "  %2d %-9s %4dx%-4dx%-5d -> %4dx%-4dx%-5d", i, ct_layer_names[L->type], L->ih, L->iw, L->ic, L->oh, L->ow, L->oc);
        if (L->type == CT_L_CONV || L->type == CT_L_MAXPOOL) fprintf(out, " k%d s%d p%d", L->k, L->stride, L->pad);
        if (L->act == CT_ACT_RELU) fprintf(out, " relu");
        fputc('\n', out);
    }
}

/* ---------------- device ---------------- */

static size_t in_size(const ct_layer *L) { return (size_t)L->ih * L->iw * L->ic; }
static size_t out_size(const ct_layer *L) { return (size_t)L->oh * L->ow * L->oc; }

int ct_model_setup(ct_model *m, ct_cl *cl, int batch, int gemm_mode) {
    m->cl = cl;
    m->batch = batch;
    int rc;
    if ((rc = ct_gemm_init(&m->gemm, cl, gemm_mode))) return rc;
    if ((rc = ct_cl_build(cl, &m->p_conv, "conv.cl", ""))) return rc;
    if ((rc = ct_cl_build(cl, &m->p_pool, "pool.cl", ""))) return rc;
    if ((rc = ct_cl_build(cl, &m->p_ops, "ops.cl", ""))) return rc;
    m->k_im2col = ct_cl_kernel(m->p_conv, "im2col");
    m->k_col2im = ct_cl_kernel(m->p_conv, "col2im");
    m->k_pool_fwd = ct_cl_kernel(m->p_pool, "maxpool_fwd");
    m->k_pool_bwd = ct_cl_kernel(m->p_pool, "maxpool_bwd");
    m->k_u8 = ct_cl_kernel(m->p_ops, "u8_to_f32");
    m->k_gather = ct_cl_kernel(m->p_ops, "gather_u8");
    m->training = 1;
    if ((rc = ct_cl_build(cl, &m->p_bn, "bn.cl", ""))) return rc;
    if ((rc = ct_cl_build(cl, &m->p_drop, "dropout.cl", ""))) return rc;
    m->k_drop_fwd = ct_cl_kernel(m->p_drop, "dropout_fwd");
    m->k_drop_bwd = ct_cl_kernel(m->p_drop, "dropout_bwd");
    m->k_avg_fwd = ct_cl_kernel(m->p_pool, "avgpool_fwd");
    m->k_avg_bwd = ct_cl_kernel(m->p_pool, "avgpool_bwd");
    m->k_bn_reduce = ct_cl_kernel(m->p_bn, "bn_reduce");
    m->k_bn_stats = ct_cl_kernel(m->p_bn, "bn_stats");
    m->k_bn_stats_eval = ct_cl_kernel(m->p_bn, "bn_stats_eval");
    m->k_bn_fwd = ct_cl_kernel(m->p_bn, "bn_fwd");
    m->k_bn_grads = ct_cl_kernel(m->p_bn, "bn_grads");
    m->k_bn_dx = ct_cl_kernel(m->p_bn, "bn_bwd_dx");
    m->k_relu_bwd = ct_cl_kernel(m->p_ops, "relu_bwd");
    m->k_xent = ct_cl_kernel(m->p_ops, "softmax_xent");
    m->k_nonfinite = ct_cl_kernel(m->p_ops, "nonfinite");
    size_t P = m->n_params * sizeof(float);
    size_t nin = (size_t)m->in_h * m->in_w * m->in_c * batch;
    if ((rc = ct_cl_alloc(cl, &m->params, P, "parameters"))) return rc;
    if ((rc = ct_cl_alloc(cl, &m->grads, P, "gradients"))) return rc;
    if ((rc = ct_cl_alloc(cl, &m->decay_mask, m->n_params, "weight-decay mask"))) return rc;
    for (int j = 0; j < 2; j++) {
        if ((rc = ct_cl_alloc(cl, &m->inputs[j], nin * sizeof(float), "input batch"))) return rc;
        if ((rc = ct_cl_alloc(cl, &m->labels2[j], (size_t)batch * 4, "labels"))) return rc;
    }
    m->input = m->inputs[0];
    m->labels = m->labels2[0];
    if ((rc = ct_cl_alloc(cl, &m->input_u8, nin, "input batch (bytes)"))) return rc;
    if ((rc = ct_cl_alloc(cl, &m->loss, (size_t)batch * 4, "loss"))) return rc;
    if ((rc = ct_cl_alloc(cl, &m->pred, (size_t)batch * 4, "predictions"))) return rc;
    if ((rc = ct_cl_alloc(cl, &m->dlogits, (size_t)batch * m->n_classes * 4, "logit gradients"))) return rc;
    if ((rc = ct_cl_alloc(cl, &m->flag, 4, "flag"))) return rc;
    size_t ws = 0, ones = (size_t)batch, bn_part = 0;
    for (int i = 0; i < m->n_layers; i++) {
        ct_layer *L = &m->layers[i];
        char what[64];
        snprintf(what, sizeof what, "layer %d output", i);
        if ((rc = ct_cl_alloc(cl, &L->out, out_size(L) * batch * sizeof(float), what))) return rc;
        if (i > 0) {
            snprintf(what, sizeof what, "layer %d input gradient", i);
            if ((rc = ct_cl_alloc(cl, &L->dx, in_size(L) * batch * sizeof(float), what))) return rc;
        }
        int rows = batch * L->oh * L->ow;
        if (L->type == CT_L_BATCHNORM) {
            size_t part = (size_t)((rows + BN_CHUNK - 1) / BN_CHUNK) * L->oc;
            if (part > bn_part) bn_part = part;
            if ((rc = ct_cl_alloc(cl, &L->bn_stats, 2 * (size_t)L->oc * sizeof(float), "batch-norm statistics"))) return rc;
            if ((rc = ct_cl_alloc(cl, &L->bn_sums, 2 * (size_t)L->oc * sizeof(float), "batch-norm sums"))) return rc;
        }
        if (L->type == CT_L_CONV) {
            int kk = L->k * L->k * L->ic;
            size_t col = (size_t)rows * kk;
            if (col > ws) ws = col;
            if ((size_t)rows > ones) ones = (size_t)rows;
            if ((rc = ct_gemm_reserve(&m->gemm, 0, 0, rows, L->oc, kk))) return rc;
            if ((rc = ct_gemm_reserve(&m->gemm, 1, 0, kk, L->oc, rows))) return rc;
            if ((rc = ct_gemm_reserve(&m->gemm, 1, 0, 1, L->oc, rows))) return rc;
            if ((rc = ct_gemm_reserve(&m->gemm, 0, 1, rows, kk, L->oc))) return rc;
        } else if (L->type == CT_L_DENSE) {
            int K = (int)in_size(L);
            if ((rc = ct_gemm_reserve(&m->gemm, 0, 0, batch, L->oc, K))) return rc;
            if ((rc = ct_gemm_reserve(&m->gemm, 1, 0, K, L->oc, batch))) return rc;
            if ((rc = ct_gemm_reserve(&m->gemm, 1, 0, 1, L->oc, batch))) return rc;
            if ((rc = ct_gemm_reserve(&m->gemm, 0, 1, batch, K, L->oc))) return rc;
        }
    }
    m->ws_floats = ws;
    if (bn_part) {
        if ((rc = ct_cl_alloc(cl, &m->bn_p1, bn_part * sizeof(float), "batch-norm partial sums"))) return rc;
        if ((rc = ct_cl_alloc(cl, &m->bn_p2, bn_part * sizeof(float), "batch-norm partial sums"))) return rc;
    }
    if ((rc = ct_cl_alloc(cl, &m->ws, (ws ? ws : 1) * sizeof(float), "im2col workspace"))) return rc;
    if ((rc = ct_cl_alloc(cl, &m->ones, ones * sizeof(float), "ones"))) return rc;
    float one = 1.0f;
    CL_CHECK(clEnqueueFillBuffer(cl->queue, m->ones, &one, sizeof one, 0, ones * sizeof(float), 0, NULL, NULL));
    uint8_t *mask = ct_xcalloc(m->n_params, 1);
    for (int i = 0; i < m->n_layers; i++)
        if (m->layers[i].type != CT_L_BATCHNORM) memset(mask + m->layers[i].w_off, 1, m->layers[i].n_w);
    ct_cl_write(cl, m->decay_mask, 0, m->n_params, mask);
    free(mask);
    return 0;
}

void ct_model_init_weights(ct_model *m, uint64_t seed) {
    m->seed = (uint32_t)(seed ^ (seed >> 32));
    float *p = ct_xcalloc(m->n_params ? m->n_params : 1, sizeof *p);
    for (int i = 0; i < m->n_layers; i++) {
        ct_layer *L = &m->layers[i];
        if (!L->n_w) continue;
        if (L->type == CT_L_BATCHNORM) { /* gamma 1, running mean 0, running variance 1, beta 0 */
            for (int c = 0; c < L->oc; c++) p[L->w_off + c] = p[L->w_off + 2 * L->oc + c] = 1.0f;
            continue;
        }
        size_t fan_in = L->n_w / (size_t)L->oc;
        float std = sqrtf(2.0f / (float)fan_in);
        ct_rng r = ct_rng_make(seed, 0x1417, (uint64_t)i);
        for (size_t j = 0; j < L->n_w; j++) p[L->w_off + j] = std * ct_rng_normal(&r);
    }
    ct_model_set_params(m, p);
    free(p);
    ct_cl_fill0(m->cl, m->grads, 0, m->n_params * 4);
    m->step = 0;
}

void ct_model_get_params(ct_model *m, float *host) { ct_cl_read(m->cl, m->params, 0, m->n_params * 4, host); }
void ct_model_set_params(ct_model *m, const float *host) { ct_cl_write(m->cl, m->params, 0, m->n_params * 4, host); }

void ct_model_free(ct_model *m) {
    for (int i = 0; i < m->n_layers; i++) {
        ct_cl_release(&m->layers[i].out);
        ct_cl_release(&m->layers[i].dx);
        ct_cl_release(&m->layers[i].bn_stats);
        ct_cl_release(&m->layers[i].bn_sums);
    }
    ct_cl_release(&m->bn_p1);
    ct_cl_release(&m->bn_p2);
    cl_kernel bnk[] = {m->k_drop_fwd, m->k_drop_bwd, m->k_avg_fwd, m->k_avg_bwd, m->k_bn_reduce, m->k_bn_stats, m->k_bn_stats_eval, m->k_bn_fwd, m->k_bn_grads, m->k_bn_dx};
    for (size_t i = 0; i < sizeof bnk / sizeof *bnk; i++)
        if (bnk[i]) clReleaseKernel(bnk[i]);
    if (m->p_bn) clReleaseProgram(m->p_bn);
    if (m->p_drop) clReleaseProgram(m->p_drop);
    m->input = m->labels = NULL; /* aliases of inputs[] and labels2[] */
    cl_mem *mems[] = {&m->params, &m->grads, &m->decay_mask, &m->inputs[0], &m->inputs[1],
                      &m->labels2[0], &m->labels2[1], &m->input_u8,
                      &m->loss, &m->pred, &m->dlogits, &m->ws, &m->ones, &m->flag};
    for (size_t i = 0; i < sizeof mems / sizeof *mems; i++) ct_cl_release(mems[i]);
    cl_kernel ks[] = {m->k_gather, m->k_im2col, m->k_col2im, m->k_pool_fwd, m->k_pool_bwd, m->k_u8, m->k_relu_bwd, m->k_xent,
                      m->k_nonfinite};
    for (size_t i = 0; i < sizeof ks / sizeof *ks; i++)
        if (ks[i]) clReleaseKernel(ks[i]);
    cl_program ps[] = {m->p_conv, m->p_pool, m->p_ops};
    for (size_t i = 0; i < sizeof ps / sizeof *ps; i++)
        if (ps[i]) clReleaseProgram(ps[i]);
    if (m->gemm.cl) ct_gemm_free(&m->gemm);
    free(m->cfg);
    memset(m, 0, sizeof *m);
}

/* ---------------- passes ---------------- */

static void run_im2col(ct_model *m, const ct_layer *L, cl_mem x, int B) {
    ct_kargs(m->k_im2col, m->ws, x, L->ih, L->iw, L->ic, L->k, L->k, L->stride, L->pad, L->oh, L->ow);
    size_t gws = (size_t)B * L->oh * L->ow;
    ct_cl_run(m->cl, m->k_im2col, "im2col", 1, &gws, NULL);
}

void ct_model_set_batch(ct_model *m, const uint8_t *images, const int32_t *labels, int B, float scale, float shift) {
    CT_ASSERT(B >= 1 && B <= m->batch);
    int n = B * m->in_h * m->in_w * m->in_c;
    CL_CHECK(clEnqueueWriteBuffer(m->cl->queue, m->input_u8, CL_FALSE, 0, (size_t)n, images, 0, NULL, NULL));
    CL_CHECK(clEnqueueWriteBuffer(m->cl->queue, m->labels, CL_FALSE, 0, (size_t)B * 4, labels, 0, NULL, NULL));
    ct_kargs(m->k_u8, m->input, m->input_u8, 0, scale, shift, n);
    size_t gws = (size_t)n;
    ct_cl_run(m->cl, m->k_u8, "u8_to_f32", 1, &gws, NULL);
    /* the writes above read host memory after returning; finish so the caller may reuse it */
    ct_cl_finish(m->cl);
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

void ct_layer_forward(ct_model *m, int i, int B) {
    ct_layer *L = &m->layers[i];
    cl_mem x = i == 0 ? m->input : m->layers[i - 1].out;
    {
        switch (L->type) {
        case CT_L_CONV: {
            int rows = B * L->oh * L->ow, kk = L->k * L->k * L->ic;
            run_im2col(m, L, x, B);
            ct_gemm_run(&m->gemm, 0, 0, rows, L->oc, kk, 1.0f, m->ws, 0, kk, m->params, L->w_off, L->oc, 0.0f, L->out, 0,
                        L->oc, m->params, L->b_off, L->act);
            break;
        }
        case CT_L_MAXPOOL: {
            ct_kargs(m->k_pool_fwd, L->out, x, L->ih, L->iw, L->ic, L->k, L->stride, L->oh, L->ow);
            size_t gws = (size_t)B * L->oh * L->ow;
            ct_cl_run(m->cl, m->k_pool_fwd, "maxpool_fwd", 1, &gws, NULL);
            break;
        }
        case CT_L_DENSE: {
            int K = (int)in_size(L);
            ct_gemm_run(&m->gemm, 0, 0, B, L->oc, K, 1.0f, x, 0, K, m->params, L->w_off, L->oc, 0.0f, L->out, 0, L->oc,
                        m->params, L->b_off, L->act);
            break;
        }
        case CT_L_AVGPOOL: {
            int HW = L->ih * L->iw;
            ct_kargs(m->k_avg_fwd, L->out, x, HW, L->oc, B);
            size_t g2[2] = {(size_t)L->oc, (size_t)B};
            ct_cl_run(m->cl, m->k_avg_fwd, "avgpool_fwd", 2, g2, NULL);
            break;
        }
        case CT_L_DROPOUT: {
            int n = B * (int)out_size(L);
            if (!m->training || L->prob == 0.0f) {
                CL_CHECK(clEnqueueCopyBuffer(m->cl->queue, x, L->out, 0, 0, (size_t)n * 4, 0, NULL, NULL));
            } else {
                run_dropout(m, m->k_drop_fwd, "dropout_fwd", L->out, x, n, L->prob, i);
            }
            break;
        }
        case CT_L_BATCHNORM: {
            int M = B * L->oh * L->ow, C = L->oc, chunks = (M + BN_CHUNK - 1) / BN_CHUNK, chunk = BN_CHUNK;
            int offRM = (int)L->w_off + C;
            size_t g1 = (size_t)C, g2[2] = {(size_t)C, (size_t)chunks}, ge[2] = {(size_t)C, (size_t)M};
            if (m->training) {
                for (int pass = 0; pass < 2; pass++) {
                    int mode = pass;
                    ct_kargs(m->k_bn_reduce, m->bn_p1, m->bn_p2, x, x, L->bn_stats, M, C, chunk, mode);
                    ct_cl_run(m->cl, m->k_bn_reduce, "bn_reduce", 2, g2, NULL);
                    ct_kargs(m->k_bn_stats, L->bn_stats, m->bn_p1, chunks, M, C, pass, BN_EPS, BN_MOMENTUM,
                               m->params, offRM);
                    ct_cl_run(m->cl, m->k_bn_stats, "bn_stats", 1, &g1, NULL);
                }
            } else {
                ct_kargs(m->k_bn_stats_eval, L->bn_stats, m->params, offRM, C, BN_EPS);
                ct_cl_run(m->cl, m->k_bn_stats_eval, "bn_stats_eval", 1, &g1, NULL);
            }
            ct_kargs(m->k_bn_fwd, L->out, x, L->bn_stats, m->params, (int)L->w_off, (int)L->b_off, M, C, L->act);
            ct_cl_run(m->cl, m->k_bn_fwd, "bn_fwd", 2, ge, NULL);
            break;
        }
        }
    }
}

void ct_model_select_input(ct_model *m, int j) {
    m->input = m->inputs[j];
    m->labels = m->labels2[j];
}

void ct_model_gather(ct_model *m, cl_mem data, cl_mem lab, cl_mem idx, int B, float scale, float shift) {
    int sz = m->in_h * m->in_w * m->in_c;
    ct_kargs(m->k_gather, m->input, m->labels, data, lab, idx, sz, scale, shift);
    size_t gws[2] = {(size_t)sz, (size_t)B};
    ct_cl_run(m->cl, m->k_gather, "gather_u8", 2, gws, NULL);
}

void ct_model_forward(ct_model *m, int B) {
    for (int i = 0; i < m->n_layers; i++) ct_layer_forward(m, i, B);
}

void ct_model_loss(ct_model *m, int B) {
    ct_layer *last = &m->layers[m->n_layers - 1];
    ct_kargs(m->k_xent, m->loss, m->pred, m->dlogits, last->out, m->labels, 0, B, m->n_classes,
               1.0f / (float)(m->loss_batch > 0 ? m->loss_batch : B), m->label_smoothing);
    size_t gws = (size_t)B;
    ct_cl_run(m->cl, m->k_xent, "softmax_xent", 1, &gws, NULL);
}

void ct_layer_backward(ct_model *m, int i, int B) {
    {
        ct_layer *L = &m->layers[i];
        cl_mem dy = i == m->n_layers - 1 ? m->dlogits : m->layers[i + 1].dx;
        cl_mem x = i == 0 ? m->input : m->layers[i - 1].out;
        if (L->act == CT_ACT_RELU) {
            int n = B * (int)out_size(L);
            ct_kargs(m->k_relu_bwd, dy, L->out, n);
            size_t gws = (size_t)n;
            ct_cl_run(m->cl, m->k_relu_bwd, "relu_bwd", 1, &gws, NULL);
        }
        switch (L->type) {
        case CT_L_CONV: {
            int rows = B * L->oh * L->ow, kk = L->k * L->k * L->ic;
            /* db += 1^T dy ; dW += col^T dy ; dcol = dy W^T ; dx = col2im(dcol) */
            ct_gemm_run(&m->gemm, 1, 0, 1, L->oc, rows, 1.0f, m->ones, 0, 1, dy, 0, L->oc, 1.0f, m->grads, L->b_off, L->oc, NULL, 0, 0);
            run_im2col(m, L, x, B);
            ct_gemm_run(&m->gemm, 1, 0, kk, L->oc, rows, 1.0f, m->ws, 0, kk, dy, 0, L->oc, 1.0f, m->grads, L->w_off, L->oc, NULL, 0, 0);
            if (L->dx) {
                ct_gemm_run(&m->gemm, 0, 1, rows, kk, L->oc, 1.0f, dy, 0, L->oc, m->params, L->w_off, L->oc, 0.0f, m->ws, 0, kk, NULL, 0, 0);
                ct_kargs(m->k_col2im, L->dx, m->ws, L->ih, L->iw, L->ic, L->k, L->k, L->stride, L->pad, L->oh, L->ow);
                size_t gws = (size_t)B * L->ih * L->iw;
                ct_cl_run(m->cl, m->k_col2im, "col2im", 1, &gws, NULL);
            }
            break;
        }
        case CT_L_MAXPOOL:
            if (L->dx) {
                ct_kargs(m->k_pool_bwd, L->dx, dy, x, L->ih, L->iw, L->ic, L->k, L->stride, L->oh, L->ow);
                size_t gws = (size_t)B * L->ih * L->iw;
                ct_cl_run(m->cl, m->k_pool_bwd, "maxpool_bwd", 1, &gws, NULL);
            }
            break;
        case CT_L_AVGPOOL:
            if (L->dx) {
                int HW = L->ih * L->iw, n = B * HW;
                ct_kargs(m->k_avg_bwd, L->dx, dy, HW, L->oc, n);
                size_t g2[2] = {(size_t)L->oc, (size_t)n};
                ct_cl_run(m->cl, m->k_avg_bwd, "avgpool_bwd", 2, g2, NULL);
            }
            break;
        case CT_L_DROPOUT:
            if (L->dx) {
                run_dropout(m, m->k_drop_bwd, "dropout_bwd", L->dx, dy, B * (int)out_size(L), L->prob, i);
            }
            break;
        case CT_L_BATCHNORM: {
            int M = B * L->oh * L->ow, C = L->oc, chunks = (M + BN_CHUNK - 1) / BN_CHUNK, chunk = BN_CHUNK, mode = 2;
            size_t g1 = (size_t)C, g2[2] = {(size_t)C, (size_t)chunks}, ge[2] = {(size_t)C, (size_t)M};
            ct_kargs(m->k_bn_reduce, m->bn_p1, m->bn_p2, x, dy, L->bn_stats, M, C, chunk, mode);
            ct_cl_run(m->cl, m->k_bn_reduce, "bn_reduce", 2, g2, NULL);
            ct_kargs(m->k_bn_grads, L->bn_sums, m->bn_p1, m->bn_p2, chunks, C, m->grads, (int)L->w_off, (int)L->b_off);
            ct_cl_run(m->cl, m->k_bn_grads, "bn_grads", 1, &g1, NULL);
            if (L->dx) {
                ct_kargs(m->k_bn_dx, L->dx, dy, x, L->bn_stats, L->bn_sums, m->params, (int)L->w_off, M, C);
                ct_cl_run(m->cl, m->k_bn_dx, "bn_bwd_dx", 2, ge, NULL);
            }
            break;
        }
        case CT_L_DENSE: {
            int K = (int)in_size(L);
            ct_gemm_run(&m->gemm, 1, 0, 1, L->oc, B, 1.0f, m->ones, 0, 1, dy, 0, L->oc, 1.0f, m->grads, L->b_off, L->oc, NULL, 0, 0);
            ct_gemm_run(&m->gemm, 1, 0, K, L->oc, B, 1.0f, x, 0, K, dy, 0, L->oc, 1.0f, m->grads, L->w_off, L->oc, NULL, 0, 0);
            if (L->dx)
                ct_gemm_run(&m->gemm, 0, 1, B, K, L->oc, 1.0f, dy, 0, L->oc, m->params, L->w_off, L->oc, 0.0f, L->dx, 0, K, NULL, 0, 0);
            break;
        }
        }
    }
}

void ct_model_backward(ct_model *m, int B, void (*on_layer_done)(void *ctx, int layer), void *ctx) {
    for (int i = m->n_layers - 1; i >= 0; i--) {
        if (B) ct_layer_backward(m, i, B);
        if (on_layer_done) on_layer_done(ctx, i);
    }
}

void ct_model_zero_grad(ct_model *m) { ct_cl_fill0(m->cl, m->grads, 0, m->n_params * 4); }

static void enqueue_nonfinite(ct_model *m, cl_mem x, size_t off, size_t n) {
    int io = (int)off, in = (int)n;
    ct_kargs(m->k_nonfinite, m->flag, x, io, in);
    size_t gws = 1024;
    ct_cl_run(m->cl, m->k_nonfinite, "nonfinite", 1, &gws, NULL);
}

void ct_model_guard_grads(ct_model *m) {
    int zero = 0;
    CL_CHECK(clEnqueueFillBuffer(m->cl->queue, m->flag, &zero, sizeof zero, 0, sizeof zero, 0, NULL, NULL));
    enqueue_nonfinite(m, m->grads, 0, m->n_params);
}

double ct_model_read_results(ct_model *m, int B, int32_t *pred) {
    float loss[4096];
    CT_ASSERT(B <= 4096);
    CL_CHECK(clEnqueueReadBuffer(m->cl->queue, m->loss, CL_FALSE, 0, (size_t)B * 4, loss, 0, NULL, NULL));
    if (pred) CL_CHECK(clEnqueueReadBuffer(m->cl->queue, m->pred, CL_FALSE, 0, (size_t)B * 4, pred, 0, NULL, NULL));
    CL_CHECK(clEnqueueReadBuffer(m->cl->queue, m->flag, CL_FALSE, 0, 4, &m->nonfinite, 0, NULL, NULL));
    ct_cl_finish(m->cl);
    double s = 0;
    for (int i = 0; i < B; i++) s += loss[i];
    return s;
}

static int range_nonfinite(ct_model *m, size_t off, size_t n) {
    int zero = 0, flag = 0;
    CL_CHECK(clEnqueueWriteBuffer(m->cl->queue, m->flag, CL_FALSE, 0, 4, &zero, 0, NULL, NULL));
    enqueue_nonfinite(m, m->grads, off, n);
    ct_cl_read(m->cl, m->flag, 0, 4, &flag);
    return flag;
}

int ct_model_grads_nonfinite(ct_model *m) { return range_nonfinite(m, 0, m->n_params); }

int ct_model_first_nonfinite_layer(ct_model *m) {
    /* backward runs from the last layer to the first: the first to go bad is the highest index */
    for (int i = m->n_layers - 1; i >= 0; i--) {
        const ct_layer *L = &m->layers[i];
        if (L->n_w + L->n_b && range_nonfinite(m, L->w_off, L->n_w + L->n_b)) return i;
    }
    return -1;
}
