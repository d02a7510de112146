/* fuzz_idx.c: the IDX loader (raw and .gz) on an image file and a label file
 * cut from one input: byte 0 says where the label file starts (in 1/256ths). */
#include "cltrain/data.h"
#include "fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    size_t cut = 1 + (size - 1) * data[0] / 256;
    char img[512];
    snprintf(img, sizeof img, "%s", fz_write("images", data + 1, cut - 1));
    const char *lab = fz_write("labels", data + cut, size - cut);
    ct_dataset ds;
    if (ct_idx_load(&ds, img, lab, 10) == 0) ct_dataset_free(&ds);
    return 0;
}
