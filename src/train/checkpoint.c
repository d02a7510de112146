/* train/checkpoint.c: checkpoint files (format in checkpoint.h), written to
 * PATH.tmp.<pid>, fsync'd, renamed over PATH, then the folder fsync'd, so a
 * kill -9 at any moment leaves either the old or the new checkpoint. The CRC
 * (zlib's crc32) covers every byte before it. Once it matches, every field is
 * still checked as the command line checks its flags: a file can be made by
 * anyone. Files of versions 1 and 2 are read into the same structure.
 * Tested by tests/checkpoint.sh (round trip, bit-exact resume, damage of
 * every kind, fields out of range, old files, kill -9 at random). */
#include "cltrain/checkpoint.h"
#include "cltrain/common.h"
#include "cltrain/datasets.h"
#include "cltrain/file.h"
#include "cltrain/optim.h"
#include "cltrain/train.h"
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

static const char MAGIC[8] = {'C', 'L', 'T', 'R', 'C', 'K', 'P', 'T'};

/* versions 1 and 2 */
typedef struct hdr_v2 {
    uint64_t seed;
    int64_t next_batch;
    int32_t batch, n_train, opt_kind, opt_step;
    uint64_t n_params;
    uint32_t cfg_len, pad;
    char model_name[256];
    char dataset[32];          /* "mnist", "cifar100-coarse", "images:0.100", ... */
    char data_dir[512];
} hdr_v2;

typedef struct hdr_v3 {
    uint64_t seed;
    int64_t next_batch;
    int32_t batch, n_train, ranks, opt_kind, opt_step, n_state;
    float lr, momentum, wd;
    int32_t data_classes;
    double data_split;
    uint64_t n_params;
    uint32_t cfg_len, n_names, names_bytes, pad;
    char model_name[256];
    char data_kind[32];
    char data_path[512];
    /* version 4 */
    float lookahead;
    uint32_t n_avg;            /* 0 or 1: the lookahead's average follows the state buffers */
    int32_t drop_last;         /* 1: each epoch's last partial batch was left out (it fixes the data order) */
    uint32_t pad2;
} hdr_v3;
/* a version 3 header is the same without the version 4 fields */
#define HDR_V3_SIZE offsetof(hdr_v3, lookahead)
_Static_assert(offsetof(hdr_v3, lookahead) == 888, "version 3 headers are 888 bytes");

typedef struct wbuf { int fd; uLong crc; int err; } wbuf;

static void put(wbuf *w, const void *p, size_t n) {
    if (w->err) return;
    w->crc = crc32(w->crc, p, (uInt)n);
    const char *c = p;
    while (n) {
        ssize_t k = write(w->fd, c, n);
        if (k < 0) { if (errno == EINTR) continue; w->err = errno; return; }
        c += k;
        n -= (size_t)k;
    }
}

static int little_endian(void) {
    uint32_t x = 1;
    return *(uint8_t *)&x == 1;
}

static void put_body(wbuf *w, const ct_ckpt *st) {
    hdr_v3 h;
    memset(&h, 0, sizeof h);
    h = (hdr_v3){.seed = st->seed, .next_batch = st->next_batch, .batch = st->batch, .n_train = st->n_train,
                 .ranks = st->ranks > 0 ? st->ranks : 1, .opt_kind = st->opt_kind, .opt_step = st->opt_step,
                 .n_state = st->n_state, .lr = st->lr, .momentum = st->momentum, .wd = st->wd,
                 .data_classes = st->data.classes, .data_split = st->data.split, .n_params = st->n_params,
                 .cfg_len = (uint32_t)strlen(st->cfg), .n_names = (uint32_t)st->n_names, .lookahead = st->lookahead,
                 .n_avg = st->average != NULL, .drop_last = st->drop_last};
    for (int i = 0; i < st->n_names; i++) h.names_bytes += 4 + (uint32_t)strlen(st->class_names[i]);
    snprintf(h.model_name, sizeof h.model_name, "%s", st->model_name);
    snprintf(h.data_kind, sizeof h.data_kind, "%s", st->data.kind);
    snprintf(h.data_path, sizeof h.data_path, "%s", st->data.path);
    uint32_t version = CT_CKPT_VERSION, hsize = (uint32_t)sizeof h;
    put(w, MAGIC, sizeof MAGIC);
    put(w, &version, 4);
    put(w, &hsize, 4);
    put(w, &h, sizeof h);
    put(w, st->cfg, h.cfg_len);
    for (int i = 0; i < st->n_names; i++) {
        uint32_t len = (uint32_t)strlen(st->class_names[i]);
        put(w, &len, 4);
        put(w, st->class_names[i], len);
    }
    put(w, st->params, st->n_params * 4);
    for (int i = 0; i < st->n_state; i++) put(w, st->state[i], st->n_params * 4);
    if (st->average) put(w, st->average, st->n_params * 4);
    uint32_t crc = (uint32_t)w->crc;
    put(w, &crc, 4);
}

