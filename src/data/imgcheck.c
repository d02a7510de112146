/* data/imgcheck.c: structural checks on an image file's bytes before any
 * decoder sees them, for what decoders let through: a side of 0 (which made
 * stb_image_resize assert), BMP and TGA files shorter than the pixels their
 * header promises (stb fills the rest with zeros and calls it a success, so
 * a 183-byte TGA "decoded" as 4112x4112), PNG's size limit (stb's reason was
 * overwritten by "unknown image type"), and JPEG Huffman tables whose counts
 * exceed 256 or their segment (Debian's stb_image 2.27 writes past its
 * tables on those). Decompression bombs: more than CT_IMAGE_MAX_PIXELS, or a
 * GIF or PNG declaring more pixels than its compression can carry in the
 * file (a 104-byte GIF declaring 12545x4097 took stb over 10 s and 200 MB),
 * or a PNG chunk longer than the file.
 * No decoding, no allocation: bounded by the buffer. ct_png_without_empty_idat
 * copies a PNG without its empty IDAT chunks (legal, but stb computes NULL +
 * 0 on one before the first data: undefined behaviour UBSan reports); the
 * decoder uses the copy when there is one.
 * Tested by tests/test_images.c (each case) and tests/fuzz/fuzz_image.c. */
#include "cltrain/images.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define STR_(x) #x
#define STR(x) STR_(x)

static uint32_t le16(const uint8_t *p) { return (uint32_t)p[0] | (uint32_t)p[1] << 8; }
static uint32_t le32(const uint8_t *p) { return le16(p) | le16(p + 2) << 16; }
static uint32_t be16(const uint8_t *p) { return (uint32_t)p[0] << 8 | p[1]; }
static uint32_t be32(const uint8_t *p) { return be16(p) << 16 | be16(p + 2); }

int ct_image_format(const uint8_t *b, size_t n) {
    if (n >= 8 && !memcmp(b, "\x89PNG\r\n\x1a\n", 8)) return CT_IMG_PNG;
    if (n >= 3 && b[0] == 0xFF && b[1] == 0xD8 && b[2] == 0xFF) return CT_IMG_JPEG;
    if (n >= 2 && b[0] == 'B' && b[1] == 'M') return CT_IMG_BMP;
    if (n >= 4 && !memcmp(b, "GIF8", 4)) return CT_IMG_GIF;
    return CT_IMG_TGA; /* TGA has no magic; stb tests its header's plausibility */
}

/* a reason with figures in it, one per thread (scans run in several) */
static _Thread_local char reason[200];

static int sides(uint64_t w, uint64_t h, const char **why) {
    if (w < 1 || h < 1) { *why = "width or height 0 in the header"; return 0; }
    if (w > CT_IMAGE_MAX_SIDE || h > CT_IMAGE_MAX_SIDE) {
        *why = "larger than " STR(CT_IMAGE_MAX_SIDE) " pixels a side";
        return 0;
    }
    if (w * h > (uint64_t)CT_IMAGE_MAX_PIXELS) {
        snprintf(reason, sizeof reason, "%llux%llu = %llu pixels, more than the %lld (%lld Mpx) cltrain decodes; downscale it first",
                 (unsigned long long)w, (unsigned long long)h, (unsigned long long)(w * h), CT_IMAGE_MAX_PIXELS,
                 CT_IMAGE_MAX_PIXELS >> 20);
        *why = reason;
        return 0;
    }
    return 1;
}

/* w x h pixels out of n bytes of a format whose compression carries at most
 * per_byte pixels per byte: more is a decompression bomb. slack: pixels a
 * file may declare beyond its data (a GIF's canvas around a small frame). */
static int carried(uint64_t w, uint64_t h, size_t n, uint64_t per_byte, uint64_t slack, const char *format, const char **why) {
    if (w * h <= per_byte * (uint64_t)n + slack) return 1;
    snprintf(reason, sizeof reason, "declares %llux%llu pixels in %zu bytes, more than %s compression can carry "
             "(a decompression bomb?)", (unsigned long long)w, (unsigned long long)h, n, format);
    *why = reason;
    return 0;
}

static int truncated(const char **why) {
    *why = "truncated: shorter than the pixel data its header declares";
    return 0;
}

