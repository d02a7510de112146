/* data/npy.c: .npy headers and .npz zip archives (npy.h). The header is
 * the repr of a Python dict, parsed by a small scanner that accepts exactly
 * string keys and string, True/False and integer-tuple values. The zip
 * reader follows APPNOTE 6.3: the end record (searched backwards over the
 * longest comment), the zip64 end record through its locator, then the
 * central directory; each member's data starts after its local header.
 * Depends on common.h, file.h, zlib. Tested by tests/arrays.sh and
 * tests/fuzz/fuzz_npy.c. */
#include "cltrain/npy.h"
#include "cltrain/common.h"
#include "cltrain/file.h"
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#define MAX_ELEMENTS ((int64_t)1 << 50)

static uint16_t le16(const uint8_t *p) { return (uint16_t)(p[0] | p[1] << 8); }
static uint32_t le32(const uint8_t *p) { return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24; }
static uint64_t le64(const uint8_t *p) { return le32(p) | (uint64_t)le32(p + 4) << 32; }

/* --- the header dict --- */

typedef struct { const char *p, *end; } scan;

static void skip_ws(scan *s) {
    while (s->p < s->end && (*s->p == ' ' || *s->p == '\t' || *s->p == '\n' || *s->p == '\r')) s->p++;
}
static int eat(scan *s, char c) {
    skip_ws(s);
    if (s->p < s->end && *s->p == c) { s->p++; return 1; }
    return 0;
}
/* a quoted string (no escapes: np.save writes none) into out[cap] */
static int str(scan *s, char *out, size_t cap) {
    skip_ws(s);
    if (s->p >= s->end || (*s->p != '\'' && *s->p != '"')) return 0;
    char q = *s->p++;
    size_t n = 0;
    while (s->p < s->end && *s->p != q) {
        if (*s->p == '\\' || n + 1 >= cap) return 0;
        out[n++] = *s->p++;
    }
    if (s->p >= s->end) return 0;
    s->p++;
    out[n] = 0;
    return 1;
}
static int word(scan *s, const char *w) {
    skip_ws(s);
    size_t n = strlen(w);
    if ((size_t)(s->end - s->p) >= n && !memcmp(s->p, w, n)) { s->p += n; return 1; }
    return 0;
}
static int integer(scan *s, int64_t *v) {
    skip_ws(s);
    int64_t x = 0;
    int digits = 0;
    while (s->p < s->end && isdigit((unsigned char)*s->p)) {
        if (x > MAX_ELEMENTS) return 0;
        x = x * 10 + (*s->p++ - '0');
        digits++;
    }
    if (s->p < s->end && *s->p == 'L') s->p++; /* Python 2's long */
    *v = x;
    return digits > 0;
}

static int descr(ct_array *a, const char *d, const char *what) {
    char order = d[0], kind = d[0] ? d[1] : 0;
    if (order == 'O' || kind == 'O' || order == 'V' || kind == 'V')
        return ct_fail(CT_EINPUT, "%s: dtype '%s' holds Python objects or records; save plain numbers "
                       "(uint8 or float32 images, integer labels)", what, d);
    char *end;
    long sz = (order == '<' || order == '>' || order == '|' || order == '=') ? strtol(d + 2, &end, 10) : -1;
    if (sz < 0 || *end || !strchr("buif", kind) || !(sz == 1 || sz == 2 || sz == 4 || sz == 8) ||
        (kind == 'b' && sz != 1) || (kind == 'f' && sz < 4))
        return ct_fail(CT_EINPUT, "%s: dtype '%s' is not one cltrain reads (bool, integers, float32, float64)", what, d);
    a->kind = kind;
    a->size = (int)sz;
    a->swap = order == '>' && sz > 1;
    return 0;
}

