/* test_ring.c: the SPSC and MPSC rings of src/pipe/ring.c.
 * Depends on cmocka, pthreads and libcltrain (ring.c, err.c); no OpenCL.
 * Run: tests/run.sh build ring; under TSan: make tsan (or build-tsan/tests/test_ring).
 * Checks FIFO order and full/empty edges in one thread; tagged (producer,
 * sequence) items through threads at capacities 2 and 1024 with per-producer
 * order, exactly-once delivery and a checksum; pointers to slots recycled
 * through a ready ring and per-producer free rings (TSan sees the slot
 * contents handed over); close while producers or the consumer are asleep,
 * and close racing running producers; a blocked thread sleeps instead of
 * spinning (thread CPU time while blocked ~200 ms). A watchdog turns any
 * hang into a failed run instead of a stuck one. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "cltrain/common.h"
#include "cltrain/ring.h"
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#if defined(__SANITIZE_THREAD__)
#define TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define TSAN 1
#endif
#endif

/* TSan runs this code 3-10x slower and the machine has 2 shared cores, so
 * under TSan the stress tests move 10^5 items per producer, not 10^6: the
 * same code paths, fewer interleavings (-DSTRESS_N=1000000u passed under
 * TSan too, in ~16 s for the stress tests). */
#ifndef STRESS_N
#ifdef TSAN
#define STRESS_N 100000u
#else
#define STRESS_N 1000000u
#endif
#endif
#ifdef TSAN
#define ROUNDS 6
#else
#define ROUNDS 30
#endif
#define NPROD 4
#define JOIN_LIMIT_S 10.0  /* a blocked thread must return well within this after close */
#define STALL_S 10.0       /* the watchdog ends the run after this long without progress */

/* ---- helpers ------------------------------------------------------------- */

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static double thread_cpu_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void sleep_ms(double ms) {
    struct timespec ts = {(time_t)(ms / 1000), (long)(ms * 1e6) % 1000000000L};
    nanosleep(&ts, NULL);
}

/* A thread that does not finish means a lost wake-up: report and end the
 * process (cmocka cannot unwind a test whose threads still use its stack). */
static void join_or_die(pthread_t t, const char *what) {
    struct timespec dl;
    clock_gettime(CLOCK_REALTIME, &dl);
    dl.tv_sec += (time_t)JOIN_LIMIT_S;
    int rc = pthread_timedjoin_np(t, NULL, &dl);
    if (rc != 0) {
        fprintf(stderr, "# watchdog: %s did not return within %.0f s (hang / lost wake-up)\n", what,
                JOIN_LIMIT_S);
        fflush(NULL);
        _exit(1);
    }
}

/* The watchdog: consumers beat once per item, tests name their phase; a
 * thread of its own ends the process when nothing has moved for STALL_S
 * (a lost wake-up leaves every thread asleep, main included). */
static _Atomic uint64_t heartbeat;
static _Atomic(const char *) phase = "start";
static void beat(void) { atomic_fetch_add_explicit(&heartbeat, 1, memory_order_relaxed); }
#define PHASE() (atomic_store(&phase, __func__), beat())

static void *watchdog_main(void *arg) {
    (void)arg;
    uint64_t last = atomic_load(&heartbeat);
    double since = now_s();
    for (;;) {
        sleep_ms(100);
        uint64_t h = atomic_load(&heartbeat);
        if (h != last) {
            last = h;
            since = now_s();
        } else if (now_s() - since > STALL_S) {
            fprintf(stderr, "# watchdog: no progress for %.0f s in %s (hang / lost wake-up)\n", STALL_S,
                    atomic_load(&phase));
            fflush(NULL);
            _exit(1);
        }
    }
    return NULL;
}

