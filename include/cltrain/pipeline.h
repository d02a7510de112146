/* pipeline.h: the input pipeline. Producer threads fill pinned host slots
 * with whole batches (read, decode, augment, normalise), hand them to the
 * trainer over a lock-free multi-producer ring, and get them back over one
 * single-producer ring each once the trainer has uploaded them.
 *
 * Determinism: global batch g = epoch * steps_per_epoch + i is made by
 * producer g mod N, from the epoch's permutation and per-sample random
 * numbers that depend only on (seed, epoch, index): the batches, and so the
 * trained weights, are bit-identical for any producer count (0 included:
 * ct_batch_fill is what the trainer calls itself with --producers 0).
 * The trainer receives batches in order g = 0, 1, 2, ...: slots that come
 * early wait in a reorder window as large as the slot count.
 * Tested by tests/test_pipeline.c (order, determinism, errors, shutdown). */
#ifndef CLTRAIN_PIPELINE_H
#define CLTRAIN_PIPELINE_H
#include <pthread.h>
#include "cltrain/cl.h"
#include "cltrain/ring.h"
#include "cltrain/source.h"

typedef struct ct_slot {
    int64_t seq;           /* global batch number */
    int B;                 /* samples in this batch (the last of an epoch may be short) */
    int producer;
    float *images;         /* batch * h*w*c floats: mapped pinned memory, or malloc'd without a device */
    int32_t *labels;
    cl_mem pinned;         /* the CL_MEM_ALLOC_HOST_PTR buffer behind images, or NULL */
    cl_event uploaded;     /* set by the trainer: when the slot may be refilled */
} ct_slot;

typedef struct ct_pipeline_opts {
    int producers;         /* >= 1 */
    int prefetch;          /* slots in all; rounded up to a multiple of producers, at least 2 per producer */
    int batch;
    uint64_t seed;
    int n;                 /* samples per epoch (a prefix of the source) */
    int64_t first_batch;   /* the first global batch to make (0, or later when resuming) */
    int64_t total_batches; /* across all epochs: batches first_batch .. total_batches-1 are made */
    int part, parts;       /* data-parallel: make slice `part` of `parts` of each global batch (0, 1 when alone) */
    int drop_last;         /* each epoch's last partial global batch is left out (ct_steps_per_epoch) */
} ct_pipeline_opts;

typedef struct ct_pipeline_stats {
    double producer_busy_s;    /* summed over producers: time filling slots (simulated latency included) */
    long images;               /* images produced */
    double producer_rate;      /* images/s the producers can make together */
} ct_pipeline_stats;

typedef struct ct_pipeline {
    ct_source src;
    ct_pipeline_opts o;
    int n_slots, steps_per_epoch;
    ct_slot *slots;
    ct_mpsc *ready;            /* producers -> trainer */
    ct_spsc *free_rings;       /* trainer -> producer p (one each) */
    ct_slot **window;          /* reorder window, indexed by seq % n_slots */
    int64_t next_seq;
    pthread_t *threads;
    int started;
    _Atomic int failing;       /* 1 once a producer has claimed the right to write error[] */
    _Atomic int failed;        /* first producer error code, 0 if none; set after error[] is written */
    char error[1024];
    _Atomic int64_t busy_ns;
    _Atomic long produced;
    ct_cl *cl;
} ct_pipeline;

/* Steps in an epoch of n samples at global batch gb: ceil(n / gb), or with
 * drop_last floor(n / gb) (the last partial batch left out; its samples are
 * other ones in each epoch's order). */
static inline int64_t ct_steps_per_epoch(int n, int64_t gb, int drop_last) { return drop_last ? n / gb : (n + gb - 1) / gb; }
/* Deterministic order of epoch e: a permutation of 0..n-1 from (seed, epoch). */
void ct_epoch_order(int *perm, int n, uint64_t seed, int epoch);
/* Fill one batch (global number seq) exactly as a producer does. perm is the
 * epoch's order (ct_epoch_order) or NULL to compute it. Returns 0 or the
 * source's error. */
int ct_batch_fill(const ct_source *src, uint64_t seed, int n, int batch, int64_t seq, const int *perm,
                  float *images, int32_t *labels, int *B_out);
/* The same for rank `part` of `parts`: global batch seq holds batch * parts
 * samples of the epoch's order, and this part is its part-th slice of
 * `batch` (shorter, or empty, at the end of an epoch). Per-sample random
 * numbers depend on the position in the global batch, so the union of the
 * parts equals the batch one rank with batch * parts would make. */
/* The samples part `part` of `parts` takes from global batch seq: their
 * count (0 when the epoch's last global batch ends before this part), and
 * in *first (may be NULL) the position of the first one in the epoch's order. */
int ct_batch_part(int n, int batch, int part, int parts, int64_t seq, int64_t *first, int drop_last);
int ct_batch_fill_part(const ct_source *src, uint64_t seed, int n, int batch, int part, int parts, int64_t seq,
                       const int *perm, float *images, int32_t *labels, int *B_out, int drop_last);
int ct_pipeline_start(ct_pipeline *p, const ct_source *src, const ct_pipeline_opts *o, ct_cl *cl);
/* The next batch in order. CT_OK, CT_RING_CLOSED when every batch has been
 * delivered, or the first producer's error (message in ct_last_error). */
int ct_pipeline_next(ct_pipeline *p, ct_slot **slot);
/* The same without blocking: CT_RING_AGAIN when the next batch is not ready yet. */
int ct_pipeline_try_next(ct_pipeline *p, ct_slot **slot);
/* Give a slot back for refilling (after its upload has completed). */
void ct_pipeline_release(ct_pipeline *p, ct_slot *s);
void ct_pipeline_stats_get(ct_pipeline *p, ct_pipeline_stats *st);
/* Close the rings, join the producers, free everything. Safe at any point. */
void ct_pipeline_stop(ct_pipeline *p);
#endif
