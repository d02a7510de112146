/* nn/tune.c: the search that fills the GEMM tuning database (gemm_db.c).
 * The search (`cltrain tune`) validates each candidate on each shape against
 * a float64 reference (sampled entries, every entry finite after NaN
 * poisoning) before timing it; the search's best is then timed against the
 * default again, interleaved over 7 rounds, and kept only when it was faster
 * in at least 6 of them and by 3% in the median round (above the noise).
 * Tested by tests/tune.sh (budget, skipped variants) and, for the kernels
 * it picks from, by tests/test_gemm.c. */
#include "cltrain/gemm.h"
#include <math.h>
#include <string.h>

static const char *trans_str(int tA, int tB) { return tA ? (tB ? "TT" : "TN") : (tB ? "NT" : "NN"); }

typedef struct {
    int tA, tB, M, N, K;
    float *A, *B;        /* host copies, for the reference */
    cl_mem dA, dB, dC;
    float *got;
    int ns;              /* sampled entries */
    int *sm, *sn;
    double *want;
} tune_shape;

static int shape_setup(ct_gemm *g, tune_shape *t, const int *s) {
    memset(t, 0, sizeof *t);
    t->tA = s[0]; t->tB = s[1]; t->M = s[2]; t->N = s[3]; t->K = s[4];
    size_t na = (size_t)t->M * t->K, nb = (size_t)t->K * t->N, nc = (size_t)t->M * t->N;
    if (na > (1u << 27) || nb > (1u << 27) || nc > (1u << 27))
        return ct_fail(CT_ENOMEM, "over 512 MiB per matrix");
    int rc = ct_cl_alloc(g->cl, &t->dA, na * 4, "tune A");
    if (!rc) rc = ct_cl_alloc(g->cl, &t->dB, nb * 4, "tune B");
    if (!rc) rc = ct_cl_alloc(g->cl, &t->dC, nc * 4, "tune C");
    if (rc) return rc;
    t->A = ct_xmalloc(na * 4);
    t->B = ct_xmalloc(nb * 4);
    t->got = ct_xmalloc(nc * 4);
    ct_rng r = ct_rng_make(12, (uint64_t)t->M * 131 + t->N, (uint64_t)t->K);
    for (size_t i = 0; i < na; i++) t->A[i] = 2 * ct_rng_uniform(&r) - 1;
    for (size_t i = 0; i < nb; i++) t->B[i] = 2 * ct_rng_uniform(&r) - 1;
    ct_cl_write(g->cl, t->dA, 0, na * 4, t->A);
    ct_cl_write(g->cl, t->dB, 0, nb * 4, t->B);
    /* the reference on the corners, the last row and column, and random entries */
    t->ns = 4 + 64 + 64 + 256;
    t->sm = ct_xmalloc(sizeof(int) * t->ns);
    t->sn = ct_xmalloc(sizeof(int) * t->ns);
    t->want = ct_xmalloc(sizeof(double) * t->ns);
    for (int i = 0; i < t->ns; i++) {
        int m = (int)ct_rng_below(&r, (uint32_t)t->M), n = (int)ct_rng_below(&r, (uint32_t)t->N);
        if (i < 4) { m = i & 1 ? t->M - 1 : 0; n = i & 2 ? t->N - 1 : 0; }
        else if (i < 68) m = t->M - 1;
        else if (i < 132) n = t->N - 1;
        double sum = 0;
        for (int k = 0; k < t->K; k++) {
            double a = t->tA ? t->A[(size_t)k * t->M + m] : t->A[(size_t)m * t->K + k];
            double b = t->tB ? t->B[(size_t)n * t->K + k] : t->B[(size_t)k * t->N + n];
            sum += a * b;
        }
        t->sm[i] = m; t->sn[i] = n; t->want[i] = sum;
    }
    return 0;
}

static void shape_free(tune_shape *t) {
    ct_cl_release(&t->dA); ct_cl_release(&t->dB); ct_cl_release(&t->dC);
    free(t->A); free(t->B); free(t->got); free(t->sm); free(t->sn); free(t->want);
}

static void run_once(ct_gemm *g, tune_shape *t, int prog, int kchunk) {
    ct_gemm_native_with(g, prog, kchunk, t->tA, t->tB, t->M, t->N, t->K, 1.0f, t->dA, 0, t->tA ? t->M : t->K, t->dB, 0,
                        t->tB ? t->K : t->N, 0.0f, t->dC, 0, t->N, NULL, 0, 0);
}

