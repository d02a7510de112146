/* train/train.c: the training loop. Batch order comes only from (seed,
 * epoch); each step uploads a batch, runs forward, loss, backward and the
 * optimizer, and ends with a checked finish when it reads the loss back.
 * Progress: a live line on a terminal, plain lines otherwise.
 * Tested by tests/test_train.c (learns a subset of Fashion-MNIST). */
#include "cltrain/train.h"
#include "cltrain/checkpoint.h"
#include "cltrain/dist.h"
#include "cltrain/tboard.h"
#include <signal.h>
#include <stdatomic.h>
#include <math.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

void ct_train_defaults(ct_train_opts *o) {
    memset(o, 0, sizeof *o);
    o->model = "mnist-cnn";
    o->epochs = 1;
    o->batch = 128;
    o->optim = (ct_optim){.kind = CT_OPT_ADAM, .lr = 3e-4f, .b1 = 0.9f, .b2 = 0.999f, .eps = 1e-8f, .wd = 0, .momentum = 0.9f};
    o->seed = 1;
    o->gemm = CT_GEMM_NATIVE;
    o->progress_every = 50;
    o->scale = 1.0f / 255.0f;
    o->shift = 0.0f;
    o->producers = -1;
}

typedef struct { const ct_dataset *ds; float scale, shift; } ds_ctx;

static int ds_load(void *ctx, int index, float *dst, int32_t *label, ct_rng *rng) {
    const ds_ctx *c = ctx;
    (void)rng;
    size_t sz = (size_t)c->ds->h * c->ds->w * c->ds->c;
    const uint8_t *src = c->ds->images + (size_t)index * sz;
    for (size_t k = 0; k < sz; k++) dst[k] = (float)src[k] * c->scale + c->shift;
    *label = c->ds->labels[index];
    return 0;
}

static void gather(const ct_dataset *ds, const int *idx, int B, uint8_t *img, int32_t *lab) {
    size_t sz = (size_t)ds->h * ds->w * ds->c;
    for (int i = 0; i < B; i++) {
        memcpy(img + (size_t)i * sz, ds->images + (size_t)idx[i] * sz, sz);
        lab[i] = ds->labels[idx[i]];
    }
}

int ct_tta_parse(const char *s, int *tta) {
    if (!strcmp(s, "none")) *tta = CT_TTA_NONE;
    else if (!strcmp(s, "flip")) *tta = CT_TTA_FLIP;
    else return ct_fail(CT_EINPUT, "--tta %s: unknown mode; expected none or flip (average each image with its mirror)", s);
    return 0;
}

/* Mirror B HWC images left-right in place (bytes or floats: elem bytes per value). */
static void flip_batch(void *images, int B, int h, int w, int c, size_t elem) {
    size_t px = (size_t)c * elem;
    unsigned char *p = images, t[64];
    CT_ASSERT(px <= sizeof t);
    for (int b = 0; b < B; b++)
        for (int y = 0; y < h; y++) {
            unsigned char *row = p + (((size_t)b * h + y) * w) * px;
            for (int x = 0; x < w / 2; x++) {
                memcpy(t, row + x * px, px);
                memcpy(row + x * px, row + (w - 1 - x) * px, px);
                memcpy(row + (w - 1 - x) * px, t, px);
            }
        }
}

/* --tta flip on one uploaded batch: logits of the images and of their
 * mirrors, averaged; pred = argmax, returns the summed cross-entropy of the
 * averaged logits (log-sum-exp in double). host is the batch as uploaded
 * (floats when fl, else bytes) and is mirrored in place. */
static double eval_flip(ct_model *m, const ct_dataset *ds, int B, void *host, int fl, const int32_t *lab, float scale,
                        float shift, int32_t *pred, float *l0, float *l1) {
    int C = m->n_classes;
    cl_mem logits = m->layers[m->n_layers - 1].out;
    ct_model_forward(m, B);
    ct_cl_read(m->cl, logits, 0, (size_t)B * C * sizeof(float), l0);
    flip_batch(host, B, ds->h, ds->w, ds->c, fl ? sizeof(float) : 1);
    if (fl) ct_cl_write(m->cl, m->input, 0, (size_t)B * ds->h * ds->w * ds->c * sizeof(float), host);
    else ct_model_set_batch(m, host, lab, B, scale, shift);
    ct_model_forward(m, B);
    ct_cl_read(m->cl, logits, 0, (size_t)B * C * sizeof(float), l1);
    double loss = 0;
    for (int i = 0; i < B; i++) {
        float *z = l0 + (size_t)i * C; /* the average, in place */
        double mx = -INFINITY, se = 0;
        int best = 0;
        for (int k = 0; k < C; k++) {
            z[k] = 0.5f * (z[k] + l1[(size_t)i * C + k]);
            if (z[k] > mx) { mx = z[k]; best = k; }
        }
        for (int k = 0; k < C; k++) se += exp((double)z[k] - mx);
        pred[i] = best;
        loss += mx + log(se) - (double)z[lab[i]];
    }
    return loss;
}