int ct_ckpt_save(const ct_ckpt *st, const char *path) {
    CT_ASSERT(little_endian());
    CT_ASSERT(st->n_state >= 0 && st->n_state <= CT_CKPT_MAX_STATE);
    char tmp[4200];
    if (ct_file_check_target(path, "--checkpoint")) return CT_EINPUT; /* never rename over a device, FIFO or folder */
    snprintf(tmp, sizeof tmp, "%s.tmp.%d", path, (int)getpid());
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) return ct_fail(CT_EIO, "%s: cannot write checkpoint: %s", path, strerror(errno));
    wbuf w = {fd, crc32(0, NULL, 0), 0};
    put_body(&w, st);
    if (!w.err && fsync(fd)) w.err = errno;
    if (close(fd) && !w.err) w.err = errno;
    if (w.err) unlink(tmp);
    else w.err = ct_file_replace(tmp, path);
    if (w.err)
        return ct_fail(CT_EIO, "%s: writing the checkpoint failed: %s; the previous checkpoint is untouched", path, strerror(w.err));
    return 0;
}

void ct_ckpt_free(ct_ckpt *st) {
    for (int i = 0; i < st->n_names; i++) free(st->class_names[i]);
    free(st->class_names);
    free(st->cfg);
    free(st->params);
    for (int i = 0; i < CT_CKPT_MAX_STATE; i++) free(st->state[i]);
    free(st->average);
    memset(st, 0, sizeof *st);
}

/* ---------------- reading ---------------- */

typedef struct rbuf { const unsigned char *p, *end; } rbuf;

static const unsigned char *take(rbuf *r, uint64_t n) {
    if ((uint64_t)(r->end - r->p) < n) return NULL;
    const unsigned char *q = r->p;
    r->p += n;
    return q;
}

static char *take_str(rbuf *r, uint64_t n) {
    const unsigned char *q = take(r, n);
    if (!q) return NULL;
    char *s = ct_xmalloc(n + 1);
    memcpy(s, q, n);
    s[n] = 0;
    return s;
}

/* u32 length + bytes, count times; NULL on a length past the block */
static int take_names(ct_ckpt *st, rbuf *r, uint32_t count) {
    st->class_names = ct_xcalloc(count ? count : 1, sizeof(char *));
    for (uint32_t i = 0; i < count; i++) {
        const unsigned char *q = take(r, 4);
        uint32_t len;
        if (!q) return -1;
        memcpy(&len, q, 4);
        if (!(st->class_names[i] = take_str(r, len))) return -1;
        st->n_names = (int)i + 1;
    }
    return 0;
}

static float *take_buffer(rbuf *r, size_t nb) {
    const unsigned char *q = take(r, nb);
    if (!q) return NULL;
    float *f = ct_xmalloc(nb ? nb : 1);
    memcpy(f, q, nb);
    return f;
}

/* the parameters, n_state buffers, and the average when n_avg is 1 */
static int take_floats(ct_ckpt *st, rbuf *r, int n_avg) {
    size_t nb = st->n_params * 4;
    if (!(st->params = take_buffer(r, nb))) return -1;
    for (int i = 0; i < st->n_state; i++)
        if (!(st->state[i] = take_buffer(r, nb))) return -1;
    if (n_avg && !(st->average = take_buffer(r, nb))) return -1;
    return 0;
}

/* "images:0.100", "cifar100-coarse": the data set of versions 1 and 2 as fields */
static void data_from_name(ct_ckpt_data *d, const char *name, const char *dir) {
    memset(d, 0, sizeof *d);
    snprintf(d->path, sizeof d->path, "%s", dir);
    if (!strncmp(name, "images:", 7)) {
        snprintf(d->kind, sizeof d->kind, "images");
        d->split = atof(name + 7);
        return;
    }
    int coarse = !strcmp(name, "cifar100-coarse");
    snprintf(d->kind, sizeof d->kind, "%s", coarse ? "cifar100" : name);
    d->classes = coarse ? 20 : !strcmp(name, "cifar100") ? 100 : !strcmp(name, "cifar10") || strstr(name, "mnist") ? 10 : 0;
}