/* run once on a NaN-poisoned C and compare with the reference: 0 when right */
static int validate(ct_gemm *g, tune_shape *t, int prog, int kchunk, char *why, size_t n) {
    size_t nc = (size_t)t->M * t->N;
    float nan = NAN;
    CL_CHECK(clEnqueueFillBuffer(g->cl->queue, t->dC, &nan, sizeof nan, 0, nc * 4, 0, NULL, NULL));
    run_once(g, t, prog, kchunk);
    ct_cl_read(g->cl, t->dC, 0, nc * 4, t->got);
    for (size_t i = 0; i < nc; i++)
        if (!isfinite(t->got[i])) { snprintf(why, n, "C[%zu] = %g (not written or not finite)", i, t->got[i]); return -1; }
    double atol = 4e-5 * sqrt((double)t->K + 1);
    for (int i = 0; i < t->ns; i++) {
        double got = t->got[(size_t)t->sm[i] * t->N + t->sn[i]], want = t->want[i];
        if (fabs(got - want) > atol + 1e-4 * fabs(want)) {
            snprintf(why, n, "C[%d,%d] = %.7g, reference %.7g", t->sm[i], t->sn[i], got, want);
            return -1;
        }
    }
    return 0;
}

/* best of up to 3 timed runs, fewer when past `until` or when the first is
 * already over 1.25x `beat` (the best so far: a clear loser is not worth two more) */
static double time_cfg(ct_gemm *g, tune_shape *t, int prog, int kchunk, double until, double beat) {
    double best = 1e30;
    for (int r = 0; r < 3; r++) {
        ct_cl_finish(g->cl);
        double t0 = ct_now();
        run_once(g, t, prog, kchunk);
        ct_cl_finish(g->cl);
        double dt = ct_now() - t0;
        if (dt < best) best = dt;
        if (ct_now() > until || best > 1.25 * beat) break;
    }
    return best;
}

/* The candidates: the table's, then CLTRAIN_TUNE_CANDIDATES (entries like
 * CLTRAIN_GEMM separated by ';'), for devices or tests that need more. */
static int candidates(ct_gemm_cfg *out, int max) {
    int n = 0;
    for (int i = 0; i < ct_gemm_n_candidates && n < max; i++) out[n++] = ct_gemm_candidates[i];
    const char *env = getenv("CLTRAIN_TUNE_CANDIDATES");
    for (const char *p = env; p && *p && n < max;) {
        char one[128];
        size_t l = strcspn(p, ";");
        snprintf(one, sizeof one, "%.*s", (int)(l < sizeof one ? l : sizeof one - 1), p);
        int v[7];
        ct_gemm_cfg c;
        memset(&c, 0, sizeof c);
        if (sscanf(one, "local,%d,%d,%d,%d,%d,%d,%d", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5], &v[6]) == 7)
            c = (ct_gemm_cfg){CT_GEMM_LOCAL, {v[0], v[1], v[2], v[3], v[4], v[5]}, v[6]};
        else if (sscanf(one, "%d,%d,%d", &v[0], &v[1], &v[2]) == 3)
            c = (ct_gemm_cfg){CT_GEMM_REG, {v[0], v[1], 0, 0, 0, 0}, v[2]};
        else
            fprintf(stderr, "cltrain: CLTRAIN_TUNE_CANDIDATES entry '%s' skipped: expected TM,NV,KCHUNK or local,TSM,TSN,TSK,WPTM,WPTN,VW,KCHUNK\n", one);
        if (c.kchunk) out[n++] = c;
        p += l;
        if (*p) p++;
    }
    return n;
}

static void remove_choice(ct_gemm *g, int tA, int tB, int M, int N, int K) {
    ct_gemm_choice *c = ct_gemm_find(g, tA, tB, M, N, K);
    if (c) *c = g->choices[--g->n_choices];
}

typedef struct { int prog; int kchunk; double t; } tune_best;

/* a skipped or rejected candidate: on the report, and in one line on notes when that is elsewhere */
static FILE *notes_to;
static void note(FILE *log, const char *lead, const char *what) {
    fprintf(log, "%s%s\n", lead, what);
    if (notes_to && notes_to != log) fprintf(notes_to, "cltrain: kernel search: %s%s\n", lead + strspn(lead, "\n "), what);
}

static int by_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* k runs of one configuration, timed as one */
static double time_runs(ct_gemm *g, tune_shape *t, int prog, int kchunk, int k) {
    ct_cl_finish(g->cl);
    double t0 = ct_now();
    for (int i = 0; i < k; i++) run_once(g, t, prog, kchunk);
    ct_cl_finish(g->cl);
    return (ct_now() - t0) / k;
}

enum { CONFIRM_ROUNDS = 7 };
typedef struct { double t_def, t_best, ratio; int faster; } tune_confirm;

