/* data/registry.c: the table of data sets (datasets.h) and their open
 * functions: MNIST and Fashion-MNIST (idx.c) read into memory, CIFAR-10 and
 * CIFAR-100 (cifar.c) into memory with an augmenting source over each split,
 * image folders, shards and TFRecord files (imageset.c) read by the
 * producers through an augmenting source, NumPy arrays (arrays.c) mapped
 * and read by the producers the same way. The lines each prints once open
 * are the ones `cltrain NAME` has always printed.
 * Tested end to end by tests/cli.sh, tests/checkpoint.sh, tests/cifar.sh,
 * tests/images.sh, tests/tfrecord.sh and tests/arrays.sh. */
#include "cltrain/datasets.h"
#include <pthread.h>
#include <string.h>
#include <sys/stat.h>

static int cifar_open(ct_data *d, const ct_data_opts *o);

int ct_data_plain_train(const ct_data *d, ct_source *src, ct_plain_ctx *ctx, const ct_source **out) {
    *out = NULL;
    if (!d->src[0]) return 0; /* bytes * scale + shift from d->train, as training uploads them */
    if (d->def->open == cifar_open) { /* the training images through the test split's preparation */
        ctx->cifar = (ct_cifar_ctx){.ds = d->train, .aug = d->cctx[1].aug};
        ct_cifar_source_init(src, &ctx->cifar);
        *out = src;
        return 0;
    }
    if (!d->def->from_files || !d->actx.inner) return CT_EINPUT;
    /* image sets and arrays: the source the training augmentation wraps, prepared as the test split is */
    if (!d->prep.c) {
        *out = d->actx.inner;
        return 0;
    }
    ct_augment none = ct_augment_images(CT_AUG_NONE, d->train->h);
    none.prep = d->prep;
    int rc = ct_augsrc_init(src, &ctx->aug, d->actx.inner, &none);
    if (!rc) *out = src;
    return rc;
}

void ct_data_opts_defaults(ct_data_opts *o) {
    memset(o, 0, sizeof *o);
    o->seed = 1;
    o->val_split = 0.1;
}

static const char *path_or_default(const ct_data *d, const char *path) {
    return path ? path : d->def->default_path;
}

/* --- MNIST, Fashion-MNIST: both splits in memory, bytes / 255 --- */

static int mnist_open(ct_data *d, const ct_data_opts *o) {
    int kind = d->def->variant;
    d->path = path_or_default(d, o->path);
    d->train = &d->ds[0];
    d->test = &d->ds[1];
    return ct_mnist_load(&d->ds[0], &d->ds[1], d->path, kind, kind == CT_MNIST); /* Fashion-MNIST: Debian's copy, offline */
}

static int mnist_reopen(ct_data *d, const ct_ckpt_data *rec, const char *path, uint64_t seed, int h, int c) {
    (void)rec, (void)seed, (void)h, (void)c;
    d->test = &d->ds[1];
    return ct_mnist_load(NULL, &d->ds[1], path, d->def->variant, 0);
}

static void mnist_describe(const ct_data *d, FILE *out) {
    fprintf(out, "%s: %d training and %d test images from %s (%.2f s)\n", d->name, d->train->n, d->test->n, d->path,
            d->load_s);
}

/* --translate and --flip on top of a set's augmentation, for h x w images */
static int aug_options(ct_augment *a, const ct_data_opts *o, int h, int w) {
    int rc = 0;
    if (o->translate > 0) {
        a->pad = o->translate;
        a->reflect = 1;
    }
    if (o->flip && (rc = ct_augment_parse_flip(a, o->flip))) return rc;
    return ct_augment_check_size(a, h, w);
}

/* --- CIFAR-10, CIFAR-100: in memory, augmented (training) and standardised (both) --- */

static int cifar_aug(const ct_data_opts *o, ct_augment *a) {
    *a = ct_augment_default(CT_AUG_FULL);
    a->cutout = o->cutout;
    int rc = ct_augment_parse(a, o->augment ? o->augment : "full");
    if (!rc) rc = aug_options(a, o, 32, 32);
    return rc ? rc : ct_augment_check(a);
}

static int cifar_check(const ct_data_opts *o) {
    ct_augment a;
    return cifar_aug(o, &a);
}