/* versions 1 and 2: fixed header, cfg, (v2: extension with ranks and names), params, two moments */
static int parse_v2(ct_ckpt *st, rbuf *r, uint32_t version, const char *path) {
    hdr_v2 h;
    memcpy(&h, take(r, sizeof h), sizeof h);
    h.model_name[sizeof h.model_name - 1] = h.dataset[sizeof h.dataset - 1] = h.data_dir[sizeof h.data_dir - 1] = 0;
    ct_ckpt_data d;
    data_from_name(&d, h.dataset, h.data_dir);
    *st = (ct_ckpt){.data = d, .seed = h.seed, .next_batch = h.next_batch, .batch = h.batch, .n_train = h.n_train,
                    .opt_kind = h.opt_kind, .opt_step = h.opt_step, .n_params = h.n_params, .ranks = 1, .n_state = 2};
    memcpy(st->model_name, h.model_name, sizeof st->model_name);
    if (h.n_params > ((uint64_t)1 << 34) || h.cfg_len > (1u << 20) || !(st->cfg = take_str(r, h.cfg_len))) return -1;
    if (version >= 2) {
        const unsigned char *q = take(r, 4);
        uint32_t ext_len, nn;
        if (!q) return -1;
        memcpy(&ext_len, q, 4);
        rbuf e = {r->p, r->p};
        if (ext_len < 8 || ext_len > (1u << 24) || !take(r, ext_len)) return -1;
        e.end = r->p;
        memcpy(&st->ranks, take(&e, 4), 4);
        memcpy(&nn, take(&e, 4), 4);
        if (nn > 65536 || take_names(st, &e, nn))
            return ct_fail(CT_EINPUT, "%s: corrupt checkpoint (class names)", path);
    }
    if ((uint64_t)(r->end - r->p) != 12 * h.n_params) return -1;
    return take_floats(st, r, 0);
}

/* versions 3 and 4 */
static int parse_v3(ct_ckpt *st, rbuf *r, uint32_t version, const char *path) {
    hdr_v3 h;
    memset(&h, 0, sizeof h);
    size_t hsize = version >= 4 ? sizeof h : HDR_V3_SIZE;
    memcpy(&h, take(r, hsize), hsize);
    h.model_name[sizeof h.model_name - 1] = h.data_kind[sizeof h.data_kind - 1] = h.data_path[sizeof h.data_path - 1] = 0;
    *st = (ct_ckpt){.seed = h.seed, .next_batch = h.next_batch, .batch = h.batch, .n_train = h.n_train, .ranks = h.ranks,
                    .opt_kind = h.opt_kind, .opt_step = h.opt_step, .lr = h.lr, .momentum = h.momentum, .wd = h.wd,
                    .hp_saved = 1, .n_params = h.n_params, .lookahead = h.lookahead, .drop_last = h.drop_last,
                    .data = {.split = h.data_split, .classes = h.data_classes}};
    memcpy(st->model_name, h.model_name, sizeof st->model_name);
    memcpy(st->data.kind, h.data_kind, sizeof st->data.kind);
    memcpy(st->data.path, h.data_path, sizeof st->data.path);
    if (h.n_state < 0 || h.n_state > CT_CKPT_MAX_STATE)
        return ct_fail(CT_EINPUT, "%s: checkpoint field state buffers is %d, expected 0..%d; the file is damaged", path, h.n_state,
                       CT_CKPT_MAX_STATE);
    st->n_state = h.n_state;
    if (h.n_avg > 1) return ct_fail(CT_EINPUT, "%s: checkpoint field averages is %u, expected 0 or 1; the file is damaged", path, h.n_avg);
    uint64_t need = (uint64_t)h.cfg_len + h.names_bytes + 4 * h.n_params * (uint64_t)(1 + h.n_state + h.n_avg);
    if (h.n_params > ((uint64_t)1 << 34) || h.cfg_len > (1u << 20) || h.names_bytes > (1u << 24) ||
        need != (uint64_t)(r->end - r->p))
        return -1;
    st->cfg = take_str(r, h.cfg_len);
    rbuf e = {r->p, r->p + h.names_bytes};
    r->p = e.end;
    if (h.n_names > 65536 || take_names(st, &e, h.n_names) || e.p != e.end)
        return ct_fail(CT_EINPUT, "%s: corrupt checkpoint (class names)", path);
    return take_floats(st, r, (int)h.n_avg);
}

