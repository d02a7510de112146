/* train/step.c: one training step. The batch comes from the feed; the
 * gradients of a data-parallel run are summed in buckets that backward's
 * per-layer callback starts (src/dist), so this file knows nothing of MPI
 * beyond one small all-reduce of the step's figures. Tested end to end by
 * tests/cli.sh, tests/checkpoint.sh and tests/mpi.sh. */
#include "loop.h"
#include <math.h>

/* the device's part: zero the gradients, forward, loss, backward, all-reduce, the optimizer */
static void device_step(ct_loop *loop, ct_step_info *si) {
    ct_model *m = &loop->m;
    ct_model_zero_grad(m);
    /* data-parallel: the loss is the global batch's mean, so summed gradients are its gradient */
    m->loss_batch = loop->dist ? ct_batch_part(loop->n, (int)loop->GB, 0, 1, si->g, NULL, loop->o.drop_last) : 0;
    if (si->B) {
        ct_model_forward(m, si->B);
        ct_model_loss(m, si->B);
    }
    /* data-parallel: each bucket's all-reduce starts as soon as backward has produced it */
    ct_model_backward(m, si->B, loop->dist ? ct_grad_sync_on_layer : NULL, &loop->gs);
    if (loop->dist) ct_grad_sync_finish(&loop->gs);
    if (loop->frozen) { /* --freeze */
        float zero = 0;
        CL_CHECK(clEnqueueFillBuffer(loop->cl.queue, m->grads, &zero, sizeof zero, 0, loop->frozen * sizeof(float), 0, NULL, NULL));
    }
    float lr = (float)ct_schedule_lr(&loop->o, si->g, loop->total);
    si->lr = lr;
    ct_optim_step(&loop->opt, lr);
}

/* data-parallel: one small all-reduce per step: global loss and accuracy, and agreement on stopping */
static void agree(ct_loop *loop, ct_step_info *si) {
    double v[5] = {si->loss, si->correct, si->B, si->stop, loop->m.nonfinite};
    double tw = ct_now();
    ct_dist_sum(v, 5);
    loop->sync_wait += ct_now() - tw;
    si->loss = v[0];
    si->correct = (int)v[1];
    si->Bg = (int)v[2];
    si->stop = v[3] > 0;
    loop->m.nonfinite = v[4] > 0;
}

/* the run's rates: steady state only, leaving out the pipeline fill (first step, and auto's two timed steps) */
static void account(ct_loop *loop, const ct_step_info *si) {
    ct_train_result *res = loop->res;
    double t1 = ct_now();
    if (si->k == 1) res->compute_rate = si->Bg / (t1 - si->tc0 > 1e-9 ? t1 - si->tc0 : 1e-9);
    if (si->k > (loop->f.mode == CT_FEED_PIPE && loop->f.auto_producers ? 2 : 0) || loop->total - loop->g0 == 1) {
        res->wait_s += si->wait;
        res->total_s += t1 - si->t0;
        loop->t_compute += t1 - si->t0 - si->wait;
        loop->images += si->Bg; /* the whole job's images: all ranks' */
    }
}

int ct_train_step(ct_loop *loop, ct_step_info *si) {
    si->t0 = ct_now();
    ct_dist_note_step(si->g + 1); /* data-parallel: the watchdog names it */
    /* 1. this step's batch into the model's input */
    int rc = ct_feed_next_batch(&loop->f, si->g, si->k, loop->res, &si->B, &si->wait);
    if (rc) return rc;
    /* 2. the step */
    si->tc0 = ct_now();
    device_step(loop, si);
    /* 3. while the device computes, the next batch's upload starts */
    if ((rc = ct_feed_prefetch(&loop->f, si->g, &si->wait))) return rc;
    si->loss = ct_model_read_results(&loop->m, si->B, loop->pred);
    si->stop = ct_signal_pending();
    const int32_t *lab = ct_feed_done(&loop->f, si->B);
    si->correct = 0;
    for (int i = 0; i < si->B; i++) si->correct += loop->pred[i] == lab[i];
    si->Bg = si->B;
    if (loop->dist) agree(loop, si);
    if (loop->dist && si->k == 0 && loop->total - loop->g0 > 1) {
        /* all-reduce figures from the second step on: the first one also builds and warms up */
        loop->gs.steps = 0;
        loop->gs.ar_s = loop->gs.hidden_s = loop->gs.exposed_s = loop->gs.window_s = 0;
        loop->iv_ar = loop->gs;
    }
    account(loop, si);
    return 0;
}
