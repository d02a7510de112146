/* cli/main.c: `cltrain COMMAND [options]`, a thin client of libcltrain.
 * Options follow GNU conventions (getopt_long). Exit codes: 0 success,
 * 1 training failed (NaN, device error), 2 bad usage or bad input.
 * Tested by tests/cli.sh. */
#include "cltrain/train.h"
#include "cltrain/cifar.h"
#include "cltrain/dist.h"
#include "cli.h"
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <string.h>

static void usage(FILE *f) {
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
            "  pack DIR OUT            decode and resize DIR's images once into record shards in OUT\n"
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
            "  --augment none|basic|full  crop+flip, + brightness/contrast [cifar: full, always standardised;\n"
            "                          images: basic; a random-resized crop above 32x32]\n"
            "  --cutout N              after augmenting, zero an NxN square at a random centre [0: off]\n"
            "  --labels fine|coarse    (cifar100) which labels [fine]\n"
            "  --logdir DIR            write DIR/metrics.csv and a TensorBoard event file\n"
            "  --size S, --channels 1|3  (images, pack) decode and resize to SxS, grey or RGB [64, 3]\n"
            "  --val-split F           (images, pack) share of each class held out, without train/ test/ [0.1]\n"
            "  --strict                (images, pack) an unreadable image is an error, not skipped\n"
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

static int parse_num(const char *opt, const char *s, double lo, double hi, double *out) {
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (end == s || *end || errno || !(v >= lo && v <= hi))
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
       O_SMOOTH, O_TTA, O_CUTOUT, O_COMMTO };

const char *g_confusion_png, *g_augment, *g_labels = "fine"; /* g_augment NULL: the command's default */
int g_size, g_channels, g_strict, g_top = 5, g_cutout;
double g_val_split = 0.1;

int cli_parse_train(int argc, char **argv, ct_train_opts *o, const char **data) {
    static const struct option opts[] = {
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
        {"help", no_argument, 0, 'h'}, {0, 0, 0, 0}};
    int c;
    long l;
    double d;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
        int rc = 0;
        switch (c) {
        case O_MODEL: o->model = optarg; o->model_set = 1; break;
        case O_EPOCHS: if (!(rc = cli_parse_int("epochs", optarg, 1, 100000, &l))) o->epochs = (int)l; break;
        case O_BATCH: if (!(rc = cli_parse_int("batch-size", optarg, 1, 4096, &l))) o->batch = (int)l; break;
        case O_LR: if (!(rc = parse_num("lr", optarg, 0, 1e9, &d))) { o->optim.lr = (float)d; o->lr_set = 1; } break;
        case O_OPT:
            if (!ct_optimizer_find(optarg, &o->optim.kind))
                rc = ct_fail(CT_EINPUT, "--optimizer %s: expected one of %s", optarg, ct_optimizer_list());
            break;
        case O_MOM: if (!(rc = parse_num("momentum", optarg, 0, 1, &d))) { o->optim.momentum = (float)d; o->momentum_set = 1; } break;
        case O_WD: if (!(rc = parse_num("weight-decay", optarg, 0, 10, &d))) { o->optim.wd = (float)d; o->wd_set = 1; } break;
        case O_SEED: if (!(rc = cli_parse_int("seed", optarg, 0, 0x7fffffffffffffffL, &l))) o->seed = (uint64_t)l; break;
        case O_EVAL: if (!(rc = cli_parse_int("eval-every", optarg, 0, INT_MAX, &l))) o->eval_every = (int)l; break;
        case O_DATA: *data = optarg; break;
        case O_DEVICE: o->device = optarg; break;
        case O_GEMM:
            if (!strcmp(optarg, "native")) o->gemm = CT_GEMM_NATIVE;
            else if (!strcmp(optarg, "clblast")) o->gemm = CT_GEMM_CLBLAST;
            else if (!strcmp(optarg, "auto")) o->gemm = CT_GEMM_AUTO;
            else rc = ct_fail(CT_EINPUT, "--gemm %s: expected native, clblast or auto", optarg);
            break;
        case O_STEPS: if (!(rc = cli_parse_int("steps", optarg, 1, 1L << 40, &l))) o->max_steps = l; break;
        case O_LTRAIN: if (!(rc = cli_parse_int("limit-train", optarg, 1, 1L << 30, &l))) o->limit_train = (int)l; break;
        case O_LTEST: if (!(rc = cli_parse_int("limit-test", optarg, 1, 1L << 30, &l))) o->limit_test = (int)l; break;
        case O_QUIET: o->quiet = 1; break;
        case O_PROD:
            if (!strcmp(optarg, "auto")) o->producers = -1;
            else if (!(rc = cli_parse_int("producers", optarg, 0, 256, &l))) o->producers = (int)l;
            break;
        case O_PREFETCH: if (!(rc = cli_parse_int("prefetch", optarg, 2, 4096, &l))) o->prefetch = (int)l; break;
        case O_RESIDENT: o->resident = 1; break;
        case O_CKPT: o->checkpoint = optarg; break;
        case O_CKPT_EVERY: if (!(rc = cli_parse_int("checkpoint-every", optarg, 1, INT_MAX, &l))) o->checkpoint_every = (int)l; break;
        case O_KEEP: if (!(rc = cli_parse_int("keep", optarg, 0, 1000, &l))) o->keep = (int)l; break;
        case O_RESUME: o->resume = optarg; break;
        case O_ONNAN:
            if (!strcmp(optarg, "stop")) o->on_nan_skip = 0;
            else if (!strcmp(optarg, "skip")) o->on_nan_skip = 1;
            else rc = ct_fail(CT_EINPUT, "--on-nan %s: expected stop or skip", optarg);
            break;
        case O_SCHED:
            if (!strcmp(optarg, "constant")) o->schedule = CT_SCHED_CONSTANT;
            else if (!strcmp(optarg, "step")) o->schedule = CT_SCHED_STEP;
            else if (!strcmp(optarg, "cosine")) o->schedule = CT_SCHED_COSINE;
            else rc = ct_fail(CT_EINPUT, "--schedule %s: expected constant, step or cosine", optarg);
            break;
        case O_WARMUP: if (!(rc = cli_parse_int("warmup", optarg, 0, 1L << 30, &l))) o->warmup = (int)l; break;
        case O_CONFPNG: g_confusion_png = optarg; break;
        case O_LOGDIR: o->logdir = optarg; break;
        case O_AUGMENT: g_augment = optarg; break;
        case O_LABELS:
            if (strcmp(optarg, "fine") && strcmp(optarg, "coarse")) rc = ct_fail(CT_EINPUT, "--labels %s: expected fine or coarse", optarg);
            else g_labels = optarg;
            break;
        case O_PROGRESS: if (!(rc = cli_parse_int("progress-every", optarg, 1, 1L << 30, &l))) o->progress_every = (int)l; break;
        case O_BUCKET: if (!(rc = parse_num("bucket-mb", optarg, 0.001, 4096, &d))) o->bucket_bytes = (size_t)(d * 1048576); break;
        case O_COMMTO:
            if (!(rc = parse_num("comm-timeout", optarg, 0, 604800, &d)) && d > 0 && d < 1)
                rc = ct_fail(CT_EINPUT, "--comm-timeout %s: expected 0 (no limit) or at least 1 second", optarg);
            if (!rc) ct_world.comm_timeout = d;
            break;
        case O_SIZE: if (!(rc = cli_parse_int("size", optarg, 4, 4096, &l))) g_size = (int)l; break;
        case O_CHANNELS:
            if (!(rc = cli_parse_int("channels", optarg, 1, 3, &l))) {
                if (l == 2) rc = ct_fail(CT_EINPUT, "--channels 2: expected 1 (grey) or 3 (RGB)");
                else g_channels = (int)l;
            }
            break;
        case O_VALSPLIT: if (!(rc = parse_num("val-split", optarg, 0, 0.9, &d))) g_val_split = d; break;
        case O_STRICT: g_strict = 1; break;
        case O_SMOOTH:
            if (!(rc = parse_num("label-smoothing", optarg, 0, 1, &d)) && d >= 1)
                rc = ct_fail(CT_EINPUT, "--label-smoothing %s: expected a number in [0, 1), e.g. 0.1", optarg);
            if (!rc) o->label_smoothing = (float)d;
            break;
        case O_TTA: rc = ct_tta_parse(optarg, &o->tta); break;
        case O_CUTOUT: if (!(rc = cli_parse_int("cutout", optarg, 0, 4096, &l))) g_cutout = (int)l; break;
        case O_TOP: if (!(rc = cli_parse_int("top", optarg, 1, 1000, &l))) g_top = (int)l; break;
        case O_IOLAT: if (!(rc = cli_parse_int("io-latency-us", optarg, 0, 10000000, &l))) o->io_latency_us = (int)l; break;
        case 'h': usage(stdout); exit(0);
        case ':': rc = ct_fail(CT_EINPUT, "option %s needs a value; see `cltrain --help`", argv[optind - 1]); break;
        default: rc = ct_fail(CT_EINPUT, "unknown option %s; see `cltrain --help`", argv[optind - 1]); break;
        }
        if (rc) return rc;
    }
    if (optind < argc) return ct_fail(CT_EINPUT, "unexpected argument '%s'; see `cltrain --help`", argv[optind]);
    if (!o->lr_set) o->optim.lr = ct_optimizers[o->optim.kind]->default_lr;
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

static int cmd_mnist(int argc, char **argv, int kind) {
    ct_train_opts o;
    ct_train_defaults(&o);
    const char *data = NULL;
    int rc = cli_parse_train(argc, argv, &o, &data);
    if (rc) return cli_fail(rc);
    if ((rc = cli_check_model(&o))) return cli_fail(rc);
    if (!data) data = kind == CT_FASHION_MNIST ? "/usr/share/datasets/fashion-mnist" : "datasets/mnist";
    o.dataset = kind == CT_FASHION_MNIST ? "fashion-mnist" : "mnist";
    o.data_dir = data;
    ct_dataset train = {0}, test = {0};
    double t0 = ct_now();
    rc = ct_mnist_load(&train, &test, data, kind, kind == CT_MNIST);
    if (rc) return cli_fail(rc);
    if (!o.quiet) fprintf(stdout, "%s: %d training and %d test images from %s (%.2f s)\n", kind == CT_MNIST ? "mnist" : "fashion-mnist",
                          train.n, test.n, data, ct_now() - t0);
    ct_train_result res;
    rc = ct_train(&o, &train, &test, &res, stdout);
    ct_dataset_free(&train);
    ct_dataset_free(&test);
    return train_exit(rc, &res);
}

static int cmd_cifar(int argc, char **argv, int kind) {
    ct_train_opts o;
    ct_train_defaults(&o);
    o.model = kind == 10 ? "cifar-cnn" : "cifar100-cnn";
    const char *data = NULL;
    int rc = cli_parse_train(argc, argv, &o, &data);
    if (rc) return cli_fail(rc);
    ct_cifar_ctx tctx = {NULL, ct_augment_default(CT_AUG_FULL)}, ectx = {NULL, ct_augment_default(CT_AUG_NONE)};
    if (!g_augment) g_augment = "full";
    tctx.aug.cutout = g_cutout;
    if ((rc = ct_augment_parse(&tctx.aug, g_augment)) || (rc = ct_augment_check(&tctx.aug))) return cli_fail(rc);
    if ((rc = cli_check_model(&o))) return cli_fail(rc);
    if (!data) data = kind == 10 ? "datasets/cifar10" : "datasets/cifar100";
    const char *name = kind == 10 ? "cifar10" : !strcmp(g_labels, "fine") ? "cifar100" : "cifar100-coarse";
    o.dataset = kind == 10 ? "cifar10" : "cifar100"; /* the checkpoint tells fine from coarse by its classes */
    o.data_dir = data;
    ct_dataset train = {0}, test = {0};
    double t0 = ct_now();
    if ((rc = ct_cifar_load(&train, &test, data, kind, !strcmp(g_labels, "fine"), 1))) return cli_fail(rc);
    if (!o.quiet)
        printf("%s: %d training and %d test images from %s (%.2f s), augmentation %s\n", name, train.n, test.n, data,
               ct_now() - t0, g_augment);
    tctx.ds = &train;
    ectx.ds = &test;
    ct_source src, esrc;
    ct_cifar_source_init(&src, &tctx);
    ct_cifar_source_init(&esrc, &ectx);
    o.train_src = &src;
    o.eval_src = &esrc;
    ct_train_result res;
    rc = ct_train(&o, &train, &test, &res, stdout);
    ct_dataset_free(&train);
    ct_dataset_free(&test);
    return train_exit(rc, &res);
}

static int run(int argc, char **argv);

int main(int argc, char **argv) {
    setvbuf(stdout, NULL, _IOLBF, 0); /* progress lines appear as they happen, also in a pipe or a log */
    /* under mpirun: one rank per process (dist.h); alone: no MPI at all */
    if (ct_dist_init(&argc, &argv)) return cli_fail(CT_EINPUT);
    int code = run(argc, argv);
    /* a failed rank ends the job: the others would wait for it forever */
    if (code && ct_world.size > 1) ct_dist_abort(code);
    ct_dist_finalize();
    return code;
}

static int run(int argc, char **argv) {
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    const char *cmd = argv[1];
    if (!strcmp(cmd, "-h") || !strcmp(cmd, "--help") || !strcmp(cmd, "help")) { usage(stdout); return 0; }
    if (!strcmp(cmd, "-V") || !strcmp(cmd, "--version")) {
        printf("cltrain %s (OpenCL 1.2; %s)\n", CT_VERSION, ct_dist_compiled() ? "data-parallel over mpi" : "built without MPI");
        return 0;
    }
    if (!strcmp(cmd, "devices")) {
        if (argc > 2) { ct_fail(CT_EINPUT, "devices takes no arguments"); return cli_fail(CT_EINPUT); }
        int rc = ct_cl_list(stdout);
        return rc ? cli_fail(rc) : 0;
    }
    if (!strcmp(cmd, "mnist")) return cmd_mnist(argc - 1, argv + 1, CT_MNIST);
    if (!strcmp(cmd, "fashion-mnist")) return cmd_mnist(argc - 1, argv + 1, CT_FASHION_MNIST);
    if (!strcmp(cmd, "cifar10")) return cmd_cifar(argc - 1, argv + 1, 10);
    if (!strcmp(cmd, "cifar100")) return cmd_cifar(argc - 1, argv + 1, 100);
    if (!strcmp(cmd, "bench")) return cmd_bench(argc - 1, argv + 1);
    if (!strcmp(cmd, "tune")) return cmd_tune(argc - 1, argv + 1);
    if (!strcmp(cmd, "eval")) return cmd_eval(argc - 1, argv + 1);
    if (!strcmp(cmd, "images")) return cmd_images(argc - 1, argv + 1);
    if (!strcmp(cmd, "predict")) return cmd_predict(argc - 1, argv + 1);
    if (!strcmp(cmd, "pack")) return cmd_pack(argc - 1, argv + 1);
    if (!strcmp(cmd, "export")) return cmd_export(argc - 1, argv + 1);
    ct_fail(CT_EINPUT, "unknown command '%s'; see `cltrain --help`", cmd);
    return cli_fail(CT_EINPUT);
}
