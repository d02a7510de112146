/* train/train.c: ct_train (set-up or resume, the loop over steps, the
 * summary). Batch order comes only from (seed, epoch); the step is
 * train/step.c, the batch train/feed.c, what follows a step train/hooks.c
 * (see train/loop.h). Progress: a live line on a
 * terminal, plain lines otherwise. Tested by tests/cli.sh, tests/checkpoint.sh,
 * tests/mpi.sh and tests/test_schedule.c. */
#include "loop.h"
#include "cltrain/datasets.h"
#include "cltrain/layer.h"
#include <math.h>
#include <string.h>
#include <unistd.h>

void ct_train_defaults(ct_train_opts *o) {
    memset(o, 0, sizeof *o);
    o->model = "mnist-cnn";
    o->epochs = 1;
    o->batch = 128;
    o->optim = (ct_optim_hparams){.kind = CT_OPT_ADAM, .lr = ct_optim_adam.default_lr, .b1 = 0.9f, .b2 = 0.999f, .eps = 1e-8f, .wd = 0, .momentum = 0.9f};
    o->seed = 1;
    o->gemm = CT_GEMM_NATIVE;
    o->conv = CT_CONV_AUTO;
    o->progress_every = 50;
    o->scale = 1.0f / 255.0f;
    o->shift = 0.0f;
    o->producers = -1;
}

static int load_model(ct_loop *loop, ct_model *m, const char *spec) {
    const ct_dataset *t = loop->train;
    return loop->o.fit_model ? ct_model_load_shaped(m, spec, t->h, t->w, t->c, t->n_classes) : ct_model_load(m, spec);
}

/* --resume: the checkpoint fixes the model and the data order */
static int open_resumed(ct_loop *loop) {
    ct_train_opts *o = &loop->o;
    ct_ckpt *ck = &loop->ck;
    int rc;
    if ((rc = ct_ckpt_load(ck, o->resume))) return rc;
    if ((rc = ct_resume_check(o, ck, loop->train))) return rc;
    if ((rc = ct_model_parse(&loop->m, ck->cfg, ck->model_name))) return rc;
    if (o->model_set) {
        ct_model other;
        rc = load_model(loop, &other, o->model);
        int same = !rc && !strcmp(other.cfg, ck->cfg);
        ct_model_free(&other);
        if (rc) return rc;
        if (!same)
            return ct_fail(CT_EINPUT, "%s: this checkpoint holds model %s, not %s; resume without --model or start afresh",
                           o->resume, ck->model_name, o->model);
    }
    if (loop->m.n_params != ck->n_params) return ct_fail(CT_EINPUT, "%s: parameter count does not match its model", o->resume);
    if (ck->n_train > loop->train->n)
        return ct_fail(CT_EINPUT, "%s: trained on %d samples per epoch but this data set has %d", o->resume, ck->n_train, loop->train->n);
    if (ck->ranks != loop->R)
        return ct_fail(CT_EINPUT, "%s: trained with %d rank%s of batch %d; resume with the same rank count (mpirun -np %d), "
                       "the data order depends on the global batch", o->resume, ck->ranks, ck->ranks == 1 ? "" : "s", ck->batch, ck->ranks);
    o->seed = ck->seed;
    o->batch = ck->batch;
    o->limit_train = ck->n_train;
    o->drop_last = ck->drop_last;
    ct_dist_note_checkpoint(o->resume, ck->next_batch);
    /* the optimizer goes on as it was; a flag given now overrides its setting */
    o->optim.kind = ck->opt_kind;
    if (!o->lr_set) o->optim.lr = ck->hp_saved ? ck->lr : ct_optim_types[ck->opt_kind]->default_lr;
    if (ck->hp_saved && !o->momentum_set) o->optim.momentum = ck->momentum;
    if (ck->hp_saved && !o->wd_set) o->optim.wd = ck->wd;
    if (!o->lookahead_set) o->lookahead = ck->lookahead;
    if (ck->average && o->lookahead == 0)
        return ct_fail(CT_EINPUT, "%s: the run kept a lookahead average of the weights; resume without --lookahead 0 "
                       "(or with another rate)", o->resume);
    loop->g0 = ck->next_batch;
    return 0;
}

