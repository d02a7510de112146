/* cli/bench.c: `cltrain bench kernels|train|pipeline|dist|images|probe`:
 * figures as tables. Every figure printed is measured in this run, except the
 * lines of `bench dist` under "model (not measured)", which project measured
 * compute and overlap onto assumed link speeds; ratios compare paths timed
 * back to back in the same process (absolute times drift on shared machines).
 * Results are validated by the test suite before they are timed here. */
#include "cli.h"
#include "cltrain/dist.h"
#include "cltrain/layer.h"
#include <pthread.h>
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wsign-compare"
#pragma GCC diagnostic ignored "-Wunused-parameter"
#include <stb/stb_image_write.h> /* implementation in eval.c */
#pragma GCC diagnostic pop
#include <math.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static double time_it(ct_cl *cl, void (*fn)(void *), void *arg, int reps) {
    fn(arg); /* warm: first launches compile work-group functions, CLBlast builds its kernels */
    ct_cl_finish(cl);
    double best = 1e30;
    for (int r = 0; r < reps; r++) {
        double t0 = ct_now();
        fn(arg);
        ct_cl_finish(cl);
        double t = ct_now() - t0;
        if (t < best) best = t;
    }
    return best;
}

typedef struct { ct_model *m; int i, B; } layer_arg;
static void fwd_fn(void *p) { layer_arg *a = p; ct_layer_forward(a->m, a->i, a->B); }
static void bwd_fn(void *p) { layer_arg *a = p; ct_layer_backward(a->m, a->i, a->B); }

void cli_real_gradients(ct_model *m, int B) {
    ct_model_forward(m, B);
    ct_model_loss(m, B);
    ct_model_backward(m, B, NULL, NULL);
}

double cli_time_layer(ct_model *m, int i, int B, int reps) {
    layer_arg a = {m, i, B};
    return time_it(m->cl, fwd_fn, &a, reps) + time_it(m->cl, bwd_fn, &a, reps);
}

static void layer_flops(const ct_layer *L, int B, int first, double *fwd, double *bwd) {
    const ct_layer_ops *o = ct_layer_ops_of(L);
    double f = o->flops ? (double)B * o->flops(L) : 0;
    *fwd = f;
    *bwd = first ? f : 2 * f;
}

/* --model, fitted to --size and --channels when given (size, channels 0: not given) */
static int load_model(ct_model *m, const char *spec, int size, int channels) {
    int rc = ct_model_load(m, spec);
    if (rc || (!size && !channels)) return rc;
    int c = channels ? channels : m->in_c, classes = m->n_classes, h = size ? size : m->in_h, w = size ? size : m->in_w;
    ct_model_free(m);
    return ct_model_load_shaped(m, spec, h, w, c, classes);
}

/* the model c names: a checkpoint's definition, --model fitted to a data set's shape, or --model (--size, --channels) */
static int load_opts_model(ct_model *m, const cli_opts *c) {
    if (c->model_cfg) return ct_model_parse(m, c->model_cfg, c->model_cfg_name);
    if (c->fit_h) return ct_model_load_shaped(m, c->train.model, c->fit_h, c->fit_w, c->fit_c, c->fit_classes);
    return load_model(m, c->train.model, c->data.size, c->data.channels);
}

int cli_bench_setup(ct_model *m, ct_cl *cl, const cli_opts *c, int gemm_mode) {
    return cli_bench_setup_db(m, cl, c, gemm_mode, NULL);
}

int cli_bench_setup_db(ct_model *m, ct_cl *cl, const cli_opts *c, int gemm_mode, const ct_model *db) {
    const ct_train_opts *o = &c->train;
    memset(cl, 0, sizeof *cl);
    int rc = load_opts_model(m, c);
    if (!rc) rc = ct_cl_open_rank(cl, o->device, ct_world.rank, ct_world.local_rank);
    m->conv_algo = o->conv;
    if (db) {
        m->db_defaults = db->db_defaults;
        m->conv_tuned = db->conv_tuned;
        m->n_conv_tuned = db->n_conv_tuned;
    }
    if (!rc) rc = ct_model_setup(m, cl, o->batch, gemm_mode);
    if (rc) {
        ct_model_free(m);
        if (cl->ctx) ct_cl_close(cl);
        return rc;
    }
    ct_model_init_weights(m, o->seed);
    /* a random batch of bytes and labels */
    size_t n = (size_t)o->batch * m->in_h * m->in_w * m->in_c;
    uint8_t *img = ct_xmalloc(n);
    int32_t *lab = ct_xmalloc(sizeof(int32_t) * o->batch);
    ct_rng r = ct_rng_make(o->seed, 77, 0);
    for (size_t i = 0; i < n; i++) img[i] = (uint8_t)ct_rng_below(&r, 256);
    for (int i = 0; i < o->batch; i++) lab[i] = (int32_t)ct_rng_below(&r, (uint32_t)m->n_classes);
    ct_model_set_batch(m, img, lab, o->batch, 1.0f / 255, 0);
    free(img);
    free(lab);
    return 0;
}

/* The machine's SGEMM limit, measured now by tools/sgemm-limit (OpenBLAS,
 * loaded by that tool, never by cltrain, at its best: its own core choice
 * and each core type the CPU supports): its lines are printed; 0 when it
 * is missing or OpenBLAS is not installed. CLTRAIN_SGEMM_LIMIT names the tool. */
