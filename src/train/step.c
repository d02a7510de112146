/* train/step.c: one training step. The batch comes from the feed; the
 * gradients of a data-parallel run are summed in buckets that backward's
 * per-layer callback starts (src/dist), so this file knows nothing of MPI
 * beyond one small all-reduce of the step's figures. Tested end to end by
 * tests/cli.sh, tests/checkpoint.sh and tests/mpi.sh. */
#include "loop.h"
#include <math.h>

/* the device's part: zero the gradients, forward, loss, backward, all-reduce, the optimizer */
static void device_step(ct_loop *L, ct_step_info *si) {
    ct_model *m = &L->m;
    ct_model_zero_grad(m);
    /* data-parallel: the loss is the global batch's mean, so summed gradients are its gradient */
    m->loss_batch = L->dist ? ct_batch_part(L->n, (int)L->GB, 0, 1, si->g, NULL) : 0;
    if (si->B) {
        ct_model_forward(m, si->B);
        ct_model_loss(m, si->B);
    }
    /* data-parallel: each bucket's all-reduce starts as soon as backward has produced it */
    ct_model_backward(m, si->B, L->dist ? ct_grad_sync_on_layer : NULL, &L->gs);
    if (L->dist) ct_grad_sync_finish(&L->gs);
    float lr = (float)ct_schedule_lr(&L->o, si->g, L->total);
    si->lr = lr;
    ct_opt_step(&L->opt, lr);
}

/* data-parallel: one small all-reduce per step: global loss and accuracy, and agreement on stopping */
static void agree(ct_loop *L, ct_step_info *si) {
    double v[5] = {si->loss, si->correct, si->B, si->stop, L->m.nonfinite};
    double tw = ct_now();
    ct_dist_sum(v, 5);
    L->sync_wait += ct_now() - tw;
    si->loss = v[0];
    si->correct = (int)v[1];
    si->Bg = (int)v[2];
    si->stop = v[3] > 0;
    L->m.nonfinite = v[4] > 0;
}

/* the run's rates: steady state only, leaving out the pipeline fill (first step, and auto's two timed steps) */
static void account(ct_loop *L, const ct_step_info *si) {
    ct_train_result *res = L->res;
    double t1 = ct_now();
    if (si->k == 1) res->compute_rate = si->Bg / (t1 - si->tc0 > 1e-9 ? t1 - si->tc0 : 1e-9);
    if (si->k > (L->f.mode == CT_FEED_PIPE && L->f.auto_producers ? 2 : 0) || L->total - L->g0 == 1) {
        res->wait_s += si->wait;
        res->total_s += t1 - si->t0;
        L->t_compute += t1 - si->t0 - si->wait;
        L->images += si->Bg; /* the whole job's images: all ranks' */
    }
}

int ct_train_step(ct_loop *L, ct_step_info *si) {
    si->t0 = ct_now();
    ct_dist_note_step(si->g + 1); /* data-parallel: the watchdog names it */
    /* 1. this step's batch into the model's input */
    int rc = ct_feed_next_batch(&L->f, si->g, si->k, L->res, &si->B, &si->wait);
    if (rc) return rc;
    /* 2. the step */
    si->tc0 = ct_now();
    device_step(L, si);
    /* 3. while the device computes, the next batch's upload starts */
    if ((rc = ct_feed_prefetch(&L->f, si->g, &si->wait))) return rc;
    si->loss = ct_model_read_results(&L->m, si->B, L->pred);
    si->stop = ct_signal_pending();
    const int32_t *lab = ct_feed_done(&L->f, si->B);
    si->correct = 0;
    for (int i = 0; i < si->B; i++) si->correct += L->pred[i] == lab[i];
    si->Bg = si->B;
    if (L->dist) agree(L, si);
    if (L->dist && si->k == 0 && L->total - L->g0 > 1) {
        /* all-reduce figures from the second step on: the first one also builds and warms up */
        L->gs.steps = 0;
        L->gs.ar_s = L->gs.hidden_s = L->gs.exposed_s = L->gs.window_s = 0;
        L->iv_ar = L->gs;
    }
    account(L, si);
    return 0;
}