/* --init: the checkpoint's model and weights; the optimizer and the step count start afresh */
static int open_init(ct_loop *loop) {
    ct_train_opts *o = &loop->o;
    ct_ckpt *ck = &loop->ck;
    int rc;
    if ((rc = ct_ckpt_load(ck, o->init))) return rc;
    if (o->model_set)
        return ct_fail(CT_EINPUT, "--init %s holds model %s; leave out --model (the checkpoint's model is the one trained)", o->init,
                       ck->model_name);
    if ((rc = ct_model_parse(&loop->m, ck->cfg, ck->model_name))) return rc;
    if (loop->m.n_params != ck->n_params) return ct_fail(CT_EINPUT, "%s: parameter count does not match its model", o->init);
    /* an import (no data set recorded) takes pixels in [0, 1]; a set that standardises each image feeds it others
     * (a model with its own mean= and std= is fed as it wants by any set) */
    const ct_dataset_def *now = o->dataset ? ct_dataset_find_kind(o->dataset) : NULL,
                         *was = ck->data.kind[0] ? ct_dataset_find_kind(ck->data.kind) : NULL;
    if (!loop->m.prep.c && now && (was ? was->standardize : 0) != now->standardize && !o->quiet && loop->writer)
        fprintf(loop->out, "note: %s was trained on %s; %s %s each image, so the model sees other inputs than it "
                "learnt on\n", o->init, was ? was->name : "pixels in [0, 1] (an import; cltrain arrays and images give those)",
                now->name, now->standardize ? "standardises" : "does not standardise");
    return 0;
}

/* every rank starts from rank 0's state: the parameters, and on resume the optimizer's */
static void broadcast_state(ct_loop *loop) {
    ct_model *m = &loop->m;
    float *p = ct_xmalloc(m->n_params * sizeof(float));
    int n = loop->o.resume ? loop->opt.type->n_state + loop->la.have : 0;
    for (int k = 0; k <= n; k++) {
        cl_mem b = k > loop->opt.type->n_state ? loop->la.avg : k ? loop->opt.state[k - 1] : m->params;
        if (loop->writer) ct_cl_read(&loop->cl, b, 0, m->n_params * 4, p);
        ct_dist_bcast(p, m->n_params * 4);
        if (!loop->writer) ct_cl_write(&loop->cl, b, 0, m->n_params * 4, p);
    }
    free(p);
}

/* --freeze N: the parameters of layers 0..N-1 (the front of the flat buffer) get no gradient and no
 * weight decay, so no optimizer moves them (device_step clears their gradients) */
static int freeze(ct_loop *loop) {
    ct_model *m = &loop->m;
    if (loop->o.freeze > m->n_layers)
        return ct_fail(CT_EINPUT, "--freeze %d: model %s has %d layers", loop->o.freeze, m->name, m->n_layers);
    size_t end = 0;
    for (int i = 0; i < loop->o.freeze; i++) {
        const ct_layer *L = &m->layers[i];
        if (L->n_w && L->w_off + L->n_w > end) end = L->w_off + L->n_w;
        if (L->n_b && L->b_off + L->n_b > end) end = L->b_off + L->n_b;
    }
    for (int i = loop->o.freeze; i < m->n_layers; i++) /* the flat buffer holds layers in order */
        CT_ASSERT((!m->layers[i].n_w || m->layers[i].w_off >= end) && (!m->layers[i].n_b || m->layers[i].b_off >= end));
    loop->frozen = end;
    m->n_frozen = loop->o.freeze; /* backward skips them */
    ct_model_groups_epoch(m, 0);
    if (end) {
        uint8_t zero = 0;
        CL_CHECK(clEnqueueFillBuffer(loop->cl.queue, m->decay_mask, &zero, 1, 0, end, 0, NULL, NULL));
    }
    return 0;
}

