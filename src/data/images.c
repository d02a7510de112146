/* images.c: image folders into train/test splits, decoding with stb_image
 * and stb_image_resize, and the decoding ct_source (see images.h).
 *
 * stb_image and stb_image_resize are compiled here and only here (their
 * IMPLEMENTATION macros); stb_image_write lives in cli/eval.c. The Debian
 * stb_image (v2.27) declares its failure reason STBI_THREAD_LOCAL, which is
 * _Thread_local in C11, so concurrent decodes each read their own reason.
 * JPEG goes to libjpeg-turbo (TurboJPEG API: faster, and bounds its Huffman
 * tables, which Debian's stb 2.27 does not); stb is built without its JPEG
 * decoder, so no input reaches it. Every file is read whole (at most
 * CT_IMAGE_MAX_FILE bytes, regular files only) and passes
 * ct_image_header_check (data/imgcheck.c) before a decoder sees it.
 * Depends on common.h (ct_crc32c), file.h, source.h, stb, turbojpeg.
 * Tested by tests/test_images.c. */
#include "cltrain/images.h"
#include "cltrain/common.h"
#include "cltrain/file.h"
#include "cltrain/source.h"
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdatomic.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <turbojpeg.h>

#define STB_IMAGE_IMPLEMENTATION
#define STB_IMAGE_RESIZE_IMPLEMENTATION
/* the formats image folders accept besides JPEG (TurboJPEG's), nothing else (PSD, PIC, PNM, HDR out) */
#define STBI_ONLY_PNG
#define STBI_ONLY_BMP
#define STBI_ONLY_GIF
#define STBI_ONLY_TGA
#define STBI_NO_LINEAR
#define STBI_MAX_DIMENSIONS CT_IMAGE_MAX_SIDE
#define STBI_ASSERT(x) CT_ASSERT(x)
#define STBIR_ASSERT(x) CT_ASSERT(x)
/* v2.27 compiles clean with our flags; these keep other stb versions quiet */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wsign-compare"
#pragma GCC diagnostic ignored "-Wunused-parameter"
#pragma GCC diagnostic ignored "-Wunused-function"
#pragma GCC diagnostic ignored "-Wshadow"
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
#pragma GCC diagnostic ignored "-Wimplicit-fallthrough"
#include <stb/stb_image.h>
#include <stb/stb_image_resize.h>
#pragma GCC diagnostic pop

_Static_assert(sizeof(stbi_uc) == 1, "stb_image decodes to bytes");

static const char *const exts[] = {"png", "jpg", "jpeg", "bmp", "gif", "tga"};
#define EXT_LIST ".png .jpg .jpeg .bmp .gif .tga"
#define STR_(x) #x
#define STR(x) STR_(x)

/* ---- small helpers -------------------------------------------------------- */

static char *join(const char *a, const char *b) {
    size_t na = strlen(a), nb = strlen(b);
    char *p = ct_xmalloc(na + nb + 2);
    memcpy(p, a, na);
    p[na] = '/';
    memcpy(p + na + 1, b, nb + 1);
    return p;
}

