/* nn/gemm.c: host side of kernels/gemm.cl, kernels/gemm_local.cl and the
 * CLBlast path. The default variant and parameters come from the device
 * class table in gemm_defaults.c, or CLTRAIN_GEMM ("TM,NV,KCHUNK" for the
 * register kernel, "local,TSM,TSN,TSK,WPTM,WPTN,VW,KCHUNK" for the local
 * one); a tuning database (gemm_db.c) picks per shape. Programs are built
 * once per parameter set (gemm_prog.c) and shared by the shapes that use
 * them. Weight-gradient products (reduction over the batch, transA), and on
 * CPUs products whose B outgrows a core's cache, are split along K into
 * cache-sized chunks whose partial tiles gemm_reduce sums: without it every
 * tile would stream the whole activation matrix (or B) once more.
 * Tested by tests/test_gemm.c; timed by `cltrain bench kernels`. */
#include "cltrain/gemm.h"
#include <limits.h>
#include <clblast_c.h>
#include <string.h>

enum { GEMM_WORK_ALIGN = 256 };
/* The B a CPU core keeps in cache through one product: half of the 1-2 MiB
 * L2 of current x86 cores (OpenCL reports no per-core cache size; PoCL's
 * "global memory cache" is the shared L3). */
enum { GEMM_CPU_CACHE = 1 << 20 };

/* the C tile one work-item (reg) or one work-group (local) computes */
static void tile_dims(const ct_gemm_cfg *c, int *tm, int *tn) {
    if (c->variant == CT_GEMM_REG) { *tm = c->p[0]; *tn = 16 * c->p[1]; }
    else { *tm = c->p[0]; *tn = c->p[1]; } /* local: the work-group's tile; img: the work-item's */
}

/* The loop iterations one work-item of c's kernel runs per unit of K, every
 * loop counted and none taken as unrolled (llvmpipe unrolled gemm_img.cl's
 * tile loops but not gemm.cl's at TM=8), each loop's exit test counted too:
 * for a device that ends a work-item's loops after a total number of
 * iterations (ct_cl_loop_limit). */
static int k_loop_cost(const ct_gemm_cfg *c) {
    const int *p = c->p;
    if (c->variant == CT_GEMM_REG) /* K step; B's vectors (edge tiles: 16 scalar loads each); rows x vectors */
        return 1 + (p[1] + 1) + 17 * p[1] + (p[0] + 1) + p[0] * (p[1] + 1);
    if (c->variant == CT_GEMM_IMG) /* K step; A's texels; B's texels; rows x columns */
        return 1 + (p[0] + 1) + (p[1] + 1) + (p[0] + 1) + p[0] * (p[1] + 1);
    /* local, per K tile of p[2]: the tile loop, staging A's and B's tiles (vectors of p[5], edge loads and
     * stores element-wise), and per k of the tile the work-item's p[3] x p[4] outputs */
    int nthr = (p[0] / p[3]) * (p[1] / p[4]), vec = 1 + 2 * (p[5] + 1);
    int tile = 1 + (p[2] * p[0] / p[5] / nthr + 1) * vec + (p[2] * p[1] / p[5] / nthr + 1) * vec +
               p[2] * (1 + (p[3] + 1) + (p[4] + 1) + (p[3] + 1) + p[3] * (p[4] + 1)) + 1;
    return (tile + p[2] - 1) / p[2];
}

/* The longest K chunk one work-item of c may take on this device, or 0 for any: under the device's loop
 * limit with room for the loops before and after the K loop (initialisation, edges, the epilogue). */
static int loop_kmax(const ct_gemm *g, const ct_gemm_cfg *c) {
    long kmax = ct_cl_loop_room(g->cl, k_loop_cost(c));
    if (kmax == LONG_MAX) return 0;
    return kmax < 16 ? 16 : (int)kmax;
}

/* splits by the rules below, before the device's loop limit */
static int splits_wanted(const ct_gemm *g, const ct_gemm_cfg *c, int transA, int M, int N, int K) {
    int tm, tn;
    tile_dims(c, &tm, &tn);
    long tiles = (long)((M + tm - 1) / tm) * ((N + tn - 1) / tn);
    /* Split when the reduction is long and the output small: weight gradients
     * (transA), too few tiles to keep every compute unit busy, or (the
     * register kernel on a CPU) a B too large for a core's cache, which
     * every strip of row tiles would otherwise stream whole from L3 again:
     * a dense layer's forward, 128x128x9216 at 66 GFLOP/s unsplit and 237
     * split (bench kernels, mnist-cnn; 2048->256: 146 -> 218). */
    if (K < 4 * c->kchunk) return 1;
    long busy = c->variant != CT_GEMM_LOCAL ? 8L * g->cl->compute_units : 2L * g->cl->compute_units;
    int b_spills = g->cl->is_cpu && c->variant == CT_GEMM_REG && (size_t)K * N * sizeof(float) > GEMM_CPU_CACHE;
    if (!transA && tiles >= busy && !b_spills) return 1;
    int s = (K + c->kchunk - 1) / c->kchunk;
    return s > 1024 ? 1024 : s;
}

