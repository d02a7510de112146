/* idx.c: IDX image + label files (MNIST, Fashion-MNIST) into a ct_dataset.
 *
 * Files are read through zlib's gzopen/gzread, which decodes .gz and passes
 * raw files through, so both load the same way. Every header field is
 * checked before anything large is allocated (a raw file against its size, a
 * .gz by growing the buffer as data arrives), and short reads, zlib errors
 * (including the CRC at the end of a .gz), trailing data and out-of-range
 * labels are reported as CT_EINPUT with one line naming the file.
 * Depends on common.h, zlib, download.h (ct_mnist_load with download set).
 * Tested by tests/test_idx.c (fixtures, damaged files, ASan). */
#include "cltrain/data.h"
#include "cltrain/common.h"
#include "cltrain/download.h"
#include "cltrain/file.h"
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <string.h>
#include <sys/stat.h>
#include <zlib.h>

#define IDX_IMAGES_MAGIC 0x00000803u
#define IDX_LABELS_MAGIC 0x00000801u

void ct_dataset_free(ct_dataset *ds) {
    if (!ds) return;
    if (ds->class_names) {
        for (int i = 0; i < ds->n_classes; i++) free(ds->class_names[i]);
        free(ds->class_names);
    }
    free(ds->images);
    free(ds->labels);
    memset(ds, 0, sizeof *ds);
}

static uint32_t be32(const uint8_t *p) {
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | (uint32_t)p[3];
}

static int gz_open(gzFile *f, const char *path) {
    *f = NULL;
    struct stat st;
    if (stat(path, &st) == 0 && !S_ISREG(st.st_mode)) return ct_file_check(path, "an IDX file (.gz or raw)");
    errno = 0;
    *f = gzopen(path, "rb");
    if (!*f) {
        if (errno == ENOENT) return ct_fail(CT_EINPUT, "%s: no such file; check the path or pass --data DIR", path);
        return ct_fail(CT_EINPUT, "%s: cannot open (%s)", path, errno ? strerror(errno) : "out of memory");
    }
    gzbuffer(*f, 1 << 17);
    return 0;
}

/* zlib's complaint about f without the "path: " it prefixes, NULL when there is none. */
static const char *gz_why(gzFile f, int *zerr) {
    int e = Z_OK;
    const char *m = gzerror(f, &e);
    *zerr = e;
    if (e == Z_OK) return NULL;
    if (e == Z_ERRNO) return strerror(errno);
    const char *last = m; /* zlib's own messages hold no ": ", so the last one ends the path */
    for (const char *c = strstr(m, ": "); c; c = strstr(c + 2, ": ")) last = c + 2;
    return last;
}

/* Read up to n bytes; returns the count. *zmsg is zlib's complaint when the
 * stream failed (truncated or corrupt .gz, I/O error), NULL on plain EOF. */
static size_t gz_read_all(gzFile f, void *buf, size_t n, const char **zmsg, int *zerr) {
    size_t done = 0;
    while (done < n) {
        unsigned chunk = n - done > (1u << 30) ? 1u << 30 : (unsigned)(n - done);
        int r = gzread(f, (char *)buf + done, chunk);
        if (r <= 0) break;
        done += (size_t)r;
    }
    *zmsg = gz_why(f, zerr);
    return done;
}

/* Read n bytes into a buffer that grows with what actually arrives (from 16
 * MiB, doubling), so a header declaring 4 GiB costs memory only when the data
 * is there: a .gz cannot be sized in advance. *out is malloc'd (NULL on no
 * memory, with *oom); returns the count read. */
