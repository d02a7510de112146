/* ring.h: bounded lock-free rings that hand work between pipeline threads.
 *
 * ct_spsc: one producer thread, one consumer thread (head/tail indices).
 * ct_mpsc: any number of producer threads, one consumer thread (Vyukov's
 *          bounded queue: a sequence number per cell).
 * The blocking calls spin ~10-20 us when full/empty, then sleep on a Linux
 * futex: no CPU while blocked, and no syscall for a waker when nobody
 * sleeps (the no-lost-wake-up argument is in src/pipe/ring.c). close()
 * ends the stream. Depends on C11 <stdatomic.h> and Linux futex(2) only (no
 * OpenCL, no locks). Tested by tests/test_ring.c: FIFO semantics, tagged
 * stress at capacities 2 and 1024, close with blocked threads, blocked
 * threads burn no CPU; run under TSan and ASan too.
 *
 * Items are uint64_t. The main use is a pointer to a slot struct: pass it
 * through ct_ring_from_ptr / ct_ring_to_ptr, or pass a slot index.
 *
 * Return codes: CT_OK (0), CT_RING_AGAIN (try_* only: the ring is full for
 * a push, empty for a pop), CT_RING_CLOSED (push: the ring is closed, the
 * item was not queued; pop: closed and every queued item already popped).
 * Both are positive so they never collide with the negative CT_E* errors:
 * they are states of the stream, not failures. Init returns CT_EINPUT
 * (capacity not a power of two in [2, 2^30]) or CT_ENOMEM.
 *
 * Threading contract: push/try_push from the producer thread(s) only
 * (exactly one for ct_spsc), pop/try_pop from the single consumer thread
 * only; close, count and stats from any thread; init/destroy while no
 * other thread uses the ring. Every push that returned CT_OK is delivered
 * exactly once, in push order per producer, even if close came right after
 * it. A consumer may stop early: close, join the producers, destroy.
 * Nothing is allocated after init. The futexes are process-private: do not
 * place a ring in memory shared between processes.
 *
 * The structs are public only so they can be embedded; touch no field.
 * They are 64-byte aligned (indices written by different threads sit on
 * different cache lines): allocate one on the heap with aligned_alloc(64, ...)
 * or inside a struct that is itself allocated that way. */
#ifndef CLTRAIN_RING_H
#define CLTRAIN_RING_H
#include <stdalign.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#define CT_CACHE_LINE 64

enum {
    CT_RING_AGAIN = 1,   /* try_push: full; try_pop: empty (not closed) */
    CT_RING_CLOSED = 2,  /* push: ring closed; pop: closed and drained */
};

_Static_assert(sizeof(void *) <= sizeof(uint64_t), "a pointer must fit in a ring item");
static inline uint64_t ct_ring_from_ptr(void *p) { return (uint64_t)(uintptr_t)p; }
static inline void *ct_ring_to_ptr(uint64_t item) { return (void *)(uintptr_t)item; }

/* Where one side (producers or the consumer) sleeps. Private. */
typedef struct ct_ring_waitq {
    _Atomic uint32_t state;    /* futex word: wake epoch << 1 | "a thread may sleep" bit */
    _Atomic uint64_t sleeps;   /* futex waits entered (statistics) */
    _Atomic uint64_t wakes;    /* futex wake calls made for this side (statistics) */
} ct_ring_waitq;

/* Counters since init, for diagnostics and tests; read without locking. */
typedef struct ct_ring_stats {
    uint64_t producer_sleeps;   /* times a producer went to sleep on a full ring */
    uint64_t consumer_sleeps;   /* times the consumer went to sleep on an empty ring */
    uint64_t producer_wakes;    /* wake syscalls aimed at sleeping producers */
    uint64_t consumer_wakes;    /* wake syscalls aimed at the sleeping consumer */
} ct_ring_stats;

/* ---- single producer, single consumer ---------------------------------- */

typedef struct ct_spsc {
    alignas(CT_CACHE_LINE) _Atomic uint64_t tail; /* 2 * items pushed | closed bit */
    ct_ring_waitq nonempty;                       /* the consumer sleeps here */
    alignas(CT_CACHE_LINE) _Atomic uint64_t head; /* items popped */
    ct_ring_waitq nonfull;                        /* the producer sleeps here */
    alignas(CT_CACHE_LINE) uint64_t *buf;
    uint64_t mask;                                /* capacity - 1 */
} ct_spsc;

/* capacity: a power of two in [2, 2^30]. Allocates the buffer. */
int ct_spsc_init(ct_spsc *r, size_t capacity);
/* Frees the buffer; no thread may be using the ring. Safe to call twice. */
void ct_spsc_destroy(ct_spsc *r);
/* Blocks while full. CT_OK or CT_RING_CLOSED. */
int ct_spsc_push(ct_spsc *r, uint64_t item);
/* Never blocks. CT_OK, CT_RING_AGAIN (full) or CT_RING_CLOSED. */
int ct_spsc_try_push(ct_spsc *r, uint64_t item);
/* Blocks while empty and open. CT_OK (*item set) or CT_RING_CLOSED. */
int ct_spsc_pop(ct_spsc *r, uint64_t *item);
/* Never blocks. CT_OK (*item set), CT_RING_AGAIN (empty) or CT_RING_CLOSED. */
int ct_spsc_try_pop(ct_spsc *r, uint64_t *item);
/* Refuse further pushes and wake every sleeper. Idempotent, any thread. */
void ct_spsc_close(ct_spsc *r);
/* Items queued now (a snapshot; exact only when both sides are idle). */
size_t ct_spsc_count(ct_spsc *r);
size_t ct_spsc_capacity(const ct_spsc *r);
void ct_spsc_stats(ct_spsc *r, ct_ring_stats *out);

/* ---- multiple producers, single consumer ------------------------------- */

typedef struct ct_mpsc_cell {
    _Atomic uint64_t seq; /* == pos: free for push #pos; == pos + 1: holds item #pos */
    uint64_t item;
} ct_mpsc_cell;

typedef struct ct_mpsc {
    alignas(CT_CACHE_LINE) _Atomic uint64_t enq; /* 2 * positions claimed | closed bit */
    ct_ring_waitq nonempty;                      /* the consumer sleeps here */
    alignas(CT_CACHE_LINE) _Atomic uint64_t deq; /* items popped (written by the consumer) */
    ct_ring_waitq nonfull;                       /* producers sleep here */
    alignas(CT_CACHE_LINE) ct_mpsc_cell *cells;
    uint64_t mask;                               /* capacity - 1 */
} ct_mpsc;

/* Same contracts as the ct_spsc functions above, with many producers. */
int ct_mpsc_init(ct_mpsc *r, size_t capacity);
void ct_mpsc_destroy(ct_mpsc *r);
int ct_mpsc_push(ct_mpsc *r, uint64_t item);
int ct_mpsc_try_push(ct_mpsc *r, uint64_t item);
int ct_mpsc_pop(ct_mpsc *r, uint64_t *item);
int ct_mpsc_try_pop(ct_mpsc *r, uint64_t *item);
void ct_mpsc_close(ct_mpsc *r);
size_t ct_mpsc_count(ct_mpsc *r);
size_t ct_mpsc_capacity(const ct_mpsc *r);
void ct_mpsc_stats(ct_mpsc *r, ct_ring_stats *out);

#endif
