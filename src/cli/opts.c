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
#include <pthread.h>
#include <stddef.h>
#include <string.h>

int cli_fail(int code) {
    if (ct_world.size > 1 && ct_world.rank > 0) fprintf(stderr, "cltrain: rank %d: %s\n", ct_world.rank, ct_last_error());
    else fprintf(stderr, "cltrain: %s\n", ct_last_error());
    return ct_exit_code(code);
}

int cli_array_files(int argc, char **argv) {
    int n = 0;
    while (n + 1 < argc && argv[n + 1][0] != '-') {
        size_t l = strlen(argv[n + 1]);
        if (l < 4 || (strcmp(argv[n + 1] + l - 4, ".npz") && strcmp(argv[n + 1] + l - 4, ".npy"))) break;
        n++;
    }
    return n;
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
       O_SMOOTH, O_TTA, O_CUTOUT, O_TRANSLATE, O_FLIP, O_COMMTO, O_CONV, O_CURVES, O_BUDGET, O_TFR_IMAGE, O_TFR_LABEL,
       O_TFR_SHAPE, O_TRAIN, O_TEST, O_XKEY, O_YKEY, O_LAYOUT, O_INIT, O_FREEZE, O_LOOKAHEAD, O_DROPLAST };

/* Which commands take an option (CLI_*), and for a training command what
 * its data set must take (CT_DS_*, 0: any). The option table is the only
 * list: getopt's, every --help and every "not an option of" message come
 * from it. Options parsed elsewhere (--budget by tune, the TFRecord ones by
 * images and pack, --top by predict) are here for the help and the message. */