/* the file size the header promises, or 0 when it promises nothing sensible */
static uint64_t expected_size(const unsigned char *buf, uint64_t size, uint32_t version) {
    uint64_t fixed = 16 + (version >= 4 ? sizeof(hdr_v3) : version == 3 ? HDR_V3_SIZE : sizeof(hdr_v2)) + 4;
    if (size < fixed) return 0;
    if (version >= 3) {
        hdr_v3 h;
        memset(&h, 0, sizeof h);
        memcpy(&h, buf + 16, fixed - 20);
        if (h.n_params > ((uint64_t)1 << 34) || h.n_state < 0 || h.n_state > CT_CKPT_MAX_STATE || h.n_avg > 1) return 0;
        return fixed + h.cfg_len + (uint64_t)h.names_bytes + 4 * h.n_params * (uint64_t)(1 + h.n_state + h.n_avg);
    }
    hdr_v2 h;
    memcpy(&h, buf + 16, sizeof h);
    if (h.n_params > ((uint64_t)1 << 34)) return 0;
    uint64_t ext = 0;
    if (version >= 2) {
        uint32_t ext_len;
        if (fixed - 4 + h.cfg_len + 4 > size) return 0;
        memcpy(&ext_len, buf + fixed - 4 + h.cfg_len, 4);
        ext = 4 + (uint64_t)ext_len;
    }
    return fixed + h.cfg_len + ext + 12 * h.n_params;
}

static int bad_field(const char *path, const char *field, long long v, const char *want) {
    return ct_fail(CT_EINPUT, "%s: checkpoint field %s is %lld, expected %s; the file is damaged or not written by cltrain", path,
                   field, v, want);
}

/* every field, as the command line checks its flags (the CRC only says the bytes are as written) */
static int validate(const ct_ckpt *st, const char *path) {
    if (st->batch < 1 || st->batch > CT_BATCH_MAX) return bad_field(path, "batch", st->batch, "1..4096");
    if (st->n_train < 1) return bad_field(path, "samples per epoch", st->n_train, "at least 1");
    if (st->next_batch < 0) return bad_field(path, "next batch", (long long)st->next_batch, "0 or more");
    if (st->ranks < 1 || st->ranks > 65536) return bad_field(path, "ranks", st->ranks, "1..65536");
    if (st->opt_kind < 0 || st->opt_kind >= CT_OPT_COUNT)
        return ct_fail(CT_EINPUT, "%s: checkpoint field optimizer is %d, expected one of %s (0..%d); the file is damaged or "
                       "not written by cltrain", path, st->opt_kind, ct_optim_type_list(), CT_OPT_COUNT - 1);
    if (st->opt_step < 0 || st->opt_step > st->next_batch)
        return bad_field(path, "optimizer step", st->opt_step, "0 up to the next batch");
    /* versions 1 and 2 always hold two buffers (hp_saved is 0 there), version 3 the optimizer's count */
    int want = ct_optim_types[st->opt_kind]->n_state;
    if (st->hp_saved ? st->n_state != want : st->n_state < want)
        return bad_field(path, "state buffers", st->n_state, want == 1 ? "1 for this optimizer" : "2 for this optimizer");
    if (st->hp_saved && !(isfinite(st->lr) && st->lr >= 0 && isfinite(st->momentum) && st->momentum >= 0 && st->momentum <= 1 &&
                          isfinite(st->wd) && st->wd >= 0 && st->wd <= 10))
        return ct_fail(CT_EINPUT, "%s: checkpoint hyper-parameters out of range (lr %g, momentum %g, weight decay %g); the file is "
                       "damaged or not written by cltrain", path, st->lr, st->momentum, st->wd);
    if (st->drop_last != 0 && st->drop_last != 1) return bad_field(path, "drop last", st->drop_last, "0 or 1");
    if (!(st->lookahead >= 0 && st->lookahead <= 1)) /* NaN too */
        return ct_fail(CT_EINPUT, "%s: checkpoint field lookahead is %g, expected 0..1; the file is damaged or not written by "
                       "cltrain", path, st->lookahead);
    if (st->average && st->lookahead == 0)
        return ct_fail(CT_EINPUT, "%s: checkpoint holds a lookahead average but no lookahead rate; the file is damaged or not "
                       "written by cltrain", path);
    if (st->data.kind[0] && !ct_dataset_find_kind(st->data.kind)) /* "": not recorded */
        return ct_fail(CT_EINPUT, "%s: checkpoint field data set is '%s', expected one of %s; the file is damaged or not "
                       "written by cltrain", path, st->data.kind, ct_dataset_list());
    if (!(st->data.split >= 0 && st->data.split <= 0.9)) /* NaN too: printed as a double, never cast */
        return ct_fail(CT_EINPUT, "%s: checkpoint field held-out share is %g, expected 0..0.9; the file is damaged or not "
                       "written by cltrain", path, st->data.split);
    if (st->data.classes < 0 || st->data.classes > 65536) return bad_field(path, "classes", st->data.classes, "0..65536");
    /* the model: it parses, and its shapes agree with the parameters and the class names */
    ct_model m;
    if (ct_model_parse(&m, st->cfg, st->model_name))
        return ct_fail(CT_EINPUT, "%s: the model definition in the checkpoint does not parse: %s", path, ct_last_error());
    int rc = 0;
    if (m.n_params != st->n_params) rc = bad_field(path, "parameter count", (long long)st->n_params, "the model's count");
    else if (st->n_names && st->n_names != m.n_classes) rc = bad_field(path, "class names", st->n_names, "one per class of the model");
    ct_model_free(&m);
    return rc;
}

