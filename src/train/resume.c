/* train/resume.c: what --resume checks before a run goes on. The checkpoint
 * records the data set (kind, folder or files, classes, held-out share, class
 * names) and fixes what decides the data order (seed, batch size, samples per
 * epoch) and the optimizer whose state it holds. A different data set is
 * refused naming both; so is an option given now that contradicts what the
 * checkpoint fixes (given with the same value it is accepted). Every other
 * option applies to the resumed run as given: --lr, --momentum and
 * --weight-decay replace the checkpoint's, --epochs and --steps extend it.
 * Tested by tests/checkpoint.sh. */
#include "loop.h"
#include "cltrain/file.h"
#include <math.h>
#include <string.h>
#include <sys/stat.h>

static const char *shown(const char *s) { return s && *s ? s : "(not recorded)"; }

/* whether the recorded data path a and this run's b name different data: both
 * exist and are not the same file or folder (a path that no longer resolves,
 * data moved since, is left to the checks of kind, classes and counts) */
static int other_place(const char *a, const char *b) {
    struct stat st;
    if (!a[0] || !b || !strcmp(a, b)) return 0;
    return stat(a, &st) == 0 && stat(b, &st) == 0 && !ct_file_same(a, b);
}

static int check_data(const ct_train_opts *o, const ct_ckpt *ck, const ct_dataset *train) {
    const ct_ckpt_data *d = &ck->data;
    if (d->kind[0] && o->dataset && strcmp(d->kind, o->dataset))
        return ct_fail(CT_EINPUT, "%s: trained on %s (%s), this run reads %s (%s); resume on the data set it was trained on, "
                       "or start afresh without --resume", o->resume, d->kind, shown(d->path), o->dataset, shown(o->data_dir));
    if (other_place(d->path, o->data_dir))
        return ct_fail(CT_EINPUT, "%s: trained on %s at %s, this run reads %s; resume on the data it was trained on, or start "
                       "afresh without --resume", o->resume, shown(d->kind), d->path, o->data_dir);
    if (d->classes > 0 && d->classes != train->n_classes)
        return ct_fail(CT_EINPUT, "%s: trained on %d classes of %s, this run's data has %d; resume on the data set it was "
                       "trained on, or start afresh without --resume", o->resume, d->classes, shown(d->path), train->n_classes);
    if (d->kind[0] && !strcmp(d->kind, "images") && fabs(d->split - o->data_split) > 1e-6)
        return ct_fail(CT_EINPUT, "%s: trained with %g of each class held out for testing, this run %g; give --val-split %g "
                       "as in training", o->resume, d->split, o->data_split, d->split);
    for (int c = 0; ck->n_names && o->class_names && c < ck->n_names && c < train->n_classes; c++)
        if (strcmp(ck->class_names[c], o->class_names[c]))
            return ct_fail(CT_EINPUT, "%s: class %d is '%s' in the checkpoint, '%s' in this run's data; resume on the data set "
                           "it was trained on, or start afresh without --resume", o->resume, c, ck->class_names[c],
                           o->class_names[c]);
    return 0;
}

/* an option given now against the checkpoint's value of it */
static int fixed(const ct_train_opts *o, const char *opt, const char *now, const char *then, const char *why) {
    return ct_fail(CT_EINPUT, "--%s %s: %s was trained with %s, and a resumed run keeps it (%s); drop --%s or start afresh "
                   "without --resume", opt, now, o->resume, then, why, opt);
}

static int check_options(const ct_train_opts *o, const ct_ckpt *ck, const ct_dataset *train) {
    char now[64], then[64];
    if ((o->given & CT_GIVEN_SEED) && o->seed != ck->seed) {
        snprintf(now, sizeof now, "%llu", (unsigned long long)o->seed);
        snprintf(then, sizeof then, "--seed %llu", (unsigned long long)ck->seed);
        return fixed(o, "seed", now, then, "it fixes the data order");
    }
    if ((o->given & CT_GIVEN_BATCH) && o->batch != ck->batch) {
        snprintf(now, sizeof now, "%d", o->batch);
        snprintf(then, sizeof then, "--batch-size %d", ck->batch);
        return fixed(o, "batch-size", now, then, "it fixes the data order and the steps done");
    }
    int n = o->limit_train > 0 && o->limit_train < train->n ? o->limit_train : train->n;
    if ((o->given & CT_GIVEN_LIMIT_TRAIN) && n != ck->n_train) {
        snprintf(now, sizeof now, "%d", o->limit_train);
        snprintf(then, sizeof then, "%d samples per epoch", ck->n_train);
        return fixed(o, "limit-train", now, then, "it fixes the data order and the steps done");
    }
    if ((o->given & CT_GIVEN_DROP_LAST) && !ck->drop_last)
        return ct_fail(CT_EINPUT, "--drop-last: %s was trained with every batch of each epoch, and a resumed run keeps that (it "
                       "fixes the data order and the steps done); drop --drop-last or start afresh without --resume", o->resume);
    if ((o->given & CT_GIVEN_OPTIMIZER) && o->optim.kind != ck->opt_kind) {
        snprintf(then, sizeof then, "--optimizer %s", ct_optim_types[ck->opt_kind]->name);
        return fixed(o, "optimizer", ct_optim_types[o->optim.kind]->name, then, "its state is that optimizer's");
    }
    return 0;
}

int ct_resume_check(const ct_train_opts *o, const ct_ckpt *ck, const ct_dataset *train) {
    int rc = check_data(o, ck, train);
    return rc ? rc : check_options(o, ck, train);
}