/* Items carry (producer id + 1, sequence); the mix gives an order-free checksum. */
static uint64_t tag(unsigned id, uint64_t seq) { return ((uint64_t)(id + 1) << 40) | seq; }
static unsigned tag_id(uint64_t item) { return (unsigned)(item >> 40) - 1; }
static uint64_t tag_seq(uint64_t item) { return item & ((1ull << 40) - 1); }
static uint64_t mix(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* Both rings behind one interface so every test runs on both. */
typedef struct ring {
    bool multi;
    union {
        ct_spsc s;
        ct_mpsc m;
    } u;
} ring;

static int r_init(ring *r, bool multi, size_t cap) {
    r->multi = multi;
    return multi ? ct_mpsc_init(&r->u.m, cap) : ct_spsc_init(&r->u.s, cap);
}
static void r_destroy(ring *r) { r->multi ? ct_mpsc_destroy(&r->u.m) : ct_spsc_destroy(&r->u.s); }
static int r_push(ring *r, uint64_t v) { return r->multi ? ct_mpsc_push(&r->u.m, v) : ct_spsc_push(&r->u.s, v); }
static int r_try_push(ring *r, uint64_t v) {
    return r->multi ? ct_mpsc_try_push(&r->u.m, v) : ct_spsc_try_push(&r->u.s, v);
}
static int r_pop(ring *r, uint64_t *v) { return r->multi ? ct_mpsc_pop(&r->u.m, v) : ct_spsc_pop(&r->u.s, v); }
static int r_try_pop(ring *r, uint64_t *v) {
    return r->multi ? ct_mpsc_try_pop(&r->u.m, v) : ct_spsc_try_pop(&r->u.s, v);
}
static void r_close(ring *r) { r->multi ? ct_mpsc_close(&r->u.m) : ct_spsc_close(&r->u.s); }
static size_t r_count(ring *r) { return r->multi ? ct_mpsc_count(&r->u.m) : ct_spsc_count(&r->u.s); }
static size_t r_capacity(ring *r) {
    return r->multi ? ct_mpsc_capacity(&r->u.m) : ct_spsc_capacity(&r->u.s);
}
static ct_ring_stats r_stats(ring *r) {
    ct_ring_stats st;
    r->multi ? ct_mpsc_stats(&r->u.m, &st) : ct_spsc_stats(&r->u.s, &st);
    return st;
}

/* Poll until the ring reports at least n sleepers on one side. */
static void wait_sleepers(ring *r, bool producers, uint64_t n) {
    double end = now_s() + JOIN_LIMIT_S;
    for (;;) {
        ct_ring_stats st = r_stats(r);
        if ((producers ? st.producer_sleeps : st.consumer_sleeps) >= n) break;
        if (now_s() > end) {
            fprintf(stderr, "# watchdog: %s never went to sleep\n", producers ? "producers" : "consumer");
            _exit(1);
        }
        sleep_ms(1);
    }
    sleep_ms(20); /* let them reach the futex, not just the counter */
}

/* ---- single thread ------------------------------------------------------- */

static void test_capacity_checked(void **state) {
    (void)state;
    PHASE();
    static const size_t bad[] = {0, 1, 3, 6, 1000, 1025, ((size_t)1 << 30) + 1, (size_t)1 << 31};
    for (int multi = 0; multi < 2; multi++) {
        ring r;
        for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
            assert_int_equal(r_init(&r, multi, bad[i]), CT_EINPUT);
            r_destroy(&r); /* harmless after a failed init */
        }
        assert_non_null(strstr(ct_last_error(), "power of two"));
        static const size_t good[] = {2, 4, 1024};
        for (size_t i = 0; i < 3; i++) {
            assert_int_equal(r_init(&r, multi, good[i]), CT_OK);
            assert_int_equal(r_capacity(&r), good[i]);
            assert_int_equal(r_count(&r), 0);
            r_destroy(&r);
            r_destroy(&r); /* twice is allowed */
        }
    }
}

