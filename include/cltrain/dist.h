/* dist.h: data-parallel training over MPI, one rank per device.
 *
 * `mpirun -np N cltrain ...` starts N ranks; a plain `cltrain ...` is one rank
 * and never initialises MPI. Every rank holds the whole model. Rank 0
 * broadcasts the initial state; each rank trains on its own disjoint slice
 * of every global batch (pipeline.h: ct_batch_fill_part); the parameter
 * gradients are summed across ranks with non-blocking all-reduces, one per
 * bucket of layers, each started as soon as backward has produced that
 * bucket (the device keeps computing the layers below meanwhile); the loss
 * is normalised by the global batch, so the sum is the gradient of the
 * global batch's mean loss and the optimizer step is the same on every rank.
 *
 * Waiting never spins: MPI requests are polled with short sleeps, so a rank
 * waiting for another leaves the cores to the OpenCL runtime (PoCL runs
 * kernels on the same CPU cores).
 *
 * Failure: a rank that fails calls MPI_Abort (ct_dist_abort), and mpirun
 * ends every rank when one dies. A rank that stops answering without dying
 * (a cut network link: TCP then waits for many minutes) is caught by the
 * watchdog: from the first training step on, a wait on the other ranks that
 * lasts ct_world.comm_timeout seconds (--comm-timeout) asks every rank, on a
 * communicator of its own, who is still there; the waiting ranks answer at
 * once, and each rank that gave up prints one line naming the ranks that did
 * not answer, the step and the last checkpoint, and calls MPI_Abort.
 * Built only when the Makefile finds mpicc (CT_MPI); without it, and outside
 * mpirun, ct_world is {size 1, rank 0} and every call here is a no-op.
 * Tested by tests/mpi.sh (equivalence with one rank, fault, bad input) and
 * tests/multihost.sh (hosts in network namespaces, a link cut mid-training). */
#ifndef CLTRAIN_DIST_H
#define CLTRAIN_DIST_H
#include "cltrain/model.h"

typedef struct ct_dist {
    int size, rank;            /* world */
    int local_rank, local_size;/* ranks on this node (device choice) */
    int mpi;                   /* MPI initialised (started by mpirun) */
    char host[64];
    double comm_timeout;       /* --comm-timeout: seconds a wait on the others may last once training runs (0: no limit) */
    int64_t step;              /* the step being trained (1-based; 0 before training): for the watchdog's line */
    const char *ckpt;          /* the last checkpoint written (or resumed from), NULL if none; and its step */
    int64_t ckpt_step;
} ct_dist;

extern ct_dist ct_world;

/* 1 when cltrain was built with MPI. */
int ct_dist_compiled(void);
/* Initialise MPI when started by mpirun (or another PMI launcher); otherwise
 * leave ct_world as a single rank. Returns 0 or CT_EINPUT (MPI unavailable). */
int ct_dist_init(int *argc, char ***argv);
void ct_dist_finalize(void);
/* The watchdog's context: the step now trained (turns the watchdog on); the
 * last checkpoint, which the line names. */
void ct_dist_note_step(int64_t step);
void ct_dist_note_checkpoint(const char *path, int64_t step);
/* End every rank with this exit code (MPI_Abort), or exit() when alone. */
void ct_dist_abort(int exit_code) __attribute__((noreturn));

/* Collectives over all ranks; waits sleep instead of spinning. */
void ct_dist_bcast(void *buf, size_t bytes);             /* from rank 0 */
void ct_dist_sum(double *v, int n);                      /* in place */
void ct_dist_sum_int(int *v, int n);
void ct_dist_max_int(int *v, int n);
void ct_dist_barrier(void);
/* rank 0 gets every rank's string (size x len bytes into all); others may pass NULL. */
void ct_dist_gather_str(const char *mine, char *all, int len);

/* Gradient all-reduce, overlapped with backward. */
typedef struct ct_bucket {
    size_t lo, n;              /* range of the flat gradient buffer (floats) */
    int low_layer;             /* backward of this layer completes the bucket */
    float *host;
    cl_event read, written;
    int started;
    void *req;                 /* MPI_Request */
} ct_bucket;

typedef struct ct_grad_sync {
    ct_model *m;
    int n_buckets;
    ct_bucket *b;
    cl_event bwd_done;         /* marker after the last backward kernel */
    /* totals over steps */
    long steps;
    double ar_s;               /* time some bucket's all-reduce was in flight, summed */
    double hidden_s;           /* the part of it before backward had finished on the device */
    double exposed_s;          /* time after backward finished until the gradients were summed */
    double window_s;           /* backward time left after the first bucket's all-reduce started (what can hide it) */
    size_t bytes;              /* gradient bytes per step */
} ct_grad_sync;

/* Buckets of about bucket_bytes, whole layers each, from the last layer down. */
void ct_grad_sync_init(ct_grad_sync *g, ct_model *m, size_t bucket_bytes);
/* Call right after enqueuing ct_layer_backward(m, layer): when the layer
 * closes a bucket, its copy to the host is enqueued (on the transfer queue). */
void ct_grad_sync_layer_done(ct_grad_sync *g, int layer);
/* The same as a ct_model_backward callback (ctx is the ct_grad_sync). */
void ct_grad_sync_on_layer(void *ctx, int layer);
/* Start each bucket's all-reduce as its copy lands, wait for all, copy the
 * sums back; the optimizer (on the compute queue) runs after them. */
void ct_grad_sync_finish(ct_grad_sync *g);
void ct_grad_sync_free(ct_grad_sync *g);

/* Average the batch-norm running statistics over the ranks (they see
 * different samples); the trained parameters are identical already. */
void ct_dist_average_running_stats(ct_model *m);
/* CRC32 of the parameters, compared across ranks: 1 when all are equal. */
int ct_dist_params_agree(ct_model *m);
#endif
