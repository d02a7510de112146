/* nn/cfg.c: the .cfg reader. Its own line reader (lines of any length;
 * "key = value" or "key: value", "; comment" after a blank) reads each
 * [section] with the keys its layer type's table entry lists (cltrain/layer.h),
 * then hands the section to the type's shape() and packs the flat parameter
 * buffer. Also --model NAME|FILE.cfg (a file or a built-in, embedded at
 * build time) and the rewrite of a model to a data set's shape. Errors name
 * the file, the line and the section. Tested by tests/test_model.c. */
#include "cltrain/layer.h"
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <string.h>

extern const struct ct_embedded { const char *name; const char *src; } ct_embedded_models[];

/* ---------------- parsing ---------------- */

enum { SECT_NET = -1, SECT_SOFTMAX = -2 };
static const ct_key net_keys[] = {
    CT_KEY(height, CT_KEY_INT, 1, 65536), CT_KEY(width, CT_KEY_INT, 1, 65536),
    CT_KEY(channels, CT_KEY_INT, 1, 4096), CT_KEY(classes, CT_KEY_INT, 2, 65536),
    CT_KEY(mean, CT_KEY_FLOATS, 0, 0), CT_KEY(std, CT_KEY_FLOATS, 1, 0),
};
enum { NET_MEAN = 4, NET_STD = 5 }; /* their places in net_keys (CT_HAS) */

const char *const ct_recipe_keys[] = {"epochs", "batch", "batch_size", "optimizer", "lr", "momentum", "weight_decay",
                                      "schedule", "warmup", "label_smoothing", "lookahead", "tta", "augment", "translate",
                                      "flip", "cutout", "drop_last", NULL};

/* a [net] line "key = value" whose key is a training default: kept in m->recipe; 0 when the key is not one */
static int recipe_line(ct_model *m, const char *file, const char *p, size_t len, int line, int *rc) {
    size_t sep = 0;
    while (sep < len && p[sep] != '=' && p[sep] != ':') sep++;
    size_t ke = sep, vb = sep + 1, ve = len;
    while (ke > 0 && isspace((unsigned char)p[ke - 1])) ke--;
    int k = 0;
    while (ct_recipe_keys[k] && (strlen(ct_recipe_keys[k]) != ke || strncmp(p, ct_recipe_keys[k], ke))) k++;
    if (sep == len || !ct_recipe_keys[k]) return 0;
    while (vb < len && isspace((unsigned char)p[vb])) vb++;
    for (size_t j = vb; j < len; j++)
        if (p[j] == ';' && j > vb && isspace((unsigned char)p[j - 1])) { ve = j; break; }
    while (ve > vb && isspace((unsigned char)p[ve - 1])) ve--;
    ct_recipe_entry *e = &m->recipe[m->n_recipe];
    if (m->n_recipe == CT_MAX_RECIPE) *rc = ct_fail(CT_EINPUT, "%s:%d: more than %d training defaults in [net]", file, line, CT_MAX_RECIPE);
    else if (ve == vb || ve - vb >= sizeof e->value)
        *rc = ct_fail(CT_EINPUT, "%s:%d: [net] %s= needs a value (at most %zu characters)", file, line, ct_recipe_keys[k],
                      sizeof e->value - 1);
    else {
        for (int i = 0; i < m->n_recipe; i++)
            if (!strcmp(m->recipe[i].key, ct_recipe_keys[k]))
                return *rc = ct_fail(CT_EINPUT, "%s:%d: [net] %s= given twice (first on line %d)", file, line, ct_recipe_keys[k],
                                     m->recipe[i].line), 1;
        snprintf(e->key, sizeof e->key, "%s", ct_recipe_keys[k]);
        snprintf(e->value, sizeof e->value, "%.*s", (int)(ve - vb), p + vb);
        e->line = line;
        m->n_recipe++;
    }
    return 1;
}

/* one [section] being read: its kind (SECT_*, or a layer type: its index in ct_layer_table) and keys */
typedef struct sect_kind { int kind; const ct_key *keys; int n_keys; } sect_kind;

