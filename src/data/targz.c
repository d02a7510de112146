/* targz.c: the .tar.gz reader the CIFAR archives are unpacked with. The
 * archive is read through zlib by a minimal ustar reader that writes regular
 * files only and refuses paths that would land outside the destination.
 * Tested by tests/test_cifar.c (hostile archives) and tests/fuzz/fuzz_targz.c. */
#include "cltrain/targz.h"
#include "cltrain/common.h"
#include "cltrain/file.h"
#include <errno.h>
#include <limits.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

/* An octal header field (NUL- or space-terminated); -1 when malformed or base-256. */
static long long octal(const uint8_t *p, int n) {
    long long v = 0;
    int i = 0, digits = 0;
    while (i < n && p[i] == ' ') i++;
    for (; i < n && p[i] >= '0' && p[i] <= '7'; i++, digits++) {
        if (v > (LLONG_MAX >> 3)) return -1;
        v = v * 8 + (p[i] - '0');
    }
    if (i < n && p[i] != '\0' && p[i] != ' ') return -1;
    return digits ? v : -1;
}

/* 0 when path is relative and has no ".." component. */
static int unsafe_path(const char *path) {
    if (path[0] == '/' || path[0] == '\0') return 1;
    for (const char *c = path; *c;) {
        const char *e = strchr(c, '/');
        size_t n = e ? (size_t)(e - c) : strlen(c);
        if (n == 2 && c[0] == '.' && c[1] == '.') return 1;
        if (!e) break;
        c = e + 1;
    }
    return 0;
}

typedef struct tar_in {
    gzFile f;
    const char *path;
} tar_in;

/* Read exactly n bytes (buf may be NULL to skip); CT_EINPUT naming what was being read when short. */
static int tar_read(tar_in *t, void *buf, size_t n, const char *what) {
    uint8_t scratch[8192];
    size_t done = 0;
    while (done < n) {
        size_t want = n - done;
        if (!buf && want > sizeof scratch) want = sizeof scratch;
        if (want > (1u << 30)) want = 1u << 30;
        int r = gzread(t->f, buf ? (uint8_t *)buf + done : scratch, (unsigned)want);
        if (r <= 0) {
            int e = Z_OK;
            const char *m = gzerror(t->f, &e);
            if (e != Z_OK && e != Z_BUF_ERROR)
                return ct_fail(CT_EINPUT, "%s: corrupt archive while reading %s (zlib: %s); download it again",
                               t->path, what, e == Z_ERRNO ? strerror(errno) : m);
            return ct_fail(CT_EINPUT, "%s: truncated archive: %s ends after %zu of %zu bytes; download it again",
                           t->path, what, done, n);
        }
        done += (size_t)r;
    }
    return 0;
}

/* Copy `size` bytes of the archive into a temporary file beside dest, then rename it onto dest. */
static int tar_write_file(tar_in *t, const char *dest, long long size, const char *entry) {
    char tmp[4400];
    snprintf(tmp, sizeof tmp, "%s.part-XXXXXX", dest);
    int fd = mkstemp(tmp);
    if (fd < 0) return ct_fail(CT_EIO, "%s: cannot create a file there (%s)", dest, strerror(errno));
    uint8_t buf[1 << 16];
    int rc = 0;
    for (long long left = size; left > 0 && rc == 0;) {
        size_t n = left > (long long)sizeof buf ? sizeof buf : (size_t)left;
        if ((rc = tar_read(t, buf, n, entry)) != 0) break;
        for (size_t off = 0; off < n;) {
            ssize_t w = write(fd, buf + off, n - off);
            if (w < 0 && errno == EINTR) continue;
            if (w < 0) { rc = ct_fail(CT_EIO, "%s: cannot write (%s)", dest, strerror(errno)); break; }
            off += (size_t)w;
        }
        left -= (long long)n;
    }
    if (rc == 0 && fchmod(fd, 0644) != 0) rc = ct_fail(CT_EIO, "%s: cannot set its mode (%s)", dest, strerror(errno));
    if (close(fd) != 0 && rc == 0) rc = ct_fail(CT_EIO, "%s: cannot write (%s)", dest, strerror(errno));
    if (rc == 0 && rename(tmp, dest) != 0) rc = ct_fail(CT_EIO, "%s: cannot rename into place (%s)", dest, strerror(errno));
    if (rc != 0) unlink(tmp);
    return rc;
}

/* An entry's path from its 512-byte header h: the name field, after the
 * POSIX ustar prefix when there is one. */
static void header_name(const uint8_t *h, char *name, size_t n) {
    char base[101], prefix[156] = "";
    memcpy(base, h, 100);
    base[100] = '\0';
    if (memcmp(h + 257, "ustar\0", 6) == 0) { /* POSIX only: old GNU headers keep atime there */
        memcpy(prefix, h + 345, 155);
        prefix[155] = '\0';
    }
    snprintf(name, n, "%s%s%s", prefix, prefix[0] ? "/" : "", base);
}

