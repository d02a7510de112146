/* cli/pack.c: `cltrain pack DIR OUT --size S [options]`: an image folder
 * (one sub-folder per class, see images.h) decoded, resized and written as
 * record shards (shard.h) OUT/train-NNNNN.shard and OUT/test-NNNNN.shard.
 *
 * Images are decoded by N threads a chunk at a time while the previous chunk
 * is written, always in scan order, so the shards are byte-identical for any
 * thread count. Files that cannot be decoded are reported once and left out
 * (with --strict they stop the pack). NumPy arrays (arrays.h) are written
 * as they are, one split after the other. Tested by tests/pack.sh and
 * tests/arrays.sh. */
#include "cli.h"
#include "cltrain/images.h"
#include "cltrain/shard.h"
#include <errno.h>
#include <getopt.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <unistd.h>

void cli_pack_help(FILE *f) {
    fprintf(f,
            "Usage: cltrain pack DIR OUT --size S [OPTIONS]\n"
            "       cltrain pack FILE.tfrecord... OUT [--size S] [--tfrecord-image KEY --tfrecord-label KEY\n"
            "                    --tfrecord-shape H,W,C] (or --train GLOB --test GLOB OUT)\n"
            "       cltrain pack FILE.npz | X.npy Y.npy [XTEST.npy YTEST.npy] OUT [--x KEY[,TESTKEY] --y KEY[,TESTKEY]]\n"
            "                    [--layout NHWC|NCHW|NHW]   (NumPy arrays: float images stored as round(x * 255))\n"
            "Decode and resize every image of DIR (one sub-folder per class; or DIR/train and DIR/test,\n"
            "each with the same class folders) into record shards OUT/train-NNNNN.shard, OUT/test-NNNNN.shard.\n\n"
            "  --size S                side images are resized to (S x S, stretched) [required]\n"
            "  --channels 1|3          luminance or RGB; transparency is blended onto white [3]\n"
            "  --val-split F           share of each class for the test split, without train/ test/ [0.1]\n"
            "  --seed N                which files the split takes [1]\n"
            "  --strict                an unreadable image is an error instead of being skipped\n"
            "  --threads N             decoding threads [the core count]\n"
            "  --records-per-shard N   records per file [about 64 MiB per file]\n"
            "  -h, --help              this help\n");
}

/* One chunk of images decoded by several threads. */
typedef struct chunk {
    const ct_imgdir_split *sp;
    int size, channels, first, count, n_threads;
    size_t pixels;
    uint8_t *out;          /* count * pixels */
    int *rc;               /* per image */
    char **msg;            /* per failed image: its message */
    _Atomic int next;
    pthread_t th[64];
    int started;
} chunk;

static void *decode_worker(void *arg) {
    chunk *c = arg;
    for (int i; (i = atomic_fetch_add(&c->next, 1)) < c->count;) {
        int rc = ct_image_decode(c->sp->paths[c->first + i], c->size, c->channels, c->out + (size_t)i * c->pixels);
        c->rc[i] = rc;
        c->msg[i] = rc ? strdup(ct_last_error()) : NULL;
    }
    return NULL;
}

static void chunk_start(chunk *c, int first, int count) {
    c->first = first;
    c->count = count;
    atomic_store(&c->next, 0);
    c->started = 0;
    for (int t = 0; t < c->n_threads; t++) {
        if (pthread_create(&c->th[t], NULL, decode_worker, c)) break;
        c->started++;
    }
    if (!c->started) decode_worker(c); /* no thread to be had: decode here */
}

static void chunk_join(chunk *c) {
    for (int t = 0; t < c->started; t++) pthread_join(c->th[t], NULL);
    c->started = 0;
}

static void chunk_clear_msgs(chunk *c) {
    for (int i = 0; i < c->count; i++) {
        free(c->msg[i]);
        c->msg[i] = NULL;
    }
}