static void fifo_one_thread(bool multi, size_t cap) {
    ring r;
    uint64_t v = 0, next_in = 0, next_out = 0;
    assert_int_equal(r_init(&r, multi, cap), CT_OK);
    assert_int_equal(r_try_pop(&r, &v), CT_RING_AGAIN);
    /* Fill to the brim, one more is refused, drain in order: several laps. */
    for (int lap = 0; lap < 5; lap++) {
        for (size_t i = 0; i < cap; i++) {
            assert_int_equal(r_try_push(&r, 1000 + next_in++), CT_OK);
            assert_int_equal(r_count(&r), i + 1);
        }
        assert_int_equal(r_try_push(&r, 7), CT_RING_AGAIN);
        assert_int_equal(r_count(&r), cap);
        for (size_t i = 0; i < cap; i++) {
            assert_int_equal(r_try_pop(&r, &v), CT_OK);
            assert_int_equal(v, 1000 + next_out++);
        }
        assert_int_equal(r_try_pop(&r, &v), CT_RING_AGAIN);
    }
    /* Varying fill levels with the blocking calls (they must not block here). */
    for (int i = 0; i < 3000; i++) {
        size_t k = 1 + (size_t)(mix((uint64_t)i) % cap);
        for (size_t j = 0; j < k; j++) assert_int_equal(r_push(&r, 1000 + next_in++), CT_OK);
        size_t m = 1 + (size_t)(mix((uint64_t)i + 99) % k);
        for (size_t j = 0; j < m; j++) {
            assert_int_equal(r_pop(&r, &v), CT_OK);
            assert_int_equal(v, 1000 + next_out++);
        }
        while (r_try_pop(&r, &v) == CT_OK) assert_int_equal(v, 1000 + next_out++);
    }
    assert_int_equal(next_in, next_out);
    /* Full 64-bit values and pointers go through unchanged. */
    static int x;
    assert_int_equal(r_push(&r, UINT64_MAX), CT_OK);
    assert_int_equal(r_push(&r, ct_ring_from_ptr(&x)), CT_OK);
    assert_int_equal(r_pop(&r, &v), CT_OK);
    assert_true(v == UINT64_MAX);
    assert_int_equal(r_pop(&r, &v), CT_OK);
    assert_ptr_equal(ct_ring_to_ptr(v), &x);
    /* Nobody ever slept, so nobody made a wake syscall. */
    ct_ring_stats st = r_stats(&r);
    assert_int_equal(st.producer_sleeps + st.consumer_sleeps + st.producer_wakes + st.consumer_wakes, 0);
    r_destroy(&r);
}

static void test_fifo_spsc(void **state) {
    (void)state;
    PHASE();
    fifo_one_thread(false, 2);
    fifo_one_thread(false, 4);
    fifo_one_thread(false, 1024);
}

static void test_fifo_mpsc(void **state) {
    (void)state;
    PHASE();
    fifo_one_thread(true, 2);
    fifo_one_thread(true, 4);
    fifo_one_thread(true, 1024);
}

static void close_drains(bool multi) {
    ring r;
    uint64_t v;
    assert_int_equal(r_init(&r, multi, 4), CT_OK);
    for (uint64_t i = 0; i < 3; i++) assert_int_equal(r_push(&r, i), CT_OK);
    r_close(&r);
    r_close(&r); /* idempotent */
    assert_int_equal(r_push(&r, 9), CT_RING_CLOSED);
    assert_int_equal(r_try_push(&r, 9), CT_RING_CLOSED);
    assert_int_equal(r_count(&r), 3);
    assert_int_equal(r_try_pop(&r, &v), CT_OK);
    assert_int_equal(v, 0);
    for (uint64_t i = 1; i < 3; i++) {
        assert_int_equal(r_pop(&r, &v), CT_OK);
        assert_int_equal(v, i);
    }
    assert_int_equal(r_pop(&r, &v), CT_RING_CLOSED);
    assert_int_equal(r_try_pop(&r, &v), CT_RING_CLOSED);
    assert_int_equal(r_pop(&r, &v), CT_RING_CLOSED);
    r_destroy(&r);
    /* Closing a full ring: pushes refused at once, not blocked. */
    assert_int_equal(r_init(&r, multi, 2), CT_OK);
    assert_int_equal(r_push(&r, 1), CT_OK);
    assert_int_equal(r_push(&r, 2), CT_OK);
    r_close(&r);
    assert_int_equal(r_push(&r, 3), CT_RING_CLOSED);
    assert_int_equal(r_pop(&r, &v), CT_OK);
    assert_int_equal(r_pop(&r, &v), CT_OK);
    assert_int_equal(v, 2);
    assert_int_equal(r_pop(&r, &v), CT_RING_CLOSED);
    r_destroy(&r);
}

static void test_close_drains(void **state) {
    (void)state;
    PHASE();
    close_drains(false);
    close_drains(true);
}

/* ---- threads: stress ----------------------------------------------------- */

typedef struct producer {
    pthread_t th;
    ring *r;
    unsigned id;
    uint64_t n;          /* items to push; UINT64_MAX: until the ring closes */
    uint64_t pushed;     /* pushes that returned CT_OK */
    uint64_t sum;        /* checksum of those items */
    int last_rc;
    double wall, cpu;    /* for the sleep test */
} producer;

