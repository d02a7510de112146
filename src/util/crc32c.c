/* util/crc32c.c: CRC32C (Castagnoli), as TFRecord framing and record shards
 * use it. x86-64 with SSE4.2 uses the crc32 instruction, 8 bytes at a time
 * (chosen at run time); elsewhere a slice-by-8 table. Tested by
 * tests/test_tboard.c (known values) and tests/test_images.c (shards). */
#include "cltrain/common.h"
#include <pthread.h>
#include <string.h>

static uint32_t table[8][256];
static pthread_once_t table_once = PTHREAD_ONCE_INIT;

static void table_init(void) {
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++) c = c & 1 ? (c >> 1) ^ 0x82F63B78u : c >> 1;
        table[0][i] = c;
    }
    for (int t = 1; t < 8; t++)
        for (int i = 0; i < 256; i++) table[t][i] = (table[t - 1][i] >> 8) ^ table[0][table[t - 1][i] & 0xFF];
}

static uint32_t crc_table(uint32_t c, const uint8_t *p, size_t n) {
    pthread_once(&table_once, table_init);
    while (n >= 8) {
        uint32_t lo, hi;
        memcpy(&lo, p, 4);
        memcpy(&hi, p + 4, 4);
        lo ^= c; /* little-endian hosts (the only ones cltrain's file formats support) */
        c = table[7][lo & 0xFF] ^ table[6][(lo >> 8) & 0xFF] ^ table[5][(lo >> 16) & 0xFF] ^ table[4][lo >> 24] ^
            table[3][hi & 0xFF] ^ table[2][(hi >> 8) & 0xFF] ^ table[1][(hi >> 16) & 0xFF] ^ table[0][hi >> 24];
        p += 8;
        n -= 8;
    }
    while (n--) c = table[0][(c ^ *p++) & 0xFF] ^ (c >> 8);
    return c;
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <nmmintrin.h>
__attribute__((target("sse4.2"))) static uint32_t crc_hw(uint32_t c, const uint8_t *p, size_t n) {
    uint64_t c64 = c;
    while (n >= 8) {
        uint64_t v;
        memcpy(&v, p, 8);
        c64 = _mm_crc32_u64(c64, v);
        p += 8;
        n -= 8;
    }
    c = (uint32_t)c64;
    while (n--) c = _mm_crc32_u8(c, *p++);
    return c;
}
static int have_hw(void) {
    static int cached = -1;
    if (cached < 0) cached = __builtin_cpu_supports("sse4.2") ? 1 : 0; /* racing writers store the same value */
    return cached;
}
#endif

uint32_t ct_crc32c(const void *data, size_t n) {
    const uint8_t *p = data;
#if defined(__x86_64__) && defined(__GNUC__)
    if (have_hw() && !getenv("CLTRAIN_CRC_TABLE")) return crc_hw(0xFFFFFFFFu, p, n) ^ 0xFFFFFFFFu;
#endif
    return crc_table(0xFFFFFFFFu, p, n) ^ 0xFFFFFFFFu;
}
