/* dist/dist.c: ranks, collectives and the bucketed gradient all-reduce
 * (see dist.h). Every wait polls its MPI request and sleeps between polls:
 * Open MPI's blocking calls spin, which would take a core from PoCL. */
#include "cltrain/dist.h"
#include "cltrain/layer.h"
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>
#ifdef CT_MPI
#include <mpi.h>
#endif

ct_dist ct_world = {.size = 1, .rank = 0, .local_rank = 0, .local_size = 1, .mpi = 0};

int ct_dist_compiled(void) {
#ifdef CT_MPI
    return 1;
#else
    return 0;
#endif
}

static int launched_by_mpirun(void) {
    const char *vars[] = {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK", "PMI_SIZE", "MPI_LOCALNRANKS"};
    for (size_t i = 0; i < sizeof vars / sizeof *vars; i++)
        if (getenv(vars[i])) return 1;
    return 0;
}

int ct_dist_init(int *argc, char ***argv) {
    gethostname(ct_world.host, sizeof ct_world.host - 1);
    if (!launched_by_mpirun()) return 0;
#ifdef CT_MPI
    int provided;
    if (MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS)
        return ct_fail(CT_EINPUT, "MPI_Init failed; check the mpirun command line");
    ct_world.mpi = 1;
    MPI_Comm_size(MPI_COMM_WORLD, &ct_world.size);
    MPI_Comm_rank(MPI_COMM_WORLD, &ct_world.rank);
    MPI_Comm node;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, ct_world.rank, MPI_INFO_NULL, &node);
    MPI_Comm_size(node, &ct_world.local_size);
    MPI_Comm_rank(node, &ct_world.local_rank);
    MPI_Comm_free(&node);
    /* errors come back as codes; the caller reports them and aborts the job */
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    return 0;
#else
    (void)argc;
    (void)argv;
    if (getenv("OMPI_COMM_WORLD_SIZE") && atoi(getenv("OMPI_COMM_WORLD_SIZE")) > 1)
        return ct_fail(CT_EINPUT, "this cltrain was built without MPI (mpicc not found at build time); "
                                  "install libopenmpi-dev and rebuild, or run without mpirun");
    return 0;
#endif
}

void ct_dist_finalize(void) {
#ifdef CT_MPI
    if (ct_world.mpi) MPI_Finalize();
    ct_world.mpi = 0;
#endif
}

void ct_dist_abort(int exit_code) {
#ifdef CT_MPI
    if (ct_world.mpi && ct_world.size > 1) {
        fflush(stdout);
        fflush(stderr);
        MPI_Abort(MPI_COMM_WORLD, exit_code);
    }
    ct_dist_finalize();
#endif
    exit(exit_code);
}

#ifdef CT_MPI
static void nap(void) {
    struct timespec ts = {0, 50000};
    nanosleep(&ts, NULL);
}