static double sgemm_limit(void) {
    char tool[4200] = "", cmd[4300], line[512];
    const char *env = getenv("CLTRAIN_SGEMM_LIMIT");
    if (env && *env) snprintf(tool, sizeof tool, "%s", env);
    else {
        char self[4096];
        ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
        if (n <= 0) return 0;
        self[n] = 0;
        char *slash = strrchr(self, '/');
        if (slash) *slash = 0;
        snprintf(tool, sizeof tool, "%s/tools/sgemm-limit", self);
    }
    if (access(tool, X_OK)) {
        printf("SGEMM limit: not measured (%s not found; `make all` builds it)\n", tool);
        return 0;
    }
    snprintf(cmd, sizeof cmd, "'%s' 2>&1", tool);
    FILE *p = popen(cmd, "r");
    if (!p) return 0;
    double limit = 0;
    char core[64] = "its own choice";
    while (fgets(line, sizeof line, p))
        if (sscanf(line, "limit %lf %63s", &limit, core) < 1) fputs(line, stdout);
    pclose(p);
    if (limit > 0)
        printf("SGEMM limit of this machine: %.1f GFLOP/s (OpenBLAS with core %s, the fastest of its own choice and each "
               "OPENBLAS_CORETYPE this CPU supports, measured now; the 'limit' column is ours / this)\n", limit, core);
    else printf("SGEMM limit: not measured (no OpenBLAS); the 'limit' column stays empty\n");
    return limit;
}

static void limit_col(char *out, size_t n, double gflops, double limit) {
    if (limit > 0 && gflops > 0) snprintf(out, n, "%5.0f%%", 100 * gflops / limit);
    else snprintf(out, n, "%6s", "-");
}

typedef struct { ct_model *m; cl_mem dz, y; int n; } relu_arg;
static void relu_fn(void *p) {
    relu_arg *a = p;
    size_t gws = (size_t)a->n;
    ct_kargs(a->m->k_act_bwd, a->dz, a->y, (int)CT_ACT_RELU, a->n, 1, a->dz, 0);
    ct_cl_run(a->m->cl, a->m->k_act_bwd, "act_bwd", 1, &gws, NULL);
}

/* The device's memory bandwidth, measured now: act_bwd (ReLU) over 64 MB of
 * negative y, which reads y and writes dz once each (best of 5, bytes read +
 * written per second). 0 when the buffers do not fit. */
static double device_bandwidth(ct_model *m, ct_cl *cl) {
    relu_arg a = {m, NULL, NULL, 16 << 20};
    size_t bytes = (size_t)a.n * sizeof(float);
    double gbs = 0;
    if (!ct_cl_alloc(cl, &a.dz, bytes, "bandwidth probe") && !ct_cl_alloc(cl, &a.y, bytes, "bandwidth probe")) {
        float neg = -1.0f;
        CL_CHECK(clEnqueueFillBuffer(cl->queue, a.y, &neg, sizeof neg, 0, bytes, 0, NULL, NULL));
        ct_cl_fill0(cl, a.dz, 0, bytes);
        gbs = 2.0 * bytes / time_it(cl, relu_fn, &a, 5) * 1e-9;
        printf("memory bandwidth of this device: %.1f GB/s (act_bwd (ReLU) over 2 x 64 MB, measured now)\n", gbs);
    }
    ct_cl_release(&a.dz);
    ct_cl_release(&a.y);
    return gbs;
}

/* the layer name's suffix for a conv's algorithm (ct_conv_tile) */
static const char *tile_name(int tile) {
    return tile == 4 ? " wino4" : tile == 2 ? " wino" : tile == CT_TILE_DIRECT ? " direct" : "";
}

/* The ideal time of one layer pass: its multiplies at the SGEMM limit or its
 * compulsory traffic at the measured bandwidth, whichever is longer. The
 * traffic: forward x, parameters and y; backward x, dy, W, the parameter
 * gradients (read and written) and dx. A Winograd layer's multiplies are its
 * own (the direct count / 4 or / 2.25), not the direct convolution's. */
static double ideal_time(const ct_layer *L, int B, int bwd, double f, double limit, double gbs) {
    if (limit <= 0 || gbs <= 0) return 0;
    double in = (double)B * ct_in_size(L), out = (double)B * ct_out_size(L), par = (double)(L->n_w + L->n_b);
    double words = bwd ? in + out + par + 2 * par + (L->dx ? in : 0) : in + par + out;
    int tile = ct_conv_tile(L);
    double mults = tile == 4 ? f / 4 : tile == 2 ? f / 2.25 : f;
    double tc = mults / (limit * 1e9), tm = 4 * words / (gbs * 1e9);
    return tc > tm ? tc : tm;
}

/* one row of bench kernels: ours, its share of the SGEMM limit and of the
 * ideal bound (t_ideal 0: not known), CLBlast (t_clb 0: not timed) */
static void kernel_row(const char *desc, const char *pass, double t, double f, double limit, double t_ideal, double t_clb) {
    char lim[32], bound[16], gf[16], clb[16], clbf[16], ratio[16];
    limit_col(lim, sizeof lim, f > 0 ? f / t * 1e-9 : 0, limit);
    if (t_ideal > 0) snprintf(bound, sizeof bound, "%5.0f%%", 100 * t_ideal / t);
    else snprintf(bound, sizeof bound, "%6s", "-");
    snprintf(gf, sizeof gf, f > 0 ? "%.1f" : "-", f / t * 1e-9);
    int have = t_clb > 0 && t_clb < 1e29;
    snprintf(clb, sizeof clb, have ? "%.3f" : "-", t_clb * 1e3);
    snprintf(clbf, sizeof clbf, have && f > 0 ? "%.1f" : "-", f / t_clb * 1e-9);
    snprintf(ratio, sizeof ratio, have ? "%.2fx" : "-", t_clb / t);
    printf("%-34s %-4s %10.3f %9s %6s %6s %11s %9s %8s\n", desc, pass, t * 1e3, gf, lim, bound, clb, clbf, ratio);
}

/* s += label and c as ct_gemm_cfg_str writes it */
static void append_cfg(char *s, size_t size, const char *label, const ct_gemm_cfg *c) {
    size_t n = strlen(s);
    snprintf(s + n, size - n, "%s", label);
    n = strlen(s);
    ct_gemm_cfg_str(c, s + n, size - n);
}