/* The default and the search's best timed the same way, interleaved: CONFIRM_ROUNDS
 * rounds of one timing each (k runs, at least ~1 ms), the order alternating.
 * The round whose ratio best/default is the median (its two times and the
 * ratio), and in how many rounds the best was faster: a single best-of-3 taken
 * at another moment (the search's) is not compared with the default's. */
static tune_confirm confirm(ct_gemm *g, tune_shape *t, int dprog, int dk, const tune_best *b) {
    double td[CONFIRM_ROUNDS], tb[CONFIRM_ROUNDS], r[CONFIRM_ROUNDS];
    double guess = b->t > 0 ? b->t : 1e-3;
    int k = guess >= 1e-3 ? 1 : (int)(1e-3 / guess) + 1, faster = 0;
    if (k > 1000) k = 1000;
    for (int i = 0; i < CONFIRM_ROUNDS; i++) {
        if (i % 2) {
            tb[i] = time_runs(g, t, b->prog, b->kchunk, k);
            td[i] = time_runs(g, t, dprog, dk, k);
        } else {
            td[i] = time_runs(g, t, dprog, dk, k);
            tb[i] = time_runs(g, t, b->prog, b->kchunk, k);
        }
        r[i] = tb[i] / td[i];
        faster += tb[i] < td[i];
    }
    /* the round of the median ratio: its two times are the ones shown, so the row's figures agree */
    double sorted[CONFIRM_ROUNDS];
    memcpy(sorted, r, sizeof sorted);
    qsort(sorted, CONFIRM_ROUNDS, sizeof *sorted, by_double);
    int mid = 0;
    while (r[mid] != sorted[CONFIRM_ROUNDS / 2]) mid++;
    return (tune_confirm){td[mid], tb[mid], r[mid], faster};
}

/* Time every candidate (and split-K chunk, where the shape splits) of one shape until `until`. */
static void search_shape(ct_gemm *g, tune_shape *t, const ct_gemm_cfg *cand, int nc, int *failed, double until, FILE *log,
                         int dprog, const ct_gemm_cfg *dcfg, tune_best *best) {
    char why[256], what[160];
    for (int i = 0; i < nc && ct_now() < until; i++) {
        if (failed[i]) continue;
        int prog = ct_gemm_prog_get(g, &cand[i]);
        if (prog < 0) {
            failed[i] = 1;
            note(log, "\n  skipped: ", ct_last_error());
            continue;
        }
        /* the default itself is timed already: the same program with the same split is not a candidate */
        int seen[8], n_seen = 0;
        if (prog == dprog) seen[n_seen++] = ct_gemm_splits(g, dcfg, t->tA, t->M, t->N, t->K);
        for (int j = -1; j < ct_gemm_n_kchunks && ct_now() < until; j++) {
            ct_gemm_cfg c = cand[i];
            if (j >= 0) c.kchunk = ct_gemm_kchunks[j];
            int S = ct_gemm_splits(g, &c, t->tA, t->M, t->N, t->K), dup = 0;
            for (int q = 0; q < n_seen; q++) dup |= seen[q] == S;
            if (dup || n_seen >= 8) continue;
            seen[n_seen++] = S;
            if (validate(g, t, prog, c.kchunk, why, sizeof why)) {
                char line[480];
                ct_gemm_cfg_str(&c, what, sizeof what);
                snprintf(line, sizeof line, "%s: wrong result on this device, %s", what, why);
                note(log, "\n  rejected ", line);
                break;
            }
            double dt = time_cfg(g, t, prog, c.kchunk, until, best->t);
            if (dt < best->t) *best = (tune_best){prog, c.kchunk, dt};
        }
        fputc('.', log);
        fflush(log);
    }
}