#define T CLI_TRAIN
#define E CLI_EVAL
#define B CLI_BENCH
#define U CLI_TUNE
#define P CLI_PACK
typedef struct opt_def {
    const char *name;
    int has_arg, id;
    unsigned cmds, needs;
    const char *arg, *help;     /* help: lines joined by \n; NULL: generated (see opt_help) */
} opt_def;
static const opt_def opt_table[] = {
    {"model", 1, O_MODEL, T | B | U, 0, "NAME|FILE.cfg", NULL},
    {"epochs", 1, O_EPOCHS, T, 0, "N", "passes over the training set [1]"},
    {"batch-size", 1, O_BATCH, T | E | B | U, 0, "N", "images per step (per rank under mpirun) [128]"},
    {"lr", 1, O_LR, T | B | U, 0, "X", NULL},
    {"optimizer", 1, O_OPT, T | B | U, 0, "NAME", NULL},
    {"momentum", 1, O_MOM, T | B | U, 0, "X", "SGD and Nesterov momentum [0.9]"},
    {"weight-decay", 1, O_WD, T | B | U, 0, "X", "weight decay on weights (not biases) [0]"},
    {"seed", 1, O_SEED, T | B | U, 0, "N", "weights and data order depend only on it [1]"},
    {"eval-every", 1, O_EVAL, T, 0, "N", "also evaluate every N steps [0: each epoch end]"},
    {"data", 1, O_DATA, T | E | B, CT_DS_PATH, "DIR", "where the data set is [the set's folder; eval: the checkpoint's]"},
    {"device", 1, O_DEVICE, T | E | B | U, 0, "P:D", "OpenCL platform:device (see `cltrain devices`; or CLTRAIN_DEVICE)"},
    {"gemm", 1, O_GEMM, T | E | B, 0, "native|clblast|auto", "matrix-product path [native]"},
    {"conv", 1, O_CONV, T | E | B | U, 0, "im2col|winograd|winograd4|direct|auto",
     "convolutions as im2col + GEMM; 3x3 stride-1 ones as Winograd F(2x2,3x3)\n"
     "or F(4x4,3x3); direct: those with outputs in 16s by kernels without im2col;\n"
     "auto: on a CPU F(4x4,3x3) where a 3x3 stride-1 layer has 8 or more input\n"
     "channels, direct for the rest where it fits; im2col elsewhere [auto]"},
    {"steps", 1, O_STEPS, T | B, 0, "N", "stop after N steps [bench: 20 for train, 30 for pipeline]"},
    {"limit-train", 1, O_LTRAIN, T | B, 0, "N", "use only N training images (image sets: spread over the classes)"},
    {"limit-test", 1, O_LTEST, T | E, 0, "N", "use only N test images (image sets: spread over the classes)"},
    {"quiet", 0, O_QUIET, T, 0, NULL, "no progress lines (the results are still printed)"},
    {"progress-every", 1, O_PROGRESS, T, 0, "N", "a progress line every N steps [50]"},
    {"producers", 1, O_PROD, T | B, 0, "N|auto", "input threads; 0 loads inside the training loop [auto]"},
    {"prefetch", 1, O_PREFETCH, T | B, 0, "K", "batch slots in flight [2 x producers, at least 4]"},
    {"resident", 0, O_RESIDENT, T, CT_DS_RESIDENT, NULL, "keep the whole data set on the device, gather batches there"},
    {"io-latency-us", 1, O_IOLAT, T, 0, "N", "simulated storage latency per sample (a sleep; for benchmarks)"},
    {"checkpoint", 1, O_CKPT, T, 0, "FILE", "save training state (atomically) at each epoch end and on Ctrl-C"},
    {"checkpoint-every", 1, O_CKPT_EVERY, T, 0, "N", "with --checkpoint: also every N steps"},
    {"keep", 1, O_KEEP, T, 0, "K", "with --checkpoint: keep K numbered copies FILE.<step> as well"},
    {"resume", 1, O_RESUME, T, 0, "FILE", "continue exactly where a checkpoint stopped"},
    {"init", 1, O_INIT, T, 0, "FILE", "start a new run from a checkpoint's model and weights (e.g. cltrain import's),\n"
     "with a fresh optimizer and step count"},
    {"freeze", 1, O_FREEZE, T, 0, "N", "the first N layers do not train (their weights stay; batch-norm statistics\n"
     "still follow the data) [0]"},
    {"on-nan", 1, O_ONNAN, T, 0, "stop|skip", "a NaN/Inf gradient stops training (exit 1) or skips the step [stop]"},
    {"schedule", 1, O_SCHED, T, 0, "constant|step|cosine|triangle",
     "learning-rate schedule; triangle: 0.2 lr -> lr at --warmup (else 23%) -> 0.07 lr [constant]"},
    {"warmup", 1, O_WARMUP, T, 0, "N", "the rate rises linearly over the first N steps [0]"},
    {"label-smoothing", 1, O_SMOOTH, T, 0, "E", "train on targets (1-E)*onehot + E/classes, 0 <= E < 1 [0]"},
    {"drop-last", 0, O_DROPLAST, T, 0, NULL, "leave out each epoch's last partial batch (its images are others each epoch)"},
    {"lookahead", 1, O_LOOKAHEAD, T, 0, "RATE",
     "a moving average of the weights from the 4th epoch: every 5 steps it moves\n"
     "towards them by 1 - RATE^5 (step/steps)^3 and they to it; evaluation and the\n"
     "final weights are the average (airbench94's, RATE 0.95) [0: off]"},
    {"tta", 1, O_TTA, T | E, 0, "none|flip|flip-translate",
     "evaluation: average the logits of each image and its mirror (flip-translate:\n"
     "and of both shifted 1 pixel up-left and down-right); training: at the end,\n"
     "after the plain evaluation (each epoch's is plain) [the model's [net] tta=,\n"
     "else none; eval: the checkpoint's model's]"},
    {"augment", 1, O_AUGMENT, T, CT_DS_AUGMENT, "none|shift|basic|full",
     "shift: padded crop (translation), no flip; basic: crop + flip;\n"
     "full: + brightness/contrast [cifar: full, standardised unless the model's\n"
     "[net] has mean= and std=; images:\n"
     "shift (a flip can change a digit's class); basic/full: a random-resized\n"
     "crop above 32x32; arrays: none]"},
    {"cutout", 1, O_CUTOUT, T, CT_DS_AUGMENT, "N", "after augmenting, zero an NxN square at a random centre [0: off]"},
    {"translate", 1, O_TRANSLATE, T, CT_DS_AUGMENT, "N", "the crop is a translation by up to N pixels with reflect padding [off]"},
    {"flip", 1, O_FLIP, T, CT_DS_AUGMENT, "random|alternate",
     "basic/full: flip at random, or each image every other epoch [random]"},
    {"labels", 1, O_LABELS, T, CT_DS_LABELS, "fine|coarse", "CIFAR-100's 100 fine or 20 coarse classes [fine]"},
    {"logdir", 1, O_LOGDIR, T, 0, "DIR", "write DIR/metrics.csv and a TensorBoard event file"},
    {"curves-png", 1, O_CURVES, T, 0, "FILE", "at the end, draw the loss and accuracy curves into a PNG"},
    {"size", 1, O_SIZE, T | B | U | P, CT_DS_RESIZE, "S", "decode and resize images to SxS [images: 64; bench, tune: the model's]"},
    {"channels", 1, O_CHANNELS, T | B | U | P, CT_DS_RESIZE, "1|3", "grey or RGB [3]"},
    {"val-split", 1, O_VALSPLIT, T | P, CT_DS_SPLIT, "F", "share of each class held out, without train/ and test/ [0.1]"},
    {"strict", 0, O_STRICT, T | P, CT_DS_IMAGES, NULL, "an unreadable image is an error, not skipped"},
    {"train", 1, O_TRAIN, T | P, CT_DS_IMAGES, "GLOB", "TFRecord files of the training split"},
    {"test", 1, O_TEST, T | P, CT_DS_IMAGES, "GLOB", "TFRecord files of the test split (else --val-split of --train)"},
    {"tfrecord-image", 1, O_TFR_IMAGE, T | P, CT_DS_IMAGES, "KEY", "bytes feature holding the image [image/encoded]"},
    {"tfrecord-label", 1, O_TFR_LABEL, T | P, CT_DS_IMAGES, "KEY", "int64 feature holding the label [image/class/label]"},
    {"tfrecord-shape", 1, O_TFR_SHAPE, T | P, CT_DS_IMAGES, "H,W,C", "the image feature is raw HWC pixels of this shape"},
    {"x", 1, O_XKEY, T | P, CT_DS_ARRAYS, "KEY[,TESTKEY]", "the .npz's image arrays [x_train,x_test; without a test array --val-split]"},
    {"y", 1, O_YKEY, T | P, CT_DS_ARRAYS, "KEY[,TESTKEY]", "the .npz's label arrays [y_train,y_test]"},
    {"layout", 1, O_LAYOUT, T | P, CT_DS_ARRAYS, "NHWC|NCHW|NHW", "image layout of the arrays [NHW for 3 dimensions, NHWC for 4]"},
    {"confusion-png", 1, O_CONFPNG, E, 0, "FILE", "draw the confusion matrix (class names, counts, shares) into a PNG"},
    {"top", 1, O_TOP, CLI_PREDICT, 0, "K", "classes shown per image [5]"},
    {"budget", 1, O_BUDGET, U, 0, "SECONDS", "time for the whole search [60 on a CPU, 120 elsewhere]"},
    {"bucket-mb", 1, O_BUCKET, T | B, 0, "X", "(mpirun) gradient all-reduce bucket size [1]"},
    {"comm-timeout", 1, O_COMMTO, T | B, 0, "S",
     "(mpirun) a rank that has not answered for S seconds while training\n"
     "ends the job, naming it (a cut link hangs TCP for minutes) [120; 0: off]"},
};
#undef T
#undef E
#undef B
#undef U
#undef P
enum { N_OPTS = (int)(sizeof opt_table / sizeof *opt_table) };

