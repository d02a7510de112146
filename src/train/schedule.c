/* train/schedule.c: the learning-rate schedule (--schedule, --warmup): the
 * rate of global step g of total. triangle is airbench94's (Jordan 2024). Tested by tests/test_schedule.c. */
#include "cltrain/train.h"
#include <math.h>

double ct_schedule_lr(const ct_train_opts *o, int64_t g, int64_t total) {
    double lr = o->optim.lr;
    if (o->schedule == CT_SCHED_TRIANGLE) {
        /* airbench94's: 0.2 lr at step 0, lr at the peak, 0.07 lr at the end, linear in between */
        int64_t peak = o->warmup > 0 ? o->warmup : (int64_t)(0.23 * (double)total);
        if (peak < 1) peak = 1;
        if (g < peak) return lr * (0.2 + 0.8 * (double)g / (double)peak);
        if (total <= peak) return lr;
        return lr * (1.0 - 0.93 * (double)(g - peak) / (double)(total - peak));
    }
    if (o->warmup > 0 && g < o->warmup) return lr * (double)(g + 1) / o->warmup;
    double t = total > o->warmup ? (double)(g - o->warmup) / (double)(total - o->warmup) : 1.0;
    if (o->schedule == CT_SCHED_STEP) lr *= t < 0.5 ? 1.0 : t < 0.75 ? 0.1 : 0.01;
    else if (o->schedule == CT_SCHED_COSINE) lr *= 0.5 * (1.0 + cos(3.14159265358979 * t));
    return lr;
}
