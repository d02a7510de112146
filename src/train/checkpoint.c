/* train/checkpoint.c: checkpoint files (format in checkpoint.h), written to
 * PATH.tmp.<pid>, fsync'd, renamed over PATH, then the folder fsync'd, so a
 * kill -9 at any moment leaves either the old or the new checkpoint. The CRC
 * (zlib's crc32) covers every byte before it. Tested by tests/checkpoint.sh
 * (round trip, bit-exact resume, damage of every kind, kill -9 at random). */
#include "cltrain/checkpoint.h"
#include "cltrain/common.h"
#include "cltrain/file.h"
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

static const char MAGIC[8] = {'C', 'L', 'T', 'R', 'C', 'K', 'P', 'T'};

typedef struct hdr {
    uint64_t seed;
    int64_t next_batch;
    int32_t batch, n_train, opt_kind, opt_step;
    uint64_t n_params;
    uint32_t cfg_len, pad;
    char model_name[256];
    char dataset[32];
    char data_dir[512];
} hdr;

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

int ct_ckpt_save(const ct_ckpt *st, const char *path) {
    CT_ASSERT(little_endian());
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.tmp.%d", path, (int)getpid());
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) return ct_fail(CT_EIO, "%s: cannot write checkpoint: %s", path, strerror(errno));
    hdr h;
    memset(&h, 0, sizeof h);
    h.seed = st->seed;
    h.next_batch = st->next_batch;
    h.batch = st->batch;
    h.n_train = st->n_train;
    h.opt_kind = st->opt_kind;
    h.opt_step = st->opt_step;
    h.n_params = st->n_params;
    h.cfg_len = (uint32_t)strlen(st->cfg);
    snprintf(h.model_name, sizeof h.model_name, "%s", st->model_name);
    snprintf(h.dataset, sizeof h.dataset, "%s", st->dataset);
    snprintf(h.data_dir, sizeof h.data_dir, "%s", st->data_dir);
    wbuf w = {fd, crc32(0, NULL, 0), 0};
    uint32_t version = CT_CKPT_VERSION, hsize = (uint32_t)sizeof h;
    put(&w, MAGIC, sizeof MAGIC);
    put(&w, &version, 4);
    put(&w, &hsize, 4);
    put(&w, &h, sizeof h);
    put(&w, st->cfg, h.cfg_len);
    uint32_t ext_len = 8;
    for (int i = 0; i < st->n_names; i++) ext_len += 4 + (uint32_t)strlen(st->class_names[i]);
    int32_t ranks = st->ranks > 0 ? st->ranks : 1;
    uint32_t nn = (uint32_t)st->n_names;
    put(&w, &ext_len, 4);
    put(&w, &ranks, 4);
    put(&w, &nn, 4);
    for (int i = 0; i < st->n_names; i++) {
        uint32_t len = (uint32_t)strlen(st->class_names[i]);
        put(&w, &len, 4);
        put(&w, st->class_names[i], len);
    }
    put(&w, st->params, st->n_params * 4);
    put(&w, st->mom1, st->n_params * 4);
    put(&w, st->mom2, st->n_params * 4);
    uint32_t crc = (uint32_t)w.crc;
    put(&w, &crc, 4);
    if (!w.err && fsync(fd)) w.err = errno;
    if (close(fd) && !w.err) w.err = errno;
    if (!w.err && rename(tmp, path)) w.err = errno;
    if (w.err) {
        unlink(tmp);
        return ct_fail(CT_EIO, "%s: writing the checkpoint failed: %s; the previous checkpoint is untouched", path, strerror(w.err));
    }
    /* make the rename itself durable */
    char dir[4200];
    snprintf(dir, sizeof dir, "%s", path);
    int dfd = open(dirname(dir), O_RDONLY | O_DIRECTORY);
    if (dfd >= 0) {
        fsync(dfd);
        close(dfd);
    }
    return 0;
}

void ct_ckpt_free(ct_ckpt *st) {
    for (int i = 0; i < st->n_names; i++) free(st->class_names[i]);
    free(st->class_names);
    free(st->cfg);
    free(st->params);
    free(st->mom1);
    free(st->mom2);
    memset(st, 0, sizeof *st);
}

