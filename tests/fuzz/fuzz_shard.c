/* fuzz_shard.c: the record-shard reader: open a one-file shard set and read
 * (up to 64 of) its records. */
#include "cltrain/shard.h"
#include "fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fz_write("s/train-00000.shard", data, size);
    char dir[512];
    snprintf(dir, sizeof dir, "%s/s", fz_tmp());
    ct_shardset s;
    if (ct_shardset_open(&s, dir, "train") == 0) {
        size_t rec = (size_t)s.height * s.width * s.channels;
        uint8_t *px = malloc(rec ? rec : 1);
        int32_t label;
        for (int64_t i = 0; i < s.n && i < 64; i++) ct_shardset_read(&s, i, &label, px);
        free(px);
        ct_shardset_close(&s);
    }
    return 0;
}
