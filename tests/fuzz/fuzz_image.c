/* fuzz_image.c: image decoding (ct_image_decode_mem: the header checks, then
 * TurboJPEG or stb_image, conversion and resize) on any bytes, to 1 or 3
 * channels (the last byte picks) at 8x8. An image declaring more than 0.25 Mpx
 * is probed but not decoded: the checks allow up to 64 Mpx, whose decode
 * takes about a second under ASan, and once the corpus holds such inputs the run
 * slows from ~2800 to under 200 executions/s; the decoders' code is the same at
 * any size (test_images decodes a 4096x4096 PNG). */
#include "cltrain/images.h"
#include "fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fz_tmp();
    uint8_t out[8 * 8 * 3];
    int ch = size && (data[size - 1] & 1) ? 1 : 3, w, h;
    const char *why;
    if (ct_image_probe_mem(data, size, &w, &h, &why) == 1 && (uint64_t)w * (uint64_t)h > (1u << 18)) return 0;
    ct_image_decode_mem(data, size, "fuzz", 8, ch, out);
    return 0;
}
