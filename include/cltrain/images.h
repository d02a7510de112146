/* images.h: image folders (one sub-folder per class) as train/test splits,
 * image decoding through stb_image, and a ct_source that decodes on demand.
 *
 * Layout: DIR/CLASS/FILE, class names = sub-folder names sorted with strcmp,
 * files directly inside each class folder (no recursion). If DIR/train and
 * DIR/test both exist they are the two splits (each with the same class
 * folders); otherwise a seeded, stable per-class split sends a val_split
 * share of each class to the test split. Accepted: .png .jpg .jpeg .bmp .gif
 * .tga (any case); other files and hidden entries (".name") are ignored.
 *
 * Decoding: any of the five formats (JPEG through libjpeg-turbo's TurboJPEG
 * API, the others through stb_image), after the checks of
 * ct_image_header_check; 8 bits per channel (16-bit PNGs are
 * reduced by stb), GIF's first frame. Transparent pixels are composited onto
 * white (alpha blending against 255), then converted to 1 channel
 * (luminance, Y = (77 R + 150 G + 29 B) / 256, stb's own formula) or 3 (RGB;
 * grey replicated), then resized to size x size with stbir_resize_uint8
 * (aspect ratio not kept: the image is stretched). Output is HWC uint8.
 *
 * Thread safety: stb_image here (v2.27) keeps its failure reason in a
 * _Thread_local (STBI_THREAD_LOCAL), so decoding from several threads at once
 * is safe and each thread sees its own reason.
 * Depends on common.h, source.h (ct_source), stb_image, stb_image_resize.
 * Tested by tests/test_images.c. */
#ifndef CLTRAIN_IMAGES_H
#define CLTRAIN_IMAGES_H
#include <stdint.h>
#include "cltrain/common.h"
#include "cltrain/source.h"

enum { CT_SPLIT_TRAIN = 0, CT_SPLIT_TEST = 1 };

/* Largest width or height a file may declare; larger is refused as unreadable
 * (a 16384^2 RGBA image already decodes to 1 GiB). */
#define CT_IMAGE_MAX_SIDE 16384
/* Largest width x height a file may declare (64 Mpx: 192 MB as RGB, a
 * second or more to decode and resize); more is refused before decoding,
 * like a GIF or PNG declaring more pixels than its compression can carry
 * in the file's bytes (a decompression bomb). */
#define CT_IMAGE_MAX_PIXELS (64LL << 20)

typedef struct ct_imgdir_split {
    int n;               /* images */
    char **paths;        /* n paths "DIR/[train|test/]CLASS/FILE", class by class, files sorted */
    int32_t *labels;     /* n labels, index into class_names */
} ct_imgdir_split;

typedef struct ct_imgdir {
    char *dir;
    int n_classes;
    char **class_names;  /* n_classes, sorted with strcmp */
    ct_imgdir_split split[2]; /* [CT_SPLIT_TRAIN], [CT_SPLIT_TEST] */
    int skipped;         /* files with an accepted extension whose header stb cannot read */
    int folders;         /* 1 when DIR/train and DIR/test gave the splits, 0 for a val_split split */
} ct_imgdir;

/* Scan dir. val_split (0 <= val_split < 1; callers default to 0.1) is the
 * share of each class that goes to the test split when dir has no train/ and
 * test/ folders: round(val_split * n) files of a class of n, at most n - 1,
 * chosen by a Fisher-Yates shuffle of the class's sorted file list seeded
 * by (seed, CRC32C of the class name), so a split only changes when its own
 * class's files change. Each split lists files in sorted order.
 * Every file's header is checked with stbi_info: an unreadable one is
 * reported on stderr ("cltrain: skipping PATH: REASON") and counted in
 * d->skipped, or with strict != 0 is an error. Errors (CT_EINPUT, one line
 * naming the folder or file): dir missing or not a folder, no class folders,
 * one class only, a class folder without readable images, no images at all,
 * train/ and test/ with different class folders, only one of train/ and
 * test/. d is left zeroed on failure. */