/* bench kernels' table header, and what its columns and layer names mean */
static void kernels_legend(const ct_model *m, double limit, double gbs) {
    if (limit > 0 && gbs > 0)
        printf("'bound': the ideal time over ours, the ideal being the multiplies at the SGEMM limit or the tensors\n"
               " each read or written once at that bandwidth, whichever is longer (over 100%%: tensors that a\n"
               " cache held, faster than memory)\n");
    printf("%-34s %-4s %10s %9s %6s %6s %11s %9s %8s\n", "layer", "pass", "ours ms", "GFLOP/s", "limit", "bound", "CLBlast ms",
           "GFLOP/s", "ours/CLB");
    for (int i = 0; i < m->n_layers; i++)
        if (ct_conv_tile(&m->layers[i]) > CT_TILE_DIRECT) {
            printf("('wino4', 'wino': a Winograd F(4x4,3x3) or F(2x2,3x3) layer (--conv); its GFLOP/s and limit count\n"
                   " the direct convolution's FLOPs, 4x or 2.25x the multiplies it makes; the CLBlast columns run its\n"
                   " 36 or 16 GEMMs through CLBlast)\n");
            break;
        }
    for (int i = 0; i < m->n_layers; i++)
        if (ct_conv_tile(&m->layers[i]) == CT_TILE_DIRECT) {
            printf("('direct': a conv layer run by kernels/conv_direct.cl (--conv); the CLBlast columns run it as\n"
                   " im2col + CLBlast's GEMMs)\n");
            break;
        }
}

/* the plain GEMM at 1024^3 as the device's practical bound for our kernel:
 * one row, ours and (paths 2) CLBlast's */
static void kernels_sgemm(ct_model *m, ct_cl *cl, int paths, double limit) {
    cl_mem A, Bm, C;
    size_t N = 1024, bytes = N * N * 4;
    if (!ct_cl_alloc(cl, &A, bytes, "bench A") && !ct_cl_alloc(cl, &Bm, bytes, "bench B") && !ct_cl_alloc(cl, &C, bytes, "bench C")) {
        ct_cl_fill0(cl, A, 0, bytes);
        ct_cl_fill0(cl, Bm, 0, bytes);
        double tg[2];
        for (int p = 0; p < 2; p++) {
            double best = 1e30;
            for (int r = 0; r < 4 && p < paths; r++) {
                ct_cl_finish(cl);
                double t0 = ct_now();
                if (p) ct_gemm_clblast(&m->gemm, 0, 0, (int)N, (int)N, (int)N, 1, A, 0, (int)N, Bm, 0, (int)N, 0, C, 0, (int)N, NULL, 0, 0);
                else ct_gemm_native(&m->gemm, 0, 0, (int)N, (int)N, (int)N, 1, A, 0, (int)N, Bm, 0, (int)N, 0, C, 0, (int)N, NULL, 0, 0);
                ct_cl_finish(cl);
                double t = ct_now() - t0;
                if (r && t < best) best = t;
            }
            tg[p] = best;
        }
        kernel_row("sgemm 1024x1024x1024", "", tg[0], 2.0 * N * N * N, limit, limit > 0 ? 2.0 * N * N * N / (limit * 1e9) : 0, tg[1]);
        ct_cl_release(&A);
        ct_cl_release(&Bm);
        ct_cl_release(&C);
    }
}

/* bench kernels' last line: the GEMM defaults and the tuning database */
static void kernels_gemm_line(const ct_gemm *g) {
    char cfg[160], label[32];
    ct_gemm_cfg_str(&g->def, cfg, sizeof cfg);
    if (g->narrow_prog != g->def_prog) append_cfg(cfg, sizeof cfg, ", N <= 16: ", &g->narrow);
    snprintf(label, sizeof label, ", N >= %d: ", g->wide_n);
    if (g->wide_prog != g->def_prog) append_cfg(cfg, sizeof cfg, label, &g->wide);
    printf("GEMM default %s (from %s; CLTRAIN_GEMM overrides); %d shapes from the tuning database %s\n", cfg, g->def_from,
           g->n_choices, g->n_choices ? g->db_path : "(none)");
}

static int bench_kernels(const cli_opts *c) {
    const ct_train_opts *o = &c->train;
    ct_model m;
    ct_cl cl;
    int rc = cli_bench_setup(&m, &cl, c, CT_GEMM_NATIVE);
    if (rc) return rc;
    int B = o->batch;
    /* CLTRAIN_BENCH_CLBLAST=0 leaves CLBlast out (on a CPU it takes most of the run) */
    const char *clb = getenv("CLTRAIN_BENCH_CLBLAST");
    int paths = clb && !strcmp(clb, "0") ? 1 : 2;
    printf("cltrain bench kernels: model %s, batch %d, device %s (%s)%s\n", m.name, B, cl.device_name, cl.platform_name,
           paths == 1 ? ", CLBlast not timed (CLTRAIN_BENCH_CLBLAST=0)" : "");
    double limit = sgemm_limit(), gbs = device_bandwidth(&m, &cl);
    kernels_legend(&m, limit, gbs);
    cli_real_gradients(&m, B);
    double tot[2][2] = {{0, 0}, {0, 0}}, totf[2] = {0, 0}, tideal[2] = {0, 0};
    for (int i = 0; i < m.n_layers; i++) {
        ct_layer *L = &m.layers[i];
        layer_arg a = {&m, i, B};
        double ff, fb;
        layer_flops(L, B, i == 0, &ff, &fb);
        double t[2][2] = {{0, 0}, {0, 0}};
        /* CLBlast's path for a direct layer: im2col + CLBlast's GEMMs, in a workspace of their own (training
         * reserves no columns for the layer) */
        int direct = ct_conv_tile(L) == CT_TILE_DIRECT, with_clb = paths > 1;
        ct_layer_priv own = L->priv;
        cl_mem ws = m.ws, cols = NULL;
        if (direct && with_clb) {
            size_t need = (size_t)B * L->oh * L->ow * L->k * L->k * L->ic * sizeof(float), have = 0;
            CL_CHECK(clGetMemObjectInfo(ws, CL_MEM_SIZE, sizeof have, &have, NULL));
            if (need > have && ct_cl_alloc(&cl, &cols, need, "im2col columns for CLBlast's path")) {
                fprintf(stderr, "cltrain: %s; layer %d's CLBlast columns not timed\n", ct_last_error(), i);
                with_clb = 0;
            }
        }
        for (int path = 0; path < 1 + with_clb; path++) {
            m.gemm.mode = path ? CT_GEMM_CLBLAST : CT_GEMM_NATIVE;
            if (path && direct) ct_conv_use_im2col(L);
            if (path && cols) m.ws = cols;
            t[path][0] = time_it(&cl, fwd_fn, &a, 5);
            t[path][1] = time_it(&cl, bwd_fn, &a, 5);
            L->priv = own;
            m.ws = ws;
            tot[path][0] += t[path][0];
            tot[path][1] += t[path][1];
        }
        ct_cl_release(&cols);
        totf[0] += ff;
        totf[1] += fb;
        char desc[64];
        snprintf(desc, sizeof desc, "%d %s %dx%dx%d->%dx%dx%d%s", i, ct_layer_name(L), L->ih, L->iw, L->ic, L->oh,
                 L->ow, L->oc, tile_name(ct_conv_tile(L)));
        for (int p = 0; p < 2; p++) {
            double ti = ideal_time(L, B, p, p ? fb : ff, limit, gbs);
            tideal[p] += ti;
            kernel_row(p ? "" : desc, p ? "bwd" : "fwd", t[0][p], p ? fb : ff, limit, ti, t[1][p]);
        }
    }
    for (int p = 0; p < 2; p++) kernel_row(p ? "" : "all layers", p ? "bwd" : "fwd", tot[0][p], totf[p], limit, tideal[p], tot[1][p]);
    m.gemm.mode = CT_GEMM_NATIVE;
    kernels_sgemm(&m, &cl, paths, limit);
    kernels_gemm_line(&m.gemm);
    ct_model_free(&m);
    ct_cl_close(&cl);
    return 0;
}