static const opt_def *opt_by_id(int id) {
    for (int i = 0; i < N_OPTS; i++)
        if (opt_table[i].id == id) return &opt_table[i];
    return NULL;
}

/* the commands cmds names, for messages: "`cltrain tune`", "the training commands and `cltrain bench`" */
static void cmd_names(unsigned cmds, unsigned needs, char *buf, size_t size) {
    static const struct { unsigned bit; const char *name; } names[] = {
        {CLI_EVAL, "`cltrain eval`"}, {CLI_BENCH, "`cltrain bench`"}, {CLI_TUNE, "`cltrain tune`"},
        {CLI_PACK, "`cltrain pack`"}, {CLI_PREDICT, "`cltrain predict`"}};
    const char *part[32];
    char sets[16][48];
    int n = 0;
    if (cmds & CLI_TRAIN) {
        if (!needs) part[n++] = "the training commands";
        else
            for (int i = 0; i < ct_n_datasets && n < 16; i++)
                if ((ct_datasets[i].takes & needs) == needs) {
                    snprintf(sets[n], sizeof sets[n], "`cltrain %s`", ct_datasets[i].name);
                    part[n] = sets[n];
                    n++;
                }
    }
    for (size_t k = 0; k < sizeof names / sizeof *names; k++)
        if (cmds & names[k].bit) part[n++] = names[k].name;
    buf[0] = 0;
    for (int k = 0; k < n; k++)
        snprintf(buf + strlen(buf), size - strlen(buf), "%s%s", k == 0 ? "" : k == n - 1 ? " and " : ", ", part[k]);
}

