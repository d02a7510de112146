/* dist/dist.c: ranks, collectives, the bucketed gradient all-reduce and the
 * watchdog on waits (see dist.h). Every wait polls its MPI request and sleeps
 * between polls: Open MPI's blocking calls spin, which would take a core from
 * PoCL. Tested by tests/mpi.sh and tests/multihost.sh. */
#include "cltrain/dist.h"
#include "cltrain/layer.h"
#include <signal.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>
#ifdef CT_MPI
#include <mpi.h>
#endif

ct_dist ct_world = {.size = 1, .rank = 0, .local_rank = 0, .local_size = 1, .mpi = 0, .comm_timeout = 120};

#ifdef CT_MPI
/* the watchdog's messages travel apart from training's */
static MPI_Comm g_watch_comm = MPI_COMM_NULL;
enum { TAG_STALL = 17 };
#endif

void ct_dist_note_step(int64_t step) { ct_world.step = step; }
void ct_dist_note_checkpoint(const char *path, int64_t step) {
    ct_world.ckpt = path;
    ct_world.ckpt_step = step;
}

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
    MPI_Comm_dup(MPI_COMM_WORLD, &g_watch_comm);
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
    if (g_watch_comm != MPI_COMM_NULL) MPI_Comm_free(&g_watch_comm);
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

/* ---- watchdog ---- */

/* A wait on the other ranks: what it is for (the line names it), since when
 * the oldest unfinished request is in flight (0: none), the next poll. */
typedef struct ct_wait { const char *what; double since, next_poll; } ct_wait;

static void die_now(int sig) {
    (void)sig;
    _exit(1);
}

/* the ranks that did not answer, as "rank 1" or "ranks 1, 3" (len bytes) */
static void list_ranks(const int *missing, char *out, size_t len) {
    int n = 0;
    for (int p = 0; p < ct_world.size; p++) n += missing[p];
    size_t used = (size_t)snprintf(out, len, "%s", n == 1 ? "rank " : "ranks ");
    for (int p = 0, k = 0; p < ct_world.size && used < len; p++)
        if (missing[p]) used += (size_t)snprintf(out + used, len - used, "%s%d", k++ ? ", " : "", p);
}

/* How long Open MPI's daemons take to notice a host that no longer answers:
 * the keepalive on their connections (oob_tcp_keepalive_time, _intvl and
 * _probes; mpirun passes --mca settings to the ranks in the environment). */
static double daemons_notice_s(void) {
    const char *name[3] = {"OMPI_MCA_oob_tcp_keepalive_time", "OMPI_MCA_oob_tcp_keepalive_intvl", "OMPI_MCA_oob_tcp_keepalive_probes"};
    double v[3] = {300, 20, 9}; /* Open MPI 4's defaults */
    for (int i = 0; i < 3; i++) {
        const char *s = getenv(name[i]);
        char *end;
        double x = s ? strtod(s, &end) : -1;
        if (s && end != s && !*end && x >= 0 && x < 1e6) v[i] = x;
    }
    return v[0] + v[1] * v[2];
}

/* Tell every rank that this one gives up, and wait up to patience seconds
 * for each one's word (a rank still waiting answers within a poll: it gives
 * up too). missing[p]: rank p said nothing. Returns how many said nothing. */
static int ask_all(int *missing, double patience) {
    int R = ct_world.size, me = ct_world.rank, left = R - 1;
    long long mine[2] = {me, (long long)ct_world.step}, *theirs = ct_xcalloc(2 * (size_t)R, sizeof *theirs);
    MPI_Request *send = ct_xcalloc((size_t)R, sizeof *send), *recv = ct_xcalloc((size_t)R, sizeof *recv);
    for (int p = 0; p < R; p++) {
        send[p] = recv[p] = MPI_REQUEST_NULL;
        if (p == me) continue;
        MPI_Isend(mine, 2, MPI_LONG_LONG, p, TAG_STALL, g_watch_comm, &send[p]);
        MPI_Irecv(theirs + 2 * p, 2, MPI_LONG_LONG, p, TAG_STALL, g_watch_comm, &recv[p]);
    }
    for (double end = ct_now() + patience; left > 0 && ct_now() < end; nap()) {
        left = 0;
        for (int p = 0; p < R; p++) {
            int done = 1;
            if (recv[p] != MPI_REQUEST_NULL) MPI_Test(&recv[p], &done, MPI_STATUS_IGNORE);
            left += !done;
        }
    }
    for (int p = 0; p < R; p++) missing[p] = recv[p] != MPI_REQUEST_NULL;
    /* the job ends: the requests are left as they are */
    return left;
}