int ct_ckpt_load(ct_ckpt *st, const char *path) {
    memset(st, 0, sizeof *st);
    FILE *f;
    int64_t fsize;
    int orc = ct_file_open_read(path, "a cltrain checkpoint file", &f, &fsize);
    if (orc) return orc;
    long size = (long)fsize;
    size_t fixed = sizeof MAGIC + 8 + sizeof(hdr) + 4;
    if (size < (long)fixed) {
        fclose(f);
        return ct_fail(CT_EINPUT, "%s: truncated or not a cltrain checkpoint (%ld bytes)", path, size);
    }
    unsigned char *buf = malloc((size_t)size);
    if (!buf) { fclose(f); return ct_fail(CT_ENOMEM, "%s: no memory to read %ld bytes", path, size); }
    size_t got = fread(buf, 1, (size_t)size, f);
    fclose(f);
    int rc = 0;
    uint32_t version, hsize, crc;
    hdr h;
    if (got != (size_t)size) { rc = ct_fail(CT_EINPUT, "%s: read %zu of %ld bytes", path, got, size); goto out; }
    if (memcmp(buf, MAGIC, sizeof MAGIC)) { rc = ct_fail(CT_EINPUT, "%s: not a cltrain checkpoint (bad magic)", path); goto out; }
    memcpy(&version, buf + 8, 4);
    memcpy(&hsize, buf + 12, 4);
    if (version > CT_CKPT_VERSION) {
        rc = ct_fail(CT_EINPUT, "%s: checkpoint format %u is newer than this cltrain reads (%d); use a newer cltrain", path, version, CT_CKPT_VERSION);
        goto out;
    }
    if (version < 1 || hsize != sizeof h) { rc = ct_fail(CT_EINPUT, "%s: corrupt checkpoint header", path); goto out; }
    memcpy(&h, buf + 16, sizeof h);
    uint32_t ext_len = 0;
    if (version >= 2) {
        if ((uint64_t)fixed + h.cfg_len + 4 > (uint64_t)size) { rc = ct_fail(CT_EINPUT, "%s: truncated checkpoint", path); goto out; }
        memcpy(&ext_len, buf + 16 + sizeof h + h.cfg_len, 4);
        if (ext_len < 8 || ext_len > (1u << 24)) { rc = ct_fail(CT_EINPUT, "%s: corrupt checkpoint (extension)", path); goto out; }
        ext_len += 4;
    }
    uint64_t need = (uint64_t)fixed + h.cfg_len + ext_len + 12 * h.n_params;
    if (h.n_params > ((uint64_t)1 << 34) || h.cfg_len > (1u << 20) || need != (uint64_t)size) {
        rc = ct_fail(CT_EINPUT, "%s: truncated or corrupt checkpoint (%ld bytes, header says %llu)", path, size, (unsigned long long)need);
        goto out;
    }
    memcpy(&crc, buf + size - 4, 4);
    if ((uint32_t)crc32(crc32(0, NULL, 0), buf, (uInt)(size - 4)) != crc) {
        rc = ct_fail(CT_EINPUT, "%s: checkpoint is corrupt (CRC mismatch); use an earlier copy", path);
        goto out;
    }
    h.model_name[sizeof h.model_name - 1] = h.dataset[sizeof h.dataset - 1] = h.data_dir[sizeof h.data_dir - 1] = 0;
    memcpy(st->model_name, h.model_name, sizeof st->model_name);
    memcpy(st->dataset, h.dataset, sizeof st->dataset);
    memcpy(st->data_dir, h.data_dir, sizeof st->data_dir);
    st->seed = h.seed;
    st->next_batch = h.next_batch;
    st->batch = h.batch;
    st->n_train = h.n_train;
    st->opt_kind = h.opt_kind;
    st->opt_step = h.opt_step;
    st->n_params = h.n_params;
    const unsigned char *p = buf + 16 + sizeof h;
    st->cfg = ct_xmalloc(h.cfg_len + 1);
    memcpy(st->cfg, p, h.cfg_len);
    st->cfg[h.cfg_len] = 0;
    p += h.cfg_len;
    st->ranks = 1;
    if (ext_len) {
        /* the CRC passed, so the block is what was written; still check every length against it */
        const unsigned char *e = p + 4, *end = p + ext_len;
        uint32_t nn;
        memcpy(&st->ranks, e, 4);
        memcpy(&nn, e + 4, 4);
        e += 8;
        if (st->ranks < 1 || nn > 65536) { rc = ct_fail(CT_EINPUT, "%s: corrupt checkpoint (extension)", path); goto out; }
        st->class_names = ct_xcalloc(nn ? nn : 1, sizeof(char *));
        for (uint32_t i = 0; i < nn; i++) {
            uint32_t len;
            if (end - e < 4) { rc = ct_fail(CT_EINPUT, "%s: corrupt checkpoint (class names)", path); goto out; }
            memcpy(&len, e, 4);
            e += 4;
            if ((uint64_t)(end - e) < len) { rc = ct_fail(CT_EINPUT, "%s: corrupt checkpoint (class names)", path); goto out; }
            st->class_names[i] = ct_xmalloc(len + 1);
            memcpy(st->class_names[i], e, len);
            st->class_names[i][len] = 0;
            st->n_names = (int)i + 1;
            e += len;
        }
        p += ext_len;
    }
    size_t nb = h.n_params * 4;
    st->params = ct_xmalloc(nb);
    st->mom1 = ct_xmalloc(nb);
    st->mom2 = ct_xmalloc(nb);
    memcpy(st->params, p, nb);
    memcpy(st->mom1, p + nb, nb);
    memcpy(st->mom2, p + 2 * nb, nb);
    if (h.batch < 1 || h.n_train < 1 || h.next_batch < 0) rc = ct_fail(CT_EINPUT, "%s: corrupt checkpoint state", path);
out:
    free(buf);
    if (rc) ct_ckpt_free(st);
    return rc;
}