static size_t gz_read_grow(gzFile f, size_t n, uint8_t **out, const char **zmsg, int *zerr, int *oom) {
    size_t cap = n < ((size_t)16 << 20) ? n : (size_t)16 << 20, done = 0;
    uint8_t *b = malloc(cap ? cap : 1);
    *oom = !b;
    *zmsg = NULL;
    *zerr = Z_OK;
    while (b) {
        done += gz_read_all(f, b + done, cap - done, zmsg, zerr);
        if (done < cap || cap == n) break;
        size_t ncap = cap > n / 2 ? n : 2 * cap;
        uint8_t *nb = realloc(b, ncap);
        if (!nb) { free(b); b = NULL; *oom = 1; break; }
        b = nb;
        cap = ncap;
    }
    *out = b;
    return done;
}

/* A raw (not .gz) file must hold what its header declares: checked against
 * its size before anything is allocated. */
static int raw_size_check(gzFile f, const char *path, uint64_t hdr, uint64_t want, const char *what) {
    struct stat st;
    if (!gzdirect(f) || stat(path, &st) != 0 || (uint64_t)st.st_size >= hdr + want) return 0;
    return ct_fail(CT_EINPUT, "%s: truncated: expected %llu bytes of %s, got %llu; download the file again", path,
                   (unsigned long long)want, what, (unsigned long long)st.st_size - hdr);
}

/* One message for every short or failed read: what was expected, what came. */
static int read_fail(const char *path, const char *what, size_t want, size_t got, const char *zmsg, int zerr) {
    if (zerr == Z_ERRNO)
        return ct_fail(CT_EINPUT, "%s: cannot read (%s); check that it is a readable file", path, zmsg ? zmsg : "error");
    if (zerr == Z_DATA_ERROR || zerr == Z_MEM_ERROR)
        return ct_fail(CT_EINPUT, "%s: corrupt: expected %zu bytes of %s, got %zu (zlib: %s); download the file again",
                       path, want, what, got, zmsg ? zmsg : "error");
    if (zmsg)
        return ct_fail(CT_EINPUT, "%s: truncated: expected %zu bytes of %s, got %zu (zlib: %s); download the file again",
                       path, want, what, got, zmsg);
    return ct_fail(CT_EINPUT, "%s: truncated: expected %zu bytes of %s, got %zu; download the file again",
                   path, want, what, got);
}

/* After the announced data the file must end; reading on also makes zlib check the .gz CRC. */
static int expect_end(gzFile f, const char *path, long long records) {
    uint8_t b;
    int r = gzread(f, &b, 1), e;
    const char *why = gz_why(f, &e);
    if (why)
        return ct_fail(CT_EINPUT, "%s: %s after the %lld records (zlib: %s); download the file again",
                       path, e == Z_BUF_ERROR ? "truncated" : "corrupt", records, why);
    if (r > 0)
        return ct_fail(CT_EINPUT, "%s: unexpected data after the %lld records its header announces; "
                       "the header or the file is damaged; download the file again", path, records);
    return 0;
}

static int check_magic(const char *path, const uint8_t *hdr, size_t got, uint32_t want, const char *kind,
                       size_t hdr_size, const char *zmsg, int zerr) {
    if (got < 4 && zmsg) return read_fail(path, "header", hdr_size, got, zmsg, zerr);
    if (got < 4)
        return ct_fail(CT_EINPUT, "%s: %s (%zu bytes), not an IDX %s file; download the file again",
                       path, got ? "too short" : "empty", got, kind);
    uint32_t magic = be32(hdr);
    if (magic == want) return 0;
    const char *hint = "";
    if (magic == IDX_IMAGES_MAGIC) hint = " (that is an image file: images and labels swapped?)";
    if (magic == IDX_LABELS_MAGIC) hint = " (that is a label file: images and labels swapped?)";
    return ct_fail(CT_EINPUT, "%s: wrong magic 0x%08x, expected 0x%08x for an IDX %s file%s; "
                   "pass an MNIST-format %s file or download it again", path, magic, want, kind, hint, kind);
}