int ct_evaluate(ct_model *m, const ct_dataset *ds, const ct_source *src, int limit, float scale, float shift,
                int tta, ct_eval_result *res) {
    memset(res, 0, sizeof *res);
    int n = limit > 0 && limit < ds->n ? limit : ds->n;
    /* data-parallel: each rank evaluates a contiguous shard, the counts are summed */
    int lo = (int)((int64_t)n * ct_world.rank / ct_world.size), hi = (int)((int64_t)n * (ct_world.rank + 1) / ct_world.size);
    res->n_classes = m->n_classes;
    res->confusion = ct_xcalloc((size_t)m->n_classes * m->n_classes, sizeof(int));
    size_t sz = (size_t)ds->h * ds->w * ds->c;
    uint8_t *img = ct_xmalloc(sz * m->batch);
    int32_t *lab = ct_xmalloc(sizeof(int32_t) * m->batch), *pred = ct_xmalloc(sizeof(int32_t) * m->batch);
    int *idx = ct_xmalloc(sizeof(int) * m->batch);
    float *fimg = src ? ct_xmalloc(sz * m->batch * sizeof(float)) : NULL;
    CT_ASSERT(tta == CT_TTA_NONE || tta == CT_TTA_FLIP);
    float *l0 = tta ? ct_xmalloc(sizeof(float) * m->batch * m->n_classes * 2) : NULL;
    int was_training = m->training;
    float smoothing = m->label_smoothing;
    m->training = 0;          /* batch norm uses its running averages */
    m->label_smoothing = 0;   /* the test loss is the plain cross-entropy */
    for (int s = lo; s < hi; s += m->batch) {
        int B = hi - s < m->batch ? hi - s : m->batch;
        for (int i = 0; i < B; i++) idx[i] = s + i;
        if (src) {
            /* a source normalises on the host (e.g. per-image standardisation); evaluation draws no augmentation */
            for (int i = 0; i < B; i++) {
                ct_rng r = ct_rng_make(0, 0, (uint64_t)idx[i]);
                int rc = src->load(src->ctx, idx[i], fimg + (size_t)i * sz, lab + i, &r);
                if (rc) {
                    free(img); free(lab); free(pred); free(idx); free(fimg); free(l0);
                    m->training = was_training;
                    m->label_smoothing = smoothing;
                    return rc;
                }
            }
            ct_cl_write(m->cl, m->input, 0, (size_t)B * sz * sizeof(float), fimg);
            ct_cl_write(m->cl, m->labels, 0, (size_t)B * 4, lab);
        } else {
            gather(ds, idx, B, img, lab);
            ct_model_set_batch(m, img, lab, B, scale, shift);
        }
        if (tta == CT_TTA_FLIP) {
            res->loss += eval_flip(m, ds, B, src ? (void *)fimg : (void *)img, src != NULL, lab, scale, shift, pred, l0,
                                   l0 + (size_t)m->batch * m->n_classes);
        } else {
            ct_model_forward(m, B);
            ct_model_loss(m, B);
            res->loss += ct_model_read_results(m, B, pred);
        }
        for (int i = 0; i < B; i++) {
            res->confusion[lab[i] * m->n_classes + pred[i]]++;
            res->correct += pred[i] == lab[i];
        }
    }
    m->training = was_training;
    m->label_smoothing = smoothing;
    if (ct_world.size > 1) {
        double l = res->loss;
        ct_dist_sum(&l, 1);
        res->loss = l;
        ct_dist_sum_int(&res->correct, 1);
        ct_dist_sum_int(res->confusion, m->n_classes * m->n_classes);
    }
    res->n = n;
    free(img); free(lab); free(pred); free(idx); free(fimg); free(l0);
    return 0;
}

void ct_eval_free(ct_eval_result *r) {
    free(r->confusion);
    r->confusion = NULL;
}

void ct_eval_print(const ct_eval_result *r, char **names, FILE *out, int confusion) {
    int C = r->n_classes;
    fprintf(out, "test: %d images, loss %.4f, accuracy %.2f%%\n", r->n, r->loss / (r->n ? r->n : 1),
            100.0 * r->correct / (r->n ? r->n : 1));
    fprintf(out, "per-class accuracy:");
    for (int c = 0; c < C; c++) {
        int tot = 0;
        for (int p = 0; p < C; p++) tot += r->confusion[c * C + p];
        char buf[64];
        snprintf(buf, sizeof buf, "%s", names ? names[c] : "");
        if (!names) snprintf(buf, sizeof buf, "%d", c);
        fprintf(out, "%s %s %.1f%%", c % 5 ? "," : "\n ", buf, tot ? 100.0 * r->confusion[c * C + c] / tot : 0.0);
    }
    fputc('\n', out);
    if (confusion) {
        fprintf(out, "confusion matrix (rows: true class, columns: predicted):\n");
        for (int c = 0; c < C; c++) {
            fprintf(out, " %3d |", c);
            for (int p = 0; p < C; p++) fprintf(out, " %5d", r->confusion[c * C + p]);
            fputc('\n', out);
        }
    }
}


/* The three ways a batch reaches the device. */
enum { FEED_SYNC, FEED_PIPE, FEED_RESIDENT };

typedef struct feeder {
    int mode;
    ct_source src;
    ds_ctx ctx;
    ct_pipeline pipe;
    float *host_img;           /* sync: one batch */
    int32_t *host_lab;
    int *perm, perm_epoch;     /* sync and resident */
    cl_mem dev_data, dev_lab, dev_idx; /* resident */
    ct_slot *cur;              /* pipelined: the slot of the batch being computed */
    cl_event computed[2];
} feeder;

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

