/* pipe/pipeline.c: producer threads, pinned slots, in-order delivery.
 * Producer p makes global batches p, p+N, p+2N, ... in that order, taking
 * slots from its own free ring (trainer -> p, SPSC) and publishing them on
 * the shared ready ring (MPSC). The trainer wants batch g = next_seq; slots
 * that arrive early wait in a window of n_slots entries. No deadlock: the
 * producer of batch g makes it next, and all its earlier slots have been
 * consumed. Nothing is allocated after start.
 * Depends on ring.h, cl.h (pinned buffers; works without a device too).
 * Tested by tests/test_pipeline.c. */
#include "cltrain/pipeline.h"
#include <sched.h>
#include <string.h>
#include <time.h>

static size_t pow2_at_least(size_t x) {
    size_t c = 2;
    while (c < x) c <<= 1;
    return c;
}

void ct_epoch_order(int *perm, int n, uint64_t seed, int epoch) {
    ct_rng r = ct_rng_make(seed, 0xE90C, (uint64_t)epoch);
    for (int i = 0; i < n; i++) perm[i] = i;
    for (int i = n - 1; i > 0; i--) {
        int j = (int)ct_rng_below(&r, (uint32_t)i + 1);
        int t = perm[i]; perm[i] = perm[j]; perm[j] = t;
    }
}

static void sleep_us(long us) {
    if (us <= 0) return;
    struct timespec ts = {us / 1000000, (us % 1000000) * 1000};
    while (nanosleep(&ts, &ts)) {}
}

int ct_batch_part(int n, int batch, int part, int parts, int64_t seq, int64_t *first, int drop_last) {
    int64_t gb = (int64_t)batch * parts; /* the global batch */
    int64_t spe = ct_steps_per_epoch(n, gb, drop_last);
    int64_t at = (seq % spe) * gb + (int64_t)part * batch, left = n - at;
    if (first) *first = at;
    return left <= 0 ? 0 : left < batch ? (int)left : batch;
}

int ct_batch_fill_part(const ct_source *src, uint64_t seed, int n, int batch, int part, int parts, int64_t seq,
                       const int *perm, float *images, int32_t *labels, int *B_out, int drop_last) {
    int64_t gb = (int64_t)batch * parts, first;
    int epoch = (int)(seq / ct_steps_per_epoch(n, gb, drop_last));
    int B = ct_batch_part(n, batch, part, parts, seq, &first, drop_last);
    int *own = NULL;
    if (!perm && B) {
        own = ct_xmalloc(sizeof(int) * (size_t)n);
        ct_epoch_order(own, n, seed, epoch);
        perm = own;
    }
    size_t sz = (size_t)src->h * src->w * src->c;
    int rc = 0;
    for (int j = 0; j < B && !rc; j++) {
        /* random numbers by position in the global batch: any split augments alike */
        ct_rng r = ct_rng_make(seed ^ 0xA06D1A7Aull, (uint64_t)epoch, (uint64_t)(first + j));
        ct_rng f = ct_rng_make(seed ^ 0xF11Bull, 0, (uint64_t)perm[first + j]); /* by image, not position */
        r.epoch = epoch;
        r.fixed = ct_rng_next(&f);
        rc = src->load(src->ctx, perm[first + j], images + (size_t)j * sz, labels + j, &r);
    }
    /* simulated storage latency, slept once per batch (per-sample sleeps would add syscall jitter) */
    if (!rc) sleep_us((long)src->io_latency_us * B);
    free(own);
    *B_out = B;
    return rc;
}

int ct_batch_fill(const ct_source *src, uint64_t seed, int n, int batch, int64_t seq, const int *perm,
                  float *images, int32_t *labels, int *B_out) {
    return ct_batch_fill_part(src, seed, n, batch, 0, 1, seq, perm, images, labels, B_out, 0);
}

typedef struct { ct_pipeline *p; int id; } worker_arg;

/* The first failing producer writes error[] and then publishes its code; every
 * producer closes the ready ring only after a code is published, so a consumer
 * that sees the ring closed reads a finished message (it was read half-written
 * when a second producer's close overtook the first one's snprintf). */
static void record_error(ct_pipeline *p, int code) {
    int expected = 0;
    if (atomic_compare_exchange_strong_explicit(&p->failing, &expected, 1, memory_order_acq_rel, memory_order_acquire)) {
        snprintf(p->error, sizeof p->error, "%s", ct_last_error());
        atomic_store_explicit(&p->failed, code, memory_order_release);
    } else {
        while (!atomic_load_explicit(&p->failed, memory_order_acquire)) sched_yield();
    }
    ct_mpsc_close(p->ready);
}