/* the sources over ds[k] for k in [k0, 2) */
static void cifar_sources(ct_data *d, int k0) {
    for (int k = k0; k < 2; k++) {
        d->cctx[k].ds = &d->ds[k];
        ct_cifar_source_init(&d->own[k], &d->cctx[k]);
        d->src[k] = &d->own[k];
    }
}

static int cifar_open(ct_data *d, const ct_data_opts *o) {
    int rc = cifar_aug(o, &d->cctx[0].aug), kind = d->def->variant;
    if (rc) return rc;
    d->cctx[1].aug = ct_augment_default(CT_AUG_NONE);
    d->augment = o->augment ? o->augment : "full";
    d->path = path_or_default(d, o->path);
    if (kind == 100 && o->coarse) d->name = "cifar100-coarse"; /* the checkpoint tells fine from coarse by its classes */
    d->train = &d->ds[0];
    d->test = &d->ds[1];
    if ((rc = ct_cifar_load(&d->ds[0], &d->ds[1], d->path, kind, !o->coarse, 1))) return rc;
    cifar_sources(d, 0);
    return 0;
}

static int cifar_reopen(ct_data *d, const ct_ckpt_data *rec, const char *path, uint64_t seed, int h, int c) {
    (void)seed, (void)h, (void)c;
    int kind = d->def->variant;
    if (kind == 100 && rec->classes == 20) d->name = "cifar100-coarse";
    d->cctx[1].aug = ct_augment_default(CT_AUG_NONE);
    d->test = &d->ds[1];
    int rc = ct_cifar_load(NULL, &d->ds[1], path, kind, rec->classes != 20, 0);
    if (!rc) cifar_sources(d, 1);
    return rc;
}

static void cifar_describe(const ct_data *d, FILE *out) {
    const ct_augment *a = &d->cctx[0].aug;
    fprintf(out, "%s: %d training and %d test images from %s (%.2f s), augmentation %s%s%.0d%s\n", d->name, d->train->n,
            d->test->n, d->path, d->load_s, d->augment, a->reflect ? ", reflect translation by up to " : "",
            a->reflect ? a->pad : 0, a->alternate ? ", alternating flips" : "");
}

/* --- image folders, shards, TFRecord: read by the producers --- */

static int images_open(ct_data *d, const ct_data_opts *o) {
    const ct_tfr_files *tf = o->tfr;
    ct_imageset *s = &d->img;
    int rc = tf ? ct_imageset_open_tfr(s, tf, o->size, o->channels, tf->n_test ? 0 : o->val_split, o->seed)
                : ct_imageset_open(s, o->path, o->size, o->channels, o->val_split, o->seed, o->strict, 1);
    if (rc) return rc;
    if (o->val_split_set && o->val_split > 0 && (s->dir.folders || s->shards || (tf && tf->n_test)))
        return ct_fail(CT_EINPUT, "--val-split %g: %s %s, so nothing is held out; leave --val-split out", o->val_split, o->path,
                       s->dir.folders ? "has train/ and test/ folders, which are the split"
                       : s->shards    ? "holds shards, split when `cltrain pack` wrote them"
                                      : "has its test split from --test");
    if (!s->ds[0].n) return ct_fail(CT_EINPUT, "%s: no training images", o->path);
    d->path = o->path;
    d->split = s->shards || (tf && tf->n_test) ? 0.0 : o->val_split;
    d->class_names = s->ds[0].class_names;
    d->train = &s->ds[0];
    d->test = s->ds[1].n ? &s->ds[1] : NULL;
    /* augmentation in the producers, on the decoded (or read) image */
    d->aug = ct_augment_images(CT_AUG_SHIFT, s->ds[0].h); /* a flip can change a digit's or glyph's class */
    d->aug.cutout = o->cutout;
    if ((o->augment && (rc = ct_augment_parse(&d->aug, o->augment))) ||
        (rc = aug_options(&d->aug, o, s->ds[0].h, s->ds[0].w)) ||
        (rc = ct_augsrc_init(&d->own[0], &d->actx, &s->src[0], &d->aug)))
        return rc;
    d->src[0] = &d->own[0];
    d->src[1] = s->ds[1].n ? &s->src[1] : NULL;
    return 0;
}

