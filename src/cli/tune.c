/* cli/tune.c: `cltrain tune [--model M] [--batch-size B] [--budget S] [--device P:D]`.
 * Sets the model up with the shipped defaults (the baseline), times each of
 * its 3x3 stride-1 conv shapes as im2col + GEMM, Winograd F(2x2, 3x3) and
 * F(4x4, 3x3) (forward + backward, in a model set up for each, within half
 * the budget: the algorithm the shipped rule gives most shapes first, each
 * layer's timing only while that share lasts), sets the model up again with the conv algorithms found (which
 * lists its GEMM shapes: forward, backward data and weights, the Winograd
 * GEMMs), runs the GEMM search of nn/tune.c within the rest of the budget,
 * then times whole training steps of the baseline and of the tuned model,
 * interleaved, and writes the tuning database. When the tuned step is not
 * faster, the model's shapes keep the defaults.
 * The same search runs once, within CLTRAIN_AUTOTUNE seconds (20), before a
 * first training run on a device (and class) with no tuning database
 * (cli_autotune), so that --conv auto and the GEMM kernels are what was
 * measured there: for the model the run trains (a checkpoint's on --resume
 * and --init, one fitted to an image set's or arrays' shape), and under
 * mpirun on each rank's device, the ranks of a node in turn. The test suite
 * sets CLTRAIN_AUTOTUNE=0 and tests/tune.sh runs it for each kind of run.
 * Tested by tests/tune.sh. */
#include "cli.h"
#include "cltrain/dist.h"
#include "cltrain/file.h"
#include "cltrain/layer.h"
#include <math.h>
#include <string.h>
#include <unistd.h>

/* where the search reports: stdout for `cltrain tune`, nowhere (or stderr at CLTRAIN_DEBUG >= 1)
 * for the automatic search of a first training run */
static FILE *tout;

/* mean step time over k steps */
static double step_time(ct_model *m, ct_optim_state *opt, int B, int k) {
    ct_cl_finish(m->cl);
    double t0 = ct_now();
    for (int i = 0; i < k; i++) cli_bench_step(m, opt, B);
    ct_cl_finish(m->cl);
    return (ct_now() - t0) / k;
}

/* the shipped defaults (model d) against the tuned choices (model t), interleaved, the order
 * alternating: best of up to 5 rounds (at least 2, more while one more ends before `until`);
 * *faster: the rounds in which the tuned step was faster */
static int compare_steps(ct_model *d, ct_optim_state *od, ct_model *t, ct_optim_state *ot, int B, int k, double until, double *t_def,
                         double *t_tuned, int *faster) {
    *t_def = *t_tuned = 1e30;
    *faster = 0;
    int r = 0;
    double t_round = 0;
    cli_bench_step(d, od, B); /* first launches of a new shape compile on PoCL */
    cli_bench_step(t, ot, B);
    for (; r < 5 && (r < 2 || ct_now() + t_round < until); r++) {
        double r0 = ct_now(), tt[2];
        for (int j = 0; j < 2; j++) {
            int use = (j + r) % 2;
            tt[use] = step_time(use ? t : d, use ? ot : od, B, k);
        }
        if (tt[0] < *t_def) *t_def = tt[0];
        if (tt[1] < *t_tuned) *t_tuned = tt[1];
        *faster += tt[1] < tt[0];
        t_round = ct_now() - r0;
    }
    return r;
}

/* how many of the model's GEMM shapes run something else than the default */
static int model_choices(ct_gemm *g) {
    int n = 0;
    for (int i = 0; i < g->n_shapes; i++) {
        const int *s = g->shapes[i];
        ct_gemm_choice *c = ct_gemm_find(g, s[0], s[1], s[2], s[3], s[4]);
        n += c && c->path == CT_GEMM_NATIVE;
    }
    return n;
}

/* drop the choices of this model's GEMM shapes and put back the conv choices
 * the database had (the tuned step was not faster) */
static void drop_model_choices(ct_gemm *g, const ct_gemm *before) {
    for (int i = 0; i < g->n_shapes; i++) {
        const int *s = g->shapes[i];
        ct_gemm_choice *c = ct_gemm_find(g, s[0], s[1], s[2], s[3], s[4]);
        if (c) *c = g->choices[--g->n_choices];
    }
    memcpy(g->convs, before->convs, sizeof g->convs);
    g->n_convs = before->n_convs;
}