static int is_dir(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

static int accepted(const char *name) {
    const char *dot = strrchr(name, '.');
    if (!dot || dot == name) return 0;
    for (size_t i = 0; i < sizeof exts / sizeof *exts; i++)
        if (!strcasecmp(dot + 1, exts[i])) return 1;
    return 0;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

typedef struct strvec { char **s; int n, cap; } strvec;

static void sv_push(strvec *v, char *s) {
    if (v->n == v->cap) {
        v->cap = v->cap ? 2 * v->cap : 16;
        char **p = realloc(v->s, (size_t)v->cap * sizeof *p);
        if (!p) ct_abort("out of memory listing a folder", __FILE__, __LINE__);
        v->s = p;
    }
    v->s[v->n++] = s;
}

static void sv_free(strvec *v) {
    for (int i = 0; i < v->n; i++) free(v->s[i]);
    free(v->s);
    memset(v, 0, sizeof *v);
}

/* Names in dir (hidden ones skipped), sorted with strcmp: sub-folders when
 * want_dirs, else regular files with an accepted extension. */
static int list_dir(const char *dir, int want_dirs, strvec *out) {
    memset(out, 0, sizeof *out);
    DIR *dp = opendir(dir);
    if (!dp) return ct_fail(CT_EINPUT, "%s: cannot open folder (%s); check its permissions", dir, strerror(errno));
    struct dirent *e;
    while ((e = readdir(dp))) {
        if (e->d_name[0] == '.') continue;
        if (!want_dirs && !accepted(e->d_name)) continue;
        char *path = join(dir, e->d_name);
        struct stat st;
        /* a file that cannot be stat'ed (a symlink loop, a dangling link) is kept, so the scan names and counts it */
        int keep = stat(path, &st) == 0 ? (want_dirs ? S_ISDIR(st.st_mode) : S_ISREG(st.st_mode)) : !want_dirs;
        free(path);
        if (keep) sv_push(out, strdup(e->d_name));
    }
    closedir(dp);
    if (out->n > 1) qsort(out->s, (size_t)out->n, sizeof *out->s, cmp_str);
    return 0;
}

/* ---- scanning ------------------------------------------------------------- */

/* The readable images of one class folder, as full paths, sorted. */
static int class_files(const char *classdir, int strict, int *skipped, strvec *out) {
    strvec names;
    memset(out, 0, sizeof *out);
    int rc = list_dir(classdir, 0, &names);
    if (rc) return rc;
    int bad = 0;
    for (int i = 0; i < names.n && !rc; i++) {
        char *path = join(classdir, names.s[i]);
        int w, h, ok = 0;
        const char *why = NULL;
        char whybuf[512];
        uint8_t *bytes;
        size_t len;
        if (ct_file_read_all(path, "an image file", CT_IMAGE_MAX_FILE, &bytes, &len) == 0) {
            ok = ct_image_probe_mem(bytes, len, &w, &h, &why);
            free(bytes);
        } else { /* the reason without the "PATH: " the message starts with */
            const char *e = ct_last_error();
            size_t pl = strlen(path);
            snprintf(whybuf, sizeof whybuf, "%s", !strncmp(e, path, pl) && !strncmp(e + pl, ": ", 2) ? e + pl + 2 : e);
            why = whybuf;
        }
        if (ok) {
            sv_push(out, path);
            continue;
        }
        if (!why) why = "unreadable";
        if (strict) {
            rc = ct_fail(CT_EINPUT, "%s: not a readable image (%s); fix or delete it, or leave out --strict to skip it",
                         path, why);
        } else {
            fprintf(stderr, "cltrain: skipping %s: %s\n", path, why);
            bad++;
        }
        free(path);
    }
    sv_free(&names);
    if (rc) {
        sv_free(out);
        return rc;
    }
    *skipped += bad;
    return 0;
}

typedef struct splitbuf { strvec paths; int32_t *labels; int cap; } splitbuf;

static void sb_push(splitbuf *b, char *path, int32_t label) {
    sv_push(&b->paths, path);
    if (b->paths.n > b->cap) {
        b->cap = b->paths.cap;
        int32_t *l = realloc(b->labels, (size_t)b->cap * sizeof *l);
        if (!l) ct_abort("out of memory listing a folder", __FILE__, __LINE__);
        b->labels = l;
    }
    b->labels[b->paths.n - 1] = label;
}

static void sb_move(ct_imgdir_split *s, splitbuf *b) {
    s->n = b->paths.n;
    s->paths = b->paths.s;
    s->labels = b->labels;
    memset(b, 0, sizeof *b);
}

void ct_imgdir_free(ct_imgdir *d) {
    if (!d) return;
    for (int s = 0; s < 2; s++) {
        for (int i = 0; i < d->split[s].n; i++) free(d->split[s].paths[i]);
        free(d->split[s].paths);
        free(d->split[s].labels);
    }
    if (d->class_names)
        for (int c = 0; c < d->n_classes; c++) free(d->class_names[c]);
    free(d->class_names);
    free(d->dir);
    memset(d, 0, sizeof *d);
}

static int check_classes(const char *where, const strvec *classes) {
    if (classes->n == 0)
        return ct_fail(CT_EINPUT, "%s: no class sub-folders; expected one folder per class holding its images "
                       "(%s/CLASS/IMAGE)", where, where);
    if (classes->n == 1)
        return ct_fail(CT_EINPUT, "%s: only one class folder (%s); a classifier needs at least two", where,
                       classes->s[0]);
    return 0;
}

/* Files of every class of `root` (root/CLASS/...), into per-class lists. */
static int scan_classes(const char *root, const strvec *classes, int strict, int *skipped, strvec *files, long *total) {
    *total = 0;
    for (int c = 0; c < classes->n; c++) {
        char *cdir = join(root, classes->s[c]);
        int rc = class_files(cdir, strict, skipped, &files[c]);
        free(cdir);
        if (rc) return rc;
        *total += files[c].n;
    }
    return 0;
}

static int check_files(const char *root, const strvec *classes, const strvec *files, long total, int skipped) {
    if (total == 0)
        return ct_fail(CT_EINPUT, "%s: no images in any class folder (%d unreadable skipped); expected " EXT_LIST " files",
                       root, skipped);
    for (int c = 0; c < classes->n; c++)
        if (files[c].n == 0)
            return ct_fail(CT_EINPUT, "%s/%s: class folder has no readable images (" EXT_LIST "); add some or remove it",
                           root, classes->s[c]);
    if (total > INT_MAX) return ct_fail(CT_EINPUT, "%s: %ld images, more than %d", root, total, INT_MAX);
    return 0;
}

static void files_free(strvec *files, int n) {
    if (!files) return;
    for (int c = 0; c < n; c++) sv_free(&files[c]);
    free(files);
}

int ct_imgdir_scan(ct_imgdir *d, const char *dir, double val_split, uint64_t seed, int strict) {
    memset(d, 0, sizeof *d);
    if (!(val_split >= 0 && val_split < 1))
        return ct_fail(CT_EINPUT, "validation split %g: expected a share of each class, 0 <= F < 1", val_split);
    struct stat st;
    if (stat(dir, &st) != 0)
        return ct_fail(CT_EINPUT, "%s: %s; expected a folder with one sub-folder of images per class", dir, strerror(errno));
    if (!S_ISDIR(st.st_mode))
        return ct_fail(CT_EINPUT, "%s: not a folder; expected a folder with one sub-folder of images per class", dir);
    char *tr = join(dir, "train"), *te = join(dir, "test");
    int has_tr = is_dir(tr), has_te = is_dir(te);
    strvec classes = {0}, tclasses = {0};
    strvec *files = NULL, *tfiles = NULL;
    splitbuf sb[2];
    memset(sb, 0, sizeof sb);
    int rc = 0, ncls = 0;
    long total = 0, ttotal = 0;
    if (has_tr != has_te) {
        rc = ct_fail(CT_EINPUT, "%s: has %s/ but no %s/; give it both train/ and test/ (each with the same class "
                     "folders), or neither (the test split is then taken from each class)",
                     dir, has_tr ? "train" : "test", has_tr ? "test" : "train");
        goto out;
    }
    if (has_tr) {
        d->folders = 1;
        if ((rc = list_dir(tr, 1, &classes)) || (rc = check_classes(tr, &classes))) goto out;
        if ((rc = list_dir(te, 1, &tclasses))) goto out;
        int differ = classes.n != tclasses.n;
        for (int c = 0; c < classes.n && !differ; c++) differ = strcmp(classes.s[c], tclasses.s[c]) != 0;
        if (differ) {
            /* name the first class that is in one and not the other */
            const char *only = NULL, *side = "train";
            for (int i = 0, j = 0; !only && (i < classes.n || j < tclasses.n);) {
                int k = i == classes.n ? 1 : j == tclasses.n ? -1 : strcmp(classes.s[i], tclasses.s[j]);
                if (k < 0) only = classes.s[i];
                else if (k > 0) { only = tclasses.s[j]; side = "test"; }
                else i++, j++;
            }
            rc = ct_fail(CT_EINPUT, "%s: train/ and test/ hold different class folders ('%s' is only in %s/); "
                         "give both the same class folders", dir, only ? only : "?", side);
            goto out;
        }
        ncls = classes.n;
        files = ct_xcalloc((size_t)classes.n, sizeof *files);
        tfiles = ct_xcalloc((size_t)classes.n, sizeof *tfiles);
        if ((rc = scan_classes(tr, &classes, strict, &d->skipped, files, &total)) ||
            (rc = scan_classes(te, &classes, strict, &d->skipped, tfiles, &ttotal)) ||
            (rc = check_files(tr, &classes, files, total, d->skipped)) ||
            (rc = check_files(te, &classes, tfiles, ttotal, d->skipped)))
            goto out;
        for (int c = 0; c < classes.n; c++) {
            for (int i = 0; i < files[c].n; i++) { sb_push(&sb[0], files[c].s[i], c); files[c].s[i] = NULL; }
            for (int i = 0; i < tfiles[c].n; i++) { sb_push(&sb[1], tfiles[c].s[i], c); tfiles[c].s[i] = NULL; }
        }
    } else {
        if ((rc = list_dir(dir, 1, &classes)) || (rc = check_classes(dir, &classes))) goto out;
        ncls = classes.n;
        files = ct_xcalloc((size_t)classes.n, sizeof *files);
        if ((rc = scan_classes(dir, &classes, strict, &d->skipped, files, &total)) ||
            (rc = check_files(dir, &classes, files, total, d->skipped)))
            goto out;
        for (int c = 0; c < classes.n; c++) {
            int m = files[c].n;
            int k = (int)(val_split * m + 0.5);
            if (k > m - 1) k = m - 1;
            int *perm = ct_xmalloc((size_t)m * sizeof *perm);
            unsigned char *to_test = ct_xcalloc((size_t)m, 1);
            for (int i = 0; i < m; i++) perm[i] = i;
            ct_rng r = ct_rng_make(seed, ct_crc32c(classes.s[c], strlen(classes.s[c])), 0);
            for (int i = m - 1; i > 0; i--) {
                int j = (int)ct_rng_below(&r, (uint32_t)i + 1);
                int t = perm[i]; perm[i] = perm[j]; perm[j] = t;
            }
            for (int i = 0; i < k; i++) to_test[perm[i]] = 1;
            for (int i = 0; i < m; i++) { sb_push(&sb[to_test[i]], files[c].s[i], c); files[c].s[i] = NULL; }
            free(perm);
            free(to_test);
        }
    }
    d->dir = strdup(dir);
    d->n_classes = classes.n;
    d->class_names = classes.s;
    memset(&classes, 0, sizeof classes);
    sb_move(&d->split[0], &sb[0]);
    sb_move(&d->split[1], &sb[1]);
out:
    files_free(files, ncls);
    files_free(tfiles, ncls);
    sv_free(&classes);
    sv_free(&tclasses);
    for (int s = 0; s < 2; s++) {
        sv_free(&sb[s].paths);
        free(sb[s].labels);
    }
    free(tr);
    free(te);
    if (rc) ct_imgdir_free(d);
    return rc;
}

/* ---- decoding ------------------------------------------------------------- */

static _Thread_local char tj_why[256];

/* TurboJPEG's reason lives in its handle: keep a per-thread copy */
static const char *tj_reason(tjhandle tj) {
    snprintf(tj_why, sizeof tj_why, "%s", tj ? tjGetErrorStr2(tj) : "out of memory");
    return tj_why;
}

/* JPEG header: sides and whether it is grey. 1, or 0 with *why. */
static int jpeg_info(tjhandle tj, const uint8_t *buf, size_t len, int *w, int *h, int *grey, const char **why) {
    int ss, cs;
    if (tjDecompressHeader3(tj, buf, (unsigned long)len, w, h, &ss, &cs)) { *why = tj_reason(tj); return 0; }
    if (*w < 1 || *h < 1 || *w > CT_IMAGE_MAX_SIDE || *h > CT_IMAGE_MAX_SIDE) {
        *why = "larger than " STR(CT_IMAGE_MAX_SIDE) " pixels a side, or empty";
        return 0;
    }
    *grey = cs == TJCS_GRAY;
    return 1;
}

/* a JPEG as 1 (grey files) or 3 channels; NULL with *why, or *oom */
static stbi_uc *jpeg_decode(const uint8_t *buf, size_t len, int *w, int *h, int *n, const char **why, int *oom) {
    tjhandle tj = tjInitDecompress();
    if (!tj) { *oom = 1; return NULL; }
    int grey;
    stbi_uc *px = NULL;
    if (jpeg_info(tj, buf, len, w, h, &grey, why)) {
        *n = grey ? 1 : 3;
        px = malloc((size_t)*w * (size_t)*h * (size_t)*n);
        if (!px) *oom = 1;
        /* a warning (premature end, corrupt data) is a failure: no half-grey images */
        else if (tjDecompress2(tj, buf, (unsigned long)len, px, *w, 0, *h, grey ? TJPF_GRAY : TJPF_RGB,
                               TJFLAG_STOPONWARNING | TJFLAG_LIMITSCANS)) {
            *why = tj_reason(tj);
            free(px);
            px = NULL;
        }
    }
    tjDestroy(tj);
    return px;
}

int ct_image_probe_mem(const uint8_t *buf, size_t len, int *w, int *h, const char **why) {
    *w = *h = 0;
    int fmt = ct_image_format(buf, len), comp;
    if (len > INT_MAX) { *why = "file too large"; return 0; }
    if (!ct_image_header_check(buf, len, fmt, why)) return 0;
    if (fmt == CT_IMG_JPEG) {
        tjhandle tj = tjInitDecompress();
        if (!tj) { *why = "out of memory"; return 0; }
        int grey, ok = jpeg_info(tj, buf, len, w, h, &grey, why);
        tjDestroy(tj);
        return ok;
    }
    if (!stbi_info_from_memory(buf, (int)len, w, h, &comp)) {
        *why = stbi_failure_reason();
        if (!*why) *why = "unreadable";
        return 0;
    }
    if (*w < 1 || *h < 1 || *w > CT_IMAGE_MAX_SIDE || *h > CT_IMAGE_MAX_SIDE) {
        *why = "larger than " STR(CT_IMAGE_MAX_SIDE) " pixels a side, or empty";
        return 0;
    }
    return 1;
}

int ct_image_decode(const char *path, int size, int channels, uint8_t *out) {
    uint8_t *buf;
    size_t len;
    int rc = ct_file_read_all(path, "an image file", CT_IMAGE_MAX_FILE, &buf, &len);
    if (rc) return rc;
    rc = ct_image_decode_mem(buf, len, path, size, channels, out);
    free(buf);
    return rc;
}

int ct_image_decode_mem(const uint8_t *buf, size_t len, const char *path, int size, int channels, uint8_t *out) {
    CT_ASSERT(size >= 1 && (channels == 1 || channels == 3));
    if (len > INT_MAX) return ct_fail(CT_EINPUT, "%s: %zu bytes, too large for an image file", path, len);
    int fmt = ct_image_format(buf, len), w = 0, h = 0, n = 0, oom = 0;
    const char *why = NULL;
    if (!ct_image_header_check(buf, len, fmt, &why)) return ct_fail(CT_EINPUT, "%s: %s", path, why);
    stbi_uc *px;
    if (fmt == CT_IMG_JPEG) {
        px = jpeg_decode(buf, len, &w, &h, &n, &why, &oom);
    } else {
        size_t clen = 0;
        uint8_t *clean = fmt == CT_IMG_PNG ? ct_png_without_empty_idat(buf, len, &clen) : NULL;
        px = stbi_load_from_memory(clean ? clean : buf, (int)(clean ? clen : len), &w, &h, &n, 0);
        free(clean);
        why = px ? NULL : stbi_failure_reason();
        oom = why && !strcmp(why, "outofmem");
    }
    if (!px) {
        if (oom) return ct_fail(CT_ENOMEM, "%s: out of memory decoding it", path);
        return ct_fail(CT_EINPUT, "%s: %s", path, why ? why : "cannot decode");
    }
    if (w < 1 || h < 1) { /* stb_image_resize asserts on an empty image */
        free(px);
        return ct_fail(CT_EINPUT, "%s: a %dx%d image; expected at least 1x1", path, w, h);
    }
    CT_ASSERT(n >= 1 && n <= 4);
    size_t npx = (size_t)w * (size_t)h;
    stbi_uc *img = px;
    if (n != channels) {
        img = malloc(npx * (size_t)channels);
        if (!img) {
            free(px); /* stb allocates with malloc (STBI_MALLOC), as jpeg_decode does */
            return ct_fail(CT_ENOMEM, "%s: out of memory converting a %dx%d image", path, w, h);
        }
        for (size_t i = 0; i < npx; i++) {
            const stbi_uc *p = px + i * (size_t)n;
            int r, g, b, a = 255;
            if (n <= 2) r = g = b = p[0];
            else r = p[0], g = p[1], b = p[2];
            if (n == 2) a = p[1];
            if (n == 4) a = p[3];
            if (a != 255) { /* composite onto white */
                r = (r * a + 255 * (255 - a) + 127) / 255;
                g = (g * a + 255 * (255 - a) + 127) / 255;
                b = (b * a + 255 * (255 - a) + 127) / 255;
            }
            if (channels == 1) {
                img[i] = (stbi_uc)(n <= 2 ? r : (r * 77 + g * 150 + b * 29) >> 8);
            } else {
                img[3 * i] = (stbi_uc)r;
                img[3 * i + 1] = (stbi_uc)g;
                img[3 * i + 2] = (stbi_uc)b;
            }
        }
        free(px); /* stb allocates with malloc (STBI_MALLOC), as jpeg_decode does */
    }
    int rc = 0;
    if (w == size && h == size) {
        memcpy(out, img, npx * (size_t)channels);
    } else if (!stbir_resize_uint8(img, w, h, 0, out, size, size, 0, channels)) {
        rc = ct_fail(CT_ENOMEM, "%s: out of memory resizing %dx%d to %dx%d", path, w, h, size, size);
    }
    if (img == px) free(px); /* stb allocates with malloc (STBI_MALLOC), as jpeg_decode does */
    else free(img);
    return rc;
}

/* ---- the ct_source -------------------------------------------------------- */

int ct_imgdir_source_init(ct_source *src, ct_imgdir_src_ctx *ctx, const ct_imgdir *d, int split, int size,
                          int channels) {
    memset(ctx, 0, sizeof *ctx);
    memset(src, 0, sizeof *src);
    if (split != CT_SPLIT_TRAIN && split != CT_SPLIT_TEST)
        return ct_fail(CT_EINPUT, "image split %d: expected train (0) or test (1)", split);
    if (size < 1 || size > CT_IMAGE_MAX_SIDE)
        return ct_fail(CT_EINPUT, "image size %d: expected 1..%d", size, CT_IMAGE_MAX_SIDE);
    if (channels != 1 && channels != 3) return ct_fail(CT_EINPUT, "%d channels: expected 1 or 3", channels);
    const ct_imgdir_split *sp = &d->split[split];
    if (sp->n == 0)
        return ct_fail(CT_EINPUT, "%s: the %s split has no images", d->dir ? d->dir : "image folder",
                       split == CT_SPLIT_TRAIN ? "train" : "test");
    ctx->d = d;
    ctx->split = split;
    ctx->size = size;
    ctx->channels = channels;
    ctx->bad = ct_xcalloc((size_t)sp->n, sizeof *ctx->bad);
    atomic_init(&ctx->failed, 0);
    ct_source_init(src, sp->n, size, size, channels, d->n_classes, ctx, ct_imgdir_source_load);
    return 0;
}

void ct_imgdir_source_free(ct_imgdir_src_ctx *ctx) {
    free((void *)ctx->bad);
    memset(ctx, 0, sizeof *ctx);
}

int ct_imgdir_source_load(void *vctx, int index, float *dst, int32_t *label, ct_rng *rng) {
    (void)rng;
    ct_imgdir_src_ctx *c = vctx;
    const ct_imgdir_split *sp = &c->d->split[c->split];
    CT_ASSERT(index >= 0 && index < sp->n);
    size_t m = (size_t)c->size * (size_t)c->size * (size_t)c->channels;
    uint8_t *buf = malloc(m);
    if (!buf) return ct_fail(CT_ENOMEM, "out of memory decoding an image");
    int rc = 0, done = 0;
    for (int k = 0; k < sp->n && !done; k++) {
        int i = (int)(((long)index + k) % sp->n);
        if (!c->strict && atomic_load_explicit(&c->bad[i], memory_order_relaxed)) continue;
        rc = ct_image_decode(sp->paths[i], c->size, c->channels, buf);
        if (rc == 0) {
            for (size_t j = 0; j < m; j++) dst[j] = (float)buf[j] * (1.0f / 255.0f);
            *label = sp->labels[i];
            done = 1;
        } else if (rc != CT_EINPUT || c->strict) {
            break;
        } else if (!atomic_exchange(&c->bad[i], 1)) {
            fprintf(stderr, "cltrain: skipping %s\n", ct_last_error());
            atomic_fetch_add(&c->failed, 1);
        }
    }
    free(buf);
    if (done) return 0;
    if (rc == 0 || (rc == CT_EINPUT && !c->strict))
        rc = ct_fail(CT_EINPUT, "%s: none of the %d images of the %s split decodes; check the files", c->d->dir,
                     sp->n, c->split == CT_SPLIT_TRAIN ? "train" : "test");
    return rc;
}
