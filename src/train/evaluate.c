/* train/evaluate.c: evaluation on a test set (ct_evaluate: loss, accuracy
 * and the confusion matrix, data-parallel over the ranks, --tta flip and
 * flip-translate) and its
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
    else if (!strcmp(s, "flip-translate")) *tta = CT_TTA_FLIP_TRANSLATE;
    else return ct_fail(CT_EINPUT, "--tta %s: unknown mode; expected none, flip (average each image with its mirror) "
                        "or flip-translate (and their 1-pixel shifts up-left and down-right)", s);
    return 0;
}

/* The views a mode averages: mirrored or not, shifted by (dy, dx) with
 * reflection, and the weight of its logits. */
typedef struct { int flip, dy, dx; float weight; } tta_view;
static const tta_view views_flip[] = {{0, 0, 0, 0.5f}, {1, 0, 0, 0.5f}};
static const tta_view views_flip_translate[] = {
    {0, 0, 0, 0.25f}, {1, 0, 0, 0.25f}, {0, -1, -1, 0.125f}, {1, -1, -1, 0.125f}, {0, 1, 1, 0.125f}, {1, 1, 1, 0.125f},
};

int ct_tta_views(int tta) {
    return tta == CT_TTA_FLIP ? 2 : tta == CT_TTA_FLIP_TRANSLATE ? 6 : 1;
}

static int reflect_at(int i, int n) {
    if (n == 1) return 0;
    if (i < 0) i = -i;
    if (i >= n) i = 2 * (n - 1) - i;
    return i;
}

void ct_tta_view(void *dst, const void *src, int B, int h, int w, int c, size_t elem, int flip, int dy, int dx) {
    size_t px = (size_t)c * elem;
    const unsigned char *s = src;
    unsigned char *d = dst;
    for (int b = 0; b < B; b++)
        for (int y = 0; y < h; y++) {
            const unsigned char *row = s + (((size_t)b * h + reflect_at(y + dy, h)) * w) * px;
            unsigned char *o = d + (((size_t)b * h + y) * w) * px;
            for (int x = 0; x < w; x++)
                memcpy(o + (size_t)x * px, row + (size_t)reflect_at((flip ? w - 1 - x : x) + dx, w) * px, px);
        }
}

/* pred = the argmax of each of B rows of C logits z; returns the summed
 * cross-entropy (log-sum-exp in double). */
static double score(const float *z0, int B, int C, const int32_t *lab, int32_t *pred) {
    double loss = 0;
    for (int i = 0; i < B; i++) {
        const float *z = z0 + (size_t)i * C;
        double mx = -INFINITY, se = 0;
        int best = 0;
        for (int k = 0; k < C; k++)
            if (z[k] > mx) { mx = z[k]; best = k; }
        for (int k = 0; k < C; k++) se += exp((double)z[k] - mx);
        pred[i] = best;
        loss += mx + log(se) - (double)z[lab[i]];
    }
    return loss;
}

/* Test-time augmentation on one batch: the weighted mean of the logits of
 * each view of the images; pred = argmax, returns the summed cross-entropy
 * of the mean logits (log-sum-exp in double). host is the batch as uploaded
 * (floats when fl, else bytes), view a buffer of its size; acc and tmp hold
 * B x classes floats. */
static double eval_views(ct_model *m, const ct_dataset *ds, int B, const void *host, void *view, int fl,
                         const int32_t *lab, float scale, float shift, int tta, int32_t *pred, float *acc, float *tmp,
                         int32_t *pred0, double *loss0) {
    int C = m->n_classes, nv = ct_tta_views(tta);
    const tta_view *v = tta == CT_TTA_FLIP ? views_flip : views_flip_translate;
    cl_mem logits = m->layers[m->n_layers - 1].out;
    for (int i = 0; i < B * C; i++) acc[i] = 0.0f;
    for (int k = 0; k < nv; k++) {
        ct_tta_view(view, host, B, ds->h, ds->w, ds->c, fl ? sizeof(float) : 1, v[k].flip, v[k].dy, v[k].dx);
        if (fl) ct_cl_write(m->cl, m->input, 0, (size_t)B * ds->h * ds->w * ds->c * sizeof(float), view);
        else ct_model_set_batch(m, view, lab, B, scale, shift);
        ct_model_forward(m, B);
        ct_cl_read(m->cl, logits, 0, (size_t)B * C * sizeof(float), tmp);
        /* view 0 is the image as it is: the plain result */
        if (k == 0 && pred0) *loss0 += score(tmp, B, C, lab, pred0);
        for (int i = 0; i < B * C; i++) acc[i] += v[k].weight * tmp[i];
    }
    return score(acc, B, C, lab, pred);
}