/* ---- the conv search: each 3x3 stride-1 layer shape as im2col + GEMM, Winograd F(2x2, 3x3) and F(4x4, 3x3),
 * and the direct kernel where it fits ---- */

enum { N_ALGOS = 4, A_DIRECT = 3 };
static const int TILES[N_ALGOS] = {0, 2, 4, CT_TILE_DIRECT};
static const int ALGOS[N_ALGOS] = {CT_CONV_IM2COL, CT_CONV_WINOGRAD, CT_CONV_WINOGRAD4, CT_CONV_DIRECT};
static const char *const ALGO_NAMES[N_ALGOS] = {"im2col", "wino2", "wino4", "direct"};
/* rule: the index (into TILES) of the algorithm the shipped rule gives the shape */
typedef struct { ct_conv_choice key; int rule, layers; double t[N_ALGOS]; } conv_shape;

static int is_tunable_conv(const ct_layer *L) { return !strcmp(ct_layer_name(L), "conv") && ct_conv_tunable(L); }
static int tile_index(int tile) { return tile == 4 ? 2 : tile == 2 ? 1 : tile == CT_TILE_DIRECT ? A_DIRECT : 0; }
/* whether algorithm a applies to the shape (the direct kernel has limits) */
static int algo_fits(const conv_shape *s, int a) { return a != A_DIRECT || ct_conv_direct_fits(3, s->key.ic, s->key.oc); }

static int key_index(const conv_shape *cs, int n, const ct_conv_choice *q) {
    for (int j = 0; j < n; j++)
        if (ct_conv_same_shape(&cs[j].key, q)) return j;
    return -1;
}

static int shape_index(const conv_shape *cs, int n, const ct_layer *L, int B) {
    ct_conv_choice q = ct_conv_key(L, B);
    return key_index(cs, n, &q);
}

/* the model's tunable conv shapes, with the tile the shipped rule gives each (from the baseline model d) */
static int conv_shapes(const ct_model *d, int B, conv_shape *cs) {
    int n = 0;
    for (int i = 0; i < d->n_layers; i++) {
        const ct_layer *L = &d->layers[i];
        if (!is_tunable_conv(L)) continue;
        int j = shape_index(cs, n, L, B);
        if (j < 0 && n == CT_CONV_MAX_CHOICES) continue;
        if (j < 0) {
            j = n++;
            cs[j] = (conv_shape){ct_conv_key(L, B), tile_index(ct_conv_tile(L)), 0, {0}};
        }
        cs[j].layers++;
    }
    return n;
}

/* where a search says what it skipped or rejected: the report (`cltrain tune`), and also stderr for the
 * automatic search, whose report is not shown */
static FILE *tnotes;

/* Layer i's forward output against a float64 reference at sampled points (the corners and random
 * entries): 0 when right, else -1 with the first wrong entry in why. Run again here, so that the
 * output is this layer's as its forward leaves it, from the input as the layer before left it. */