int ct_idx_load(ct_dataset *ds, const char *images_path, const char *labels_path, int n_classes) {
    CT_ASSERT(ds && images_path && labels_path);
    memset(ds, 0, sizeof *ds);
    if (n_classes < 1 || n_classes > 256)
        return ct_fail(CT_EINPUT, "%s: %d classes asked for; IDX labels are bytes, so 1..256", labels_path, n_classes);
    gzFile fi = NULL, fl = NULL;
    uint8_t hi[16], hl[8];
    const char *zmsg;
    int zerr, rc;
    size_t got;

    if ((rc = gz_open(&fi, images_path)) != 0) return rc;
    got = gz_read_all(fi, hi, sizeof hi, &zmsg, &zerr);
    if ((rc = check_magic(images_path, hi, got, IDX_IMAGES_MAGIC, "image", sizeof hi, zmsg, zerr)) != 0) goto fail;
    if (got < sizeof hi) { rc = read_fail(images_path, "header", sizeof hi, got, zmsg, zerr); goto fail; }
    uint32_t n = be32(hi + 4), rows = be32(hi + 8), cols = be32(hi + 12);
    if (n == 0) {
        rc = ct_fail(CT_EINPUT, "%s: header says 0 images; the file is damaged or not a data set; download it again", images_path);
        goto fail;
    }
    if (rows == 0 || cols == 0 || rows > CT_IDX_MAX_SIDE || cols > CT_IDX_MAX_SIDE) {
        rc = ct_fail(CT_EINPUT, "%s: absurd image size %" PRIu32 "x%" PRIu32 " in the header (allowed 1..%d); "
                     "the file is damaged; download it again", images_path, rows, cols, CT_IDX_MAX_SIDE);
        goto fail;
    }
    uint64_t bytes = (uint64_t)n * rows * cols;
    if (n > INT_MAX || bytes > CT_IDX_MAX_BYTES) {
        rc = ct_fail(CT_EINPUT, "%s: absurd header: %" PRIu32 " images of %" PRIu32 "x%" PRIu32 " (%llu bytes, limit %llu); "
                     "the file is damaged; download it again", images_path, n, rows, cols,
                     (unsigned long long)bytes, (unsigned long long)CT_IDX_MAX_BYTES);
        goto fail;
    }

    if ((rc = gz_open(&fl, labels_path)) != 0) goto fail;
    got = gz_read_all(fl, hl, sizeof hl, &zmsg, &zerr);
    if ((rc = check_magic(labels_path, hl, got, IDX_LABELS_MAGIC, "label", sizeof hl, zmsg, zerr)) != 0) goto fail;
    if (got < sizeof hl) { rc = read_fail(labels_path, "header", sizeof hl, got, zmsg, zerr); goto fail; }
    uint32_t nl = be32(hl + 4);
    if (nl != n) {
        rc = ct_fail(CT_EINPUT, "%s: %" PRIu32 " labels, but %s has %" PRIu32 " images; "
                     "use the images and labels files of the same split (train-* with train-*, t10k-* with t10k-*)",
                     labels_path, nl, images_path, n);
        goto fail;
    }

    if ((rc = raw_size_check(fi, images_path, sizeof hi, bytes, "image data")) ||
        (rc = raw_size_check(fl, labels_path, sizeof hl, n, "label data")))
        goto fail;
    int oom;
    got = gz_read_grow(fi, (size_t)bytes, &ds->images, &zmsg, &zerr, &oom);
    ds->labels = malloc(n);
    if (oom || !ds->labels) {
        rc = ct_fail(CT_ENOMEM, "%s: cannot allocate %llu bytes for %" PRIu32 " images",
                     images_path, (unsigned long long)bytes, n);
        goto fail;
    }
    if (got < bytes) { rc = read_fail(images_path, "image data", (size_t)bytes, got, zmsg, zerr); goto fail; }
    if ((rc = expect_end(fi, images_path, n)) != 0) goto fail;
    got = gz_read_all(fl, ds->labels, n, &zmsg, &zerr);
    if (got < n) { rc = read_fail(labels_path, "label data", n, got, zmsg, zerr); goto fail; }
    if ((rc = expect_end(fl, labels_path, n)) != 0) goto fail;
    for (uint32_t i = 0; i < n; i++) {
        if (ds->labels[i] >= n_classes) {
            rc = ct_fail(CT_EINPUT, "%s: label %u at record %" PRIu32 " is not below %d, the number of classes; "
                         "wrong labels file, or a data set with more classes", labels_path, ds->labels[i], i, n_classes);
            goto fail;
        }
    }
    gzclose(fi);
    gzclose(fl);
    ds->n = (int)n;
    ds->h = (int)rows;
    ds->w = (int)cols;
    ds->c = 1;
    ds->n_classes = n_classes;
    return 0;
fail:
    if (fi) gzclose(fi);
    if (fl) gzclose(fl);
    ct_dataset_free(ds);
    return rc;
}