/* " all-reduce X ms/step (Y% hidden)" over the interval since *since, or "" alone */
static const char *ar_note(const ct_grad_sync *g, const ct_grad_sync *since, char *buf, size_t size) {
    long steps = g->steps - since->steps;
    double ar = g->ar_s - since->ar_s, hid = g->hidden_s - since->hidden_s;
    if (steps <= 0) return "";
    snprintf(buf, size, " all-reduce %.1f ms/step (%.0f%% hidden)", 1e3 * ar / steps, ar > 0 ? 100 * hid / ar : 0);
    return buf;
}

static volatile sig_atomic_t g_signal;
static void on_signal(int sig) { g_signal = sig; }

double ct_schedule_lr(const ct_train_opts *o, int64_t g, int64_t total) {
    double lr = o->optim.lr;
    if (o->warmup > 0 && g < o->warmup) return lr * (double)(g + 1) / o->warmup;
    double t = total > o->warmup ? (double)(g - o->warmup) / (double)(total - o->warmup) : 1.0;
    if (o->schedule == CT_SCHED_STEP) lr *= t < 0.5 ? 1.0 : t < 0.75 ? 0.1 : 0.01;
    else if (o->schedule == CT_SCHED_COSINE) lr *= 0.5 * (1.0 + cos(3.14159265358979 * t));
    return lr;
}

static int save_checkpoint(const ct_train_opts *o, ct_model *m, int64_t next, int n, ct_ckpt *ck, int64_t *kept, int *n_kept) {
    ct_ckpt st = {0};
    snprintf(st.model_name, sizeof st.model_name, "%s", m->name);
    snprintf(st.dataset, sizeof st.dataset, "%s", o->dataset ? o->dataset : "");
    snprintf(st.data_dir, sizeof st.data_dir, "%s", o->data_dir ? o->data_dir : "");
    st.cfg = m->cfg;
    st.seed = o->seed;
    st.next_batch = next;
    st.batch = o->batch;
    st.n_train = n;
    st.opt_kind = o->optim.kind;
    st.opt_step = m->step;
    st.n_params = m->n_params;
    st.params = ck->params;
    st.mom1 = ck->mom1;
    st.mom2 = ck->mom2;
    st.ranks = ct_world.size;
    st.n_names = o->class_names ? m->n_classes : 0;
    st.class_names = o->class_names;
    ct_model_get_params(m, st.params);
    ct_cl_read(m->cl, m->mom1, 0, m->n_params * 4, st.mom1);
    ct_cl_read(m->cl, m->mom2, 0, m->n_params * 4, st.mom2);
    int rc = ct_ckpt_save(&st, o->checkpoint);
    if (!rc && o->keep > 0) {
        /* numbered copies FILE.<step>; the oldest beyond --keep go */
        char path[4200];
        snprintf(path, sizeof path, "%s.%lld", o->checkpoint, (long long)next);
        rc = ct_ckpt_save(&st, path);
        if (*n_kept == o->keep) {
            snprintf(path, sizeof path, "%s.%lld", o->checkpoint, (long long)kept[0]);
            unlink(path);
            memmove(kept, kept + 1, sizeof *kept * (size_t)(o->keep - 1));
            (*n_kept)--;
        }
        kept[(*n_kept)++] = next;
    }
    return rc;
}

