/* train/schedule.c: the learning-rate schedule (--schedule, --warmup): the
 * rate of global step g of total. Tested by tests/test_schedule.c. */
#include "cltrain/train.h"
#include <math.h>

double ct_schedule_lr(const ct_train_opts *o, int64_t g, int64_t total) {
    double lr = o->optim.lr;
    if (o->warmup > 0 && g < o->warmup) return lr * (double)(g + 1) / o->warmup;
    double t = total > o->warmup ? (double)(g - o->warmup) / (double)(total - o->warmup) : 1.0;
    if (o->schedule == CT_SCHED_STEP) lr *= t < 0.5 ? 1.0 : t < 0.75 ? 0.1 : 0.01;
    else if (o->schedule == CT_SCHED_COSINE) lr *= 0.5 * (1.0 + cos(3.14159265358979 * t));
    return lr;
}
