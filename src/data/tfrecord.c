/* data/tfrecord.c: TFRecord files of tf.train.Example records as image data
 * sets (format and errors in tfrecord.h). Files are read whole through zlib's
 * gzread, which reads gzip and plain files alike; every record is framed,
 * CRC-checked and its Example parsed when the set is opened, so damage stops
 * `cltrain images` before training starts, naming file, record and offset.
 * The protobuf reader checks every length against what is left and accepts
 * only wire types 0, 1, 2 and 5. Tested by tests/tfrecord.sh and the fuzz
 * harness tests/fuzz/tfrecord.c. */
#include "cltrain/tfrecord.h"
#include "cltrain/common.h"
#include "cltrain/file.h"
#include "cltrain/images.h"
#include "cltrain/source.h"
#include <errno.h>
#include <limits.h>
#include <string.h>
#include <zlib.h>

/* ---- framing ------------------------------------------------------------------ */

static uint32_t masked(uint32_t crc) { return ((crc >> 15) | (crc << 17)) + 0xa282ead8u; }
static uint32_t get32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static uint64_t get64(const uint8_t *p) { return (uint64_t)get32(p) | (uint64_t)get32(p + 4) << 32; }

int ct_tfr_next(const uint8_t *buf, size_t size, size_t *pos, const uint8_t **data, size_t *len, char *why,
                size_t why_size) {
    size_t p = *pos, left = size - p;
    if (left == 0) return 0;
    if (left < 12) {
        snprintf(why, why_size, "truncated record: %zu bytes left, a record header takes 12", left);
        return -1;
    }
    if (masked(ct_crc32c(buf + p, 8)) != get32(buf + p + 8)) {
        snprintf(why, why_size, "bad length CRC (damaged file, or not a TFRecord file)");
        return -1;
    }
    uint64_t n = get64(buf + p);
    if (n > left - 16 || left < 16) {
        snprintf(why, why_size, "truncated record: length %llu, %zu bytes left", (unsigned long long)n,
                 left < 16 ? 0 : left - 16);
        return -1;
    }
    if (masked(ct_crc32c(buf + p + 12, (size_t)n)) != get32(buf + p + 12 + n)) {
        snprintf(why, why_size, "data CRC mismatch (damaged record)");
        return -1;
    }
    *data = buf + p + 12;
    *len = (size_t)n;
    *pos = p + 16 + (size_t)n;
    return 1;
}

/* ---- protobuf ------------------------------------------------------------------ */

typedef struct pbr { const uint8_t *p, *end; int bad; } pbr;

static uint64_t varint(pbr *r) {
    uint64_t v = 0;
    for (int s = 0; s < 64; s += 7) {
        if (r->p >= r->end) break;
        uint8_t b = *r->p++;
        v |= (uint64_t)(b & 0x7f) << s;
        if (!(b & 0x80)) return v;
    }
    r->bad = 1;
    return 0;
}

/* The next field: its number and wire type; for type 2 *sub is its bytes,
 * for 0 *v its value; 1 and 5 are skipped. 0 at the end or on damage (r->bad). */
static int field(pbr *r, int *num, int *wt, pbr *sub, uint64_t *v) {
    if (r->bad || r->p >= r->end) return 0;
    uint64_t key = varint(r);
    *num = (int)(key >> 3);
    *wt = (int)(key & 7);
    if (r->bad || key >> 3 == 0 || key >> 3 > 0x1fffffff) { r->bad = 1; return 0; }
    size_t left = (size_t)(r->end - r->p);
    switch (*wt) {
    case 0: *v = varint(r); break;
    case 1: if (left < 8) r->bad = 1; else r->p += 8; break;
    case 5: if (left < 4) r->bad = 1; else r->p += 4; break;
    case 2: {
        uint64_t n = varint(r);
        if (r->bad || n > (uint64_t)(r->end - r->p)) { r->bad = 1; break; }
        *sub = (pbr){r->p, r->p + n, 0};
        r->p += n;
        break;
    }
    default: r->bad = 1;
    }
    return !r->bad;
}

