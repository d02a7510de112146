/* train/tboard.c: metrics.csv and TensorBoard event files, no protobuf
 * library: an Event is a handful of fields, written here with the wire format
 * (varints, fixed64 doubles, fixed32 floats, length-delimited strings and
 * messages). Records: uint64 length, masked CRC32C of the length, data,
 * masked CRC32C of the data. A write error is reported once and ends logging.
 * Tested by tests/test_tboard.c. */
#include "cltrain/tboard.h"
#include "cltrain/common.h"
#include <errno.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>


static uint32_t masked(uint32_t crc) { return ((crc >> 15) | (crc << 17)) + 0xa282ead8u; }

typedef struct pb { uint8_t b[1024]; size_t n; } pb;

static void pb_byte(pb *p, uint8_t v) { CT_ASSERT(p->n < sizeof p->b); p->b[p->n++] = v; }
static void pb_varint(pb *p, uint64_t v) {
    while (v >= 0x80) { pb_byte(p, (uint8_t)(v | 0x80)); v >>= 7; }
    pb_byte(p, (uint8_t)v);
}
static void pb_fixed(pb *p, const void *v, int n) { for (int i = 0; i < n; i++) pb_byte(p, ((const uint8_t *)v)[i]); }
static void pb_bytes(pb *p, int field, const void *v, size_t n) {
    pb_varint(p, (uint64_t)field << 3 | 2);
    pb_varint(p, n);
    pb_fixed(p, v, (int)n);
}

/* The first failed write (disk full, file-size limit, I/O error) is named on
 * stderr once; both files are then closed and logging stops, training not. */
static void log_failed(ct_tboard *t, const char *file, int err) {
    fprintf(stderr, "cltrain: %s: writing the training log failed (%s); logging to --logdir stops, training goes on\n",
            file, strerror(err));
    if (t->events) fclose(t->events);
    if (t->csv) fclose(t->csv);
    t->events = t->csv = NULL;
    t->failed = 1;
}

/* after stdio calls on f: report a failure once */
static void check(ct_tboard *t, FILE *f, const char *file, int ok) {
    if (t->failed || (ok && !ferror(f))) return;
    log_failed(t, file, errno ? errno : EIO);
}

static void write_record(ct_tboard *t, const pb *e) {
    uint64_t len = e->n;
    uint32_t lcrc = masked(ct_crc32c(&len, 8)), dcrc = masked(ct_crc32c(e->b, e->n));
    errno = 0;
    int ok = fwrite(&len, 8, 1, t->events) == 1;
    ok = ok && fwrite(&lcrc, 4, 1, t->events) == 1;
    ok = ok && fwrite(e->b, 1, e->n, t->events) == e->n;
    ok = ok && fwrite(&dcrc, 4, 1, t->events) == 1;
    check(t, t->events, t->path, ok);
}

static double wall_time(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Event { double wall_time = 1; int64 step = 2; oneof { string file_version = 3; Summary summary = 5; } } */
static void event_head(pb *e, int64_t step) {
    double wt = wall_time();
    pb_varint(e, 1 << 3 | 1);
    pb_fixed(e, &wt, 8);
    pb_varint(e, 2 << 3 | 0);
    pb_varint(e, (uint64_t)step);
}

int ct_tboard_open(ct_tboard *t, const char *logdir) {
    memset(t, 0, sizeof *t);
    uint32_t one = 1;
    CT_ASSERT(sizeof(double) == 8 && *(uint8_t *)&one == 1); /* records are written little-endian, as TFRecord wants */
    if (ct_mkdir_p(logdir)) return ct_fail(CT_EIO, "--logdir %s: cannot create the folder: %s", logdir, strerror(errno));
    char host[256] = "localhost";
    gethostname(host, sizeof host - 1);
    /* two runs started in the same second must not share (and truncate) a file */
    long long now = (long long)time(NULL);
    for (int k = 0; k < 1000; k++) {
        if (k) snprintf(t->path, sizeof t->path, "%s/events.out.tfevents.%lld.%s.%d", logdir, now, host, k);
        else snprintf(t->path, sizeof t->path, "%s/events.out.tfevents.%lld.%s", logdir, now, host);
        t->events = fopen(t->path, "wbx");
        if (t->events || errno != EEXIST) break;
    }
    if (!t->events) return ct_fail(CT_EIO, "%s: cannot write the event file: %s", t->path, strerror(errno));
    char *csv = t->csv_path;
    snprintf(csv, sizeof t->csv_path, "%s/metrics.csv", logdir);
    struct stat st;
    int fresh = stat(csv, &st) != 0 || st.st_size == 0;
    t->csv = fopen(csv, "a");
    if (!t->csv) {
        int e = errno;
        fclose(t->events);
        t->events = NULL;
        return ct_fail(CT_EIO, "%s: cannot write: %s", csv, strerror(e));
    }
    if (fresh) fprintf(t->csv, "step,tag,value,wall_time\n");
    pb e = {.n = 0};
    event_head(&e, 0);
    pb_bytes(&e, 3, "brain.Event:2", 13);
    write_record(t, &e);
    ct_tboard_flush(t);
    return 0;
}

void ct_tboard_scalar(ct_tboard *t, const char *tag, int64_t step, double value) {
    if (!t->events) return;
    size_t tl = strlen(tag);
    CT_ASSERT(tl < 256);
    /* Summary { repeated Value value = 1; }  Value { string tag = 1; float simple_value = 2; } */
    pb v = {.n = 0}, s = {.n = 0}, e = {.n = 0};
    pb_bytes(&v, 1, tag, tl);
    float f = (float)value;
    pb_varint(&v, 2 << 3 | 5);
    pb_fixed(&v, &f, 4);
    pb_bytes(&s, 1, v.b, v.n);
    event_head(&e, step);
    pb_bytes(&e, 5, s.b, s.n);
    write_record(t, &e);
    if (!t->csv) return;
    errno = 0;
    int ok = fprintf(t->csv, "%lld,%s,%.9g,%.3f\n", (long long)step, tag, value, wall_time()) > 0;
    check(t, t->csv, t->csv_path, ok);
}

int ct_tboard_flush(ct_tboard *t) {
    errno = 0;
    if (t->events) check(t, t->events, t->path, fflush(t->events) == 0);
    errno = 0;
    if (t->csv) check(t, t->csv, t->csv_path, fflush(t->csv) == 0);
    return t->failed ? CT_EIO : 0;
}

void ct_tboard_close(ct_tboard *t) {
    if (t->events) fclose(t->events);
    if (t->csv) fclose(t->csv);
    memset(t, 0, sizeof *t);
}
