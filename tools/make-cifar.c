/* make-cifar.c: write a small, learnable data set in the CIFAR-10 (or
 * CIFAR-100) binary format, for tests and demos on machines with no network.
 *
 * Class k of CIFAR-10 is a shape (disc, square, cross, stripes, ring,
 * triangle, x, diamond, checker, frame) in class colour k (jittered), at a
 * random position and size, on a random background, with pixel noise. With
 * --cifar100 the fine label is shape * 10 + colour (100 classes) and the
 * coarse one shape * 2 + (colour >= 5) (20 classes), so both are learnable.
 * Every byte is a function of --seed: the same seed writes the same files.
 * Each file is written to a temporary name and renamed into place.
 * Depends on common.h: the inline ct_rng, and ct_mkdir_p from libcltrain.a.
 * Checked by loading its output with ct_cifar_load (both formats) and by
 * training on it.
 *
 * Usage: make-cifar OUTDIR [--train N] [--test N] [--seed S] [--cifar100]
 * Exit status: 0 done, 1 a file could not be written, 2 bad usage. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "cltrain/common.h"
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

enum { SIDE = 32, PLANE = SIDE * SIDE, PIXELS = 3 * PLANE, N_SHAPES = 10 };

static const char *const shape_names[N_SHAPES] = {
    "disc", "square", "cross", "stripes", "ring", "triangle", "x", "diamond", "checker", "frame",
};
static const char *const colour_names[10] = {
    "red", "orange", "yellow", "lime", "green", "cyan", "blue", "purple", "pink", "white",
};
static const uint8_t palette[10][3] = {
    {220, 40, 40}, {240, 140, 20}, {230, 220, 40}, {120, 220, 40}, {30, 150, 60},
    {40, 200, 210}, {40, 80, 220}, {130, 50, 200}, {240, 100, 180}, {240, 240, 240},
};

static void usage(FILE *f) {
    fprintf(f,
            "Usage: make-cifar OUTDIR [--train N] [--test N] [--seed S] [--cifar100]\n"
            "Write a small learnable data set in the CIFAR binary format into OUTDIR.\n"
            "  --train N   training records per file: each of data_batch_1..5.bin\n"
            "              (default 1000), or train.bin with --cifar100 (default 5000)\n"
            "  --test N    records in test_batch.bin / test.bin (default 1000)\n"
            "  --seed S    random seed (default 1); the same seed writes the same bytes\n"
            "  --cifar100  CIFAR-100 format: train.bin, test.bin, fine_label_names.txt,\n"
            "              coarse_label_names.txt (fine = shape*10+colour, coarse = shape*2+colour/5)\n"
            "CIFAR-10 format (the default) writes data_batch_1..5.bin, test_batch.bin and\n"
            "batches.meta.txt; class k is shape k (%s, %s, ...) in colour k.\n",
            shape_names[0], shape_names[1]);
}

static int inside(int shape, int x, int y, float cx, float cy, float r) {
    float dx = (float)x + 0.5f - cx, dy = (float)y + 0.5f - cy, ax = fabsf(dx), ay = fabsf(dy);
    float d = sqrtf(dx * dx + dy * dy);
    int box = ax <= r && ay <= r;
    switch (shape) {
    case 0: return d <= r;
    case 1: return ax <= 0.8f * r && ay <= 0.8f * r;
    case 2: return (ax <= r / 3 && ay <= r) || (ay <= r / 3 && ax <= r);
    case 3: return box && ((int)floorf((dy + r) / 2.0f)) % 2 == 0;
    case 4: return d <= r && d >= 0.55f * r;
    case 5: return dy >= -r && dy <= r && ax <= (dy + r) * 0.5f;
    case 6: return box && (fabsf(dx - dy) <= 1.6f || fabsf(dx + dy) <= 1.6f);
    case 7: return ax + ay <= r;
    case 8: return box && (((int)floorf((dx + r) / 3.0f) + (int)floorf((dy + r) / 3.0f)) % 2 == 0);
    default: return box && !(ax <= 0.55f * r && ay <= 0.55f * r);
    }
}

static uint8_t clamp_u8(int v) { return (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v); }

static int jitter(ct_rng *r, int amount) { return (int)ct_rng_below(r, 2u * (uint32_t)amount + 1) - amount; }

/* One record's image, as R, G, B planes. */
static void render(uint8_t *planes, int shape, int colour, ct_rng *r) {
    int fg[3], bg[3], dist = 0;
    for (int ch = 0; ch < 3; ch++) {
        fg[ch] = palette[colour][ch] + jitter(r, 30);
        bg[ch] = (int)ct_rng_below(r, 256);
        dist += abs(fg[ch] - bg[ch]);
    }
    if (dist < 150) /* keep the shape visible */
        for (int ch = 0; ch < 3; ch++) bg[ch] = 255 - bg[ch];
    float rad = 6.0f + 6.0f * ct_rng_uniform(r);
    float cx = rad + ct_rng_uniform(r) * ((float)SIDE - 2 * rad);
    float cy = rad + ct_rng_uniform(r) * ((float)SIDE - 2 * rad);
    int gx = jitter(r, 3), gy = jitter(r, 3); /* a gentle background gradient */
    for (int y = 0; y < SIDE; y++)
        for (int x = 0; x < SIDE; x++) {
            int in = inside(shape, x, y, cx, cy, rad);
            int noise = jitter(r, 18);
            for (int ch = 0; ch < 3; ch++) {
                int v = in ? fg[ch] : bg[ch] + gx * (x - SIDE / 2) + gy * (y - SIDE / 2);
                planes[ch * PLANE + y * SIDE + x] = clamp_u8(v + noise);
            }
        }
}

