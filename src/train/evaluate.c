/* train/evaluate.c: evaluation on a test set (ct_evaluate: loss, accuracy
 * and the confusion matrix, data-parallel over the ranks, --tta flip) and its
 * printout. Used by the evaluation hook during training and by `cltrain eval`.
 * Tested by tests/test_eval.c and tests/cli.sh. */
#include "cltrain/dist.h"
#include "cltrain/train.h"
#include <math.h>
#include <string.h>

static void gather(const ct_dataset *ds, const int *idx, int B, uint8_t *img, int32_t *lab) {
    size_t sz = (size_t)ds->h * ds->w * ds->c;
    for (int i = 0; i < B; i++) {
        memcpy(img + (size_t)i * sz, ds->images + (size_t)idx[i] * sz, sz);
        lab[i] = ds->labels[idx[i]];
    }
}

int ct_tta_parse(const char *s, int *tta) {
    if (!strcmp(s, "none")) *tta = CT_TTA_NONE;
    else if (!strcmp(s, "flip")) *tta = CT_TTA_FLIP;
    else return ct_fail(CT_EINPUT, "--tta %s: unknown mode; expected none or flip (average each image with its mirror)", s);
    return 0;
}

/* Mirror B HWC images left-right in place (bytes or floats: elem bytes per value). */
static void flip_batch(void *images, int B, int h, int w, int c, size_t elem) {
    size_t px = (size_t)c * elem;
    unsigned char *p = images, t[64];
    CT_ASSERT(px <= sizeof t);
    for (int b = 0; b < B; b++)
        for (int y = 0; y < h; y++) {
            unsigned char *row = p + (((size_t)b * h + y) * w) * px;
            for (int x = 0; x < w / 2; x++) {
                memcpy(t, row + x * px, px);
                memcpy(row + x * px, row + (w - 1 - x) * px, px);
                memcpy(row + (w - 1 - x) * px, t, px);
            }
        }
}

/* --tta flip on one uploaded batch: logits of the images and of their
 * mirrors, averaged; pred = argmax, returns the summed cross-entropy of the
 * averaged logits (log-sum-exp in double). host is the batch as uploaded
 * (floats when fl, else bytes) and is mirrored in place. */
static double eval_flip(ct_model *m, const ct_dataset *ds, int B, void *host, int fl, const int32_t *lab, float scale,
                        float shift, int32_t *pred, float *l0, float *l1) {
    int C = m->n_classes;
    cl_mem logits = m->layers[m->n_layers - 1].out;
    ct_model_forward(m, B);
    ct_cl_read(m->cl, logits, 0, (size_t)B * C * sizeof(float), l0);
    flip_batch(host, B, ds->h, ds->w, ds->c, fl ? sizeof(float) : 1);
    if (fl) ct_cl_write(m->cl, m->input, 0, (size_t)B * ds->h * ds->w * ds->c * sizeof(float), host);
    else ct_model_set_batch(m, host, lab, B, scale, shift);
    ct_model_forward(m, B);
    ct_cl_read(m->cl, logits, 0, (size_t)B * C * sizeof(float), l1);
    double loss = 0;
    for (int i = 0; i < B; i++) {
        float *z = l0 + (size_t)i * C; /* the average, in place */
        double mx = -INFINITY, se = 0;
        int best = 0;
        for (int k = 0; k < C; k++) {
            z[k] = 0.5f * (z[k] + l1[(size_t)i * C + k]);
            if (z[k] > mx) { mx = z[k]; best = k; }
        }
        for (int k = 0; k < C; k++) se += exp((double)z[k] - mx);
        pred[i] = best;
        loss += mx + log(se) - (double)z[lab[i]];
    }
    return loss;
}

