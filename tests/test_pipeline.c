/* test_pipeline.c: the input pipeline. Batches arrive in order and equal
 * what ct_batch_fill makes for any producer count (several epochs, a short
 * last batch); a producer that hits a bad record stops the run with its
 * message instead of hanging; stopping early with producers blocked returns
 * at once; and training with --producers 0, 1, 3, 8 and --resident gives
 * bit-identical weights. */
#include "ct_test.h"
#include "cltrain/pipeline.h"
#include "cltrain/train.h"
#include <signal.h>
#include <unistd.h>

typedef struct { int h, w, fail_at; } fake_ctx;

/* sample i: values from i and from the augmentation random numbers */
static int fake_load(void *ctx, int index, float *dst, int32_t *label, ct_rng *rng) {
    fake_ctx *c = ctx;
    if (index == c->fail_at || c->fail_at == -2) return ct_fail(CT_EINPUT, "fake.bin: record %d is corrupt", index);
    for (int k = 0; k < c->h * c->w; k++) dst[k] = (float)index + ct_rng_uniform(rng);
    *label = index % 7;
    return 0;
}

static void check_order_drop(int producers, int prefetch, int n, int batch, int epochs, int drop_last) {
    fake_ctx fc = {3, 5, -1};
    ct_source src = {.n = n, .h = 3, .w = 5, .c = 1, .n_classes = 7, .ctx = &fc, .load = fake_load};
    int spe = drop_last ? n / batch : (n + batch - 1) / batch;
    assert_int_equal(ct_steps_per_epoch(n, batch, drop_last), spe);
    ct_pipeline_opts o = {.producers = producers, .prefetch = prefetch, .batch = batch, .seed = 42, .n = n,
                          .first_batch = 0, .total_batches = (int64_t)spe * epochs, .drop_last = drop_last};
    int *perm = malloc(sizeof(int) * (size_t)n);
    ct_pipeline p;
    assert_int_equal(ct_pipeline_start(&p, &src, &o, NULL), 0);
    float *want = malloc(sizeof(float) * 15 * batch);
    int32_t *wl = malloc(sizeof(int32_t) * batch);
    int64_t g = 0;
    ct_slot *s;
    int rc;
    while ((rc = ct_pipeline_next(&p, &s)) == CT_OK) {
        int B;
        assert_int_equal(s->seq, g);
        if (drop_last) {
            /* every batch whole, taken from the epoch's order over all n samples */
            assert_int_equal(ct_batch_fill_part(&src, 42, n, batch, 0, 1, g, NULL, want, wl, &B, 1), 0);
            assert_int_equal(B, batch);
            ct_epoch_order(perm, n, 42, (int)(g / spe));
            for (int j = 0; j < B; j++) assert_int_equal(wl[j], perm[(g % spe) * batch + j] % 7);
        } else
            assert_int_equal(ct_batch_fill(&src, 42, n, batch, g, NULL, want, wl, &B), 0);
        assert_int_equal(s->B, B);
        assert_memory_equal(s->images, want, sizeof(float) * 15 * B);
        assert_memory_equal(s->labels, wl, sizeof(int32_t) * B);
        ct_pipeline_release(&p, s);
        g++;
    }
    assert_int_equal(rc, CT_RING_CLOSED);
    assert_int_equal(g, o.total_batches);
    ct_pipeline_stats st;
    ct_pipeline_stats_get(&p, &st);
    assert_int_equal(st.images, drop_last ? (long)spe * batch * epochs : (long)n * epochs);
    ct_pipeline_stop(&p);
    free(perm);
    free(want);
    free(wl);
}

static void check_order(int producers, int prefetch, int n, int batch, int epochs) {
    check_order_drop(producers, prefetch, n, batch, epochs, 0);
}

static void test_order_any_producer_count(void **state) {
    (void)state;
    check_order_drop(3, 0, 103, 10, 3, 1);  /* --drop-last: 10 whole batches per epoch */
    check_order_drop(2, 0, 100, 10, 2, 1);  /* nothing to drop */
    for (int pr = 1; pr <= 8; pr *= 2) check_order(pr, 0, 103, 10, 3);
    check_order(3, 2, 103, 10, 2);  /* fewer slots asked than 2 per producer: rounded up */
    check_order(5, 40, 64, 64, 2);  /* one batch per epoch, more producers than batches in flight */
    check_order(2, 0, 1, 4, 3);     /* a one-sample data set */
}

static void test_epoch_order_is_permutation(void **state) {
    (void)state;
    int n = 1000, perm[1000], seen[1000] = {0}, other[1000];
    ct_epoch_order(perm, n, 7, 0);
    ct_epoch_order(other, n, 7, 1);
    for (int i = 0; i < n; i++) seen[perm[i]]++;
    for (int i = 0; i < n; i++) assert_int_equal(seen[i], 1);
    assert_memory_not_equal(perm, other, sizeof perm);
}

