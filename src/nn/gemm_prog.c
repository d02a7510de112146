/* nn/gemm_prog.c: GEMM parameter sets (ct_gemm_cfg) and their programs:
 * checking a set, describing it, whether it fits the device, and building
 * its program once per set (shared by the shapes that use it). The tuning
 * database (gemm_db.c) and the products (gemm.c) build on these.
 * Tested by tests/test_gemm.c. */
#include "cltrain/gemm.h"
#include <string.h>

int ct_gemm_cfg_check(const ct_gemm_cfg *c) {
    const int *p = c->p;
    if (c->kchunk < 16) return ct_fail(CT_EINPUT, "split-K chunk %d: expected at least 16", c->kchunk);
    if (c->variant == CT_GEMM_REG) {
        if (p[0] < 1 || p[0] > 16 || p[1] < 1 || p[1] > 4) return ct_fail(CT_EINPUT, "register GEMM TM=%d NV=%d: expected TM 1..16, NV 1..4", p[0], p[1]);
        return 0;
    }
    if (c->variant == CT_GEMM_IMG) {
        if (p[0] < 1 || p[0] > 8 || p[1] < 1 || p[1] > 8) return ct_fail(CT_EINPUT, "image GEMM TM=%d TN=%d: expected TM 1..8, TN 1..8", p[0], p[1]);
        return 0;
    }
    if (c->variant != CT_GEMM_LOCAL) return ct_fail(CT_EINPUT, "GEMM variant %d: expected reg, local or img", c->variant);
    int vw = p[5];
    if (p[0] < 1 || p[0] > 256 || p[1] < 1 || p[1] > 256 || p[2] < 1 || p[2] > 256 || p[3] < 1 || p[3] > 16 || p[4] < 1 || p[4] > 16)
        return ct_fail(CT_EINPUT, "local GEMM tile %dx%dx%d, micro-tile %dx%d: expected tiles 1..256 and micro-tiles 1..16", p[0], p[1], p[2], p[3], p[4]);
    if (vw != 1 && vw != 2 && vw != 4 && vw != 8) return ct_fail(CT_EINPUT, "local GEMM VW=%d: expected 1, 2, 4 or 8", vw);
    if (p[0] % p[3] || p[1] % p[4]) return ct_fail(CT_EINPUT, "local GEMM: TSM=%d must be a multiple of WPTM=%d and TSN=%d of WPTN=%d", p[0], p[3], p[1], p[4]);
    if (p[0] % vw || p[1] % vw || p[2] % vw) return ct_fail(CT_EINPUT, "local GEMM: TSM=%d, TSN=%d and TSK=%d must be multiples of VW=%d", p[0], p[1], p[2], vw);
    return 0;
}

void ct_gemm_cfg_str(const ct_gemm_cfg *c, char *out, size_t n) {
    if (c->variant == CT_GEMM_REG) snprintf(out, n, "reg TM=%d NV=%d KCHUNK=%d", c->p[0], c->p[1], c->kchunk);
    else if (c->variant == CT_GEMM_IMG) snprintf(out, n, "img TM=%d TN=%d KCHUNK=%d", c->p[0], c->p[1], c->kchunk);
    else snprintf(out, n, "local TSM=%d TSN=%d TSK=%d WPTM=%d WPTN=%d VW=%d KCHUNK=%d", c->p[0], c->p[1], c->p[2], c->p[3], c->p[4], c->p[5], c->kchunk);
}

int ct_gemm_cfg_fits(const ct_gemm *g, const ct_gemm_cfg *cfg) {
    if (cfg->variant == CT_GEMM_IMG) {
        cl_bool img = CL_FALSE;
        clGetDeviceInfo(g->cl->device, CL_DEVICE_IMAGE_SUPPORT, sizeof img, &img, NULL);
        if (!img) return ct_fail(CT_EDEVICE, "the image GEMM needs image support; %s has none", g->cl->device_name);
        return 0;
    }
    if (cfg->variant != CT_GEMM_LOCAL) return 0;
    const int *p = cfg->p;
    char what[160];
    ct_gemm_cfg_str(cfg, what, sizeof what);
    cl_ulong lmem = 2ull * p[2] * (p[0] + p[1]) * sizeof(float);
    size_t wg = (size_t)(p[0] / p[3]) * (p[1] / p[4]);
    if (lmem > g->cl->local_mem)
        return ct_fail(CT_EDEVICE, "GEMM %s needs %llu KiB of local memory; %s has %llu KiB", what, (unsigned long long)lmem / 1024,
                       g->cl->device_name, (unsigned long long)g->cl->local_mem / 1024);
    if (wg > g->cl->max_wg)
        return ct_fail(CT_EDEVICE, "GEMM %s needs work-groups of %zu; %s allows %zu", what, wg, g->cl->device_name, g->cl->max_wg);
    return 0;
}

int ct_gemm_prog_get(ct_gemm *g, const ct_gemm_cfg *cfg) {
    for (int i = 0; i < g->n_progs; i++)
        if (g->progs[i].cfg.variant == cfg->variant && !memcmp(g->progs[i].cfg.p, cfg->p, sizeof cfg->p)) return i;
    char what[160];
    ct_gemm_cfg_str(cfg, what, sizeof what);
    if (ct_gemm_cfg_check(cfg)) return -1;
    if (g->n_progs >= CT_GEMM_MAX_PROGS) { ct_fail(CT_EDEVICE, "GEMM %s: more than %d parameter sets in one process", what, CT_GEMM_MAX_PROGS); return -1; }
    if (ct_gemm_cfg_fits(g, cfg)) return -1;
    const int *p = cfg->p;
    char opts[160];
    size_t wg = 1;
    if (cfg->variant == CT_GEMM_REG) {
        snprintf(opts, sizeof opts, "-DTM=%d -DNV=%d", p[0], p[1]);
    } else if (cfg->variant == CT_GEMM_IMG) {
        snprintf(opts, sizeof opts, "-DTM=%d -DTN=%d", p[0], p[1]);
    } else {
        wg = (size_t)(p[0] / p[3]) * (p[1] / p[4]);
        snprintf(opts, sizeof opts, "-DTSM=%d -DTSN=%d -DTSK=%d -DWPTM=%d -DWPTN=%d -DVW=%d", p[0], p[1], p[2], p[3], p[4], p[5]);
    }
    ct_gemm_prog *gp = &g->progs[g->n_progs];
    memset(gp, 0, sizeof *gp);
    static const char *const files[] = {"gemm.cl", "gemm_local.cl", "gemm_img.cl"}, *const names[] = {"gemm", "gemm_local", "gemm_img"};
    if (ct_cl_build(g->cl, &gp->prog, files[cfg->variant], opts)) {
        ct_fail(CT_EDEVICE, "GEMM %s does not build on %s (log above)", what, g->cl->device_name);
        return -1;
    }
    cl_int e;
    gp->k = clCreateKernel(gp->prog, names[cfg->variant], &e);
    size_t kwg = 0;
    if (e == CL_SUCCESS) clGetKernelWorkGroupInfo(gp->k, g->cl->device, CL_KERNEL_WORK_GROUP_SIZE, sizeof kwg, &kwg, NULL);
    if (e != CL_SUCCESS || kwg < wg) {
        if (gp->k) clReleaseKernel(gp->k);
        clReleaseProgram(gp->prog);
        ct_fail(CT_EDEVICE, "GEMM %s: the compiled kernel allows %zu work-items per group, it needs %zu", what, kwg, wg);
        return -1;
    }
    gp->cfg = *cfg;
    return g->n_progs++;
}
