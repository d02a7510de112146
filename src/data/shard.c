/* shard.c: the record shard writer and reader (format in shard.h and
 * docs/SHARDS.md).
 *
 * The writer streams records through stdio into hidden temporary files,
 * then, once the split is complete, writes each file's final header with
 * pwrite, fsyncs, renames and removes stale files of an earlier, larger pack.
 * The reader keeps one descriptor per file and preads one record per call,
 * so it is safe from several threads. Integers are encoded byte by byte
 * (little-endian) whatever the host.
 * Depends on common.h (ct_crc32c), source.h (ct_source).
 * Tested by tests/test_images.c and tests/pack.sh. */
#include "cltrain/shard.h"
#include "cltrain/common.h"
#include "cltrain/source.h"
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define REPACK "damaged shard; re-run cltrain pack"

static void put32(uint8_t *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static void put64(uint8_t *p, uint64_t v) {
    for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static uint32_t get32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static uint64_t get64(const uint8_t *p) { return (uint64_t)get32(p) | (uint64_t)get32(p + 4) << 32; }

static char *path_of(const char *dir, const char *split, int index, const char *prefix, const char *suffix) {
    size_t n = strlen(dir) + strlen(split) + strlen(prefix) + strlen(suffix) + 32;
    char *p = ct_xmalloc(n);
    snprintf(p, n, "%s/%s%s-%05d.shard%s", dir, prefix, split, index, suffix);
    return p;
}

static int split_name_ok(const char *s) {
    size_t n = strlen(s);
    if (n < 1 || n > 15) return 0;
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') || s[i] == '_' || s[i] == '-')) return 0;
    return 1;
}

typedef struct hdr {
    char split[16];
    uint32_t header_size, height, width, channels, n_classes, shard_index, shard_count, pack_crc;
    uint64_t n_records, first_record, total_records;
} hdr;

/* The header bytes (h->header_size of them) for h and names. */
static uint8_t *header_build(const hdr *h, char *const *names) {
    uint8_t *b = ct_xcalloc(h->header_size, 1);
    memcpy(b, CT_SHARD_MAGIC, 8);
    put32(b + 8, CT_SHARD_VERSION);
    put32(b + 12, h->header_size);
    memcpy(b + 16, h->split, 16);
    put32(b + 32, h->height);
    put32(b + 36, h->width);
    put32(b + 40, h->channels);
    put32(b + 44, h->n_classes);
    put64(b + 48, h->n_records);
    put64(b + 56, h->first_record);
    put64(b + 64, h->total_records);
    put32(b + 72, h->shard_index);
    put32(b + 76, h->shard_count);
    put32(b + 80, h->pack_crc);
    size_t o = CT_SHARD_FIXED;
    for (uint32_t c = 0; c < h->n_classes; c++) {
        uint32_t len = (uint32_t)strlen(names[c]);
        put32(b + o, len);
        memcpy(b + o + 4, names[c], len);
        o += 4 + len;
    }
    CT_ASSERT(o + 4 == h->header_size);
    put32(b + o, ct_crc32c(b, o));
    return b;
}

/* ---- writer ---------------------------------------------------------------- */

static size_t rec_size(int h, int w, int c) { return 8 + (size_t)h * (size_t)w * (size_t)c; }

static uint32_t header_bytes(int n_classes, char *const *names) {
    uint64_t n = CT_SHARD_FIXED + 4;
    for (int c = 0; c < n_classes; c++) n += 4 + strlen(names[c]);
    return n > CT_SHARD_MAX_HEADER ? 0 : (uint32_t)n;
}

int ct_shard_writer_open(ct_shard_writer *w, const char *out_dir, const char *split, int height, int width,
                         int channels, int n_classes, const char *const *names, long records_per_shard) {
    memset(w, 0, sizeof *w);
    if (!split_name_ok(split))
        return ct_fail(CT_EINPUT, "shard split name '%s': expected 1..15 characters of a-z 0-9 _ -", split);
    if (height < 1 || height > CT_SHARD_MAX_SIDE || width < 1 || width > CT_SHARD_MAX_SIDE || channels < 1 ||
        channels > 4)
        return ct_fail(CT_EINPUT, "shard image shape %dx%dx%d: expected 1..%d a side and 1..4 channels", height,
                       width, channels, CT_SHARD_MAX_SIDE);
    if (n_classes < 1 || n_classes > CT_SHARD_MAX_CLASSES)
        return ct_fail(CT_EINPUT, "%d classes: shards hold 1..%d", n_classes, CT_SHARD_MAX_CLASSES);
    if (records_per_shard < 1) return ct_fail(CT_EINPUT, "%ld records per shard: expected at least 1", records_per_shard);
    for (int c = 0; c < n_classes; c++)
        if (strlen(names[c]) > CT_SHARD_MAX_NAME)
            return ct_fail(CT_EINPUT, "class name '%.40s...' is longer than %d bytes", names[c], CT_SHARD_MAX_NAME);
    if (!header_bytes(n_classes, (char *const *)names))
        return ct_fail(CT_EINPUT, "%d class names take more than %u bytes", n_classes, CT_SHARD_MAX_HEADER);
    if (ct_mkdir_p(out_dir))
        return ct_fail(CT_EIO, "%s: cannot create the output folder (%s)", out_dir, strerror(errno));
    w->dir = strdup(out_dir);
    w->split = strdup(split);
    w->height = height;
    w->width = width;
    w->channels = channels;
    w->n_classes = n_classes;
    w->names = ct_xcalloc((size_t)n_classes, sizeof *w->names);
    for (int c = 0; c < n_classes; c++) w->names[c] = strdup(names[c]);
    w->per_shard = records_per_shard;
    w->rec = ct_xmalloc(rec_size(height, width, channels));
    return 0;
}

static void free_writer(ct_shard_writer *w) {
    if (w->f) fclose(w->f);
    w->f = NULL;
    for (int i = 0; i < w->n_shards && w->tmp; i++) free(w->tmp[i]);
    if (w->names)
        for (int c = 0; c < w->n_classes; c++) free(w->names[c]);
    free(w->names);
    free(w->tmp);
    free(w->counts);
    free(w->rec);
    free(w->dir);
    free(w->split);
    w->names = NULL;
    w->tmp = NULL;
    w->counts = NULL;
    w->rec = NULL;
    w->dir = w->split = NULL;
}

void ct_shard_writer_abort(ct_shard_writer *w) {
    if (w->f) fclose(w->f);
    w->f = NULL;
    for (int i = 0; i < w->n_shards && w->tmp; i++)
        if (w->tmp[i]) unlink(w->tmp[i]);
    free_writer(w);
}

static int write_fail(ct_shard_writer *w, const char *path, int e) {
    w->err = ct_fail(CT_EIO, "%s: cannot write (%s); check the space and permissions of %s", path, strerror(e), w->dir);
    return w->err;
}

/* Finish the current file's records (its header is written at close). */
static int end_file(ct_shard_writer *w) {
    if (!w->f) return 0;
    int bad = fflush(w->f) != 0 || ferror(w->f);
    int e = errno;
    if (fclose(w->f) && !bad) { bad = 1; e = errno; }
    w->f = NULL;
    return bad ? write_fail(w, w->tmp[w->n_shards - 1], e) : 0;
}

static int start_file(ct_shard_writer *w) {
    int rc = end_file(w);
    if (rc) return rc;
    int k = w->n_shards;
    char **tmp = realloc(w->tmp, (size_t)(k + 1) * sizeof *tmp);
    if (tmp) w->tmp = tmp;
    long *counts = realloc(w->counts, (size_t)(k + 1) * sizeof *counts);
    if (counts) w->counts = counts;
    if (!tmp || !counts) return w->err = ct_fail(CT_ENOMEM, "out of memory starting shard %d", k);
    char pid[32];
    snprintf(pid, sizeof pid, ".tmp.%d", (int)getpid());
    w->tmp[k] = path_of(w->dir, w->split, k, ".", pid);
    w->counts[k] = 0;
    w->n_shards++;
    w->in_cur = 0;
    w->f = fopen(w->tmp[k], "wb");
    if (!w->f) return write_fail(w, w->tmp[k], errno);
    /* room for the header, written for real at close */
    uint32_t hs = header_bytes(w->n_classes, w->names);
    uint8_t zero[256] = {0};
    for (uint32_t o = 0; o < hs; o += (uint32_t)sizeof zero) {
        size_t n = hs - o < sizeof zero ? hs - o : sizeof zero;
        if (fwrite(zero, 1, n, w->f) != n) return write_fail(w, w->tmp[k], errno);
    }
    w->bytes += hs;
    return 0;
}

int ct_shard_write(ct_shard_writer *w, int32_t label, const uint8_t *pixels) {
    if (w->err) return w->err;
    if (label < 0 || label >= w->n_classes)
        return ct_fail(CT_EINPUT, "label %d out of range for %d classes", (int)label, w->n_classes);
    if (!w->f || w->in_cur == w->per_shard) {
        int rc = start_file(w);
        if (rc) return rc;
    }
    size_t R = rec_size(w->height, w->width, w->channels);
    put32(w->rec, (uint32_t)label);
    memcpy(w->rec + 4, pixels, R - 8);
    uint32_t crc = ct_crc32c(w->rec, R - 4);
    put32(w->rec + R - 4, crc);
    uint8_t chain[8];
    put32(chain, w->pack_crc);
    put32(chain + 4, crc);
    w->pack_crc = ct_crc32c(chain, 8);
    if (fwrite(w->rec, 1, R, w->f) != R) return write_fail(w, w->tmp[w->n_shards - 1], errno);
    w->in_cur++;
    w->counts[w->n_shards - 1]++;
    w->n_records++;
    w->bytes += R;
    return 0;
}

/* Remove SPLIT-NNNNN.shard files with NNNNN >= keep (left by an older pack). */
static void remove_stale(const char *dir, const char *split, int keep) {
    DIR *dp = opendir(dir);
    if (!dp) return;
    size_t sl = strlen(split);
    struct dirent *e;
    while ((e = readdir(dp))) {
        const char *nm = e->d_name;
        if (strncmp(nm, split, sl) || nm[sl] != '-') continue;
        char *end;
        long k = strtol(nm + sl + 1, &end, 10);
        if (end == nm + sl + 1 || nm[sl + 1] < '0' || nm[sl + 1] > '9' || strcmp(end, ".shard")) continue;
        if (k >= keep) {
            size_t n = strlen(dir) + strlen(nm) + 2;
            char *p = ct_xmalloc(n);
            snprintf(p, n, "%s/%s", dir, nm);
            unlink(p);
            free(p);
        }
    }
    closedir(dp);
}

int ct_shard_writer_close(ct_shard_writer *w) {
    if (!w->err && w->n_shards == 0) start_file(w); /* an empty split still gets one (empty) file */
    if (!w->err) end_file(w);
    hdr h;
    memset(&h, 0, sizeof h);
    snprintf(h.split, sizeof h.split, "%s", w->split ? w->split : "");
    h.header_size = header_bytes(w->n_classes, w->names);
    h.height = (uint32_t)w->height;
    h.width = (uint32_t)w->width;
    h.channels = (uint32_t)w->channels;
    h.n_classes = (uint32_t)w->n_classes;
    h.total_records = (uint64_t)w->n_records;
    h.shard_count = (uint32_t)w->n_shards;
    h.pack_crc = w->pack_crc;
    uint64_t first = 0;
    for (int k = 0; k < w->n_shards && !w->err; k++) {
        h.n_records = (uint64_t)w->counts[k];
        h.first_record = first;
        h.shard_index = (uint32_t)k;
        first += h.n_records;
        uint8_t *b = header_build(&h, w->names);
        int fd = open(w->tmp[k], O_WRONLY);
        int e = fd < 0 ? errno : 0;
        if (!e && pwrite(fd, b, h.header_size, 0) != (ssize_t)h.header_size) e = errno ? errno : EIO;
        if (!e && fsync(fd)) e = errno;
        if (fd >= 0 && close(fd) && !e) e = errno;
        free(b);
        if (e) write_fail(w, w->tmp[k], e);
    }
    for (int k = 0; k < w->n_shards && !w->err; k++) {
        char *final = path_of(w->dir, w->split, k, "", "");
        if (rename(w->tmp[k], final)) write_fail(w, final, errno);
        else { free(w->tmp[k]); w->tmp[k] = NULL; }
        free(final);
    }
    int rc = w->err;
    if (rc) {
        ct_shard_writer_abort(w);
        return rc;
    }
    remove_stale(w->dir, w->split, w->n_shards);
    int dfd = open(w->dir, O_RDONLY | O_DIRECTORY);
    if (dfd >= 0) {
        fsync(dfd);
        close(dfd);
    }
    free_writer(w);
    return 0;
}

/* ---- reader ---------------------------------------------------------------- */

void ct_shardset_close(ct_shardset *s) {
    for (int i = 0; i < s->n_shards && s->shards; i++) {
        if (s->shards[i].fd >= 0) close(s->shards[i].fd);
        free(s->shards[i].path);
    }
    free(s->shards);
    if (s->class_names)
        for (int c = 0; c < s->n_classes; c++) free(s->class_names[c]);
    free(s->class_names);
    free(s->dir);
    free(s->split);
    memset(s, 0, sizeof *s);
}

static int read_full(int fd, void *buf, size_t n, off_t off) {
    uint8_t *p = buf;
    while (n) {
        ssize_t k = pread(fd, p, n, off);
        if (k < 0 && errno == EINTR) continue;
        if (k == 0) errno = 0; /* end of file */
        if (k <= 0) return -1;
        p += k;
        n -= (size_t)k;
        off += k;
    }
    return 0;
}

typedef struct found { long index; char *path; } found;
static int cmp_found(const void *a, const void *b) {
    long x = ((const found *)a)->index, y = ((const found *)b)->index;
    return x < y ? -1 : x > y;
}

/* The class names of header b (h->header_size bytes), which fill the rest of
 * it exactly, into *names (when non-NULL). */
static int read_names(const char *path, const uint8_t *b, const hdr *h, char ***names) {
    int rc = 0;
    size_t o = CT_SHARD_FIXED, end = h->header_size - 4;
    char **nm = names ? ct_xcalloc(h->n_classes, sizeof *nm) : NULL;
    for (uint32_t c = 0; c < h->n_classes && !rc; c++) {
        uint32_t len = o + 4 <= end ? get32(b + o) : UINT32_MAX;
        if (len > CT_SHARD_MAX_NAME || o + 4 + len > end || memchr(b + o + 4, 0, len)) {
            rc = ct_fail(CT_EINPUT, "%s: class name %u does not fit the header (" REPACK ")", path, c);
            break;
        }
        if (nm) {
            nm[c] = ct_xmalloc(len + 1);
            memcpy(nm[c], b + o + 4, len);
            nm[c][len] = '\0';
        }
        o += 4 + len;
    }
    if (!rc && o != end) rc = ct_fail(CT_EINPUT, "%s: %zu stray bytes after the class names (" REPACK ")", path, end - o);
    if (nm) {
        if (rc) {
            for (uint32_t c = 0; c < h->n_classes; c++) free(nm[c]);
            free(nm);
        } else {
            *names = nm;
        }
    }
    return rc;
}

/* Read and check one file's header into h (names into *names when non-NULL). */
static int open_one(const char *path, const char *split, int *fd_out, off_t *size_out, hdr *h, char ***names) {
    *fd_out = -1;
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) return ct_fail(CT_EINPUT, "%s: cannot open (%s)", path, strerror(errno));
    struct stat st;
    uint8_t fx[CT_SHARD_FIXED];
    if (fstat(fd, &st)) {
        int e = errno;
        close(fd);
        return ct_fail(CT_EINPUT, "%s: cannot stat (%s)", path, strerror(e));
    }
    if (!S_ISREG(st.st_mode)) { /* opened O_NONBLOCK so that a FIFO cannot block; regular files ignore it */
        close(fd);
        return ct_fail(CT_EINPUT, "%s: not a regular file (a folder, FIFO or device); expected a shard", path);
    }
    int rc = 0;
    uint8_t *b = NULL;
    if (st.st_size < CT_SHARD_FIXED + 4 || read_full(fd, fx, sizeof fx, 0)) {
        rc = ct_fail(CT_EINPUT, "%s: truncated: %lld bytes, shorter than a shard header (" REPACK ")", path,
                     (long long)st.st_size);
        goto out;
    }
    if (memcmp(fx, CT_SHARD_MAGIC, 8)) {
        rc = ct_fail(CT_EINPUT, "%s: not a cltrain shard (bad magic; " REPACK ")", path);
        goto out;
    }
    uint32_t version = get32(fx + 8);
    if (version != CT_SHARD_VERSION) {
        rc = ct_fail(CT_EINPUT, "%s: shard format version %u, this cltrain reads version %d (%s)", path, version,
                     CT_SHARD_VERSION, version > CT_SHARD_VERSION ? "a newer cltrain wrote it; update, or re-pack" : REPACK);
        goto out;
    }
    h->header_size = get32(fx + 12);
    if (h->header_size < CT_SHARD_FIXED + 4 || h->header_size > CT_SHARD_MAX_HEADER || h->header_size > st.st_size) {
        rc = ct_fail(CT_EINPUT, "%s: header size %u does not fit the %lld-byte file (" REPACK ")", path, h->header_size,
                     (long long)st.st_size);
        goto out;
    }
    b = malloc(h->header_size);
    if (!b) {
        rc = ct_fail(CT_ENOMEM, "%s: out of memory reading its %u-byte header", path, h->header_size);
        goto out;
    }
    if (read_full(fd, b, h->header_size, 0)) {
        rc = ct_fail(CT_EINPUT, "%s: cannot read its header (%s)", path, strerror(errno));
        goto out;
    }
    if (ct_crc32c(b, h->header_size - 4) != get32(b + h->header_size - 4)) {
        rc = ct_fail(CT_EINPUT, "%s: header CRC mismatch (" REPACK ")", path);
        goto out;
    }
    memcpy(h->split, b + 16, 16);
    h->height = get32(b + 32);
    h->width = get32(b + 36);
    h->channels = get32(b + 40);
    h->n_classes = get32(b + 44);
    h->n_records = get64(b + 48);
    h->first_record = get64(b + 56);
    h->total_records = get64(b + 64);
    h->shard_index = get32(b + 72);
    h->shard_count = get32(b + 76);
    h->pack_crc = get32(b + 80);
    if (h->split[15] != '\0' || strcmp(h->split, split)) {
        rc = ct_fail(CT_EINPUT, "%s: holds split '%.15s', not '%s' (renamed file? " REPACK ")", path, h->split, split);
        goto out;
    }
    if (h->height < 1 || h->height > CT_SHARD_MAX_SIDE || h->width < 1 || h->width > CT_SHARD_MAX_SIDE ||
        h->channels < 1 || h->channels > 4 || h->n_classes < 1 || h->n_classes > CT_SHARD_MAX_CLASSES ||
        h->shard_count < 1 || h->shard_index >= h->shard_count || h->n_records > h->total_records ||
        h->first_record > h->total_records - h->n_records) {
        rc = ct_fail(CT_EINPUT, "%s: header fields out of range (" REPACK ")", path);
        goto out;
    }
    uint64_t R = rec_size((int)h->height, (int)h->width, (int)h->channels);
    if (h->n_records > ((uint64_t)INT64_MAX - h->header_size) / R ||
        (uint64_t)st.st_size != h->header_size + h->n_records * R) {
        uint64_t want = h->header_size + h->n_records * R;
        rc = ct_fail(CT_EINPUT, "%s: %s: %lld bytes, expected %llu (%llu records of %llu bytes after a %u-byte header; "
                     REPACK ")", path, (uint64_t)st.st_size < want ? "truncated" : "wrong size", (long long)st.st_size,
                     (unsigned long long)want, (unsigned long long)h->n_records, (unsigned long long)R, h->header_size);
        goto out;
    }
    rc = read_names(path, b, h, names);
out:
    free(b);
    if (rc) {
        close(fd);
        return rc;
    }
    *fd_out = fd;
    *size_out = st.st_size;
    return 0;
}

static int same_names(char **a, char **b, int n) {
    for (int c = 0; c < n; c++)
        if (strcmp(a[c], b[c])) return 0;
    return 1;
}

/* The files SPLIT-N.shard in dir, sorted by N, into *out (at least one, or CT_EINPUT). */
static int list_shards(const char *dir, const char *split, found **out) {
    DIR *dp = opendir(dir);
    if (!dp)
        return ct_fail(CT_EINPUT, "%s: cannot open (%s); pack images with cltrain pack IMAGES %s --size S", dir,
                       strerror(errno), dir);
    found *fs = NULL;
    int nf = 0, cap = 0;
    size_t sl = strlen(split);
    struct dirent *e;
    while ((e = readdir(dp))) {
        const char *nm = e->d_name;
        if (strncmp(nm, split, sl) || nm[sl] != '-' || nm[sl + 1] < '0' || nm[sl + 1] > '9') continue;
        char *end;
        errno = 0;
        long k = strtol(nm + sl + 1, &end, 10);
        if (errno || strcmp(end, ".shard") || k > INT_MAX) continue;
        if (nf == cap) {
            cap = cap ? 2 * cap : 16;
            found *p = realloc(fs, (size_t)cap * sizeof *p);
            if (!p) ct_abort("out of memory listing shards", __FILE__, __LINE__);
            fs = p;
        }
        size_t n = strlen(dir) + strlen(nm) + 2;
        fs[nf].path = ct_xmalloc(n);
        snprintf(fs[nf].path, n, "%s/%s", dir, nm);
        fs[nf++].index = k;
    }
    closedir(dp);
    if (nf == 0) {
        free(fs);
        return ct_fail(CT_EINPUT, "%s: no %s-*.shard files; pack images with cltrain pack IMAGES %s --size S", dir,
                       split, dir);
    }
    qsort(fs, (size_t)nf, sizeof *fs, cmp_found);
    *out = fs;
    return nf;
}

int ct_shardset_open(ct_shardset *s, const char *dir, const char *split) {
    memset(s, 0, sizeof *s);
    if (!split_name_ok(split))
        return ct_fail(CT_EINPUT, "shard split name '%s': expected 1..15 characters of a-z 0-9 _ -", split);
    found *fs = NULL;
    int nf = list_shards(dir, split, &fs), rc = 0;
    if (nf < 0) return nf;
    s->dir = strdup(dir);
    s->split = strdup(split);
    s->shards = ct_xcalloc((size_t)nf, sizeof *s->shards);
    for (int i = 0; i < nf; i++) s->shards[i].fd = -1;
    s->n_shards = nf;
    hdr h0;
    memset(&h0, 0, sizeof h0);
    uint64_t next = 0;
    for (int i = 0; i < nf && !rc; i++) {
        ct_shard_file *f = &s->shards[i];
        f->path = fs[i].path;
        fs[i].path = NULL;
        hdr h;
        off_t size;
        char **names = NULL;
        rc = open_one(f->path, split, &f->fd, &size, &h, &names);
        if (rc) break;
        if (i == 0) {
            h0 = h;
            s->class_names = names;
            s->n_classes = (int)h.n_classes;
            if (h.shard_count != (uint32_t)nf) {
                rc = ct_fail(CT_EINPUT, "%s: %s split has %d shard files, its headers say %u (%s; re-run cltrain pack)",
                             dir, split, nf, h.shard_count, (uint32_t)nf < h.shard_count ? "some are missing" : "files of two packs mixed");
                break;
            }
        } else {
            int same = h.height == h0.height && h.width == h0.width && h.channels == h0.channels &&
                       h.n_classes == h0.n_classes && same_names(names, s->class_names, s->n_classes) &&
                       h.shard_count == h0.shard_count && h.total_records == h0.total_records && h.pack_crc == h0.pack_crc;
            for (uint32_t c = 0; names && c < h.n_classes; c++) free(names[c]);
            free(names);
            if (!same) {
                rc = ct_fail(CT_EINPUT, "%s: from another pack than %s (shape, classes or pack CRC differ; "
                             "re-run cltrain pack)", f->path, s->shards[0].path);
                break;
            }
        }
        if (fs[i].index != i || h.shard_index != (uint32_t)i) {
            rc = ct_fail(CT_EINPUT, "%s: expected shard %d of %u here (%s; re-run cltrain pack)", f->path, i,
                         h0.shard_count, fs[i].index != i ? "an earlier one is missing" : "renamed file");
            break;
        }
        if (h.first_record != next) {
            rc = ct_fail(CT_EINPUT, "%s: first record %llu, expected %llu (" REPACK ")", f->path,
                         (unsigned long long)h.first_record, (unsigned long long)next);
            break;
        }
        f->first = h.first_record;
        f->n = h.n_records;
        f->header_size = h.header_size;
        next += h.n_records;
    }
    for (int i = 0; i < nf; i++) free(fs[i].path);
    free(fs);
    if (!rc && next != h0.total_records)
        rc = ct_fail(CT_EINPUT, "%s: %s shards hold %llu records, their headers say %llu (" REPACK ")", dir, split,
                     (unsigned long long)next, (unsigned long long)h0.total_records);
    if (rc) {
        ct_shardset_close(s);
        return rc;
    }
    s->height = (int)h0.height;
    s->width = (int)h0.width;
    s->channels = (int)h0.channels;
    s->pixels = (size_t)s->height * (size_t)s->width * (size_t)s->channels;
    s->record_size = s->pixels + 8;
    s->n = (int64_t)next;
    s->pack_crc = h0.pack_crc;
    return 0;
}

int ct_shardset_read(const ct_shardset *s, int64_t index, int32_t *label, uint8_t *pixels) {
    CT_ASSERT(index >= 0 && index < s->n);
    int lo = 0, hi = s->n_shards - 1;
    while (lo < hi) { /* the last file whose first record is <= index */
        int mid = (lo + hi + 1) / 2;
        if (s->shards[mid].first <= (uint64_t)index) lo = mid;
        else hi = mid - 1;
    }
    const ct_shard_file *f = &s->shards[lo];
    uint64_t r = (uint64_t)index - f->first;
    off_t off = (off_t)(f->header_size + r * s->record_size);
    uint8_t *buf = malloc(s->record_size);
    if (!buf) return ct_fail(CT_ENOMEM, "%s: out of memory reading a record", f->path);
    int rc = 0;
    if (read_full(f->fd, buf, s->record_size, off)) {
        rc = ct_fail(CT_EINPUT, "%s: record %llu at offset %lld: cannot read (%s; " REPACK ")", f->path,
                     (unsigned long long)r, (long long)off, errno ? strerror(errno) : "file truncated");
    } else if (ct_crc32c(buf, s->record_size - 4) != get32(buf + s->record_size - 4)) {
        rc = ct_fail(CT_EINPUT, "%s: record %llu at offset %lld: CRC mismatch (" REPACK ")", f->path,
                     (unsigned long long)r, (long long)off);
    } else if (get32(buf) >= (uint32_t)s->n_classes) {
        rc = ct_fail(CT_EINPUT, "%s: record %llu at offset %lld: label %u out of range for %d classes (" REPACK ")",
                     f->path, (unsigned long long)r, (long long)off, get32(buf), s->n_classes);
    } else {
        *label = (int32_t)get32(buf);
        memcpy(pixels, buf + 4, s->pixels);
    }
    free(buf);
    return rc;
}

/* ---- the ct_source --------------------------------------------------------- */

static int shard_load(void *ctx, int index, float *dst, int32_t *label, ct_rng *rng) {
    (void)rng;
    const ct_shardset *s = ctx;
    uint8_t *px = malloc(s->pixels);
    if (!px) return ct_fail(CT_ENOMEM, "out of memory reading a shard record");
    int rc = ct_shardset_read(s, index, label, px);
    if (!rc)
        for (size_t i = 0; i < s->pixels; i++) dst[i] = (float)px[i] * (1.0f / 255.0f);
    free(px);
    return rc;
}

int ct_shardset_labels(const ct_shardset *s, int32_t *labels) {
    int64_t i = 0;
    for (int k = 0; k < s->n_shards; k++) {
        const ct_shard_file *f = &s->shards[k];
        for (uint64_t r = 0; r < f->n; r++, i++) {
            uint8_t b[4];
            off_t off = (off_t)(f->header_size + r * s->record_size);
            if (read_full(f->fd, b, 4, off))
                return ct_fail(CT_EINPUT, "%s: record %llu at offset %lld: cannot read (%s; " REPACK ")", f->path,
                               (unsigned long long)r, (long long)off, errno ? strerror(errno) : "file truncated");
            uint32_t l = get32(b);
            labels[i] = l < (uint32_t)s->n_classes ? (int32_t)l : 0; /* a bad one is reported when the record is read */
        }
    }
    return 0;
}

int ct_shardset_source_init(ct_source *src, const ct_shardset *s) {
    memset(src, 0, sizeof *src);
    if (s->n > INT_MAX)
        return ct_fail(CT_EINPUT, "%s: %lld %s records, more than a source holds (%d)", s->dir, (long long)s->n,
                       s->split, INT_MAX);
    ct_source_init(src, (int)s->n, s->height, s->width, s->channels, s->n_classes, (void *)s, shard_load);
    return 0;
}