static void *producer_main(void *arg) {
    producer *p = arg;
    for (uint64_t i = 0; i < p->n; i++) {
        uint64_t item = tag(p->id, i);
        /* Every 4th item via try_push first, so both entry points are exercised. */
        int rc = (i & 3) == 3 ? r_try_push(p->r, item) : CT_RING_AGAIN;
        if (rc == CT_RING_AGAIN) rc = r_push(p->r, item);
        p->last_rc = rc;
        if (rc != CT_OK) break;
        p->pushed++;
        p->sum += mix(item);
    }
    return NULL;
}

typedef struct consumer {
    pthread_t th;
    ring *r;
    unsigned nprod;
    uint64_t next[NPROD];  /* next expected sequence per producer */
    uint64_t got, sum, bad;
    int last_rc;
    double wall, cpu;      /* for the sleep test */
} consumer;

/* Pops until CT_RING_CLOSED or `limit` items; counts any order violation in bad. */
static void consume(consumer *c, uint64_t limit) {
    uint64_t v;
    while (c->got < limit) {
        int rc = (c->got % 5 == 4) ? r_try_pop(c->r, &v) : CT_RING_AGAIN;
        if (rc == CT_RING_AGAIN) rc = r_pop(c->r, &v);
        c->last_rc = rc;
        if (rc != CT_OK) break;
        unsigned id = tag_id(v);
        if (id >= c->nprod || tag_seq(v) != c->next[id]) {
            if (c->bad++ < 5)
                fprintf(stderr, "# bad item: producer %u seq %llu, expected seq %llu\n", id,
                        (unsigned long long)tag_seq(v),
                        id < c->nprod ? (unsigned long long)c->next[id] : 0ull);
            if (id >= c->nprod) continue;
        }
        c->next[id] = tag_seq(v) + 1;
        c->got++;
        beat();
        c->sum += mix(v);
    }
}

static void *consumer_main(void *arg) {
    consume(arg, UINT64_MAX);
    return NULL;
}

static void stress(bool multi, unsigned nprod, size_t cap, uint64_t n) {
    ring r;
    producer p[NPROD];
    consumer c;
    memset(p, 0, sizeof p);
    memset(&c, 0, sizeof c);
    assert_int_equal(r_init(&r, multi, cap), CT_OK);
    double t0 = now_s();
    for (unsigned i = 0; i < nprod; i++) {
        p[i] = (producer){.r = &r, .id = i, .n = n};
        assert_int_equal(pthread_create(&p[i].th, NULL, producer_main, &p[i]), 0);
    }
    c.r = &r;
    c.nprod = nprod;
    consume(&c, (uint64_t)nprod * n);
    uint64_t sum = 0;
    for (unsigned i = 0; i < nprod; i++) {
        join_or_die(p[i].th, "producer");
        assert_int_equal(p[i].pushed, n);
        assert_int_equal(c.next[i], n);
        sum += p[i].sum;
    }
    assert_int_equal(c.bad, 0);
    assert_int_equal(c.got, (uint64_t)nprod * n);
    assert_true(c.sum == sum);
    /* Nothing left over, and the ring still closes cleanly. */
    uint64_t v;
    assert_int_equal(r_try_pop(&r, &v), CT_RING_AGAIN);
    r_close(&r);
    assert_int_equal(r_pop(&r, &v), CT_RING_CLOSED);
    ct_ring_stats st = r_stats(&r);
    print_message("# %s cap %zu: %u x %llu items in %.2f s; sleeps P %llu C %llu, wakes P %llu C %llu\n",
                  multi ? "mpsc" : "spsc", cap, nprod, (unsigned long long)n, now_s() - t0,
                  (unsigned long long)st.producer_sleeps, (unsigned long long)st.consumer_sleeps,
                  (unsigned long long)st.producer_wakes, (unsigned long long)st.consumer_wakes);
    r_destroy(&r);
}

static void test_spsc_stress_cap2(void **state) { (void)state; PHASE(); stress(false, 1, 2, STRESS_N); }
static void test_spsc_stress_cap1024(void **state) { (void)state; PHASE(); stress(false, 1, 1024, STRESS_N); }
/* 4 producers through 2 cells cost about one context switch per item once
 * the threads outnumber the cores (this machine has 2, shared): 10^6 items
 * in all here, 4 x 10^6 at capacity 1024. */