int ct_gemm_splits(const ct_gemm *g, const ct_gemm_cfg *c, int transA, int M, int N, int K) {
    int s = splits_wanted(g, c, transA, M, N, K), kmax = loop_kmax(g, c);
    /* a device that ends long loops early (Mesa 22.3's llvmpipe: 65535 iterations per work-item, cl.h) gets
     * chunks that fit, whatever the rules wanted: unsplit, TN 5x1024x3000 came out as NaN there at TM=8 */
    if (kmax && (K + s - 1) / s > kmax) s = (K + kmax - 1) / kmax;
    return s > 1024 ? 1024 : s;
}

void ct_gemm_default_for(const ct_gemm *g, int N, int *prog, ct_gemm_cfg *cfg) {
    int narrow = N <= 16 && g->narrow_prog != g->def_prog, wide = N >= g->wide_n && g->wide_prog != g->def_prog;
    *prog = narrow ? g->narrow_prog : wide ? g->wide_prog : g->def_prog;
    *cfg = narrow ? g->narrow : wide ? g->wide : g->def;
}

/* the program and split-K chunk a shape runs with on our kernels */
static void shape_prog(ct_gemm *g, int transA, int transB, int M, int N, int K, int *prog, int *kchunk) {
    ct_gemm_choice *c = g->use_choices ? ct_gemm_find(g, transA, transB, M, N, K) : NULL;
    if (c && c->path == CT_GEMM_NATIVE && c->prog >= 0) { *prog = c->prog; *kchunk = c->cfg.kchunk; return; }
    ct_gemm_cfg d;
    ct_gemm_default_for(g, N, prog, &d);
    *kchunk = d.kchunk;
}

/* The register kernel streams a panel of B's rows through each work-item.
 * When those rows lie a multiple of 2 KiB apart (and at least 4 KiB), they
 * fall in a few sets of a CPU's L1 and L2 and the panel runs from L3: PoCL,
 * sgemm 1024^3 at 47 GFLOP/s against 137 at 1040^3 (1536: 36 against 82 at
 * 1552). Such a B is copied with its rows one cache line further apart. The
 * ld to use for a B of rows x ld (ld unchanged when it is harmless; 0 stays 0). */
static int padded_ld(const ct_gemm *g, const ct_gemm_cfg *c, int ld, int rows) {
    if (!g->cl->is_cpu || c->variant != CT_GEMM_REG || rows < 64 || ld < 1024 || ld % 512) return ld;
    return ld + 16;
}

/* workspace bytes of a call; ldb: B's row stride when it is not transposed (N when unknown) */
static size_t work_need(const ct_gemm *g, int prog, int kchunk, int count, int transA, int transB, int M, int N, int K,
                        int ldb) {
    size_t need = 0;
    ct_gemm_cfg c = g->progs[prog].cfg;
    c.kchunk = kchunk;
    int s = ct_gemm_splits(g, &c, transA, M, N, K);
    if (s > 1) need += ct_round_up((size_t)count * s * M * N * sizeof(float), GEMM_WORK_ALIGN);
    if (transB || (count == 1 && padded_ld(g, &c, ldb, K) != ldb)) need += (size_t)K * (N + 16) * sizeof(float);
    return need;
}

static void drop_views(ct_gemm *g);

static int reserve_bytes(ct_gemm *g, size_t need) {
    if (need <= g->work_bytes) return 0;
    drop_views(g); /* one may hold the old workspace */
    ct_cl_release(&g->work);
    g->work_bytes = 0;
    int rc = ct_cl_alloc(g->cl, &g->work, need, "gemm workspace");
    if (rc) return rc;
    g->work_bytes = need;
    return 0;
}

int ct_gemm_reserve(ct_gemm *g, int transA, int transB, int M, int N, int K) {
    return ct_gemm_reserve_batched(g, 1, transA, transB, M, N, K);
}

