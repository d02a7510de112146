/* nn/model.c: the sequencer. It reads a .cfg (its own line reader: lines of
 * any length, each section's keys from its layer type's table entry), packs
 * the flat parameter buffer, allocates every device buffer once
 * (ct_model_setup), and runs the layers in order forward and in reverse
 * backward, each through its ct_layer_ops (src/nn/layers/); then softmax
 * cross-entropy and the optimizer launch. Nothing is allocated after
 * ct_model_setup. Tested by tests/test_model.c and tests/test_layers.c. */
#include "cltrain/layer.h"
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <string.h>

extern const struct ct_embedded { const char *name; const char *src; } ct_embedded_models[];

/* ---------------- parsing ---------------- */

enum { SECT_NET = -1, SECT_SOFTMAX = -2 };
static const ct_key net_keys[] = {
    CT_KEY(height, CT_KEY_INT, 1, 65536), CT_KEY(width, CT_KEY_INT, 1, 65536),
    CT_KEY(channels, CT_KEY_INT, 1, 4096), CT_KEY(classes, CT_KEY_INT, 2, 65536),
};

/* one [section] being read: its kind (SECT_* or CT_L_*) and keys */
typedef struct sect_kind { int kind; const ct_key *keys; int n_keys; } sect_kind;

static int find_kind(const char *name, sect_kind *k) {
    if (!strcmp(name, "net")) { *k = (sect_kind){SECT_NET, net_keys, (int)(sizeof net_keys / sizeof *net_keys)}; return 1; }
    if (!strcmp(name, "softmax")) { *k = (sect_kind){SECT_SOFTMAX, NULL, 0}; return 1; }
    for (int t = 0; t < CT_L_COUNT; t++) {
        const ct_layer_ops *o = ct_layer_table[t];
        if (!strcmp(name, o->name) || (o->alias && !strcmp(name, o->alias))) {
            *k = (sect_kind){t, o->keys, o->n_keys};
            return 1;
        }
    }
    return 0;
}

static void sect_defaults(ct_sect *s, const sect_kind *k) {
    s->stride = 1;
    s->act = CT_ACT_LINEAR;
    s->prob = 0.5f;
    s->from = 0;
    if (k->kind >= 0 && ct_layer_table[k->kind]->defaults) ct_layer_table[k->kind]->defaults(s);
}

static int set_value(ct_sect *s, const ct_key *key, const char *name, const char *v, int line) {
    char *end;
    errno = 0;
    if (key->type == CT_KEY_ACT) {
        int *act = (int *)((char *)s + key->off), a = 0;
        while (a < CT_ACT_COUNT && strcmp(v, ct_activations[a].name)) a++;
        if (a == CT_ACT_COUNT) {
            char known[128] = "";
            for (int j = 0; j < CT_ACT_COUNT; j++)
                snprintf(known + strlen(known), sizeof known - strlen(known), "%s%s", j ? ", " : "", ct_activations[j].name);
            return ct_fail(CT_EINPUT, "%s:%d: activation=%s: expected one of %s", s->file, line, v, known);
        }
        *act = a;
    } else if (key->type == CT_KEY_PROB) {
        double d = strtod(v, &end);
        if (end == v || *end || !(d >= 0 && d < 1))
            return ct_fail(CT_EINPUT, "%s:%d: %s=%s is not a number in [0, 1)", s->file, line, name, v);
        *(float *)((char *)s + key->off) = (float)d;
    } else {
        long d = strtol(v, &end, 10);
        if (end == v || *end || errno || d < key->lo || d > key->hi)
            return ct_fail(CT_EINPUT, "%s:%d: %s=%s is not a whole number in %d..%d", s->file, line, name, v, key->lo, key->hi);
        *(int *)((char *)s + key->off) = (int)d;
    }
    return 0;
}

/* "key = value" (or "key: value", as inih took it; "; comment" after a
 * blank ends the value) against the section's own keys */
