/* test_schedule.c: learning-rate schedules (--schedule, --warmup). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <math.h>
#include <cmocka.h>
#include "cltrain/train.h"

static void test_schedules(void **state) {
    (void)state;
    ct_train_opts o;
    ct_train_defaults(&o);
    o.optim.lr = 0.1f;
    for (int g = 0; g < 100; g++) assert_float_equal(ct_schedule_lr(&o, g, 100), 0.1, 1e-7);
    o.warmup = 10;
    assert_float_equal(ct_schedule_lr(&o, 0, 110), 0.01, 1e-7);   /* warm-up starts at lr/warmup */
    assert_float_equal(ct_schedule_lr(&o, 9, 110), 0.1, 1e-7);    /* and reaches lr */
    o.schedule = CT_SCHED_STEP;
    assert_float_equal(ct_schedule_lr(&o, 10, 110), 0.1, 1e-7);
    assert_float_equal(ct_schedule_lr(&o, 60, 110), 0.01, 1e-7);
    assert_float_equal(ct_schedule_lr(&o, 90, 110), 0.001, 1e-7);
    o.schedule = CT_SCHED_COSINE;
    assert_float_equal(ct_schedule_lr(&o, 10, 110), 0.1, 1e-7);
    assert_float_equal(ct_schedule_lr(&o, 60, 110), 0.05, 1e-7);  /* half-way: half */
    assert_true(ct_schedule_lr(&o, 109, 110) < 0.001);
    double prev = 1;
    for (int g = 10; g < 110; g++) {
        double lr = ct_schedule_lr(&o, g, 110);
        assert_true(lr <= prev + 1e-12);
        prev = lr;
    }
}

/* triangle against airbench94's own construction (np.interp over the
 * points (0, 0.2), (int(0.23 total), 1), (total, 0.07)), in double */
static void test_triangle(void **state) {
    (void)state;
    ct_train_opts o;
    ct_train_defaults(&o);
    o.optim.lr = 0.5f;
    o.schedule = CT_SCHED_TRIANGLE;
    const int64_t total = 476;
    const double xp[3] = {0, (double)(int64_t)(0.23 * total), (double)total}, fp[3] = {0.2, 1.0, 0.07};
    for (int64_t g = 0; g <= total; g++) {
        int k = g < xp[1] ? 0 : 1;
        double want = 0.5 * (fp[k] + (fp[k + 1] - fp[k]) * ((double)g - xp[k]) / (xp[k + 1] - xp[k]));
        assert_float_equal(ct_schedule_lr(&o, g, total), want, 1e-9);
    }
    assert_float_equal(ct_schedule_lr(&o, 0, total), 0.1, 1e-12);
    assert_float_equal(ct_schedule_lr(&o, 109, total), 0.5, 1e-12); /* int(0.23 * 476) = 109 */
    o.warmup = 50;                                                 /* --warmup moves the peak */
    assert_float_equal(ct_schedule_lr(&o, 50, total), 0.5, 1e-12);
    assert_float_equal(ct_schedule_lr(&o, 25, total), 0.5 * 0.6, 1e-12);
    o.warmup = 0;
    assert_float_equal(ct_schedule_lr(&o, 0, 1), 0.1, 1e-12);      /* one step: the peak is step 1, never reached */
    assert_float_equal(ct_schedule_lr(&o, 1, 1), 0.5, 1e-12);
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_schedules), cmocka_unit_test(test_triangle)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
