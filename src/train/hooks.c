/* train/hooks.c: what runs after each training step, in this order:
 * the lookahead (cltrain/lookahead.h), TensorBoard/CSV scalars, the progress line, evaluation, the checkpoint,
 * and the stop a signal asked for. Each hook reads the step's figures
 * (ct_step_info) and the run (ct_loop). Tested by tests/cli.sh (progress,
 * evaluation), tests/test_tboard.c and tests/checkpoint.sh (saves, signals). */
#include "loop.h"
#include <signal.h>
#include <string.h>
#include <unistd.h>

/* " all-reduce X ms/step (Y% hidden)" over the interval since *since, or "" alone */
static const char *ar_note(const ct_grad_sync *g, const ct_grad_sync *since, char *buf, size_t size) {
    long steps = g->steps - since->steps;
    double ar = g->ar_s - since->ar_s, hid = g->hidden_s - since->hidden_s;
    if (steps <= 0) return "";
    snprintf(buf, size, " all-reduce %.1f ms/step (%.0f%% hidden)", 1e3 * ar / steps, ar > 0 ? 100 * hid / ar : 0);
    return buf;
}

/* the lookahead: first, so that evaluation and checkpoints see its weights */
static int hook_lookahead(ct_loop *loop, const ct_step_info *si) {
    ct_lookahead_after_step(&loop->la, si->g, loop->total, si->epoch, si->last);
    return 0;
}

static int hook_tboard(ct_loop *loop, const ct_step_info *si) {
    if (!loop->tb.events || !((si->g + 1) % loop->o.progress_every == 0 || si->last)) return 0;
    ct_tboard *tb = &loop->tb;
    int64_t step = si->g + 1;
    double el = ct_now() - loop->iv_t0;
    ct_tboard_scalar(tb, "train/loss", step, loop->res->last_loss);
    ct_tboard_scalar(tb, "train/accuracy", step, loop->res->last_acc);
    ct_tboard_scalar(tb, "lr", step, si->lr);
    ct_tboard_scalar(tb, "images_per_s", step, loop->iv_n / (ct_now() - loop->t_iv));
    ct_tboard_scalar(tb, "data_wait", step, el > 0 ? loop->iv_wait / el : 0);
    ct_tboard_flush(tb);
    return 0;
}

static int hook_progress(ct_loop *loop, const ct_step_info *si) {
    const ct_train_opts *o = &loop->o;
    if (o->quiet || !(loop->tty || (si->g + 1) % o->progress_every == 0 || si->last)) return 0;
    const ct_train_result *res = loop->res;
    FILE *out = loop->out;
    char arbuf[64];
    double el = ct_now() - loop->iv_t0, ips = loop->iv_n / (ct_now() - loop->t_iv);
    const char *ar = ar_note(&loop->gs, &loop->iv_ar, arbuf, sizeof arbuf);
    if (loop->tty) {
        int w = 24, fill = (int)(w * (si->s + 1) / loop->spe);
        fprintf(out, "\repoch %d/%d [%.*s%*s] %ld/%ld loss %.4f acc %5.1f%% %6.0f img/s data-wait %4.1f%%%s ", si->epoch + 1,
                o->epochs, fill, "========================", w - fill, "", si->s + 1, loop->spe, res->last_loss,
                100 * res->last_acc, ips, 100 * loop->iv_wait / el, ar);
        if (si->last) fputc('\n', out);
        fflush(out);
    } else {
        fprintf(out, "epoch %d step %ld/%ld loss %.4f acc %.1f%% %.0f img/s data-wait %.1f%%%s\n", si->epoch + 1, si->s + 1,
                loop->spe, res->last_loss, 100 * res->last_acc, ips, 100 * loop->iv_wait / el, ar);
    }
    if (!loop->tty || si->last) {
        loop->iv_loss = 0;
        loop->iv_correct = 0;
        loop->iv_n = 0;
        loop->iv_wait = 0;
        loop->t_iv = loop->iv_t0 = ct_now();
        loop->iv_ar = loop->gs;
    }
    return 0;
}

/* time spent in a hook does not count in the interval's images/s and data-wait */
static void pause_interval(ct_loop *loop, double since) {
    loop->t_iv += ct_now() - since;
    loop->iv_t0 += ct_now() - since;
}