static int parse_key_line(ct_sect *s, const sect_kind *k, const char *p, size_t len, int line) {
    size_t sep = 0;
    while (sep < len && p[sep] != '=' && p[sep] != ':') sep++;
    if (sep == len)
        return ct_fail(CT_EINPUT, "%s:%d: cannot parse this line in [%s] (expected key=value): '%.*s'", s->file, line,
                       s->kind, len > 60 ? 60 : (int)len, p);
    size_t ke = sep, vb = sep + 1, ve = len;
    while (ke > 0 && isspace((unsigned char)p[ke - 1])) ke--;
    while (vb < len && isspace((unsigned char)p[vb])) vb++;
    for (size_t j = vb; j < len; j++)
        if (p[j] == ';' && j > vb && isspace((unsigned char)p[j - 1])) { ve = j; break; }
    while (ve > vb && isspace((unsigned char)p[ve - 1])) ve--;
    char name[64], *value = strndup(p + vb, ve - vb);
    snprintf(name, sizeof name, "%.*s", ke > 63 ? 63 : (int)ke, p);
    int rc = 0, i = 0;
    while (i < k->n_keys && (ke != strlen(k->keys[i].name) || strncmp(p, k->keys[i].name, ke))) i++;
    if (i == k->n_keys) {
        char list[256] = "";
        for (int j = 0; j < k->n_keys; j++)
            snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", j ? ", " : "", k->keys[j].name);
        rc = ct_fail(CT_EINPUT, "%s:%d: %.*s: [%s] takes no key '%s' (%s%s)", s->file, line, len > 60 ? 60 : (int)len, p,
                     s->kind, name, k->n_keys ? "its keys: " : "it takes no keys", list);
    } else {
        rc = set_value(s, &k->keys[i], name, value, line);
        s->has |= 1u << i;
    }
    free(value);
    return rc;
}

/* a line of [p, p + len): 1 if blank or a comment */
static int blank_line(const char *p, size_t len) {
    size_t i = 0;
    while (i < len && isspace((unsigned char)p[i])) i++;
    return i == len || p[i] == '#' || p[i] == ';';
}

static int add_layer(ct_model *m, const ct_sect *s, int type, int *h, int *w, int *c) {
    if (m->n_layers >= CT_MAX_LAYERS) return ct_fail(CT_EINPUT, "%s:%d: more than %d layers", s->file, s->line, CT_MAX_LAYERS);
    const ct_layer_ops *o = ct_layer_table[type];
    ct_layer *L = &m->layers[m->n_layers];
    memset(L, 0, sizeof *L);
    L->type = type;
    L->act = s->act;
    L->line = s->line;
    L->from = -2;
    L->ih = *h; L->iw = *w; L->ic = *c;
    int rc = o->shape(m, L, s);
    if (rc) return rc;
    if ((double)L->oh * L->ow * L->oc > 1e9) return ct_fail(CT_EINPUT, "%s:%d: layer output is absurdly large", s->file, s->line);
    if (o->flops) m->flops_fwd += o->flops(L);
    L->w_off = m->n_params;
    m->n_params += L->n_w;
    L->b_off = m->n_params;
    m->n_params += L->n_b;
    *h = L->oh; *w = L->ow; *c = L->oc;
    m->n_layers++;
    return 0;
}

typedef struct parse_state { int have_net, have_softmax, h, w, c; } parse_state;

/* a section once its keys are read */
static int end_section(ct_model *m, parse_state *ps, const ct_sect *s, const sect_kind *k) {
    if (k->kind == SECT_NET) {
        if (ps->have_net || m->n_layers) return ct_fail(CT_EINPUT, "%s:%d: [net] must come first, once", s->file, s->line);
        if ((s->has & 15u) != 15u)
            return ct_fail(CT_EINPUT, "%s:%d: [net] needs height=, width=, channels= and classes=", s->file, s->line);
        ps->have_net = 1;
        m->in_h = ps->h = s->height; m->in_w = ps->w = s->width; m->in_c = ps->c = s->channels; m->n_classes = s->classes;
        return 0;
    }
    if (k->kind == SECT_SOFTMAX) { ps->have_softmax = 1; return 0; }
    if (!ps->have_net) return ct_fail(CT_EINPUT, "%s:%d: a [net] section with the input shape must come first", s->file, s->line);
    if (ps->have_softmax) return ct_fail(CT_EINPUT, "%s:%d: [softmax] must be the last section", s->file, s->line);
    return add_layer(m, s, k->kind, &ps->h, &ps->w, &ps->c);
}

