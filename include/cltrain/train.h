/* train.h: the training loop (deterministic batch order from the seed,
 * progress lines, evaluation with per-class accuracy and a confusion matrix).
 * Tested end to end by tests/cli.sh, tests/checkpoint.sh and tests/mpi.sh. */
#ifndef CLTRAIN_TRAIN_H
#define CLTRAIN_TRAIN_H
#include "cltrain/data.h"
#include "cltrain/model.h"
#include "cltrain/optim.h"
#include "cltrain/pipeline.h"

typedef struct ct_train_opts {
    const char *model;     /* --model, default mnist-cnn */
    int epochs;            /* --epochs (1) */
    int batch;             /* --batch-size (128) */
    ct_optim_hparams optim; /* --optimizer, --lr, --weight-decay, --momentum */
    uint64_t seed;         /* --seed (1) */
    int eval_every;        /* --eval-every N steps (0: at each epoch end only) */
    const char *device;    /* --device P:D */
    int gemm;              /* --gemm native|clblast|auto */
    int conv;              /* --conv im2col|winograd|winograd4|direct|auto (CT_CONV_*) */
    long max_steps;        /* --steps: stop after this many steps (0: no limit) */
    int limit_train;       /* --limit-train N: use the first N training samples (0: all) */
    int limit_test;        /* --limit-test N */
    int progress_every;    /* plain progress line every N steps (default 50) */
    int quiet;             /* 1 (--quiet): no progress or start-up lines, the results still printed; 2: nothing printed */
    float scale, shift;    /* input x = byte*scale + shift (1/255, 0) */
    int producers;         /* --producers N: 0 loads in the training loop; -1 = auto */
    int prefetch;          /* --prefetch K slots (0: 2 x producers, at least 4) */
    int resident;          /* --resident: the whole set on the device, batches gathered there */
    int io_latency_us;     /* --io-latency-us: simulated storage latency per sample */
    int keep_params;       /* copy the final parameters into ct_train_result.params (tests) */
    const char *checkpoint;/* --checkpoint FILE: saved every checkpoint_every steps, at each epoch end, on a signal */
    int checkpoint_every;
    int keep;              /* --keep K numbered copies FILE.<step> */
    const char *resume;    /* --resume FILE */
    const char *init;      /* --init FILE: the model and weights of a checkpoint, fresh optimizer and step */
    int freeze;            /* --freeze N: layers 0..N-1 do not train */
    int model_set;         /* --model was given (checked against the checkpoint) */
    int on_nan_skip;       /* --on-nan skip */
    int schedule, warmup;  /* --schedule constant|step|cosine|triangle, --warmup N steps */
    float label_smoothing; /* --label-smoothing E in [0, 1): training targets (1-E)*onehot + E/classes */
    const char *dataset, *data_dir; /* recorded in checkpoints for `cltrain eval`: the kind ("mnist", "cifar100", "images"...) and folder */
    double data_split;     /* images: --val-split (recorded in checkpoints) */
    int lr_set;            /* --lr was given (else a resumed run takes the checkpoint's) */
    int momentum_set, wd_set; /* --momentum, --weight-decay were given */
    unsigned given;        /* CT_GIVEN_*: options given that a checkpoint also fixes (--resume checks them) */
    const char *logdir;    /* --logdir: metrics.csv and a TensorBoard event file */
    const ct_source *train_src, *eval_src; /* samples through these instead of bytes*scale+shift (augmentation) */
    const ct_source *plain_src; /* the training split prepared as eval_src prepares the test split (no
                                   augmentation), for a whitening layer (cltrain/whiten.h); NULL with a
                                   train_src: not available (a whiten= model is refused) */
    int fit_model;         /* fit the model's input shape and classes to the data (ct_model_load_shaped) */
    char **class_names;    /* stored in checkpoints (image folders: `cltrain predict` needs them) */
    size_t bucket_bytes;   /* data-parallel: gradient all-reduce bucket size (0: 1 MiB) */
    int tta;               /* --tta none|flip|flip-translate: test-time augmentation at the end of training (each epoch's
                            * evaluation is plain, as airbench94's), and at `cltrain eval` */
    float lookahead;       /* --lookahead RATE: the weights' moving average (cltrain/lookahead.h); 0: off */
    int lookahead_set;     /* --lookahead was given (else a resumed run takes the checkpoint's) */
    int drop_last;         /* --drop-last: each epoch's last partial batch is left out */
    const char *recipe_note; /* printed at the start: the model's training defaults taken and those overridden */
} ct_train_opts;

enum { CT_GIVEN_SEED = 1, CT_GIVEN_BATCH = 2, CT_GIVEN_LIMIT_TRAIN = 4, CT_GIVEN_OPTIMIZER = 8, CT_GIVEN_DROP_LAST = 16 };
/* triangle: linear from 0.2 lr at step 0 to lr at the peak (--warmup N, else 23% of the steps), then
 * linear to 0.07 lr at the last step (airbench94's). */