/* the device, the weights (initial or resumed), the optimizer, the log */
static int setup(ct_loop *loop) {
    ct_train_opts *o = &loop->o;
    ct_model *m = &loop->m;
    const ct_dataset *t = loop->train;
    int rc = ct_model_check_input(m, t->h, t->w, t->c, t->n_classes, "the training set", "pick another --model");
    if (!rc) rc = ct_cl_open_rank(&loop->cl, o->device, ct_world.rank, ct_world.local_rank);
    m->conv_algo = o->conv;
    if (!rc) rc = ct_model_setup(m, &loop->cl, o->batch, o->gemm);
    if (rc) return rc;
    ct_model_init_weights(m, o->seed);
    if (!o->resume && !o->init && (rc = ct_train_whiten(loop))) return rc; /* else the checkpoint holds its weights */
    m->label_smoothing = o->label_smoothing;
    if ((rc = ct_optim_setup(&loop->opt, m, &o->optim))) return rc;
    if ((rc = ct_lookahead_setup(&loop->la, &loop->opt, o->lookahead))) return rc;
    if (o->init) ct_model_set_params(m, loop->ck.params);
    if (o->freeze && (rc = freeze(loop))) return rc;
    if (o->resume) {
        ct_model_set_params(m, loop->ck.params);
        CT_ASSERT(loop->ck.n_state == loop->opt.type->n_state); /* ct_ckpt_load checked it */
        for (int i = 0; i < loop->ck.n_state; i++) ct_optim_set_state(&loop->opt, i, loop->ck.state[i]);
        if (loop->ck.average) ct_lookahead_set(&loop->la, loop->ck.average);
        m->step = loop->ck.opt_step;
    }
    if (loop->dist) {
        broadcast_state(loop);
        ct_grad_sync_init(&loop->gs, m, o->bucket_bytes ? o->bucket_bytes : (size_t)1 << 20);
    }
    if (o->checkpoint) {
        loop->buf.params = ct_xmalloc(m->n_params * 4);
        for (int i = 0; i < loop->opt.type->n_state; i++) loop->buf.state[i] = ct_xmalloc(m->n_params * 4);
        if (o->lookahead > 0) loop->buf.average = ct_xmalloc(m->n_params * 4);
        loop->kept = ct_xcalloc((size_t)(o->keep > 0 ? o->keep : 1), sizeof *loop->kept);
    }
    if (o->logdir && loop->writer && (rc = ct_tboard_open(&loop->tb, o->logdir))) return rc;
    return 0;
}

/* steps per epoch, the last step, the feed */
static int plan(ct_loop *loop) {
    const ct_train_opts *o = &loop->o;
    loop->n = o->limit_train > 0 && o->limit_train < loop->train->n ? o->limit_train : loop->train->n;
    loop->GB = (int64_t)o->batch * loop->R; /* the global batch: R slices of o->batch */
    loop->spe = (long)ct_steps_per_epoch(loop->n, loop->GB, o->drop_last);
    if (loop->spe < 1)
        return ct_fail(CT_EINPUT, "--drop-last%s: %d training samples make no whole batch of %lld; use a smaller --batch-size",
                       o->given & CT_GIVEN_DROP_LAST ? "" : " (the model's drop_last=1)", loop->n, (long long)loop->GB);
    loop->total = (int64_t)loop->spe * o->epochs;
    if (o->max_steps && o->max_steps < loop->total) loop->total = o->max_steps;
    if (loop->g0 >= loop->total)
        return ct_fail(CT_EINPUT, "%s: already trained %lld steps (%lld epochs); ask for more --epochs to go on", o->resume,
                       (long long)loop->g0, (long long)(loop->g0 / loop->spe));
    if (loop->g0 && !o->quiet)
        fprintf(loop->out, "resuming %s at step %lld (epoch %lld); from the checkpoint: seed %llu, batch %d, %d samples per "
                "epoch, the %s optimizer's state\n", o->resume, (long long)loop->g0, (long long)(loop->g0 / loop->spe) + 1,
                (unsigned long long)o->seed, o->batch, loop->n, ct_optim_types[o->optim.kind]->name);
    loop->pred = ct_xmalloc(sizeof(int32_t) * o->batch);
    return ct_feed_open(&loop->f, o, loop->train, loop->n, loop->spe, loop->total, &loop->m, &loop->cl);
}

/* the recipe in effect: the optimizer and what is not its default */
static void print_recipe(const ct_loop *loop) {
    const ct_train_opts *o = &loop->o;
    static const char *const sched[] = {"constant", "step", "cosine", "triangle"};
    static const char *const tta[] = {"none", "flip", "flip-translate"};
    FILE *out = loop->out;
    fprintf(out, "recipe: %d epoch%s, %s lr %g", o->epochs, o->epochs == 1 ? "" : "s", loop->opt.type->name, o->optim.lr);
    if (o->optim.kind == CT_OPT_SGD || o->optim.kind == CT_OPT_NESTEROV) fprintf(out, " momentum %g", o->optim.momentum);
    if (o->optim.wd > 0) fprintf(out, " weight decay %g", o->optim.wd);
    fprintf(out, ", %s schedule", sched[o->schedule]);
    if (o->warmup) fprintf(out, " (warm-up %d steps)", o->warmup);
    if (o->label_smoothing > 0) fprintf(out, ", label smoothing %g", o->label_smoothing);
    if (o->lookahead > 0) fprintf(out, ", lookahead %g", o->lookahead);
    fprintf(out, ", test-time augmentation %s\n", tta[o->tta]);
    if (o->recipe_note) fprintf(out, "%s\n", o->recipe_note);
}