/* why a data set does not take an option it needs `need` for */
static const char *need_reason(unsigned need, const ct_dataset_def *set) {
    switch (need) {
    case CT_DS_RESIZE: return "its images are used at their own size";
    case CT_DS_SPLIT: return "its train and test splits are fixed";
    case CT_DS_IMAGES: return "it reads no image files or TFRecord";
    case CT_DS_ARRAYS: return "it reads no NumPy arrays";
    case CT_DS_LABELS: return "it has one set of labels";
    case CT_DS_AUGMENT: return "it is not augmented";
    case CT_DS_RESIDENT:
        return set->from_files == CT_FILES_IMAGES   ? "its images are decoded (or read from shards) by the producers; use --producers N"
               : set->from_files == CT_FILES_ARRAYS ? "the producers read them from the mapped files; use --producers N"
                               : "every image is standardised on the host, and augmented unless --augment none: "
                                 "the gather on the device cannot do that; use --producers N";
    case CT_DS_PATH: return "it names its files as arguments, before the options";
    default: return "it does not apply";
    }
}

/* CT_EINPUT saying which command takes option d, or 0 when this one does */
static int check_taken(const opt_def *d, const cli_opts *co) {
    char who[256];
    if (!(d->cmds & co->cmd)) {
        cmd_names(d->cmds, d->needs, who, sizeof who);
        return ct_fail(CT_EINPUT, "--%s is an option of %s, not of `cltrain %s`; see `cltrain %s --help`", d->name, who,
                       co->cmd_name, co->cmd_name);
    }
    if (co->cmd == CLI_TRAIN && co->set && d->needs && (co->set->takes & d->needs) != d->needs) {
        cmd_names(d->cmds & ~(unsigned)(CLI_BENCH | CLI_TUNE), d->needs, who, sizeof who);
        return ct_fail(CT_EINPUT, "--%s does not apply to %s (%s); it is for %s", d->name, co->set->name,
                       need_reason(d->needs, co->set), who);
    }
    return 0;
}

/* --- help, generated from the option, optimizer, model and data-set tables --- */

/* "  --name ARG" in a 26-column field, then the help's lines (each after the
 * first indented; one longer than 76 columns broken at a space) */
/* text word-wrapped at width columns, breaking also at each '\n'; continuation lines start with indent spaces */
static void print_wrapped(FILE *f, const char *text, int width, int indent) {
    for (const char *p = text; *p;) {
        const char *nl = strchr(p, '\n');
        int len = nl ? (int)(nl - p) : (int)strlen(p), next = len + (nl != NULL);
        if (len > width) {
            int cut = width;
            while (cut > 0 && p[cut] != ' ') cut--;
            if (cut > 0) len = cut, next = cut + 1;
        }
        fprintf(f, "%.*s\n", len, p);
        p += next;
        if (!*p) break;
        fprintf(f, "%*s", indent, "");
    }
}

static void print_opt(FILE *f, const char *name, const char *arg, const char *help) {
    char head[96];
    snprintf(head, sizeof head, "  --%s%s%s", name, arg ? " " : "", arg ? arg : "");
    if (strlen(head) > 25) fprintf(f, "%s\n%26s", head, "");
    else fprintf(f, "%-26s", head);
    print_wrapped(f, help, 76, 26);
}

