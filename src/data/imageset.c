/* data/imageset.c: an image data set from a folder of class folders (decoded
 * by the producers), from the record shards `cltrain pack` wrote, or from
 * TFRecord files: the shells (n, shape, classes) of both splits and their
 * sources. Which one a folder is: train-00000.shard or test-00000.shard in
 * it makes it shards. Depends on images.h, shard.h, tfrecord.h.
 * Tested by tests/images.sh, tests/pack.sh and tests/tfrecord.sh. */
#include "cltrain/datasets.h"
#include <errno.h>
#include <string.h>
#include <sys/stat.h>

static int is_file(const char *dir, const char *name) {
    char path[4200];
    struct stat st;
    snprintf(path, sizeof path, "%s/%s", dir, name);
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

void ct_imageset_close(ct_imageset *s) {
    for (int k = 0; k < 2; k++) {
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
    }
    if (rc) ct_imageset_close(s);
    return rc;
}
