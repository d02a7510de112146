/* train/train.c: the training loop. Batch order comes only from (seed,
 * epoch); each step uploads a batch, runs forward, loss, backward and the
 * optimizer, and ends with a checked finish when it reads the loss back.
 * Progress: a live line on a terminal, plain lines otherwise.
 * Tested by tests/test_train.c (learns a subset of Fashion-MNIST). */
#include "cltrain/train.h"
#include <math.h>
#include <string.h>
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
}

void ct_epoch_order(int *perm, int n, uint64_t seed, int epoch) {
    ct_rng r = ct_rng_make(seed, 0xE90C, (uint64_t)epoch);
    for (int i = 0; i < n; i++) perm[i] = i;
    for (int i = n - 1; i > 0; i--) {
        int j = (int)ct_rng_below(&r, (uint32_t)i + 1);
        int t = perm[i]; perm[i] = perm[j]; perm[j] = t;
    }
}

static void gather(const ct_dataset *ds, const int *idx, int B, uint8_t *img, int32_t *lab) {
    size_t sz = (size_t)ds->h * ds->w * ds->c;
    for (int i = 0; i < B; i++) {
        memcpy(img + (size_t)i * sz, ds->images + (size_t)idx[i] * sz, sz);
        lab[i] = ds->labels[idx[i]];
    }
}