/* Feature: the first bytes value (want 1) or int64 value (want 3). 1 found, 0 another kind, -1 damaged */
static int feature_value(pbr f, int want, const uint8_t **bytes, size_t *len, int64_t *iv) {
    int num, wt, kind = 0;
    pbr list = {0}, x = {0};
    uint64_t v;
    while (field(&f, &num, &wt, &x, &v)) {
        if (num < 1 || num > 3) continue; /* unknown fields are skipped */
        if (wt != 2) return -1;
        kind = num;
        list = x;
    }
    if (f.bad) return -1;
    if (kind != want) return 0;
    /* the list again: its first value (repeated field 1) */
    pbr sub = {0};
    while (field(&list, &num, &wt, &sub, &v)) {
        if (num != 1) continue;
        if (want == 1 && wt == 2) { *bytes = sub.p; *len = (size_t)(sub.end - sub.p); return 1; }
        if (want == 3 && wt == 0) { *iv = (int64_t)v; return 1; }
        if (want == 3 && wt == 2) { /* packed */
            uint64_t first = varint(&sub);
            if (sub.bad) return -1;
            *iv = (int64_t)first;
            return 1;
        }
        return -1;
    }
    return list.bad ? -1 : 0; /* an empty list */
}

int ct_tfr_example(const uint8_t *p, size_t n, const ct_tfr_opts *o, const uint8_t **img, size_t *img_len,
                   int64_t *label, char *why, size_t why_size) {
    const char *ik = o && o->image_key ? o->image_key : "image/encoded";
    const char *lk = o && o->label_key ? o->label_key : "image/class/label";
    pbr ex = {p, p + n, 0}, feats = {0}, entry = {0}, x = {0};
    int num, wt, got_img = 0, got_lab = 0;
    uint64_t v;
    char seen[160] = "";
    while (field(&ex, &num, &wt, &feats, &v)) {
        if (num != 1 || wt != 2) continue;            /* Example.features */
        while (field(&feats, &num, &wt, &entry, &v)) {
            if (num != 1 || wt != 2) continue;        /* Features.feature map entry */
            pbr key = {0}, val = {0};
            int have_val = 0;
            while (field(&entry, &num, &wt, &x, &v)) {
                if (num == 1 && wt == 2) key = x;
                else if (num == 2 && wt == 2) { val = x; have_val = 1; }
            }
            if (entry.bad) { feats.bad = 1; break; }
            size_t kl = (size_t)(key.end - key.p);
            size_t sl = strlen(seen);
            if (kl && sl + kl + 3 < sizeof seen) { /* for the message; any byte that is not printable shows as '?' */
                if (sl) { memcpy(seen + sl, ", ", 2); sl += 2; }
                for (size_t j = 0; j < kl; j++) seen[sl++] = key.p[j] >= 0x20 && key.p[j] < 0x7f ? (char)key.p[j] : '?';
                seen[sl] = 0;
            }
            int is_img = kl == strlen(ik) && !memcmp(key.p, ik, kl), is_lab = kl == strlen(lk) && !memcmp(key.p, lk, kl);
            if (!is_img && !is_lab) continue;
            int r = have_val ? feature_value(val, is_img ? 1 : 3, img, img_len, label) : 0;
            if (r < 0) { feats.bad = 1; break; }
            if (r == 0) {
                snprintf(why, why_size, "feature '%s' is not %s", is_img ? ik : lk, is_img ? "a bytes list with a value" : "an int64 list with a value");
                return -1;
            }
            if (is_img) got_img = 1;
            else got_lab = 1;
        }
        if (feats.bad) ex.bad = 1;
    }
    if (ex.bad) { snprintf(why, why_size, "not a valid tf.train.Example (protobuf damaged)"); return -1; }
    if (!got_img || !got_lab) {
        snprintf(why, why_size, "no feature '%s' (features: %s); choose it with %s", !got_img ? ik : lk,
                 seen[0] ? seen : "none", !got_img ? "--tfrecord-image KEY" : "--tfrecord-label KEY");
        return -1;
    }
    return 0;
}

/* ---- files and splits ----------------------------------------------------------- */

void ct_tfr_free(ct_tfr_data *d) {
    for (int i = 0; i < d->n_files; i++) {
        free(d->paths[i]);
        free(d->bufs[i]);
    }
    free(d->paths);
    free(d->bufs);
    free(d->sizes);
    for (int c = 0; c < d->n_classes && d->class_names; c++) free(d->class_names[c]);
    free(d->class_names);
    free(d->rec[0]);
    free(d->rec[1]);
    memset(d, 0, sizeof *d);
}

/* how many whole records the first n bytes of b frame (for saying how far a damaged file got) */
static long long whole_records(const uint8_t *b, size_t n) {
    size_t pos = 0, len;
    const uint8_t *data;
    char why[256];
    long long k = 0;
    while (ct_tfr_next(b, n, &pos, &data, &len, why, sizeof why) > 0) k++;
    return k;
}