/* ---- MNIST-format folders ---------------------------------------------- */

static const char *const mnist_names[4] = {
    "train-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte",
};
#define MNIST_LIST "train-images-idx3-ubyte.gz, train-labels-idx1-ubyte.gz, t10k-images-idx3-ubyte.gz, t10k-labels-idx1-ubyte.gz"

static const char *const mnist_md5[4] = {
    "f68b3c2dcbeaaa9fbdd348bbdeb94873", "d53e105ee54ea40749a09fcbcd1e9432",
    "9fb629c4189551a2d022fa330f9573f3", "ec29112dd5afa0611ce80d1b7f02629c",
};
static const char *const mnist_mirrors[] = {
    "https://ossci-datasets.s3.amazonaws.com/mnist/",
    "https://storage.googleapis.com/cvdf-datasets/mnist/",
};
/* The published Fashion-MNIST files; Debian's package recompressed them, so its .gz differ. */
static const char *const fashion_md5[4] = {
    "8d4fb7e6c68d591d4c3dfef9ec88bf0d", "25c81989df183df01b3e8a0aad5dffbe",
    "bef4ecab320f06d8554ea6380940ec79", "bb300cfdad3c16e7a12a480ee83cd310",
};
static const char *const fashion_mirrors[] = {
    "http://fashion-mnist.s3-website.eu-central-1.amazonaws.com/",
    "https://raw.githubusercontent.com/zalandoresearch/fashion-mnist/master/data/fashion/",
};
static const char *const fashion_classes[10] = {
    "T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot",
};

static int is_file(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && !S_ISDIR(st.st_mode);
}

/* path = dir/name.gz if it exists, else dir/name if it exists; returns 1 when found. */
static int mnist_resolve(char *path, size_t size, const char *dir, const char *name, int *too_long) {
    if ((size_t)snprintf(path, size, "%s/%s.gz", dir, name) >= size) { *too_long = 1; return 0; }
    if (is_file(path)) return 1;
    snprintf(path, size, "%s/%s", dir, name);
    return is_file(path);
}

static char **class_names_make(int kind) {
    char **names = ct_xcalloc(10, sizeof *names);
    for (int i = 0; i < 10; i++) {
        char digit[2] = {(char)('0' + i), '\0'};
        const char *s = kind == CT_FASHION_MNIST ? fashion_classes[i] : digit;
        size_t n = strlen(s) + 1;
        names[i] = ct_xmalloc(n);
        memcpy(names[i], s, n);
    }
    return names;
}