static void *producer_main(void *arg) {
    ct_pipeline *p = ((worker_arg *)arg)->p;
    int id = ((worker_arg *)arg)->id;
    free(arg);
    int N = p->o.producers;
    int *perm = ct_xmalloc(sizeof(int) * (size_t)p->o.n);
    int perm_epoch = -1;
    for (int64_t g = p->o.first_batch + id; g < p->o.total_batches; g += N) {
        uint64_t item;
        if (ct_spsc_pop(&p->free_rings[id], &item) != CT_OK) break; /* closed: stop */
        ct_slot *s = ct_ring_to_ptr(item);
        double t0 = ct_now();
        int epoch = (int)(g / p->steps_per_epoch);
        if (epoch != perm_epoch) {
            ct_epoch_order(perm, p->o.n, p->o.seed, epoch);
            perm_epoch = epoch;
        }
        int rc = ct_batch_fill_part(&p->src, p->o.seed, p->o.n, p->o.batch, p->o.part, p->o.parts, g, perm, s->images,
                                    s->labels, &s->B, p->o.drop_last);
        atomic_fetch_add_explicit(&p->busy_ns, (int64_t)((ct_now() - t0) * 1e9), memory_order_relaxed);
        if (rc) {
            record_error(p, rc);
            break;
        }
        atomic_fetch_add_explicit(&p->produced, s->B, memory_order_relaxed);
        s->seq = g;
        if (ct_mpsc_push(p->ready, ct_ring_from_ptr(s)) != CT_OK) break;
    }
    free(perm);
    return NULL;
}

int ct_pipeline_start(ct_pipeline *p, const ct_source *src, const ct_pipeline_opts *o, ct_cl *cl) {
    memset(p, 0, sizeof *p);
    p->src = *src;
    p->o = *o;
    p->cl = cl;
    int N = o->producers;
    if (N < 1 || N > 256) return ct_fail(CT_EINPUT, "--producers %d: expected 0..256 or auto", N);
    int per = o->prefetch > 0 ? (o->prefetch + N - 1) / N : 2;
    if (per < 2) per = 2;
    p->n_slots = per * N;
    if (p->o.parts < 1) { p->o.parts = 1; p->o.part = 0; }
    p->steps_per_epoch = (int)ct_steps_per_epoch(o->n, (int64_t)o->batch * p->o.parts, o->drop_last);
    p->next_seq = o->first_batch;
    p->slots = ct_xcalloc((size_t)p->n_slots, sizeof *p->slots);
    p->window = ct_xcalloc((size_t)p->n_slots, sizeof *p->window);
    p->ready = aligned_alloc(CT_CACHE_LINE, sizeof *p->ready);
    p->free_rings = aligned_alloc(CT_CACHE_LINE, sizeof *p->free_rings * (size_t)N);
    CT_ASSERT(p->ready && p->free_rings);
    memset(p->ready, 0, sizeof *p->ready);
    memset(p->free_rings, 0, sizeof *p->free_rings * (size_t)N);
    int rc = ct_mpsc_init(p->ready, pow2_at_least((size_t)p->n_slots));
    for (int i = 0; i < N && !rc; i++) rc = ct_spsc_init(&p->free_rings[i], pow2_at_least((size_t)per));
    if (rc) return rc;
    size_t img = (size_t)o->batch * src->h * src->w * src->c * sizeof(float);
    size_t lab = (size_t)o->batch * sizeof(int32_t);
    for (int i = 0; i < p->n_slots; i++) {
        ct_slot *s = &p->slots[i];
        s->producer = i % N;
        if (cl) {
            /* pinned: allocated by the driver for fast DMA, mapped once for the slot's lifetime */
            cl_int e;
            s->pinned = clCreateBuffer(cl->ctx, CL_MEM_READ_WRITE | CL_MEM_ALLOC_HOST_PTR, img + lab, NULL, &e);
            if (e != CL_SUCCESS)
                return ct_fail(CT_ENOMEM, "allocating pinned slot %d (%.1f MiB) failed: %s; try a smaller --prefetch or --batch-size",
                               i, (double)(img + lab) / 1048576, ct_cl_errstr(e));
            void *ptr = clEnqueueMapBuffer(cl->xfer, s->pinned, CL_TRUE, CL_MAP_READ | CL_MAP_WRITE, 0, img + lab, 0, NULL, NULL, &e);
            if (e != CL_SUCCESS) return ct_fail(CT_EDEVICE, "mapping pinned slot %d failed: %s", i, ct_cl_errstr(e));
            s->images = ptr;
        } else {
            s->images = ct_xmalloc(img + lab);
        }
        s->labels = (int32_t *)((char *)s->images + img);
        CT_ASSERT(ct_spsc_try_push(&p->free_rings[s->producer], ct_ring_from_ptr(s)) == CT_OK);
    }
    p->threads = ct_xcalloc((size_t)N, sizeof *p->threads);
    for (int i = 0; i < N; i++) {
        worker_arg *a = ct_xmalloc(sizeof *a);
        a->p = p;
        a->id = i;
        if (pthread_create(&p->threads[i], NULL, producer_main, a)) {
            free(a);
            ct_pipeline_stop(p);
            return ct_fail(CT_ENOMEM, "cannot start producer thread %d", i);
        }
        p->started++;
    }
    return 0;
}