/* Patience is over, or another rank says so: find who is silent, say so in
 * one line, end the job. */
static void __attribute__((noreturn)) stalled(const ct_wait *w, double now) {
    int *missing = ct_xcalloc((size_t)ct_world.size, sizeof *missing);
    double t = ct_world.comm_timeout / 4;
    int silent = ask_all(missing, t < 1 ? 1 : t > 30 ? 30 : t);
    char who[256], ck[4200];
    list_ranks(missing, who, sizeof who);
    if (ct_world.ckpt) snprintf(ck, sizeof ck, "the last checkpoint is %s, from step %lld", ct_world.ckpt, (long long)ct_world.ckpt_step);
    else snprintf(ck, sizeof ck, "no checkpoint was written");
    double waited = ct_now() - (w->since ? w->since : now);
    if (silent)
        fprintf(stderr, "cltrain: rank %d: no answer from %s for %.0f s during %s of step %lld; stopping (%s)\n", ct_world.rank,
                who, waited, w->what, (long long)ct_world.step, ck);
    else
        fprintf(stderr, "cltrain: rank %d: a rank waited over --comm-timeout %g s during %s of step %lld (all answered since); "
                "stopping (%s)\n", ct_world.rank, ct_world.comm_timeout, w->what, (long long)ct_world.step, ck);
    fflush(stdout);
    fflush(stderr);
    /* A silent rank may be behind a cut link. Its host's daemon cannot be
     * told to stop then, and once MPI_Abort has sent it anything mpirun
     * waits for it until TCP gives up (net.ipv4.tcp_retries2, about 15
     * minutes); left alone, the daemons notice the lost host through their
     * keepalive and end the job. So they get that long first; then MPI_Abort
     * ends a job whose network is fine. A rank that none of two or more
     * others answers is the one cut off: it goes at once. */
    if (silent && !(silent == ct_world.size - 1 && ct_world.size > 2))
        for (double until = ct_now() + daemons_notice_s() + 5; ct_now() < until;) nanosleep(&(struct timespec){0, 100000000}, NULL);
    /* a rank cut off from mpirun may wait in MPI_Abort for ever: the alarm ends it */
    signal(SIGALRM, die_now);
    alarm(10);
    MPI_Abort(MPI_COMM_WORLD, 1);
    _exit(1);
}

/* Called between polls of a wait: once training runs, a wait older than
 * --comm-timeout, or another rank's word that it gave up, ends the job.
 * Looks every 10 ms, so the polls themselves stay as cheap as before. */
static void watch(ct_wait *w) {
    if (!(ct_world.comm_timeout > 0 && ct_world.step > 0 && g_watch_comm != MPI_COMM_NULL)) return;
    double now = ct_now();
    if (now < w->next_poll) return;
    w->next_poll = now + 0.01;
    int told = 0;
    MPI_Iprobe(MPI_ANY_SOURCE, TAG_STALL, g_watch_comm, &told, MPI_STATUS_IGNORE);
    if (told || (w->since && now - w->since > ct_world.comm_timeout)) stalled(w, now);
}

/* Wait for a request without spinning; a failed peer aborts the job. */
static void wait_req(MPI_Request *r, const char *what) {
    ct_wait w = {what, ct_now(), 0};
    for (;;) {
        int done = 0;
        if (MPI_Test(r, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS) {
            fprintf(stderr, "cltrain: rank %d: communication with the other ranks failed\n", ct_world.rank);
            ct_dist_abort(1);
        }
        if (done) return;
        watch(&w);
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
        wait_req(&r, "a broadcast");
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
    wait_req(&r, "an all-reduce");
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
    wait_req(&r, "a barrier");
#endif
}

void ct_dist_gather_str(const char *mine, char *all, int len) {
#ifdef CT_MPI
    if (MULTI) {
        char *buf = ct_xcalloc((size_t)len, 1);
        snprintf(buf, (size_t)len, "%s", mine);
        MPI_Request r;
        MPI_Igather(buf, len, MPI_CHAR, all, len, MPI_CHAR, 0, MPI_COMM_WORLD, &r);
        wait_req(&r, "a gather");
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
    ct_wait w = {"the gradient all-reduce", 0, 0};
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
            /* the watchdog: from the start of the oldest bucket still in flight */
            w.since = 0;
            for (int k = 0; k < started && !w.since; k++)
                if (!fin[k]) w.since = ts[2 * k];
            watch(&w);
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