void cli_bench_step(ct_model *m, ct_optim_state *opt, int B) {
    ct_model_zero_grad(m);
    ct_model_forward(m, B);
    ct_model_loss(m, B);
    ct_model_backward(m, B, NULL, NULL);
    ct_optim_step(opt, opt->hp.lr);
}

typedef struct { ct_model *m; ct_optim_state *o; int B; } step_arg;
static void step_fn(void *p) {
    step_arg *a = p;
    cli_bench_step(a->m, a->o, a->B);
}

static double spawn_probe(const char *self, const char *cache, int pocl_cache) {
    char cmd[8192];
    snprintf(cmd, sizeof cmd, "CLTRAIN_CACHE_DIR='%s' POCL_KERNEL_CACHE=%d '%s' bench probe >/dev/null 2>&1", cache, pocl_cache, self);
    double t0 = ct_now();
    int st = system(cmd);
    double t = ct_now() - t0;
    return st == 0 ? t : -1;
}

static int bench_train(const cli_opts *c, int steps) {
    const ct_train_opts *o = &c->train;
    ct_model m;
    ct_cl cl;
    int rc = cli_bench_setup(&m, &cl, c, o->gemm);
    if (rc) return rc;
    int B = o->batch;
    ct_optim_state opt;
    if ((rc = ct_optim_setup(&opt, &m, &o->optim))) {
        ct_model_free(&m);
        ct_cl_close(&cl);
        return rc;
    }
    step_arg a = {&m, &opt, B};
    for (int i = 0; i < 3; i++) step_fn(&a); /* warm up */
    ct_cl_finish(&cl);
    /* the fastest step and the process's CPU time show what a machine shared
     * with other jobs hides in the mean: a step slowed by another process is
     * slow on the clock, not in the fastest step or in CPU seconds */
    struct timespec c0, c1;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c0);
    double t0 = ct_now(), fastest = 1e30;
    for (int i = 0; i < steps; i++) {
        double s0 = ct_now();
        step_fn(&a);
        ct_model_read_results(&m, B, NULL); /* as the training loop does: one sync per step */
        if (ct_now() - s0 < fastest) fastest = ct_now() - s0;
    }
    double t = ct_now() - t0;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c1);
    double cpu = (double)(c1.tv_sec - c0.tv_sec) + (c1.tv_nsec - c0.tv_nsec) * 1e-9;
    double step_flops = ct_model_step_flops(&m), ips = steps * B / t, gflops = ips * step_flops * 1e-9;
    int nw2 = 0, nw4 = 0, nd = 0;
    for (int i = 0; i < m.n_layers; i++)
        nw2 += ct_conv_tile(&m.layers[i]) == 2, nw4 += ct_conv_tile(&m.layers[i]) == 4, nd += ct_conv_tile(&m.layers[i]) == CT_TILE_DIRECT;
    static const char *conv_names[] = {"im2col", "winograd", "auto", "winograd4", "direct"};
    printf("cltrain bench train: model %s, batch %d, device %s (%s), gemm %s, conv %s (Winograd layers: %d F(2x2,3x3), "
           "%d F(4x4,3x3); direct: %d)\n",
           m.name, B, cl.device_name, cl.platform_name,
           o->gemm == CT_GEMM_CLBLAST ? "clblast" : o->gemm == CT_GEMM_AUTO ? "auto" : "native", conv_names[o->conv], nw2,
           nw4, nd);
    printf("steady-state images/s: %.1f\n", ips);
    printf("fastest-step images/s: %.1f\n", B / fastest);
    printf("step time: %.2f ms over %d steps (fastest %.2f ms); %.1f MFLOP per image (fwd+bwd); achieved %.1f GFLOP/s\n",
           t / steps * 1e3, steps, fastest * 1e3, step_flops * 1e-6, gflops);
    printf("process CPU time: %.2f ms per step, %.2f cores busy on average\n", cpu / steps * 1e3, cpu / t);
    ct_optim_free(&opt);
    ct_model_free(&m);
    ct_cl_close(&cl);
    /* start-up: the whole process, from exec to the end of the first training step
     * (CLTRAIN_BENCH_STARTUP=0 leaves it out: tools/bench-pytorch.sh needs only the rate) */
    const char *startup = getenv("CLTRAIN_BENCH_STARTUP");
    char self[4096];
    ssize_t n = startup && !strcmp(startup, "0") ? 0 : readlink("/proc/self/exe", self, sizeof self - 1);
    if (n > 0) {
        self[n] = 0;
        char dir[] = "/tmp/cltrain-bench-XXXXXX";
        if (mkdtemp(dir)) {
            /* the cold start compiles every kernel anew: about a minute on a CPU, silent otherwise */
            printf("timing start-up: one cold start (empty program cache: every kernel compiled, about a minute on a "
                   "CPU) and two warm ones, each a new process up to its first step (CLTRAIN_BENCH_STARTUP=0 skips this)...\n");
            double cold = spawn_probe(self, dir, 0), warm = spawn_probe(self, dir, 1);
            warm = spawn_probe(self, dir, 1); /* the first warm run may still fill PoCL's own cache */
            printf("start-up to first step done: cold %.2f s (empty program cache), warm %.2f s (cached programs)\n", cold, warm);
            char rm[200];
            snprintf(rm, sizeof rm, "rm -rf '%s'", dir);
            if (system(rm)) {}
        }
    }
    return 0;
}

