/* data/imageset.c: an image data set from a folder of class folders (decoded
 * by the producers), from the record shards `cltrain pack` wrote, or from
 * TFRecord files: the shells (n, shape, classes) of both splits and their
 * sources. Which one a folder is: train-00000.shard or test-00000.shard in
 * it makes it shards. Depends on images.h, shard.h, tfrecord.h.
 * Tested by tests/images.sh, tests/pack.sh and tests/tfrecord.sh. */
#include "cltrain/datasets.h"
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static int is_file(const char *dir, const char *name) {
    char path[4200];
    struct stat st;
    snprintf(path, sizeof path, "%s/%s", dir, name);
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

/* ---- spread order (datasets.h) ---- */

typedef struct { double key; int cls, index; } spread_key;

static int by_key(const void *a, const void *b) {
    const spread_key *x = a, *y = b;
    if (x->key != y->key) return x->key < y->key ? -1 : 1;
    return x->cls - y->cls;
}

static int spread_load(void *vctx, int index, float *dst, int32_t *label, ct_rng *rng) {
    const ct_spread_ctx *c = vctx;
    return c->base.load(c->base.ctx, c->order[index], dst, label, rng);
}

/* Serve split k's source in spread order, from the labels of its n samples. */
static void spread(ct_imageset *s, int k, const int32_t *labels, int n_classes, uint64_t seed) {
    ct_spread_ctx *c = &s->spread[k];
    int n = s->src[k].n;
    c->base = s->src[k];
    c->order = ct_xmalloc(((size_t)n + 1) * sizeof *c->order);
    int *count = ct_xcalloc((size_t)n_classes + 1, sizeof *count), *at = ct_xcalloc((size_t)n_classes + 1, sizeof *at);
    for (int i = 0; i < n; i++) count[labels[i]]++;
    for (int cl = 1; cl < n_classes; cl++) at[cl] = at[cl - 1] + count[cl - 1];
    /* the samples grouped by class (stable), then each class shuffled from (seed, class) */
    int *byc = ct_xmalloc(((size_t)n + 1) * sizeof *byc);
    for (int i = 0; i < n; i++) byc[at[labels[i]]++] = i;
    spread_key *key = ct_xmalloc(((size_t)n + 1) * sizeof *key);
    /* ties (classes of equal size) go in a seeded order of the classes, so a small N favours none */
    int *rank = ct_xmalloc(((size_t)n_classes + 1) * sizeof *rank);
    ct_rng rr = ct_rng_make(seed, 0x5b7ead10u + (uint64_t)k, 0);
    for (int cl = 0; cl < n_classes; cl++) rank[cl] = cl;
    for (int i = n_classes - 1; i > 0; i--) {
        int j = (int)ct_rng_below(&rr, (uint32_t)i + 1), t = rank[i];
        rank[i] = rank[j];
        rank[j] = t;
    }
    for (int cl = 0, first = 0; cl < n_classes; first += count[cl++]) {
        int *g = byc + first;
        ct_rng r = ct_rng_make(seed, 0x5b7ead00u + (uint64_t)k, (uint64_t)cl);
        for (int i = count[cl] - 1; i > 0; i--) {
            int j = (int)ct_rng_below(&r, (uint32_t)i + 1), t = g[i];
            g[i] = g[j];
            g[j] = t;
        }
        for (int j = 0; j < count[cl]; j++) key[first + j] = (spread_key){(j + 0.5) / count[cl], rank[cl], g[j]};
    }
    qsort(key, (size_t)n, sizeof *key, by_key);
    for (int i = 0; i < n; i++) c->order[i] = key[i].index;
    free(key);
    free(rank);
    free(byc);
    free(count);
    free(at);
    ct_source_init(&s->src[k], n, c->base.h, c->base.w, c->base.c, c->base.n_classes, c, spread_load);
}

void ct_imageset_close(ct_imageset *s) {
    for (int k = 0; k < 2; k++) {
        free(s->spread[k].order);
        ct_imgdir_source_free(&s->ctx[k]);
        ct_shardset_close(&s->set[k]);
    }
    ct_imgdir_free(&s->dir);
    ct_tfr_free(&s->tfr);
    memset(s, 0, sizeof *s);
}

int ct_imageset_open(ct_imageset *s, const char *path, int size, int channels, double val_split, uint64_t seed,
                     int strict, int need_train) {
    memset(s, 0, sizeof *s);
    int rc = 0;
    struct stat st;
    if (stat(path, &st) || !S_ISDIR(st.st_mode))
        return ct_fail(CT_EINPUT, "%s: %s; give a folder with one sub-folder of images per class, or the output of cltrain pack",
                       path, errno == ENOENT ? "no such folder" : "not a folder");
    s->shards = is_file(path, "train-00000.shard") || is_file(path, "test-00000.shard");
    if (s->shards) {
        const char *names[2] = {"train", "test"};
        for (int k = 0; k < 2 && !rc; k++) {
            char first[32];
            snprintf(first, sizeof first, "%s-00000.shard", names[k]);
            if (!is_file(path, first)) {
                if (k == 0 && need_train)
                    rc = ct_fail(CT_EINPUT, "%s: no train-00000.shard here (only test shards); pack the training images too", path);
                continue;
            }
            if ((rc = ct_shardset_open(&s->set[k], path, names[k]))) break;
            ct_shardset *t = &s->set[k];
            if ((size && (size != t->height || size != t->width)) || (channels && channels != t->channels)) {
                rc = ct_fail(CT_EINPUT, "%s: the shards hold %dx%dx%d images, not %dx%dx%d; drop --size/--channels or re-run "
                             "cltrain pack with them", path, t->height, t->width, t->channels, size ? size : t->height,
                             size ? size : t->width, channels ? channels : t->channels);
                break;
            }
            if ((rc = ct_shardset_source_init(&s->src[k], t))) break;
            s->ds[k] = (ct_dataset){.n = (int)t->n, .h = t->height, .w = t->width, .c = t->channels, .n_classes = t->n_classes,
                                    .class_names = t->class_names};
            int32_t *labels = ct_xmalloc(((size_t)t->n + 1) * sizeof *labels);
            if (!(rc = ct_shardset_labels(t, labels))) spread(s, k, labels, t->n_classes, seed);
            free(labels);
            if (rc) break;
        }
        if (!rc && s->set[0].n && s->set[1].n &&
            (s->set[0].n_classes != s->set[1].n_classes || s->set[0].channels != s->set[1].channels ||
             s->set[0].height != s->set[1].height))
            rc = ct_fail(CT_EINPUT, "%s: the train and test shards come from different packs (shape or classes differ); re-run cltrain pack", path);
    } else {
        if (!size) size = 64;
        if (!channels) channels = 3;
        if ((rc = ct_imgdir_scan(&s->dir, path, val_split, seed, strict))) return rc;
        for (int k = 0; k < 2 && !rc; k++) {
            if (!s->dir.split[k].n) continue;
            if ((rc = ct_imgdir_source_init(&s->src[k], &s->ctx[k], &s->dir, k, size, channels))) break;
            s->ctx[k].strict = strict;
            s->ds[k] = (ct_dataset){.n = s->dir.split[k].n, .h = size, .w = size, .c = channels, .n_classes = s->dir.n_classes,
                                    .class_names = s->dir.class_names};
            spread(s, k, s->dir.split[k].labels, s->dir.n_classes, seed);
        }
    }
    if (rc) ct_imageset_close(s);
    return rc;
}

void ct_tfr_files_free(ct_tfr_files *t) {
    for (int i = 0; i < t->n_train; i++) free(t->train[i]);
    for (int i = 0; i < t->n_test; i++) free(t->test[i]);
    free(t->train);
    free(t->test);
    memset(t, 0, sizeof *t);
}

int ct_imageset_open_tfr(ct_imageset *s, const ct_tfr_files *t, int size, int channels, double val_split, uint64_t seed) {
    memset(s, 0, sizeof *s);
    s->tfrecord = 1;
    int rc = ct_tfr_open(&s->tfr, (const char *const *)t->train, t->n_train, (const char *const *)t->test, t->n_test,
                         val_split, seed, &t->o);
    if (rc) return rc;
    if (t->o.raw_h > 0) {
        if ((size && size != t->o.raw_h) || (channels && channels != t->o.raw_c))
            rc = ct_fail(CT_EINPUT, "--size/--channels %dx%d: raw TFRecord images are %dx%dx%d as --tfrecord-shape says; "
                         "drop --size/--channels", size, channels, t->o.raw_h, t->o.raw_w, t->o.raw_c);
        size = t->o.raw_h;
        channels = t->o.raw_c;
    }
    if (!size) size = 64;
    if (!channels) channels = 3;
    for (int k = 0; k < 2 && !rc; k++) {
        if (!s->tfr.n[k]) continue;
        if ((rc = ct_tfr_source_init(&s->src[k], &s->tctx[k], &s->tfr, k, size, channels))) break;
        s->ds[k] = (ct_dataset){.n = s->tfr.n[k], .h = size, .w = size, .c = channels, .n_classes = s->tfr.n_classes,
                                .class_names = s->tfr.class_names};
        int32_t *labels = ct_xmalloc(((size_t)s->tfr.n[k] + 1) * sizeof *labels);
        for (int i = 0; i < s->tfr.n[k]; i++) labels[i] = s->tfr.rec[k][i].label;
        spread(s, k, labels, s->tfr.n_classes, seed);
        free(labels);
    }
    if (rc) ct_imageset_close(s);
    return rc;
}
