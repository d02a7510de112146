/* train/loop.h: the parts of the training loop, private to src/train.
 *   feed.c   one next_batch over the three ways a batch reaches the device
 *            (synchronous, pipelined producers, resident on the device)
 *   step.c   one training step: forward, loss, backward (gradient buckets
 *            through the backward callback), optimizer, read-back
 *   hooks.c  what runs after a step: TensorBoard/CSV, progress, evaluation,
 *            checkpoints, the stop a signal asked for
 *   train.c  ct_train: set-up (or resume), the loop over steps, the summary
 * and what these call on: evaluate.c (evaluation), schedule.c (the learning
 * rate), save.c (saving a checkpoint) and signals.c (SIGINT, SIGTERM).
 * Tested end to end by tests/cli.sh, tests/checkpoint.sh, tests/mpi.sh and the
 * bit-identical comparisons of tests/checkpoint.sh. */
#ifndef CLTRAIN_TRAIN_LOOP_H
#define CLTRAIN_TRAIN_LOOP_H
#include "cltrain/checkpoint.h"
#include "cltrain/dist.h"
#include "cltrain/lookahead.h"
#include "cltrain/optim.h"
#include "cltrain/tboard.h"
#include "cltrain/train.h"

/* The three ways a batch reaches the device. */
enum { CT_FEED_SYNC, CT_FEED_PIPE, CT_FEED_RESIDENT };

typedef struct ct_ds_ctx { const ct_dataset *ds; float scale, shift; } ct_ds_ctx;

typedef struct ct_feed {
    int mode;
    int producers;             /* pipelined: producer threads (-1: auto, decided after two timed steps) */
    int auto_producers;        /* --producers auto */
    ct_source src;
    ct_ds_ctx ctx;
    ct_pipeline pipe;
    float *host_img;           /* sync: one batch */
    int32_t *host_lab;         /* every mode: this step's labels on the host */
    int *perm, perm_epoch;     /* sync and resident */
    int64_t first;             /* resident: this rank's first sample of the step in the epoch's order */
    cl_mem dev_data, dev_lab, dev_idx; /* resident */
    ct_slot *cur, *next;       /* pipelined: the slot being computed, the one being uploaded */
    cl_event computed[2];
    int j;                     /* pipelined: the input buffer pair of this step */
    /* fixed at open */
    ct_model *m;
    ct_cl *cl;
    const ct_dataset *train;
    int n, batch, prefetch, spe, drop_last;
    uint64_t seed;
    float scale, shift;
    int64_t total;
} ct_feed;

/* Choose the mode from the options and allocate its buffers (resident: the
 * whole set on the device). n samples per epoch, total global steps. */
int ct_feed_open(ct_feed *f, const ct_train_opts *o, const ct_dataset *train, int n, long spe, int64_t total, ct_model *m,
                 ct_cl *cl);
/* Step g (k-th of this run) into the model's input: *B samples of this rank,
 * *wait the seconds spent waiting for them. res gets the rates timed at k == 1. */
int ct_feed_next_batch(ct_feed *f, int64_t g, int64_t k, ct_train_result *res, int *B, double *wait);
/* After step g is enqueued: pipelined, take batch g+1 and start its upload
 * into the other buffer while the device computes (*wait grows by the time
 * the device sat idle). */
int ct_feed_prefetch(ct_feed *f, int64_t g, double *wait);
/* After the read-back: this step's B labels on the host (the slot is released). */
const int32_t *ct_feed_done(ct_feed *f, int B);
void ct_feed_close(ct_feed *f);

/* One step's figures, filled by ct_train_step and read by the hooks. */
typedef struct ct_step_info {
    int64_t g, k;              /* global step, and steps into this run */
    int epoch;
    long s;                    /* step within the epoch */
    int B, Bg, correct;        /* this rank's samples, the global batch's, correct predictions (global) */
    double loss, wait, t0, tc0, lr;
    int last;                  /* last step of the epoch or of the run */
    int stop;                  /* a signal asked to stop (any rank) */
} ct_step_info;

typedef struct ct_loop {
    ct_train_opts o;           /* the options, after a checkpoint's overrides */
    size_t frozen;             /* --freeze: parameters [0, frozen) do not train */
    double flops, flops_n;     /* FLOPs of the steps taken (ct_model_step_flops), and their samples */
    const ct_dataset *train, *test;
    ct_train_result *res;
    FILE *out;
    ct_model m;
    ct_optim_state opt;
    ct_lookahead la;           /* --lookahead */
    ct_cl cl;
    ct_feed f;
    ct_grad_sync gs;
    ct_tboard tb;
    ct_ckpt ck, buf;           /* the checkpoint resumed from; host buffers for saving */
    int64_t *kept;             /* --keep: steps of the numbered copies */
    int n_kept;
    int R, dist, writer, tty;
    int n;                     /* samples per epoch */
    long spe;                  /* steps per epoch */
    int64_t GB, total, g0;     /* global batch, last step + 1, first step */
    int32_t *pred;
    /* the interval since the last progress line */
    double iv_loss, iv_wait, t_iv, iv_t0;
    long iv_correct, iv_n;
    ct_grad_sync iv_ar;        /* all-reduce totals at the interval's start */
    double t_compute;          /* step time minus data wait */
    double sync_wait;          /* data-parallel: time waiting for the other ranks at step ends */
    long images;
} ct_loop;

/* Step g: zero the gradients, forward, loss, backward, all-reduce, the
 * optimizer at the scheduled rate, the next batch's prefetch, read-back. */
int ct_train_step(ct_loop *loop, ct_step_info *si);

/* A fresh run's whitening layer from the training images (train/whiten.c); 0 when the model has none. */
int ct_train_whiten(ct_loop *loop);

/* After a step: each hook in turn; a non-zero return ends training with it. */
typedef int (*ct_train_hook)(ct_loop *loop, const ct_step_info *si);
extern const ct_train_hook ct_train_hooks[];
/* SIGINT/SIGTERM: the step finishes, the checkpoint is saved, training stops. */
void ct_signals_install(void);
void ct_signals_restore(void);
int ct_signal_pending(void);
/* The signal that asked to stop (SIGINT or SIGTERM), or 0. */
int ct_signal_caught(void);
/* --resume: the data set against the checkpoint's, and the options given
 * against what the checkpoint fixes (seed, batch size, samples per epoch,
 * optimizer); CT_EINPUT with one line naming both on a difference. */
int ct_resume_check(const ct_train_opts *o, const ct_ckpt *ck, const ct_dataset *train);
/* Save the state of step `next` to --checkpoint (and a numbered copy with --keep). */
int ct_train_save(ct_loop *loop, int64_t next);
#endif