int ct_gemm_reserve_batched(ct_gemm *g, int count, int transA, int transB, int M, int N, int K) {
    int known = 0;
    for (int i = 0; i < g->n_shapes && !known; i++) {
        const int *s = g->shapes[i];
        known = s[0] == transA && s[1] == transB && s[2] == M && s[3] == N && s[4] == K;
    }
    if (!known && g->n_shapes < CT_GEMM_MAX_SHAPES) {
        int *s = g->shapes[g->n_shapes++];
        s[0] = transA; s[1] = transB; s[2] = M; s[3] = N; s[4] = K;
    }
    int prog, kchunk;
    shape_prog(g, transA, transB, M, N, K, &prog, &kchunk);
    size_t need = work_need(g, prog, kchunk, count, transA, transB, M, N, K, N);
    ct_gemm_cfg d;
    int dprog;
    ct_gemm_default_for(g, N, &dprog, &d);
    size_t need_def = work_need(g, dprog, d.kchunk, count, transA, transB, M, N, K, N);
    return reserve_bytes(g, need > need_def ? need : need_def);
}

/* CLTRAIN_GEMM="TM,NV,KCHUNK", "local,TSM,TSN,TSK,WPTM,WPTN,VW,KCHUNK" or "img,TM,TN,KCHUNK" */
static int parse_env(const char *env, ct_gemm_cfg *c) {
    int v[8];
    char tail;
    memset(c, 0, sizeof *c);
    if (!strncmp(env, "local,", 6) && sscanf(env + 6, "%d,%d,%d,%d,%d,%d,%d%c", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5], &v[6], &tail) == 7) {
        c->variant = CT_GEMM_LOCAL;
        memcpy(c->p, v, 6 * sizeof(int));
        c->kchunk = v[6];
    } else if (!strncmp(env, "img,", 4) && sscanf(env + 4, "%d,%d,%d%c", &v[0], &v[1], &v[2], &tail) == 3) {
        c->variant = CT_GEMM_IMG;
        c->p[0] = v[0]; c->p[1] = v[1];
        c->kchunk = v[2];
    } else if (sscanf(env, "%d,%d,%d%c", &v[0], &v[1], &v[2], &tail) == 3) {
        c->variant = CT_GEMM_REG;
        c->p[0] = v[0]; c->p[1] = v[1];
        c->kchunk = v[2];
    } else {
        return ct_fail(CT_EINPUT, "CLTRAIN_GEMM='%s': expected TM,NV,KCHUNK such as 6,2,512, local,TSM,TSN,TSK,WPTM,WPTN,VW,KCHUNK such as local,64,64,16,4,4,4,128, or img,TM,TN,KCHUNK such as img,4,4,512", env);
    }
    if (ct_gemm_cfg_check(c)) {
        char why[512];
        snprintf(why, sizeof why, "%s", ct_last_error());
        return ct_fail(CT_EINPUT, "CLTRAIN_GEMM='%s': %s", env, why);
    }
    return 0;
}

/* the first table row matching the device's class, vendor (or platform name)
 * and native float vector width */
static const ct_gemm_default *table_row(const ct_cl *cl) {
    char vendor[256] = "";
    /* the class in force (CLTRAIN_DEVICE_CLASS or the device type), not the type bits */
    cl_device_type t = cl->is_gpu ? CL_DEVICE_TYPE_GPU : CL_DEVICE_TYPE_CPU;
    clGetDeviceInfo(cl->device, CL_DEVICE_VENDOR, sizeof vendor, vendor, NULL);
    const ct_gemm_default *d = ct_gemm_defaults;
    for (; d->cls; d++) {
        if (d->type && !(t & d->type)) continue;
        if (d->vendor && !strstr(vendor, d->vendor) && !strstr(cl->platform_name, d->vendor)) continue;
        if (cl->float_width < d->min_vec) continue;
        if (d->max_vec > 0 && cl->float_width > d->max_vec) continue;
        return d;
    }
    return d - 1; /* the last row is the fallback */
}

static void load_db(ct_gemm *g) {
    ct_gemm_db_default_path(g, g->db_path, sizeof g->db_path);
    int rc = ct_gemm_db_load(g, g->db_path);
    static char said[sizeof g->db_path + 512]; /* once per process: `cltrain tune` sets up several models */
    if (rc == CT_EINPUT && strcmp(said, ct_last_error())) {
        fprintf(stderr, "cltrain: %s\n", ct_last_error());
        snprintf(said, sizeof said, "%s", ct_last_error());
    }
    else if (rc == 0) CT_DEBUG(1, "gemm: %d tuned shapes from %s", g->n_choices, g->db_path);
}

