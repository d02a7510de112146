/* train/feed.c: one next_batch over the three ways a batch reaches the
 * device. Synchronous: the trainer fills the batch itself (--producers 0, and
 * the two timed steps of --producers auto). Pipelined: producer threads fill
 * pinned slots (src/pipe); while the device computes step g, batch g+1 is
 * taken and uploaded into the other input buffer. Resident: the whole set on
 * the device, batches gathered there. Every mode gives the same batches, so
 * the same weights. Tested by tests/cli.sh and tests/checkpoint.sh (the modes
 * train bit-identical weights) and tests/test_pipeline.c. */
#include "loop.h"
#include <math.h>
#include <string.h>
#include <time.h>

static int ds_load(void *ctx, int index, float *dst, int32_t *label, ct_rng *rng) {
    const ct_ds_ctx *c = ctx;
    (void)rng;
    size_t sz = (size_t)c->ds->h * c->ds->w * c->ds->c;
    const uint8_t *src = c->ds->images + (size_t)index * sz;
    for (size_t k = 0; k < sz; k++) dst[k] = (float)src[k] * c->scale + c->shift;
    *label = c->ds->labels[index];
    return 0;
}

int ct_feed_open(ct_feed *f, const ct_train_opts *o, const ct_dataset *train, int n, long spe, int64_t total, ct_model *m,
                 ct_cl *cl) {
    size_t sz = (size_t)train->h * train->w * train->c;
    *f = (ct_feed){.m = m, .cl = cl, .train = train, .n = n, .batch = o->batch, .spe = (int)spe, .seed = o->seed, .drop_last = o->drop_last,
                   .scale = o->scale, .shift = o->shift, .total = total, .perm_epoch = -1};
    f->ctx = (ct_ds_ctx){train, o->scale, o->shift};
    f->src = (ct_source){.n = train->n, .h = train->h, .w = train->w, .c = train->c, .n_classes = train->n_classes,
                         .ctx = &f->ctx, .load = ds_load, .io_latency_us = o->io_latency_us};
    if (o->train_src) {
        f->src = *o->train_src;
        f->src.io_latency_us = o->io_latency_us;
    }
    f->host_img = ct_xmalloc(sz * o->batch * sizeof(float));
    f->host_lab = ct_xmalloc(sizeof(int32_t) * o->batch);
    f->perm = ct_xmalloc(sizeof(int) * (size_t)n);
    f->producers = o->producers;
    f->auto_producers = o->producers < 0;
    f->prefetch = o->prefetch;
    f->mode = o->resident ? CT_FEED_RESIDENT : o->producers == 0 ? CT_FEED_SYNC : CT_FEED_PIPE;
    if (f->mode != CT_FEED_RESIDENT) return 0;
    if (o->io_latency_us) return ct_fail(CT_EINPUT, "--resident reads no storage: --io-latency-us does not apply");
    if (o->train_src) return ct_fail(CT_EINPUT, "--resident gathers raw bytes on the device: it cannot augment; use producers");
    int rc;
    if ((rc = ct_cl_alloc(cl, &f->dev_data, sz * (size_t)n, "resident data set (try without --resident)"))) return rc;
    if ((rc = ct_cl_alloc(cl, &f->dev_lab, (size_t)n, "resident labels"))) return rc;
    if ((rc = ct_cl_alloc(cl, &f->dev_idx, sizeof(int) * o->batch + 4, "batch indices"))) return rc;
    ct_cl_write(cl, f->dev_data, 0, sz * (size_t)n, train->images);
    ct_cl_write(cl, f->dev_lab, 0, (size_t)n, train->labels);
    return 0;
}

static void upload_slot(ct_model *m, ct_slot *s, int j, cl_event *after) {
    cl_command_queue q = m->cl->xfer;
    size_t bytes = (size_t)s->B * m->in_h * m->in_w * m->in_c * sizeof(float);
    cl_event ev[2];
    CL_CHECK(clEnqueueWriteBuffer(q, m->inputs[j], CL_FALSE, 0, bytes, s->images, *after ? 1 : 0, *after ? after : NULL, &ev[0]));
    CL_CHECK(clEnqueueWriteBuffer(q, m->labels2[j], CL_FALSE, 0, (size_t)s->B * 4, s->labels, 0, NULL, &ev[1]));
    clReleaseEvent(ev[0]);
    s->uploaded = ev[1]; /* in-order queue: the labels' write completes last */
    CL_CHECK(clFlush(q));
}

static void epoch_order(ct_feed *f, int64_t g) {
    int epoch = (int)(g / f->spe);
    if (f->perm_epoch != epoch) {
        ct_epoch_order(f->perm, f->n, f->seed, epoch);
        f->perm_epoch = epoch;
    }
}

/* the trainer fills and uploads the batch itself */
static int next_sync(ct_feed *f, int64_t g, int64_t k, ct_train_result *res, int *B, double t0, double *wait) {
    epoch_order(f, g);
    int rc = ct_batch_fill_part(&f->src, f->seed, f->n, f->batch, ct_world.rank, ct_world.size, g, f->perm, f->host_img,
                                f->host_lab, B, f->drop_last);
    if (rc) return rc;
    double tf = ct_now() - t0;
    size_t sz = (size_t)f->src.h * f->src.w * f->src.c;
    ct_cl_write(f->cl, f->m->input, 0, (size_t)*B * sz * sizeof(float), f->host_img);
    ct_cl_write(f->cl, f->m->labels, 0, (size_t)*B * 4, f->host_lab);
    *wait = ct_now() - t0;
    if (k == 1) res->producer_rate = *B / (tf > 1e-9 ? tf : 1e-9);
    return 0;
}