int ct_npy_parse(ct_array *a, const uint8_t *buf, size_t len, const char *what) {
    memset(a, 0, sizeof *a);
    if (len < 10 || memcmp(buf, "\x93NUMPY", 6))
        return ct_fail(CT_EINPUT, "%s: not a .npy array (no \\x93NUMPY magic); write it with numpy.save", what);
    int major = buf[6];
    size_t hl, off;
    if (major == 1) hl = le16(buf + 8), off = 10;
    else if (major == 2 || major == 3) {
        if (len < 12) return ct_fail(CT_EINPUT, "%s: truncated .npy header", what);
        hl = le32(buf + 8), off = 12;
    } else
        return ct_fail(CT_EINPUT, "%s: .npy format version %d.%d; cltrain reads 1.0, 2.0 and 3.0", what, major, buf[7]);
    if (hl > len - off) return ct_fail(CT_EINPUT, "%s: truncated .npy header (%zu bytes announced, %zu there)", what, hl, len - off);
    scan s = {(const char *)buf + off, (const char *)buf + off + hl};
    char key[32], d[64] = "";
    int have_descr = 0, have_order = 0, have_shape = 0, fortran = 0;
    if (!eat(&s, '{')) goto bad;
    while (!eat(&s, '}')) {
        if (!str(&s, key, sizeof key) || !eat(&s, ':')) goto bad;
        if (!strcmp(key, "descr")) {
            if (!str(&s, d, sizeof d)) {
                skip_ws(&s);
                if (s.p < s.end && *s.p == '[')
                    return ct_fail(CT_EINPUT, "%s: a structured dtype (fields); save one plain array per key", what);
                goto bad;
            }
            have_descr = 1;
        } else if (!strcmp(key, "fortran_order")) {
            if (word(&s, "True")) fortran = 1;
            else if (!word(&s, "False")) goto bad;
            have_order = 1;
        } else if (!strcmp(key, "shape")) {
            if (!eat(&s, '(')) goto bad;
            a->ndim = 0;
            while (!eat(&s, ')')) {
                int64_t v;
                if (a->ndim == CT_NPY_MAX_DIM) return ct_fail(CT_EINPUT, "%s: more than %d dimensions", what, CT_NPY_MAX_DIM);
                if (!integer(&s, &v)) goto bad;
                a->shape[a->ndim++] = v;
                if (!eat(&s, ',')) {
                    if (!eat(&s, ')')) goto bad;
                    break;
                }
            }
            have_shape = 1;
        } else goto bad;
        if (!eat(&s, ',')) {
            if (!eat(&s, '}')) goto bad;
            break;
        }
    }
    if (!have_descr || !have_order || !have_shape) goto bad;
    if (fortran)
        return ct_fail(CT_EINPUT, "%s: stored in Fortran order; save np.ascontiguousarray(a) instead", what);
    int rc = descr(a, d, what);
    if (rc) return rc;
    a->count = 1;
    for (int i = 0; i < a->ndim; i++) {
        if (a->shape[i] > MAX_ELEMENTS || (a->shape[i] && a->count > MAX_ELEMENTS / a->shape[i]))
            return ct_fail(CT_EINPUT, "%s: shape too large", what);
        a->count *= a->shape[i];
    }
    off += hl;
    if ((uint64_t)a->count * (uint64_t)a->size > len - off)
        return ct_fail(CT_EINPUT, "%s: truncated: the shape needs %llu data bytes, the file has %zu", what,
                       (unsigned long long)a->count * (unsigned long long)a->size, len - off);
    a->data = buf + off;
    return 0;
bad:
    memset(a, 0, sizeof *a);
    return ct_fail(CT_EINPUT, "%s: the .npy header is not the dict numpy.save writes ({'descr': ..., "
                   "'fortran_order': ..., 'shape': (...)})", what);
}

/* map path read-only (an empty file maps as an empty buffer) */
static int map_file(const char *path, const char *what, void **map, size_t *len) {
    int rc = ct_file_check(path, what);
    if (rc) return rc;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st)) {
        rc = ct_fail(CT_EINPUT, "%s: %s", path, strerror(errno));
        if (fd >= 0) close(fd);
        return rc;
    }
    *len = (size_t)st.st_size;
    *map = NULL;
    if (*len) {
        *map = mmap(NULL, *len, PROT_READ, MAP_PRIVATE, fd, 0);
        if (*map == MAP_FAILED) {
            *map = NULL;
            rc = ct_fail(CT_EINPUT, "%s: cannot map it (%s)", path, strerror(errno));
        } else
            madvise(*map, *len, MADV_WILLNEED);
    }
    close(fd);
    return rc;
}