int cli_pack_split(const ct_imgdir *d, int which, const char *out, int size, int channels, int strict, int threads,
                   long per_shard, cli_pack_stats *st) {
    const ct_imgdir_split *sp = &d->split[which];
    const char *name = which == CT_SPLIT_TRAIN ? "train" : "test";
    size_t pixels = (size_t)size * (size_t)size * (size_t)channels;
    if (per_shard <= 0) {
        per_shard = (long)((64u << 20) / (pixels + 8));
        if (per_shard < 1) per_shard = 1;
    }
    ct_shard_writer w;
    int rc = ct_shard_writer_open(&w, out, name, size, size, channels, d->n_classes,
                                  (const char *const *)d->class_names, per_shard);
    if (rc) return rc;
    /* chunks of about 32 MiB, at least 4 images per thread */
    int cn = (int)((32u << 20) / pixels);
    if (cn < 4 * threads) cn = 4 * threads;
    if (cn > 4096) cn = 4096;
    chunk ch[2];
    memset(ch, 0, sizeof ch);
    for (int k = 0; k < 2; k++) {
        ch[k].sp = sp;
        ch[k].size = size;
        ch[k].channels = channels;
        ch[k].pixels = pixels;
        ch[k].n_threads = threads;
        ch[k].out = malloc((size_t)cn * pixels);
        ch[k].rc = ct_xcalloc((size_t)cn, sizeof *ch[k].rc);
        ch[k].msg = ct_xcalloc((size_t)cn, sizeof *ch[k].msg);
        if (!ch[k].out) rc = ct_fail(CT_ENOMEM, "out of memory for %d decoded images of %zu bytes", cn, pixels);
    }
    if (!rc && sp->n > 0) chunk_start(&ch[0], 0, sp->n < cn ? sp->n : cn);
    for (int first = 0, k = 0; !rc && first < sp->n; first += cn, k ^= 1) {
        chunk *c = &ch[k], *nx = &ch[k ^ 1];
        chunk_join(c);
        if (first + cn < sp->n) chunk_start(nx, first + cn, sp->n - (first + cn) < cn ? sp->n - (first + cn) : cn);
        for (int i = 0; i < c->count && !rc; i++) {
            if (c->rc[i] == 0) {
                rc = ct_shard_write(&w, sp->labels[c->first + i], c->out + (size_t)i * pixels);
            } else if (c->rc[i] == CT_EINPUT && !strict) {
                fprintf(stderr, "cltrain: skipping %s\n", c->msg[i]);
                st->skipped++;
            } else {
                rc = ct_fail(c->rc[i], "%s%s", c->msg[i], c->rc[i] == CT_EINPUT ? "; fix or delete it, or leave out --strict to skip it" : "");
            }
        }
        chunk_clear_msgs(c);
        if (rc) {
            chunk_join(nx);
            chunk_clear_msgs(nx);
        }
    }
    for (int k = 0; k < 2; k++) {
        free(ch[k].out);
        free(ch[k].rc);
        free(ch[k].msg);
    }
    if (!rc && which == CT_SPLIT_TRAIN && w.n_records == 0)
        rc = ct_fail(CT_EINPUT, "%s: none of the %d training images decodes; check the files", d->dir, sp->n);
    if (rc) {
        ct_shard_writer_abort(&w);
        return rc;
    }
    if ((rc = ct_shard_writer_close(&w))) return rc;
    st->written[which] = w.n_records;
    st->shards[which] = w.n_shards;
    st->bytes += w.bytes;
    return 0;
}