int ct_gemm_init(ct_gemm *g, ct_cl *cl, int mode) {
    memset(g, 0, sizeof *g);
    g->cl = cl;
    g->mode = mode;
    ct_cl_loop_limit(cl); /* probed once per device: ct_gemm_splits reads it */
    g->use_choices = 1;
    const ct_gemm_default *row = table_row(cl);
    g->def = row->cfg;
    g->def_from = row->cls;
    const char *env = getenv("CLTRAIN_GEMM");
    if (env && *env) {
        int rc = parse_env(env, &g->def);
        if (rc) return rc;
        g->def_from = "CLTRAIN_GEMM";
    }
    /* reduce and transpose live in gemm.cl: build it first (with the default's
     * register parameters, or the fallback row's when the default is local) */
    ct_gemm_cfg base = g->def;
    if (base.variant != CT_GEMM_REG) {
        const ct_gemm_default *d = ct_gemm_defaults;
        while (d[1].cls) d++;
        base = d->cfg;
    }
    if (ct_gemm_prog_get(g, &base) < 0) return CT_EDEVICE;
    g->k_reduce = ct_cl_kernel(g->progs[0].prog, "gemm_reduce");
    g->k_reduce16 = ct_cl_kernel(g->progs[0].prog, "gemm_reduce16");
    g->k_transpose = ct_cl_kernel(g->progs[0].prog, "transpose");
    g->def_prog = ct_gemm_prog_get(g, &g->def);
    if (g->def_prog < 0) {
        if (env && *env) return CT_EDEVICE;
        fprintf(stderr, "cltrain: %s; using %s\n", ct_last_error(), "the register GEMM kernel");
        g->def = base;
        g->def_from = "fallback";
        g->def_prog = 0;
    }
    g->narrow = g->def;
    g->narrow_prog = g->def_prog;
    if (!(env && *env) && row->narrow_tm > 0 && g->def.variant == CT_GEMM_REG && g->def.p[1] > 1) {
        ct_gemm_cfg n = {CT_GEMM_REG, {row->narrow_tm, 1, 0, 0, 0, 0}, g->def.kchunk};
        int p = ct_gemm_prog_get(g, &n);
        if (p >= 0) { g->narrow = n; g->narrow_prog = p; }
    }
    g->wide = g->def;
    g->wide_prog = g->def_prog;
    g->wide_n = INT_MAX;
    if (!(env && *env) && row->wide_nv > g->def.p[1] && g->def.variant == CT_GEMM_REG) {
        ct_gemm_cfg w = {CT_GEMM_REG, {row->wide_tm > 0 ? row->wide_tm : g->def.p[0], row->wide_nv, 0, 0, 0, 0}, g->def.kchunk};
        int p = ct_gemm_prog_get(g, &w);
        if (p >= 0) { g->wide = w; g->wide_prog = p; g->wide_n = 16 * row->wide_nv; }
    }
    if (env && *env) CT_DEBUG(1, "gemm: CLTRAIN_GEMM set, the tuning database is not read");
    else load_db(g);
    return 0;
}

void ct_gemm_free(ct_gemm *g) {
    for (int i = 0; i < g->n_progs; i++) {
        if (g->progs[i].k) clReleaseKernel(g->progs[i].k);
        if (g->progs[i].prog) clReleaseProgram(g->progs[i].prog);
    }
    if (g->k_reduce) clReleaseKernel(g->k_reduce);
    if (g->k_reduce16) clReleaseKernel(g->k_reduce16);
    if (g->k_transpose) clReleaseKernel(g->k_transpose);
    drop_views(g);
    ct_cl_release(&g->work);
    memset(g, 0, sizeof *g);
}

static void run_reduce_n(ct_gemm *g, int count, int M, int N, int S, float alpha, cl_mem P, size_t offP, int ldp, float beta,
                         cl_mem C, size_t offC, int ldc, size_t strideC, cl_mem bias, size_t offBias, int act) {
    int wide = g->cl->is_cpu && N % 16 == 0; /* 16 columns per work-item: gemm_reduce16 */
    cl_kernel k = wide ? g->k_reduce16 : g->k_reduce;
    ct_kargs(k, M, N, S, alpha, P, (int)offP, ldp, beta, C, (int)offC, ldc, bias, (int)offBias, act, (int)strideC);
    size_t gws[3] = {(size_t)(wide ? N / 16 : N), (size_t)M, (size_t)count}, lws[3] = {N >= 16 ? 16 : 1, 1, 1};
    size_t lws16[3] = {ct_divisor_upto(gws[0], 16), 1, 1}; /* small groups: see ct_divisor_upto */
    ct_cl_run(g->cl, k, wide ? "gemm_reduce16" : "gemm_reduce", 3, gws, wide ? lws16 : g->cl->is_cpu ? NULL : lws);
}