static int conv_check(ct_model *m, int i, int B, char *why, size_t n) {
    const ct_layer *L = &m->layers[i];
    size_t nin = (size_t)B * ct_in_size(L), nout = (size_t)B * ct_out_size(L);
    float *x = ct_xmalloc(nin * 4), *y = ct_xmalloc(nout * 4), *w = ct_xmalloc((L->n_w + L->n_b) * 4);
    ct_cl_read(m->cl, ct_layer_output(m, i - 1), 0, nin * 4, x);
    ct_layer_forward(m, i, B);
    ct_cl_read(m->cl, L->out, 0, nout * 4, y);
    ct_cl_read(m->cl, m->params, L->w_off * 4, L->n_w * 4, w);
    ct_cl_read(m->cl, m->params, L->b_off * 4, L->n_b * 4, w + L->n_w);
    const float *bias = L->n_b ? w + L->n_w : NULL;
    ct_rng r = ct_rng_make(31, (uint64_t)i, (uint64_t)B);
    int rc = 0;
    for (int s = 0; s < 260 && !rc; s++) {
        /* the first and last entries of the first and last pixels, then random ones */
        size_t o = s == 0 ? 0 : s == 1 ? (size_t)L->oc - 1 : s == 2 ? nout - (size_t)L->oc : s == 3 ? nout - 1
                 : (size_t)ct_rng_below(&r, (uint32_t)nout);
        int k = (int)(o % L->oc), ox = (int)(o / L->oc % L->ow), oy = (int)(o / L->oc / L->ow % L->oh);
        int b = (int)(o / ((size_t)L->oc * L->ow * L->oh));
        double sum = bias ? bias[k] : 0, mag = fabs(sum);
        for (int ky = 0; ky < L->k; ky++)
            for (int kx = 0; kx < L->k; kx++) {
                int iy = oy * L->stride - L->pad + ky, ix = ox * L->stride - L->pad + kx;
                if (iy < 0 || iy >= L->ih || ix < 0 || ix >= L->iw) continue;
                const float *xp = x + (((size_t)b * L->ih + iy) * L->iw + ix) * L->ic;
                const float *wp = w + ((size_t)(ky * L->k + kx) * L->ic) * L->oc + k;
                for (int c = 0; c < L->ic; c++) {
                    double t = (double)xp[c] * wp[(size_t)c * L->oc];
                    sum += t;
                    mag += fabs(t);
                }
            }
        double want = L->act == CT_ACT_RELU ? (sum > 0 ? sum : 0)
                    : L->act == CT_ACT_GELU ? 0.5 * sum * (1 + erf(sum * M_SQRT1_2)) : sum;
        /* float32 sums (and Winograd's transforms) of these magnitudes */
        if (!isfinite(y[o]) || fabs(y[o] - want) > 1e-3 * mag + 1e-5) {
            snprintf(why, n, "layer %d output [%d,%d,%d,%d] = %.7g, reference %.7g", i, b, oy, ox, k, y[o], want);
            rc = -1;
        }
    }
    free(x); free(y); free(w);
    return rc;
}

/* Time every tunable layer with algorithm a (a model set up for it, then freed), after checking its
 * forward against the reference (a shape where it is wrong gets bad[j][a]); 0, 1 when `until` came
 * before every layer was timed (its sums are then partial: not to be compared), or -1 when it could not
 * be set up (a kernel that does not build on this device: one line says so) */
static int time_algo(const cli_opts *c, int a, int B, conv_shape *cs, int n, int bad[][N_ALGOS], double until) {
    cli_opts ca = *c;
    ca.train.conv = ALGOS[a];
    ct_model m, db = {.db_defaults = 1};
    ct_cl cl;
    if (cli_bench_setup_db(&m, &cl, &ca, CT_GEMM_NATIVE, &db)) {
        fprintf(tout, "  %s skipped: %s\n", ALGO_NAMES[a], ct_last_error());
        if (tnotes != tout) fprintf(tnotes, "cltrain: kernel search: conv algorithm %s skipped on this device: %s\n", ALGO_NAMES[a], ct_last_error());
        return -1;
    }
    cli_real_gradients(&m, B);
    char why[256];
    int cut = 0;
    for (int i = 0; i < m.n_layers; i++) {
        int j = is_tunable_conv(&m.layers[i]) ? shape_index(cs, n, &m.layers[i], B) : -1;
        if (j < 0 || bad[j][a] || !algo_fits(&cs[j], a)) continue;
        if (ct_now() > until) { cut = 1; break; }
        if (conv_check(&m, i, B, why, sizeof why)) {
            bad[j][a] = 1;
            fprintf(tout, "  %s rejected for %dx%dx%d->%d: wrong result, %s\n", ALGO_NAMES[a], cs[j].key.ih, cs[j].key.iw, cs[j].key.ic,
                    cs[j].key.oc, why);
            if (tnotes != tout)
                fprintf(tnotes, "cltrain: kernel search: conv algorithm %s rejected on this device (wrong result: %s)\n", ALGO_NAMES[a], why);
            continue;
        }
        cs[j].t[a] += cli_time_layer(&m, i, B, 3);
    }
    ct_model_free(&m);
    ct_cl_close(&cl);
    return cut;
}

/* Search, within `until`; the chosen conv shapes go to out (the database's other conv shapes are kept).
 * A shape changes from the shipped rule only when its best algorithm is 3% faster than the rule's. */