static void print_start(ct_loop *loop) {
    const ct_train_opts *o = &loop->o;
    if (!o->quiet) {
        fprintf(loop->out, "device %d:%d %s (%s), kernels: class %s (%s)\n", loop->cl.plat_index, loop->cl.dev_index,
                loop->cl.device_name, loop->cl.platform_name, ct_cl_class_name(loop->cl.dev_class), loop->cl.class_why);
        ct_model_summary(&loop->m, loop->out);
        fprintf(loop->out, "training on %d images, batch %lld, %ld steps per epoch, %s lr %g; start-up %.2f s (%d kernel files compiled, %d cached)\n",
                loop->n, (long long)loop->GB, loop->spe, loop->opt.type->name, o->optim.lr, loop->res->startup_s, loop->cl.cache_misses,
                loop->cl.cache_hits);
        print_recipe(loop);
    }
    if (!loop->dist) return;
    char mine[320], *all = loop->writer ? ct_xcalloc((size_t)loop->R, sizeof mine) : NULL;
    snprintf(mine, sizeof mine, "%.63s, device %d:%d %.200s", ct_world.host, loop->cl.plat_index, loop->cl.dev_index, loop->cl.device_name);
    ct_dist_gather_str(mine, all, (int)sizeof mine);
    if (!o->quiet) {
        fprintf(loop->out, "data-parallel: %d ranks x batch %d = global batch %lld; %.2f MB of gradients per step in %d all-reduce bucket%s\n",
                loop->R, o->batch, (long long)loop->GB, loop->gs.bytes / 1e6, loop->gs.n_buckets, loop->gs.n_buckets == 1 ? "" : "s");
        for (int r = 0; r < loop->R; r++) fprintf(loop->out, "  rank %d: %s\n", r, all + (size_t)r * sizeof mine);
    }
    free(all);
}

/* NaN guard: the optimizer did not apply this step (ct_optim_step). 0: the step
 * was good; 1: skipped (--on-nan skip); else the error that stops training. */
static int nan_check(ct_loop *loop, const ct_step_info *si) {
    ct_model *m = &loop->m;
    const ct_train_opts *o = &loop->o;
    if (!m->nonfinite && isfinite(si->loss)) return 0;
    m->step--;
    int layer = ct_model_first_nonfinite_layer(m);
    char where[96];
    if (layer >= 0) snprintf(where, sizeof where, "the gradient of layer %d (%s, .cfg line %d)", layer,
                             ct_layer_name(&m->layers[layer]), m->layers[layer].line);
    else snprintf(where, sizeof where, "the loss");
    if (o->on_nan_skip) {
        if (loop->writer) fprintf(stderr, "%scltrain: step %lld: %s is NaN or infinite; step skipped (--on-nan skip)\n",
                               loop->tty ? "\n" : "", (long long)si->g + 1, where);
        loop->res->skipped++;
        return 1;
    }
    return ct_fail(CT_ENAN, "step %lld (epoch %d): %s is NaN or infinite; training stopped before applying it%s%s; try a lower --lr (now %g)",
                   (long long)si->g + 1, si->epoch + 1, where, o->checkpoint ? ", the last checkpoint is untouched: " : "",
                   o->checkpoint ? o->checkpoint : "", o->optim.lr);
}

/* the steps g0..total-1; *g_end: the steps done */
static int run_steps(ct_loop *loop, int64_t *g_end) {
    ct_train_result *res = loop->res;
    int rc = 0;
    loop->t_iv = loop->iv_t0 = ct_now();
    loop->iv_ar = loop->gs;
    int64_t g;
    for (g = loop->g0; g < loop->total; g++) {
        ct_step_info si = {.g = g, .k = g - loop->g0, .epoch = (int)(g / loop->spe), .s = (long)(g % loop->spe)};
        if (ct_model_has_groups(&loop->m) && (g == loop->g0 || si.s == 0)) ct_model_groups_epoch(&loop->m, si.epoch);
        if ((rc = ct_train_step(loop, &si))) break;
        if ((rc = nan_check(loop, &si))) {
            if (rc == 1) { rc = 0; continue; }
            break;
        }
        loop->iv_loss += si.loss;
        loop->iv_n += si.Bg;
        loop->flops += si.Bg * ct_model_step_flops(&loop->m);
        loop->flops_n += si.Bg;
        loop->iv_wait += si.wait;
        loop->iv_correct += si.correct;
        res->last_loss = loop->iv_loss / loop->iv_n;
        res->last_acc = (double)loop->iv_correct / loop->iv_n;
        si.last = si.s == loop->spe - 1 || g == loop->total - 1;
        for (int h = 0; ct_train_hooks[h] && !rc; h++) rc = ct_train_hooks[h](loop, &si);
        if (rc) {
            if (si.stop && rc == CT_EINTR) g++; /* the step stopped after is done */
            break;
        }
    }
    *g_end = g;
    return rc;
}

