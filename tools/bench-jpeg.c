/* tools/bench-jpeg.c: JPEG decoding speed, stb_image (Debian's 2.27, as
 * cltrain used it before) against libjpeg-turbo's TurboJPEG API (what
 * cltrain decodes JPEG with now), on the same bytes in memory, one thread.
 *   build/tools/bench-jpeg [FILE.jpg...]
 * Without files it encodes photo-like test images (smooth gradients plus
 * noise, quality 90) at 32, 128 and 512 pixels a side. Prints images/s for
 * each decoder, the ratio, and the largest pixel difference between them
 * (both decode to RGB; a few levels apart is normal: different IDCTs). */
#define STB_IMAGE_IMPLEMENTATION
#define STBI_ONLY_JPEG
#define STB_IMAGE_WRITE_IMPLEMENTATION
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wsign-compare"
#pragma GCC diagnostic ignored "-Wunused-parameter"
#pragma GCC diagnostic ignored "-Wunused-function"
#pragma GCC diagnostic ignored "-Wshadow"
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
#pragma GCC diagnostic ignored "-Wimplicit-fallthrough"
#include <stb/stb_image.h>
#include <stb/stb_image_write.h>
#pragma GCC diagnostic pop
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <turbojpeg.h>

typedef struct blob { unsigned char *b; size_t n, cap; } blob;

static void put(void *ctx, void *data, int size) {
    blob *o = ctx;
    if (o->n + (size_t)size > o->cap) {
        o->cap = 2 * (o->n + (size_t)size);
        o->b = realloc(o->b, o->cap);
    }
    memcpy(o->b + o->n, data, (size_t)size);
    o->n += (size_t)size;
}

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static blob synth(int side) {
    unsigned char *px = malloc((size_t)side * side * 3);
    unsigned s = 12345;
    for (int y = 0; y < side; y++)
        for (int x = 0; x < side; x++)
            for (int c = 0; c < 3; c++) {
                s = s * 1103515245u + 12345u;
                double v = 128 + 90 * sin(0.05 * (x + 2 * c) + 0.03 * y) * cos(0.04 * y - c) + (int)(s >> 27) - 16;
                px[((size_t)y * side + x) * 3 + c] = (unsigned char)(v < 0 ? 0 : v > 255 ? 255 : v);
            }
    blob o = {0};
    stbi_write_jpg_to_func(put, &o, side, side, 3, px, 90);
    free(px);
    return o;
}

static blob slurp(const char *path) {
    blob o = {0};
    FILE *f = fopen(path, "rb");
    if (!f) { perror(path); exit(2); }
    unsigned char buf[65536];
    size_t k;
    while ((k = fread(buf, 1, sizeof buf, f)) > 0) put(&o, buf, (int)k);
    fclose(f);
    return o;
}

/* decode every blob `reps` times with each decoder; returns images/s of both */
static void measure(const char *label, blob *v, int nv, int reps) {
    tjhandle tj = tjInitDecompress();
    double best[2] = {1e30, 1e30};
    int maxdiff = 0, w0 = 0, h0 = 0;
    for (int round = 0; round < 3; round++) {
        for (int dec = 0; dec < 2; dec++) {
            double t0 = now();
            for (int r = 0; r < reps; r++)
                for (int i = 0; i < nv; i++) {
                    int w, h, n, ss, cs;
                    unsigned char *px = NULL;
                    if (dec == 0) {
                        px = stbi_load_from_memory(v[i].b, (int)v[i].n, &w, &h, &n, 3);
                    } else if (!tjDecompressHeader3(tj, v[i].b, v[i].n, &w, &h, &ss, &cs)) {
                        px = malloc((size_t)w * h * 3);
                        if (tjDecompress2(tj, v[i].b, v[i].n, px, w, 0, h, TJPF_RGB, 0)) { free(px); px = NULL; }
                    }
                    if (!px) { fprintf(stderr, "%s: image %d does not decode with %s\n", label, i, dec ? "turbojpeg" : "stb"); exit(1); }
                    w0 = w, h0 = h;
                    free(px);
                }
            double t = now() - t0;
            if (t < best[dec]) best[dec] = t;
        }
    }
    for (int i = 0; i < nv; i++) { /* agreement of the two decoders */
        int w, h, n, ss, cs;
        unsigned char *a = stbi_load_from_memory(v[i].b, (int)v[i].n, &w, &h, &n, 3);
        tjDecompressHeader3(tj, v[i].b, v[i].n, &w, &h, &ss, &cs);
        unsigned char *b = malloc((size_t)w * h * 3);
        tjDecompress2(tj, v[i].b, v[i].n, b, w, 0, h, TJPF_RGB, 0);
        for (size_t k = 0; k < (size_t)w * h * 3; k++) {
            int d = abs(a[k] - b[k]);
            if (d > maxdiff) maxdiff = d;
        }
        free(a);
        free(b);
    }
    tjDestroy(tj);
    double n = (double)nv * reps;
    printf("%-22s %5dx%-5d %12.0f %12.0f %8.2fx %8d\n", label, w0, h0, n / best[0], n / best[1], best[0] / best[1], maxdiff);
}

int main(int argc, char **argv) {
    printf("%-22s %11s %12s %12s %9s %8s\n", "images", "size", "stb img/s", "tjpeg img/s", "tj/stb", "maxdiff");
    if (argc > 1) {
        blob *v = calloc((size_t)argc - 1, sizeof *v);
        size_t bytes = 0;
        for (int i = 1; i < argc; i++) { v[i - 1] = slurp(argv[i]); bytes += v[i - 1].n; }
        int reps = (int)(2e7 / (double)(bytes + 1)) + 1;
        char label[64];
        snprintf(label, sizeof label, "%d files", argc - 1);
        measure(label, v, argc - 1, reps > 1000 ? 1000 : reps);
        return 0;
    }
    const int sides[] = {32, 128, 512}, reps[] = {3000, 300, 20};
    for (int k = 0; k < 3; k++) {
        blob b = synth(sides[k]);
        char label[64];
        snprintf(label, sizeof label, "synthetic q90");
        measure(label, &b, 1, reps[k]);
        free(b.b);
    }
    return 0;
}
