/* cli/opts.c: the options every training command, eval, bench and tune
 * share (getopt_long, GNU conventions), their usage text, and what a
 * training command does with the result (exit status, model check).
 * Each command gets its own cli_opts: training options, data-set options
 * and the few a single command reads; nothing here is global.
 * Tested by tests/cli.sh (bad usage of every kind: exit 2, one line). */
#include "cli.h"
#include "cltrain/dist.h"
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <stddef.h>
#include <string.h>

void cli_usage(FILE *f) {
    fprintf(f,
            "Usage: cltrain COMMAND [OPTIONS]\n"
            "Train convolutional networks with hand-written OpenCL kernels.\n\n"
            "Commands:\n"
            "  devices                 list OpenCL platforms and devices\n"
            "  mnist                   train on MNIST digits (datasets/mnist, downloaded if missing)\n"
            "  fashion-mnist           train on Fashion-MNIST (Debian's dataset-fashion-mnist; works offline)\n"
            "  cifar10, cifar100       CIFAR binary batches (datasets/cifar10, downloaded if missing), augmented\n"
            "  images DIR              train on an image folder (DIR/CLASS/*.png|jpg|...) or on shards from `pack`\n"
            "  images FILE.tfrecord... train on TFRecord files of tf.train.Example records (plain or gzip)\n"
            "  arrays FILE.npz         train on NumPy arrays: x_train, y_train, x_test, y_test (np.savez, Keras)\n"
            "  arrays X.npy Y.npy [XTEST.npy YTEST.npy]  the same from .npy files (mapped: may exceed memory)\n"
            "  pack DIR OUT            decode and resize DIR's images once into record shards in OUT\n"
            "  pack FILE.npz OUT       (or X.npy Y.npy [XT.npy YT.npy] OUT) arrays as record shards\n"
            "  eval CHECKPOINT         test accuracy, per-class accuracy, confusion matrix\n"
            "  predict CHECKPOINT IMG...  the top classes of each image, with probabilities\n"
            "  export CHECKPOINT OUT.onnx  the trained network as an ONNX model (raw 0..255 pixels in)\n"
            "  bench kernels|train|pipeline|dist  measured figures, as tables (dist under mpirun)\n"
            "  bench images|probe      image decoding against shards per thread; one start-up (what `bench train` times)\n"
            "  tune                    search GEMM kernels and parameters for --model's shapes on this device,\n"
            "                          within --budget SECONDS [60 on a CPU]; training and benches use the result\n\n"
            "Training options:\n"
            "  --model NAME|FILE.cfg   built-in model (mnist-cnn, mlp) or a .cfg file [mnist-cnn]\n"
            "  --epochs N              passes over the training set [1]\n"
            "  --batch-size N          images per step [128]\n"
            "  --lr X                  learning rate [3e-4 for adam and adamw, 0.01 for sgd and nesterov]\n"
            "  --optimizer NAME        adam: Adam, --weight-decay as lr*wd*p outside the moments [default]\n"
            "                          adamw: AdamW, the decay decoupled from --lr too: wd per step\n"
            "                          sgd: SGD with momentum; nesterov: SGD with Nesterov momentum\n"
            "  --momentum X            SGD and Nesterov momentum [0.9]\n"
            "  --weight-decay X        weight decay on weights (not biases) [0]\n"
            "  --seed N                weights and data order depend only on it [1]\n"
            "  --eval-every N          also evaluate every N steps [0: each epoch end]\n"
            "  --data DIR              where the data set is\n"
            "  --device P:D            OpenCL platform:device (see `cltrain devices`; or CLTRAIN_DEVICE)\n"
            "  --gemm native|clblast|auto  matrix-product path [native]\n"
            "  --conv im2col|winograd|winograd4|direct|auto  convolutions as im2col + GEMM; 3x3 stride-1\n"
            "                          ones as Winograd F(2x2,3x3) or F(4x4,3x3); direct: those with outputs\n"
            "                          in 16s by kernels without im2col; auto: on a CPU F(4x4,3x3) where a\n"
            "                          3x3 stride-1 layer has 8 or more input channels, direct for the rest\n"
            "                          where it fits; im2col elsewhere [auto]\n"
            "  --steps N               stop after N steps\n"
            "  --producers N|auto      input threads; 0 loads inside the training loop [auto]\n"
            "  --prefetch K            batch slots in flight [2 x producers, at least 4]\n"
            "  --resident              keep the whole data set on the device, gather batches there\n"
            "  --io-latency-us N       simulated storage latency per sample (a sleep; for benchmarks)\n"
            "  --limit-train N, --limit-test N  use only the first N images\n"
            "  --quiet                 no progress lines;  --progress-every N  a line every N steps [50]\n"
            "  --checkpoint FILE       save training state (atomically) at each epoch end and on Ctrl-C\n"
            "  --checkpoint-every N    also every N steps;  --keep K  keep K numbered copies FILE.<step>\n"
            "  --resume FILE           continue exactly where a checkpoint stopped\n"
            "  --on-nan stop|skip      a NaN/Inf gradient stops training (exit 1) or skips the step [stop]\n"
            "  --schedule constant|step|cosine, --warmup N   learning-rate schedule [constant]\n"
            "  --label-smoothing E     train on targets (1-E)*onehot + E/classes, 0 <= E < 1 [0]\n"
            "  --tta none|flip         evaluation: average the logits of each image and its mirror [none]\n"
            "  --augment none|shift|basic|full  shift: padded crop (translation), no flip; basic: crop + flip;\n"
            "                          full: + brightness/contrast [cifar: full, always standardised; images:\n"
            "                          shift (a flip can change a digit's class); basic/full: a random-resized crop above 32x32]\n"
            "  --cutout N              after augmenting, zero an NxN square at a random centre [0: off]\n"
            "  --labels fine|coarse    (cifar100) which labels [fine]\n"
            "  --logdir DIR            write DIR/metrics.csv and a TensorBoard event file\n"
            "  --size S, --channels 1|3  (images, pack) decode and resize to SxS, grey or RGB [64, 3]\n"
            "  --val-split F           (images, pack) share of each class held out, without train/ test/ [0.1]\n"
            "  --strict                (images, pack) an unreadable image is an error, not skipped\n"
            "  --x KEY[,TESTKEY], --y KEY[,TESTKEY]  (arrays) the .npz's image and label arrays\n"
            "                          [x_train,x_test and y_train,y_test; without test arrays --val-split]\n"
            "  --layout NHWC|NCHW|NHW  (arrays) image layout [NHW for 3 dimensions, NHWC for 4]\n"
            "  --top K                 (predict) classes shown per image [5]\n"
            "  --train GLOB, --test GLOB  (images, pack) TFRecord files of the two splits (else --val-split)\n"
            "  --tfrecord-image KEY    (images, pack) bytes feature holding the image [image/encoded]\n"
            "  --tfrecord-label KEY    (images, pack) int64 feature holding the label [image/class/label]\n"
            "  --tfrecord-shape H,W,C  (images, pack) the image feature is raw HWC pixels of this shape\n"
            "  --confusion-png FILE    (eval) write the confusion matrix as an image\n"
            "  --bucket-mb X           (mpirun) gradient all-reduce bucket size [1]\n"
            "  --comm-timeout S        (mpirun) a rank that has not answered for S seconds while training\n"
            "                          ends the job, naming it (a cut link hangs TCP for minutes) [120; 0: off]\n"
            "  -h, --help              this help;  -V, --version  version\n\n"
            "Data-parallel: `mpirun -np N cltrain ...` runs N ranks, one device each; --batch-size is per rank.\n"
            "Environment: CLTRAIN_DEVICE, CLTRAIN_DEBUG=1|2, CLTRAIN_SYNC=1, CLTRAIN_KERNEL_DIR,\n"
            "CLTRAIN_CACHE_DIR, CLTRAIN_GEMM=TM,NV,KCHUNK or local,TSM,TSN,TSK,WPTM,WPTN,VW,KCHUNK (see README).\n");
}