static int conv_search(const cli_opts *c, const ct_model *d, int B, double until, ct_conv_choice *out) {
    conv_shape cs[CT_CONV_MAX_CHOICES];
    int n = conv_shapes(d, B, cs), n_out = 0, timed[N_ALGOS] = {0}, fits[N_ALGOS] = {0}, bad[CT_CONV_MAX_CHOICES][N_ALGOS];
    memset(bad, 0, sizeof bad);
    for (int i = 0; i < d->gemm.n_convs; i++)
        if (key_index(cs, n, &d->gemm.convs[i]) < 0) out[n_out++] = d->gemm.convs[i];
    if (!n) return n_out;
    fprintf(tout, "conv search: %d shapes of 3x3 stride-1 layers, each as im2col + GEMM, Winograd F(2x2,3x3) and F(4x4,3x3),\n"
           " and the direct kernel where it fits\n", n);
    /* the algorithms the shipped rule gives most shapes first: a search cut short by `until` has then
     * timed what the others are compared with (an algorithm cut short is not compared at all) */
    int order[N_ALGOS], rules[N_ALGOS] = {0};
    for (int a = 0; a < N_ALGOS; a++) {
        order[a] = a;
        for (int j = 0; j < n; j++) {
            fits[a] |= algo_fits(&cs[j], a);
            rules[a] += cs[j].rule == a;
        }
    }
    for (int a = 1; a < N_ALGOS; a++)
        for (int b = a; b > 0 && rules[order[b]] > rules[order[b - 1]]; b--) {
            int t = order[b]; order[b] = order[b - 1]; order[b - 1] = t;
        }
    double t_last = 0;
    for (int o = 0; o < N_ALGOS; o++) {
        int a = order[o];
        if (!fits[a]) continue;
        if (ct_now() + t_last > until) {
            fprintf(tout, "  %s not timed: the budget's share for the conv search is spent\n", ALGO_NAMES[a]);
            continue;
        }
        double t0 = ct_now();
        int r = time_algo(c, a, B, cs, n, bad, until);
        timed[a] = r == 0;
        if (r == 1) fprintf(tout, "  %s not timed on every layer: the budget's share for the conv search ran out\n", ALGO_NAMES[a]);
        t_last = ct_now() - t0;
    }
    for (int j = 0; j < n; j++) {
        conv_shape *s = &cs[j];
        int rule = s->rule, best = -1;
        fprintf(tout, "  %dx%dx%d->%d pad %d (%d layer%s), forward + backward:", s->key.ih, s->key.iw, s->key.ic, s->key.oc,
               s->key.pad, s->layers, s->layers > 1 ? "s" : "");
        /* the fastest of the algorithms timed and right on this device; it replaces the rule's when that is 3%
         * slower, or wrong here (nothing changes when the rule's was not timed) */
        for (int a = 0; a < N_ALGOS; a++) {
            if (!timed[a] || !algo_fits(s, a)) continue;
            if (bad[j][a]) { fprintf(tout, " %s wrong", ALGO_NAMES[a]); continue; }
            fprintf(tout, " %s %.2f ms", ALGO_NAMES[a], s->t[a] * 1e3);
            if (best < 0 || s->t[a] < s->t[best]) best = a;
        }
        int rule_ok = !bad[j][rule];
        int take = timed[rule] && best >= 0 && best != rule && (!rule_ok || s->t[best] <= 0.97 * s->t[rule]);
        fprintf(tout, " -> %s%s\n", ALGO_NAMES[take ? best : rule], take ? "" : " (the shipped rule)");
        if (take && n_out < CT_CONV_MAX_CHOICES) {
            out[n_out] = s->key;
            out[n_out++].tile = TILES[best];
        }
    }
    return n_out;
}

/* --budget SECONDS, taken out of argv before the training options are parsed */
static int take_budget(int *argc, char **argv, double *budget) {
    for (int i = 1; i < *argc; i++) {
        const char *v = NULL;
        int n = 0;
        if (!strcmp(argv[i], "--budget")) { v = i + 1 < *argc ? argv[i + 1] : NULL; n = 2; }
        else if (!strncmp(argv[i], "--budget=", 9)) { v = argv[i] + 9; n = 1; }
        if (!n) continue;
        char *end;
        double b = v ? strtod(v, &end) : 0;
        if (!v || end == v || *end || !(b >= 1 && b <= 86400))
            return ct_fail(CT_EINPUT, "--budget %s: expected seconds in 1..86400", v ? v : "(missing)");
        *budget = b;
        memmove(argv + i, argv + i + n, sizeof(char *) * (size_t)(*argc - i - n));
        *argc -= n;
        i--;
    }
    return 0;
}

static void free_model(ct_model *m, ct_cl *cl, ct_optim_state *opt) {
    if (opt) ct_optim_free(opt);
    ct_model_free(m);
    ct_cl_close(cl);
}