static int mnist_download(const char *dir, int kind, int i, const char *set, const char *hint) {
    const char *env = getenv(kind == CT_MNIST ? "CLTRAIN_MNIST_MIRROR" : "CLTRAIN_FASHION_MNIST_MIRROR");
    const char *const *bases = kind == CT_MNIST ? mnist_mirrors : fashion_mirrors;
    int n_urls = 2;
    if (env && env[0]) { bases = &env; n_urls = 1; }
    char urls[2][1024], dest[4096];
    const char *url_ptrs[2];
    for (int m = 0; m < n_urls; m++) {
        size_t len = strlen(bases[m]);
        const char *sep = len && bases[m][len - 1] == '/' ? "" : "/";
        if ((size_t)snprintf(urls[m], sizeof urls[m], "%s%s%s.gz", bases[m], sep, mnist_names[i]) >= sizeof urls[m])
            return ct_fail(CT_EINPUT, "mirror URL too long: %s", bases[m]);
        url_ptrs[m] = urls[m];
    }
    if ((size_t)snprintf(dest, sizeof dest, "%s/%s.gz", dir, mnist_names[i]) >= sizeof dest)
        return ct_fail(CT_EINPUT, "%s: path too long", dir);
    int rc = ct_download(url_ptrs, n_urls, dest, (kind == CT_MNIST ? mnist_md5 : fashion_md5)[i]);
    if (rc == 0) return 0;
    char why[512];
    snprintf(why, sizeof why, "%s", ct_last_error()); /* ct_fail overwrites the buffer it would read */
    return ct_fail(rc, "%s: %s.gz is missing and could not be downloaded (%s); put the four %s files (" MNIST_LIST
                   ") in %s or pass --data DIR; %s", dir, mnist_names[i], why, set, dir, hint);
}

int ct_mnist_load(ct_dataset *train, ct_dataset *test, const char *dir, int kind, int download) {
    CT_ASSERT(dir);
    if (train) memset(train, 0, sizeof *train);
    if (test) memset(test, 0, sizeof *test);
    if (kind != CT_MNIST && kind != CT_FASHION_MNIST)
        return ct_fail(CT_EINPUT, "ct_mnist_load: unknown data set kind %d", kind);
    const char *set = kind == CT_MNIST ? "MNIST" : "Fashion-MNIST";
    const char *hint = kind == CT_MNIST
        ? "`cltrain fashion-mnist` works offline"
        : "Debian's dataset-fashion-mnist package installs them in /usr/share/datasets/fashion-mnist";
    int want[4] = {train != NULL, train != NULL, test != NULL, test != NULL};
    char paths[4][4096];
    char missing[256] = "";
    int n_missing = 0, rc = 0;
    for (int i = 0; i < 4; i++) {
        if (!want[i]) continue;
        int too_long = 0;
        if (mnist_resolve(paths[i], sizeof paths[i], dir, mnist_names[i], &too_long)) continue;
        if (too_long) return ct_fail(CT_EINPUT, "%s: path too long", dir);
        if (download) {
            if ((rc = mnist_download(dir, kind, i, set, hint)) != 0) return rc;
            snprintf(paths[i], sizeof paths[i], "%s/%s.gz", dir, mnist_names[i]);
            continue;
        }
        size_t len = strlen(missing);
        snprintf(missing + len, sizeof missing - len, "%s%s[.gz]", n_missing ? ", " : "", mnist_names[i]);
        n_missing++;
    }
    if (n_missing)
        return ct_fail(CT_EINPUT, "%s: missing %s; expected the four %s files " MNIST_LIST
                       " (or the same names without .gz) in %s; put them there or pass --data DIR; %s",
                       dir, missing, set, dir, hint);
    if (train && (rc = ct_idx_load(train, paths[0], paths[1], 10)) != 0) return rc;
    if (test && (rc = ct_idx_load(test, paths[2], paths[3], 10)) != 0) {
        if (train) ct_dataset_free(train);
        return rc;
    }
    if (train && test && (train->h != test->h || train->w != test->w)) {
        rc = ct_fail(CT_EINPUT, "%s: train images are %dx%d but t10k images are %dx%d; the files come from different data sets",
                     dir, train->h, train->w, test->h, test->w);
        ct_dataset_free(train);
        ct_dataset_free(test);
        return rc;
    }
    if (train) train->class_names = class_names_make(kind);
    if (test) test->class_names = class_names_make(kind);
    return 0;
}