/* Inflate the gzip file z (zn bytes; members one after another, as gzip -c a b
 * writes them) into *out. A stream that ends early or is damaged is refused
 * with how far it got, compressed and uncompressed: inflate is used rather
 * than gzread, which returns 0 at an early end as at a clean one and drops
 * the count of the call that fails. */
static int gunzip(const char *path, const uint8_t *z, size_t zn, uint8_t **out, size_t *outn) {
    z_stream s;
    memset(&s, 0, sizeof s);
    if (inflateInit2(&s, 15 + 16) != Z_OK) return ct_fail(CT_ENOMEM, "%s: out of memory opening it", path);
    size_t cap = zn < ((size_t)1 << 20) ? (size_t)1 << 20 : zn * 2, n = 0, in = 0;
    uint8_t *b = malloc(cap);
    int rc = 0, zr = Z_OK;
    while (!rc) {
        if (!b) { rc = ct_fail(CT_ENOMEM, "%s: out of memory reading it", path); break; }
        if (n == cap) {
            if ((uint64_t)cap * 2 > CT_TFR_MAX_FILE) { rc = ct_fail(CT_EINPUT, "%s: larger than 64 GiB uncompressed", path); break; }
            uint8_t *nb = realloc(b, cap * 2);
            if (!nb) { rc = ct_fail(CT_ENOMEM, "%s: out of memory reading it", path); break; }
            b = nb;
            cap *= 2;
        }
        size_t ia = zn - in < (1u << 30) ? zn - in : 1u << 30, oa = cap - n < (1u << 30) ? cap - n : 1u << 30;
        s.next_in = (uint8_t *)z + in;
        s.avail_in = (uInt)ia;
        s.next_out = b + n;
        s.avail_out = (uInt)oa;
        zr = inflate(&s, Z_NO_FLUSH);
        in += ia - s.avail_in;
        n += oa - s.avail_out;
        if (zr == Z_STREAM_END) {
            /* another member follows, or the end (bytes after the last member are ignored, as gzip does) */
            if (zn - in < 2 || z[in] != 0x1f || z[in + 1] != 0x8b) break;
            inflateReset(&s);
            continue;
        }
        if (zr == Z_OK || (zr == Z_BUF_ERROR && in < zn)) continue;
        const char *what = zr == Z_BUF_ERROR ? "the gzip stream is cut short" : "the gzip stream is damaged";
        rc = ct_fail(CT_EINPUT, "%s: %s at byte %zu of %zu, after %zu bytes of records (%lld whole records) (zlib: %s); "
                     "copy or write the file again", path, what, in, zn, n, whole_records(b, n),
                     zr == Z_BUF_ERROR ? "unexpected end of file" : s.msg ? s.msg : "error");
    }
    inflateEnd(&s);
    if (rc) { free(b); return rc; }
    *out = b;
    *outn = n;
    return 0;
}

/* The whole (uncompressed) contents of path into d's file list: plain
 * TFRecord, or gzip-compressed (TFRecord's GZIP option). */
static int read_file(ct_tfr_data *d, const char *path) {
    uint8_t *raw, *b;
    size_t rawn, n;
    /* a FIFO, device or folder is refused before anything blocks */
    int rc = ct_file_read_all(path, "a TFRecord file (.tfrecord, or gzip-compressed)", CT_TFR_MAX_FILE, &raw, &rawn);
    if (rc) return rc;
    if (rawn >= 2 && raw[0] == 0x1f && raw[1] == 0x8b) {
        rc = gunzip(path, raw, rawn, &b, &n);
        free(raw);
        if (rc) return rc;
    } else {
        b = raw;
        n = rawn;
    }
    int i = d->n_files++;
    d->paths = realloc(d->paths, (size_t)d->n_files * sizeof *d->paths);
    d->bufs = realloc(d->bufs, (size_t)d->n_files * sizeof *d->bufs);
    d->sizes = realloc(d->sizes, (size_t)d->n_files * sizeof *d->sizes);
    if (!d->paths || !d->bufs || !d->sizes) ct_abort("out of memory listing TFRecord files", __FILE__, __LINE__);
    d->paths[i] = strdup(path);
    d->bufs[i] = b;
    d->sizes[i] = n;
    return 0;
}

typedef struct recvec { ct_tfr_record *r; int n, cap; } recvec;