/* The database must be writable (a new or a regular file in a folder that takes
 * one): found out before the search, not after it. */
static int db_writable(const char *path) {
    char dir[4200];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (slash) { *slash = 0; ct_mkdir_p(dir); }
    if (!ct_file_probe_write(path, "tuning database")) return 0;
    char why[1024];
    snprintf(why, sizeof why, "%s", ct_last_error());
    return ct_fail(CT_EINPUT, "%s (set CLTRAIN_CACHE_DIR to a writable folder); nothing was searched", why);
}

/* Each shape's choice won alone, but only the whole step decides: the tuned model's choices stay only when its step
 * beats the shipped defaults' beyond the noise, else they are dropped. Returns whether they stay; *t_def and *t_tuned
 * get both step times. */
static int keep_if_faster(ct_model *d, ct_optim_state *od, ct_model *m, ct_optim_state *opt, int B, int k, double until,
                          int convs_changed, double *t_def, double *t_tuned) {
    int faster, rounds = compare_steps(d, od, m, opt, B, k, until, t_def, t_tuned, &faster);
    fprintf(tout, "step time: shipped defaults %.2f ms, tuned %.2f ms (%.2fx; %d conv layers changed); best of %d x %d steps each, "
           "interleaved, tuned faster in %d of %d rounds\n", *t_def * 1e3, *t_tuned * 1e3, *t_def / *t_tuned, convs_changed,
           rounds, k, faster, rounds);
    /* a win above the noise: faster in every round, and by 2% in the best of each */
    int kept = faster == rounds && *t_tuned <= 0.98 * *t_def;
    if (!kept) {
        drop_model_choices(&m->gemm, &d->gemm);
        fprintf(tout, "the tuned step is not faster beyond the noise: this model's shapes keep the shipped defaults "
               "(the shape rows above are not kept)\n");
    }
    return kept;
}

enum { AUTO_STEPS = 30 }; /* training steps a first run's search needs at the least (tune_search) */

/* The search for c's model within budget seconds (0: the command's default), reported to tout.
 * automatic: a first training run's search, which gives up (writing a database with the shipped
 * defaults, so that it is not tried again) when one training step is too long for the budget. */
