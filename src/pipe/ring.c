/* ring.c: bounded lock-free SPSC and MPSC rings with futex sleeping (see ring.h).
 * Depends on C11 atomics, Linux futex(2) and common.h (error codes, asserts).
 * Tested by tests/test_ring.c (plain, TSan and ASan builds).
 *
 * Sleeping protocol (both rings, both directions). A side that cannot go
 * on (consumer: ring empty; producer: ring full) spins CT_RING_SPINS tries,
 * then, on its ct_ring_waitq q, whose futex word is state = epoch*2 | flag:
 *     A  s = fetch_or(q.state, 1) | 1     raise "a thread may sleep" (seq_cst)
 *     C  re-read the ring state           (seq_cst loads)
 *     D  if still blocked: futex_wait(&q.state, s)   -- sleeps only if state == s
 *        then retry the operation (spurious wake-ups are harmless)
 * The other side, after every change that may unblock (publishing an item,
 * freeing a slot, closing):
 *     X  the change itself                (seq_cst store or RMW)
 *     Y  t = q.state; if t has the flag:  (seq_cst load)
 *     Z      CAS t -> (t + 2) & ~1 (next epoch, flag clear); futex_wake(all)
 * No lost wake-up: A, C, X, Y are seq_cst, so they fall in one total order.
 * If Y comes after A, the flag is seen (or already cleared by another waker
 * after A, who then wakes everyone), so state moves away from s before a
 * futex_wake: futex_wait either finds state != s and returns at once, or is
 * already queued and is woken (the kernel compares and queues atomically
 * against wake). If Y comes before A, X precedes C, so C sees the change
 * and the thread does not sleep. The orders sit on the operations, not on
 * fences: ThreadSanitizer ignores standalone fences.
 * Cost: with the flag clear a waker does one load and no syscall. Clearing
 * the flag on wake means one syscall per sleep episode, not one per item
 * while the sleeper is being scheduled. A flag left up by a thread whose
 * re-check succeeded costs at most one spare wake. The epoch is 31 bits; a
 * missed wake would need exactly 2^31 wakes between A and D.
 * Trade-off: the wake is for all sleepers, so when several MPSC producers
 * sleep on a full ring, one freed cell wakes them all and all but one go
 * back to sleep (no spinning the second time). With a few producers and
 * batch-sized items that is a few context switches per batch. Waking one
 * instead needs a count of sleepers, and with a plain count every pop
 * made a wake syscall while a woken producer was being scheduled (4x10^6
 * syscalls for 4x10^6 items at capacity 1024, 2-4x slower than this).
 *
 * Close is a bit in the producers' index word (tail / enq), set with an
 * atomic OR, so a push either claimed its position before the close (and
 * will be delivered) or fails: no item is half-pushed at shutdown. The
 * consumer reports CT_RING_CLOSED only when closed and every claimed
 * position has been popped; an MPSC position claimed but not yet written
 * makes pop wait (the writer wakes it). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "cltrain/ring.h"
#include "cltrain/common.h"
#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#ifdef __linux__
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>
#else
#error "ring.c sleeps on a Linux futex; another OS needs a mutex+condvar ring_sleep/ring_wake"
#endif

/* Tries before sleeping. A futex sleep plus wake costs ~5-20 us of two
 * threads' time, so spin for about that long first: 1024 x (try + pause)
 * is ~10-20 us on this project's Xeon test machine (pause ~10 ns). One run
 * on its 2 cores, SPSC at capacity 2, 10^6 items: 64 spins 11.6 s (a sleep
 * every 3 items), 256 0.7 s, 1024 0.2 s (16 sleeps). Bounded, so a thread
 * blocked for long still sleeps within microseconds. -DCT_RING_SPINS=N. */
#ifndef CT_RING_SPINS
#define CT_RING_SPINS 1024
#endif
#define CT_RING_MAX_CAPACITY ((size_t)1 << 30)

#define LOAD(p, mo) atomic_load_explicit((p), memory_order_##mo)
#define STORE(p, v, mo) atomic_store_explicit((p), (v), memory_order_##mo)
#define ADD(p, v, mo) atomic_fetch_add_explicit((p), (v), memory_order_##mo)

static inline void cpu_pause(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__) || defined(__arm__)
    __asm__ __volatile__("yield" ::: "memory");
#endif
}

/* ---- sleeping and waking ------------------------------------------------ */

static void waitq_init(ct_ring_waitq *q) {
    atomic_init(&q->state, 0);
    atomic_init(&q->sleeps, 0);
    atomic_init(&q->wakes, 0);
}