/* a "[name]" header line: the kind, and nothing after it but a comment */
static int parse_header(const char *name, const char *p, size_t len, int line, char *kind, size_t cap, sect_kind *k) {
    const char *q = p, *e = p + len;
    while (q < e && isspace((unsigned char)*q)) q++;
    const char *close = memchr(q, ']', (size_t)(e - q));
    if (q == e || *q != '[' || !close) return ct_fail(CT_EINPUT, "%s:%d: malformed section header", name, line);
    snprintf(kind, cap, "%.*s", (int)(close - q - 1), q + 1);
    if (!find_kind(kind, k)) { /* the name first: a misspelt layer is the error to report */
        char known[256] = "net";
        for (int t = 0; t < CT_L_COUNT; t++)
            snprintf(known + strlen(known), sizeof known - strlen(known), ", %s", ct_layer_table[t]->name);
        return ct_fail(CT_EINPUT, "%s:%d: unknown layer [%s]; known: %s, softmax", name, line, kind, known);
    }
    if (!blank_line(close + 1, (size_t)(e - close - 1)))
        return ct_fail(CT_EINPUT, "%s:%d: text after the [%s] header: '%.*s'; put each key=value on its own line", name,
                       line, kind, (int)(e - close - 1 > 60 ? 60 : e - close - 1), close + 1);
    return 0;
}

static int parse_text(ct_model *m, const char *text, const char *name);

int ct_model_parse(ct_model *m, const char *text, const char *name) {
    int rc = parse_text(m, text, name);
    if (rc) { /* nothing to free for the caller on failure */
        free(m->cfg);
        m->cfg = NULL;
    }
    return rc;
}

static int parse_text(ct_model *m, const char *text, const char *name) {
    memset(m, 0, sizeof *m);
    snprintf(m->name, sizeof m->name, "%s", name);
    m->cfg = strdup(text);
    parse_state ps = {0};
    ct_sect s = {.file = name};
    sect_kind k = {0};
    char kind[32];
    int in_sect = 0, rc = 0, line = 1;
    for (const char *p = text; *p && !rc; line++) {
        const char *eol = strchr(p, '\n');
        size_t len = eol ? (size_t)(eol - p) : strlen(p);
        const char *q = p;
        while (q < p + len && (*q == ' ' || *q == '\t')) q++;
        if (q < p + len && *q == '[') {
            if (in_sect) rc = end_section(m, &ps, &s, &k);
            if (!rc) rc = parse_header(name, p, len, line, kind, sizeof kind, &k);
            s = (ct_sect){.file = name, .line = line, .kind = kind};
            sect_defaults(&s, &k);
            in_sect = 1;
        } else if (!blank_line(p, len)) {
            if (!in_sect)
                rc = ct_fail(CT_EINPUT, "%s:%d: expected a [section] header, got '%.*s'", name, line, len > 60 ? 60 : (int)len, p);
            else
                rc = parse_key_line(&s, &k, q, len - (size_t)(q - p), line);
        }
        p = eol ? eol + 1 : p + len;
    }
    if (!rc && in_sect) rc = end_section(m, &ps, &s, &k);
    if (rc) return rc;
    if (!ps.have_net) return ct_fail(CT_EINPUT, "%s: no [net] section", name);
    if (!m->n_layers) return ct_fail(CT_EINPUT, "%s: no layers", name);
    ct_layer *last = &m->layers[m->n_layers - 1];
    if (last->type != CT_L_DENSE || last->oc != m->n_classes)
        return ct_fail(CT_EINPUT, "%s: the last layer must be a [dense] with outputs=%d (classes), followed by [softmax]", name, m->n_classes);
    if (!ps.have_softmax) return ct_fail(CT_EINPUT, "%s: missing the final [softmax] section", name);
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
    return ct_fail(CT_EINPUT, "--model %s: no such built-in model (built-ins: %s) and not a .cfg file", spec, ct_model_builtins());
}