/* bench probe: what the start-up figure measures (device, builds, buffers, one step) */
static int bench_probe(const cli_opts *c) {
    const ct_train_opts *o = &c->train;
    ct_model m;
    ct_cl cl;
    int rc = cli_bench_setup(&m, &cl, c, CT_GEMM_NATIVE);
    if (rc) return rc;
    ct_optim_state opt;
    if (!(rc = ct_optim_setup(&opt, &m, &o->optim))) {
        step_arg a = {&m, &opt, o->batch};
        step_fn(&a);
        ct_model_read_results(&m, o->batch, NULL);
    }
    ct_optim_free(&opt);
    ct_model_free(&m);
    ct_cl_close(&cl);
    return rc;
}

/* Image input, per producer thread: decoding PNG files against reading
 * record shards of the same images. 512 PNGs of 128x128x3 (a gradient,
 * random rectangles and a little noise: a few KB each, like photos of
 * simple scenes) are written to a temporary folder and packed; each source
 * then loads every image once in one thread, and again split over 2. */
typedef struct { const ct_source *src; int lo, hi, rc; } load_arg;
static void *load_range(void *p) {
    load_arg *a = p;
    float *x = ct_xmalloc(sizeof(float) * (size_t)a->src->h * a->src->w * a->src->c);
    int32_t lab;
    for (int i = a->lo; i < a->hi && !a->rc; i++) a->rc = a->src->load(a->src->ctx, i, x, &lab, NULL);
    free(x);
    return NULL;
}

static double load_rate(const ct_source *src, int threads, int *rc) {
    pthread_t t[8];
    load_arg a[8];
    double t0 = ct_now();
    for (int k = 0; k < threads; k++) {
        a[k] = (load_arg){src, src->n * k / threads, src->n * (k + 1) / threads, 0};
        pthread_create(&t[k], NULL, load_range, &a[k]);
    }
    for (int k = 0; k < threads; k++) {
        pthread_join(t[k], NULL);
        if (a[k].rc) *rc = a[k].rc;
    }
    return src->n / (ct_now() - t0);
}

/* varint v at p, returns the bytes used */
static size_t put_varint(uint8_t *p, uint64_t v) {
    size_t k = 0;
    while (v >= 0x80) { p[k++] = (uint8_t)(v | 0x80); v >>= 7; }
    p[k++] = (uint8_t)v;
    return k;
}
static uint32_t tfr_mask(uint32_t c) { return ((c >> 15) | (c << 17)) + 0xa282ead8u; }

/* The folder's images as one TF-Slim TFRecord file (image/encoded, image/class/label). */
static int write_tfrecord(const ct_imgdir *d, const char *path) {
    FILE *f = fopen(path, "wb");
    if (!f) return ct_fail(CT_EIO, "%s: cannot write", path);
    int rc = 0;
    for (int i = 0; i < d->split[0].n && !rc; i++) {
        FILE *in = fopen(d->split[0].paths[i], "rb");
        uint8_t *png = ct_xmalloc(1 << 20), *ex = ct_xmalloc((1 << 20) + 256), lab[16], img[32];
        size_t n = in ? fread(png, 1, 1 << 20, in) : 0, e = 0, li = 0, ii = 0;
        if (in) fclose(in);
        /* Feature{int64_list=3{value=1 packed}}, Feature{bytes_list=1{value=1}} */
        uint8_t v[10];
        size_t vn = put_varint(v, (uint64_t)d->split[0].labels[i]);
        lab[li++] = 0x1a; li += put_varint(lab + li, vn + 2); lab[li++] = 0x0a; lab[li++] = (uint8_t)vn;
        memcpy(lab + li, v, vn); li += vn;
        size_t blist = 1 + put_varint(v, n) + n; /* BytesList */
        img[ii++] = 0x0a; ii += put_varint(img + ii, blist); img[ii++] = 0x0a; ii += put_varint(img + ii, n);
        const char *k1 = "image/encoded", *k2 = "image/class/label";
        size_t e1 = 2 + strlen(k1) + 1 + put_varint(v, ii + n) + ii + n, e2 = 2 + strlen(k2) + 1 + 1 + li;
        ex[e++] = 0x0a; e += put_varint(ex + e, 1 + put_varint(v, e1) + e1 + 1 + put_varint(v, e2) + e2); /* features */
        ex[e++] = 0x0a; e += put_varint(ex + e, e1);
        ex[e++] = 0x0a; ex[e++] = (uint8_t)strlen(k1); memcpy(ex + e, k1, strlen(k1)); e += strlen(k1);
        ex[e++] = 0x12; e += put_varint(ex + e, ii + n); memcpy(ex + e, img, ii); e += ii; memcpy(ex + e, png, n); e += n;
        ex[e++] = 0x0a; e += put_varint(ex + e, e2);
        ex[e++] = 0x0a; ex[e++] = (uint8_t)strlen(k2); memcpy(ex + e, k2, strlen(k2)); e += strlen(k2);
        ex[e++] = 0x12; ex[e++] = (uint8_t)li; memcpy(ex + e, lab, li); e += li;
        uint64_t len = e;
        uint32_t lc = tfr_mask(ct_crc32c(&len, 8)), dc = tfr_mask(ct_crc32c(ex, e));
        if (!n || fwrite(&len, 8, 1, f) != 1 || fwrite(&lc, 4, 1, f) != 1 || fwrite(ex, 1, e, f) != e || fwrite(&dc, 4, 1, f) != 1)
            rc = ct_fail(CT_EIO, "%s: cannot write", path);
        free(png);
        free(ex);
    }
    if (fclose(f) && !rc) rc = ct_fail(CT_EIO, "%s: cannot write", path);
    return rc;
}