/* `cltrain pack FILE.tfrecord... OUT`: both splits, one record at a time */
static int pack_tfr_files(const ct_tfr_files *t, const char *out, int size, int channels, double val_split, uint64_t seed,
                          long per_shard, cli_pack_stats *st) {
    ct_imageset s;
    int rc = ct_imageset_open_tfr(&s, t, size, channels, val_split, seed);
    if (rc) return rc;
    const ct_tfr_data *d = &s.tfr;
    size = s.ds[0].h;
    channels = s.ds[0].c;
    size_t pixels = (size_t)size * size * channels;
    if (per_shard <= 0) per_shard = (long)((64u << 20) / (pixels + 8)) + 1;
    uint8_t *px = ct_xmalloc(pixels);
    for (int k = 0; k < 2 && !rc; k++) {
        ct_shard_writer w;
        rc = ct_shard_writer_open(&w, out, k ? "test" : "train", size, size, channels, d->n_classes,
                                  (const char *const *)d->class_names, per_shard);
        for (int i = 0; i < d->n[k] && !rc; i++) {
            rc = ct_tfr_decode(d, &d->rec[k][i], size, channels, px);
            if (!rc) rc = ct_shard_write(&w, d->rec[k][i].label, px);
        }
        if (!rc) rc = ct_shard_writer_close(&w);
        else ct_shard_writer_abort(&w);
        if (!rc) {
            st->written[k] = w.n_records;
            st->shards[k] = w.n_shards;
            st->bytes += w.bytes;
        }
    }
    free(px);
    ct_imageset_close(&s);
    return rc;
}

int cli_pack_arrays(const char *spec, const char *out, double val_split, uint64_t seed, long per_shard) {
    ct_arrays a;
    double t0 = ct_now();
    int rc = ct_arrays_open(&a, spec, val_split, seed, 1, 0);
    if (rc) return rc;
    size_t pixels = (size_t)a.h * a.w * a.c;
    if (per_shard <= 0) per_shard = (long)((64u << 20) / (pixels + 8)) + 1;
    uint8_t *px = ct_xmalloc(pixels);
    long written[2] = {0, 0};
    int shards[2] = {0, 0};
    uint64_t bytes = 0;
    if (a.h != a.w) rc = ct_fail(CT_EINPUT, "%s: images of %dx%d; record shards hold square images", spec, a.h, a.w);
    for (int k = 0; k < 2 && !rc; k++) {
        ct_shard_writer w;
        if ((rc = ct_shard_writer_open(&w, out, k ? "test" : "train", a.h, a.w, a.c, a.n_classes,
                                       (const char *const *)a.class_names, per_shard)))
            break;
        for (int i = 0; i < a.ds[k].n && !rc; i++) {
            int32_t label = a.labels[a.from[k]][a.rows[k] ? a.rows[k][i] : i];
            ct_arrays_bytes(&a, k, i, px);
            rc = ct_shard_write(&w, (uint32_t)label, px);
        }
        if (!rc) rc = ct_shard_writer_close(&w);
        else ct_shard_writer_abort(&w);
        if (!rc) written[k] = w.n_records, shards[k] = w.n_shards, bytes += w.bytes;
    }
    if (!rc)
        printf("pack: %s: wrote %ld train and %ld test records (%dx%dx%d, %d classes%s) in %d + %d shards to %s (%.1f MB, %.2f s)%s\n",
               spec, written[0], written[1], a.h, a.w, a.c, a.n_classes, a.held_out ? ", test split held out by --val-split" : "",
               shards[0], shards[1], out, (double)bytes / 1e6, ct_now() - t0,
               a.x[0].kind == 'f' || a.x[1].kind == 'f' ? "; float images stored as round(x * 255), clamped to 0..255" : "");
    free(px);
    ct_arrays_close(&a);
    return rc;
}