/* the help of the options whose text depends on the tables */
static void generated_help(FILE *f, const opt_def *d, unsigned cmd, const ct_dataset_def *set) {
    char buf[1024] = "";
    size_t l;
    switch (d->id) {
    case O_MODEL: {
        snprintf(buf, sizeof buf, "a built-in model or a .cfg file (its [net] may give training defaults,\nepochs=, batch=, lr=, ..., that the options here override); built-ins: %s ", ct_model_builtins());
        ct_train_opts def;
        ct_train_defaults(&def);
        if (cmd == CLI_TRAIN && set) snprintf(buf + strlen(buf), sizeof buf - strlen(buf), "[%s]", set->model);
        else if (cmd != CLI_TRAIN) snprintf(buf + strlen(buf), sizeof buf - strlen(buf), "[%s]", def.model);
        else {
            l = strlen(buf);
            snprintf(buf + l, sizeof buf - l, "[");
            for (int i = 0; i < ct_n_datasets; i++) {
                l = strlen(buf);
                snprintf(buf + l, sizeof buf - l, "%s%s: %s", i ? ", " : "", ct_datasets[i].name, ct_datasets[i].model);
            }
            l = strlen(buf);
            snprintf(buf + l, sizeof buf - l, "]");
        }
        break;
    }
    case O_OPT:
        for (int i = 0; i < CT_OPT_COUNT; i++) {
            l = strlen(buf);
            snprintf(buf + l, sizeof buf - l, "%s%s: %s%s", i ? "\n" : "", ct_optim_types[i]->name, ct_optim_types[i]->help,
                     i == CT_OPT_ADAM ? " [default]" : "");
        }
        break;
    case O_LR:
        snprintf(buf, sizeof buf, "learning rate [");
        for (int i = 0; i < CT_OPT_COUNT; i++) {
            l = strlen(buf);
            snprintf(buf + l, sizeof buf - l, "%s%s %g", i ? ", " : "", ct_optim_types[i]->name, ct_optim_types[i]->default_lr);
        }
        l = strlen(buf);
        snprintf(buf + l, sizeof buf - l, "]");
        break;
    }
    print_opt(f, d->name, d->arg, buf);
}

void cli_print_options(FILE *f, unsigned cmd, const ct_dataset_def *set) {
    for (int i = 0; i < N_OPTS; i++) {
        const opt_def *d = &opt_table[i];
        if (!(d->cmds & cmd)) continue;
        if (cmd == CLI_TRAIN && set && d->needs && (set->takes & d->needs) != d->needs) continue;
        if (d->help) print_opt(f, d->name, d->arg, d->help);
        else generated_help(f, d, cmd, set);
    }
    fprintf(f, "  -h, --help              this help\n");
}

/* the option a [net] training default sets: batch= is --batch-size, _ is - */
static void recipe_option(const char *key, char *name, size_t cap) {
    snprintf(name, cap, "%s", !strcmp(key, "batch") ? "batch-size" : key);
    for (char *p = name; *p; p++) if (*p == '_') *p = '-';
}

/* a training command's default model and the training defaults its [net] gives */
static void print_default_model(FILE *f, const ct_dataset_def *set) {
    fprintf(f, "Default model: %s.\n", set->model);
    ct_model m;
    if (ct_model_load(&m, set->model)) return; /* a built-in: a bug that tests/messages.sh would show */
    char text[1024] = "", item[96], name[32];
    if (set->fit_model)
        snprintf(text, sizeof text, "%s", set->takes & CT_DS_LABELS ? "Its class count follows --labels (100 fine classes, "
                 "or 20 coarse ones), as does any --model's." : "Its input shape and class count follow the data's.");
    if (m.n_recipe) {
        snprintf(text + strlen(text), sizeof text - strlen(text), "%sIts [net] gives the training defaults (an option "
                 "given overrides its own; the bracketed defaults below apply where a model's [net] gives none):",
                 text[0] ? " " : "");
        for (int i = 0; i < m.n_recipe; i++) {
            recipe_option(m.recipe[i].key, name, sizeof name);
            int flag = !strcmp(m.recipe[i].value, "1") && !strcmp(name, "drop-last"); /* an option without a value */
            snprintf(item, sizeof item, " --%s%s%s", name, flag ? "" : " ", flag ? "" : m.recipe[i].value);
            snprintf(item + strlen(item), sizeof item - strlen(item), "%s", i + 1 < m.n_recipe ? "," : ".");
            snprintf(text + strlen(text), sizeof text - strlen(text), "%s", item);
        }
    }
    if (text[0]) print_wrapped(f, text, 100, 0);
    ct_model_free(&m);
}