int ct_npy_open(ct_array *a, const char *path) {
    void *map;
    size_t len;
    memset(a, 0, sizeof *a);
    int rc = map_file(path, "a .npy array", &map, &len);
    if (rc) return rc;
    if ((rc = ct_npy_parse(a, map ? map : (const uint8_t *)"", len, path))) {
        if (map) munmap(map, len);
        return rc;
    }
    a->map = map;
    a->map_len = len;
    return 0;
}

void ct_array_free(ct_array *a) {
    if (a->map) munmap(a->map, a->map_len);
    free(a->owned);
    memset(a, 0, sizeof *a);
}

static uint64_t raw(const ct_array *a, int64_t i) {
    uint8_t b[8];
    memcpy(b, a->data + (size_t)i * a->size, (size_t)a->size);
    uint64_t v = 0;
    for (int k = 0; k < a->size; k++) v |= (uint64_t)b[a->swap ? a->size - 1 - k : k] << (8 * k);
    return v;
}

int64_t ct_array_int(const ct_array *a, int64_t i) {
    uint64_t v = raw(a, i);
    switch (a->kind) {
    case 'i': {
        int sh = 64 - 8 * a->size;
        return (int64_t)(v << sh) >> sh;
    }
    case 'f': { /* truncated, clamped (a cast of NaN or of a value out of range is undefined) */
        double d = ct_array_float(a, i);
        return d != d ? 0 : d >= 9.2e18 ? INT64_MAX : d <= -9.2e18 ? INT64_MIN : (int64_t)d;
    }
    default: return (int64_t)v;
    }
}

float ct_array_float(const ct_array *a, int64_t i) {
    if (a->kind != 'f') return (float)ct_array_int(a, i);
    uint64_t v = raw(a, i);
    if (a->size == 4) {
        uint32_t u = (uint32_t)v;
        float f;
        memcpy(&f, &u, 4);
        return f;
    }
    double d;
    memcpy(&d, &v, 8);
    return (float)d;
}

const char *ct_array_dtype(const ct_array *a) {
    static const char *const names[4][4] = {{"bool", "?", "?", "?"},
                                            {"uint8", "uint16", "uint32", "uint64"},
                                            {"int8", "int16", "int32", "int64"},
                                            {"?", "?", "float32", "float64"}};
    int k = a->kind == 'b' ? 0 : a->kind == 'u' ? 1 : a->kind == 'i' ? 2 : 3;
    int s = a->size == 1 ? 0 : a->size == 2 ? 1 : a->size == 4 ? 2 : 3;
    return names[k][s];
}

/* --- .npz: a zip archive --- */

void ct_npz_close(ct_npz *z) {
    for (int i = 0; i < z->n; i++) free(z->e[i].name);
    free(z->e);
    free(z->path);
    if (z->map) munmap(z->map, z->len);
    memset(z, 0, sizeof *z);
}

#define ZBAD(...) do { rc = ct_fail(CT_EINPUT, __VA_ARGS__); goto out; } while (0)

