/* cli/images.c: `cltrain images DIR` (train on an image folder or on shards
 * from `cltrain pack`), `cltrain predict CHECKPOINT IMG...`, and the image
 * data set `cltrain eval` and `cltrain bench pipeline` open.
 * Tested by tests/images.sh. */
#include "cli.h"
#include "cltrain/augment.h"
#include "cltrain/checkpoint.h"
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <string.h>
#include <sys/stat.h>

static int is_file(const char *dir, const char *name) {
    char path[4200];
    struct stat st;
    snprintf(path, sizeof path, "%s/%s", dir, name);
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

void cli_imageset_close(cli_imageset *s) {
    for (int k = 0; k < 2; k++) {
        ct_imgdir_source_free(&s->ctx[k]);
        ct_shardset_close(&s->set[k]);
    }
    ct_imgdir_free(&s->dir);
    ct_tfr_free(&s->tfr);
    memset(s, 0, sizeof *s);
}

int cli_imageset_open(cli_imageset *s, const char *path, int size, int channels, double val_split, uint64_t seed,
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
    if (rc) cli_imageset_close(s);
    return rc;
}

int cmd_images(int argc, char **argv) {
    ct_train_opts o;
    ct_train_defaults(&o);
    o.model = "vgg-small";
    o.fit_model = 1;
    const char *data = NULL;
    cli_tfr tf;
    int rc = cli_tfr_args(&argc, argv, &tf), nf = rc ? 0 : cli_tfr_files(argc, argv, &tf);
    if (!rc && nf < 0) rc = nf;
    if (!rc && !tf.n_train && (argc < 2 || argv[1][0] == '-'))
        rc = ct_fail(CT_EINPUT, "images needs a folder or TFRecord files: cltrain images DIR|FILE.tfrecord... [--size S] [options]");
    if (!rc && !tf.n_train && tf.given) rc = ct_fail(CT_EINPUT, "%s: a folder; --tfrecord-*, --train and --test are for TFRecord files", argv[1]);
    const char *dir = tf.n_train ? tf.train[0] : argv[1];
    if (!rc) rc = tf.n_train ? cli_parse_train(argc - nf, argv + nf, &o, &data) : cli_parse_train(argc - 1, argv + 1, &o, &data);
    if (rc) { cli_tfr_free(&tf); return cli_fail(rc); }
    if (o.resident) {
        ct_fail(CT_EINPUT, "--resident does not apply to images: they are decoded (or read from shards) by the producers");
        return cli_fail(CT_EINPUT);
    }
    if ((rc = cli_check_model(&o))) return cli_fail(rc);
    double t0 = ct_now();
    cli_imageset s;
    rc = tf.n_train ? cli_imageset_open_tfr(&s, &tf, g_size, g_channels, tf.n_test ? 0 : g_val_split, o.seed)
                    : cli_imageset_open(&s, dir, g_size, g_channels, g_val_split, o.seed, g_strict, 1);
    if (rc) { cli_tfr_free(&tf); return cli_fail(rc); }
    if (!s.ds[0].n) {
        cli_imageset_close(&s);
        ct_fail(CT_EINPUT, "%s: no training images", dir);
        return cli_fail(CT_EINPUT);
    }
    o.dataset = "images";
    o.data_split = s.shards || tf.n_test ? 0.0 : g_val_split;
    o.data_dir = dir;
    o.class_names = s.ds[0].class_names;
    /* augmentation in the producers, on the decoded (or read) image */
    ct_augment aug = ct_augment_images(CT_AUG_BASIC, s.ds[0].h);
    aug.cutout = g_cutout;
    ct_augsrc_ctx actx;
    ct_source asrc;
    if ((g_augment && (rc = ct_augment_parse(&aug, g_augment))) || (rc = ct_augsrc_init(&asrc, &actx, &s.src[0], &aug))) {
        cli_imageset_close(&s);
        return cli_fail(rc);
    }
    o.train_src = &asrc;
    o.eval_src = s.ds[1].n ? &s.src[1] : NULL;
    if (!o.quiet) {
        printf("images: %d training and %d test images, %d classes, from %s (%s %dx%dx%d; scanned in %.2f s)", s.ds[0].n,
               s.ds[1].n, s.ds[0].n_classes, dir, s.shards ? "record shards of" : s.tfrecord ? "TFRecord, decoded to" : "decoded by the producers to", s.ds[0].h,
               s.ds[0].w, s.ds[0].c, ct_now() - t0);
        if (s.tfrecord && tf.n_train > 1) printf(" and %d more file%s", tf.n_train + tf.n_test - 1, tf.n_train + tf.n_test > 2 ? "s" : "");
        if (!s.shards && !s.dir.folders && !tf.n_test) printf(", %.0f%% of each class held out", 100 * g_val_split);
        if (s.dir.skipped) printf(", %d unreadable file%s skipped", s.dir.skipped, s.dir.skipped == 1 ? "" : "s");
        static const char *const levels[] = {"none", "basic", "full"};
        printf("; augmentation %s%s%s\n", levels[aug.level],
               aug.level == CT_AUG_NONE ? "" : aug.resized_crop ? " (random-resized crop, flip" : " (padded crop, flip",
               aug.level == CT_AUG_NONE ? "" : aug.level == CT_AUG_FULL ? ", brightness, contrast)" : ")");
    }
    ct_train_result res;
    rc = ct_train(&o, &s.ds[0], s.ds[1].n ? &s.ds[1] : NULL, &res, stdout);
    int failed = s.ctx[0].failed + s.ctx[1].failed;
    if (!o.quiet && (failed || s.dir.skipped))
        printf("skipped %d unreadable image file%s in all (%d at the scan, %d that failed to decode; named above)\n",
               s.dir.skipped + failed, s.dir.skipped + failed == 1 ? "" : "s", s.dir.skipped, failed);
    cli_imageset_close(&s);
    cli_tfr_free(&tf);
    return train_exit(rc, &res);
}

/* `cltrain predict CHECKPOINT IMG... [--top K] [--device P:D]` */
int cmd_predict(int argc, char **argv) {
    if (argc < 3 || argv[1][0] == '-') {
        ct_fail(CT_EINPUT, "predict needs a checkpoint and images: cltrain predict CHECKPOINT IMG... [--top K]");
        return cli_fail(CT_EINPUT);
    }
    static const struct option opts[] = {{"top", required_argument, 0, 't'}, {"device", required_argument, 0, 'd'},
                                         {"logits", required_argument, 0, 'l'}, {"pixels", required_argument, 0, 'p'}, {0, 0, 0, 0}};
    const char *path = argv[1], *device = NULL, *logits_path = NULL, *pixels_path = NULL;
    int top = 5, opt, rc = 0;
    long l;
    /* argv[1], the checkpoint, stands where getopt expects the program name;
     * GNU getopt moves the image paths after the options */
    int ac = argc - 1;
    char **av = argv + 1;
    optind = 1;
    opterr = 0;
    while (!rc && (opt = getopt_long(ac, av, ":", opts, NULL)) != -1) {
        if (opt == 't') { if (!(rc = cli_parse_int("top", optarg, 1, 1000, &l))) top = (int)l; }
        else if (opt == 'd') device = optarg;
        else if (opt == 'l') logits_path = optarg;
        else if (opt == 'p') pixels_path = optarg;
        else if (opt == ':') rc = ct_fail(CT_EINPUT, "option %s needs a value", av[optind - 1]);
        else rc = ct_fail(CT_EINPUT, "predict: unknown option %s (predict takes --top K, --device P:D, --logits FILE, --pixels FILE)", av[optind - 1]);
    }
    if (!rc && optind >= ac) rc = ct_fail(CT_EINPUT, "predict: no images given");
    if (rc) return cli_fail(rc);
    const char **imgs = (const char **)av + optind;
    int n_img = ac - optind;
    ct_ckpt ck;
    if ((rc = ct_ckpt_load(&ck, path))) return cli_fail(rc);
    ct_model m;
    ct_cl cl;
    memset(&cl, 0, sizeof cl);
    rc = ct_model_parse(&m, ck.cfg, ck.model_name);
    if (!rc && m.n_params != ck.n_params) rc = ct_fail(CT_EINPUT, "%s: parameter count does not match its model", path);
    if (!rc && m.in_h != m.in_w) rc = ct_fail(CT_EINPUT, "%s: predict needs a model with square input, not %dx%d", path, m.in_h, m.in_w);
    if (!rc && m.in_c != 1 && m.in_c != 3) rc = ct_fail(CT_EINPUT, "%s: predict takes models of 1 or 3 channels, not %d", path, m.in_c);
    int B = n_img < 64 ? n_img : 64;
    if (!rc) rc = ct_cl_open(&cl, device);
    if (!rc) rc = ct_model_setup(&m, &cl, B, CT_GEMM_NATIVE);
    int bad = 0;
    /* --logits / --pixels: float32 logits and the uint8 HWC input of each image read, in order */
    FILE *flog = NULL, *fpix = NULL;
    if (!rc && logits_path && !(flog = fopen(logits_path, "wb"))) rc = ct_fail(CT_EIO, "--logits %s: %s", logits_path, strerror(errno));
    if (!rc && pixels_path && !(fpix = fopen(pixels_path, "wb"))) rc = ct_fail(CT_EIO, "--pixels %s: %s", pixels_path, strerror(errno));
    if (!rc) {
        ct_model_set_params(&m, ck.params);
        m.training = 0;
        /* the same preparation as training: x / 255, or per-image standardisation for CIFAR models */
        int standardize = !strncmp(ck.data.kind, "cifar", 5);
        size_t sz = (size_t)m.in_h * m.in_w * m.in_c;
        uint8_t *u8 = ct_xmalloc(sz);
        float *x = ct_xmalloc(sz * B * sizeof(float)), *logits = ct_xmalloc(sizeof(float) * (size_t)B * m.n_classes);
        const char **who = ct_xcalloc((size_t)B, sizeof *who);
        int C = m.n_classes, K = top < C ? top : C;
        for (int i = 0; i < n_img;) {
            int b = 0;
            for (; i < n_img && b < B; i++) {
                if (ct_image_decode(imgs[i], m.in_h, m.in_c, u8)) {
                    fprintf(stderr, "cltrain: %s\n", ct_last_error());
                    bad++;
                    continue;
                }
                if (fpix) fwrite(u8, 1, sz, fpix);
                for (size_t k = 0; k < sz; k++) x[b * sz + k] = u8[k] / 255.0f;
                if (standardize) ct_augment_standardize(x + b * sz, sz);
                who[b++] = imgs[i];
            }
            if (!b) continue;
            ct_cl_write(&cl, m.input, 0, (size_t)b * sz * sizeof(float), x);
            ct_model_forward(&m, b);
            ct_cl_read(&cl, m.layers[m.n_layers - 1].out, 0, sizeof(float) * (size_t)b * C, logits);
            if (flog) fwrite(logits, sizeof(float), (size_t)b * C, flog);
            for (int j = 0; j < b; j++) {
                float *z = logits + (size_t)j * C, mx = z[0];
                for (int c = 1; c < C; c++) mx = z[c] > mx ? z[c] : mx;
                double sum = 0;
                for (int c = 0; c < C; c++) sum += exp((double)z[c] - mx);
                printf("%s:", who[j]);
                char *shown = ct_xcalloc((size_t)C, 1);
                for (int k = 0; k < K; k++) { /* the K largest, in order */
                    int best = -1;
                    for (int c = 0; c < C; c++)
                        if (!shown[c] && (best < 0 || z[c] > z[best])) best = c;
                    shown[best] = 1;
                    double p = exp((double)z[best] - mx) / sum;
                    if (ck.n_names == C) printf("%s %s %.1f%%", k ? "," : "", ck.class_names[best], 100 * p);
                    else printf("%s class %d %.1f%%", k ? "," : "", best, 100 * p);
                }
                free(shown);
                printf("\n");
            }
        }
        free(u8); free(x); free(logits); free(who);
        if (bad) rc = ct_fail(CT_EINPUT, "%d of %d images could not be read (named above)", bad, n_img);
    }
    if (flog && fclose(flog) && !rc) rc = ct_fail(CT_EIO, "--logits %s: write failed", logits_path);
    if (fpix && fclose(fpix) && !rc) rc = ct_fail(CT_EIO, "--pixels %s: write failed", pixels_path);
    ct_model_free(&m);
    if (cl.ctx) ct_cl_close(&cl);
    ct_ckpt_free(&ck);
    return rc ? cli_fail(rc) : 0;
}