int ct_evaluate(ct_model *m, const ct_dataset *ds, const ct_source *src, int limit, float scale, float shift,
                int tta, ct_eval_result *res) {
    memset(res, 0, sizeof *res);
    int n = limit > 0 && limit < ds->n ? limit : ds->n;
    /* data-parallel: each rank evaluates a contiguous shard, the counts are summed */
    int lo = (int)((int64_t)n * ct_world.rank / ct_world.size), hi = (int)((int64_t)n * (ct_world.rank + 1) / ct_world.size);
    res->n_classes = m->n_classes;
    res->confusion = ct_xcalloc((size_t)m->n_classes * m->n_classes, sizeof(int));
    size_t sz = (size_t)ds->h * ds->w * ds->c;
    uint8_t *img = ct_xmalloc(sz * m->batch);
    int32_t *lab = ct_xmalloc(sizeof(int32_t) * m->batch), *pred = ct_xmalloc(sizeof(int32_t) * m->batch);
    int *idx = ct_xmalloc(sizeof(int) * m->batch);
    float *fimg = src ? ct_xmalloc(sz * m->batch * sizeof(float)) : NULL;
    CT_ASSERT(tta == CT_TTA_NONE || tta == CT_TTA_FLIP);
    float *l0 = tta ? ct_xmalloc(sizeof(float) * m->batch * m->n_classes * 2) : NULL;
    int was_training = m->training;
    float smoothing = m->label_smoothing;
    m->training = 0;          /* batch norm uses its running averages */
    m->label_smoothing = 0;   /* the test loss is the plain cross-entropy */
    for (int s = lo; s < hi; s += m->batch) {
        int B = hi - s < m->batch ? hi - s : m->batch;
        for (int i = 0; i < B; i++) idx[i] = s + i;
        if (src) {
            /* a source normalises on the host (e.g. per-image standardisation); evaluation draws no augmentation */
            for (int i = 0; i < B; i++) {
                ct_rng r = ct_rng_make(0, 0, (uint64_t)idx[i]);
                int rc = src->load(src->ctx, idx[i], fimg + (size_t)i * sz, lab + i, &r);
                if (rc) {
                    free(img); free(lab); free(pred); free(idx); free(fimg); free(l0);
                    m->training = was_training;
                    m->label_smoothing = smoothing;
                    return rc;
                }
            }
            ct_cl_write(m->cl, m->input, 0, (size_t)B * sz * sizeof(float), fimg);
            ct_cl_write(m->cl, m->labels, 0, (size_t)B * 4, lab);
        } else {
            gather(ds, idx, B, img, lab);
            ct_model_set_batch(m, img, lab, B, scale, shift);
        }
        if (tta == CT_TTA_FLIP) {
            res->loss += eval_flip(m, ds, B, src ? (void *)fimg : (void *)img, src != NULL, lab, scale, shift, pred, l0,
                                   l0 + (size_t)m->batch * m->n_classes);
        } else {
            ct_model_forward(m, B);
            ct_model_loss(m, B);
            res->loss += ct_model_read_results(m, B, pred);
        }
        for (int i = 0; i < B; i++) {
            res->confusion[lab[i] * m->n_classes + pred[i]]++;
            res->correct += pred[i] == lab[i];
        }
    }
    m->training = was_training;
    m->label_smoothing = smoothing;
    if (ct_world.size > 1) {
        double l = res->loss;
        ct_dist_sum(&l, 1);
        res->loss = l;
        ct_dist_sum_int(&res->correct, 1);
        ct_dist_sum_int(res->confusion, m->n_classes * m->n_classes);
    }
    res->n = n;
    free(img); free(lab); free(pred); free(idx); free(fimg); free(l0);
    return 0;
}

void ct_eval_free(ct_eval_result *r) {
    free(r->confusion);
    r->confusion = NULL;
}

void ct_eval_print(const ct_eval_result *r, char **names, FILE *out, int confusion) {
    int C = r->n_classes;
    fprintf(out, "test: %d images, loss %.4f, accuracy %.2f%%\n", r->n, r->loss / (r->n ? r->n : 1),
            100.0 * r->correct / (r->n ? r->n : 1));
    fprintf(out, "per-class accuracy:");
    for (int c = 0; c < C; c++) {
        int tot = 0;
        for (int p = 0; p < C; p++) tot += r->confusion[c * C + p];
        char buf[64];
        snprintf(buf, sizeof buf, "%s", names ? names[c] : "");
        if (!names) snprintf(buf, sizeof buf, "%d", c);
        fprintf(out, "%s %s %.1f%%", c % 5 ? "," : "\n ", buf, tot ? 100.0 * r->confusion[c * C + c] / tot : 0.0);
    }
    fputc('\n', out);
    if (confusion) {
        fprintf(out, "confusion matrix (rows: true class, columns: predicted):\n");
        for (int c = 0; c < C; c++) {
            fprintf(out, " %3d |", c);
            for (int p = 0; p < C; p++) fprintf(out, " %5d", r->confusion[c * C + p]);
            fputc('\n', out);
        }
    }
}