/* Steps Y and Z of the protocol; the caller has just done X with seq_cst. */
static void waitq_wake(ct_ring_waitq *q) {
    uint32_t t = LOAD(&q->state, seq_cst);
    while (t & 1) {
        if (atomic_compare_exchange_weak_explicit(&q->state, &t, (t + 2) & ~1u, memory_order_seq_cst,
                                                  memory_order_seq_cst)) {
            ADD(&q->wakes, 1, relaxed);
            /* _Atomic uint32_t has the layout of uint32_t on every Linux ABI. */
            long rc = syscall(SYS_futex, (uint32_t *)&q->state, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
            if (rc < 0) ct_abort("futex wake failed", __FILE__, __LINE__);
            return;
        }
    }
}

/* The slow path shared by all four blocking calls. op is the try_ function;
 * blocked re-reads the state with seq_cst loads (step C) and says whether
 * sleeping is still right. Returns op's first result other than AGAIN.
 * Spins only before the first sleep: a woken thread that lost the race
 * goes straight back to sleep. */
typedef int (*ring_op)(void *ring, uint64_t *item);
typedef bool (*ring_blocked)(void *ring);

static int ring_block(void *ring, ct_ring_waitq *q, ring_op op, ring_blocked blocked, uint64_t *item) {
    for (int spin = 0;;) {
        int rc = op(ring, item);
        if (rc != CT_RING_AGAIN) return rc;
        if (spin < CT_RING_SPINS) {
            spin++;
            cpu_pause();
            continue;
        }
        uint32_t s = atomic_fetch_or_explicit(&q->state, 1, memory_order_seq_cst) | 1; /* A */
        if (!blocked(ring)) continue;                                                  /* C */
        ADD(&q->sleeps, 1, relaxed);
        long r = syscall(SYS_futex, (uint32_t *)&q->state, FUTEX_WAIT_PRIVATE, s, NULL, NULL, 0); /* D */
        /* EAGAIN: state moved on already; EINTR: a signal. Both mean: retry. */
        if (r != 0 && errno != EAGAIN && errno != EINTR) ct_abort("futex wait failed", __FILE__, __LINE__);
    }
}

static void *alloc_lines(size_t bytes) {
    bytes = (bytes + CT_CACHE_LINE - 1) / CT_CACHE_LINE * CT_CACHE_LINE;
    return aligned_alloc(CT_CACHE_LINE, bytes);
}

static int check_capacity(const char *what, size_t capacity) {
    if (capacity < 2 || capacity > CT_RING_MAX_CAPACITY || (capacity & (capacity - 1)) != 0)
        return ct_fail(CT_EINPUT, "%s capacity %zu: need a power of two from 2 to %zu", what,
                       capacity, CT_RING_MAX_CAPACITY);
    return CT_OK;
}

static void fill_stats(ct_ring_waitq *prod, ct_ring_waitq *cons, ct_ring_stats *out) {
    out->producer_sleeps = LOAD(&prod->sleeps, relaxed);
    out->consumer_sleeps = LOAD(&cons->sleeps, relaxed);
    out->producer_wakes = LOAD(&prod->wakes, relaxed);
    out->consumer_wakes = LOAD(&cons->wakes, relaxed);
}

/* ---- SPSC ---------------------------------------------------------------
 * tail = 2 * pushed | closed, written by the producer (CAS, so a concurrent
 * close is never overwritten) and by close (OR). head = popped, written by
 * the consumer. Slot i % capacity holds item i for head <= i < tail / 2. */

int ct_spsc_init(ct_spsc *r, size_t capacity) {
    CT_ASSERT(r != NULL);
    memset(r, 0, sizeof *r);
    int rc = check_capacity("spsc ring", capacity);
    if (rc != CT_OK) return rc;
    r->buf = alloc_lines(capacity * sizeof *r->buf);
    if (!r->buf) return ct_fail(CT_ENOMEM, "spsc ring: cannot allocate %zu items", capacity);
    r->mask = capacity - 1;
    atomic_init(&r->tail, 0);
    atomic_init(&r->head, 0);
    waitq_init(&r->nonempty);
    waitq_init(&r->nonfull);
    return CT_OK;
}

void ct_spsc_destroy(ct_spsc *r) {
    if (!r) return;
    free(r->buf);
    r->buf = NULL;
}

size_t ct_spsc_capacity(const ct_spsc *r) { return (size_t)r->mask + 1; }

int ct_spsc_try_push(ct_spsc *r, uint64_t item) {
    uint64_t t = LOAD(&r->tail, relaxed);            /* only we and close write it */
    if (t & 1) return CT_RING_CLOSED;
    uint64_t n = t >> 1;
    if (n - LOAD(&r->head, acquire) > r->mask) return CT_RING_AGAIN; /* acquire: the consumer is done with the slot */
    r->buf[n & r->mask] = item;                      /* slot is free and invisible to the consumer */
    /* X: publish (release for the slot) and order before the waiter check (seq_cst). */
    if (!atomic_compare_exchange_strong_explicit(&r->tail, &t, t + 2, memory_order_seq_cst,
                                                 memory_order_relaxed)) {
        CT_ASSERT(t & 1);  /* only close may change tail under a single producer */
        return CT_RING_CLOSED;
    }
    waitq_wake(&r->nonempty);
    return CT_OK;
}

int ct_spsc_try_pop(ct_spsc *r, uint64_t *item) {
    uint64_t h = LOAD(&r->head, relaxed);            /* only we write it */
    uint64_t t = LOAD(&r->tail, acquire);            /* acquire: the slot's contents */
    if ((t >> 1) == h) return (t & 1) ? CT_RING_CLOSED : CT_RING_AGAIN;
    *item = r->buf[h & r->mask];
    STORE(&r->head, h + 1, seq_cst);                 /* X: release the slot */
    waitq_wake(&r->nonfull);
    return CT_OK;
}

static int spsc_push_op(void *ring, uint64_t *item) { return ct_spsc_try_push(ring, *item); }
static int spsc_pop_op(void *ring, uint64_t *item) { return ct_spsc_try_pop(ring, item); }

static bool spsc_full(void *ring) {
    ct_spsc *r = ring;
    uint64_t h = LOAD(&r->head, seq_cst), t = LOAD(&r->tail, seq_cst);
    return !(t & 1) && (t >> 1) - h > r->mask;
}

static bool spsc_empty(void *ring) {
    ct_spsc *r = ring;
    uint64_t t = LOAD(&r->tail, seq_cst);
    return !(t & 1) && (t >> 1) == LOAD(&r->head, relaxed);
}

int ct_spsc_push(ct_spsc *r, uint64_t item) {
    int rc = ct_spsc_try_push(r, item);
    if (rc != CT_RING_AGAIN) return rc;
    return ring_block(r, &r->nonfull, spsc_push_op, spsc_full, &item);
}

int ct_spsc_pop(ct_spsc *r, uint64_t *item) {
    int rc = ct_spsc_try_pop(r, item);
    if (rc != CT_RING_AGAIN) return rc;
    return ring_block(r, &r->nonempty, spsc_pop_op, spsc_empty, item);
}

void ct_spsc_close(ct_spsc *r) {
    atomic_fetch_or_explicit(&r->tail, 1, memory_order_seq_cst); /* X for both sides */
    waitq_wake(&r->nonempty);
    waitq_wake(&r->nonfull);
}

size_t ct_spsc_count(ct_spsc *r) {
    uint64_t h = LOAD(&r->head, acquire);
    uint64_t n = (LOAD(&r->tail, acquire) >> 1) - h; /* head read first: never negative */
    return (size_t)(n > r->mask ? r->mask + 1 : n);
}

void ct_spsc_stats(ct_spsc *r, ct_ring_stats *out) { fill_stats(&r->nonfull, &r->nonempty, out); }

/* ---- MPSC (Dmitry Vyukov's bounded queue, single consumer) ---------------
 * enq = 2 * positions claimed | closed. A producer claims position p by CAS
 * on enq when cell p % capacity has seq == p (free), writes the item, then
 * sets seq = p + 1 (full). The consumer pops position d when cell d has
 * seq == d + 1, then sets seq = d + capacity (free for the next lap). The
 * CAS fails once close has set the bit, so no position is claimed after it. */

int ct_mpsc_init(ct_mpsc *r, size_t capacity) {
    CT_ASSERT(r != NULL);
    memset(r, 0, sizeof *r);
    int rc = check_capacity("mpsc ring", capacity);
    if (rc != CT_OK) return rc;
    r->cells = alloc_lines(capacity * sizeof *r->cells);
    if (!r->cells) return ct_fail(CT_ENOMEM, "mpsc ring: cannot allocate %zu cells", capacity);
    r->mask = capacity - 1;
    for (size_t i = 0; i < capacity; i++) {
        atomic_init(&r->cells[i].seq, i);
        r->cells[i].item = 0;
    }
    atomic_init(&r->enq, 0);
    atomic_init(&r->deq, 0);
    waitq_init(&r->nonempty);
    waitq_init(&r->nonfull);
    return CT_OK;
}

void ct_mpsc_destroy(ct_mpsc *r) {
    if (!r) return;
    free(r->cells);
    r->cells = NULL;
}

size_t ct_mpsc_capacity(const ct_mpsc *r) { return (size_t)r->mask + 1; }

int ct_mpsc_try_push(ct_mpsc *r, uint64_t item) {
    uint64_t e = LOAD(&r->enq, relaxed);
    ct_mpsc_cell *c;
    for (;;) {
        if (e & 1) return CT_RING_CLOSED;
        uint64_t p = e >> 1;
        c = &r->cells[p & r->mask];
        int64_t dif = (int64_t)(LOAD(&c->seq, acquire) - p); /* acquire: the consumer read the old item */
        if (dif == 0) {
            /* Relaxed is enough for the claim: the item travels through c->seq.
             * On failure e is reloaded (another producer won, or close). */
            if (atomic_compare_exchange_weak_explicit(&r->enq, &e, e + 2, memory_order_relaxed,
                                                      memory_order_relaxed))
                break;
        } else if (dif < 0) {
            return CT_RING_AGAIN;            /* cell still holds item p - capacity */
        } else {
            e = LOAD(&r->enq, relaxed);      /* p was claimed by someone else */
        }
    }
    c->item = item;
    STORE(&c->seq, (e >> 1) + 1, seq_cst);   /* X: publish */
    waitq_wake(&r->nonempty);
    return CT_OK;
}

int ct_mpsc_try_pop(ct_mpsc *r, uint64_t *item) {
    uint64_t d = LOAD(&r->deq, relaxed);      /* only we write it */
    ct_mpsc_cell *c = &r->cells[d & r->mask];
    if (LOAD(&c->seq, acquire) != d + 1) {
        /* Empty, or position d claimed but not written yet (then wait). */
        uint64_t e = LOAD(&r->enq, acquire);
        return ((e & 1) && (e >> 1) == d) ? CT_RING_CLOSED : CT_RING_AGAIN;
    }
    *item = c->item;
    STORE(&c->seq, d + r->mask + 1, seq_cst); /* X: free the cell for lap + 1 */
    STORE(&r->deq, d + 1, relaxed);
    waitq_wake(&r->nonfull);
    return CT_OK;
}

static int mpsc_push_op(void *ring, uint64_t *item) { return ct_mpsc_try_push(ring, *item); }
static int mpsc_pop_op(void *ring, uint64_t *item) { return ct_mpsc_try_pop(ring, item); }

/* Producers sleep while the cell at the current claim position is unread. */
static bool mpsc_full(void *ring) {
    ct_mpsc *r = ring;
    uint64_t e = LOAD(&r->enq, seq_cst);
    if (e & 1) return false;
    uint64_t p = e >> 1;
    return (int64_t)(LOAD(&r->cells[p & r->mask].seq, seq_cst) - p) < 0;
}

/* The consumer sleeps while its cell is unwritten, unless closed and drained. */
static bool mpsc_empty(void *ring) {
    ct_mpsc *r = ring;
    uint64_t d = LOAD(&r->deq, relaxed);
    if (LOAD(&r->cells[d & r->mask].seq, seq_cst) == d + 1) return false;
    uint64_t e = LOAD(&r->enq, seq_cst);
    return !((e & 1) && (e >> 1) == d);
}

int ct_mpsc_push(ct_mpsc *r, uint64_t item) {
    int rc = ct_mpsc_try_push(r, item);
    if (rc != CT_RING_AGAIN) return rc;
    return ring_block(r, &r->nonfull, mpsc_push_op, mpsc_full, &item);
}

int ct_mpsc_pop(ct_mpsc *r, uint64_t *item) {
    int rc = ct_mpsc_try_pop(r, item);
    if (rc != CT_RING_AGAIN) return rc;
    return ring_block(r, &r->nonempty, mpsc_pop_op, mpsc_empty, item);
}

void ct_mpsc_close(ct_mpsc *r) {
    atomic_fetch_or_explicit(&r->enq, 1, memory_order_seq_cst); /* X for both sides */
    waitq_wake(&r->nonempty);
    waitq_wake(&r->nonfull);
}

size_t ct_mpsc_count(ct_mpsc *r) {
    uint64_t d = LOAD(&r->deq, acquire);
    uint64_t n = (LOAD(&r->enq, acquire) >> 1) - d; /* claimed, possibly not yet written */
    return (size_t)(n > r->mask ? r->mask + 1 : n);
}

void ct_mpsc_stats(ct_mpsc *r, ct_ring_stats *out) { fill_stats(&r->nonfull, &r->nonempty, out); }