/* the held-out split of the folder (same seed and share as training), or the test shards */
static int images_reopen(ct_data *d, const ct_ckpt_data *rec, const char *path, uint64_t seed, int h, int c) {
    ct_imageset *s = &d->img;
    struct stat st;
    if (!stat(path, &st) && S_ISREG(st.st_mode))
        return ct_fail(CT_EINPUT, "%s: trained from TFRecord files, which eval cannot reopen: the checkpoint records only "
                       "this first file, not the test files, feature keys or split; `cltrain pack` them into shards and "
                       "train from those to evaluate with eval", path);
    int rc = ct_imageset_open(s, path, h, c, rec->split, seed, 0, 0);
    if (!rc && !s->ds[1].n)
        rc = ct_fail(CT_EINPUT, "%s: no test images (no test shards, or no held-out split); nothing to evaluate", path);
    d->test = &s->ds[1];
    d->src[1] = &s->src[1];
    return rc;
}

static void images_describe(const ct_data *d, FILE *out) {
    const ct_imageset *s = &d->img;
    int n_train = d->o.tfr ? d->o.tfr->n_train : 0, n_test = d->o.tfr ? d->o.tfr->n_test : 0;
    fprintf(out, "images: %d training and %d test images, %d classes, from %s (%s %dx%dx%d; scanned in %.2f s)",
            s->ds[0].n, s->ds[1].n, s->ds[0].n_classes, d->path,
            s->shards ? "record shards of" : s->tfrecord ? "TFRecord, decoded to" : "decoded by the producers to",
            s->ds[0].h, s->ds[0].w, s->ds[0].c, d->load_s);
    if (s->tfrecord && n_train > 1) fprintf(out, " and %d more file%s", n_train + n_test - 1, n_train + n_test > 2 ? "s" : "");
    if (!s->shards && !s->dir.folders && !n_test) fprintf(out, ", %.0f%% of each class held out", 100 * d->o.val_split);
    if (s->dir.skipped) fprintf(out, ", %d unreadable file%s skipped", s->dir.skipped, s->dir.skipped == 1 ? "" : "s");
    static const char *const levels[] = {"none", "basic", "full", "shift"};
    const ct_augment *a = &d->aug;
    fprintf(out, "; augmentation %s%s%s\n", levels[a->level],
            a->level == CT_AUG_NONE    ? ""
            : a->level == CT_AUG_SHIFT ? " (padded crop, no flip"
            : a->resized_crop          ? " (random-resized crop, flip"
                                       : " (padded crop, flip",
            a->level == CT_AUG_NONE ? "" : a->level == CT_AUG_FULL ? ", brightness, contrast)" : ")");
}

static void images_report(const ct_data *d, FILE *out) {
    const ct_imageset *s = &d->img;
    int failed = s->ctx[0].failed + s->ctx[1].failed, skipped = s->dir.skipped;
    if (failed || skipped)
        fprintf(out, "skipped %d unreadable image file%s in all (%d at the scan, %d that failed to decode; named above)\n",
                skipped + failed, skipped + failed == 1 ? "" : "s", skipped, failed);
}

static void images_close(ct_data *d) { ct_imageset_close(&d->img); }

/* --- NumPy arrays: mapped, read by the producers, augmented as image sets (default none) --- */

static int arrays_open(ct_data *d, const ct_data_opts *o) {
    ct_arrays *a = &d->arr;
    int rc = ct_arrays_open(a, o->path, o->val_split, o->seed, 1, 0);
    if (rc) return rc;
    if ((o->size && (o->size != a->h || o->size != a->w)) || (o->channels && o->channels != a->c))
        return ct_fail(CT_EINPUT, "%s: the arrays hold %dx%dx%d images; drop --size/--channels (arrays are not resized)",
                       a->spec.files[0], a->h, a->w, a->c);
    d->path = o->path;
    d->split = a->held_out ? o->val_split : 0.0;
    d->train = &a->ds[0];
    d->test = a->ds[1].n ? &a->ds[1] : NULL;
    /* no augmentation unless asked for: arrays are often not photographs (digits must not flip) */
    d->augment = o->augment ? o->augment : "none";
    d->aug = ct_augment_images(CT_AUG_NONE, a->h);
    d->aug.cutout = o->cutout;
    if ((rc = ct_augment_parse(&d->aug, d->augment)) || (rc = aug_options(&d->aug, o, a->h, a->w)) ||
        (rc = ct_augsrc_init(&d->own[0], &d->actx, &a->src[0], &d->aug)))
        return rc;
    d->src[0] = &d->own[0];
    d->src[1] = d->test ? &a->src[1] : NULL;
    return 0;
}