int ct_imgdir_scan(ct_imgdir *d, const char *dir, double val_split, uint64_t seed, int strict);
/* Frees everything d owns and zeroes it; safe on a zeroed or freed d. */
void ct_imgdir_free(ct_imgdir *d);

/* Decode path into out (size*size*channels bytes, HWC) as described above.
 * channels is 1 or 3, size >= 1. Returns 0, CT_EINPUT "PATH: REASON" for a
 * missing, unreadable, damaged or too large file, or CT_ENOMEM. */
int ct_image_decode(const char *path, int size, int channels, uint8_t *out);
/* The same on a file's bytes already in memory; name is used in messages. */
int ct_image_decode_mem(const uint8_t *buf, size_t len, const char *name, int size, int channels, uint8_t *out);
/* Largest image file read (bytes). */
#define CT_IMAGE_MAX_FILE ((size_t)1 << 30)
/* Whether buf looks like a readable image: the header checks below, then the
 * decoder's own header parse (no pixel decoding). 1, or 0 with *why set. */
int ct_image_probe_mem(const uint8_t *buf, size_t len, int *w, int *h, const char **why);

/* Formats by their first bytes (TGA, having no magic, is the rest). */
enum { CT_IMG_PNG, CT_IMG_JPEG, CT_IMG_BMP, CT_IMG_GIF, CT_IMG_TGA };
int ct_image_format(const uint8_t *buf, size_t len);
/* Checks decoders skip (data/imgcheck.c): both sides 1..CT_IMAGE_MAX_SIDE,
 * at most CT_IMAGE_MAX_PIXELS, GIF and PNG no more pixels than their
 * compression can carry in len bytes (LZW: under 4096 pixels per byte;
 * deflate: 1032 bytes per byte, at most 8 pixels per byte), BMP and TGA at
 * least as long as their header's pixel data, JPEG Huffman
 * tables within 256 codes and their segment. 1 when it passes, else 0 with
 * *why a static reason. Reads only buf[0..len). */
int ct_image_header_check(const uint8_t *buf, size_t len, int fmt, const char **why);
/* A malloc'd copy of the PNG buf without its empty IDAT chunks, its length
 * in *out_len (stb would compute NULL + 0 on one before the image data);
 * NULL when it has none (or buf is no PNG, or no memory). */
uint8_t *ct_png_without_empty_idat(const uint8_t *buf, size_t len, size_t *out_len);

/* A ct_source over one split: load(index) decodes file `index` and writes
 * x / 255 as h*w*c floats (HWC) and its label; rng is not used.
 * A file that fails to decode (say a truncated PNG that passed stbi_info) is
 * reported once on stderr ("cltrain: skipping PATH: REASON"), counted in
 * ctx->failed, and replaced by the next index (index+1, index+2, ... mod n)
 * whose file decodes: which files fail depends only on their contents, so
 * batches do not depend on thread timing. With strict, the error is
 * returned instead. If no file of the split decodes: CT_EINPUT. */
typedef struct ct_imgdir_src_ctx {
    const ct_imgdir *d;
    int split, size, channels, strict;
    _Atomic unsigned char *bad; /* per file: 1 once its decode has failed (and been reported) */
    _Atomic int failed;         /* files of this split that failed to decode */
} ct_imgdir_src_ctx;

/* Fill src and ctx (strict off; set ctx->strict after to change it).
 * Returns 0, or CT_EINPUT for a bad split, size or channel count, or an empty
 * split. Release with ct_imgdir_source_free. */
int ct_imgdir_source_init(struct ct_source *src, ct_imgdir_src_ctx *ctx, const ct_imgdir *d, int split, int size,
                          int channels);
void ct_imgdir_source_free(ct_imgdir_src_ctx *ctx);
/* ct_source.load for a ct_imgdir_src_ctx. */
int ct_imgdir_source_load(void *ctx, int index, float *dst, int32_t *label, ct_rng *rng);

#endif