static void test_mpsc_stress_cap2(void **state) { (void)state; PHASE(); stress(true, NPROD, 2, STRESS_N / NPROD); }
static void test_mpsc_stress_cap1024(void **state) { (void)state; PHASE(); stress(true, NPROD, 1024, STRESS_N); }

/* ---- threads: pointers to slots, recycled as in the input pipeline ------ */

#define SLOT_WORDS 61
#define SLOTS_PER_PROD 3
typedef struct slot {
    unsigned owner;
    uint64_t seq;
    uint64_t data[SLOT_WORDS]; /* plain memory: TSan checks the rings order it */
} slot;

typedef struct slot_producer {
    pthread_t th;
    unsigned id;
    uint64_t n;
    ct_spsc free_ring;  /* consumer -> this producer */
    ct_mpsc *ready;     /* all producers -> consumer */
    slot slots[SLOTS_PER_PROD];
} slot_producer;

static void *slot_producer_main(void *arg) {
    slot_producer *p = arg;
    for (uint64_t k = 0; k < p->n; k++) {
        uint64_t v;
        if (ct_spsc_pop(&p->free_ring, &v) != CT_OK) return NULL;
        slot *s = ct_ring_to_ptr(v);
        s->seq = k;
        for (int w = 0; w < SLOT_WORDS; w++) s->data[w] = mix(tag(p->id, k) + (uint64_t)w);
        if (ct_mpsc_push(p->ready, ct_ring_from_ptr(s)) != CT_OK) return NULL;
    }
    return NULL;
}

static void test_slot_recycling(void **state) {
    (void)state;
    PHASE();
    enum { NP = 3 };
    const uint64_t n = STRESS_N / 20;
    ct_mpsc ready;
    slot_producer *p = aligned_alloc(CT_CACHE_LINE, NP * sizeof *p);
    assert_non_null(p);
    memset(p, 0, NP * sizeof *p);
    assert_int_equal(ct_mpsc_init(&ready, 4), CT_OK);
    for (unsigned i = 0; i < NP; i++) {
        p[i].id = i;
        p[i].n = n;
        p[i].ready = &ready;
        assert_int_equal(ct_spsc_init(&p[i].free_ring, 4), CT_OK);
        for (int j = 0; j < SLOTS_PER_PROD; j++) {
            p[i].slots[j].owner = i;
            assert_int_equal(ct_spsc_push(&p[i].free_ring, ct_ring_from_ptr(&p[i].slots[j])), CT_OK);
        }
        assert_int_equal(pthread_create(&p[i].th, NULL, slot_producer_main, &p[i]), 0);
    }
    uint64_t next[NP] = {0}, bad = 0;
    for (uint64_t got = 0; got < NP * n; got++) {
        uint64_t v;
        assert_int_equal(ct_mpsc_pop(&ready, &v), CT_OK);
        beat();
        slot *s = ct_ring_to_ptr(v);
        unsigned o = s->owner;
        assert_true(o < NP);
        if (s->seq != next[o]) bad++;
        for (int w = 0; w < SLOT_WORDS; w++)
            if (s->data[w] != mix(tag(o, s->seq) + (uint64_t)w)) bad++;
        next[o] = s->seq + 1;
        assert_int_equal(ct_spsc_push(&p[o].free_ring, v), CT_OK);
    }
    for (unsigned i = 0; i < NP; i++) {
        join_or_die(p[i].th, "slot producer");
        assert_int_equal(next[i], n);
        ct_spsc_close(&p[i].free_ring);
        ct_spsc_destroy(&p[i].free_ring);
    }
    assert_int_equal(bad, 0);
    ct_mpsc_close(&ready);
    ct_mpsc_destroy(&ready);
    free(p);
}

/* ---- threads: close and sleeping ------------------------------------------ */

/* Producers asleep on a full ring: close wakes them all with CT_RING_CLOSED,
 * and the consumer still drains what was queued. */