int ct_evaluate(ct_model *m, const ct_dataset *ds, int limit, float scale, float shift, ct_eval_result *res) {
    memset(res, 0, sizeof *res);
    int n = limit > 0 && limit < ds->n ? limit : ds->n;
    res->n_classes = m->n_classes;
    res->confusion = ct_xcalloc((size_t)m->n_classes * m->n_classes, sizeof(int));
    size_t sz = (size_t)ds->h * ds->w * ds->c;
    uint8_t *img = ct_xmalloc(sz * m->batch);
    int32_t *lab = ct_xmalloc(sizeof(int32_t) * m->batch), *pred = ct_xmalloc(sizeof(int32_t) * m->batch);
    int *idx = ct_xmalloc(sizeof(int) * m->batch);
    for (int s = 0; s < n; s += m->batch) {
        int B = n - s < m->batch ? n - s : m->batch;
        for (int i = 0; i < B; i++) idx[i] = s + i;
        gather(ds, idx, B, img, lab);
        ct_model_set_batch(m, img, lab, B, scale, shift);
        ct_model_forward(m, B);
        ct_model_loss(m, B);
        res->loss += ct_model_read_results(m, B, pred);
        for (int i = 0; i < B; i++) {
            res->confusion[lab[i] * m->n_classes + pred[i]]++;
            res->correct += pred[i] == lab[i];
        }
    }
    res->n = n;
    free(img); free(lab); free(pred); free(idx);
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

int ct_train(const ct_train_opts *o, const ct_dataset *train, const ct_dataset *test, ct_train_result *res, FILE *out) {
    memset(res, 0, sizeof *res);
    if (o->batch < 1 || o->batch > 4096) return ct_fail(CT_EINPUT, "--batch-size %d: expected 1..4096", o->batch);
    if (o->epochs < 1) return ct_fail(CT_EINPUT, "--epochs %d: expected at least 1", o->epochs);
    double t_start = ct_now();
    ct_model m;
    int rc = ct_model_load(&m, o->model);
    if (rc) goto done_model;
    if ((rc = ct_model_check_input(&m, train->h, train->w, train->c, train->n_classes, "the training set"))) goto done_model;
    ct_cl cl;
    if ((rc = ct_cl_open(&cl, o->device))) goto done_model;
    if ((rc = ct_model_setup(&m, &cl, o->batch, o->gemm))) goto done;
    ct_model_init_weights(&m, o->seed);
    res->startup_s = ct_now() - t_start;
    int n = o->limit_train > 0 && o->limit_train < train->n ? o->limit_train : train->n;
    long steps_per_epoch = (n + o->batch - 1) / o->batch;
    if (!o->quiet) {
        fprintf(out, "device %d:%d %s (%s)\n", cl.plat_index, cl.dev_index, cl.device_name, cl.platform_name);
        ct_model_summary(&m, out);
        fprintf(out, "training on %d images, batch %d, %ld steps per epoch, %s lr %g; start-up %.2f s (%d kernel files compiled, %d cached)\n",
                n, o->batch, steps_per_epoch, o->optim.kind == CT_OPT_ADAM ? "adam" : "sgd", o->optim.lr, res->startup_s,
                cl.cache_misses, cl.cache_hits);
    }
    size_t sz = (size_t)train->h * train->w * train->c;
    uint8_t *img = ct_xmalloc(sz * o->batch);
    int32_t *lab = ct_xmalloc(sizeof(int32_t) * o->batch), *pred = ct_xmalloc(sizeof(int32_t) * o->batch);
    int *perm = ct_xmalloc(sizeof(int) * n);
    int tty = isatty(fileno(out)) && !o->quiet;
    double train_time = 0;
    long images = 0, step = 0;
    int stop = 0;
    for (int epoch = 0; epoch < o->epochs && !stop; epoch++) {
        ct_epoch_order(perm, n, o->seed, epoch);
        double iv_loss = 0, t_iv = ct_now();
        long iv_correct = 0, iv_n = 0;
        for (long s = 0; s < steps_per_epoch; s++) {
            int B = (int)(n - s * o->batch < o->batch ? n - s * o->batch : o->batch);
            double t0 = ct_now();
            gather(train, perm + s * o->batch, B, img, lab);
            ct_model_set_batch(&m, img, lab, B, o->scale, o->shift);
            ct_model_zero_grad(&m);
            ct_model_forward(&m, B);
            ct_model_loss(&m, B);
            ct_model_backward(&m, B);
            ct_model_step(&m, &o->optim);
            double loss = ct_model_read_results(&m, B, pred);
            train_time += ct_now() - t0;
            step++;
            images += B;
            if (!isfinite(loss)) {
                rc = ct_fail(CT_ENAN, "step %ld (epoch %d): the loss is %s; training diverged, try a lower --lr (now %g)",
                             step, epoch + 1, isnan(loss) ? "NaN" : "infinite", o->optim.lr);
                stop = 1;
                break;
            }
            iv_loss += loss;
            iv_n += B;
            for (int i = 0; i < B; i++) iv_correct += pred[i] == lab[i];
            res->last_loss = iv_loss / iv_n;
            res->last_acc = (double)iv_correct / iv_n;
            int last = s == steps_per_epoch - 1 || (o->max_steps && step >= o->max_steps);
            if (!o->quiet && (tty || step % o->progress_every == 0 || last)) {
                double ips = iv_n / (ct_now() - t_iv);
                if (tty) {
                    int w = 24, fill = (int)(w * (s + 1) / steps_per_epoch);
                    fprintf(out, "\repoch %d/%d [%.*s%*s] %ld/%ld loss %.4f acc %5.1f%% %6.0f img/s ", epoch + 1, o->epochs,
                            fill, "========================", w - fill, "", s + 1, steps_per_epoch, res->last_loss,
                            100 * res->last_acc, ips);
                    if (last) fputc('\n', out);
                    fflush(out);
                } else {
                    fprintf(out, "epoch %d step %ld/%ld loss %.4f acc %.1f%% %.0f img/s\n", epoch + 1, s + 1, steps_per_epoch,
                            res->last_loss, 100 * res->last_acc, ips);
                }
                if (!tty || last) { iv_loss = 0; iv_correct = 0; iv_n = 0; t_iv = ct_now(); }
            }
            if (o->eval_every > 0 && step % o->eval_every == 0 && test && !last) {
                ct_eval_result ev;
                ct_evaluate(&m, test, o->limit_test, o->scale, o->shift, &ev);
                if (!o->quiet) fprintf(out, "%sstep %ld: test accuracy %.2f%%\n", tty ? "\n" : "", step, 100.0 * ev.correct / ev.n);
                ct_eval_free(&ev);
            }
            if (o->max_steps && step >= o->max_steps) { stop = 1; break; }
        }
        if (rc) break;
        if (test) {
            ct_eval_result ev;
            ct_evaluate(&m, test, o->limit_test, o->scale, o->shift, &ev);
            res->test_acc = (double)ev.correct / (ev.n ? ev.n : 1);
            if (!o->quiet) {
                fprintf(out, "epoch %d: ", epoch + 1);
                ct_eval_print(&ev, test->class_names, out, 0);
            }
            ct_eval_free(&ev);
        }
    }
    res->steps = step;
    res->images_per_s = train_time > 0 ? images / train_time : 0;
    if (!o->quiet && !rc)
        fprintf(out, "trained %ld steps, %.0f images/s (%.1f GFLOP/s achieved)\n", step, res->images_per_s,
                res->images_per_s * 3 * m.flops_fwd * 1e-9);
    free(img); free(lab); free(pred); free(perm);
done:
    ct_model_free(&m);
    ct_cl_close(&cl);
    return rc;
done_model:
    ct_model_free(&m);
    return rc;
}