int ct_evaluate(ct_model *m, const ct_dataset *ds, const ct_source *src, int limit, float scale, float shift,
                int tta, ct_eval_result *res, ct_eval_result *plain) {
    memset(res, 0, sizeof *res);
    if (tta == CT_TTA_NONE) plain = NULL;
    if (plain) memset(plain, 0, sizeof *plain);
    int n = limit > 0 && limit < ds->n ? limit : ds->n;
    /* data-parallel: each rank evaluates a contiguous shard, the counts are summed */
    int lo = (int)((int64_t)n * ct_world.rank / ct_world.size), hi = (int)((int64_t)n * (ct_world.rank + 1) / ct_world.size);
    res->n_classes = m->n_classes;
    res->confusion = ct_xcalloc((size_t)m->n_classes * m->n_classes, sizeof(int));
    if (plain) {
        plain->n_classes = m->n_classes;
        plain->confusion = ct_xcalloc((size_t)m->n_classes * m->n_classes, sizeof(int));
    }
    size_t sz = (size_t)ds->h * ds->w * ds->c;
    uint8_t *img = ct_xmalloc(sz * m->batch);
    int32_t *lab = ct_xmalloc(sizeof(int32_t) * m->batch), *pred = ct_xmalloc(sizeof(int32_t) * m->batch);
    int32_t *pred0 = plain ? ct_xmalloc(sizeof(int32_t) * m->batch) : NULL;
    int *idx = ct_xmalloc(sizeof(int) * m->batch);
    float *fimg = src ? ct_xmalloc(sz * m->batch * sizeof(float)) : NULL;
    CT_ASSERT(tta == CT_TTA_NONE || tta == CT_TTA_FLIP || tta == CT_TTA_FLIP_TRANSLATE);
    float *l0 = tta ? ct_xmalloc(sizeof(float) * m->batch * m->n_classes * 2) : NULL;
    void *view = tta ? ct_xmalloc(sz * m->batch * (src ? sizeof(float) : 1)) : NULL;
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
                    free(img); free(lab); free(pred); free(pred0); free(idx); free(fimg); free(l0); free(view);
                    if (plain) ct_eval_free(plain);
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
        if (tta != CT_TTA_NONE) {
            res->loss += eval_views(m, ds, B, src ? (void *)fimg : (void *)img, view, src != NULL, lab, scale, shift, tta,
                                    pred, l0, l0 + (size_t)m->batch * m->n_classes, pred0, plain ? &plain->loss : NULL);
        } else {
            ct_model_forward(m, B);
            ct_model_loss(m, B);
            res->loss += ct_model_read_results(m, B, pred);
        }
        for (int i = 0; i < B; i++) {
            res->confusion[lab[i] * m->n_classes + pred[i]]++;
            res->correct += pred[i] == lab[i];
        }
        if (plain)
            for (int i = 0; i < B; i++) {
                plain->confusion[lab[i] * m->n_classes + pred0[i]]++;
                plain->correct += pred0[i] == lab[i];
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
        if (plain) {
            l = plain->loss;
            ct_dist_sum(&l, 1);
            plain->loss = l;
            ct_dist_sum_int(&plain->correct, 1);
            ct_dist_sum_int(plain->confusion, m->n_classes * m->n_classes);
        }
    }
    res->n = n;
    if (plain) plain->n = n;
    free(pred0);
    free(img); free(lab); free(pred); free(idx); free(fimg); free(l0); free(view);
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
        if (tot) fprintf(out, "%s %s %.1f%%", c % 5 ? "," : "\n ", buf, 100.0 * r->confusion[c * C + c] / tot);
        else fprintf(out, "%s %s n/a (0 images)", c % 5 ? "," : "\n ", buf); /* none of this class was tested */
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