static int arrays_reopen(ct_data *d, const ct_ckpt_data *rec, const char *path, uint64_t seed, int h, int c) {
    (void)h, (void)c;
    ct_arrays *a = &d->arr;
    int rc = ct_arrays_open(a, path, rec->split, seed, 0, rec->classes);
    if (!rc && !a->ds[1].n) rc = ct_fail(CT_EINPUT, "%s: no test images (no test arrays, and nothing held out); nothing to evaluate", path);
    if (rc) return rc;
    d->test = &a->ds[1];
    d->src[1] = &a->src[1];
    return 0;
}

static void arrays_describe(const ct_data *d, FILE *out) {
    const ct_arrays *a = &d->arr;
    const ct_array *x = &a->x[0];
    static const char *const lay[] = {"", "NHWC", "NCHW", "NHW"};
    fprintf(out, "arrays: %d training and %d test images, %d classes, from %s (%s %s %dx%dx%d", a->ds[0].n, a->ds[1].n,
            a->n_classes, d->path, ct_array_dtype(x), lay[a->layout], a->h, a->w, a->c);
    if (a->held_out) fprintf(out, ", %.0f%% of each class held out", 100 * d->o.val_split);
    fprintf(out, "; %.2f s); augmentation %s\n", d->load_s, d->augment);
}

static void arrays_close(ct_data *d) { ct_arrays_close(&d->arr); }

const ct_dataset_def ct_datasets[] = {
    {.name = "mnist", .args = "", .help = "MNIST digits (datasets/mnist, downloaded and MD5-checked if missing)",
     .takes = CT_DS_PATH | CT_DS_RESIDENT, .kind = "mnist", .model = "mnist-cnn", .default_path = "datasets/mnist", .variant = CT_MNIST,
     .names_classes = 1, .open = mnist_open, .reopen = mnist_reopen, .describe = mnist_describe},
    {.name = "fashion-mnist", .args = "", .help = "Fashion-MNIST (Debian's dataset-fashion-mnist; works offline)",
     .takes = CT_DS_PATH | CT_DS_RESIDENT, .kind = "fashion-mnist", .model = "mnist-cnn", .default_path = "/usr/share/datasets/fashion-mnist",
     .variant = CT_FASHION_MNIST, .names_classes = 1, .open = mnist_open, .reopen = mnist_reopen, .describe = mnist_describe},
    {.name = "cifar10", .args = "", .help = "CIFAR-10 binary batches (datasets/cifar10, downloaded if missing), augmented",
     .takes = CT_DS_PATH | CT_DS_AUGMENT, .kind = "cifar10", .model = "cifar-fast", .default_path = "datasets/cifar10", .variant = 10,
     .standardize = 1, .names_classes = 1, .check = cifar_check, .open = cifar_open, .reopen = cifar_reopen,
     .describe = cifar_describe},
    {.name = "cifar100", .args = "", .help = "CIFAR-100 binary batches (datasets/cifar100, downloaded if missing), augmented",
     .takes = CT_DS_PATH | CT_DS_AUGMENT | CT_DS_LABELS, .kind = "cifar100", .model = "cifar-fast", .default_path = "datasets/cifar100", .variant = 100,
     .fit_model = 1, .standardize = 1, .names_classes = 1, .check = cifar_check, .open = cifar_open, .reopen = cifar_reopen,
     .describe = cifar_describe},
    {.name = "images", .args = "DIR|FILE.tfrecord...", .help = "an image folder (DIR/CLASS/*.png|jpg|...), shards from `pack`, or TFRecord files",
     .takes = CT_DS_AUGMENT | CT_DS_RESIZE | CT_DS_SPLIT | CT_DS_IMAGES, .kind = "images", .model = "vgg-small",
     .from_files = CT_FILES_IMAGES, .open = images_open, .reopen = images_reopen, .describe = images_describe,
     .report = images_report, .close = images_close},
    {.name = "arrays", .args = "FILE.npz|X.npy Y.npy", .help = "NumPy arrays (np.savez's x_train, y_train, x_test, y_test; or .npy files)",
     .takes = CT_DS_AUGMENT | CT_DS_SPLIT | CT_DS_ARRAYS, .kind = "arrays", .model = "mnist-cnn",
     .from_files = CT_FILES_ARRAYS, .names_classes = 1, .open = arrays_open, .reopen = arrays_reopen,
     .describe = arrays_describe, .close = arrays_close},
};
const int ct_n_datasets = (int)(sizeof ct_datasets / sizeof *ct_datasets);