static int next_slot(ct_pipeline *p, ct_slot **slot, int block) {
    *slot = NULL;
    if (p->next_seq >= p->o.total_batches) return CT_RING_CLOSED;
    for (;;) {
        ct_slot **w = &p->window[p->next_seq % p->n_slots];
        if (*w && (*w)->seq == p->next_seq) {
            *slot = *w;
            *w = NULL;
            p->next_seq++;
            return CT_OK;
        }
        uint64_t item;
        int r = block ? ct_mpsc_pop(p->ready, &item) : ct_mpsc_try_pop(p->ready, &item);
        if (r == CT_RING_AGAIN) return CT_RING_AGAIN;
        if (r != CT_OK) {
            int code = atomic_load_explicit(&p->failed, memory_order_acquire);
            if (code) return ct_fail(code, "%s", p->error);
            return CT_RING_CLOSED;
        }
        ct_slot *s = ct_ring_to_ptr(item);
        CT_ASSERT(s->seq >= p->next_seq && s->seq < p->next_seq + p->n_slots);
        p->window[s->seq % p->n_slots] = s;
    }
}

int ct_pipeline_next(ct_pipeline *p, ct_slot **slot) { return next_slot(p, slot, 1); }
int ct_pipeline_try_next(ct_pipeline *p, ct_slot **slot) { return next_slot(p, slot, 0); }

void ct_pipeline_release(ct_pipeline *p, ct_slot *s) {
    if (s->uploaded) {
        CL_CHECK(clWaitForEvents(1, &s->uploaded));
        clReleaseEvent(s->uploaded);
        s->uploaded = NULL;
    }
    /* never blocks: each producer owns exactly the slots of its ring's capacity */
    int rc = ct_spsc_try_push(&p->free_rings[s->producer], ct_ring_from_ptr(s));
    CT_ASSERT(rc == CT_OK || rc == CT_RING_CLOSED);
}

void ct_pipeline_stats_get(ct_pipeline *p, ct_pipeline_stats *st) {
    st->producer_busy_s = (double)atomic_load_explicit(&p->busy_ns, memory_order_relaxed) * 1e-9;
    st->images = atomic_load_explicit(&p->produced, memory_order_relaxed);
    st->producer_rate = st->producer_busy_s > 0 ? st->images * p->o.producers / st->producer_busy_s : 0;
}

void ct_pipeline_stop(ct_pipeline *p) {
    if (p->ready) ct_mpsc_close(p->ready);
    for (int i = 0; p->free_rings && i < p->o.producers; i++) ct_spsc_close(&p->free_rings[i]);
    for (int i = 0; i < p->started; i++) pthread_join(p->threads[i], NULL);
    p->started = 0;
    for (int i = 0; p->slots && i < p->n_slots; i++) {
        ct_slot *s = &p->slots[i];
        if (s->uploaded) { clWaitForEvents(1, &s->uploaded); clReleaseEvent(s->uploaded); }
        if (s->pinned) {
            if (s->images) clEnqueueUnmapMemObject(p->cl->xfer, s->pinned, s->images, 0, NULL, NULL);
            clFinish(p->cl->xfer);
            clReleaseMemObject(s->pinned);
        } else {
            free(s->images);
        }
    }
    if (p->ready) { ct_mpsc_destroy(p->ready); free(p->ready); }
    for (int i = 0; p->free_rings && i < p->o.producers; i++) ct_spsc_destroy(&p->free_rings[i]);
    free(p->free_rings);
    free(p->slots);
    free(p->window);
    free(p->threads);
    memset(p, 0, sizeof *p);
}