void cli_print_command_help(FILE *f, unsigned cmd, const ct_dataset_def *set) {
    switch (cmd) {
    case CLI_TRAIN:
        if (set) {
            fprintf(f, "Usage: cltrain %s%s%s [OPTIONS]\n%s\n", set->name, *set->args ? " " : "", set->args, set->help);
            print_default_model(f, set);
            fprintf(f, "\nOptions:\n");
        } else {
            fprintf(f, "Usage: cltrain DATASET [OPTIONS]\n\nOptions:\n");
        }
        break;
    case CLI_EVAL:
        fprintf(f, "Usage: cltrain eval CHECKPOINT [OPTIONS]\n"
                   "The checkpoint's model on its data set's test split (or held-out images): accuracy,\n"
                   "per-class accuracy and the confusion matrix.\n\nOptions:\n");
        break;
    case CLI_BENCH:
        fprintf(f, "Usage: cltrain bench kernels|train|pipeline|dist|images|probe [OPTIONS]\n"
                   "  kernels   per-layer GFLOP/s, ours vs CLBlast and vs OpenBLAS's SGEMM limit\n"
                   "  train     training images/s, achieved GFLOP/s, CPU time per step, cold/warm start-up\n"
                   "  pipeline  input modes with and without simulated storage latency (Fashion-MNIST)\n"
                   "  dist      all-reduce time and scaling efficiency (under mpirun -np N)\n"
                   "  images    image decoding against shards, per thread\n"
                   "  probe     one start-up as `bench train` times it\n\nOptions:\n");
        break;
    case CLI_TUNE:
        fprintf(f, "Usage: cltrain tune [OPTIONS]\n"
                   "Search conv algorithms, GEMM kernels and parameters for --model's shapes on this device;\n"
                   "training and the benches use the result (a database in the program cache folder).\n\nOptions:\n");
        break;
    }
    cli_print_options(f, cmd, set);
}
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
    static const choice sched[] = {{"constant", CT_SCHED_CONSTANT}, {"step", CT_SCHED_STEP}, {"cosine", CT_SCHED_COSINE},
                                   {"triangle", CT_SCHED_TRIANGLE}, {0, 0}};
    int rc = 0;
    long l;
    double d;
    o->given |= c == O_SEED ? CT_GIVEN_SEED : c == O_BATCH ? CT_GIVEN_BATCH : c == O_LTRAIN ? CT_GIVEN_LIMIT_TRAIN
              : c == O_OPT ? CT_GIVEN_OPTIMIZER : c == O_DROPLAST ? CT_GIVEN_DROP_LAST : 0u;
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
    case O_DROPLAST: o->drop_last = 1; break;
    case O_CKPT: o->checkpoint = arg; break;
    case O_RESUME: o->resume = arg; break;
    case O_INIT: o->init = arg; break;
    case O_FREEZE: if (!(rc = cli_parse_int("freeze", arg, 0, CT_MAX_LAYERS, &l))) o->freeze = (int)l; break;
    case O_ONNAN: rc = pick("on-nan", arg, nan, "stop or skip", &o->on_nan_skip); break;
    case O_SCHED: rc = pick("schedule", arg, sched, "constant, step, cosine or triangle", &o->schedule); break;
    case O_LOGDIR: o->logdir = arg; break;
    case O_BUCKET: if (!(rc = cli_parse_num("bucket-mb", arg, 0.001, 4096, &d))) o->bucket_bytes = (size_t)(d * 1048576); break;
    case O_SMOOTH:
        if (!(rc = cli_parse_num("label-smoothing", arg, 0, 1, &d)) && d >= 1)
            rc = ct_fail(CT_EINPUT, "--label-smoothing %s: expected a number in [0, 1), e.g. 0.1", arg);
        if (!rc) o->label_smoothing = (float)d;
        break;
    case O_TTA: rc = ct_tta_parse(arg, &o->tta); break;
    case O_LOOKAHEAD:
        if (!(rc = cli_parse_num("lookahead", arg, 0, 1, &d))) { o->lookahead = (float)d; o->lookahead_set = 1; }
        break;
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
    case O_CURVES: co->curves_png = arg; break;
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
    case O_VALSPLIT: if (!(rc = cli_parse_num("val-split", arg, 0, 0.9, &v))) { d->val_split = v; d->val_split_set = 1; } break;
    case O_STRICT: d->strict = 1; break;
    case O_CUTOUT: if (!(rc = cli_parse_int("cutout", arg, 0, 4096, &l))) d->cutout = (int)l; break;
    case O_TRANSLATE: if (!(rc = cli_parse_int("translate", arg, 1, 1024, &l))) d->translate = (int)l; break;
    case O_FLIP: {
        ct_augment probe = ct_augment_default(CT_AUG_BASIC);
        if (!(rc = ct_augment_parse_flip(&probe, arg))) d->flip = arg;
        break;
    }
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