int ct_ckpt_load(ct_ckpt *st, const char *path) {
    memset(st, 0, sizeof *st);
    FILE *f;
    int64_t fsize;
    int orc = ct_file_open_read(path, "a cltrain checkpoint file", &f, &fsize);
    if (orc) return orc;
    long size = (long)fsize;
    if (size < (long)(16 + sizeof(hdr_v2) + 4)) {
        fclose(f);
        return ct_fail(CT_EINPUT, "%s: truncated or not a cltrain checkpoint (%ld bytes)", path, size);
    }
    unsigned char *buf = malloc((size_t)size);
    if (!buf) { fclose(f); return ct_fail(CT_ENOMEM, "%s: no memory to read %ld bytes", path, size); }
    size_t got = fread(buf, 1, (size_t)size, f);
    fclose(f);
    int rc = 0;
    uint32_t version, hsize, crc;
    if (got != (size_t)size) { rc = ct_fail(CT_EINPUT, "%s: read %zu of %ld bytes", path, got, size); goto out; }
    if (memcmp(buf, MAGIC, sizeof MAGIC)) { rc = ct_fail(CT_EINPUT, "%s: not a cltrain checkpoint (bad magic)", path); goto out; }
    memcpy(&version, buf + 8, 4);
    memcpy(&hsize, buf + 12, 4);
    if (version > CT_CKPT_VERSION) {
        rc = ct_fail(CT_EINPUT, "%s: checkpoint format %u is newer than this cltrain reads (%d); use a newer cltrain", path, version, CT_CKPT_VERSION);
        goto out;
    }
    if (version < 1 || hsize != (version >= 4 ? sizeof(hdr_v3) : version == 3 ? HDR_V3_SIZE : sizeof(hdr_v2))) {
        rc = ct_fail(CT_EINPUT, "%s: corrupt checkpoint header", path);
        goto out;
    }
    uint64_t need = expected_size(buf, (uint64_t)size, version);
    if (need != (uint64_t)size) {
        rc = ct_fail(CT_EINPUT, "%s: truncated or corrupt checkpoint (%ld bytes, header says %llu)", path, size, (unsigned long long)need);
        goto out;
    }
    memcpy(&crc, buf + size - 4, 4);
    if ((uint32_t)crc32(crc32(0, NULL, 0), buf, (uInt)(size - 4)) != crc) {
        rc = ct_fail(CT_EINPUT, "%s: checkpoint is corrupt (CRC mismatch); use an earlier copy", path);
        goto out;
    }
    rbuf r = {buf + 16, buf + size - 4};
    rc = version >= 3 ? parse_v3(st, &r, version, path) : parse_v2(st, &r, version, path);
    if (rc == -1) rc = ct_fail(CT_EINPUT, "%s: corrupt checkpoint (lengths do not add up)", path);
    if (!rc) rc = validate(st, path);
    if (!rc && version < 3) {
        /* two moment buffers were always written; the optimizer's own count travels on */
        for (int i = ct_optim_types[st->opt_kind]->n_state; i < st->n_state; i++) {
            free(st->state[i]);
            st->state[i] = NULL;
        }
        st->n_state = ct_optim_types[st->opt_kind]->n_state;
    }
out:
    free(buf);
    if (rc) ct_ckpt_free(st);
    return rc;
}