static int tune_search(const cli_opts *cp, double budget, int automatic) {
    double t0 = ct_now();
    cli_opts c = *cp;
    int rc;
    const ct_train_opts o = c.train;
    int B = o.batch;
    /* d: the shipped defaults (the baseline); m: the tuned model */
    ct_model d, m, db = {.db_defaults = 1};
    ct_cl cld, cl;
    ct_optim_state od, opt;
    if ((rc = cli_bench_setup_db(&d, &cld, &c, CT_GEMM_NATIVE, &db))) return rc;
    if ((rc = ct_optim_setup(&od, &d, &o.optim))) {
        free_model(&d, &cld, NULL);
        return rc;
    }
    if ((rc = db_writable(d.gemm.db_path))) {
        free_model(&d, &cld, &od);
        return rc;
    }
    if (!budget) budget = cld.is_cpu ? 60 : 120;
    if (automatic) {
        /* the first step compiles (it stops here when that alone takes half the budget); the
         * second says what a step costs. The search needs some 30 of them to find anything: 2 here
         * and 2 more to size the comparison, the conv search's 4 forward and backward passes of
         * every conv layer per algorithm (the shipped rule's and at least one other), and the
         * comparison's 2 warm-up steps and 2 rounds of both models. With 15, cifar-fast at batch
         * 1024 (1.0 s a step on a 2-core AMD EPYC) searched for 30.3 s of a 20 s budget and found
         * nothing (BENCHMARKS.md, "The first run's kernel search") */
        double t1 = step_time(&d, &od, B, 1);
        if (t1 * 2 <= budget) t1 = step_time(&d, &od, B, 1);
        if (t1 * AUTO_STEPS > budget) {
            fprintf(stderr, "cltrain: a training step takes %.2f s on this device, too long to search within %.0f s: "
                            "the shipped defaults stay (`cltrain tune --budget SECONDS` searches longer)\n", t1, budget);
            rc = ct_gemm_db_save(&d.gemm, d.gemm.db_path);
            free_model(&d, &cld, &od);
            return rc;
        }
    }
    char cfg[160];
    ct_gemm_cfg_str(&d.gemm.def, cfg, sizeof cfg);
    fprintf(tout, "cltrain tune: model %s, batch %d, device %s (%s, driver %s)\n", d.name, B, cld.device_name, cld.platform_name,
           cld.driver_version);
    fprintf(tout, "shipped default: %s (table row %s); database %s (%d GEMM and %d conv shapes already)\n", cfg, d.gemm.def_from,
           d.gemm.db_path, d.gemm.n_choices, d.gemm.n_convs);
    /* one step with the defaults sizes the final comparison, which the budget includes */
    cli_bench_step(&d, &od, B);
    double t_step = step_time(&d, &od, B, 1);
    int k = t_step > 0.5 ? 1 : t_step > 0.05 ? 3 : 10;
    /* the conv search may take up to half of what is left; then the tuned model is set up with its choices */
    ct_conv_choice convs[CT_CONV_MAX_CHOICES];
    db = (ct_model){.conv_tuned = convs};
    if (o.conv == CT_CONV_AUTO) {
        db.n_conv_tuned = conv_search(&c, &d, B, ct_now() + 0.5 * (budget - (ct_now() - t0)), convs);
    } else {
        fprintf(tout, "conv search: not run (--conv given, so the database's conv choices are not used)\n");
        db.conv_tuned = NULL;
    }
    if ((rc = cli_bench_setup_db(&m, &cl, &c, CT_GEMM_NATIVE, &db))) {
        free_model(&d, &cld, &od);
        return rc;
    }
    if ((rc = ct_optim_setup(&opt, &m, &o.optim))) {
        free_model(&m, &cl, NULL);
        free_model(&d, &cld, &od);
        return rc;
    }
    /* the comparison's first two rounds (a warm-up step each, then k steps of each model per round,
     * and PoCL compiling the work-group sizes of the tuned shapes) must fit; more rounds only while
     * time is left */
    double reserve = (4 * k + 2) * t_step * 2.5 + 0.05 * budget, left = budget - (ct_now() - t0) - reserve;
    if (left < 1) left = 1;
    ct_gemm_tune(&m.gemm, left, tout, tnotes);
    double t_def = 0, t_tuned = 0;
    int convs_changed = 0, compared = 0, kept = 0;
    for (int i = 0; i < m.n_layers; i++)
        convs_changed += ct_conv_tile(&m.layers[i]) != ct_conv_tile(&d.layers[i]);
    if (model_choices(&m.gemm) || convs_changed) {
        compared = 1;
        kept = keep_if_faster(&d, &od, &m, &opt, B, k, t0 + budget, convs_changed, &t_def, &t_tuned);
    } else {
        fprintf(tout, "step time: shipped defaults %.2f ms; no shape of this model runs faster otherwise, so that is also the tuned step\n",
               t_step * 1e3);
    }
    /* the step as it now runs (tuned, or the defaults when tuning did not beat them), forward
     * and backward (3x the forward's FLOPs): the device's speed, for the default device choice */
    double t_final = !compared ? t_step : kept ? t_tuned : t_def;
    if (t_final > 0) m.gemm.speed_gflops = ct_model_step_flops(&m) * B / t_final * 1e-9;
    rc = ct_gemm_db_save(&m.gemm, m.gemm.db_path);
    if (!rc) fprintf(tout, "wrote %s (%d GEMM and %d conv shapes); %.1f s of a %.0f s budget\n", m.gemm.db_path, m.gemm.n_choices,
                    m.gemm.n_convs, ct_now() - t0, budget);
    if (!rc && automatic && kept)
        fprintf(stderr, "cltrain: kernel search done in %.1f s: a step %.2f -> %.2f ms (%d GEMM shapes, %d conv layers changed); "
                        "saved in %s\n", ct_now() - t0, t_def * 1e3, t_tuned * 1e3, model_choices(&m.gemm), convs_changed,
                m.gemm.db_path);
    else if (!rc && automatic)
        fprintf(stderr, "cltrain: kernel search done in %.1f s: nothing beat the shipped defaults, which stay; saved in %s\n",
                ct_now() - t0, m.gemm.db_path);
    free_model(&m, &cl, &opt);
    free_model(&d, &cld, &od);
    return rc;
}

