/* tfrecord.h: TFRecord files of tf.train.Example records as image data sets
 * (`cltrain images FILE.tfrecord...`, `cltrain pack FILE.tfrecord... OUT`).
 *
 * A file is a sequence of records: u64 length, u32 masked CRC32C of those 8
 * bytes, the data, u32 masked CRC32C of the data (little-endian; mask(c) =
 * ((c >> 15) | (c << 17)) + 0xa282ead8). A file may be gzip-compressed as a
 * whole (TFRecord's GZIP option); byte offsets are then offsets in the
 * uncompressed stream. Both CRCs are checked.
 *
 * Each record is a tf.train.Example, read by a small protobuf reader:
 * Example { Features features = 1 }, Features { map<string, Feature> feature
 * = 1 }, Feature { BytesList bytes_list = 1 | FloatList float_list = 2 |
 * Int64List int64_list = 3 }, packed or not. The image is the first value of
 * the bytes feature opts.image_key (default "image/encoded": PNG, JPEG, BMP,
 * GIF or TGA bytes, decoded like image folders), or with raw_h/w/c > 0 raw
 * HWC uint8 pixels of exactly that shape (MNIST-style "image_raw"). The label
 * is the first value of the int64 feature opts.label_key (default
 * "image/class/label"). Classes are 0 .. (largest training label), named
 * "0", "1", ...; a label below 0, above CT_TFR_MAX_CLASSES - 1, or (test
 * split) not below the class count is out of range.
 *
 * Every error is CT_EINPUT with one line "FILE: record R at offset O: WHAT"
 * (R from 0 in the file, O the record's first byte): truncated record, bad
 * length CRC, data CRC mismatch, not a valid Example protobuf, missing or
 * mistyped feature, label out of range, raw image of the wrong size.
 * Files are read whole into memory. Depends on common.h
 * (ct_crc32c), images.h (decoding), source.h (ct_source), zlib.
 * Tested by tests/tfrecord.sh (records written by the PyPI tfrecord package)
 * and the fuzz harness tests/fuzz/tfrecord.c. */
#ifndef CLTRAIN_TFRECORD_H
#define CLTRAIN_TFRECORD_H
#include <stddef.h>
#include <stdint.h>
#include "cltrain/source.h"

#define CT_TFR_MAX_CLASSES 65536
#define CT_TFR_MAX_FILE ((uint64_t)1 << 36) /* 64 GiB uncompressed */

typedef struct ct_tfr_opts {
    const char *image_key;     /* NULL: "image/encoded" */
    const char *label_key;     /* NULL: "image/class/label" */
    int raw_h, raw_w, raw_c;   /* all > 0: raw pixels of this shape; else encoded images */
} ct_tfr_opts;

typedef struct ct_tfr_record {
    const uint8_t *img;        /* the image feature's bytes (into the file's buffer) */
    size_t len;
    int32_t label;
    int file;                  /* index into the set's files */
    int64_t index, offset;     /* record number and first byte in its file */
} ct_tfr_record;

/* The next record of buf[0..size) from *pos: its data and length, *pos moved
 * past it. 1: a record; 0: clean end of data (pos == size); -1: damaged, with
 * the reason in why. Independent of files: the fuzz harness calls it. */
int ct_tfr_next(const uint8_t *buf, size_t size, size_t *pos, const uint8_t **data, size_t *len, char *why,
                size_t why_size);
/* Find the image bytes and the label in one serialized Example. 0, or -1 with
 * the reason in why (invalid protobuf, missing or mistyped feature). */
int ct_tfr_example(const uint8_t *p, size_t n, const ct_tfr_opts *o, const uint8_t **img, size_t *img_len,
                   int64_t *label, char *why, size_t why_size);

/* Train and test records from two lists of files, or (n_test == 0) a share
 * val_split of each class from the train files, chosen as ct_imgdir_scan
 * chooses (seeded Fisher-Yates per class, seeded by the class name). Each
 * split lists its records class by class, in file order within a class, as
 * an image folder lists its files. */
typedef struct ct_tfr_data {
    int n_files;
    char **paths;
    uint8_t **bufs;            /* each file's contents, uncompressed */
    size_t *sizes;
    int n_classes;
    char **class_names;        /* "0", "1", ... */
    int n[2];                  /* records of [CT_SPLIT_TRAIN], [CT_SPLIT_TEST] */
    ct_tfr_record *rec[2];
    int raw_h, raw_w, raw_c;   /* from the options */
} ct_tfr_data;

int ct_tfr_open(ct_tfr_data *d, const char *const *train, int n_train, const char *const *test, int n_test,
                double val_split, uint64_t seed, const ct_tfr_opts *o);
void ct_tfr_free(ct_tfr_data *d);

/* Record r's image as size x size x channels bytes (encoded images: decoded
 * and resized as image folders are; raw: copied, size and channels must be
 * the raw shape). CT_EINPUT "FILE: record R at offset O: ..." when it does
 * not decode. */
int ct_tfr_decode(const ct_tfr_data *d, const ct_tfr_record *r, int size, int channels, uint8_t *out);

/* A ct_source over split `split` (x / 255 as floats, HWC). */
typedef struct ct_tfr_src_ctx { const ct_tfr_data *d; int split, size, channels; } ct_tfr_src_ctx;
int ct_tfr_source_init(struct ct_source *src, ct_tfr_src_ctx *ctx, const ct_tfr_data *d, int split, int size,
                       int channels);
#endif