static int next_pipe(ct_feed *f, int64_t g, int *B, double t0, double *wait) {
    if (!f->cur) {
        /* start the producers from batch g (with auto, batches 0 and 1 were made here, and timed) */
        ct_pipeline_opts po = {.producers = f->producers, .prefetch = f->prefetch ? f->prefetch : (2 * f->producers > 4 ? 2 * f->producers : 4),
                               .batch = f->batch, .seed = f->seed, .n = f->n, .first_batch = g, .total_batches = f->total,
                               .part = ct_world.rank, .parts = ct_world.size, .drop_last = f->drop_last};
        int rc = ct_pipeline_start(&f->pipe, &f->src, &po, f->cl);
        if (rc) return rc;
        rc = ct_pipeline_next(&f->pipe, &f->cur);
        if (rc) return rc > 0 ? ct_fail(CT_EIO, "the input pipeline ended early") : rc;
        upload_slot(f->m, f->cur, f->j, &f->computed[f->j]);
        *wait = ct_now() - t0;
    }
    *B = f->cur->B;
    ct_model_select_input(f->m, f->j);
    CL_CHECK(clEnqueueBarrierWithWaitList(f->cl->queue, 1, &f->cur->uploaded, NULL));
    return 0;
}

int ct_feed_next_batch(ct_feed *f, int64_t g, int64_t k, ct_train_result *res, int *B, double *wait) {
    double t0 = ct_now();
    *wait = 0;
    int warmup = f->mode == CT_FEED_PIPE && f->auto_producers && k < 2;
    if (f->mode == CT_FEED_PIPE && f->producers < 0 && k == 2) {
        /* --producers auto: batches 0 and 1 ran synchronously; batch 1 timed both sides. One step
         * each misjudges the steady rates by 10-20% either way (bench pipeline prints both), and a
         * producer short costs data-wait while one spare costs a sleeping thread: a margin of 1.5 */
        double fill_rate = res->producer_rate, comp_rate = res->compute_rate;
        f->producers = (int)ceil(CT_AUTO_MARGIN * comp_rate / (fill_rate > 0 ? fill_rate : 1));
        res->auto_compute_rate = comp_rate;
        res->auto_fill_rate = fill_rate;
        if (f->producers < 1) f->producers = 1;
        if (f->producers > 16) f->producers = 16;
    }
    if (f->mode == CT_FEED_SYNC || warmup) return next_sync(f, g, k, res, B, t0, wait);
    if (f->mode == CT_FEED_PIPE) return next_pipe(f, g, B, t0, wait);
    epoch_order(f, g);
    *B = ct_batch_part(f->n, f->batch, ct_world.rank, ct_world.size, g, &f->first, f->drop_last);
    if (*B) {
        CL_CHECK(clEnqueueWriteBuffer(f->cl->queue, f->dev_idx, CL_FALSE, 0, sizeof(int) * *B, f->perm + f->first, 0, NULL, NULL));
        ct_model_gather(f->m, f->dev_data, f->dev_lab, f->dev_idx, *B, f->scale, f->shift);
    }
    return 0;
}

int ct_feed_prefetch(ct_feed *f, int64_t g, double *wait) {
    f->next = NULL;
    if (!f->cur) return 0;
    int j = f->j, rc = 0;
    if (f->computed[j]) clReleaseEvent(f->computed[j]);
    CL_CHECK(clEnqueueMarkerWithWaitList(f->cl->queue, 0, NULL, &f->computed[j]));
    CL_CHECK(clFlush(f->cl->queue));
    if (g + 1 >= f->total) return 0;
    /* Poll for the next batch; data-wait is only the time after the device
     * finished this step (waiting while it computes costs nothing). */
    double done_at = 0;
    for (;;) {
        rc = ct_pipeline_try_next(&f->pipe, &f->next);
        if (rc != CT_RING_AGAIN) break;
        if (!done_at) {
            cl_int st;
            CL_CHECK(clGetEventInfo(f->computed[j], CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof st, &st, NULL));
            if (st == CL_COMPLETE) done_at = ct_now();
        }
        if (done_at) { rc = ct_pipeline_next(&f->pipe, &f->next); break; } /* device idle: block */
        struct timespec ts = {0, 50000};
        nanosleep(&ts, NULL);
    }
    if (done_at) *wait += ct_now() - done_at;
    if (rc) {
        f->next = NULL;
        return rc > 0 ? ct_fail(CT_EIO, "the input pipeline ended early") : rc;
    }
    upload_slot(f->m, f->next, 1 - j, &f->computed[1 - j]);
    return 0;
}

const int32_t *ct_feed_done(ct_feed *f, int B) {
    if (f->cur) {
        memcpy(f->host_lab, f->cur->labels, sizeof(int32_t) * B);
        ct_pipeline_release(&f->pipe, f->cur);
        f->cur = f->next;
        f->next = NULL;
        f->j = 1 - f->j;
    } else if (f->mode == CT_FEED_RESIDENT) {
        for (int i = 0; i < B; i++) f->host_lab[i] = f->train->labels[f->perm[f->first + i]];
    }
    return f->host_lab;
}

void ct_feed_close(ct_feed *f) {
    if (f->pipe.slots) {
        if (f->cur) ct_pipeline_release(&f->pipe, f->cur);
        if (f->next) ct_pipeline_release(&f->pipe, f->next);
        ct_pipeline_stop(&f->pipe);
    }
    for (int k = 0; k < 2; k++)
        if (f->computed[k]) clReleaseEvent(f->computed[k]);
    ct_cl_release(&f->dev_data);
    ct_cl_release(&f->dev_lab);
    ct_cl_release(&f->dev_idx);
    free(f->host_img);
    free(f->host_lab);
    free(f->perm);
    memset(f, 0, sizeof *f);
}