/* TFRecord files before OUT (or --train/--test and OUT) */
static int pack_tfr(ct_tfr_files *tf, int argc, char **argv, int size, int channels, double val, long seed, long per_shard) {
    int rc = 0, nf = argc - optind - 1;
    if (nf < 0 || (nf == 0 && !tf->n_train)) rc = ct_fail(CT_EINPUT, "pack needs TFRecord files and an output folder: cltrain pack FILE.tfrecord... OUT");
    if (!rc && nf && tf->n_train) rc = ct_fail(CT_EINPUT, "pack: give TFRecord files either as arguments or with --train/--test, not both");
    for (int i = 0; i < nf && !rc; i++) {
        if (!cli_is_file(argv[optind + i])) rc = ct_fail(CT_EINPUT, "%s: not a TFRecord file (%s)", argv[optind + i], strerror(errno ? errno : EINVAL));
        else {
            tf->train = realloc(tf->train, (size_t)(tf->n_train + 1) * sizeof *tf->train);
            tf->train[tf->n_train++] = strdup(argv[optind + i]);
        }
    }
    if (!rc && !size && tf->o.raw_h <= 0) rc = ct_fail(CT_EINPUT, "pack needs --size S for encoded TFRecord images (e.g. --size 32)");
    const char *out = argv[argc - 1];
    cli_pack_stats st;
    memset(&st, 0, sizeof st);
    double t0 = ct_now();
    if (!rc) rc = pack_tfr_files(tf, out, size, tf->o.raw_h > 0 && channels == 3 ? 0 : channels, tf->n_test ? 0 : val, (uint64_t)seed, per_shard, &st);
    if (!rc)
        printf("pack: %d TFRecord file%s: wrote %ld train and %ld test records in %d + %d shards to %s (%.1f MB, %.2f s)\n",
               tf->n_train + tf->n_test, tf->n_train + tf->n_test == 1 ? "" : "s", st.written[0], st.written[1], st.shards[0],
               st.shards[1], out, (double)st.bytes / 1e6, ct_now() - t0);
    ct_tfr_files_free(tf);
    return rc ? cli_fail(rc) : 0;
}

enum { P_SIZE = 300, P_CHANNELS, P_VAL, P_SEED, P_STRICT, P_THREADS, P_RPS, P_X, P_Y, P_LAYOUT };

