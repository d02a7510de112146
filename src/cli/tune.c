/* cli/tune.c: `cltrain tune [--model M] [--batch-size B] [--budget S] [--device P:D]`.
 * Sets the model up (which lists its GEMM shapes: forward, backward data and
 * weights, conv through im2col), runs the search of nn/tune.c within the
 * budget, then times whole training steps with the shipped defaults and with
 * the tuned choices, interleaved, and writes the tuning database. When the
 * tuned step is not faster, the model's shapes keep the defaults.
 * Tested by tests/tune.sh. */
#include "cli.h"
#include <string.h>

/* mean step time over k steps */
static double step_time(ct_model *m, ct_opt *opt, int B, int k) {
    ct_cl_finish(m->cl);
    double t0 = ct_now();
    for (int i = 0; i < k; i++) cli_bench_step(m, opt, B);
    ct_cl_finish(m->cl);
    return (ct_now() - t0) / k;
}

/* defaults against tuned choices, interleaved: best of up to 3 rounds (at least 1, more while one more ends before `until`) */
static int compare_steps(ct_model *m, ct_opt *opt, int B, int k, double until, double *t_def, double *t_tuned) {
    *t_def = *t_tuned = 1e30;
    int r = 0;
    double t_round = 0;
    for (; r < 3 && (r == 0 || ct_now() + t_round < until); r++) {
        double r0 = ct_now();
        for (int use = 0; use < 2; use++) {
            m->gemm.use_choices = use;
            cli_bench_step(m, opt, B); /* first launches of a new shape compile on PoCL */
            double t = step_time(m, opt, B, k);
            double *best = use ? t_tuned : t_def;
            if (t < *best) *best = t;
        }
        t_round = ct_now() - r0;
    }
    m->gemm.use_choices = 1;
    return r;
}

/* how many of the model's shapes run something else than the default */
static int model_choices(ct_gemm *g) {
    int n = 0;
    for (int i = 0; i < g->n_shapes; i++) {
        const int *s = g->shapes[i];
        ct_gemm_choice *c = ct_gemm_find(g, s[0], s[1], s[2], s[3], s[4]);
        n += c && c->path == CT_GEMM_NATIVE;
    }
    return n;
}

/* drop the choices of this model's shapes (the tuned step was not faster) */
static void drop_model_choices(ct_gemm *g) {
    for (int i = 0; i < g->n_shapes; i++) {
        const int *s = g->shapes[i];
        ct_gemm_choice *c = ct_gemm_find(g, s[0], s[1], s[2], s[3], s[4]);
        if (c) *c = g->choices[--g->n_choices];
    }
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

int cmd_tune(int argc, char **argv) {
    double budget = 0, t0 = ct_now();
    cli_opts c;
    cli_opts_defaults(&c);
    int rc = take_budget(&argc, argv, &budget);
    if (!rc) rc = cli_parse_train(argc, argv, &c);
    if (rc) return cli_fail(rc);
    const ct_train_opts o = c.train;
    ct_model m;
    ct_cl cl;
    if ((rc = cli_bench_setup(&m, &cl, &c, CT_GEMM_NATIVE))) return cli_fail(rc);
    ct_opt opt;
    if ((rc = ct_opt_setup(&opt, &m, &o.optim))) {
        ct_model_free(&m);
        ct_cl_close(&cl);
        return cli_fail(rc);
    }
    if (!budget) budget = cl.is_cpu ? 60 : 120;
    int B = o.batch;
    char cfg[160];
    ct_gemm_cfg_str(&m.gemm.def, cfg, sizeof cfg);
    printf("cltrain tune: model %s, batch %d, device %s (%s, driver %s)\n", m.name, B, cl.device_name, cl.platform_name,
           cl.driver_version);
    printf("shipped default: %s (table row %s); database %s (%d shapes already)\n", cfg, m.gemm.def_from, m.gemm.db_path,
           m.gemm.n_choices);
    /* one step with the defaults sizes the final comparison, which the budget includes */
    m.gemm.use_choices = 0;
    cli_bench_step(&m, &opt, B);
    double t_step = step_time(&m, &opt, B, 1);
    m.gemm.use_choices = 1;
    int k = t_step > 0.5 ? 1 : t_step > 0.05 ? 3 : 10;
    /* the comparison's first round (defaults, then tuned: k + 1 steps each, and PoCL compiling
     * the work-group sizes of the tuned shapes) must fit; more rounds only while time is left */
    double reserve = 2 * (k + 1) * t_step * 1.6, left = budget - (ct_now() - t0) - reserve;
    if (left < 1) left = 1;
    ct_gemm_tune(&m.gemm, left, stdout);
    double t_def, t_tuned;
    if (model_choices(&m.gemm)) {
        int rounds = compare_steps(&m, &opt, B, k, t0 + budget, &t_def, &t_tuned);
        printf("step time: shipped defaults %.2f ms, tuned %.2f ms (%.2fx); best of %d x %d steps each, interleaved\n", t_def * 1e3,
               t_tuned * 1e3, t_def / t_tuned, rounds, k);
        if (t_tuned >= t_def) {
            drop_model_choices(&m.gemm);
            printf("the tuned step is not faster: this model's shapes keep the shipped defaults\n");
        }
    } else {
        printf("step time: shipped defaults %.2f ms; no shape of this model runs faster otherwise, so that is also the tuned step\n",
               t_step * 1e3);
    }
    rc = ct_gemm_db_save(&m.gemm, m.gemm.db_path);
    if (!rc) printf("wrote %s (%d shapes); %.1f s of a %.0f s budget\n", m.gemm.db_path, m.gemm.n_choices, ct_now() - t0, budget);
    ct_opt_free(&opt);
    ct_model_free(&m);
    ct_cl_close(&cl);
    return rc ? cli_fail(rc) : 0;
}