/* getopt's table, from opt_table */
static struct option long_opts[N_OPTS + 2];
static void make_long_opts(void) {
    for (int i = 0; i < N_OPTS; i++)
        long_opts[i] = (struct option){opt_table[i].name, opt_table[i].has_arg ? required_argument : no_argument, 0, opt_table[i].id};
    long_opts[N_OPTS] = (struct option){"help", no_argument, 0, 'h'};
}

void cli_opts_for(cli_opts *c, unsigned cmd, const char *name, const ct_dataset_def *set) {
    c->cmd = cmd;
    c->cmd_name = name;
    c->set = set;
}

int cli_parse_train(int argc, char **argv, cli_opts *co) {
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, make_long_opts);
    ct_train_opts *o = &co->train;
    if (!co->cmd) cli_opts_for(co, CLI_TRAIN, "COMMAND", NULL);
    int c;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":h", long_opts, NULL)) != -1) {
        int rc;
        const opt_def *d = opt_by_id(c);
        if (c == 'h') {
            cli_print_command_help(stdout, co->cmd, co->set);
            exit(0);
        } else if (c == ':') rc = ct_fail(CT_EINPUT, "option %s needs a value; see `cltrain %s --help`", argv[optind - 1], co->cmd_name);
        else if (!d) rc = ct_fail(CT_EINPUT, "unknown option %s; see `cltrain %s --help`", argv[optind - 1], co->cmd_name);
        else if (!(rc = check_taken(d, co)) && (rc = train_opt(c, optarg, o)) == 1 && (rc = data_opt(c, optarg, co)) == 1)
            rc = ct_fail(CT_EINPUT, "--%s: not taken here; see `cltrain %s --help`", d->name, co->cmd_name);
        if (d && c - O_MODEL < (int)sizeof co->seen) co->seen[c - O_MODEL] = 1; /* cli_apply_recipe: given here */
        if (rc) return rc;
    }
    if (optind < argc) return ct_fail(CT_EINPUT, "unexpected argument '%s'; see `cltrain %s --help`", argv[optind], co->cmd_name);
    if (!o->checkpoint && o->checkpoint_every)
        return ct_fail(CT_EINPUT, "--checkpoint-every %d needs --checkpoint FILE (where to save)", o->checkpoint_every);
    if (!o->checkpoint && o->keep)
        return ct_fail(CT_EINPUT, "--keep %d needs --checkpoint FILE (the copies are FILE.<step>)", o->keep);
    if (!o->lr_set) o->optim.lr = ct_optim_types[o->optim.kind]->default_lr;
    co->data.seed = o->seed; /* image sets: which files the held-out split takes */
    return ct_train_check_files(o);
}

/* "name value" onto the note's list `what` (a ", "-separated list after a heading) */
static void note_add(char *list, size_t cap, const char *item) {
    size_t l = strlen(list);
    snprintf(list + l, cap - l, "%s%s", l ? ", " : "", item);
}