int cli_fail(int code) {
    if (ct_world.size > 1 && ct_world.rank > 0) fprintf(stderr, "cltrain: rank %d: %s\n", ct_world.rank, ct_last_error());
    else fprintf(stderr, "cltrain: %s\n", ct_last_error());
    return ct_exit_code(code);
}

int cli_parse_num(const char *opt, const char *s, double lo, double hi, double *out) {
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    /* ERANGE on underflow (1e-320: a denormal or 0) still gives a number; only overflow is refused */
    if (end == s || *end || (errno && (errno != ERANGE || isinf(v))) || !(v >= lo && v <= hi))
        return ct_fail(CT_EINPUT, "--%s %s: expected a number in %g..%g", opt, s, lo, hi);
    *out = v;
    return 0;
}

int cli_parse_int(const char *opt, const char *s, long lo, long hi, long *out) {
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (end == s || *end || errno || v < lo || v > hi)
        return ct_fail(CT_EINPUT, "--%s %s: expected a whole number in %ld..%ld", opt, s, lo, hi);
    *out = v;
    return 0;
}

enum { O_MODEL = 256, O_EPOCHS, O_BATCH, O_LR, O_OPT, O_MOM, O_WD, O_SEED, O_EVAL, O_DATA, O_DEVICE, O_GEMM, O_STEPS,
       O_LTRAIN, O_LTEST, O_QUIET, O_PROD, O_PREFETCH, O_RESIDENT, O_IOLAT, O_CKPT, O_CKPT_EVERY, O_KEEP, O_RESUME,
       O_ONNAN, O_SCHED, O_WARMUP, O_CONFPNG, O_LOGDIR, O_AUGMENT, O_LABELS, O_PROGRESS, O_BUCKET, O_SIZE, O_CHANNELS, O_VALSPLIT, O_STRICT, O_TOP,
       O_SMOOTH, O_TTA, O_CUTOUT, O_COMMTO, O_CONV, O_XKEY, O_YKEY, O_LAYOUT };