static int hook_eval(ct_loop *loop, const ct_step_info *si) {
    const ct_train_opts *o = &loop->o;
    int end = si->s == loop->spe - 1 || si->g == loop->total - 1;
    if (!loop->test || !((o->eval_every > 0 && (si->g + 1) % o->eval_every == 0 && !si->last) || (si->last && end))) return 0;
    double te = ct_now();
    ct_dist_average_running_stats(&loop->m);
    ct_eval_result ev, ev_tta;
    /* plain, as airbench94 evaluates each epoch; --tta's views (2 or 6 forward passes per image) at the end only,
     * in one pass that gives the plain result too (from the first view, the images as they are) */
    int with_tta = o->tta != CT_TTA_NONE && si->g == loop->total - 1;
    int rc = with_tta ? ct_evaluate(&loop->m, loop->test, o->eval_src, o->limit_test, o->scale, o->shift, o->tta, &ev_tta, &ev)
                      : ct_evaluate(&loop->m, loop->test, o->eval_src, o->limit_test, o->scale, o->shift, CT_TTA_NONE, &ev, NULL);
    if (rc) return rc;
    loop->res->test_acc = (double)ev.correct / (ev.n ? ev.n : 1);
    if (loop->tb.events) {
        ct_tboard_scalar(&loop->tb, "test/accuracy", si->g + 1, loop->res->test_acc);
        ct_tboard_scalar(&loop->tb, "test/loss", si->g + 1, ev.loss / (ev.n ? ev.n : 1));
        ct_tboard_flush(&loop->tb);
    }
    if (o->quiet < 2) { /* --quiet keeps the results */
        if (si->last) {
            fprintf(loop->out, "epoch %d: ", si->epoch + 1);
            ct_eval_print(&ev, loop->test->class_names, loop->out, 0);
        } else {
            fprintf(loop->out, "step %lld: test accuracy %.2f%%\n", (long long)si->g + 1, 100 * loop->res->test_acc);
        }
    }
    ct_eval_free(&ev);
    if (with_tta) {
        loop->res->test_acc = (double)ev_tta.correct / (ev_tta.n ? ev_tta.n : 1);
        if (loop->tb.events) {
            ct_tboard_scalar(&loop->tb, "test/accuracy_tta", si->g + 1, loop->res->test_acc);
            ct_tboard_flush(&loop->tb);
        }
        if (o->quiet < 2) {
            fprintf(loop->out, "epoch %d with test-time augmentation %s: ", si->epoch + 1,
                    o->tta == CT_TTA_FLIP ? "flip" : "flip-translate");
            ct_eval_print(&ev_tta, loop->test->class_names, loop->out, 0);
        }
        ct_eval_free(&ev_tta);
    }
    pause_interval(loop, te);
    return 0;
}

static int hook_checkpoint(ct_loop *loop, const ct_step_info *si) {
    const ct_train_opts *o = &loop->o;
    if (!o->checkpoint || !(si->stop || si->s == loop->spe - 1 || si->g == loop->total - 1 ||
                            (o->checkpoint_every > 0 && (si->g + 1) % o->checkpoint_every == 0)))
        return 0;
    double tk = ct_now();
    ct_dist_average_running_stats(&loop->m);
    int rc = loop->writer ? ct_train_save(loop, si->g + 1) : 0;
    if (rc) return rc;
    ct_dist_note_checkpoint(o->checkpoint, si->g + 1);
    pause_interval(loop, tk);
    return 0;
}

static int hook_signal(ct_loop *loop, const ct_step_info *si) {
    if (!si->stop) return 0;
    int sig = ct_signal_caught();
    if (!sig) sig = SIGTERM; /* another rank got it */
    loop->res->signal = sig;
    return ct_fail(CT_EINTR, "stopped by %s after step %lld%s%s", sig == SIGINT ? "SIGINT" : "SIGTERM", (long long)si->g + 1,
                   loop->o.checkpoint ? "; saved " : "", loop->o.checkpoint ? loop->o.checkpoint : "");
}

const ct_train_hook ct_train_hooks[] = {hook_lookahead, hook_tboard, hook_progress, hook_eval, hook_checkpoint, hook_signal, NULL};