static void test_bad_record_stops(void **state) {
    (void)state;
    alarm(30); /* a hang fails the test instead of blocking the suite */
    fake_ctx fc = {3, 5, 57};
    ct_source src = {.n = 100, .h = 3, .w = 5, .c = 1, .n_classes = 7, .ctx = &fc, .load = fake_load};
    ct_pipeline_opts o = {.producers = 4, .batch = 8, .seed = 1, .n = 100, .total_batches = 13 * 5};
    ct_pipeline p;
    assert_int_equal(ct_pipeline_start(&p, &src, &o, NULL), 0);
    ct_slot *s;
    int rc, got = 0;
    while ((rc = ct_pipeline_next(&p, &s)) == CT_OK) {
        ct_pipeline_release(&p, s);
        got++;
    }
    assert_int_equal(rc, CT_EINPUT);
    assert_non_null(strstr(ct_last_error(), "fake.bin: record 57"));
    assert_true(got < 13); /* record 57 is in the first epoch */
    ct_pipeline_stop(&p);
    alarm(0);
}

/* Every producer fails on its first record at once: the consumer must get the
 * first error's whole message even when a second producer closes the ring while
 * the first is still writing it (a data race ThreadSanitizer caught in CI). */
static void test_all_producers_fail(void **state) {
    (void)state;
    alarm(30);
    for (int round = 0; round < 50; round++) {
        fake_ctx fc = {3, 5, -2};
        ct_source src = {.n = 64, .h = 3, .w = 5, .c = 1, .n_classes = 7, .ctx = &fc, .load = fake_load};
        ct_pipeline_opts o = {.producers = 8, .batch = 4, .seed = (uint64_t)round, .n = 64, .total_batches = 16};
        ct_pipeline p;
        assert_int_equal(ct_pipeline_start(&p, &src, &o, NULL), 0);
        ct_slot *s;
        assert_int_equal(ct_pipeline_next(&p, &s), CT_EINPUT);
        assert_non_null(strstr(ct_last_error(), "fake.bin: record "));
        assert_non_null(strstr(ct_last_error(), " is corrupt"));
        ct_pipeline_stop(&p);
    }
    alarm(0);
}

static void test_stop_early(void **state) {
    (void)state;
    alarm(30);
    fake_ctx fc = {3, 5, -1};
    ct_source src = {.n = 1000, .h = 3, .w = 5, .c = 1, .n_classes = 7, .ctx = &fc, .load = fake_load};
    ct_pipeline_opts o = {.producers = 3, .batch = 10, .seed = 1, .n = 1000, .total_batches = 100000};
    ct_pipeline p;
    assert_int_equal(ct_pipeline_start(&p, &src, &o, NULL), 0);
    ct_slot *s;
    assert_int_equal(ct_pipeline_next(&p, &s), CT_OK);
    usleep(100000); /* producers fill every slot and block on their free rings */
    double t0 = ct_now();
    ct_pipeline_stop(&p);
    assert_true(ct_now() - t0 < 1.0);
    alarm(0);
}

static void test_weights_identical_across_modes(void **state) {
    (void)state;
    CT_NEED_CL();
    ct_dataset train = {0};
    if (ct_mnist_load(&train, NULL, "/usr/share/datasets/fashion-mnist", CT_FASHION_MNIST, 0)) skip();
    const struct { int producers, resident; } modes[] = {{0, 0}, {1, 0}, {3, 0}, {8, 0}, {0, 1}, {-1, 0}};
    float *first = NULL;
    size_t np = 0;
    for (size_t k = 0; k < sizeof modes / sizeof *modes; k++) {
        ct_train_opts o;
        ct_train_defaults(&o);
        o.batch = 32;
        o.limit_train = 200; /* 7 steps per epoch, the last one short */
        o.epochs = 2;
        o.quiet = 2;
        o.keep_params = 1;
        o.producers = modes[k].producers;
        o.resident = modes[k].resident;
        ct_train_result r;
        assert_int_equal(ct_train(&o, &train, NULL, &r, stderr), 0);
        assert_int_equal(r.steps, 14);
        if (!first) {
            first = r.params;
            np = r.n_params;
        } else {
            assert_int_equal(r.n_params, np);
            size_t diff = 0;
            for (size_t i = 0; i < np; i++) diff += memcmp(&first[i], &r.params[i], 4) != 0;
            fprintf(stderr, "# producers %d resident %d: %zu of %zu parameters differ\n", modes[k].producers, modes[k].resident, diff, np);
            assert_int_equal(diff, 0);
            free(r.params);
        }
    }
    free(first);
    ct_dataset_free(&train);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_order_any_producer_count),
        cmocka_unit_test(test_epoch_order_is_permutation),
        cmocka_unit_test(test_bad_record_stops),
        cmocka_unit_test(test_all_producers_fail),
        cmocka_unit_test(test_stop_early),
        cmocka_unit_test(test_weights_identical_across_modes),
    };
    return cmocka_run_group_tests(tests, ct_test_open, ct_test_close);
}