/* Read to the end so zlib checks the CRC and length. */
static int tar_finish(tar_in *t) {
    uint8_t tail[4096];
    while (gzread(t->f, tail, sizeof tail) > 0) {}
    int e = Z_OK;
    const char *m = gzerror(t->f, &e);
    if (e != Z_OK && e != Z_BUF_ERROR)
        return ct_fail(CT_EINPUT, "%s: corrupt archive (zlib: %s); download it again", t->path, m);
    if (e == Z_BUF_ERROR) return ct_fail(CT_EINPUT, "%s: truncated archive; download it again", t->path);
    return 0;
}

int ct_targz_extract(const char *archive, const char *dest_dir, int *n_files) {
    CT_ASSERT(archive && dest_dir);
    if (n_files) *n_files = 0;
    int frc = ct_file_check(archive, "a .tar.gz archive");
    if (frc) return frc;
    errno = 0;
    tar_in t = {gzopen(archive, "rb"), archive};
    if (!t.f) return ct_fail(CT_EINPUT, "%s: cannot open (%s)", archive, errno ? strerror(errno) : "out of memory");
    gzbuffer(t.f, 1 << 17);
    if (ct_mkdir_p(dest_dir) != 0) {
        gzclose(t.f);
        return ct_fail(CT_EIO, "%s: cannot create the folder (%s)", dest_dir, strerror(errno));
    }
    uint8_t h[512];
    char name[4096], long_name[4096] = "", dest[8300], what[4200];
    int rc = 0, files = 0, entries = 0, have_long = 0;
    for (;;) {
        int r = gzread(t.f, h, sizeof h);
        if (r == 0 && entries > 0) break; /* no end-of-archive blocks: accept, as GNU tar does */
        if (r != (int)sizeof h) {
            if ((rc = tar_read(&t, h + (r > 0 ? r : 0), sizeof h - (size_t)(r > 0 ? r : 0), "a header")) != 0) break;
        }
        int zero = 1;
        for (int i = 0; i < 512 && zero; i++) zero = h[i] == 0;
        if (zero) break;
        entries++;
        long long sum = octal(h + 148, 8), calc = 0;
        for (int i = 0; i < 512; i++) calc += i >= 148 && i < 156 ? ' ' : h[i];
        if (sum != calc) {
            rc = ct_fail(CT_EINPUT, "%s: %s (header %d has a bad checksum); download it again", archive,
                         entries == 1 ? "not a tar archive" : "damaged archive", entries);
            break;
        }
        long long size = octal(h + 124, 12);
        if (size < 0) {
            rc = ct_fail(CT_EINPUT, "%s: damaged archive (header %d has a bad size field); download it again",
                         archive, entries);
            break;
        }
        char type = (char)h[156];
        if (have_long) {
            snprintf(name, sizeof name, "%s", long_name);
            have_long = 0;
        } else {
            header_name(h, name, sizeof name);
        }
        if (type == 'L') { /* GNU long name: the next entry's path is this entry's data */
            if (size >= (long long)sizeof long_name) {
                rc = ct_fail(CT_EINPUT, "%s: entry %d has a %lld-byte name; damaged archive", archive, entries, size);
                break;
            }
            if ((rc = tar_read(&t, long_name, (size_t)size, "a long name")) != 0) break;
            long_name[size] = '\0';
            have_long = 1;
            if ((rc = tar_read(&t, NULL, (size_t)((512 - size % 512) % 512), "padding")) != 0) break;
            continue;
        }
        const char *rel = name;
        while (rel[0] == '.' && rel[1] == '/') rel += 2;
        if (unsafe_path(rel) && !(type == '5' && (rel[0] == '\0' || strcmp(rel, ".") == 0))) {
            rc = ct_fail(CT_EINPUT, "%s: entry '%s' has an absolute path or a '..' component; refusing to unpack "
                         "an archive that could write outside %s", archive, name, dest_dir);
            break;
        }
        if ((size_t)snprintf(dest, sizeof dest, "%s/%s", dest_dir, rel) >= 4096) {
            rc = ct_fail(CT_EINPUT, "%s: entry '%s': path too long", archive, name);
            break;
        }
        size_t dl = strlen(dest);
        while (dl > 1 && dest[dl - 1] == '/') dest[--dl] = '\0';
        if (type == '0' || type == '\0' || type == '7') {
            char *slash = strrchr(dest, '/');
            *slash = '\0';
            int mk = ct_mkdir_p(dest);
            *slash = '/';
            if (mk != 0) {
                rc = ct_fail(CT_EIO, "%s: cannot create the folder for '%s' (%s)", dest_dir, name, strerror(errno));
                break;
            }
            snprintf(what, sizeof what, "entry '%s'", name);
            if ((rc = tar_write_file(&t, dest, size, what)) != 0) break;
            files++;
        } else {
            if (type == '5' && ct_mkdir_p(dest) != 0) {
                rc = ct_fail(CT_EIO, "%s: cannot create the folder (%s)", dest, strerror(errno));
                break;
            }
            /* links, devices, pax headers: skipped with their data */
            if ((rc = tar_read(&t, NULL, (size_t)size, "an entry")) != 0) break;
        }
        if ((rc = tar_read(&t, NULL, (size_t)((512 - size % 512) % 512), "padding")) != 0) break;
    }
    if (rc == 0) rc = tar_finish(&t);
    gzclose(t.f);
    if (n_files) *n_files = files;
    return rc;
}