static int bench_image_input(void) {
    char dir[] = "/tmp/cltrain-bench-img-XXXXXX", path[4200];
    if (!mkdtemp(dir)) return ct_fail(CT_EIO, "cannot make a temporary folder in /tmp");
    const int S = 128, C = 3, classes = 4, per = 128;
    uint8_t *img = ct_xmalloc((size_t)S * S * C);
    long bytes = 0;
    int rc = 0;
    for (int c = 0; c < classes && !rc; c++) {
        snprintf(path, sizeof path, "%s/class%d", dir, c);
        ct_mkdir_p(path);
        for (int i = 0; i < per && !rc; i++) {
            ct_rng r = ct_rng_make(7, (uint64_t)c, (uint64_t)i);
            int gx = (int)ct_rng_below(&r, 3), gy = (int)ct_rng_below(&r, 3);
            for (int y = 0; y < S; y++)
                for (int x = 0; x < S; x++)
                    for (int k = 0; k < C; k++) img[(y * S + x) * C + k] = (uint8_t)(40 + gx * x / 2 + gy * y / 3 + 30 * k);
            for (int q = 0; q < 6; q++) { /* rectangles */
                int x0 = (int)ct_rng_below(&r, S), y0 = (int)ct_rng_below(&r, S), w = 8 + (int)ct_rng_below(&r, 40),
                    h = 8 + (int)ct_rng_below(&r, 40);
                uint8_t col[3] = {(uint8_t)ct_rng_below(&r, 256), (uint8_t)ct_rng_below(&r, 256), (uint8_t)ct_rng_below(&r, 256)};
                for (int y = y0; y < y0 + h && y < S; y++)
                    for (int x = x0; x < x0 + w && x < S; x++) memcpy(img + (y * S + x) * C, col, 3);
            }
            for (int k = 0; k < S * S * C; k += 7) img[k] = (uint8_t)(img[k] + ct_rng_below(&r, 9) - 4); /* a little noise */
            snprintf(path, sizeof path, "%s/class%d/%04d.png", dir, c, i);
            if (!stbi_write_png(path, S, S, C, img, S * C)) rc = ct_fail(CT_EIO, "%s: cannot write", path);
            struct stat st;
            if (!rc && !stat(path, &st)) bytes += st.st_size;
        }
    }
    ct_imgdir d;
    memset(&d, 0, sizeof d);
    ct_imgdir_src_ctx ctx[2];
    memset(ctx, 0, sizeof ctx);
    ct_shardset set;
    memset(&set, 0, sizeof set);
    ct_source folder, folder64, shards;
    if (!rc) rc = ct_imgdir_scan(&d, dir, 0, 1, 1);
    if (!rc) rc = ct_imgdir_source_init(&folder, &ctx[0], &d, CT_SPLIT_TRAIN, S, C);
    if (!rc) rc = ct_imgdir_source_init(&folder64, &ctx[1], &d, CT_SPLIT_TRAIN, 64, C);
    char out[4300];
    snprintf(out, sizeof out, "%s/shards", dir);
    cli_pack_stats pst;
    memset(&pst, 0, sizeof pst);
    if (!rc) rc = cli_pack_split(&d, CT_SPLIT_TRAIN, out, S, C, 1, 2, 0, &pst);
    if (!rc) rc = ct_shardset_open(&set, out, "train");
    if (!rc) rc = ct_shardset_source_init(&shards, &set);
    char tpath[4300];
    snprintf(tpath, sizeof tpath, "%s/train.tfrecord", dir);
    ct_tfr_data td;
    memset(&td, 0, sizeof td);
    ct_tfr_src_ctx tctx;
    ct_source tfr;
    const char *tp = tpath;
    if (!rc) rc = write_tfrecord(&d, tpath);
    if (!rc) rc = ct_tfr_open(&td, &tp, 1, NULL, 0, 0, 1, NULL);
    if (!rc) rc = ct_tfr_source_init(&tfr, &tctx, &td, CT_SPLIT_TRAIN, S, C);
    if (!rc) {
        printf("\nimage input per producer thread: %d PNGs of %dx%dx%d, %.1f KB each on average (files in the page cache)\n",
               d.split[0].n, S, S, C, bytes / 1024.0 / d.split[0].n);
        printf("%-40s %14s %16s\n", "source", "1 thread img/s", "2 threads img/s");
        const struct { const char *name; const ct_source *src; } rows[] = {
            {"PNG files, decode (128x128)", &folder}, {"PNG files, decode + resize to 64x64", &folder64},
            {"record shards (pack), CRC checked", &shards}, {"TFRecord (TF-Slim PNG records), decode", &tfr}};
        double one[4];
        for (int k = 0; k < 4 && !rc; k++) {
            load_rate(rows[k].src, 1, &rc); /* warm the page cache */
            one[k] = load_rate(rows[k].src, 1, &rc);
            double two = load_rate(rows[k].src, 2, &rc);
            printf("%-40s %14.0f %16.0f\n", rows[k].name, one[k], two);
        }
        if (!rc) printf("shards / PNG decode: %.1fx per thread at 128x128\n", one[2] / one[0]);
    }
    ct_tfr_free(&td);
    ct_shardset_close(&set);
    ct_imgdir_source_free(&ctx[0]);
    ct_imgdir_source_free(&ctx[1]);
    ct_imgdir_free(&d);
    free(img);
    char rm[4400];
    snprintf(rm, sizeof rm, "rm -rf '%s'", dir);
    if (system(rm)) {}
    return rc;
}