static void run_reduce(ct_gemm *g, int M, int N, int S, float alpha, cl_mem P, size_t offP, int ldp, float beta,
                       cl_mem C, size_t offC, int ldc, cl_mem bias, size_t offBias, int act) {
    run_reduce_n(g, 1, M, N, S, alpha, P, offP, ldp, beta, C, offC, ldc, 0, bias, offBias, act);
}

/* launch the register kernel: one work-item per TM x 16*NV tile */
static void launch_reg(ct_gemm *g, cl_kernel k, const ct_gemm_cfg *c, int M, int N, int S, int count) {
    int tiles_m = (M + c->p[0] - 1) / c->p[0], tiles_n = (N + 16 * c->p[1] - 1) / (16 * c->p[1]);
    size_t gws[3] = {(size_t)tiles_m, (size_t)tiles_n, (size_t)S * count};
    if (g->cl->is_cpu) {
        /* one work-group = all tiles of one K chunk (they share its rows in cache),
         * or a strip of row tiles sharing one column panel of B */
        size_t lws[3] = {(size_t)tiles_m, (size_t)tiles_n, 1};
        if ((size_t)tiles_m * tiles_n > g->cl->max_wg || S == 1) {
            lws[0] = tiles_m < 16 ? (size_t)tiles_m : 16;
            lws[1] = 1;
        }
        ct_cl_run(g->cl, k, "gemm", 3, gws, lws);
    } else {
        size_t lws[3] = {16, tiles_n >= 4 ? 4 : 1, 1};
        ct_cl_run(g->cl, k, "gemm", 3, gws, lws);
    }
}

/* launch the image kernel: one work-item per TM x TN tile; the implementation picks the groups */
static void launch_img(ct_gemm *g, cl_kernel k, const ct_gemm_cfg *c, int M, int N, int S, int count) {
    size_t gws[3] = {(size_t)((M + c->p[0] - 1) / c->p[0]), (size_t)((N + c->p[1] - 1) / c->p[1]), (size_t)S * count};
    ct_cl_run(g->cl, k, "gemm_img", 3, gws, NULL);
}

/* Drop every image view (after the queue drains: a queued launch may still read one). */
static void drop_views(ct_gemm *g) {
    if (g->n_views) clFinish(g->cl->queue);
    for (int i = 0; i < g->n_views; i++) clReleaseMemObject(g->view_img[i]);
    g->n_views = 0;
}

/* A view of all of buf as a one-channel float image (texel i = float i) for gemm_img.cl; NULL when the
 * device cannot make one (buffer over CL_DEVICE_IMAGE_MAX_BUFFER_SIZE texels). Views are made once per
 * buffer and kept (a view holds its buffer, so a kept buffer's handle is never reused); releasing a view
 * right after the launch that reads it gave wrong products on PoCL 3.1 (tests/test_gemm.c, batched split-K). */
static cl_mem image_view(ct_gemm *g, cl_mem buf) {
    for (int i = 0; i < g->n_views; i++)
        if (g->view_buf[i] == buf) return g->view_img[i];
    size_t bytes = 0, max_texels = 0;
    if (clGetMemObjectInfo(buf, CL_MEM_SIZE, sizeof bytes, &bytes, NULL) != CL_SUCCESS) return NULL;
    clGetDeviceInfo(g->cl->device, CL_DEVICE_IMAGE_MAX_BUFFER_SIZE, sizeof max_texels, &max_texels, NULL);
    if (bytes / sizeof(float) > max_texels || bytes < sizeof(float)) return NULL;
    cl_image_format f = {CL_R, CL_FLOAT};
    cl_image_desc d;
    memset(&d, 0, sizeof d);
    d.image_type = CL_MEM_OBJECT_IMAGE1D_BUFFER;
    d.image_width = bytes / sizeof(float);
    d.buffer = buf;
    cl_int e;
    cl_mem img = clCreateImage(g->cl->ctx, CL_MEM_READ_ONLY, &f, &d, NULL, &e);
    if (e != CL_SUCCESS) return NULL;
    if (g->n_views == (int)(sizeof g->view_img / sizeof *g->view_img)) drop_views(g);
    g->view_buf[g->n_views] = buf;
    g->view_img[g->n_views++] = img;
    return img;
}