/* one shape: the default first, then the candidates; returns 1 when a choice was kept */
static int tune_one(ct_gemm *g, const int *s, const ct_gemm_cfg *cand, int nc, int *failed, double until, FILE *log) {
    tune_shape t;
    char what[160], why[256];
    fprintf(log, "  %s %6dx%-5dx%-6d ", trans_str(s[0], s[1]), s[2], s[3], s[4]);
    fflush(log);
    if (shape_setup(g, &t, s)) {
        fprintf(log, "skipped: %s\n", ct_last_error());
        shape_free(&t);
        return 0;
    }
    int kept = 0, dprog;
    ct_gemm_cfg d;
    ct_gemm_default_for(g, s[3], &dprog, &d);
    if (validate(g, &t, dprog, d.kchunk, why, sizeof why)) {
        fprintf(log, "the default gives a wrong result (%s); not tuned\n", why);
    } else {
        double t_def = time_cfg(g, &t, dprog, d.kchunk, until, 1e30);
        tune_best best = {dprog, d.kchunk, t_def};
        search_shape(g, &t, cand, nc, failed, until, log, dprog, &d, &best);
        ct_gemm_cfg c = g->progs[best.prog].cfg;
        c.kchunk = best.kchunk;
        ct_gemm_cfg_str(&c, what, sizeof what);
        int same = best.prog == dprog && ct_gemm_splits(g, &c, s[0], s[2], s[3], s[4]) == ct_gemm_splits(g, &d, s[0], s[2], s[3], s[4]);
        if (same) {
            remove_choice(g, s[0], s[1], s[2], s[3], s[4]);
            fprintf(log, " default %.3f ms stays (no other candidate was faster in the search)\n", t_def * 1e3);
        } else {
            /* a win is claimed only when the interleaved rounds show it above their noise: faster in all
             * but at most one round, and by 3% in the median round */
            tune_confirm cf = confirm(g, &t, dprog, d.kchunk, &best);
            int win = cf.faster >= CONFIRM_ROUNDS - 1 && cf.ratio <= 0.97;
            if (win && !ct_gemm_choose(g, s[0], s[1], s[2], s[3], s[4], CT_GEMM_NATIVE, &c)) {
                fprintf(log, " default %.3f ms, %s %.3f ms (%.2fx in the median round; faster in %d of %d interleaved rounds)\n",
                        cf.t_def * 1e3, what, cf.t_best * 1e3, 1 / cf.ratio, cf.faster, CONFIRM_ROUNDS);
                kept = 1;
            } else {
                remove_choice(g, s[0], s[1], s[2], s[3], s[4]);
                fprintf(log, " default %.3f ms stays (%s %.3f ms, %.2fx in the median round, faster in %d of %d interleaved "
                        "rounds: within the noise)\n", cf.t_def * 1e3, what, cf.t_best * 1e3, 1 / cf.ratio, cf.faster, CONFIRM_ROUNDS);
            }
        }
    }
    shape_free(&t);
    return kept;
}

int ct_gemm_tune(ct_gemm *g, double budget_s, FILE *log, FILE *notes) {
    notes_to = notes;
    double t0 = ct_now(), deadline = t0 + budget_s;
    ct_gemm_cfg cand[64];
    int failed[64] = {0};
    int nc = candidates(cand, 64);
    /* largest shapes first: they matter most when the budget runs out */
    int order[CT_GEMM_MAX_SHAPES], n = g->n_shapes, kept = 0;
    for (int i = 0; i < n; i++) order[i] = i;
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0; j--) {
            const int *a = g->shapes[order[j - 1]], *b = g->shapes[order[j]];
            if ((double)a[2] * a[3] * a[4] >= (double)b[2] * b[3] * b[4]) break;
            int x = order[j]; order[j] = order[j - 1]; order[j - 1] = x;
        }
    fprintf(log, "tuning %d GEMM shapes x %d candidates on %s, budget %.0f s (each '.' is one candidate)\n", n, nc,
            g->cl->device_name, budget_s);
    /* what cannot run on this device is skipped before anything is built; then
     * every candidate is built first, so compile time is not taken from one shape's share */
    for (int i = 0; i < nc; i++)
        if (ct_gemm_cfg_check(&cand[i]) || ct_gemm_cfg_fits(g, &cand[i])) {
            failed[i] = 1;
            note(log, "  skipped: ", ct_last_error());
        }
    for (int i = 0; i < nc && ct_now() < deadline; i++)
        if (!failed[i] && ct_gemm_prog_get(g, &cand[i]) < 0) {
            failed[i] = 1;
            note(log, "  skipped: ", ct_last_error());
        }
    /* each shape's share of what is left follows its multiply-adds (with a
     * floor): on a CPU the large conv products take seconds per candidate
     * while the small dense ones take microseconds */
    double work[CT_GEMM_MAX_SHAPES], left_work = 0;
    for (int i = 0; i < n; i++) {
        const int *s = g->shapes[order[i]];
        work[i] = (double)s[2] * s[3] * s[4];
        left_work += work[i];
    }
    for (int i = 0; i < n; i++) {
        double now = ct_now();
        if (now >= deadline) {
            fprintf(log, "  budget spent: %d shapes keep their current choice\n", n - i);
            break;
        }
        double share = left_work > 0 ? work[i] / left_work : 1.0 / (n - i), floor = 0.25 / (n - i);
        fprintf(log, "[%2d/%d]", i + 1, n);
        kept += tune_one(g, g->shapes[order[i]], cand, nc, failed, now + (deadline - now) * (share > floor ? share : floor), log);
        left_work -= work[i];
    }
    fprintf(log, "searched for %.1f s; %d of %d shapes run faster than with the default\n", ct_now() - t0, kept, n);
    return kept;
}