static int bmp_check(const uint8_t *b, size_t n, const char **why) {
    if (n < 26) return truncated(why);
    uint32_t off = le32(b + 10), hsz = le32(b + 14), bpp, comp = 0;
    int64_t w, h;
    if (hsz == 12) {
        w = le16(b + 18), h = le16(b + 20), bpp = le16(b + 24);
    } else {
        if (n < 34) return truncated(why);
        w = (int32_t)le32(b + 18), h = (int32_t)le32(b + 22), bpp = le16(b + 28), comp = le32(b + 30);
    }
    if (h < 0) h = -h; /* top-down rows */
    if (!sides(w < 0 ? 0 : (uint64_t)w, (uint64_t)h, why)) return 0;
    if (comp == 1 || comp == 2) return 1; /* RLE: stb refuses it with its own reason */
    if (bpp != 1 && bpp != 4 && bpp != 8 && bpp != 16 && bpp != 24 && bpp != 32) return 1; /* stb's reason */
    uint64_t row = ((uint64_t)w * bpp + 31) / 32 * 4, start = 14 + (uint64_t)hsz;
    if (off > start) start = off;
    if ((uint64_t)n < start + row * (uint64_t)h) return truncated(why);
    return 1;
}

/* TGA has no signature: a header stb_image would take for one (its own
 * stbi__tga_test), else the file is no image of a kind cltrain reads. */
static int tga_plausible(const uint8_t *b, size_t n) {
    if (n < 18 || b[1] > 1) return 0;
    unsigned type = b[2], cm = b[7], bpp = b[16];
    if (b[1] == 1 && ((type != 1 && type != 9) || (cm != 8 && cm != 15 && cm != 16 && cm != 24 && cm != 32))) return 0;
    if (b[1] == 0 && type != 2 && type != 3 && type != 10 && type != 11) return 0;
    if (b[1] == 1 && bpp != 8 && bpp != 16) return 0;
    return bpp == 8 || bpp == 15 || bpp == 16 || bpp == 24 || bpp == 32;
}

static int tga_check(const uint8_t *b, size_t n, const char **why) {
    if (!tga_plausible(b, n)) {
        *why = "not an image: no PNG, JPEG, BMP or GIF signature and no TGA header; give an image file";
        return 0;
    }
    unsigned type = b[2], bpp = b[16], cmbits = b[7];
    uint64_t w = le16(b + 12), h = le16(b + 14);
    if (!sides(w, h, why)) return 0;
    unsigned base = type & ~8u;
    if (base < 1 || base > 3 || (bpp != 8 && bpp != 15 && bpp != 16 && bpp != 24 && bpp != 32))
        return 1; /* not a TGA stb reads; it says so itself */
    uint64_t px = (bpp + 7) / 8, cmap = b[1] ? le16(b + 5) * (uint64_t)((cmbits + 7) / 8) : 0;
    uint64_t pos = 18 + (uint64_t)b[0] + cmap;
    if (!(type & 8)) return (uint64_t)n >= pos + w * h * px ? 1 : truncated(why);
    /* RLE: walk the packets (each takes at least 2 bytes, so at most n/2 of them) */
    for (uint64_t left = w * h; left > 0;) {
        if (pos >= n) return truncated(why);
        uint8_t hd = b[pos++];
        uint64_t cnt = (uint64_t)(hd & 127) + 1;
        pos += hd & 128 ? px : cnt * px;
        if (pos > n) return truncated(why);
        left -= cnt < left ? cnt : left;
    }
    return 1;
}

/* Every chunk before IEND fits in the file (its length, type, data and CRC):
 * stb reserves an IDAT's declared length before reading it, so a 114-byte
 * file declaring a 1.87 GB IDAT made it allocate 2 GiB (found by the scan
 * fuzzer; under a memory limit that read as "out of memory", not a bad file).
 * A missing IEND is the decoder's to report. */
static int png_chunks_fit(const uint8_t *b, size_t n, const char **why) {
    for (size_t i = 8; i + 8 <= n;) {
        uint64_t len = be32(b + i);
        if (!memcmp(b + i + 4, "IEND", 4)) return 1;
        if (len + 12 > n - i) {
            snprintf(reason, sizeof reason, "truncated: a chunk at byte %zu declares %llu bytes and a "
                     "CRC, but only %zu bytes follow its header", i, (unsigned long long)len, n - i - 8);
            *why = reason;
            return 0;
        }
        i += (size_t)len + 12;
    }
    return 1;
}

/* deflate expands a byte to at most 1032, and a PNG byte holds at most 8
 * pixels (1 bit each) */
static int png_check(const uint8_t *b, size_t n, const char **why) {
    if (n < 24 || memcmp(b + 12, "IHDR", 4)) { *why = "corrupt PNG (no IHDR first)"; return 0; }
    uint64_t w = be32(b + 16), h = be32(b + 20);
    return sides(w, h, why) && carried(w, h, n, 8 * 1032, 0, "PNG's", why) && png_chunks_fit(b, n, why);
}