static void close_wakes_producers(bool multi) {
    ring r;
    unsigned np = multi ? 3 : 1;
    producer p[NPROD];
    memset(p, 0, sizeof p);
    assert_int_equal(r_init(&r, multi, 2), CT_OK);
    assert_int_equal(r_push(&r, tag(NPROD - 1, 0)), CT_OK);
    assert_int_equal(r_push(&r, tag(NPROD - 1, 1)), CT_OK);
    for (unsigned i = 0; i < np; i++) {
        p[i] = (producer){.r = &r, .id = i, .n = 1};
        assert_int_equal(pthread_create(&p[i].th, NULL, producer_main, &p[i]), 0);
    }
    wait_sleepers(&r, true, np);
    double t0 = now_s();
    r_close(&r);
    for (unsigned i = 0; i < np; i++) {
        join_or_die(p[i].th, "producer blocked on a full ring");
        assert_int_equal(p[i].last_rc, CT_RING_CLOSED);
        assert_int_equal(p[i].pushed, 0);
    }
    print_message("# %s: %u sleeping producers returned %.1f ms after close\n", multi ? "mpsc" : "spsc",
                  np, 1e3 * (now_s() - t0));
    uint64_t v;
    for (uint64_t i = 0; i < 2; i++) {
        assert_int_equal(r_pop(&r, &v), CT_OK);
        assert_int_equal(v, tag(NPROD - 1, i));
    }
    assert_int_equal(r_pop(&r, &v), CT_RING_CLOSED);
    r_destroy(&r);
}

static void test_close_wakes_producers(void **state) {
    (void)state;
    PHASE();
    close_wakes_producers(false);
    close_wakes_producers(true);
}

static void close_wakes_consumer(bool multi) {
    ring r;
    consumer c;
    memset(&c, 0, sizeof c);
    assert_int_equal(r_init(&r, multi, 1024), CT_OK);
    c.r = &r;
    c.nprod = 1;
    assert_int_equal(pthread_create(&c.th, NULL, consumer_main, &c), 0);
    wait_sleepers(&r, false, 1);
    double t0 = now_s();
    r_close(&r);
    join_or_die(c.th, "consumer blocked on an empty ring");
    assert_int_equal(c.last_rc, CT_RING_CLOSED);
    assert_int_equal(c.got, 0);
    print_message("# %s: sleeping consumer returned %.1f ms after close\n", multi ? "mpsc" : "spsc",
                  1e3 * (now_s() - t0));
    r_destroy(&r);
}

static void test_close_wakes_consumer(void **state) {
    (void)state;
    PHASE();
    close_wakes_consumer(false);
    close_wakes_consumer(true);
}

/* Close at an arbitrary moment while producers run flat out: every push that
 * returned CT_OK is delivered exactly once and in order, none after. */
static void close_races_pushes(bool multi) {
    unsigned np = multi ? NPROD : 1;
    uint64_t total = 0;
    for (int round = 0; round < ROUNDS; round++) {
        ring r;
        producer p[NPROD];
        consumer c;
        memset(p, 0, sizeof p);
        memset(&c, 0, sizeof c);
        assert_int_equal(r_init(&r, multi, round % 2 ? 2 : 64), CT_OK);
        c.r = &r;
        c.nprod = np;
        assert_int_equal(pthread_create(&c.th, NULL, consumer_main, &c), 0);
        for (unsigned i = 0; i < np; i++) {
            p[i] = (producer){.r = &r, .id = i, .n = UINT64_MAX};
            assert_int_equal(pthread_create(&p[i].th, NULL, producer_main, &p[i]), 0);
        }
        sleep_ms(0.5 + (double)(mix((uint64_t)round) % 3000) / 1000.0);
        r_close(&r);
        for (unsigned i = 0; i < np; i++) join_or_die(p[i].th, "producer racing close");
        join_or_die(c.th, "consumer racing close");
        assert_int_equal(c.last_rc, CT_RING_CLOSED);
        assert_int_equal(c.bad, 0);
        uint64_t sum = 0;
        for (unsigned i = 0; i < np; i++) {
            assert_int_equal(p[i].last_rc, CT_RING_CLOSED);
            assert_int_equal(c.next[i], p[i].pushed);
            sum += p[i].sum;
            total += p[i].pushed;
        }
        assert_true(c.sum == sum);
        r_destroy(&r);
    }
    print_message("# %s: %d closes raced %u producers (%llu items delivered)\n", multi ? "mpsc" : "spsc",
                  ROUNDS, np, (unsigned long long)total);
}

static void test_close_races_pushes(void **state) {
    (void)state;
    PHASE();
    close_races_pushes(false);
    close_races_pushes(true);
}

/* A consumer blocked on an empty ring and a producer blocked on a full one
 * must sleep, not spin: their thread CPU time stays far below the wall time. */