/* Every record of file f into v, framed, checked and parsed. */
static int scan_file(const ct_tfr_data *d, int f, const ct_tfr_opts *o, recvec *v) {
    const uint8_t *buf = d->bufs[f], *data;
    size_t size = d->sizes[f], pos = 0, len;
    char why[256];
    size_t raw = (size_t)d->raw_h * d->raw_w * d->raw_c;
    for (int64_t idx = 0;; idx++) {
        size_t at = pos;
        int k = ct_tfr_next(buf, size, &pos, &data, &len, why, sizeof why);
        if (k == 0) break;
        ct_tfr_record r = {.file = f, .index = idx, .offset = (int64_t)at};
        int64_t label = 0;
        if (k > 0 && ct_tfr_example(data, len, o, &r.img, &r.len, &label, why, sizeof why)) k = -1;
        if (k > 0 && (label < 0 || label >= CT_TFR_MAX_CLASSES)) {
            snprintf(why, sizeof why, "label %lld out of range (0..%d)", (long long)label, CT_TFR_MAX_CLASSES - 1);
            k = -1;
        }
        if (k > 0 && raw && r.len != raw) {
            snprintf(why, sizeof why, "raw image of %zu bytes, --tfrecord-shape %d,%d,%d needs %zu", r.len, d->raw_h,
                     d->raw_w, d->raw_c, raw);
            k = -1;
        }
        if (k < 0)
            return ct_fail(CT_EINPUT, "%s: record %lld at offset %lld: %s", d->paths[f], (long long)idx, (long long)at, why);
        if (v->n == INT_MAX) return ct_fail(CT_EINPUT, "%s: more than %d records", d->paths[f], INT_MAX);
        if (v->n == v->cap) {
            v->cap = v->cap ? 2 * v->cap : 1024;
            ct_tfr_record *nr = realloc(v->r, (size_t)v->cap * sizeof *nr);
            if (!nr) return ct_fail(CT_ENOMEM, "out of memory listing TFRecord records");
            v->r = nr;
        }
        r.label = (int32_t)label;
        v->r[v->n++] = r;
    }
    return 0;
}

static int read_split(ct_tfr_data *d, const char *const *paths, int n, const ct_tfr_opts *o, recvec *v) {
    for (int i = 0; i < n; i++) {
        int rc = read_file(d, paths[i]);
        if (!rc) rc = scan_file(d, d->n_files - 1, o, v);
        if (rc) return rc;
    }
    return 0;
}

/* v's records class by class (stable) into rec[which], or with to_test a
 * val_split share of each class to the test split. */
static void sort_split(ct_tfr_data *d, recvec *v, double val_split, uint64_t seed, int split_off) {
    int C = d->n_classes;
    int cnt[2] = {0, 0};
    d->rec[0] = d->rec[0] ? d->rec[0] : ct_xmalloc(((size_t)v->n + 1) * sizeof *d->rec[0]);
    if (split_off) d->rec[1] = ct_xmalloc(((size_t)v->n + 1) * sizeof *d->rec[1]);
    int *of = ct_xmalloc(((size_t)v->n + 1) * sizeof *of);
    for (int c = 0; c < C; c++) {
        int m = 0;
        for (int i = 0; i < v->n; i++)
            if (v->r[i].label == c) of[m++] = i;
        unsigned char *to_test = ct_xcalloc((size_t)m + 1, 1);
        if (split_off && m) {
            int k = (int)(val_split * m + 0.5);
            if (k > m - 1) k = m - 1;
            int *perm = ct_xmalloc((size_t)m * sizeof *perm);
            for (int i = 0; i < m; i++) perm[i] = i;
            ct_rng r = ct_rng_make(seed, ct_crc32c(d->class_names[c], strlen(d->class_names[c])), 0);
            for (int i = m - 1; i > 0; i--) {
                int j = (int)ct_rng_below(&r, (uint32_t)i + 1);
                int t = perm[i]; perm[i] = perm[j]; perm[j] = t;
            }
            for (int i = 0; i < k; i++) to_test[perm[i]] = 1;
            free(perm);
        }
        for (int i = 0; i < m; i++) {
            int s = to_test[i];
            d->rec[s][cnt[s]++] = v->r[of[i]];
        }
        free(to_test);
    }
    free(of);
    d->n[0] = cnt[0];
    if (split_off) d->n[1] = cnt[1];
}