int cli_apply_recipe(cli_opts *co) {
    ct_train_opts *o = &co->train;
    ct_model m;
    co->recipe_note[0] = 0;
    if (o->resume || o->init) { /* the checkpoint's model; a file that does not load is reported by ct_train */
        ct_ckpt ck;
        if (ct_ckpt_load(&ck, o->resume ? o->resume : o->init)) return 0;
        int bad = ct_model_parse(&m, ck.cfg, ck.model_name);
        ct_ckpt_free(&ck);
        if (bad) return 0;
    } else {
        int rc = ct_model_load(&m, o->model);
        if (rc) return rc;
    }
    /* the model's optimizer, for its lr, momentum and weight decay */
    int own_kind = -1;
    for (int i = 0; i < m.n_recipe; i++)
        if (!strcmp(m.recipe[i].key, "optimizer")) ct_optim_type_find(m.recipe[i].value, &own_kind);
    int other_opt = co->seen[O_OPT - O_MODEL] && own_kind >= 0 && own_kind != o->optim.kind, lr_taken = 0, rc = 0;
    char took[512] = "", over[256] = "", left[256] = "", item[96];
    for (int i = 0; i < m.n_recipe && !rc; i++) {
        const ct_recipe_entry *e = &m.recipe[i];
        char name[32];
        recipe_option(e->key, name, sizeof name);
        const opt_def *d = NULL;
        for (int k = 0; k < N_OPTS && !d; k++) if (!strcmp(opt_table[k].name, name)) d = &opt_table[k];
        CT_ASSERT(d); /* every key of ct_recipe_keys names an option */
        snprintf(item, sizeof item, "%s %s", name, e->value);
        if (co->seen[d->id - O_MODEL]) { note_add(over, sizeof over, name); continue; }
        if ((co->set && d->needs && (co->set->takes & d->needs) != d->needs) ||
            (other_opt && (d->id == O_LR || d->id == O_MOM || d->id == O_WD))) {
            note_add(left, sizeof left, name);
            continue;
        }
        /* a default, not a choice: a resumed run's checkpoint still decides lr, momentum, weight decay, lookahead */
        int lr_set = o->lr_set, mom_set = o->momentum_set, wd_set = o->wd_set, la_set = o->lookahead_set;
        unsigned given = o->given;
        if (!d->has_arg) {
            if (strcmp(e->value, "0") && strcmp(e->value, "1"))
                rc = ct_fail(CT_EINPUT, "--%s takes 1 (on) or 0 (off) as a training default, not '%s'", name, e->value);
            else if (!strcmp(e->value, "1") && (rc = train_opt(d->id, NULL, o)) == 1)
                rc = data_opt(d->id, NULL, co);
        } else {
            char *v = co->recipe_vals[i]; /* outlives m: --augment and --flip keep the text */
            snprintf(v, sizeof co->recipe_vals[i], "%s", e->value);
            if ((rc = train_opt(d->id, v, o)) == 1) rc = data_opt(d->id, v, co);
        }
        o->lr_set = lr_set, o->momentum_set = mom_set, o->wd_set = wd_set, o->lookahead_set = la_set, o->given = given;
        lr_taken |= d->id == O_LR;
        if (!rc) note_add(took, sizeof took, item);
        else {
            char why[512];
            snprintf(why, sizeof why, "%s", ct_last_error());
            rc = ct_fail(CT_EINPUT, "%s:%d: training default %s=%s in [net]: %s", m.name, e->line, e->key, e->value, why);
        }
    }
    if (!rc && !o->lr_set && !lr_taken) o->optim.lr = ct_optim_types[o->optim.kind]->default_lr; /* the model's optimizer's */
    if (!rc && took[0]) {
        snprintf(co->recipe_note, sizeof co->recipe_note, "training defaults from %s's [net]: %s%s%s%s%s", m.name, took,
                 over[0] ? "; given instead: " : "", over, left[0] ? "; not taken here: " : "", left);
        o->recipe_note = co->recipe_note;
    }
    ct_model_free(&m);
    return rc;
}

int cli_model_tta(cli_opts *co, const ct_model *m) {
    if (co->seen[O_TTA - O_MODEL]) return 0;
    for (int i = 0; i < m->n_recipe; i++)
        if (!strcmp(m->recipe[i].key, "tta")) return !ct_tta_parse(m->recipe[i].value, &co->train.tta);
    return 0;
}

int cli_check_model(const ct_train_opts *o, ct_prep *prep) {
    memset(prep, 0, sizeof *prep);
    ct_model probe;
    if (o->resume || o->init) { /* the checkpoint holds the model; one that does not load is ct_train's to report */
        ct_ckpt ck;
        if (ct_ckpt_load(&ck, o->resume ? o->resume : o->init)) return 0;
        if (!ct_model_parse(&probe, ck.cfg, ck.model_name)) *prep = probe.prep;
        ct_model_free(&probe);
        ct_ckpt_free(&ck);
        return 0;
    }
    int rc = ct_model_load(&probe, o->model);
    if (!rc) *prep = probe.prep;
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