static void *timed_pop_main(void *arg) {
    consumer *c = arg;
    uint64_t v = 0;
    double w0 = now_s(), c0 = thread_cpu_s();
    c->last_rc = r_pop(c->r, &v);
    c->sum = v;
    c->got = 1;
    c->wall = now_s() - w0;
    c->cpu = thread_cpu_s() - c0;
    return NULL;
}

static void *timed_push_main(void *arg) {
    producer *p = arg;
    double w0 = now_s(), c0 = thread_cpu_s();
    p->last_rc = r_push(p->r, 77);
    p->wall = now_s() - w0;
    p->cpu = thread_cpu_s() - c0;
    return NULL;
}

static void blocked_threads_sleep(bool multi) {
    const double block_ms = 200;
    ring r;
    assert_int_equal(r_init(&r, multi, 2), CT_OK);
    /* Consumer on an empty ring, released by a push after ~200 ms. */
    consumer c;
    memset(&c, 0, sizeof c);
    c.r = &r;
    assert_int_equal(pthread_create(&c.th, NULL, timed_pop_main, &c), 0);
    sleep_ms(block_ms);
    assert_int_equal(r_push(&r, 42), CT_OK);
    join_or_die(c.th, "consumer waiting for an item");
    double wall = c.wall, cpu = c.cpu;
    assert_int_equal(c.last_rc, CT_OK);
    assert_int_equal(c.sum, 42);
    print_message("# %s consumer blocked %.0f ms wall, %.2f ms CPU\n", multi ? "mpsc" : "spsc", 1e3 * wall,
                  1e3 * cpu);
    assert_true(wall > 0.5 * block_ms / 1e3);
    assert_true(cpu < 0.1 * wall);
    ct_ring_stats st = r_stats(&r);
    assert_true(st.consumer_sleeps >= 1 && st.consumer_wakes >= 1);
    /* Producer on a full ring, released by a pop after ~200 ms. */
    uint64_t v;
    assert_int_equal(r_push(&r, 1), CT_OK);
    assert_int_equal(r_push(&r, 2), CT_OK);
    producer p = {.r = &r};
    assert_int_equal(pthread_create(&p.th, NULL, timed_push_main, &p), 0);
    sleep_ms(block_ms);
    assert_int_equal(r_pop(&r, &v), CT_OK);
    assert_int_equal(v, 1);
    join_or_die(p.th, "producer waiting for space");
    assert_int_equal(p.last_rc, CT_OK);
    print_message("# %s producer blocked %.0f ms wall, %.2f ms CPU\n", multi ? "mpsc" : "spsc",
                  1e3 * p.wall, 1e3 * p.cpu);
    assert_true(p.wall > 0.5 * block_ms / 1e3);
    assert_true(p.cpu < 0.1 * p.wall);
    st = r_stats(&r);
    assert_true(st.producer_sleeps >= 1 && st.producer_wakes >= 1);
    assert_int_equal(r_pop(&r, &v), CT_OK);
    assert_int_equal(v, 2);
    assert_int_equal(r_pop(&r, &v), CT_OK);
    assert_int_equal(v, 77);
    r_destroy(&r);
}

static void test_blocked_threads_sleep(void **state) {
    (void)state;
    PHASE();
    blocked_threads_sleep(false);
    blocked_threads_sleep(true);
}

/* Optional argument: a cmocka test-name pattern, e.g. test_ring '*stress*'. */
int main(int argc, char **argv) {
    if (argc > 1) cmocka_set_test_filter(argv[1]);
    pthread_t wd;
    if (pthread_create(&wd, NULL, watchdog_main, NULL) != 0 || pthread_detach(wd) != 0) return 1;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_capacity_checked),
        cmocka_unit_test(test_fifo_spsc),
        cmocka_unit_test(test_fifo_mpsc),
        cmocka_unit_test(test_close_drains),
        cmocka_unit_test(test_spsc_stress_cap2),
        cmocka_unit_test(test_spsc_stress_cap1024),
        cmocka_unit_test(test_mpsc_stress_cap2),
        cmocka_unit_test(test_mpsc_stress_cap1024),
        cmocka_unit_test(test_slot_recycling),
        cmocka_unit_test(test_close_wakes_producers),
        cmocka_unit_test(test_close_wakes_consumer),
        cmocka_unit_test(test_close_races_pushes),
        cmocka_unit_test(test_blocked_threads_sleep),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