static const struct option long_opts[] = {
    {"model", required_argument, 0, O_MODEL}, {"epochs", required_argument, 0, O_EPOCHS},
    {"batch-size", required_argument, 0, O_BATCH}, {"lr", required_argument, 0, O_LR},
    {"optimizer", required_argument, 0, O_OPT}, {"momentum", required_argument, 0, O_MOM},
    {"weight-decay", required_argument, 0, O_WD}, {"seed", required_argument, 0, O_SEED},
    {"eval-every", required_argument, 0, O_EVAL}, {"data", required_argument, 0, O_DATA},
    {"device", required_argument, 0, O_DEVICE}, {"gemm", required_argument, 0, O_GEMM},
    {"steps", required_argument, 0, O_STEPS}, {"limit-train", required_argument, 0, O_LTRAIN},
    {"limit-test", required_argument, 0, O_LTEST}, {"quiet", no_argument, 0, O_QUIET},
    {"producers", required_argument, 0, O_PROD}, {"prefetch", required_argument, 0, O_PREFETCH},
    {"resident", no_argument, 0, O_RESIDENT}, {"io-latency-us", required_argument, 0, O_IOLAT},
    {"checkpoint", required_argument, 0, O_CKPT}, {"checkpoint-every", required_argument, 0, O_CKPT_EVERY},
    {"keep", required_argument, 0, O_KEEP}, {"resume", required_argument, 0, O_RESUME},
    {"on-nan", required_argument, 0, O_ONNAN}, {"schedule", required_argument, 0, O_SCHED},
    {"warmup", required_argument, 0, O_WARMUP}, {"confusion-png", required_argument, 0, O_CONFPNG},
    {"logdir", required_argument, 0, O_LOGDIR}, {"augment", required_argument, 0, O_AUGMENT},
    {"labels", required_argument, 0, O_LABELS}, {"progress-every", required_argument, 0, O_PROGRESS},
    {"bucket-mb", required_argument, 0, O_BUCKET}, {"size", required_argument, 0, O_SIZE},
    {"channels", required_argument, 0, O_CHANNELS}, {"val-split", required_argument, 0, O_VALSPLIT},
    {"strict", no_argument, 0, O_STRICT}, {"top", required_argument, 0, O_TOP},
    {"label-smoothing", required_argument, 0, O_SMOOTH}, {"tta", required_argument, 0, O_TTA},
    {"cutout", required_argument, 0, O_CUTOUT}, {"comm-timeout", required_argument, 0, O_COMMTO},
    {"conv", required_argument, 0, O_CONV}, {"x", required_argument, 0, O_XKEY},
    {"y", required_argument, 0, O_YKEY}, {"layout", required_argument, 0, O_LAYOUT},
    {"help", no_argument, 0, 'h'}, {0, 0, 0, 0}};

/* options that are a whole number in lo..hi stored in an int of ct_train_opts */
static const struct { int id; const char *name; long lo, hi; size_t off; } int_opts[] = {
    {O_EPOCHS, "epochs", 1, 100000, offsetof(ct_train_opts, epochs)},
    {O_BATCH, "batch-size", 1, 4096, offsetof(ct_train_opts, batch)},
    {O_EVAL, "eval-every", 0, INT_MAX, offsetof(ct_train_opts, eval_every)},
    {O_LTRAIN, "limit-train", 1, 1L << 30, offsetof(ct_train_opts, limit_train)},
    {O_LTEST, "limit-test", 1, 1L << 30, offsetof(ct_train_opts, limit_test)},
    {O_PREFETCH, "prefetch", 2, 4096, offsetof(ct_train_opts, prefetch)},
    {O_CKPT_EVERY, "checkpoint-every", 1, INT_MAX, offsetof(ct_train_opts, checkpoint_every)},
    {O_KEEP, "keep", 0, 1000, offsetof(ct_train_opts, keep)},
    {O_WARMUP, "warmup", 0, 1L << 30, offsetof(ct_train_opts, warmup)},
    {O_PROGRESS, "progress-every", 1, 1L << 30, offsetof(ct_train_opts, progress_every)},
    {O_IOLAT, "io-latency-us", 0, 10000000, offsetof(ct_train_opts, io_latency_us)},
};