int cmd_tune(int argc, char **argv) {
    double budget = 0;
    cli_opts c;
    cli_opts_defaults(&c);
    cli_opts_for(&c, CLI_TUNE, "tune", NULL);
    int rc = take_budget(&argc, argv, &budget);
    if (!rc) rc = cli_parse_train(argc, argv, &c);
    if (rc) return cli_fail(rc);
    tout = tnotes = stdout;
    rc = tune_search(&c, budget, 0);
    return rc ? cli_fail(rc) : 0;
}

/* CLTRAIN_AUTOTUNE: unset 20 seconds, 0 off, else seconds in 1..3600; -1 after one line when bad */
static double autotune_budget(void) {
    const char *s = getenv("CLTRAIN_AUTOTUNE");
    if (!s || !*s) return 20;
    char *end;
    double b = strtod(s, &end);
    if (end == s || *end || !(b == 0 || (b >= 1 && b <= 3600))) {
        ct_fail(CT_EINPUT, "CLTRAIN_AUTOTUNE='%s': expected 0 (no search) or the seconds a first run may search, 1..3600 "
                           "(unset: 20)", s);
        return -1;
    }
    return b;
}

/* The search on this rank's device when it has no database yet, for the model this run trains: a
 * checkpoint's (--resume, at its batch and optimizer; --init), --model fitted to the data set's shape
 * (images, arrays), or --model. 0, or the error of a device that does not open (training says why). */
static int autotune_here(const cli_opts *c, const ct_dataset *train, double budget) {
    ct_cl cl;
    int rc = ct_cl_open_rank(&cl, c->train.device, ct_world.rank, ct_world.local_rank);
    if (rc) return rc;
    char path[4200];
    ct_cl_tune_db_path(cl.platform_name, cl.device_name, cl.dev_class, path, sizeof path);
    char dev[300];
    snprintf(dev, sizeof dev, "%s (class %s)", cl.device_name, ct_cl_class_name(cl.dev_class));
    ct_cl_close(&cl);
    if (access(path, F_OK) == 0) return 0;
    cli_opts s = *c;
    ct_ckpt ck;
    const char *from = c->train.resume ? c->train.resume : c->train.init;
    if (from) {
        if (ct_ckpt_load(&ck, from)) return 0; /* training says why */
        s.model_cfg = ck.cfg;
        s.model_cfg_name = ck.model_name;
        if (c->train.resume) {
            s.train.batch = ck.batch;
            s.train.optim.kind = ck.opt_kind;
        }
    } else if (c->train.fit_model && train) {
        s.fit_h = train->h; s.fit_w = train->w; s.fit_c = train->c; s.fit_classes = train->n_classes;
    }
    char who[96] = "";
    if (ct_world.size > 1) snprintf(who, sizeof who, "rank %d (%s): ", ct_world.rank, ct_world.host);
    fprintf(stderr, "cltrain: %sno tuning database for %s: measuring conv algorithms and GEMM kernels for this model, "
                    "at most %.0f s, once (CLTRAIN_AUTOTUNE=0 skips it)\n", who, dev, budget);
    FILE *null = ct_debug_level() >= 1 ? NULL : fopen("/dev/null", "w");
    tout = null ? null : stderr;
    tnotes = stderr;
    rc = tune_search(&s, budget, 1);
    if (null) fclose(null);
    if (rc) fprintf(stderr, "cltrain: %sthe kernel search failed (%s); training goes on with the shipped defaults\n", who,
                    ct_last_error());
    if (from) ct_ckpt_free(&ck);
    return 0;
}

int cli_autotune(const cli_opts *c, const ct_dataset *train) {
    double budget = autotune_budget();
    if (budget < 0) return CT_EINPUT;
    /* not for --gemm clblast: nothing of ours to choose */
    if (budget == 0 || c->train.gemm == CT_GEMM_CLBLAST) return 0;
    if (ct_world.size == 1) return autotune_here(c, train, budget);
    /* Under mpirun each rank trains on its own device, which may differ from rank 0's (another node,
     * another GPU), so each device is measured where it is. The ranks of one node search in turn
     * (local rank 0 first, the others waiting at a barrier without spinning): a search's timings are
     * then not shared with another's on the same cores or device, and the ranks that share a
     * device find the database the first one wrote and do not search again. Nodes search at once. */
    int rc = 0;
    for (int turn = 0; turn < ct_world.size; turn++) {
        if (ct_world.local_rank == turn) rc = autotune_here(c, train, budget);
        ct_dist_barrier();
    }
    return rc;
}