int ct_tfr_open(ct_tfr_data *d, const char *const *train, int n_train, const char *const *test, int n_test,
                double val_split, uint64_t seed, const ct_tfr_opts *o) {
    memset(d, 0, sizeof *d);
    if (o && o->raw_h > 0) {
        d->raw_h = o->raw_h;
        d->raw_w = o->raw_w;
        d->raw_c = o->raw_c;
    }
    if (!(val_split >= 0 && val_split < 1))
        return ct_fail(CT_EINPUT, "validation split %g: expected a share of each class, 0 <= F < 1", val_split);
    recvec tr = {0}, te = {0};
    int rc = read_split(d, train, n_train, o, &tr);
    if (!rc) rc = read_split(d, test, n_test, o, &te);
    int maxl = -1;
    for (int i = 0; i < tr.n; i++) maxl = tr.r[i].label > maxl ? tr.r[i].label : maxl;
    if (!rc && tr.n == 0) rc = ct_fail(CT_EINPUT, "%s: no records in the training files", n_train ? train[0] : "(none)");
    if (!rc && maxl < 1) rc = ct_fail(CT_EINPUT, "%s: every training label is 0; a classifier needs at least two classes", train[0]);
    for (int i = 0; !rc && i < te.n; i++)
        if (te.r[i].label > maxl)
            rc = ct_fail(CT_EINPUT, "%s: record %lld at offset %lld: label %d out of range: the training files have "
                         "classes 0..%d", d->paths[te.r[i].file], (long long)te.r[i].index, (long long)te.r[i].offset,
                         te.r[i].label, maxl);
    if (!rc) {
        d->n_classes = maxl + 1;
        d->class_names = ct_xcalloc((size_t)d->n_classes, sizeof *d->class_names);
        for (int c = 0; c < d->n_classes; c++) {
            char nm[16];
            snprintf(nm, sizeof nm, "%d", c);
            d->class_names[c] = strdup(nm);
        }
        sort_split(d, &tr, val_split, seed, n_test == 0);
        if (n_test) {
            ct_tfr_data tmp = *d;   /* the test files' records, class by class, into rec[1] */
            tmp.rec[0] = NULL;
            sort_split(&tmp, &te, 0, seed, 0);
            d->rec[1] = tmp.rec[0];
            d->n[1] = tmp.n[0];
        }
    }
    free(tr.r);
    free(te.r);
    if (rc) ct_tfr_free(d);
    return rc;
}

int ct_tfr_decode(const ct_tfr_data *d, const ct_tfr_record *r, int size, int channels, uint8_t *out) {
    if (d->raw_h > 0) {
        CT_ASSERT(size == d->raw_h && size == d->raw_w && channels == d->raw_c);
        memcpy(out, r->img, r->len);
        return 0;
    }
    char name[4300];
    snprintf(name, sizeof name, "%s: record %lld at offset %lld", d->paths[r->file], (long long)r->index,
             (long long)r->offset);
    return ct_image_decode_mem(r->img, r->len, name, size, channels, out);
}

/* ---- the ct_source ----------------------------------------------------------------- */

static int tfr_load(void *vctx, int index, float *dst, int32_t *label, ct_rng *rng) {
    (void)rng;
    const ct_tfr_src_ctx *c = vctx;
    const ct_tfr_record *r = &c->d->rec[c->split][index];
    size_t m = (size_t)c->size * (size_t)c->size * (size_t)c->channels;
    uint8_t *buf = malloc(m);
    if (!buf) return ct_fail(CT_ENOMEM, "out of memory decoding a TFRecord image");
    int rc = ct_tfr_decode(c->d, r, c->size, c->channels, buf);
    if (!rc) {
        for (size_t j = 0; j < m; j++) dst[j] = (float)buf[j] * (1.0f / 255.0f);
        *label = r->label;
    }
    free(buf);
    return rc;
}

int ct_tfr_source_init(ct_source *src, ct_tfr_src_ctx *ctx, const ct_tfr_data *d, int split, int size, int channels) {
    memset(src, 0, sizeof *src);
    *ctx = (ct_tfr_src_ctx){d, split, size, channels};
    if (d->raw_h > 0 && (d->raw_h != d->raw_w || size != d->raw_h || channels != d->raw_c))
        return ct_fail(CT_EINPUT, "--tfrecord-shape %d,%d,%d: raw images are used as they are: give square ones, and "
                       "--size %d --channels %d or neither", d->raw_h, d->raw_w, d->raw_c, d->raw_h, d->raw_c);
    if (d->raw_h <= 0 && channels != 1 && channels != 3) return ct_fail(CT_EINPUT, "%d channels: expected 1 or 3", channels);
    ct_source_init(src, d->n[split], size, size, channels, d->n_classes, ctx, tfr_load);
    return 0;
}