/* launch the local-memory kernel: one work-group per TSM x TSN tile */
static void launch_local(ct_gemm *g, cl_kernel k, const ct_gemm_cfg *c, int M, int N, int S, int count) {
    const int *p = c->p;
    size_t lws[3] = {(size_t)(p[1] / p[4]), (size_t)(p[0] / p[3]), 1};
    size_t gws[3] = {(size_t)((N + p[1] - 1) / p[1]) * lws[0], (size_t)((M + p[0] - 1) / p[0]) * lws[1], (size_t)S * count};
    ct_cl_run(g->cl, k, "gemm_local", 3, gws, lws);
}

/* count products of one shape in one launch (and one reduce when K is split); strides in floats */
static void native_run(ct_gemm *g, int prog, int kchunk, int count, size_t sA, size_t sB, size_t sC, int transA,
                       int transB, int M, int N, int K, float alpha, cl_mem A, size_t offA, int lda, cl_mem B, size_t offB,
                       int ldb, float beta, cl_mem C, size_t offC, int ldc, cl_mem bias, size_t offBias, int act) {
    if (M <= 0 || N <= 0 || count <= 0) return;
    CT_ASSERT(count == 1 || !transB);
    const ct_gemm_prog *gp = &g->progs[prog];
    ct_gemm_cfg c = gp->cfg;
    c.kchunk = kchunk;
    size_t need = work_need(g, prog, kchunk, count, transA, transB, M, N, K, ldb);
    if (need > g->work_bytes && reserve_bytes(g, need)) {
        fprintf(stderr, "cltrain: %s\n", ct_last_error());
        exit(1);
    }
    int S = ct_gemm_splits(g, &c, transA, M, N, K);
    size_t partial_bytes = S > 1 ? ct_round_up((size_t)count * S * M * N * sizeof(float), GEMM_WORK_ALIGN) : 0;
    int offT = (int)(partial_bytes / sizeof(float));
    /* B's row stride in the workspace copy: transposed (dense [K, N]), or padded (one product only) */
    int ldP = transB ? padded_ld(g, &c, N, K) : count == 1 ? padded_ld(g, &c, ldb, K) : ldb;
    if (transB || ldP != ldb) {
        if (transB) { /* B is [N, K]: transpose into the workspace as [K, N] */
            ct_kargs(g->k_transpose, g->work, offT, ldP, B, (int)offB, N, K, ldb);
            size_t gws[2] = {(size_t)K, (size_t)(N + 15) / 16};
            ct_cl_run(g->cl, g->k_transpose, "transpose", 2, gws, NULL);
        } else {
            size_t so[3] = {offB * sizeof(float), 0, 0}, dst[3] = {(size_t)offT * sizeof(float), 0, 0};
            size_t region[3] = {(size_t)N * sizeof(float), (size_t)K, 1};
            cl_int e = clEnqueueCopyBufferRect(g->cl->queue, B, g->work, so, dst, region, (size_t)ldb * sizeof(float),
                                               0, (size_t)ldP * sizeof(float), 0, 0, NULL, NULL);
            if (e != CL_SUCCESS) {
                fprintf(stderr, "cltrain: copying a GEMM's B (%dx%d) failed: OpenCL error %d\n", K, N, (int)e);
                exit(1);
            }
        }
        B = g->work;
        offB = (size_t)offT;
        ldb = ldP;
    }
    int kc = S > 1 ? (K + S - 1) / S : K;
    cl_mem out = S > 1 ? g->work : C;
    int offOut = S > 1 ? 0 : (int)offC, ldOut = S > 1 ? N : ldc;
    size_t sOut = S > 1 ? (size_t)S * M * N : sC;
    float a1 = S > 1 ? 1.0f : alpha, b1 = S > 1 ? 0.0f : beta;
    cl_mem bias1 = S > 1 ? NULL : bias;
    int act1 = S > 1 ? 0 : act;
    cl_mem imgA = NULL, imgB = NULL;
    if (c.variant == CT_GEMM_IMG) {
        imgA = image_view(g, A);
        imgB = imgA ? image_view(g, B) : NULL;
        if (imgB) imgA = image_view(g, A); /* again: B's view may have dropped the views, A's with them */
        if (!imgA || !imgB) { /* a buffer too large for an image view: the register kernel (built at init) */
            imgA = NULL;
            gp = &g->progs[0];
            c.variant = gp->cfg.variant;
            memcpy(c.p, gp->cfg.p, sizeof c.p);
        }
    }
    if (imgA) { /* gemm_img.cl adds no bias and no activation: gemm_reduce does, in place */
        ct_kargs(gp->k, M, N, K, a1, imgA, (int)offA, lda, transA, imgB, (int)offB, ldb, b1, out, offOut,
                 ldOut, (cl_mem)NULL, 0, 0, kc, S, (int)sA, (int)sB, (int)sOut);
        launch_img(g, gp->k, &c, M, N, S, count);
        if (S == 1 && (bias1 || act1)) run_reduce_n(g, count, M, N, 1, 1.0f, C, offC, ldc, 0.0f, C, offC, ldc, sC, bias, offBias, act);
    } else {
        ct_kargs(gp->k, M, N, K, a1, A, (int)offA, lda, transA, B, (int)offB, ldb, b1, out, offOut,
                 ldOut, bias1, (int)offBias, act1, kc, S, (int)sA, (int)sB, (int)sOut);
        if (c.variant == CT_GEMM_REG) launch_reg(g, gp->k, &c, M, N, S, count);
        else launch_local(g, gp->k, &c, M, N, S, count);
    }
    if (S > 1) run_reduce_n(g, count, M, N, S, alpha, g->work, 0, N, beta, C, offC, ldc, sC, bias, offBias, act);
}

