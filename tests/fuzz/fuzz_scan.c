/* fuzz_scan.c: the image-folder scan (ct_imgdir_scan) over two classes whose
 * one file each is the input, under the name .png and .jpg, then the decode
 * of whatever it kept. */
#include "cltrain/images.h"
#include "fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fz_write("d/a/x.png", data, size);
    fz_write("d/b/y.jpg", data, size);
    char dir[512];
    snprintf(dir, sizeof dir, "%s/d", fz_tmp());
    ct_imgdir d;
    if (ct_imgdir_scan(&d, dir, 0, 1, 0) == 0) {
        uint8_t out[4 * 4 * 3];
        for (int i = 0; i < d.split[0].n; i++) ct_image_decode(d.split[0].paths[i], 4, 3, out);
        ct_imgdir_free(&d);
    }
    return 0;
}