enum { CT_SCHED_CONSTANT, CT_SCHED_STEP, CT_SCHED_COSINE, CT_SCHED_TRIANGLE };
#define CT_AUTO_MARGIN 1.5 /* --producers auto: producers enough for this times the measured compute rate */
#define CT_BATCH_MAX 4096  /* --batch-size and checkpoints: ct_model_read_results reads at most this many */
/* Test-time augmentation: none; flip, the logits of each image and its
 * mirror averaged; flip-translate, 1/4 each for those two and 1/8 each for
 * both of them shifted by one pixel up-left and down-right with reflection
 * (6 views, airbench's level 2). */
enum { CT_TTA_NONE, CT_TTA_FLIP, CT_TTA_FLIP_TRANSLATE };
/* Parse "none" | "flip" | "flip-translate" for --tta; CT_EINPUT with a one-line message otherwise. */
int ct_tta_parse(const char *s, int *tta);
/* How many forward passes a mode takes per image. */
int ct_tta_views(int tta);
/* One view of B HWC images (elem bytes per value): dst[b][y][x] =
 * src[b][r(y + dy)][r(x' + dx)] with x' = w-1-x when flip, else x, and r
 * reflecting at the borders without repeating the edge. dst != src. */
void ct_tta_view(void *dst, const void *src, int B, int h, int w, int c, size_t elem, int flip, int dy, int dx);

typedef struct ct_eval_result {
    int n, correct;
    double loss;
    int n_classes;
    int *confusion;        /* [true][pred], n_classes^2 */
} ct_eval_result;

typedef struct ct_train_result {
    long steps;
    double images_per_s;   /* over the whole run, excluding evaluation */
    double last_loss, last_acc;
    double test_acc;
    double startup_s;      /* device open and kernel builds */
    double wait_s, total_s;/* time the trainer waited for data, and all step time */
    double producer_rate;  /* images/s the input side can deliver (0 if not measured) */
    double compute_rate;   /* images/s the device trains when data is ready */
    double efficiency;     /* images_per_s / min(producer_rate, compute_rate) */
    int producers;         /* the producer count used (after auto) */
    double auto_compute_rate, auto_fill_rate;   /* auto: producers = ceil(CT_AUTO_MARGIN x compute / fill) */ /* --producers auto: the one-step estimates it chose from
                                               * (images/s of the device, of one producer); 0 otherwise */
    int signal;            /* SIGINT or SIGTERM that stopped training, else 0 */
    long skipped;          /* steps skipped by --on-nan skip */
    double allreduce_ms;   /* per step: time some bucket's all-reduce was in flight */
    double hidden_frac;    /* the part of it while backward was still running on the device */
    double exposed_ms;     /* per step: time from backward's end until the gradients were summed */
    double window_ms;      /* per step: backward time left once the first bucket's all-reduce started */
    int buckets;
    float *params;         /* with keep_params: n_params floats, caller frees */
    size_t n_params;
} ct_train_result;

void ct_train_defaults(ct_train_opts *o);
/* The files o names, before any data is loaded: --resume and a --model file
 * are regular files, rank 0 can create --checkpoint and --logdir files.
 * CT_EINPUT naming the option and path. (train/optcheck.c) */
int ct_train_check_files(const ct_train_opts *o);
/* A checkpoint save failed (ct_last_error says which file and why): the same
 * line plus where training stopped, as CT_EWRITE (exit 1). */
int ct_train_save_failed(int64_t next_step);
/* Learning rate at global step g of total: linear warm-up over o->warmup
 * steps, then constant, step (x0.1 at 1/2 and x0.01 at 3/4 of the rest) or cosine to 0. */
double ct_schedule_lr(const ct_train_opts *o, int64_t g, int64_t total);
/* Train opts->model on train, evaluate on test after each epoch. Prints progress to out. */
int ct_train(const ct_train_opts *o, const ct_dataset *train, const ct_dataset *test, ct_train_result *res, FILE *out);
/* Evaluate on ds with the model's current weights: bytes * scale + shift, or
 * through src when it is not NULL; tta averages the logits of the views of
 * each image, weighted (the loss is that of the average).
 * res->confusion is allocated. With tta and plain not NULL, plain gets the
 * result without augmentation too, from the unshifted unmirrored view's
 * logits (the first of every mode): one pass over the set gives both. */
int ct_evaluate(ct_model *m, const ct_dataset *ds, const ct_source *src, int limit, float scale, float shift, int tta,
                ct_eval_result *res, ct_eval_result *plain);
void ct_eval_print(const ct_eval_result *r, char **class_names, FILE *out, int confusion);
void ct_eval_free(ct_eval_result *r);
#endif