void ct_gemm_native_with(ct_gemm *g, int prog, int kchunk, int transA, int transB, int M, int N, int K, float alpha,
                         cl_mem A, size_t offA, int lda, cl_mem B, size_t offB, int ldb,
                         float beta, cl_mem C, size_t offC, int ldc, cl_mem bias, size_t offBias, int act) {
    native_run(g, prog, kchunk, 1, 0, 0, 0, transA, transB, M, N, K, alpha, A, offA, lda, B, offB, ldb, beta, C, offC, ldc,
               bias, offBias, act);
}

void ct_gemm_native(ct_gemm *g, int transA, int transB, int M, int N, int K, float alpha,
                    cl_mem A, size_t offA, int lda, cl_mem B, size_t offB, int ldb,
                    float beta, cl_mem C, size_t offC, int ldc, cl_mem bias, size_t offBias, int act) {
    int prog, kchunk;
    shape_prog(g, transA, transB, M, N, K, &prog, &kchunk);
    ct_gemm_native_with(g, prog, kchunk, transA, transB, M, N, K, alpha, A, offA, lda, B, offB, ldb, beta, C, offC, ldc,
                        bias, offBias, act);
}

int ct_gemm_clblast(ct_gemm *g, int transA, int transB, int M, int N, int K, float alpha,
                    cl_mem A, size_t offA, int lda, cl_mem B, size_t offB, int ldb,
                    float beta, cl_mem C, size_t offC, int ldc, cl_mem bias, size_t offBias, int act) {
    CLBlastStatusCode st = CLBlastSgemm(CLBlastLayoutRowMajor, transA ? CLBlastTransposeYes : CLBlastTransposeNo,
                                        transB ? CLBlastTransposeYes : CLBlastTransposeNo, (size_t)M, (size_t)N, (size_t)K,
                                        alpha, A, offA, (size_t)lda, B, offB, (size_t)ldb, beta, C, offC, (size_t)ldc,
                                        &g->cl->queue, NULL);
    if (st != CLBlastSuccess) return ct_fail(CT_EDEVICE, "CLBlastSgemm failed with status %d", (int)st);
    if (bias || act) run_reduce(g, M, N, 1, 1.0f, C, offC, ldc, 0.0f, C, offC, ldc, bias, offBias, act);
    return 0;
}

static double time_path(ct_gemm *g, int path, int transA, int transB, int M, int N, int K,
                        cl_mem A, size_t offA, int lda, cl_mem B, size_t offB, int ldb,
                        cl_mem C, size_t offC, int ldc) {
    /* C is scratch here: we time with beta 0 and no bias on a copy of the call's shape */
    double best = 1e30;
    for (int rep = 0; rep < 3; rep++) {
        ct_cl_finish(g->cl);
        double t0 = ct_now();
        if (path == CT_GEMM_CLBLAST) {
            if (ct_gemm_clblast(g, transA, transB, M, N, K, 1, A, offA, lda, B, offB, ldb, 0, C, offC, ldc, NULL, 0, 0))
                return 1e30;
        } else {
            ct_gemm_native(g, transA, transB, M, N, K, 1, A, offA, lda, B, offB, ldb, 0, C, offC, ldc, NULL, 0, 0);
        }
        ct_cl_finish(g->cl);
        double t = ct_now() - t0;
        if (t < best) best = t;
    }
    return best;
}