static int find_kind(const char *name, sect_kind *k) {
    if (!strcmp(name, "net")) { *k = (sect_kind){SECT_NET, net_keys, (int)(sizeof net_keys / sizeof *net_keys)}; return 1; }
    if (!strcmp(name, "softmax")) { *k = (sect_kind){SECT_SOFTMAX, NULL, 0}; return 1; }
    for (int t = 0; t < CT_LAYER_TYPES; t++) {
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
    s->from = 0;
    s->bias = 1;
    s->lr = s->bias_lr = s->scale = 1.0f;
    s->momentum = 0.1f;
    s->eps = 1e-5f;
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
    } else if (key->type == CT_KEY_FLOATS) {
        ct_key_list *l = (ct_key_list *)((char *)s + key->off);
        const char *why;
        if (ct_prep_parse_list(v, key->lo, l->v, &l->n, &why))
            return ct_fail(CT_EINPUT, "%s:%d: %s=%s: %s; give one number per channel, comma-separated (e.g. "
                           "%s=%s)", s->file, line, name, v, why, name, key->lo ? "0.2470,0.2435,0.2616" : "0.4914,0.4822,0.4465");
        l->line = line;
    } else if (key->type == CT_KEY_NAME) {
        int a = 0;
        while (key->names[a] && strcmp(v, key->names[a])) a++;
        if (!key->names[a]) {
            char known[128] = "";
            for (int j = 0; key->names[j]; j++)
                snprintf(known + strlen(known), sizeof known - strlen(known), "%s%s", j ? ", " : "", key->names[j]);
            return ct_fail(CT_EINPUT, "%s:%d: %s=%s: expected one of %s", s->file, line, name, v, known);
        }
        *(int *)((char *)s + key->off) = a;
    } else if (key->type == CT_KEY_FLOAT) { /* a number, or a fraction a/b */
        double d = strtod(v, &end);
        if (end != v && *end == '/') {
            const char *q = end + 1;
            double den = strtod(q, &end);
            d = end != q && den != 0 ? d / den : NAN;
        }
        if (end == v || *end || !isfinite(d) || d < key->lo || d > key->hi || !isfinite((float)d))
            return ct_fail(CT_EINPUT, "%s:%d: %s=%s is not a number in [%d, %d] (a fraction such as 1/9 is taken)", s->file,
                           line, name, v, key->lo, key->hi);
        *(float *)((char *)s + key->off) = (float)d;
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
    L->lr_w = s->lr; L->lr_b = s->bias_lr; L->decay_b = s->bias_decay; L->bias_until = s->bias_epochs;
    L->scale = 1.0f;
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
        if (CT_HAS(s, NET_MEAN) != CT_HAS(s, NET_STD)) {
            const ct_key_list *l = CT_HAS(s, NET_MEAN) ? &s->mean : &s->std;
            return ct_fail(CT_EINPUT, "%s:%d: %s= without %s=: the input normalisation needs both (one value per channel)",
                           s->file, l->line, CT_HAS(s, NET_MEAN) ? "mean" : "std", CT_HAS(s, NET_MEAN) ? "std" : "mean");
        }
        if (CT_HAS(s, NET_MEAN)) {
            const ct_key_list *l[2] = {&s->mean, &s->std};
            for (int j = 0; j < 2; j++)
                if (l[j]->n != s->channels)
                    return ct_fail(CT_EINPUT, "%s:%d: %s= has %d value%s but channels=%d; give one per channel", s->file,
                                   l[j]->line, j ? "std" : "mean", l[j]->n, l[j]->n == 1 ? "" : "s", s->channels);
            m->prep.c = s->channels;
            memcpy(m->prep.mean, s->mean.v, sizeof(float) * (size_t)s->channels);
            memcpy(m->prep.std, s->std.v, sizeof(float) * (size_t)s->channels);
        }
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
        for (int t = 0; t < CT_LAYER_TYPES; t++)
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
            else if (k.kind != SECT_NET || !recipe_line(m, name, q, len - (size_t)(q - p), line, &rc))
                rc = parse_key_line(&s, &k, q, len - (size_t)(q - p), line);
        }
        p = eol ? eol + 1 : p + len;
    }
    if (!rc && in_sect) rc = end_section(m, &ps, &s, &k);
    if (rc) return rc;
    if (!ps.have_net) return ct_fail(CT_EINPUT, "%s: no [net] section", name);
    if (!m->n_layers) return ct_fail(CT_EINPUT, "%s: no layers", name);
    ct_layer *last = &m->layers[m->n_layers - 1];
    if (!ct_layer_ops_of(last)->logits || last->oc != m->n_classes) {
        char want[256] = "";
        for (int t = 0; t < CT_LAYER_TYPES; t++)
            if (ct_layer_table[t]->logits)
                snprintf(want + strlen(want), sizeof want - strlen(want), "%s[%s] with %s=%d", want[0] ? " or " : "",
                         ct_layer_table[t]->name, ct_layer_table[t]->logits, m->n_classes);
        return ct_fail(CT_EINPUT, "%s: the last layer must be a %s (classes), followed by [softmax]", name, want);
    }
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
    /* pass 1: where the last section of a type that gives the logits starts
     * (ct_layer_ops.logits: [dense]); pass 2: rewrite the [net] shape and
     * that section's key for the outputs, line by line */
    const char *last_logits = NULL, *logits = "";
    for (const char *p = text; *p;) {
        const char *q = p, *e = strchr(p, '\n'), *close;
        while (*q == ' ' || *q == '\t') q++;
        char name[32];
        sect_kind k;
        if (*q == '[' && (close = memchr(q, ']', e ? (size_t)(e - q) : strlen(q))) && close - q - 1 < (long)sizeof name) {
            snprintf(name, sizeof name, "%.*s", (int)(close - q - 1), q + 1);
            if (find_kind(name, &k) && k.kind >= 0 && ct_layer_table[k.kind]->logits) last_logits = p, logits = ct_layer_table[k.kind]->logits;
        }
        p = e ? e + 1 : p + strlen(p);
    }
    text_buf out = {0};
    buf_add(&out, "", 0);
    int section = 0; /* 1: [net], 2: the last section giving the logits */
    for (const char *p = text; *p;) {
        const char *e = strchr(p, '\n');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        const char *q = p;
        while (*q == ' ' || *q == '\t') q++;
        if (*q == '[') section = !strncmp(q, "[net]", 5) ? 1 : p == last_logits ? 2 : 0;
        char key[32], line[64];
        line_key(p, len, key, sizeof key);
        int v = -1;
        if (section == 1 && !strcmp(key, "height")) v = h;
        else if (section == 1 && !strcmp(key, "width")) v = w;
        else if (section == 1 && !strcmp(key, "channels")) v = c;
        else if (section == 1 && !strcmp(key, "classes")) v = classes;
        else if (section == 2 && !strcmp(key, logits)) v = classes;
        if (v >= 0) buf_add(&out, line, (size_t)snprintf(line, sizeof line, "%s=%d\n", key, v));
        else { buf_add(&out, p, len); buf_add(&out, "\n", 1); }
        p = e ? e + 1 : p + len;
    }
    free(text);
    rc = ct_model_parse(m, out.p, spec);
    free(out.p);
    return rc;
}

char *ct_model_cfg_set_prep(const char *cfg, const ct_prep *p) {
    text_buf out = {0};
    buf_add(&out, "", 0);
    int in_net = 0;
    for (const char *l = cfg; *l;) {
        const char *e = strchr(l, '\n');
        size_t len = e ? (size_t)(e - l) : strlen(l);
        const char *q = l;
        while (*q == ' ' || *q == '\t') q++;
        char key[32];
        line_key(l, len, key, sizeof key);
        if (*q == '[') in_net = !strncmp(q, "[net]", 5);
        if (!(in_net && (!strcmp(key, "mean") || !strcmp(key, "std")))) {
            buf_add(&out, l, len);
            buf_add(&out, "\n", 1);
        }
        if (*q == '[' && in_net && p->c) { /* the keys first in [net], after its header */
            char d[2 * CT_PREP_MAX * 20 + 16];
            ct_prep_describe(p, d, sizeof d);
            char *sp = strchr(d, ' ');
            *sp = '\n';
            buf_add(&out, d, strlen(d));
            buf_add(&out, "\n", 1);
        }
        l = e ? e + 1 : l + len;
    }
    return out.p;
}