int ct_npz_parse(ct_npz *z, const uint8_t *buf, size_t len, const char *path) {
    memset(z, 0, sizeof *z);
    z->path = strdup(path);
    z->buf = buf;
    z->len = len;
    int rc = 0;
    /* the end record: 22 bytes plus a comment of up to 65535 */
    size_t eocd = (size_t)-1;
    for (size_t back = 22; back <= len && back <= 22 + 65535; back++)
        if (le32(buf + len - back) == 0x06054b50 && le16(buf + len - back + 20) == back - 22) { eocd = len - back; break; }
    if (eocd == (size_t)-1) ZBAD("%s: not an .npz (zip) archive: no end-of-directory record; write it with numpy.savez", path);
    uint64_t n = le16(buf + eocd + 10), cd_size = le32(buf + eocd + 12), cd_off = le32(buf + eocd + 16);
    if (le16(buf + eocd + 4) || le16(buf + eocd + 6)) ZBAD("%s: a multi-volume zip archive; cltrain reads single-file .npz", path);
    if (n == 0xffff || cd_size == 0xffffffff || cd_off == 0xffffffff) {
        if (eocd < 20 || le32(buf + eocd - 20) != 0x07064b50) ZBAD("%s: zip64 end-of-directory locator missing", path);
        uint64_t z64 = le64(buf + eocd - 12);
        if (z64 > eocd - 20 || eocd - 20 - z64 < 56 || le32(buf + z64) != 0x06064b50)
            ZBAD("%s: zip64 end-of-directory record missing or damaged", path);
        n = le64(buf + z64 + 32);
        cd_size = le64(buf + z64 + 40);
        cd_off = le64(buf + z64 + 48);
    }
    if (cd_off > eocd || cd_size > eocd - cd_off || n > cd_size / 46)
        ZBAD("%s: the zip directory (%llu entries, %llu bytes at %llu) lies outside the file; truncated?", path,
             (unsigned long long)n, (unsigned long long)cd_size, (unsigned long long)cd_off);
    z->e = ct_xcalloc(n ? (size_t)n : 1, sizeof *z->e);
    const uint8_t *p = buf + cd_off, *end = p + cd_size;
    for (uint64_t i = 0; i < n; i++) {
        if (end - p < 46 || le32(p) != 0x02014b50) ZBAD("%s: zip directory entry %llu damaged", path, (unsigned long long)i);
        ct_npz_entry *e = &z->e[z->n];
        unsigned flags = le16(p + 8), nl = le16(p + 28), xl = le16(p + 30), cl = le16(p + 32);
        if ((size_t)(end - p - 46) < (size_t)nl + xl + cl) ZBAD("%s: zip directory entry %llu damaged", path, (unsigned long long)i);
        e->name = ct_xmalloc(nl + 1u);
        memcpy(e->name, p + 46, nl);
        e->name[nl] = 0;
        z->n++;
        if (flags & 1) ZBAD("%s: member '%s' is encrypted", path, e->name);
        e->method = le16(p + 10);
        e->crc = le32(p + 16);
        e->csize = le32(p + 20);
        e->usize = le32(p + 24);
        e->offset = le32(p + 42);
        /* zip64 extra field: the 0xffffffff fields, in this order */
        for (const uint8_t *x = p + 46 + nl, *xe = x + xl; xe - x >= 4;) {
            unsigned id = le16(x), sz = le16(x + 2);
            if ((size_t)(xe - x - 4) < sz) break;
            if (id == 1) {
                const uint8_t *f = x + 4, *fe = f + sz;
                uint64_t *fields[3] = {&e->usize, &e->csize, &e->offset};
                for (int k = 0; k < 3; k++)
                    if (*fields[k] == 0xffffffff) {
                        if (fe - f < 8) ZBAD("%s: member '%s': zip64 field too short", path, e->name);
                        *fields[k] = le64(f);
                        f += 8;
                    }
            }
            x += 4 + sz;
        }
        p += 46 + nl + xl + cl;
    }
out:
    if (rc) ct_npz_close(z);
    return rc;
}

int ct_npz_open(ct_npz *z, const char *path) {
    void *map;
    size_t len;
    memset(z, 0, sizeof *z);
    int rc = map_file(path, "an .npz archive", &map, &len);
    if (rc) return rc;
    if ((rc = ct_npz_parse(z, map ? map : (const uint8_t *)"", len, path))) {
        if (map) munmap(map, len);
        return rc;
    }
    z->map = map;
    return 0;
}

int ct_npz_find(const ct_npz *z, const char *key) {
    size_t kl = strlen(key);
    for (int i = 0; i < z->n; i++) {
        const char *nm = z->e[i].name;
        if (!strcmp(nm, key) || (strlen(nm) == kl + 4 && !memcmp(nm, key, kl) && !strcmp(nm + kl, ".npy"))) return i;
    }
    return -1;
}

static uint64_t machine_memory(void) {
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    return pages > 0 && page > 0 ? (uint64_t)pages * (uint64_t)page : (uint64_t)1 << 32;
}

/* crc32 over any length (zlib's takes a uInt) */
static uint32_t crc_all(const uint8_t *p, uint64_t n) {
    uLong c = crc32(0L, Z_NULL, 0);
    while (n) {
        uInt k = n > (1u << 30) ? 1u << 30 : (uInt)n;
        c = crc32(c, p, k);
        p += k;
        n -= k;
    }
    return (uint32_t)c;
}

