/* fuzz_targz.c: the .tar.gz extractor (CIFAR archives) on any archive; what
 * it extracts goes to a private folder emptied after each input. */
#include "cltrain/cifar.h"
#include "cltrain/targz.h"
#include "fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char arch[512], out[512];
    snprintf(arch, sizeof arch, "%s", fz_write("a.tar.gz", data, size));
    snprintf(out, sizeof out, "%s/out", fz_tmp());
    int n;
    ct_targz_extract(arch, out, &n);
    fz_rmtree(out, 0);
    return 0;
}
