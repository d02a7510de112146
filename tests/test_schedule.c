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

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_schedules)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