/* the run's figures into res, and the closing lines */
static void summarise(ct_loop *loop, int64_t g, int rc) {
    ct_train_result *res = loop->res;
    const ct_feed *f = &loop->f;
    FILE *out = loop->out;
    res->steps = g;
    res->producers = f->mode == CT_FEED_PIPE ? f->producers : 0;
    if (f->mode == CT_FEED_PIPE && f->pipe.slots) {
        ct_pipeline_stats st;
        ct_pipeline_stats_get((ct_pipeline *)&f->pipe, &st);
        if (st.producer_rate > 0) res->producer_rate = st.producer_rate;
    }
    if (f->mode == CT_FEED_SYNC && res->total_s > 0) res->producer_rate = loop->images / (res->wait_s > 1e-9 ? res->wait_s : 1e-9);
    if (loop->dist) {
        res->buckets = loop->gs.n_buckets;
        if (loop->gs.steps) {
            res->allreduce_ms = 1e3 * loop->gs.ar_s / loop->gs.steps;
            res->hidden_frac = loop->gs.ar_s > 0 ? loop->gs.hidden_s / loop->gs.ar_s : 0;
            res->exposed_ms = 1e3 * loop->gs.exposed_s / loop->gs.steps;
            res->window_ms = 1e3 * loop->gs.window_s / loop->gs.steps;
        }
    }
    res->images_per_s = res->total_s > 0 ? loop->images / res->total_s : 0;
    if (loop->t_compute > 0) res->compute_rate = loop->images / loop->t_compute;
    double bound = res->compute_rate;
    if (f->mode != CT_FEED_RESIDENT && res->producer_rate > 0 && res->producer_rate < bound) bound = res->producer_rate;
    res->efficiency = bound > 0 ? res->images_per_s / bound : 0;
    if (loop->dist)
        CT_DEBUG(1, "rank %d: %.1f ms per step waiting for the other ranks at step ends, %.1f ms in gradient all-reduce", ct_world.rank,
                 1e3 * loop->sync_wait / (g - loop->g0 > 0 ? g - loop->g0 : 1), loop->gs.steps ? 1e3 * loop->gs.ar_s / loop->gs.steps : 0.0);
    if (loop->o.quiet > 1 || rc) return;
    /* the rates need a step past the first ones (kernel builds, the pipeline's fill, auto's two timed steps) */
    int measured = loop->images > 0 && res->total_s > 0 && (g - loop->g0 > 1 || loop->total - loop->g0 > 1);
    if (measured)
        fprintf(out, "trained %lld step%s, %.0f images/s (%.1f GFLOP/s achieved), data-wait %.1f%%\n", (long long)g,
                g == 1 ? "" : "s", res->images_per_s, res->images_per_s * loop->flops / loop->flops_n * 1e-9, 100 * res->wait_s / res->total_s);
    else
        fprintf(out, "trained %lld step%s; too few steps to measure images/s, data-wait and pipeline efficiency "
                "(the first steps build kernels and fill the pipeline)\n", (long long)g, g == 1 ? "" : "s");
    const char *mode = f->mode == CT_FEED_RESIDENT ? "resident" : f->mode == CT_FEED_SYNC ? "synchronous" : "pipelined";
    fprintf(out, "input: %s", mode);
    if (f->mode == CT_FEED_PIPE && f->producers < 0) fprintf(out, ", producers auto (not chosen: too few steps)");
    else if (f->mode == CT_FEED_PIPE)
        fprintf(out, ", %d producer%s%s", f->producers, f->producers == 1 ? "" : "s", f->auto_producers ? " (auto)" : "");
    if (!measured) {
        fputc('\n', out);
        return;
    }
    if (f->mode != CT_FEED_RESIDENT) {
        if (res->producer_rate > 0) fprintf(out, "; producer %.0f images/s", res->producer_rate);
        else fprintf(out, "; producer rate: too few steps to measure");
    }
    fprintf(out, ", compute %.0f images/s, achieved %.0f images/s", res->compute_rate, res->images_per_s);
    if (res->efficiency > 0) fprintf(out, ", pipeline efficiency %.2f\n", res->efficiency);
    else fprintf(out, "\n");
}

