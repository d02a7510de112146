/* cli/main.c: `cltrain COMMAND [options]`, a thin client of libcltrain.
 * Commands are one table here, plus one training command per data set of
 * the data-set table (datasets.h: mnist, fashion-mnist, cifar10, cifar100,
 * images), all run by cmd_train. Options follow GNU conventions
 * (getopt_long, cli/opts.c). Exit codes: 0 success, 1 training failed (NaN,
 * device error), 2 bad usage or bad input. Tested by tests/cli.sh. */
#include <signal.h>
#include "cli.h"
#include "cltrain/dist.h"
#include <string.h>

static int cmd_devices(int argc, char **argv) {
    (void)argv;
    if (argc > 1) { ct_fail(CT_EINPUT, "devices takes no arguments"); return cli_fail(CT_EINPUT); }
    int rc = ct_cl_list(stdout);
    return rc ? cli_fail(rc) : 0;
}

static void devices_help(FILE *f) {
    fprintf(f, "Usage: cltrain devices\nList the OpenCL platforms and devices, numbered PLATFORM:DEVICE for --device.\n");
}
static void eval_help(FILE *f) { cli_print_command_help(f, CLI_EVAL, NULL); }
static void bench_help(FILE *f) { cli_print_command_help(f, CLI_BENCH, NULL); }
static void tune_help(FILE *f) { cli_print_command_help(f, CLI_TUNE, NULL); }

/* The commands besides the training ones (one per data set of datasets.h). */
static const struct {
    const char *name, *args, *help;
    int (*run)(int argc, char **argv);
    void (*usage)(FILE *f);    /* `cltrain NAME --help` */
} commands[] = {
    {"devices", "", "list OpenCL platforms and devices", cmd_devices, devices_help},
    {"pack", "DIR OUT", "decode and resize DIR's images (or TFRecord files, NumPy arrays) once into record shards", cmd_pack, cli_pack_help},
    {"eval", "CHECKPOINT", "test accuracy, per-class accuracy, confusion matrix", cmd_eval, eval_help},
    {"predict", "CHECKPOINT IMG...", "the top classes of each image, with probabilities", cmd_predict, cli_predict_help},
    {"export", "CHECKPOINT OUT.onnx", "the trained network as an ONNX model (raw 0..255 pixels in)", cmd_export, cli_export_help},
    {"bench", "WHAT", "measured figures as tables: kernels, train, pipeline, dist (under mpirun), images, probe", cmd_bench, bench_help},
    {"tune", "", "search conv algorithms and GEMM parameters for --model on this device", cmd_tune, tune_help},
    {"import", "MODEL.onnx OUT.ckpt", "an ONNX model (torch.onnx.export) as a checkpoint to predict, eval and train from", cmd_import, cli_import_help},
};
enum { N_COMMANDS = (int)(sizeof commands / sizeof *commands) };

/* `cltrain --help`: the commands from the two tables, then every option */
static void usage(FILE *f) {
    fprintf(f, "Usage: cltrain COMMAND [OPTIONS]   (cltrain COMMAND --help: that command's options)\n"
               "Train convolutional networks with hand-written OpenCL kernels.\n\nTraining commands:\n");
    char head[64];
    for (int i = 0; i < ct_n_datasets; i++) {
        snprintf(head, sizeof head, "%s%s%s", ct_datasets[i].name, *ct_datasets[i].args ? " " : "", ct_datasets[i].args);
        fprintf(f, "  %-29s%s [model %s]\n", head, ct_datasets[i].help, ct_datasets[i].model);
    }
    fprintf(f, "\nOther commands:\n");
    for (int i = 0; i < N_COMMANDS; i++) {
        snprintf(head, sizeof head, "%s%s%s", commands[i].name, *commands[i].args ? " " : "", commands[i].args);
        fprintf(f, "  %-29s%s\n", head, commands[i].help);
    }
    fprintf(f, "\nOptions of the training commands:\n");
    cli_print_options(f, CLI_TRAIN, NULL);
    fprintf(f, "  -V, --version           the version\n\n"
               "Data-parallel: `mpirun -np N cltrain ...` runs N ranks, one device each; --batch-size is per rank.\n"
               "Environment: CLTRAIN_DEVICE, CLTRAIN_DEBUG=1|2, CLTRAIN_SYNC=1, CLTRAIN_KERNEL_DIR,\n"
               "CLTRAIN_CACHE_DIR, CLTRAIN_GEMM=TM,NV,KCHUNK or local,TSM,TSN,TSK,WPTM,WPTN,VW,KCHUNK (see README).\n");
}

/* --help anywhere among a command's arguments (before a lone --) */
static int wants_help(int argc, char **argv) {
    for (int i = 1; i < argc && strcmp(argv[i], "--"); i++)
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) return 1;
    return 0;
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
    int help = wants_help(argc - 1, argv + 1);
    const ct_dataset_def *set = ct_dataset_find(cmd);
    if (set) {
        if (help) { cli_print_command_help(stdout, CLI_TRAIN, set); return 0; }
        return cmd_train(set, argc - 1, argv + 1);
    }
    for (int i = 0; i < N_COMMANDS; i++)
        if (!strcmp(cmd, commands[i].name)) {
            if (help) { commands[i].usage(stdout); return 0; }
            return commands[i].run(argc - 1, argv + 1);
        }
    ct_fail(CT_EINPUT, "unknown command '%s'; see `cltrain --help`", cmd);
    return cli_fail(CT_EINPUT);
}

int main(int argc, char **argv) {
    setvbuf(stdout, NULL, _IOLBF, 0); /* progress lines appear as they happen, also in a pipe or a log */
    /* past a file-size limit (ulimit -f) a write fails with EFBIG and cltrain reports it where it writes;
     * the default action would kill the process silently, also inside an OpenCL driver writing its own
     * kernel cache before training starts */
    signal(SIGXFSZ, SIG_IGN);
    /* under mpirun: one rank per process (dist.h); alone: no MPI at all */
    if (ct_dist_init(&argc, &argv)) return cli_fail(CT_EINPUT);
    int code = run(argc, argv);
    /* a failed rank ends the job: the others would wait for it forever */
    if (code && ct_world.size > 1) ct_dist_abort(code);
    ct_dist_finalize();
    return code;
}