int cmd_pack(int argc, char **argv) {
    static const struct option opts[] = {
        {"size", required_argument, 0, P_SIZE}, {"channels", required_argument, 0, P_CHANNELS},
        {"val-split", required_argument, 0, P_VAL}, {"seed", required_argument, 0, P_SEED},
        {"strict", no_argument, 0, P_STRICT}, {"threads", required_argument, 0, P_THREADS},
        {"records-per-shard", required_argument, 0, P_RPS}, {"x", required_argument, 0, P_X},
        {"y", required_argument, 0, P_Y}, {"layout", required_argument, 0, P_LAYOUT}, {"help", no_argument, 0, 'h'}, {0, 0, 0, 0}};
    const char *xkey = NULL, *ykey = NULL, *layout = NULL;
    long size = 0, channels = 3, seed = 1, threads = sysconf(_SC_NPROCESSORS_ONLN), per_shard = 0, l;
    double val = 0.1;
    int strict = 0, c, rc = 0;
    if (threads < 1) threads = 2;
    if (threads > 64) threads = 64;
    ct_tfr_files tf;
    if ((rc = cli_tfr_args(&argc, argv, &tf))) return cli_fail(rc);
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
        switch (c) {
        case P_SIZE: rc = cli_parse_int("size", optarg, 1, 4096, &size); break;
        case P_CHANNELS:
            if (strcmp(optarg, "1") && strcmp(optarg, "3")) rc = ct_fail(CT_EINPUT, "--channels %s: expected 1 or 3", optarg);
            else channels = optarg[0] - '0';
            break;
        case P_VAL: {
            char *end;
            errno = 0;
            val = strtod(optarg, &end);
            if (end == optarg || *end || errno || !(val >= 0 && val < 1))
                rc = ct_fail(CT_EINPUT, "--val-split %s: expected a share 0 <= F < 1", optarg);
            break;
        }
        case P_SEED: rc = cli_parse_int("seed", optarg, 0, 0x7fffffffffffffffL, &seed); break;
        case P_STRICT: strict = 1; break;
        case P_THREADS: if (!(rc = cli_parse_int("threads", optarg, 1, 64, &l))) threads = l; break;
        case P_RPS: rc = cli_parse_int("records-per-shard", optarg, 1, 1L << 40, &per_shard); break;
        case P_X: xkey = optarg; break;
        case P_Y: ykey = optarg; break;
        case P_LAYOUT: layout = optarg; break;
        case 'h': cli_pack_help(stdout); return 0;
        case ':': rc = ct_fail(CT_EINPUT, "option %s needs a value; see `cltrain pack --help`", argv[optind - 1]); break;
        default: rc = ct_fail(CT_EINPUT, "unknown option %s; see `cltrain pack --help`", argv[optind - 1]); break;
        }
        if (rc) return cli_fail(rc);
    }
    int na = argc - optind >= 2 ? cli_array_files(argc - optind, argv + optind - 1) : 0;
    if (na && !tf.given) {
        char spec[CT_ARRAYS_SPEC];
        if (na == argc - optind) na--; /* the last one is OUT */
        if (argc - optind != na + 1) rc = ct_fail(CT_EINPUT, "pack of arrays: cltrain pack FILE.npz | X.npy Y.npy [XT.npy YT.npy] OUT");
        if (!rc && (size || channels != 3)) rc = ct_fail(CT_EINPUT, "pack of arrays: --size and --channels do not apply (arrays keep their shape)");
        if (!rc) rc = ct_arrays_spec_make(spec, (const char *const *)argv + optind, na, xkey, ykey, layout);
        if (!rc) rc = cli_pack_arrays(spec, argv[argc - 1], val, (uint64_t)seed, per_shard);
        return rc ? cli_fail(rc) : 0;
    }
    if (xkey || ykey || layout) {
        ct_fail(CT_EINPUT, "--x, --y and --layout are for NumPy arrays (pack FILE.npz OUT)");
        return cli_fail(CT_EINPUT);
    }
    if (tf.given || (argc - optind >= 2 && cli_is_file(argv[optind]))) return pack_tfr(&tf, argc, argv, (int)size, (int)channels, val, seed, per_shard);
    if (argc - optind != 2) {
        if (argc - optind > 2) ct_fail(CT_EINPUT, "unexpected argument '%s'; usage: cltrain pack DIR OUT --size S", argv[optind + 2]);
        else ct_fail(CT_EINPUT, "pack needs an image folder and an output folder: cltrain pack DIR OUT --size S");
        return cli_fail(CT_EINPUT);
    }
    if (!size) {
        ct_fail(CT_EINPUT, "pack needs --size S, the side every image is resized to (e.g. --size 128)");
        return cli_fail(CT_EINPUT);
    }
    const char *dir = argv[optind], *out = argv[optind + 1];
    ct_imgdir d;
    double t0 = ct_now();
    if ((rc = ct_imgdir_scan(&d, dir, val, (uint64_t)seed, strict))) return cli_fail(rc);
    double t1 = ct_now();
    cli_pack_stats st;
    memset(&st, 0, sizeof st);
    for (int s = 0; s < 2 && !rc; s++)
        rc = cli_pack_split(&d, s, out, (int)size, (int)channels, strict, (int)threads, per_shard, &st);
    double t2 = ct_now();
    if (rc) {
        ct_imgdir_free(&d);
        return cli_fail(rc);
    }
    long total = st.written[0] + st.written[1];
    printf("pack: %s: %d classes, %d train + %d test images (%s), %ld unreadable skipped\n", dir, d.n_classes,
           d.split[0].n, d.split[1].n, d.folders ? "train/ and test/ folders" : "split by --val-split", (long)d.skipped + st.skipped);
    printf("pack: wrote %ld train records in %d shard%s and %ld test records in %d shard%s to %s (%.1f MB)\n",
           st.written[0], st.shards[0], st.shards[0] == 1 ? "" : "s", st.written[1], st.shards[1],
           st.shards[1] == 1 ? "" : "s", out, (double)st.bytes / 1e6);
    printf("pack: %ld images decoded and resized to %ldx%ldx%ld in %.2f s (%.0f images/s, %ld threads; scan %.2f s)\n",
           total, size, size, channels, t2 - t1, (t2 - t1) > 0 ? (double)total / (t2 - t1) : 0.0, threads, t1 - t0);
    ct_imgdir_free(&d);
    return 0;
}
