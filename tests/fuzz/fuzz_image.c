/* fuzz_image.c: image decoding (ct_image_decode_mem: the header checks, then
 * TurboJPEG or stb_image, conversion and resize) on any bytes, to 1 or 3
 * channels (the last byte picks) at 8x8. */
#include "cltrain/images.h"
#include "fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fz_tmp();
    uint8_t out[8 * 8 * 3];
    int ch = size && (data[size - 1] & 1) ? 1 : 3, w, h;
    const char *why;
    ct_image_probe_mem(data, size, &w, &h, &why);
    ct_image_decode_mem(data, size, "fuzz", 8, ch, out);
    return 0;
}