/* stb decodes a GIF's whole canvas (the logical screen). LZW: a code of b
 * bits stands for at most 2^b pixels, so at most 4096/12 pixels per bit
 * (2731 per byte; the check allows 4096); a canvas may be up to 1 Mpx
 * larger than its frames. */
static int gif_check(const uint8_t *b, size_t n, const char **why) {
    if (n < 10) return truncated(why);
    uint64_t w = le16(b + 6), h = le16(b + 8);
    return sides(w, h, why) && carried(w, h, n, 4096, 1 << 20, "GIF's", why);
}

/* Each DHT table: class/id byte, 16 counts, then as many symbols as the
 * counts add up to: at most 256 and inside the segment. */
static int dht_check(const uint8_t *p, size_t len, const char **why) {
    while (len > 0) {
        if (len < 17 || (p[0] >> 4) > 1 || (p[0] & 15) > 3) { *why = "corrupt JPEG Huffman table header"; return 0; }
        size_t total = 0;
        for (int i = 1; i <= 16; i++) total += p[i];
        if (total > 256 || total > len - 17) { *why = "corrupt JPEG Huffman table (more codes than fit)"; return 0; }
        p += 17 + total;
        len -= 17 + total;
    }
    return 1;
}

static int jpeg_check(const uint8_t *b, size_t n, const char **why) {
    size_t i = 2;
    while (i + 1 < n) {
        if (b[i] != 0xFF) { /* entropy-coded data after SOS: find the next marker */
            i++;
            continue;
        }
        uint8_t m = b[i + 1];
        if (m == 0xFF) { i++; continue; }                        /* fill byte */
        if (m == 0x00 || (m >= 0xD0 && m <= 0xD7) || m == 0x01) { i += 2; continue; } /* stuffing, RSTn, TEM */
        if (m == 0xD9) return 1;                                 /* EOI */
        if (i + 4 > n) break;
        size_t L = be16(b + i + 2);
        if (L < 2 || i + 2 + L > n) { *why = "corrupt or truncated JPEG segment"; return 0; }
        if (m == 0xC4 && !dht_check(b + i + 4, L - 2, why)) return 0;
        if (m >= 0xC0 && m <= 0xCF && m != 0xC4 && m != 0xC8 && m != 0xCC) {
            if (L < 8) { *why = "corrupt JPEG frame header"; return 0; }
            if (!sides(be16(b + i + 7), be16(b + i + 5), why)) return 0;
        }
        i += 2 + L;
    }
    return 1; /* a missing end is the decoder's to report */
}

/* Copies chunks from offset 8 without the empty IDATs (when c is not NULL);
 * returns how many it dropped. A chunk that runs past the end (an empty IDAT
 * whose CRC is cut is still dropped), and anything after IEND, is copied as
 * it is (the decoder reports it). *o: bytes written. */
static int png_drop_empty_idat(const uint8_t *b, size_t n, uint8_t *c, size_t *o) {
    int dropped = 0;
    size_t i = 8;
    *o = 8;
    if (c) memcpy(c, b, 8);
    while (i + 8 <= n) {
        uint64_t len = 12 + (uint64_t)be32(b + i);
        int idat = !memcmp(b + i + 4, "IDAT", 4), end = !memcmp(b + i + 4, "IEND", 4);
        if (idat && len == 12) { /* stb acts on an empty IDAT before reading its CRC: drop it even when that is cut */
            dropped++;
            i += n - i < 12 ? n - i : 12;
            continue;
        }
        if (i + len > n) break;
        if (c) memcpy(c + *o, b + i, (size_t)len);
        *o += (size_t)len;
        i += (size_t)len;
        if (end) break;
    }
    if (c) memcpy(c + *o, b + i, n - i);
    *o += n - i;
    return dropped;
}

uint8_t *ct_png_without_empty_idat(const uint8_t *b, size_t n, size_t *m) {
    size_t o;
    if (ct_image_format(b, n) != CT_IMG_PNG || !png_drop_empty_idat(b, n, NULL, &o)) return NULL;
    uint8_t *c = malloc(n);
    if (c) png_drop_empty_idat(b, n, c, m);
    return c;
}

int ct_image_header_check(const uint8_t *b, size_t n, int fmt, const char **why) {
    switch (fmt) {
    case CT_IMG_PNG: return png_check(b, n, why);
    case CT_IMG_JPEG: return jpeg_check(b, n, why);
    case CT_IMG_BMP: return bmp_check(b, n, why);
    case CT_IMG_GIF: return gif_check(b, n, why);
    default: return tga_check(b, n, why);
    }
}
