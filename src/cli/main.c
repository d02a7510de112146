/* cli/main.c: `cltrain COMMAND [options]`, a thin client of libcltrain.
 * Commands are one table here, plus one training command per data set of
 * the data-set table (datasets.h: mnist, fashion-mnist, cifar10, cifar100,
 * images), all run by cmd_train. Options follow GNU conventions
 * (getopt_long, cli/opts.c). Exit codes: 0 success, 1 training failed (NaN,
 * device error), 2 bad usage or bad input. Tested by tests/cli.sh. */
#include "cli.h"
#include "cltrain/dist.h"
#include <string.h>

static int cmd_devices(int argc, char **argv) {
    (void)argv;
    if (argc > 1) { ct_fail(CT_EINPUT, "devices takes no arguments"); return cli_fail(CT_EINPUT); }
    int rc = ct_cl_list(stdout);
    return rc ? cli_fail(rc) : 0;
}

static const struct { const char *name; int (*run)(int argc, char **argv); } commands[] = {
    {"devices", cmd_devices}, {"bench", cmd_bench},     {"tune", cmd_tune},     {"eval", cmd_eval},
    {"predict", cmd_predict}, {"pack", cmd_pack},       {"export", cmd_export},
};

static int run(int argc, char **argv) {
    if (argc < 2) {
        cli_usage(stderr);
        return 2;
    }
    const char *cmd = argv[1];
    if (!strcmp(cmd, "-h") || !strcmp(cmd, "--help") || !strcmp(cmd, "help")) { cli_usage(stdout); return 0; }
    if (!strcmp(cmd, "-V") || !strcmp(cmd, "--version")) {
        printf("cltrain %s (OpenCL 1.2; %s)\n", CT_VERSION, ct_dist_compiled() ? "data-parallel over mpi" : "built without MPI");
        return 0;
    }
    const ct_dataset_def *set = ct_dataset_find(cmd);
    if (set) return cmd_train(set, argc - 1, argv + 1);
    for (size_t i = 0; i < sizeof commands / sizeof *commands; i++)
        if (!strcmp(cmd, commands[i].name)) return commands[i].run(argc - 1, argv + 1);
    ct_fail(CT_EINPUT, "unknown command '%s'; see `cltrain --help`", cmd);
    return cli_fail(CT_EINPUT);
}

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