static char builtins[1024];
static void make_builtins(void) {
    for (const struct ct_embedded *e = ct_embedded_models; e->name; e++) {
        size_t l = strlen(builtins);
        snprintf(builtins + l, sizeof builtins - l, "%s%.*s", l ? ", " : "", (int)(strlen(e->name) - 4), e->name);
    }
}

const char *ct_model_builtins(void) {
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, make_builtins);
    return builtins;
}

int ct_model_load(ct_model *m, const char *spec) {
    memset(m, 0, sizeof *m); /* every failure leaves *m safe to ct_model_free */
    char *text;
    int rc = model_text(spec, &text);
    if (!rc) rc = ct_model_parse(m, text, spec);
    free(text);
    return rc;
}

/* the key of a "key = value" (or "key: value") line, trimmed, or "" */
static void line_key(const char *l, size_t len, char *key, size_t cap) {
    size_t i = 0, k = 0;
    while (i < len && isspace((unsigned char)l[i])) i++;
    while (i < len && l[i] != '=' && l[i] != ':' && !isspace((unsigned char)l[i]) && k + 1 < cap) key[k++] = l[i++];
    while (i < len && isspace((unsigned char)l[i])) i++;
    if (i >= len || (l[i] != '=' && l[i] != ':')) k = 0;
    key[k] = 0;
}