/* The seed experiment behind the design (feed-then-train vs threaded
 * producers), on our kernels and Fashion-MNIST: each input mode in a
 * compute-bound regime (no storage latency), a balanced one (simulated
 * latency per image = the measured compute time per image, where the ideal
 * speed-up of a pipeline over loading in the loop is 2x) and an input-bound
 * one (twice that latency). */
static int bench_pipeline(const cli_opts *c) {
    ct_data d;
    int rc = ct_data_open(&d, ct_dataset_find("fashion-mnist"), &c->data);
    if (rc) return rc;
    const ct_dataset *train = d.train;
    ct_train_opts o = c->train;
    o.quiet = 2;
    if (!o.max_steps) o.max_steps = 30;
    ct_train_result r;
    /* compute alone, measured as the rows are (images/s over a whole run), resident (no input cost at
     * all), after one run that warms up what the first run in a process pays for (kernel builds per
     * work-group size, first-touch of buffers): sized from a cold run, the latencies came out twice too long */
    o.resident = 1;
    o.io_latency_us = 0;
    if ((rc = ct_train(&o, train, NULL, &r, stdout)) || (rc = ct_train(&o, train, NULL, &r, stdout))) goto out;
    int lat = (int)(1e6 / r.images_per_s + 0.5);
    printf("cltrain bench pipeline: model %s, batch %d, %ld steps per run; compute %.0f images/s (resident, after a "
           "warm-up run) = %d us per image\n", o.model, o.batch, o.max_steps, r.images_per_s, lat);
    printf("simulated storage latency is a sleep per sample in the producer (or in the loop when synchronous)\n");
    printf("%-14s %-22s %10s %11s %11s %10s %9s\n", "regime", "mode", "images/s", "data-wait", "efficiency", "producers", "speed-up");
    const struct { const char *name; int mult; } regimes[] = {{"compute-bound", 0}, {"balanced", 1}, {"input-bound", 2}};
    const struct { const char *name; int producers, resident; } modes[] = {
        {"synchronous", 0, 0}, {"pipelined, 1 producer", 1, 0}, {"pipelined, 2 producers", 2, 0},
        {"pipelined, 4 producers", 4, 0}, {"pipelined, auto", -1, 0}, {"resident", 0, 1}};
    for (size_t g = 0; g < sizeof regimes / sizeof *regimes; g++) {
        double sync_ips = 0;
        for (size_t k = 0; k < sizeof modes / sizeof *modes; k++) {
            if (modes[k].resident && regimes[g].mult) continue; /* resident reads no storage */
            o.producers = modes[k].producers;
            o.resident = modes[k].resident;
            o.io_latency_us = lat * regimes[g].mult;
            if ((rc = ct_train(&o, train, NULL, &r, stdout))) goto out;
            if (k == 0) sync_ips = r.images_per_s;
            char prod[16];
            snprintf(prod, sizeof prod, "%d", r.producers);
            printf("%-14s %-22s %10.0f %10.1f%% %11.2f %10s %8.2fx\n", k ? "" : regimes[g].name, modes[k].name, r.images_per_s,
                   100 * r.wait_s / r.total_s, r.efficiency, modes[k].resident ? "-" : prod, r.images_per_s / sync_ips);
            if (modes[k].producers < 0 && r.auto_fill_rate > 0) { /* how auto chose, and whether the table bears it out */
                double steady = r.producer_rate > 0 ? r.producer_rate / r.producers : 0;
                double w = r.total_s > 0 ? r.wait_s / r.total_s : 0, comp = r.images_per_s / (1 - w > 0.05 ? 1 - w : 0.05);
                printf("%-14s   auto: ceil(%.1f x compute %.0f / one producer %.0f images/s, each timed on one step) = %d",
                       "", CT_AUTO_MARGIN, r.auto_compute_rate, r.auto_fill_rate, r.producers);
                if (steady > 0)
                    printf("; the run's own rates (%.0f, %.0f) give %d", comp, steady,
                           (int)ceil(CT_AUTO_MARGIN * comp / steady) > 16 ? 16 : (int)ceil(CT_AUTO_MARGIN * comp / steady));
                printf("\n");
            }
        }
    }
    printf("efficiency = achieved / min(producer rate, compute rate); for synchronous loading the two add up instead\n");
    rc = bench_image_input();
out:
    ct_data_close(&d);
    return rc;
}

/* Data-parallel scaling, under `mpirun -np N cltrain bench dist`: rank 0
 * trains alone first (the others wait without spinning), then all N ranks
 * train together on the same per-rank batch; both on random bytes in memory,
 * so only compute and communication are timed. Then the model of what a
 * cluster would give: ring all-reduce time 2(N-1)/N x S / bandwidth plus a
 * latency per message, of which the backward still running hides up to the
 * measured overlap window. */