/* --opt VALUE as one of the names in choices (NULL-terminated), or CT_EINPUT saying what was expected */
typedef struct { const char *name; int value; } choice;
static int pick(const char *opt, const char *arg, const choice *ch, const char *expected, int *out) {
    for (; ch->name; ch++)
        if (!strcmp(arg, ch->name)) {
            *out = ch->value;
            return 0;
        }
    return ct_fail(CT_EINPUT, "--%s %s: expected %s", opt, arg, expected);
}

/* the options that set ct_train_opts (besides int_opts); 1 when c is not one of them */
static int train_opt(int c, const char *arg, ct_train_opts *o) {
    static const choice gemm[] = {{"native", CT_GEMM_NATIVE}, {"clblast", CT_GEMM_CLBLAST}, {"auto", CT_GEMM_AUTO}, {0, 0}};
    static const choice nan[] = {{"stop", 0}, {"skip", 1}, {0, 0}};
    static const choice conv[] = {{"im2col", CT_CONV_IM2COL}, {"winograd", CT_CONV_WINOGRAD}, {"winograd4", CT_CONV_WINOGRAD4}, {"direct", CT_CONV_DIRECT}, {"auto", CT_CONV_AUTO}, {0, 0}};
    static const choice sched[] = {{"constant", CT_SCHED_CONSTANT}, {"step", CT_SCHED_STEP}, {"cosine", CT_SCHED_COSINE}, {0, 0}};
    int rc = 0;
    long l;
    double d;
    switch (c) {
    case O_MODEL: o->model = arg; o->model_set = 1; break;
    case O_LR: if (!(rc = cli_parse_num("lr", arg, 0, 1e9, &d))) { o->optim.lr = (float)d; o->lr_set = 1; } break;
    case O_OPT:
        if (!ct_optim_type_find(arg, &o->optim.kind))
            rc = ct_fail(CT_EINPUT, "--optimizer %s: expected one of %s", arg, ct_optim_type_list());
        break;
    case O_MOM: if (!(rc = cli_parse_num("momentum", arg, 0, 1, &d))) { o->optim.momentum = (float)d; o->momentum_set = 1; } break;
    case O_WD: if (!(rc = cli_parse_num("weight-decay", arg, 0, 10, &d))) { o->optim.wd = (float)d; o->wd_set = 1; } break;
    case O_SEED: if (!(rc = cli_parse_int("seed", arg, 0, 0x7fffffffffffffffL, &l))) o->seed = (uint64_t)l; break;
    case O_DEVICE: o->device = arg; break;
    case O_GEMM: rc = pick("gemm", arg, gemm, "native, clblast or auto", &o->gemm); break;
    case O_CONV: rc = pick("conv", arg, conv, "im2col, winograd, winograd4, direct or auto", &o->conv); break;
    case O_STEPS: if (!(rc = cli_parse_int("steps", arg, 1, 1L << 40, &l))) o->max_steps = l; break;
    case O_QUIET: o->quiet = 1; break;
    case O_PROD:
        if (!strcmp(arg, "auto")) o->producers = -1;
        else if (!(rc = cli_parse_int("producers", arg, 0, 256, &l))) o->producers = (int)l;
        break;
    case O_RESIDENT: o->resident = 1; break;
    case O_CKPT: o->checkpoint = arg; break;
    case O_RESUME: o->resume = arg; break;
    case O_ONNAN: rc = pick("on-nan", arg, nan, "stop or skip", &o->on_nan_skip); break;
    case O_SCHED: rc = pick("schedule", arg, sched, "constant, step or cosine", &o->schedule); break;
    case O_LOGDIR: o->logdir = arg; break;
    case O_BUCKET: if (!(rc = cli_parse_num("bucket-mb", arg, 0.001, 4096, &d))) o->bucket_bytes = (size_t)(d * 1048576); break;
    case O_SMOOTH:
        if (!(rc = cli_parse_num("label-smoothing", arg, 0, 1, &d)) && d >= 1)
            rc = ct_fail(CT_EINPUT, "--label-smoothing %s: expected a number in [0, 1), e.g. 0.1", arg);
        if (!rc) o->label_smoothing = (float)d;
        break;
    case O_TTA: rc = ct_tta_parse(arg, &o->tta); break;
    case O_COMMTO:
        if (!(rc = cli_parse_num("comm-timeout", arg, 0, 604800, &d)) && d > 0 && d < 1)
            rc = ct_fail(CT_EINPUT, "--comm-timeout %s: expected 0 (no limit) or at least 1 second", arg);
        if (!rc) ct_world.comm_timeout = d;
        break;
    default:
        for (size_t k = 0; k < sizeof int_opts / sizeof *int_opts; k++)
            if (int_opts[k].id == c) {
                if (!(rc = cli_parse_int(int_opts[k].name, arg, int_opts[k].lo, int_opts[k].hi, &l)))
                    *(int *)((char *)o + int_opts[k].off) = (int)l;
                return rc;
            }
        return 1;
    }
    return rc;
}

