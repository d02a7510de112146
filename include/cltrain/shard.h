/* shard.h: record shards, cltrain's own file format for decoded, resized
 * images (written by `cltrain pack`), read back by random access.
 *
 * A split ("train", "test") is a set of files OUT/SPLIT-00000.shard,
 * OUT/SPLIT-00001.shard, ... Each file is a header followed by fixed-size
 * records, so record i of a file starts at header_size + i * record_size.
 * All integers are little-endian; CRC32C is the Castagnoli CRC (ct_crc32c).
 *
 * Header (header_size bytes):
 *   offset  size  field
 *        0     8  magic "CLTSHARD"
 *        8     4  u32 version = 1
 *       12     4  u32 header_size: bytes from offset 0 to the end of the header CRC
 *       16    16  split name ("train"), NUL-padded: 1..15 bytes of [a-z0-9_-]
 *       32     4  u32 height  (1..16384)
 *       36     4  u32 width   (1..16384)
 *       40     4  u32 channels (1..4)
 *       44     4  u32 n_classes (1..1048576)
 *       48     8  u64 n_records in this file
 *       56     8  u64 first_record: split-wide index of this file's record 0
 *       64     8  u64 total_records in all files of the split
 *       72     4  u32 shard_index (0-based; also in the file name)
 *       76     4  u32 shard_count: files in the split
 *       80     4  u32 pack_crc: p = 0, then for every record of the split in
 *                 order p = CRC32C(LE32(p) || LE32(record CRC)); the same in
 *                 every file of one pack, so files of two packs do not mix
 *       84     .  class names, n_classes times: u32 length L (0..4096), L bytes (UTF-8, no NUL)
 *   H - 4      4  u32 CRC32C of header bytes 0 .. H-5
 * Record (record_size = 4 + height*width*channels + 4 bytes):
 *        0     4  u32 label (< n_classes)
 *        4     P  pixels, uint8, HWC row-major (P = height*width*channels)
 *    4 + P     4  u32 CRC32C of the label and pixel bytes (0 .. 3+P)
 * A file's size is exactly header_size + n_records * record_size.
 *
 * Every header field is checked on open (magic, version, CRC, ranges, the
 * same shape and classes and pack_crc in every file, indices 0..count-1 all
 * present, first_record running on, sizes exact); every record's CRC and
 * label on read. A single damaged byte anywhere is therefore always an error
 * (CRC32C detects every error burst of up to 32 bits), never a wrong pixel.
 * Written to temporary names (.SPLIT-00000.shard.tmp.PID), fsync'd and
 * renamed only once the whole split is complete; stale files of an older,
 * larger pack are removed. Full description: docs/SHARDS.md.
 * Depends on common.h (ct_crc32c), source.h (ct_source).
 * Tested by tests/test_images.c and tests/pack.sh. */
#ifndef CLTRAIN_SHARD_H
#define CLTRAIN_SHARD_H
#include <stdint.h>
#include <stdio.h>
#include "cltrain/source.h"

#define CT_SHARD_MAGIC "CLTSHARD"
#define CT_SHARD_VERSION 1
#define CT_SHARD_FIXED 84            /* header bytes before the class names */
#define CT_SHARD_MAX_SIDE 16384
#define CT_SHARD_MAX_CLASSES (1 << 20)
#define CT_SHARD_MAX_NAME 4096
#define CT_SHARD_MAX_HEADER (64u << 20)

typedef struct ct_shard_writer {
    char *dir, *split;
    int height, width, channels, n_classes;
    char **names;
    long per_shard;        /* records per file */
    long n_records;        /* records written so far */
    int n_shards;          /* files started so far */
    uint64_t bytes;        /* bytes written so far */
    /* private */
    long in_cur;
    char **tmp;            /* temporary path of each file */
    long *counts;          /* records in each file */
    FILE *f;
    uint8_t *rec;
    uint32_t pack_crc;
    int err;
} ct_shard_writer;

/* Start writing split `split` of (height x width x channels) images with
 * n_classes class names into out_dir (created if missing), at most
 * records_per_shard records per file. CT_EINPUT for bad arguments, CT_EIO
 * when out_dir cannot be made. */
int ct_shard_writer_open(ct_shard_writer *w, const char *out_dir, const char *split, int height, int width,
                         int channels, int n_classes, const char *const *names, long records_per_shard);
/* Append one record. CT_EINPUT for a label out of range, CT_EIO when a write fails. */
int ct_shard_write(ct_shard_writer *w, int32_t label, const uint8_t *pixels);
/* Finish every file's header, fsync, rename into place, remove stale files of
 * an earlier pack of the split. A split with no records gets one file with
 * none. On failure the temporary files are removed. n_records, n_shards and
 * bytes stay readable afterwards; everything else is freed. */
int ct_shard_writer_close(ct_shard_writer *w);
/* Give up: remove the temporary files, free. Safe after close, or on a zeroed w. */
void ct_shard_writer_abort(ct_shard_writer *w);

typedef struct ct_shard_file {
    char *path;
    int fd;
    uint64_t first, n;     /* first_record, n_records */
    uint32_t header_size;
} ct_shard_file;

typedef struct ct_shardset {
    char *dir, *split;
    int height, width, channels, n_classes;
    char **class_names;
    int64_t n;             /* records in all files */
    size_t record_size, pixels;
    uint32_t pack_crc;
    int n_shards;
    ct_shard_file *shards;
} ct_shardset;

/* Open every dir/SPLIT-NNNNN.shard and check them all (see above).
 * CT_EINPUT with one line naming the file and what is wrong ("re-run
 * cltrain pack"), or CT_ENOMEM. s is zeroed on failure. */
int ct_shardset_open(ct_shardset *s, const char *dir, const char *split);
/* Record `index` (0..n-1, split-wide): its label and height*width*channels
 * pixel bytes. A CRC mismatch or a label out of range is CT_EINPUT:
 * "FILE: record R at offset O: CRC mismatch (damaged shard; re-run cltrain
 * pack)", R and O counted within FILE. Safe from several threads at once. */
int ct_shardset_read(const ct_shardset *s, int64_t index, int32_t *label, uint8_t *pixels);
/* The label of every record (n of them) from its first 4 bytes, without the
 * CRC check (ct_shardset_read does that when the record is read); a label
 * out of range reads as 0. CT_EINPUT when a file cannot be read. */
int ct_shardset_labels(const ct_shardset *s, int32_t *labels);
/* Close the files, free, zero; safe on a zeroed or closed set. */
void ct_shardset_close(ct_shardset *s);

/* A ct_source over s: load(index) writes pixels / 255 as floats (HWC) and
 * the label; a damaged record is returned as an error, never replaced.
 * CT_EINPUT when s holds more than INT_MAX records. */
int ct_shardset_source_init(struct ct_source *src, const ct_shardset *s);

#endif