/* Wait for a request without spinning; a failed peer aborts the job. */
static void wait_req(MPI_Request *r) {
    for (;;) {
        int done = 0;
        if (MPI_Test(r, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS) {
            fprintf(stderr, "cltrain: rank %d: communication with the other ranks failed\n", ct_world.rank);
            ct_dist_abort(1);
        }
        if (done) return;
        nap();
    }
}
#define MULTI (ct_world.mpi && ct_world.size > 1)
#endif

void ct_dist_bcast(void *buf, size_t bytes) {
#ifdef CT_MPI
    if (!MULTI) return;
    char *p = buf;
    while (bytes) {
        int n = bytes > (1u << 30) ? 1 << 30 : (int)bytes;
        MPI_Request r;
        MPI_Ibcast(p, n, MPI_BYTE, 0, MPI_COMM_WORLD, &r);
        wait_req(&r);
        p += n;
        bytes -= (size_t)n;
    }
#else
    (void)buf;
    (void)bytes;
#endif
}

#ifdef CT_MPI
static void allreduce(void *v, int n, MPI_Datatype type, MPI_Op op) {
    if (!MULTI) return;
    MPI_Request r;
    MPI_Iallreduce(MPI_IN_PLACE, v, n, type, op, MPI_COMM_WORLD, &r);
    wait_req(&r);
}
void ct_dist_sum(double *v, int n) { allreduce(v, n, MPI_DOUBLE, MPI_SUM); }
void ct_dist_sum_int(int *v, int n) { allreduce(v, n, MPI_INT, MPI_SUM); }
void ct_dist_max_int(int *v, int n) { allreduce(v, n, MPI_INT, MPI_MAX); }
#else
void ct_dist_sum(double *v, int n) { (void)v; (void)n; }
void ct_dist_sum_int(int *v, int n) { (void)v; (void)n; }
void ct_dist_max_int(int *v, int n) { (void)v; (void)n; }
#endif

void ct_dist_barrier(void) {
#ifdef CT_MPI
    if (!MULTI) return;
    MPI_Request r;
    MPI_Ibarrier(MPI_COMM_WORLD, &r);
    wait_req(&r);
#endif
}

void ct_dist_gather_str(const char *mine, char *all, int len) {
#ifdef CT_MPI
    if (MULTI) {
        char *buf = ct_xcalloc((size_t)len, 1);
        snprintf(buf, (size_t)len, "%s", mine);
        MPI_Request r;
        MPI_Igather(buf, len, MPI_CHAR, all, len, MPI_CHAR, 0, MPI_COMM_WORLD, &r);
        wait_req(&r);
        free(buf);
        return;
    }
#endif
    if (all) snprintf(all, (size_t)len, "%s", mine);
}

/* ---- gradient all-reduce ---- */

/* parameters lie in layer order, so layers hi down to lo are one range */
static size_t span(const ct_model *m, int hi, int lo) { return m->layers[hi].b_off + m->layers[hi].n_b - m->layers[lo].w_off; }

static void add_bucket(ct_grad_sync *g, int hi, int lo) {
    ct_bucket *b = &g->b[g->n_buckets++];
    b->lo = g->m->layers[lo].w_off;
    b->n = span(g->m, hi, lo);
    b->low_layer = lo;
    b->host = ct_xmalloc(b->n * sizeof(float));
}

void ct_grad_sync_init(ct_grad_sync *g, ct_model *m, size_t bucket_bytes) {
    memset(g, 0, sizeof *g);
    g->m = m;
    g->b = ct_xcalloc((size_t)m->n_layers, sizeof *g->b);
    g->bytes = m->n_params * sizeof(float);
    size_t cap = bucket_bytes / sizeof(float);
    int hi = -1, lo = -1;
    for (int i = m->n_layers - 1; i >= 0; i--) {
        if (!(m->layers[i].n_w + m->layers[i].n_b)) continue;
        if (hi < 0) hi = i;
        lo = i;
        if (span(m, hi, lo) >= cap) {
            add_bucket(g, hi, lo);
            hi = -1;
        }
    }
    if (hi >= 0) add_bucket(g, hi, lo);
}

void ct_grad_sync_on_layer(void *ctx, int layer) { ct_grad_sync_layer_done(ctx, layer); }

void ct_grad_sync_layer_done(ct_grad_sync *g, int layer) {
    ct_model *m = g->m;
    if (layer == 0) {
        if (g->bwd_done) clReleaseEvent(g->bwd_done);
        CL_CHECK(clEnqueueMarkerWithWaitList(m->cl->queue, 0, NULL, &g->bwd_done));
    }
    for (int k = 0; k < g->n_buckets; k++) {
        ct_bucket *b = &g->b[k];
        if (b->low_layer != layer) continue;
        /* the copy waits for this layer's kernels only: layers below keep computing */
        cl_event mark;
        CL_CHECK(clEnqueueMarkerWithWaitList(m->cl->queue, 0, NULL, &mark));
        CL_CHECK(clFlush(m->cl->queue));
        if (b->read) clReleaseEvent(b->read);
        CL_CHECK(clEnqueueReadBuffer(m->cl->xfer, m->grads, CL_FALSE, b->lo * 4, b->n * 4, b->host, 1, &mark, &b->read));
        CL_CHECK(clFlush(m->cl->xfer));
        clReleaseEvent(mark);
        b->started = 0;
    }
}

static int event_done(cl_event e) {
    cl_int st;
    CL_CHECK(clGetEventInfo(e, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof st, &st, NULL));
    if (st < 0) ct_cl_die(st, "a gradient copy", __FILE__, __LINE__);
    return st == CL_COMPLETE;
}

void ct_grad_sync_finish(ct_grad_sync *g) {
#ifdef CT_MPI
    ct_model *m = g->m;
    if (!MULTI) return;
    CL_CHECK(clFlush(m->cl->queue));
    int started = 0, finished = 0, nb = g->n_buckets;
    MPI_Request *req = ct_xcalloc((size_t)nb, sizeof *req);
    int *fin = ct_xcalloc((size_t)nb, sizeof *fin);
    double *ts = ct_xcalloc(2 * (size_t)nb, sizeof *ts); /* each bucket's start and end */
    double t_first = 0, t_bwd = 0, t_last = 0;
    long nap_ns = 20000;
    while (finished < nb) {
        int progress = 0;
        if (started == finished && started < nb && t_bwd) {
            /* nothing in flight and backward is done: just wait for the copy */
            CL_CHECK(clWaitForEvents(1, &g->b[started].read));
        }
        /* buckets start in the order backward fills them */
        while (started < nb && event_done(g->b[started].read)) {
            ct_bucket *b = &g->b[started];
            MPI_Iallreduce(MPI_IN_PLACE, b->host, (int)b->n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &req[started]);
            ts[2 * started] = ct_now();
            if (!t_first) t_first = ts[2 * started];
            started++;
            progress = 1;
        }
        for (int k = 0; k < started; k++) {
            if (fin[k]) continue;
            int done = 0;
            if (MPI_Test(&req[k], &done, MPI_STATUS_IGNORE) != MPI_SUCCESS) {
                fprintf(stderr, "cltrain: rank %d: the gradient all-reduce failed (another rank stopped)\n", ct_world.rank);
                ct_dist_abort(1);
            }
            if (done) {
                ct_bucket *b = &g->b[k];
                fin[k] = 1;
                ts[2 * k + 1] = ct_now();
                finished++;
                progress = 1;
                if (b->written) clReleaseEvent(b->written);
                CL_CHECK(clEnqueueWriteBuffer(m->cl->xfer, m->grads, CL_FALSE, b->lo * 4, b->n * 4, b->host, 0, NULL, &b->written));
                CL_CHECK(clFlush(m->cl->xfer));
            }
        }
        if (!t_bwd && event_done(g->bwd_done)) t_bwd = ct_now();
        /* back off while nothing moves (the device may have most of backward
         * left), so polling takes little from the cores PoCL computes on */
        if (progress) {
            nap_ns = 20000;
        } else {
            struct timespec pause = {0, nap_ns};
            nanosleep(&pause, NULL);
            if (nap_ns < 200000) nap_ns *= 2;
        }
    }
    t_last = ct_now();
    if (!t_bwd) t_bwd = t_last; /* backward finished while we were not looking: count it hidden */
    cl_event *ev = ct_xmalloc(sizeof(cl_event) * (size_t)nb);
    for (int k = 0; k < nb; k++) ev[k] = g->b[k].written;
    /* the optimizer, next on the compute queue, reads the sums */
    CL_CHECK(clEnqueueBarrierWithWaitList(m->cl->queue, (cl_uint)nb, ev, NULL));
    /* all-reduce time: the union of the buckets' [start, end] intervals (they
     * start in order); hidden: the part of it before backward had finished */
    double busy = 0, hidden = 0, cs = ts[0], ce = ts[1];
    for (int k = 1; k <= nb; k++) {
        if (k < nb && ts[2 * k] <= ce) { if (ts[2 * k + 1] > ce) ce = ts[2 * k + 1]; continue; }
        busy += ce - cs;
        if (t_bwd > cs) hidden += (t_bwd < ce ? t_bwd : ce) - cs;
        if (k < nb) { cs = ts[2 * k]; ce = ts[2 * k + 1]; }
    }
    free(ev);
    free(req);
    free(fin);
    free(ts);
    g->steps++;
    g->ar_s += busy;
    g->hidden_s += hidden;
    g->exposed_s += t_last - (t_bwd > t_first ? t_bwd : t_first);
    g->window_s += t_bwd > t_first ? t_bwd - t_first : 0;
#else
    (void)g;
    (void)event_done;
#endif
}

void ct_grad_sync_free(ct_grad_sync *g) {
    for (int k = 0; k < g->n_buckets; k++) {
        if (g->b[k].read) clReleaseEvent(g->b[k].read);
        if (g->b[k].written) clReleaseEvent(g->b[k].written);
        free(g->b[k].host);
    }
    if (g->bwd_done) clReleaseEvent(g->bwd_done);
    free(g->b);
    memset(g, 0, sizeof *g);
}

void ct_dist_average_running_stats(ct_model *m) {
#ifdef CT_MPI
    if (!MULTI) return;
    for (int i = 0; i < m->n_layers; i++) {
        const ct_layer_ops *o = ct_layer_ops_of(&m->layers[i]);
        size_t off = 0, n = o->state ? o->state(&m->layers[i], &off) : 0;
        if (!n) continue;
        /* state the optimizer does not move (batch norm's running averages): the mean over ranks */
        float *f = ct_xmalloc(n * sizeof(float));
        double *d = ct_xmalloc(n * sizeof(double));
        ct_cl_read(m->cl, m->params, off * 4, n * 4, f);
        for (size_t k = 0; k < n; k++) d[k] = f[k];
        ct_dist_sum(d, (int)n);
        for (size_t k = 0; k < n; k++) f[k] = (float)(d[k] / ct_world.size);
        ct_cl_write(m->cl, m->params, off * 4, n * 4, f);
        free(f);
        free(d);
    }
#else
    (void)m;
#endif
}

int ct_dist_params_agree(ct_model *m) {
    if (ct_world.size < 2) return 1;
    float *p = ct_xmalloc(m->n_params * sizeof(float));
    ct_model_get_params(m, p);
    /* batch-norm running statistics differ by design until averaged: leave them out */
    for (int i = 0; i < m->n_layers; i++) {
        const ct_layer_ops *o = ct_layer_ops_of(&m->layers[i]);
        size_t off = 0, n = o->state ? o->state(&m->layers[i], &off) : 0;
        if (n) memset(p + off, 0, n * sizeof(float));
    }
    uLong c = crc32(crc32(0, NULL, 0), (const Bytef *)p, (uInt)(m->n_params * 4));
    free(p);
    int v[2] = {(int)(c & 0x7fffffff), -(int)(c & 0x7fffffff)};
    ct_dist_max_int(v, 2);
    return v[0] == -v[1];
}