/* the data set's options and those of single commands; 1 when c is not one of them */
static int data_opt(int c, const char *arg, cli_opts *co) {
    ct_data_opts *d = &co->data;
    int rc = 0;
    long l;
    double v;
    switch (c) {
    case O_DATA: d->path = arg; break;
    case O_CONFPNG: co->confusion_png = arg; break;
    case O_AUGMENT: d->augment = arg; break;
    case O_LABELS:
        if (strcmp(arg, "fine") && strcmp(arg, "coarse")) rc = ct_fail(CT_EINPUT, "--labels %s: expected fine or coarse", arg);
        else d->coarse = !strcmp(arg, "coarse");
        break;
    case O_SIZE: if (!(rc = cli_parse_int("size", arg, 4, 4096, &l))) d->size = (int)l; break;
    case O_CHANNELS:
        if (!(rc = cli_parse_int("channels", arg, 1, 3, &l))) {
            if (l == 2) rc = ct_fail(CT_EINPUT, "--channels 2: expected 1 (grey) or 3 (RGB)");
            else d->channels = (int)l;
        }
        break;
    case O_VALSPLIT: if (!(rc = cli_parse_num("val-split", arg, 0, 0.9, &v))) d->val_split = v; break;
    case O_STRICT: d->strict = 1; break;
    case O_CUTOUT: if (!(rc = cli_parse_int("cutout", arg, 0, 4096, &l))) d->cutout = (int)l; break;
    case O_TOP: if (!(rc = cli_parse_int("top", arg, 1, 1000, &l))) co->top = (int)l; break;
    case O_XKEY: co->x_key = arg; break;
    case O_YKEY: co->y_key = arg; break;
    case O_LAYOUT: co->layout = arg; break;
    default: return 1;
    }
    return rc;
}

void cli_opts_defaults(cli_opts *c) {
    memset(c, 0, sizeof *c);
    ct_train_defaults(&c->train);
    ct_data_opts_defaults(&c->data);
    c->top = 5;
}

int cli_parse_train(int argc, char **argv, cli_opts *co) {
    ct_train_opts *o = &co->train;
    int c;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":h", long_opts, NULL)) != -1) {
        int rc;
        if (c == 'h') { cli_usage(stdout); exit(0); }
        else if (c == ':') rc = ct_fail(CT_EINPUT, "option %s needs a value; see `cltrain --help`", argv[optind - 1]);
        else if ((rc = train_opt(c, optarg, o)) == 1 && (rc = data_opt(c, optarg, co)) == 1)
            rc = ct_fail(CT_EINPUT, "unknown option %s; see `cltrain --help`", argv[optind - 1]);
        if (rc) return rc;
    }
    if (optind < argc) return ct_fail(CT_EINPUT, "unexpected argument '%s'; see `cltrain --help`", argv[optind]);
    if (!o->lr_set) o->optim.lr = ct_optim_types[o->optim.kind]->default_lr;
    co->data.seed = o->seed; /* image sets: which files the held-out split takes */
    return ct_train_check_files(o);
}

int cli_check_model(const ct_train_opts *o) {
    if (o->resume) return 0; /* the checkpoint holds the model */
    ct_model probe;
    int rc = ct_model_load(&probe, o->model);
    ct_model_free(&probe);
    return rc;
}

/* exit status of a training command: 130 / 143 when a signal stopped it */
int train_exit(int rc, const ct_train_result *res) {
    if (rc == CT_EINTR) {
        if (ct_world.rank == 0) fprintf(stderr, "cltrain: %s\n", ct_last_error());
        return 128 + res->signal;
    }
    return rc ? cli_fail(rc) : 0;
}
