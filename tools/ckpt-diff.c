/* ckpt-diff A B: how far apart the parameters of two cltrain checkpoints
 * are: ||a - b|| / ||b|| over all parameters, and the largest absolute
 * difference. Used by tests/mpi.sh (N ranks against one rank) and handy to
 * compare runs. A second line says whether the parameters and the optimizer
 * state are bit-identical (byte for byte, so -0 differs from 0 and NaN from
 * NaN only if its bits do). A third says how many leading layers have
 * bit-identical trained parameters (weights, biases, batch norm's gamma and
 * beta: --freeze N leaves N). Two models that differ only in their input
 * preparation ([net] mean= and std=) are compared, and a last line says so.
 * Exit 0, or 2 when a file is bad or the models differ. */
#include "cltrain/checkpoint.h"
#include "cltrain/common.h"
#include "cltrain/layer.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* the model text without its mean= and std= lines (the layers, which the parameters belong to), malloc'd */
static char *layers_only(const char *cfg) {
    char *out = malloc(strlen(cfg) + 1), *o = out;
    for (const char *p = cfg; *p;) {
        const char *e = strchr(p, '\n'), *q = p;
        size_t len = e ? (size_t)(e - p + 1) : strlen(p);
        while (*q == ' ' || *q == '\t') q++;
        if (strncmp(q, "mean", 4) && strncmp(q, "std", 3)) {
            memcpy(o, p, len);
            o += len;
        }
        p += len;
    }
    *o = 0;
    return out;
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: ckpt-diff A.ckpt B.ckpt\n");
        return 2;
    }
    ct_ckpt a, b;
    if (ct_ckpt_load(&a, argv[1]) || ct_ckpt_load(&b, argv[2])) {
        fprintf(stderr, "ckpt-diff: %s\n", ct_last_error());
        return 2;
    }
    char *la = layers_only(a.cfg), *lb = layers_only(b.cfg);
    int same_layers = !strcmp(la, lb), prep_differs = same_layers && strcmp(a.cfg, b.cfg);
    free(la);
    free(lb);
    if (a.n_params != b.n_params || !same_layers) {
        fprintf(stderr, "ckpt-diff: %s and %s hold different models\n", argv[1], argv[2]);
        return 2;
    }
    double d2 = 0, b2 = 0, dmax = 0;
    for (size_t i = 0; i < a.n_params; i++) {
        double d = (double)a.params[i] - b.params[i];
        d2 += d * d;
        b2 += (double)b.params[i] * b.params[i];
        if (fabs(d) > dmax || d != d) dmax = fabs(d);
    }
    printf("relative difference %.3e, max abs difference %.3e, %zu parameters, steps %lld and %lld\n",
           sqrt(d2 / (b2 > 0 ? b2 : 1)), dmax, a.n_params, (long long)a.next_batch, (long long)b.next_batch);
    int same_p = !memcmp(a.params, b.params, a.n_params * 4), same_s = a.n_state == b.n_state && a.opt_step == b.opt_step;
    for (int i = 0; same_s && i < a.n_state; i++) same_s = !memcmp(a.state[i], b.state[i], a.n_params * 4);
    printf("bit-identical: parameters %s, optimizer state %s (%d buffer%s)\n", same_p ? "yes" : "no", same_s ? "yes" : "no",
           a.n_state, a.n_state == 1 ? "" : "s");
    /* which layers' parameters are bit-identical (--freeze leaves the first ones) */
    ct_model m;
    if (!ct_model_parse(&m, a.cfg, a.model_name)) {
        int lead = 0, with = 0;
        for (int i = 0; i < m.n_layers; i++) {
            const ct_layer *L = &m.layers[i];
            if (!L->n_w && !L->n_b) { /* nothing to compare: it leads if the layers below do */
                if (lead == i) lead = i + 1;
                continue;
            }
            with++;
            /* batch norm: gamma and beta (its running statistics follow the data even in frozen layers) */
            size_t nw = L->type == CT_L_BATCHNORM ? ct_bn_layout(L).C : L->n_w;
            int same = !memcmp(a.params + L->w_off, b.params + L->w_off, nw * 4) &&
                       !memcmp(a.params + L->b_off, b.params + L->b_off, L->n_b * 4);
            if (same && lead == i) lead = i + 1;
            else if (lead == i) lead = -lead - 1; /* stop counting */
        }
        if (lead < 0) lead = -lead - 1;
        printf("leading layers with bit-identical trained parameters: %d of %d (%d with parameters)\n", lead, m.n_layers, with);
        ct_model_free(&m);
    }
    if (prep_differs) printf("the models differ in their input preparation ([net] mean= and std=) only\n");
    ct_ckpt_free(&a);
    ct_ckpt_free(&b);
    return 0;
}