int ct_train(const ct_train_opts *opts, const ct_dataset *train, const ct_dataset *test, ct_train_result *res, FILE *out) {
    memset(res, 0, sizeof *res);
    ct_train_opts oo = *opts, *o = &oo;
    ct_ckpt ck = {0}, buf = {0};
    int64_t g0 = 0, *kept = NULL;
    int n_kept = 0;
    struct sigaction sa_old[2];
    int handlers = 0;
    ct_tboard tb;
    memset(&tb, 0, sizeof tb);
    double opt_lr = o->optim.lr;
    const int R = ct_world.size, dist = R > 1, writer = ct_world.rank == 0;
    ct_grad_sync gs;
    memset(&gs, 0, sizeof gs);
    if (!writer) o->quiet = 1; /* rank 0 alone prints, logs and saves */
    if (o->batch < 1 || o->batch > 4096) return ct_fail(CT_EINPUT, "--batch-size %d: expected 1..4096", o->batch);
    if (o->epochs < 1) return ct_fail(CT_EINPUT, "--epochs %d: expected at least 1", o->epochs);
    if (!(o->label_smoothing >= 0 && o->label_smoothing < 1))
        return ct_fail(CT_EINPUT, "--label-smoothing %g: expected a number in [0, 1), e.g. 0.1", o->label_smoothing);
    double t_start = ct_now();
    ct_model m;
    ct_cl cl;
    memset(&cl, 0, sizeof cl);
    feeder f;
    memset(&f, 0, sizeof f);
    int32_t *pred = NULL;
    int rc;
    memset(&m, 0, sizeof m);
    if (o->resume) {
        /* the checkpoint fixes the model and the data order */
        if ((rc = ct_ckpt_load(&ck, o->resume))) goto done;
        if ((rc = ct_model_parse(&m, ck.cfg, ck.model_name))) goto done;
        if (o->model_set) {
            ct_model other;
            rc = o->fit_model ? ct_model_load_shaped(&other, o->model, train->h, train->w, train->c, train->n_classes)
                              : ct_model_load(&other, o->model);
            int same = !rc && !strcmp(other.cfg, ck.cfg);
            ct_model_free(&other);
            if (rc) goto done;
            if (!same) {
                rc = ct_fail(CT_EINPUT, "%s: this checkpoint holds model %s, not %s; resume without --model or start afresh",
                             o->resume, ck.model_name, o->model);
                goto done;
            }
        }
        if (m.n_params != ck.n_params) { rc = ct_fail(CT_EINPUT, "%s: parameter count does not match its model", o->resume); goto done; }
        if (ck.n_train > train->n) {
            rc = ct_fail(CT_EINPUT, "%s: trained on %d samples per epoch but this data set has %d", o->resume, ck.n_train, train->n);
            goto done;
        }
        if (ck.ranks != R) {
            rc = ct_fail(CT_EINPUT, "%s: trained with %d rank%s of batch %d; resume with the same rank count (mpirun -np %d), "
                         "the data order depends on the global batch", o->resume, ck.ranks, ck.ranks == 1 ? "" : "s", ck.batch, ck.ranks);
            goto done;
        }
        o->seed = ck.seed;
        o->batch = ck.batch;
        o->limit_train = ck.n_train;
        o->optim.kind = ck.opt_kind;
        g0 = ck.next_batch;
    } else if ((rc = o->fit_model ? ct_model_load_shaped(&m, o->model, train->h, train->w, train->c, train->n_classes)
                                  : ct_model_load(&m, o->model))) {
        goto done;
    }
    rc = ct_model_check_input(&m, train->h, train->w, train->c, train->n_classes, "the training set");
    if (!rc) rc = ct_cl_open_rank(&cl, o->device, ct_world.rank, ct_world.local_rank);
    if (!rc) rc = ct_model_setup(&m, &cl, o->batch, o->gemm);
    if (rc) goto done;
    ct_model_init_weights(&m, o->seed);
    m.label_smoothing = o->label_smoothing;
    if (o->resume) {
        ct_model_set_params(&m, ck.params);
        ct_cl_write(&cl, m.mom1, 0, m.n_params * 4, ck.mom1);
        ct_cl_write(&cl, m.mom2, 0, m.n_params * 4, ck.mom2);
        m.step = ck.opt_step;
    }
    if (dist) {
        /* every rank starts from rank 0's state */
        float *p = ct_xmalloc(m.n_params * sizeof(float));
        cl_mem bufs[3] = {m.params, m.mom1, m.mom2};
        for (int k = 0; k < (o->resume ? 3 : 1); k++) {
            if (writer) ct_cl_read(&cl, bufs[k], 0, m.n_params * 4, p);
            ct_dist_bcast(p, m.n_params * 4);
            if (!writer) ct_cl_write(&cl, bufs[k], 0, m.n_params * 4, p);
        }
        free(p);
        ct_grad_sync_init(&gs, &m, o->bucket_bytes ? o->bucket_bytes : (size_t)1 << 20);
    }
    if (o->checkpoint) {
        buf.params = ct_xmalloc(m.n_params * 4);
        buf.mom1 = ct_xmalloc(m.n_params * 4);
        buf.mom2 = ct_xmalloc(m.n_params * 4);
        kept = ct_xcalloc((size_t)(o->keep > 0 ? o->keep : 1), sizeof *kept);
    }
    if (o->logdir && writer && (rc = ct_tboard_open(&tb, o->logdir))) goto done;
    /* Ctrl-C / SIGTERM: finish the step, save, stop; a second one kills at once */
    g_signal = 0;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sa.sa_flags = SA_RESETHAND | SA_RESTART;
    sigaction(SIGINT, &sa, &sa_old[0]);
    sigaction(SIGTERM, &sa, &sa_old[1]);
    handlers = 1;
    int n = o->limit_train > 0 && o->limit_train < train->n ? o->limit_train : train->n;
    const int64_t GB = (int64_t)o->batch * R; /* the global batch: R slices of o->batch */
    long spe = (long)((n + GB - 1) / GB);
    int64_t total = (int64_t)spe * o->epochs;
    if (o->max_steps && o->max_steps < total) total = o->max_steps;
    if (g0 >= total) {
        rc = ct_fail(CT_EINPUT, "%s: already trained %lld steps (%lld epochs); ask for more --epochs to go on", o->resume,
                     (long long)g0, (long long)(g0 / spe));
        goto done;
    }
    if (g0 && !o->quiet) fprintf(out, "resuming %s at step %lld (epoch %lld)\n", o->resume, (long long)g0, (long long)(g0 / spe) + 1);
    size_t sz = (size_t)train->h * train->w * train->c;
    f.ctx = (ds_ctx){train, o->scale, o->shift};
    f.src = (ct_source){.n = train->n, .h = train->h, .w = train->w, .c = train->c, .n_classes = train->n_classes,
                        .ctx = &f.ctx, .load = ds_load, .io_latency_us = o->io_latency_us};
    if (o->train_src) {
        f.src = *o->train_src;
        f.src.io_latency_us = o->io_latency_us;
    }
    f.host_img = ct_xmalloc(sz * o->batch * sizeof(float));
    f.host_lab = ct_xmalloc(sizeof(int32_t) * o->batch);
    f.perm = ct_xmalloc(sizeof(int) * (size_t)n);
    f.perm_epoch = -1;
    pred = ct_xmalloc(sizeof(int32_t) * o->batch);
    int producers = o->producers;
    f.mode = o->resident ? FEED_RESIDENT : producers == 0 ? FEED_SYNC : FEED_PIPE;
    if (f.mode == FEED_RESIDENT) {
        if (o->io_latency_us) { rc = ct_fail(CT_EINPUT, "--resident reads no storage: --io-latency-us does not apply"); goto done; }
        if (o->train_src) { rc = ct_fail(CT_EINPUT, "--resident gathers raw bytes on the device: it cannot augment; use producers"); goto done; }
        if ((rc = ct_cl_alloc(&cl, &f.dev_data, sz * (size_t)n, "resident data set (try without --resident)"))) goto done;
        if ((rc = ct_cl_alloc(&cl, &f.dev_lab, (size_t)n, "resident labels"))) goto done;
        if ((rc = ct_cl_alloc(&cl, &f.dev_idx, sizeof(int) * o->batch + 4, "batch indices"))) goto done;
        ct_cl_write(&cl, f.dev_data, 0, sz * (size_t)n, train->images);
        ct_cl_write(&cl, f.dev_lab, 0, (size_t)n, train->labels);
    }
    res->startup_s = ct_now() - t_start;
    if (!o->quiet) {
        fprintf(out, "device %d:%d %s (%s)\n", cl.plat_index, cl.dev_index, cl.device_name, cl.platform_name);
        ct_model_summary(&m, out);
        fprintf(out, "training on %d images, batch %lld, %ld steps per epoch, %s lr %g; start-up %.2f s (%d kernel files compiled, %d cached)\n",
                n, (long long)GB, spe, o->optim.kind == CT_OPT_ADAM ? "adam" : "sgd", o->optim.lr, res->startup_s,
                cl.cache_misses, cl.cache_hits);
    }
    if (dist) {
        char mine[320], *all = writer ? ct_xcalloc((size_t)R, sizeof mine) : NULL;
        snprintf(mine, sizeof mine, "%.63s, device %d:%d %.200s", ct_world.host, cl.plat_index, cl.dev_index, cl.device_name);
        ct_dist_gather_str(mine, all, (int)sizeof mine);
        if (!o->quiet) {
            fprintf(out, "data-parallel: %d ranks x batch %d = global batch %lld; %.2f MB of gradients per step in %d all-reduce bucket%s\n",
                    R, o->batch, (long long)GB, gs.bytes / 1e6, gs.n_buckets, gs.n_buckets == 1 ? "" : "s");
            for (int r = 0; r < R; r++) fprintf(out, "  rank %d: %s\n", r, all + (size_t)r * sizeof mine);
        }
        free(all);
    }
    int tty = isatty(fileno(out)) && !o->quiet && !ct_world.mpi; /* mpirun hands ranks a pty even when its own output is a file */
    double t_compute = 0;      /* step time minus data wait */
    long images = 0;
    int64_t g = 0;
    double iv_loss = 0, t_iv = ct_now(), iv_wait = 0, iv_t0 = ct_now();
    long iv_correct = 0, iv_n = 0;
    ct_grad_sync iv_ar = gs; /* all-reduce totals at the interval's start */
    double sync_wait = 0;      /* data-parallel: time waiting for the other ranks at the end of steps */
    char arbuf[64];
    int j = 0;
    for (g = g0; g < total; g++) {
        int64_t k = g - g0;
        int epoch = (int)(g / spe);
        long s = g % spe;
        double t0 = ct_now(), wait = 0;
        int B;
        int64_t first = 0; /* resident: this rank's first sample in the epoch's order */
        /* 1. this step's batch into input buffer j */
        int warmup = f.mode == FEED_PIPE && o->producers < 0 && k < 2;
        if (f.mode == FEED_PIPE && producers < 0 && k == 2) {
            /* --producers auto: batches 0 and 1 ran synchronously; batch 1 timed both sides */
            double fill_rate = res->producer_rate, comp_rate = res->compute_rate;
            producers = (int)ceil(1.25 * comp_rate / (fill_rate > 0 ? fill_rate : 1));
            if (producers < 1) producers = 1;
            if (producers > 16) producers = 16;
        }
        if (f.mode == FEED_SYNC || warmup) {
            if (f.perm_epoch != epoch) { ct_epoch_order(f.perm, n, o->seed, epoch); f.perm_epoch = epoch; }
            rc = ct_batch_fill_part(&f.src, o->seed, n, o->batch, ct_world.rank, R, g, f.perm, f.host_img, f.host_lab, &B);
            if (rc) break;
            double tf = ct_now() - t0;
            ct_cl_write(&cl, m.input, 0, (size_t)B * sz * sizeof(float), f.host_img);
            ct_cl_write(&cl, m.labels, 0, (size_t)B * 4, f.host_lab);
            wait = ct_now() - t0;
            if (k == 1) res->producer_rate = B / (tf > 1e-9 ? tf : 1e-9);
        } else if (f.mode == FEED_RESIDENT) {
            if (f.perm_epoch != epoch) { ct_epoch_order(f.perm, n, o->seed, epoch); f.perm_epoch = epoch; }
            B = ct_batch_part(n, o->batch, ct_world.rank, R, g, &first);
            if (B) {
                CL_CHECK(clEnqueueWriteBuffer(cl.queue, f.dev_idx, CL_FALSE, 0, sizeof(int) * B, f.perm + first, 0, NULL, NULL));
                ct_model_gather(&m, f.dev_data, f.dev_lab, f.dev_idx, B, o->scale, o->shift);
            }
        } else {
            if (!f.cur) {
                /* start the producers from batch g (with auto, batches 0 and 1 were made here, and timed) */
                ct_pipeline_opts po = {.producers = producers, .prefetch = o->prefetch ? o->prefetch : (2 * producers > 4 ? 2 * producers : 4),
                                       .batch = o->batch, .seed = o->seed, .n = n, .first_batch = g, .total_batches = total,
                                       .part = ct_world.rank, .parts = R};
                if ((rc = ct_pipeline_start(&f.pipe, &f.src, &po, &cl))) break;
                rc = ct_pipeline_next(&f.pipe, &f.cur);
                if (rc) { if (rc > 0) rc = ct_fail(CT_EIO, "the input pipeline ended early"); break; }
                upload_slot(&m, f.cur, j, &f.computed[j]);
                wait = ct_now() - t0;
            }
            B = f.cur->B;
            ct_model_select_input(&m, j);
            CL_CHECK(clEnqueueBarrierWithWaitList(cl.queue, 1, &f.cur->uploaded, NULL));
        }
        /* 2. the step */
        double tc0 = ct_now();
        ct_model_zero_grad(&m);
        /* data-parallel: the loss is the global batch's mean, so summed gradients are its gradient */
        m.loss_batch = dist ? ct_batch_part(n, (int)GB, 0, 1, g, NULL) : 0;
        if (B) {
            ct_model_forward(&m, B);
            ct_model_loss(&m, B);
        }
        /* data-parallel: each bucket's all-reduce starts as soon as backward has produced it */
        ct_model_backward(&m, B, dist ? ct_grad_sync_on_layer : NULL, &gs);
        if (dist) ct_grad_sync_finish(&gs);
        ct_optim opt = o->optim;
        opt.lr = (float)ct_schedule_lr(o, g, total);
        opt_lr = opt.lr;
        ct_model_step(&m, &opt);
        ct_slot *next = NULL;
        if (f.cur) {
            if (f.computed[j]) clReleaseEvent(f.computed[j]);
            CL_CHECK(clEnqueueMarkerWithWaitList(cl.queue, 0, NULL, &f.computed[j]));
            CL_CHECK(clFlush(cl.queue));
            /* 3. while the device computes, take the next batch and start its upload into the other buffer */
            if (g + 1 < total) {
                /* Poll for the next batch; data-wait is only the time after the device
                 * finished this step (waiting while it computes costs nothing). */
                double done_at = 0;
                for (;;) {
                    rc = ct_pipeline_try_next(&f.pipe, &next);
                    if (rc != CT_RING_AGAIN) break;
                    if (!done_at) {
                        cl_int st;
                        CL_CHECK(clGetEventInfo(f.computed[j], CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof st, &st, NULL));
                        if (st == CL_COMPLETE) done_at = ct_now();
                    }
                    if (done_at) { rc = ct_pipeline_next(&f.pipe, &next); break; } /* device idle: block */
                    struct timespec ts = {0, 50000};
                    nanosleep(&ts, NULL);
                }
                if (done_at) wait += ct_now() - done_at;
                if (rc) { if (rc > 0) rc = ct_fail(CT_EIO, "the input pipeline ended early"); break; }
                upload_slot(&m, next, 1 - j, &f.computed[1 - j]);
            }
        }
        double loss = ct_model_read_results(&m, B, pred);
        const int32_t *lab = f.host_lab;
        int stop = g_signal != 0;
        if (f.cur) {
            memcpy(f.host_lab, f.cur->labels, sizeof(int32_t) * B);
            ct_pipeline_release(&f.pipe, f.cur);
            f.cur = next;
            j = 1 - j;
        } else if (f.mode == FEED_RESIDENT) {
            for (int i = 0; i < B; i++) f.host_lab[i] = train->labels[f.perm[first + i]];
        }
        int correct = 0, Bg = B;
        for (int i = 0; i < B; i++) correct += pred[i] == lab[i];
        if (dist) {
            /* one small all-reduce per step: global loss and accuracy, and agreement on stopping */
            double v[5] = {loss, correct, B, stop, m.nonfinite};
            double tw = ct_now();
            ct_dist_sum(v, 5);
            sync_wait += ct_now() - tw;
            loss = v[0];
            correct = (int)v[1];
            Bg = (int)v[2];
            stop = v[3] > 0;
            m.nonfinite = v[4] > 0;
        }
        if (dist && k == 0 && total - g0 > 1) {
            /* all-reduce figures from the second step on: the first one also builds and warms up */
            gs.steps = 0;
            gs.ar_s = gs.hidden_s = gs.exposed_s = gs.window_s = 0;
            iv_ar = gs;
        }
        double t1 = ct_now();
        if (k == 1) res->compute_rate = Bg / (t1 - tc0 > 1e-9 ? t1 - tc0 : 1e-9);
        /* steady state: leave out the pipeline fill (first step, and auto's two timed steps) */
        if (k > (f.mode == FEED_PIPE && o->producers < 0 ? 2 : 0) || total - g0 == 1) {
            res->wait_s += wait;
            res->total_s += t1 - t0;
            t_compute += t1 - t0 - wait;
            images += Bg; /* the whole job's images: all ranks' */
        }
        if (m.nonfinite || !isfinite(loss)) {
            /* NaN guard: the optimizer did not apply this step (see ct_model_step) */
            m.step--;
            int layer = ct_model_first_nonfinite_layer(&m);
            char where[96];
            if (layer >= 0) snprintf(where, sizeof where, "the gradient of layer %d (%s, .cfg line %d)", layer,
                                     ct_layer_names[m.layers[layer].type], m.layers[layer].line);
            else snprintf(where, sizeof where, "the loss");
            if (o->on_nan_skip) {
                if (writer) fprintf(stderr, "%scltrain: step %lld: %s is NaN or infinite; step skipped (--on-nan skip)\n", tty ? "\n" : "",
                        (long long)g + 1, where);
                res->skipped++;
                continue;
            }
            rc = ct_fail(CT_ENAN, "step %lld (epoch %d): %s is NaN or infinite; training stopped before applying it%s%s; try a lower --lr (now %g)",
                         (long long)g + 1, epoch + 1, where, o->checkpoint ? ", the last checkpoint is untouched: " : "",
                         o->checkpoint ? o->checkpoint : "", o->optim.lr);
            break;
        }
        iv_loss += loss;
        iv_n += Bg;
        iv_wait += wait;
        iv_correct += correct;
        res->last_loss = iv_loss / iv_n;
        res->last_acc = (double)iv_correct / iv_n;
        int last = s == spe - 1 || g == total - 1;
        if (tb.events && ((g + 1) % o->progress_every == 0 || last)) {
            double el = ct_now() - iv_t0;
            ct_tboard_scalar(&tb, "train/loss", g + 1, res->last_loss);
            ct_tboard_scalar(&tb, "train/accuracy", g + 1, res->last_acc);
            ct_tboard_scalar(&tb, "lr", g + 1, opt_lr);
            ct_tboard_scalar(&tb, "images_per_s", g + 1, iv_n / (ct_now() - t_iv));
            ct_tboard_scalar(&tb, "data_wait", g + 1, el > 0 ? iv_wait / el : 0);
            ct_tboard_flush(&tb);
        }
        if (!o->quiet && (tty || (g + 1) % o->progress_every == 0 || last)) {
            double el = ct_now() - iv_t0, ips = iv_n / (ct_now() - t_iv);
            if (tty) {
                int w = 24, fill = (int)(w * (s + 1) / spe);
                fprintf(out, "\repoch %d/%d [%.*s%*s] %ld/%ld loss %.4f acc %5.1f%% %6.0f img/s data-wait %4.1f%%%s ", epoch + 1,
                        o->epochs, fill, "========================", w - fill, "", s + 1, spe, res->last_loss,
                        100 * res->last_acc, ips, 100 * iv_wait / el, ar_note(&gs, &iv_ar, arbuf, sizeof arbuf));
                if (last) fputc('\n', out);
                fflush(out);
            } else {
                fprintf(out, "epoch %d step %ld/%ld loss %.4f acc %.1f%% %.0f img/s data-wait %.1f%%%s\n", epoch + 1, s + 1, spe,
                        res->last_loss, 100 * res->last_acc, ips, 100 * iv_wait / el, ar_note(&gs, &iv_ar, arbuf, sizeof arbuf));
            }
            if (!tty || last) { iv_loss = 0; iv_correct = 0; iv_n = 0; iv_wait = 0; t_iv = iv_t0 = ct_now(); iv_ar = gs; }
        }
        int eval_now = test && ((o->eval_every > 0 && (g + 1) % o->eval_every == 0 && !last) || (last && s == spe - 1) ||
                                (last && g == total - 1));
        if (eval_now) {
            double te = ct_now();
            ct_dist_average_running_stats(&m);
            ct_eval_result ev;
            if ((rc = ct_evaluate(&m, test, o->eval_src, o->limit_test, o->scale, o->shift, o->tta, &ev))) break;
            res->test_acc = (double)ev.correct / (ev.n ? ev.n : 1);
            if (tb.events) {
                ct_tboard_scalar(&tb, "test/accuracy", g + 1, res->test_acc);
                ct_tboard_scalar(&tb, "test/loss", g + 1, ev.loss / (ev.n ? ev.n : 1));
                ct_tboard_flush(&tb);
            }
            if (!o->quiet) {
                if (last) { fprintf(out, "epoch %d: ", epoch + 1); ct_eval_print(&ev, test->class_names, out, 0); }
                else fprintf(out, "step %lld: test accuracy %.2f%%\n", (long long)g + 1, 100 * res->test_acc);
            }
            ct_eval_free(&ev);
            t_iv += ct_now() - te;
            iv_t0 += ct_now() - te;
        }
        if (o->checkpoint && (stop || s == spe - 1 || g == total - 1 || (o->checkpoint_every > 0 && (g + 1) % o->checkpoint_every == 0))) {
            double tk = ct_now();
            ct_dist_average_running_stats(&m);
            if (writer && (rc = save_checkpoint(o, &m, g + 1, n, &buf, kept, &n_kept))) break;
            t_iv += ct_now() - tk;
            iv_t0 += ct_now() - tk;
        }
        if (stop) {
            g++;
            res->signal = g_signal ? g_signal : SIGTERM; /* another rank got it */
            rc = ct_fail(CT_EINTR, "stopped by %s after step %lld%s%s", g_signal == SIGINT ? "SIGINT" : "SIGTERM", (long long)g,
                         o->checkpoint ? "; saved " : "", o->checkpoint ? o->checkpoint : "");
            break;
        }
    }
    res->steps = g;
    res->producers = f.mode == FEED_PIPE ? producers : 0;
    if (f.mode == FEED_PIPE && f.pipe.slots) {
        ct_pipeline_stats st;
        ct_pipeline_stats_get(&f.pipe, &st);
        if (st.producer_rate > 0) res->producer_rate = st.producer_rate;
    }
    if (f.mode == FEED_SYNC && res->total_s > 0) res->producer_rate = images / (res->wait_s > 1e-9 ? res->wait_s : 1e-9);
    if (dist) {
        res->buckets = gs.n_buckets;
        if (gs.steps) {
            res->allreduce_ms = 1e3 * gs.ar_s / gs.steps;
            res->hidden_frac = gs.ar_s > 0 ? gs.hidden_s / gs.ar_s : 0;
            res->exposed_ms = 1e3 * gs.exposed_s / gs.steps;
            res->window_ms = 1e3 * gs.window_s / gs.steps;
        }
    }
    res->images_per_s = res->total_s > 0 ? images / res->total_s : 0;
    if (t_compute > 0) res->compute_rate = images / t_compute;
    double bound = res->compute_rate;
    if (f.mode != FEED_RESIDENT && res->producer_rate > 0 && res->producer_rate < bound) bound = res->producer_rate;
    res->efficiency = bound > 0 ? res->images_per_s / bound : 0;
    if (!o->quiet && !rc) {
        fprintf(out, "trained %lld steps, %.0f images/s (%.1f GFLOP/s achieved), data-wait %.1f%%\n", (long long)g,
                res->images_per_s, res->images_per_s * 3 * m.flops_fwd * 1e-9, 100 * res->wait_s / (res->total_s > 0 ? res->total_s : 1));
        const char *mode = f.mode == FEED_RESIDENT ? "resident" : f.mode == FEED_SYNC ? "synchronous" : "pipelined";
        fprintf(out, "input: %s", mode);
        if (f.mode == FEED_PIPE) fprintf(out, ", %d producer%s%s", producers, producers == 1 ? "" : "s", o->producers < 0 ? " (auto)" : "");
        if (f.mode != FEED_RESIDENT) fprintf(out, "; producer %.0f images/s", res->producer_rate);
        fprintf(out, ", compute %.0f images/s, achieved %.0f images/s, pipeline efficiency %.2f\n", res->compute_rate,
                res->images_per_s, res->efficiency);
    }
    if (dist) CT_DEBUG(1, "rank %d: %.1f ms per step waiting for the other ranks at step ends, %.1f ms in gradient all-reduce",
                       ct_world.rank, 1e3 * sync_wait / (g - g0 > 0 ? g - g0 : 1), gs.steps ? 1e3 * gs.ar_s / gs.steps : 0.0);
    if (!rc && dist) {
        ct_dist_average_running_stats(&m);
        if (!ct_dist_params_agree(&m)) {
            rc = ct_fail(CT_EDEVICE, "the ranks' parameters differ after training (the all-reduce gave ranks different sums)");
        } else if (!o->quiet) {
            fprintf(out, "all-reduce: %.2f ms per step, %.0f%% of it hidden behind backward, %.2f ms exposed; parameters identical on all %d ranks\n",
                    res->allreduce_ms, 100 * res->hidden_frac, res->exposed_ms, R);
        }
    }
    if (!rc && o->keep_params) {
        res->n_params = m.n_params;
        res->params = ct_xmalloc(m.n_params * sizeof(float));
        ct_model_get_params(&m, res->params);
    }
done:
    if (handlers) {
        sigaction(SIGINT, &sa_old[0], NULL);
        sigaction(SIGTERM, &sa_old[1], NULL);
    }
    ct_tboard_close(&tb);
    ct_ckpt_free(&ck);
    ct_ckpt_free(&buf);
    free(kept);
    if (f.pipe.slots) {
        if (f.cur) ct_pipeline_release(&f.pipe, f.cur);
        ct_pipeline_stop(&f.pipe);
    }
    for (int k = 0; k < 2; k++)
        if (f.computed[k]) clReleaseEvent(f.computed[k]);
    ct_cl_release(&f.dev_data);
    ct_cl_release(&f.dev_lab);
    ct_cl_release(&f.dev_idx);
    free(f.host_img); free(f.host_lab); free(f.perm);
    free(pred);
    ct_grad_sync_free(&gs);
    ct_model_free(&m);
    if (cl.ctx) ct_cl_close(&cl);
    return rc;
}
