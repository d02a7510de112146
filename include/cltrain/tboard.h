/* tboard.h: training metrics for --logdir: DIR/metrics.csv and a TensorBoard
 * event file DIR/events.out.tfevents.<time>.<host> (TFRecord framing with
 * masked CRC32C from common.h, Event protobufs with scalar summaries, encoded by hand).
 * Tested by tests/test_tboard.c, which also reads the file back with
 * TensorBoard's own reader (tools/tb_read.py). */
#ifndef CLTRAIN_TBOARD_H
#define CLTRAIN_TBOARD_H
#include <stdint.h>
#include <stdio.h>

typedef struct ct_tboard {
    FILE *events, *csv;
    char path[4200];         /* the event file */
    char csv_path[4200];
    int failed;              /* a write failed: reported once on stderr, both files closed */
} ct_tboard;

/* Create logdir if needed and open both files. CT_EIO naming the path on failure. */
int ct_tboard_open(ct_tboard *t, const char *logdir);
/* One scalar into both files; nothing once a write has failed. */
void ct_tboard_scalar(ct_tboard *t, const char *tag, int64_t step, double value);
/* Flush both files; CT_EIO once a write has failed (already reported on stderr). */
int ct_tboard_flush(ct_tboard *t);
void ct_tboard_close(ct_tboard *t);
#endif