static int write_all(const char *dir, const char *name, const void *data, size_t n) {
    char path[4200], tmp[4300];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    snprintf(tmp, sizeof tmp, "%s.tmp-XXXXXX", path);
    int fd = mkstemp(tmp);
    if (fd < 0) {
        fprintf(stderr, "make-cifar: %s: cannot create a file there (%s)\n", dir, strerror(errno));
        return 1;
    }
    FILE *f = fdopen(fd, "wb");
    int bad = !f || fwrite(data, 1, n, f) != n;
    if (f) bad |= fclose(f) != 0;
    else close(fd);
    if (!bad) bad = chmod(tmp, 0644) != 0 || rename(tmp, path) != 0;
    if (bad) {
        fprintf(stderr, "make-cifar: %s: cannot write (%s)\n", path, strerror(errno));
        unlink(tmp);
        return 1;
    }
    return 0;
}

/* File `file` with n records: labels balanced over the classes, in a shuffled order. */
static int write_batch(const char *dir, const char *name, int file, long n, uint64_t seed, int cifar100) {
    int lb = cifar100 ? 2 : 1, rec = lb + PIXELS, n_classes = cifar100 ? 100 : 10;
    uint8_t *buf = malloc((size_t)n * rec);
    int *cls = malloc((size_t)n * sizeof *cls);
    if (!buf || !cls) {
        fprintf(stderr, "make-cifar: out of memory for %ld records\n", n);
        free(buf);
        free(cls);
        return 1;
    }
    ct_rng order = ct_rng_make(seed, (uint64_t)file, ~0ull);
    for (long i = 0; i < n; i++) cls[i] = (int)(i % n_classes);
    for (long i = n - 1; i > 0; i--) {
        long j = (long)ct_rng_below(&order, (uint32_t)i + 1);
        int t = cls[i];
        cls[i] = cls[j];
        cls[j] = t;
    }
    for (long i = 0; i < n; i++) {
        ct_rng r = ct_rng_make(seed, (uint64_t)file, (uint64_t)i);
        uint8_t *o = buf + (size_t)i * rec;
        int shape = cifar100 ? cls[i] / 10 : cls[i], colour = cifar100 ? cls[i] % 10 : cls[i];
        if (cifar100) {
            o[0] = (uint8_t)(shape * 2 + colour / 5);
            o[1] = (uint8_t)cls[i];
        } else {
            o[0] = (uint8_t)cls[i];
        }
        render(o + lb, shape, colour, &r);
    }
    int rc = write_all(dir, name, buf, (size_t)n * rec);
    free(buf);
    free(cls);
    return rc;
}