/* a growing, always terminated string */
typedef struct text_buf { char *p; size_t n, cap; } text_buf;
static void buf_add(text_buf *b, const char *s, size_t n) {
    if (b->n + n + 1 > b->cap) {
        b->cap = (b->n + n + 1) * 2;
        char *q = realloc(b->p, b->cap);
        if (!q) { fprintf(stderr, "cltrain: out of memory (%zu bytes)\n", b->cap); abort(); }
        b->p = q;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = 0;
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
    text_buf out = {0};
    buf_add(&out, "", 0);
    int section = 0; /* 1: [net], 2: the last [dense] */
    for (const char *p = text; *p;) {
        const char *e = strchr(p, '\n');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        const char *q = p;
        while (*q == ' ' || *q == '\t') q++;
        if (*q == '[') section = !strncmp(q, "[net]", 5) ? 1 : p == last_dense ? 2 : 0;
        char key[32], line[64];
        line_key(p, len, key, sizeof key);
        int v = -1;
        if (section == 1 && !strcmp(key, "height")) v = h;
        else if (section == 1 && !strcmp(key, "width")) v = w;
        else if (section == 1 && !strcmp(key, "channels")) v = c;
        else if (section == 1 && !strcmp(key, "classes")) v = classes;
        else if (section == 2 && !strcmp(key, "outputs")) v = classes;
        if (v >= 0) buf_add(&out, line, (size_t)snprintf(line, sizeof line, "%s=%d\n", key, v));
        else { buf_add(&out, p, len); buf_add(&out, "\n", 1); }
        p = e ? e + 1 : p + len;
    }
    free(text);
    rc = ct_model_parse(m, out.p, spec);
    free(out.p);
    return rc;
}

int ct_model_check_input(const ct_model *m, int h, int w, int c, int n_classes, const char *data_name, const char *advice) {
    if (h != m->in_h || w != m->in_w || c != m->in_c)
        return ct_fail(CT_EINPUT, "model %s expects %dx%dx%d input but %s has %dx%dx%d images; %s",
                       m->name, m->in_h, m->in_w, m->in_c, data_name, h, w, c, advice);
    if (n_classes != m->n_classes)
        return ct_fail(CT_EINPUT, "model %s has %d classes but %s has %d; %s", m->name, m->n_classes, data_name, n_classes, advice);
    return 0;
}

void ct_model_summary(const ct_model *m, FILE *out) {
    fprintf(out, "model %s: input %dx%dx%d, %d classes, %zu parameters, %.1f MFLOP/image forward\n", m->name, m->in_h,
            m->in_w, m->in_c, m->n_classes, m->n_params, m->flops_fwd * 1e-6);
    for (int i = 0; i < m->n_layers; i++) {
        const ct_layer *L = &m->layers[i];
        fprintf(out, "  %2d %-9s %4dx%-4dx%-5d -> %4dx%-4dx%-5d", i, ct_layer_names[L->type], L->ih, L->iw, L->ic, L->oh, L->ow, L->oc);
        if (L->k) fprintf(out, " k%d s%d p%d", L->k, L->stride, L->pad);
        if (L->wino) fprintf(out, " wino%d", L->wino);
        if (L->direct) fprintf(out, " direct");
        if (L->from >= -1) fprintf(out, " + layer %d", L->from);
        if (L->act != CT_ACT_LINEAR) fprintf(out, " %s", ct_activations[L->act].name);
        fputc('\n', out);
    }
}

/* ---------------- device ---------------- */

static int build_kernels(ct_model *m, ct_cl *cl) {
    int rc;
    if ((rc = ct_cl_build(cl, &m->p_conv, "conv.cl", ""))) return rc;
    if ((rc = ct_cl_build(cl, &m->p_pool, "pool.cl", ""))) return rc;
    if ((rc = ct_cl_build(cl, &m->p_ops, "ops.cl", ""))) return rc;
    if ((rc = ct_cl_build(cl, &m->p_bn, "bn.cl", ""))) return rc;
    if ((rc = ct_cl_build(cl, &m->p_drop, "dropout.cl", ""))) return rc;
    if ((rc = ct_cl_build(cl, &m->p_short, "shortcut.cl", ""))) return rc;
    m->k_short_fwd = ct_cl_kernel(m->p_short, "shortcut_fwd");
    m->k_short_bwd = ct_cl_kernel(m->p_short, "shortcut_bwd");
    m->k_im2col = ct_cl_kernel(m->p_conv, "im2col");
    m->k_col2im = ct_cl_kernel(m->p_conv, "col2im");
    m->k_pool_fwd = ct_cl_kernel(m->p_pool, "maxpool_fwd");
    m->k_pool_bwd = ct_cl_kernel(m->p_pool, "maxpool_bwd");
    m->k_u8 = ct_cl_kernel(m->p_ops, "u8_to_f32");
    m->k_gather = ct_cl_kernel(m->p_ops, "gather_u8");
    m->k_drop_fwd = ct_cl_kernel(m->p_drop, "dropout_fwd");
    m->k_drop_bwd = ct_cl_kernel(m->p_drop, "dropout_bwd");
    m->k_avg_fwd = ct_cl_kernel(m->p_pool, "avgpool_fwd");
    m->k_avg_bwd = ct_cl_kernel(m->p_pool, "avgpool_bwd");
    m->k_bn_reduce = ct_cl_kernel(m->p_bn, "bn_reduce");
    m->k_bn_reduce8 = ct_cl_kernel(m->p_bn, "bn_reduce8");
    m->k_bn_stats = ct_cl_kernel(m->p_bn, "bn_stats");
    m->k_bn_stats_eval = ct_cl_kernel(m->p_bn, "bn_stats_eval");
    m->k_bn_fwd = ct_cl_kernel(m->p_bn, "bn_fwd");
    m->k_bn_grads = ct_cl_kernel(m->p_bn, "bn_grads");
    m->k_bn_dx = ct_cl_kernel(m->p_bn, "bn_bwd_dx");
    m->k_act_bwd = ct_cl_kernel(m->p_ops, "act_bwd");
    m->k_act_fwd = ct_cl_kernel(m->p_ops, "act_fwd");
    m->k_xent = ct_cl_kernel(m->p_ops, "softmax_xent");
    m->k_nonfinite = ct_cl_kernel(m->p_ops, "nonfinite");
    return 0;
}

/* The kernels index elements with int: refuse a batch whose tensors pass 2^31 - 1 values. */
static int check_counts(const ct_model *m, int batch) {
    size_t nin = (size_t)m->in_h * m->in_w * m->in_c * (size_t)batch;
    if (nin > INT_MAX)
        return ct_fail(CT_EINPUT, "%s: an input batch of %d holds %zu values, more than the %d the kernels index; use a smaller --batch",
                       m->name, batch, nin, INT_MAX);
    for (int i = 0; i < m->n_layers; i++) {
        const ct_layer *L = &m->layers[i];
        size_t n = ct_out_size(L) > ct_in_size(L) ? ct_out_size(L) : ct_in_size(L);
        size_t kk = (size_t)L->k * L->k * L->ic * L->oh * L->ow;
        if (kk > n) n = kk; /* im2col rows x columns: the conv GEMMs' sizes */
        if (n * (size_t)batch > INT_MAX)
            return ct_fail(CT_EINPUT, "%s:%d: layer %d (%s) holds %zu values for a batch of %d, more than the %d the kernels index; use a smaller --batch",
                           m->name, L->line, i, ct_layer_names[L->type], n * (size_t)batch, batch, INT_MAX);
    }
    return 0;
}

int ct_model_setup(ct_model *m, ct_cl *cl, int batch, int gemm_mode) {
    m->cl = cl;
    m->batch = batch;
    int rc;
    if ((rc = check_counts(m, batch))) return rc;
    if ((rc = ct_gemm_init(&m->gemm, cl, gemm_mode))) return rc;
    if (m->db_defaults) m->gemm.use_choices = 0;
    if (m->conv_tuned) {
        m->gemm.n_convs = 0;
        for (int i = 0; i < m->n_conv_tuned; i++)
            if ((rc = ct_conv_choose(&m->gemm, &m->conv_tuned[i]))) return rc;
    }
    if ((rc = build_kernels(m, cl))) return rc;
    m->training = 1;
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
    ct_needs need = {.ws = 0, .ones = (size_t)batch, .bn_part = 0, .ws2 = 0, .ws3 = 0};
    for (int i = 0; i < m->n_layers; i++) {
        ct_layer *L = &m->layers[i];
        char what[64];
        snprintf(what, sizeof what, "layer %d output", i);
        if ((rc = ct_cl_alloc(cl, &L->out, ct_out_size(L) * batch * sizeof(float), what))) return rc;
        if (i > 0) {
            snprintf(what, sizeof what, "layer %d input gradient", i);
            if ((rc = ct_cl_alloc(cl, &L->dx, ct_in_size(L) * batch * sizeof(float), what))) return rc;
        }
        const ct_layer_ops *o = ct_layer_ops_of(L);
        if (o->build && !m->kinds[L->type] && (rc = o->build(m, &m->kinds[L->type]))) return rc;
        if (ct_activations[L->act].grad_reads_input && !o->act_inside) {
            snprintf(what, sizeof what, "layer %d pre-activation", i);
            if ((rc = ct_cl_alloc(cl, &L->act_in, ct_out_size(L) * batch * sizeof(float), what))) return rc;
        }
        if (o->setup && (rc = o->setup(m, L, batch, &need))) return rc;
    }
    if (need.bn_part) {
        if ((rc = ct_cl_alloc(cl, &m->bn_p1, need.bn_part * sizeof(float), "batch-norm partial sums"))) return rc;
        if ((rc = ct_cl_alloc(cl, &m->bn_p2, need.bn_part * sizeof(float), "batch-norm partial sums"))) return rc;
    }
    if ((rc = ct_cl_alloc(cl, &m->ws, (need.ws ? need.ws : 1) * sizeof(float), "im2col workspace"))) return rc;
    if ((rc = ct_cl_alloc(cl, &m->ones, need.ones * sizeof(float), "ones"))) return rc;
    if (need.ws2 && (rc = ct_cl_alloc(cl, &m->ws2, need.ws2 * sizeof(float), "Winograd workspace"))) return rc;
    if (need.ws3 && (rc = ct_cl_alloc(cl, &m->ws3, need.ws3 * sizeof(float), "Winograd workspace"))) return rc;
    float one = 1.0f;
    CL_CHECK(clEnqueueFillBuffer(cl->queue, m->ones, &one, sizeof one, 0, need.ones * sizeof(float), 0, NULL, NULL));
    uint8_t *mask = ct_xcalloc(m->n_params ? m->n_params : 1, 1);
    for (int i = 0; i < m->n_layers; i++)
        if (ct_layer_ops_of(&m->layers[i])->decay) ct_layer_ops_of(&m->layers[i])->decay(&m->layers[i], mask);
    ct_cl_write(cl, m->decay_mask, 0, m->n_params, mask);
    free(mask);
    return 0;
}

void ct_model_init_weights(ct_model *m, uint64_t seed) {
    m->seed = (uint32_t)(seed ^ (seed >> 32));
    float *p = ct_xcalloc(m->n_params ? m->n_params : 1, sizeof *p);
    for (int i = 0; i < m->n_layers; i++) {
        const ct_layer_ops *o = ct_layer_ops_of(&m->layers[i]);
        if (o->init && m->layers[i].n_w) o->init(&m->layers[i], i, p, seed);
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
        ct_cl_release(&m->layers[i].fwd_keep);
        ct_cl_release(&m->layers[i].pool_arg);
        ct_cl_release(&m->layers[i].act_in);
        for (int j = 0; j < 4; j++) ct_cl_release(&m->layers[i].own[j]);
    }
    ct_cl_release(&m->bn_p1);
    ct_cl_release(&m->bn_p2);
    m->input = m->labels = NULL; /* aliases of inputs[] and labels2[] */
    cl_mem *mems[] = {&m->params, &m->grads, &m->decay_mask, &m->inputs[0], &m->inputs[1],
                      &m->labels2[0], &m->labels2[1], &m->input_u8,
                      &m->loss, &m->pred, &m->dlogits, &m->ws, &m->ones, &m->flag, &m->ws2, &m->ws3};
    for (size_t i = 0; i < sizeof mems / sizeof *mems; i++) ct_cl_release(mems[i]);
    cl_kernel ks[] = {m->k_gather, m->k_im2col, m->k_col2im, m->k_pool_fwd, m->k_pool_bwd, m->k_u8, m->k_act_bwd, m->k_act_fwd, m->k_xent,
                      m->k_nonfinite, m->k_drop_fwd, m->k_drop_bwd, m->k_avg_fwd, m->k_avg_bwd,
                      m->k_bn_reduce, m->k_bn_reduce8, m->k_bn_stats, m->k_bn_stats_eval, m->k_bn_fwd, m->k_bn_grads, m->k_bn_dx, m->k_short_fwd, m->k_short_bwd,
                      m->wino[0].in, m->wino[0].w, m->wino[0].out, m->wino[0].dy, m->wino[0].dw,
                      m->wino[1].in, m->wino[1].w, m->wino[1].out, m->wino[1].dy, m->wino[1].dw, m->wino[1].fused, m->wino[1].dw_fused,
                      m->wino[0].w16, m->wino[0].dw16, m->wino[1].w16, m->wino[1].dw16};
    for (size_t i = 0; i < sizeof ks / sizeof *ks; i++)
        if (ks[i]) clReleaseKernel(ks[i]);
    cl_program ps[] = {m->p_conv, m->p_pool, m->p_ops, m->p_bn, m->p_drop, m->p_short, m->wino[0].p, m->wino[1].p};
    for (size_t i = 0; i < sizeof ps / sizeof *ps; i++)
        if (ps[i]) clReleaseProgram(ps[i]);
    for (size_t i = 0; i < sizeof m->direct / sizeof *m->direct; i++) {
        struct ct_direct_kernels *d = &m->direct[i];
        if (d->fwd) clReleaseKernel(d->fwd);
        if (d->dw) clReleaseKernel(d->dw);
        if (d->wt) clReleaseKernel(d->wt);
        if (d->dx) clReleaseKernel(d->dx);
        if (d->p) clReleaseProgram(d->p);
    }
    for (int t = 0; t < CT_L_COUNT; t++)
        if (m->kinds[t]) ct_layer_table[t]->release(m->kinds[t]);
    if (m->gemm.cl) ct_gemm_free(&m->gemm);
    free(m->cfg);
    memset(m, 0, sizeof *m);
}

/* ---------------- passes ---------------- */

void ct_model_set_batch(ct_model *m, const uint8_t *images, const int32_t *labels, int B, float scale, float shift) {
    CT_ASSERT(B >= 1 && B <= m->batch);
    size_t n = (size_t)B * m->in_h * m->in_w * m->in_c;
    CL_CHECK(clEnqueueWriteBuffer(m->cl->queue, m->input_u8, CL_FALSE, 0, n, images, 0, NULL, NULL));
    CL_CHECK(clEnqueueWriteBuffer(m->cl->queue, m->labels, CL_FALSE, 0, (size_t)B * 4, labels, 0, NULL, NULL));
    ct_kargs(m->k_u8, m->input, m->input_u8, 0, scale, shift, (int)n);
    ct_cl_run(m->cl, m->k_u8, "u8_to_f32", 1, &n, NULL);
    /* the writes above read host memory after returning; finish so the caller may reuse it */
    ct_cl_finish(m->cl);
}

void ct_layer_forward(ct_model *m, int i, int B) {
    ct_layer *L = &m->layers[i];
    ct_layer_ops_of(L)->forward(m, i, ct_layer_output(m, i - 1), B);
    if (ct_fused_act(m, L) != L->act) { /* split: the kernels wrote the pre-activation */
        size_t n = (size_t)B * ct_out_size(L);
        ct_kargs(m->k_act_fwd, L->out, L->act_in, L->act, (int)n);
        ct_cl_run(m->cl, m->k_act_fwd, "act_fwd", 1, &n, NULL);
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

/* Layer i's dx is the gradient w.r.t. layer i-1's output. After layer i
 * has written it, every layer reading that output as a second input
 * (from == i-1) adds its share: input gradients overwrite, except there. */
void ct_layer_backward(ct_model *m, int i, int B) {
    ct_layer *L = &m->layers[i];
    cl_mem dy = i == m->n_layers - 1 ? m->dlogits : m->layers[i + 1].dx;
    if (L->act != CT_ACT_LINEAR && !L->relu_next && !ct_layer_ops_of(L)->act_inside) {
        size_t n = (size_t)B * ct_out_size(L);
        ct_kargs(m->k_act_bwd, dy, ct_activations[L->act].grad_reads_input ? L->act_in : L->out, L->act, (int)n);
        ct_cl_run(m->cl, m->k_act_bwd, "act_bwd", 1, &n, NULL);
    }
    ct_layer_ops_of(L)->backward(m, i, ct_layer_output(m, i - 1), dy, B);
    if (!L->dx) return;
    for (int s = i; s < m->n_layers; s++)
        if (m->layers[s].from == i - 1 && ct_layer_ops_of(&m->layers[s])->backward_from)
            ct_layer_ops_of(&m->layers[s])->backward_from(m, s, L->dx, B);
}

void ct_model_backward(ct_model *m, int B, void (*on_layer_done)(void *ctx, int layer), void *ctx) {
    for (int i = m->n_layers - 1; i >= 0; i--) {
        if (B) ct_layer_backward(m, i, B);
        if (on_layer_done) on_layer_done(ctx, i);
    }
}

void ct_model_zero_grad(ct_model *m) { ct_cl_fill0(m->cl, m->grads, 0, m->n_params * 4); }

static void enqueue_nonfinite(ct_model *m, cl_mem x, size_t off, size_t n) {
    int io = (int)off, in = (int)n, contiguous = m->cl->is_cpu;
    ct_kargs(m->k_nonfinite, m->flag, x, io, in, contiguous);
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
