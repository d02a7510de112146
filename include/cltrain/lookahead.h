/* lookahead.h: a lookahead / exponential moving average of the weights, as
 * airbench94 (Jordan 2024) keeps it. From epoch CT_LOOKAHEAD_START (0-based)
 * on, after every CT_LOOKAHEAD_EVERY-th optimizer step s (1-based, counted
 * over the whole run of `total` steps) the first such step copies the
 * parameters into the average; each later one moves the average towards the
 * parameters, avg += (1 - d) (p - avg) with d = rate^EVERY (s / total)^3, and
 * the parameters back to it (p = avg). At the end of every epoch (and of the
 * run) the parameters become the average, so evaluation, checkpoints and the
 * final weights are the average's. It runs over the whole flat parameter
 * buffer: weights and biases, and the batch-norm running statistics kept
 * there. One launch (kernels/optim.cl lookahead_step, from the optimizer's
 * program); reference ref_lookahead (src/ref/optim.c); tested by
 * tests/test_layers.c (kernel and rule against the reference) and
 * tests/checkpoint.sh (the average saved, a resumed run bit for bit). */
#ifndef CLTRAIN_LOOKAHEAD_H
#define CLTRAIN_LOOKAHEAD_H
#include "cltrain/optim.h"

#define CT_LOOKAHEAD_EVERY 5
#define CT_LOOKAHEAD_START 3

typedef struct ct_lookahead {
    float rate;                /* decay per step (0.95); 0: off */
    int have;                  /* 1 once avg holds the average (its first step copied the parameters) */
    cl_mem avg;                /* [n_params] */
    cl_kernel k;
    int vw;                    /* parameters per work-item, the optimizer's */
    ct_model *m;
} ct_lookahead;

/* the average's decay after 1-based step s of total: rate^EVERY (s / total)^3 */
double ct_lookahead_decay(float rate, int64_t s, int64_t total);
/* 1 when optimizer step g (0-based) in epoch `epoch` (0-based) updates the average */
int ct_lookahead_due(int64_t g, int epoch);
/* rate 0: nothing (every call below is then a no-op). Else the average's buffer
 * and the kernel from the optimizer's program. */
int ct_lookahead_setup(ct_lookahead *la, ct_optim_state *opt, float rate);
/* After optimizer step g of total in epoch `epoch`; epoch_end: the last step of
 * an epoch or of the run (the parameters become the average). */
void ct_lookahead_after_step(ct_lookahead *la, int64_t g, int64_t total, int epoch, int epoch_end);
/* avg += w (p - avg); p = avg (one launch) */
void ct_lookahead_update(ct_lookahead *la, float w);
/* The average to or from the host (n_params floats; set makes have 1). */
void ct_lookahead_get(ct_lookahead *la, float *host);
void ct_lookahead_set(ct_lookahead *la, const float *host);
void ct_lookahead_free(ct_lookahead *la);
#endif