static int write_names(const char *dir, int cifar100) {
    char text[4096];
    size_t len = 0;
    int rc = 0;
    if (!cifar100) {
        for (int k = 0; k < N_SHAPES; k++) len += (size_t)snprintf(text + len, sizeof text - len, "%s\n", shape_names[k]);
        return write_all(dir, "batches.meta.txt", text, len);
    }
    for (int k = 0; k < 100; k++)
        len += (size_t)snprintf(text + len, sizeof text - len, "%s_%s\n", colour_names[k % 10], shape_names[k / 10]);
    rc |= write_all(dir, "fine_label_names.txt", text, len);
    len = 0;
    for (int k = 0; k < 20; k++)
        len += (size_t)snprintf(text + len, sizeof text - len, "%s_%s\n", shape_names[k / 2], k % 2 ? "cool" : "warm");
    rc |= write_all(dir, "coarse_label_names.txt", text, len);
    return rc;
}

/* A whole number in [lo, hi], or -1 with a message. */
static long parse_count(const char *opt, const char *s, long lo, long hi) {
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi) {
        fprintf(stderr, "make-cifar: %s '%s': use a whole number from %ld to %ld\n", opt, s, lo, hi);
        return -1;
    }
    return v;
}

int main(int argc, char **argv) {
    static const struct option opts[] = {
        {"train", required_argument, NULL, 't'}, {"test", required_argument, NULL, 'e'},
        {"seed", required_argument, NULL, 's'}, {"cifar100", no_argument, NULL, 'c'},
        {"help", no_argument, NULL, 'h'}, {NULL, 0, NULL, 0},
    };
    long n_train = -1, n_test = 1000;
    uint64_t seed = 1;
    int cifar100 = 0, o;
    while ((o = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (o) {
        case 't': if ((n_train = parse_count("--train", optarg, 1, 1000000)) < 0) return 2; break;
        case 'e': if ((n_test = parse_count("--test", optarg, 1, 1000000)) < 0) return 2; break;
        case 's': {
            char *end;
            errno = 0;
            seed = strtoull(optarg, &end, 0);
            if (errno || end == optarg || *end || optarg[0] == '-') {
                fprintf(stderr, "make-cifar: --seed '%s': use a whole number >= 0\n", optarg);
                return 2;
            }
            break;
        }
        case 'c': cifar100 = 1; break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    if (optind != argc - 1) {
        fprintf(stderr, "make-cifar: %s\n", optind >= argc ? "missing OUTDIR" : "one OUTDIR only");
        usage(stderr);
        return 2;
    }
    const char *dir = argv[optind];
    if (n_train < 0) n_train = cifar100 ? 5000 : 1000;
    if (ct_mkdir_p(dir) != 0) {
        fprintf(stderr, "make-cifar: %s: cannot create the folder (%s)\n", dir, strerror(errno));
        return 1;
    }
    int rc = 0;
    if (cifar100) {
        rc |= write_batch(dir, "train.bin", 0, n_train, seed, 1);
        rc |= write_batch(dir, "test.bin", 1, n_test, seed, 1);
    } else {
        for (int b = 1; b <= 5 && !rc; b++) {
            char name[32];
            snprintf(name, sizeof name, "data_batch_%d.bin", b);
            rc |= write_batch(dir, name, b - 1, n_train, seed, 0);
        }
        if (!rc) rc |= write_batch(dir, "test_batch.bin", 5, n_test, seed, 0);
    }
    if (!rc) rc |= write_names(dir, cifar100);
    if (rc) return 1;
    printf("make-cifar: wrote %s (%s format: %ld train records%s, %ld test records, seed %llu)\n", dir,
           cifar100 ? "CIFAR-100" : "CIFAR-10", cifar100 ? n_train : 5 * n_train, cifar100 ? "" : " in 5 batches",
           n_test, (unsigned long long)seed);
    return 0;
}