int ct_npz_array(const ct_npz *z, int i, ct_array *a, uint64_t mem_limit) {
    memset(a, 0, sizeof *a);
    const ct_npz_entry *e = &z->e[i];
    char what[600];
    snprintf(what, sizeof what, "%s: %s", z->path, e->name);
    if (e->offset > z->len || z->len - e->offset < 30 || le32(z->buf + e->offset) != 0x04034b50)
        return ct_fail(CT_EINPUT, "%s: local zip header missing at offset %llu; truncated or damaged", what, (unsigned long long)e->offset);
    uint64_t data = e->offset + 30 + le16(z->buf + e->offset + 26) + le16(z->buf + e->offset + 28);
    if (data > z->len || z->len - data < e->csize)
        return ct_fail(CT_EINPUT, "%s: %llu bytes at offset %llu run past the end of the file; truncated?", what,
                       (unsigned long long)e->csize, (unsigned long long)data);
    const uint8_t *src = z->buf + data;
    if (e->method == 0) {
        if (e->usize != e->csize) return ct_fail(CT_EINPUT, "%s: stored member with two different sizes", what);
        if (crc_all(src, e->csize) != e->crc) return ct_fail(CT_EINPUT, "%s: CRC-32 mismatch; the file is damaged", what);
        return ct_npy_parse(a, src, (size_t)e->csize, what);
    }
    if (e->method != 8)
        return ct_fail(CT_EINPUT, "%s: zip compression method %d; cltrain reads stored and deflated members (numpy.savez, "
                       "numpy.savez_compressed)", what, e->method);
    if (!mem_limit) mem_limit = machine_memory();
    if (e->usize > mem_limit || e->usize > SIZE_MAX / 2)
        return ct_fail(CT_EINPUT, "%s: compressed, %.1f GB once inflated, more than this machine's %.1f GB of memory; "
                       "save it with numpy.save as a .npy file (cltrain maps those from disk)", what, (double)e->usize / 1e9,
                       (double)mem_limit / 1e9);
    uint8_t *out = malloc(e->usize ? (size_t)e->usize : 1);
    if (!out)
        return ct_fail(CT_EINPUT, "%s: compressed, %.1f GB once inflated, does not fit in memory; save it with numpy.save "
                       "as a .npy file (cltrain maps those from disk)", what, (double)e->usize / 1e9);
    z_stream s;
    memset(&s, 0, sizeof s);
    int rc = 0;
    if (inflateInit2(&s, -15) != Z_OK) {
        free(out);
        return ct_fail(CT_ENOMEM, "%s: zlib inflateInit2 failed", what);
    }
    uint64_t in_left = e->csize, out_len = 0;
    int zr = Z_OK;
    while (zr == Z_OK) {
        s.next_in = (Bytef *)(uintptr_t)(src + (e->csize - in_left));
        s.avail_in = in_left > (1u << 30) ? 1u << 30 : (uInt)in_left;
        uInt chunk = e->usize - out_len > (1u << 30) ? 1u << 30 : (uInt)(e->usize - out_len);
        s.next_out = out + out_len;
        s.avail_out = chunk;
        uInt before_in = s.avail_in;
        zr = inflate(&s, Z_NO_FLUSH);
        in_left -= before_in - s.avail_in;
        out_len += chunk - s.avail_out;
        if (zr == Z_OK && before_in == s.avail_in && chunk == s.avail_out) zr = Z_BUF_ERROR; /* no progress */
    }
    inflateEnd(&s);
    if (zr != Z_STREAM_END || out_len != e->usize)
        rc = ct_fail(CT_EINPUT, "%s: the deflated data is damaged or truncated (%s)", what,
                     zr == Z_STREAM_END ? "size differs from the directory's" : s.msg ? s.msg : "ends early");
    else if (crc_all(out, out_len) != e->crc)
        rc = ct_fail(CT_EINPUT, "%s: CRC-32 mismatch; the file is damaged", what);
    else
        rc = ct_npy_parse(a, out, (size_t)out_len, what);
    if (rc) {
        free(out);
        return rc;
    }
    a->owned = out;
    return 0;
}
