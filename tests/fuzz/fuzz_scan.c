/* fuzz_scan.c: the image-folder scan (ct_imgdir_scan) over two classes whose
 * one file each is the input, under the name .png and .jpg, then the decode
 * of whatever it kept. An input declaring more than 4,096 pixels (64x64) is scanned
 * but not decoded: resizing such images under the coverage instrumentation took
 * most of the time (the run fell to ~90 executions/s), and fuzz_image covers
 * decoding and resizing up to 0.25 Mpx. */
#include "cltrain/images.h"
#include "fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fz_write("d/a/x.png", data, size);
    fz_write("d/b/y.jpg", data, size);
    char dir[512];
    snprintf(dir, sizeof dir, "%s/d", fz_tmp());
    ct_imgdir d;
    int w, h;
    const char *why;
    int big = ct_image_probe_mem(data, size, &w, &h, &why) == 1 && (uint64_t)w * (uint64_t)h > (1u << 12);
    if (ct_imgdir_scan(&d, dir, 0, 1, 0) == 0) {
        uint8_t out[4 * 4 * 3];
        for (int i = 0; i < d.split[0].n && !big; i++) ct_image_decode(d.split[0].paths[i], 4, 3, out);
        ct_imgdir_free(&d);
    }
    return 0;
}