/* data-parallel: the ranks must hold the same parameters at the end */
static int check_ranks(ct_loop *loop) {
    ct_dist_average_running_stats(&loop->m);
    if (!ct_dist_params_agree(&loop->m))
        return ct_fail(CT_EDEVICE, "the ranks' parameters differ after training (the all-reduce gave ranks different sums)");
    if (loop->o.quiet < 2)
        fprintf(loop->out, "all-reduce: %.2f ms per step, %.0f%% of it hidden behind backward, %.2f ms exposed; parameters identical on all %d ranks\n",
                loop->res->allreduce_ms, 100 * loop->res->hidden_frac, loop->res->exposed_ms, loop->R);
    return 0;
}

static int check_opts(const ct_train_opts *o) {
    if (o->batch < 1 || o->batch > CT_BATCH_MAX) return ct_fail(CT_EINPUT, "--batch-size %d: expected 1..%d", o->batch, CT_BATCH_MAX);
    if (o->epochs < 1) return ct_fail(CT_EINPUT, "--epochs %d: expected at least 1", o->epochs);
    if (!(o->label_smoothing >= 0 && o->label_smoothing < 1))
        return ct_fail(CT_EINPUT, "--label-smoothing %g: expected a number in [0, 1), e.g. 0.1", o->label_smoothing);
    if (!(o->lookahead >= 0 && o->lookahead <= 1))
        return ct_fail(CT_EINPUT, "--lookahead %g: expected a rate in [0, 1] (0: off; airbench94's is 0.95)", o->lookahead);
    if (o->optim.kind < 0 || o->optim.kind >= CT_OPT_COUNT) return ct_fail(CT_EINPUT, "optimizer kind %d: unknown", o->optim.kind);
    return ct_train_check_files(o);
}

static void release(ct_loop *loop) {
    ct_tboard_close(&loop->tb);
    ct_ckpt_free(&loop->ck);
    ct_ckpt_free(&loop->buf);
    free(loop->kept);
    ct_feed_close(&loop->f);
    free(loop->pred);
    ct_grad_sync_free(&loop->gs);
    ct_lookahead_free(&loop->la);
    ct_optim_free(&loop->opt);
    ct_model_free(&loop->m);
    if (loop->cl.ctx) ct_cl_close(&loop->cl);
}

int ct_train(const ct_train_opts *opts, const ct_dataset *train, const ct_dataset *test, ct_train_result *res, FILE *out) {
    memset(res, 0, sizeof *res);
    int rc = check_opts(opts);
    if (rc) return rc;
    ct_loop *loop = ct_xcalloc(1, sizeof *loop);
    loop->o = *opts;
    loop->train = train;
    loop->test = test;
    loop->res = res;
    loop->out = out;
    loop->R = ct_world.size;
    loop->dist = loop->R > 1;
    loop->writer = ct_world.rank == 0;
    if (!loop->writer) loop->o.quiet = 2; /* rank 0 alone prints, logs and saves */
    double t_start = ct_now();
    rc = loop->o.resume ? open_resumed(loop) : loop->o.init ? open_init(loop) : load_model(loop, &loop->m, loop->o.model);
    if (!rc) rc = setup(loop);
    int handlers = !rc;
    if (handlers) ct_signals_install();
    if (!rc) rc = plan(loop);
    if (!rc) {
        res->startup_s = ct_now() - t_start;
        print_start(loop);
        loop->tty = isatty(fileno(out)) && !loop->o.quiet && !ct_world.mpi; /* mpirun hands ranks a pty even when its own output is a file */
        int64_t g = 0;
        rc = run_steps(loop, &g);
        summarise(loop, g, rc);
        if (!rc && loop->dist) rc = check_ranks(loop);
        if (!rc && loop->o.keep_params) {
            res->n_params = loop->m.n_params;
            res->params = ct_xmalloc(loop->m.n_params * sizeof(float));
            ct_model_get_params(&loop->m, res->params);
        }
    }
    if (handlers) ct_signals_restore();
    release(loop);
    free(loop);
    return rc;
}