/* --gemm auto, first call of a shape: time ours against CLBlast and remember
 * the faster in the tuning database. Returns the path, or -1 when the call
 * accumulates into C (beta != 0) and cannot be timed on C. */
static int auto_choose(ct_gemm *g, int transA, int transB, int M, int N, int K,
                       cl_mem A, size_t offA, int lda, cl_mem B, size_t offB, int ldb, float beta,
                       cl_mem C, size_t offC, int ldc) {
    if (beta != 0.0f) return -1;
    double tn = time_path(g, CT_GEMM_NATIVE, transA, transB, M, N, K, A, offA, lda, B, offB, ldb, C, offC, ldc);
    double tb = time_path(g, CT_GEMM_CLBLAST, transA, transB, M, N, K, A, offA, lda, B, offB, ldb, C, offC, ldc);
    int path = tb < tn ? CT_GEMM_CLBLAST : CT_GEMM_NATIVE;
    CT_DEBUG(1, "gemm %c%c %dx%dx%d: native %.3f ms, clblast %.3f ms -> %s", transA ? 'T' : 'N', transB ? 'T' : 'N',
             M, N, K, tn * 1e3, tb * 1e3, path ? "clblast" : "native");
    int prog, kchunk;
    shape_prog(g, transA, transB, M, N, K, &prog, &kchunk);
    ct_gemm_cfg cfg = g->progs[prog].cfg;
    cfg.kchunk = kchunk;
    if (!ct_gemm_choose(g, transA, transB, M, N, K, path, &cfg) && g->db_path[0] && ct_gemm_db_save(g, g->db_path))
        fprintf(stderr, "cltrain: %s\n", ct_last_error());
    return path;
}

void ct_gemm_run_batched(ct_gemm *g, int count, int transA, int M, int N, int K, float alpha, cl_mem A, size_t offA,
                         int lda, size_t strideA, cl_mem B, size_t offB, int ldb, size_t strideB, float beta, cl_mem C,
                         size_t offC, int ldc, size_t strideC) {
    ct_gemm_choice *c = g->use_choices ? ct_gemm_find(g, transA, 0, M, N, K) : NULL;
    int native = g->mode == CT_GEMM_NATIVE || (g->mode == CT_GEMM_AUTO && c && c->path == CT_GEMM_NATIVE);
    if (!native) { /* --gemm clblast, or auto with CLBlast chosen or still to time this shape: one call per product */
        for (int i = 0; i < count; i++)
            ct_gemm_run(g, &(ct_gemm_desc){.transA = transA, .M = M, .N = N, .K = K, .alpha = alpha, .beta = beta,
                                           .A = A, .offA = offA + i * strideA, .lda = lda, .B = B, .offB = offB + i * strideB,
                                           .ldb = ldb, .C = C, .offC = offC + i * strideC, .ldc = ldc});
        return;
    }
    int prog, kchunk;
    shape_prog(g, transA, 0, M, N, K, &prog, &kchunk);
    native_run(g, prog, kchunk, count, strideA, strideB, strideC, transA, 0, M, N, K, alpha, A, offA, lda, B, offB, ldb,
               beta, C, offC, ldc, NULL, 0, 0);
}

void ct_gemm_run(ct_gemm *g, const ct_gemm_desc *d) {
    int transA = d->transA, transB = d->transB, M = d->M, N = d->N, K = d->K, lda = d->lda, ldb = d->ldb, ldc = d->ldc;
    int act = d->act;
    float alpha = d->alpha, beta = d->beta;
    cl_mem A = d->A, B = d->B, C = d->C, bias = d->bias;
    size_t offA = d->offA, offB = d->offB, offC = d->offC, offBias = d->offBias;
    int path = g->mode;
    if (path == CT_GEMM_AUTO) {
        ct_gemm_choice *c = g->use_choices ? ct_gemm_find(g, transA, transB, M, N, K) : NULL;
        path = c ? c->path : auto_choose(g, transA, transB, M, N, K, A, offA, lda, B, offB, ldb, beta, C, offC, ldc);
        if (path < 0) path = CT_GEMM_NATIVE;
    }
    if (path == CT_GEMM_CLBLAST) {
        if (ct_gemm_clblast(g, transA, transB, M, N, K, alpha, A, offA, lda, B, offB, ldb, beta, C, offC, ldc, bias, offBias, act)) {
            fprintf(stderr, "cltrain: %s\n", ct_last_error());
            exit(1);
        }
        return;
    }
    ct_gemm_native(g, transA, transB, M, N, K, alpha, A, offA, lda, B, offB, ldb, beta, C, offC, ldc, bias, offBias, act);
}