const ct_dataset_def *ct_dataset_find(const char *name) {
    for (int i = 0; i < ct_n_datasets; i++)
        if (!strcmp(ct_datasets[i].name, name)) return &ct_datasets[i];
    return NULL;
}

const ct_dataset_def *ct_dataset_find_kind(const char *kind) {
    for (int i = 0; i < ct_n_datasets; i++)
        if (!strcmp(ct_datasets[i].kind, kind)) return &ct_datasets[i];
    return NULL;
}

static char kind_list[256];
static void make_kind_list(void) {
    for (int i = 0; i < ct_n_datasets; i++)
        snprintf(kind_list + strlen(kind_list), sizeof kind_list - strlen(kind_list), "%s%s", i ? ", " : "",
                 ct_datasets[i].kind);
}

const char *ct_dataset_list(void) {
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, make_kind_list);
    return kind_list;
}

int ct_data_open(ct_data *d, const ct_dataset_def *def, const ct_data_opts *o) {
    memset(d, 0, sizeof *d);
    d->def = def;
    d->name = def->name;
    d->o = *o;
    double t0 = ct_now();
    int rc = def->open(d, o);
    d->load_s = ct_now() - t0;
    if (rc) ct_data_close(d);
    return rc;
}

int ct_data_reopen(ct_data *d, const ct_dataset_def *def, const ct_ckpt_data *rec, const char *path, uint64_t seed,
                   int h, int c) {
    memset(d, 0, sizeof *d);
    d->def = def;
    d->name = def->name;
    d->path = path;
    ct_data_opts_defaults(&d->o);
    int rc = def->reopen(d, rec, path, seed, h, c);
    if (rc) ct_data_close(d);
    return rc;
}

int ct_data_prepare(ct_data *d, const ct_prep *p, float *scale, float *shift) {
    if (!p->c) return 0;
    const ct_dataset *ds = d->train ? d->train : d->test;
    CT_ASSERT(ds);
    if (p->c != ds->c)
        return ct_fail(CT_EINPUT, "%s: the model's mean= and std= name %d channel%s, but these images have %d; give one value "
                       "per channel in its [net] section", d->path ? d->path : d->name, p->c, p->c == 1 ? "" : "s", ds->c);
    d->prep = *p;
    if (!d->def->from_files && !d->src[0] && !d->src[1]) {
        /* in memory, x * scale + shift on the device or in the loop: (x / 255 - mean) / std is that map */
        *scale = (float)(1.0 / (255.0 * p->std[0]));
        *shift = (float)(-(double)p->mean[0] / p->std[0]);
        return 0;
    }
    if (!d->def->from_files) { /* CIFAR: the augmenting sources of both splits, standardisation replaced */
        for (int k = 0; k < 2; k++) d->cctx[k].aug.prep = *p;
        return 0;
    }
    /* image sets and arrays: the training split's augmenting source, and one of no augmentation over the test split */
    d->aug.prep = *p;
    d->actx.aug.prep = *p;
    if (d->src[1]) {
        ct_augment none = ct_augment_images(CT_AUG_NONE, ds->h);
        none.prep = *p;
        int rc = ct_augsrc_init(&d->own[1], &d->actx1, d->src[1], &none);
        if (rc) return rc;
        d->src[1] = &d->own[1];
    }
    return 0;
}

void ct_data_close(ct_data *d) {
    ct_dataset_free(&d->ds[0]);
    ct_dataset_free(&d->ds[1]);
    if (d->def && d->def->close) d->def->close(d);
    memset(d, 0, sizeof *d);
}
