/* train/optcheck.c: the files a training run names, checked before any data
 * is loaded: --resume and a --model file must be regular files (a folder or
 * FIFO would read nonsense or block), and rank 0's outputs (--checkpoint,
 * --logdir) must be creatable now rather than at the first save an epoch
 * later; and the line a failed save ends training with. Depends on file.h. Tested by tests/badinput.sh. */
#include "cltrain/train.h"
#include "cltrain/common.h"
#include "cltrain/dist.h"
#include "cltrain/file.h"
#include <errno.h>
#include <string.h>
#include <sys/stat.h>

/* --model SPEC names a file (not a built-in) as ct_model_load decides it */
static int model_is_file(const char *spec) {
    size_t n = strlen(spec);
    return strchr(spec, '/') || (n > 4 && !strcmp(spec + n - 4, ".cfg"));
}

int ct_train_check_files(const ct_train_opts *o) {
    int rc;
    if (o->resume && (rc = ct_file_check(o->resume, "a checkpoint file for --resume"))) return rc;
    if (o->init && (rc = ct_file_check(o->init, "a checkpoint file for --init"))) return rc;
    if (o->init && o->resume)
        return ct_fail(CT_EINPUT, "--init %s and --resume %s: --resume continues a run, --init starts a new one; give one", o->init, o->resume);
    if (o->model && o->model_set && model_is_file(o->model) && (rc = ct_file_check(o->model, "a .cfg model file for --model")))
        return rc;
    if (ct_world.rank != 0) return 0; /* rank 0 alone writes */
    if (o->checkpoint && (rc = ct_file_probe_write(o->checkpoint, "--checkpoint"))) return rc;
    if (o->logdir) {
        struct stat st;
        if (stat(o->logdir, &st) == 0 && !S_ISDIR(st.st_mode))
            return ct_fail(CT_EINPUT, "--logdir %s: exists and is not a folder; give a folder for the logs", o->logdir);
        if (ct_mkdir_p(o->logdir))
            return ct_fail(CT_EINPUT, "--logdir %s: cannot create the folder (%s); give a writable path", o->logdir,
                           strerror(errno));
        char probe[4200];
        snprintf(probe, sizeof probe, "%s/metrics.csv", o->logdir);
        if ((rc = ct_file_probe_write(probe, "--logdir"))) return rc;
    }
    return 0;
}

int ct_train_save_failed(int64_t next_step) {
    char why[1024];
    snprintf(why, sizeof why, "%s", ct_last_error());
    return ct_fail(CT_EWRITE, "%s; training stopped after step %lld", why, (long long)next_step);
}