static int bench_dist(const cli_opts *c) {
    ct_model probe;
    int rc = load_model(&probe, c->train.model, c->data.size, c->data.channels);
    if (rc) return rc;
    ct_train_opts o = c->train;
    o.quiet = 2;
    o.producers = 0;
    o.fit_model = c->data.size || c->data.channels;
    if (!o.max_steps) o.max_steps = 20;
    const int R = ct_world.size;
    ct_dataset ds = {.n = (int)((o.max_steps + 1) * o.batch * R), .h = probe.in_h, .w = probe.in_w, .c = probe.in_c,
                     .n_classes = probe.n_classes};
    double params = (double)probe.n_params;
    ct_model_free(&probe);
    size_t sz = (size_t)ds.h * ds.w * ds.c;
    ds.images = ct_xmalloc(sz * ds.n);
    ds.labels = ct_xmalloc((size_t)ds.n);
    ct_rng r = ct_rng_make(o.seed, 99, 0);
    for (size_t i = 0; i < sz * ds.n; i++) ds.images[i] = (uint8_t)ct_rng_below(&r, 256);
    for (int i = 0; i < ds.n; i++) ds.labels[i] = (uint8_t)ct_rng_below(&r, (uint32_t)ds.n_classes);
    ct_train_result r1, rn;
    memset(&r1, 0, sizeof r1);
    /* 1. rank 0 alone */
    if (ct_world.rank == 0) {
        ct_dist saved = ct_world;
        ct_world.size = 1;
        rc = ct_train(&o, &ds, NULL, &r1, stdout);
        ct_world = saved;
    }
    ct_dist_barrier();
    /* 2. every rank */
    if (!rc && R > 1) rc = ct_train(&o, &ds, NULL, &rn, stdout);
    ct_dataset_free(&ds);
    if (rc || ct_world.rank) return rc;
    double S = params * 4, t1 = o.batch / r1.images_per_s;
    printf("cltrain bench dist: model %s, %.2f M parameters (%.1f MB of gradients per step), batch %d per rank, %ld steps, %d rank%s\n",
           o.model, params * 1e-6, S * 1e-6, o.batch, o.max_steps, R, R == 1 ? "" : "s");
    printf("%-24s %10s %9s %18s %8s %12s %10s\n", "", "images/s", "step ms", "all-reduce ms/step", "hidden", "exposed ms", "overlap ms");
    printf("%-24s %10.1f %9.1f\n", "1 rank (rank 0 alone)", r1.images_per_s, 1e3 * t1);
    if (R > 1) {
        char lab[32];
        snprintf(lab, sizeof lab, "%d ranks", R);
        printf("%-24s %10.1f %9.1f %18.2f %7.0f%% %12.2f %10.2f\n", lab, rn.images_per_s, 1e3 * R * o.batch / rn.images_per_s,
               rn.allreduce_ms, 100 * rn.hidden_frac, rn.exposed_ms, rn.window_ms);
        printf("scaling efficiency: %.1f / (%d x %.1f) = %.2f   (%d buckets of up to %.0f MB)\n", rn.images_per_s, R, r1.images_per_s,
               rn.images_per_s / (R * r1.images_per_s), rn.buckets, (o.bucket_bytes ? o.bucket_bytes : (size_t)1 << 20) / 1048576.0);
        double moved = 2.0 * (R - 1) / R * S;
        printf("measured: each rank moved %.1f MB per step (ring: 2(N-1)/N x S); %.2f GB/s effective over this node's shared memory\n",
               moved * 1e-6, rn.allreduce_ms > 0 ? moved / (rn.allreduce_ms * 1e-3) * 1e-9 : 0);
    } else {
        printf("(one rank: run under `mpirun -np N` for the N-rank figures)\n");
    }
    /* the model, with this machine's compute time per step and overlap window */
    double window = R > 1 ? rn.window_ms * 1e-3 : 0.5 * t1; /* without a measurement: backward ~ half a step */
    const struct { const char *link; double bw, lat; } links[] = {
        {"10 GbE", 1.25e9, 20e-6}, {"100 Gb InfiniBand", 12.5e9, 2e-6}, {"NVLink-class 300 GB/s", 300e9, 2e-6}};
    printf("model (not measured: assumed link speeds): step(N) = compute + max(0, allreduce(N) - overlap); allreduce(N) = 2(N-1)/N x %.1f MB / bandwidth + 2(N-1) x latency x buckets\n",
           S * 1e-6);
    printf("       with compute %.1f ms and overlap %.1f ms per step as measured here:\n", 1e3 * t1, 1e3 * window);
    int nb = R > 1 && rn.buckets ? rn.buckets : 1;
    for (size_t k = 0; k < sizeof links / sizeof *links; k++) {
        printf("  %-22s", links[k].link);
        for (int N = 2; N <= 64; N *= 4) {
            double ar = 2.0 * (N - 1) / N * S / links[k].bw + 2.0 * (N - 1) * links[k].lat * nb;
            double step = t1 + (ar > window ? ar - window : 0);
            printf("  N=%-2d all-reduce %6.1f ms, efficiency %.2f", N, ar * 1e3, t1 / step);
        }
        printf("\n");
    }
    return 0;
}

int cmd_bench(int argc, char **argv) {
    if (argc < 2) {
        ct_fail(CT_EINPUT, "bench needs one of: kernels, train, pipeline, dist, images, probe; see `cltrain --help`");
        return cli_fail(CT_EINPUT);
    }
    const char *what = argv[1];
    cli_opts c;
    cli_opts_defaults(&c);
    cli_opts_for(&c, CLI_BENCH, "bench", NULL);
    int rc = cli_parse_train(argc - 1, argv + 1, &c);
    if (rc) return cli_fail(rc);
    if (!strcmp(what, "kernels")) rc = bench_kernels(&c);
    else if (!strcmp(what, "train")) rc = bench_train(&c, c.train.max_steps ? (int)c.train.max_steps : 20);
    else if (!strcmp(what, "pipeline")) rc = bench_pipeline(&c);
    else if (!strcmp(what, "probe")) rc = bench_probe(&c);
    else if (!strcmp(what, "dist")) rc = bench_dist(&c);
    else if (!strcmp(what, "images")) rc = bench_image_input();
    else rc = ct_fail(CT_EINPUT, "bench %s: expected kernels, train, pipeline, dist, images or probe", what);
    return rc ? cli_fail(rc) : 0;
}
