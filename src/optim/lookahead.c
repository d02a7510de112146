/* optim/lookahead.c: the lookahead / moving average of the weights
 * (cltrain/lookahead.h): when it updates, one launch of lookahead_step over
 * the flat parameter buffer, and buffer copies for its start and the epoch
 * ends. Reference ref_lookahead; tested by tests/test_layers.c and
 * tests/checkpoint.sh. */
#include "cltrain/lookahead.h"
#include <math.h>
#include <string.h>

double ct_lookahead_decay(float rate, int64_t s, int64_t total) {
    double t = total > 0 ? (double)s / (double)total : 1.0;
    return pow((double)rate, CT_LOOKAHEAD_EVERY) * t * t * t;
}

int ct_lookahead_due(int64_t g, int epoch) { return epoch >= CT_LOOKAHEAD_START && (g + 1) % CT_LOOKAHEAD_EVERY == 0; }

int ct_lookahead_setup(ct_lookahead *la, ct_optim_state *opt, float rate) {
    memset(la, 0, sizeof *la);
    la->rate = rate;
    if (rate <= 0) return 0;
    la->m = opt->m;
    la->vw = opt->vw;
    la->k = ct_cl_kernel(opt->prog, "lookahead_step");
    return ct_cl_alloc(la->m->cl, &la->avg, la->m->n_params * sizeof(float), "lookahead average");
}

static void copy(ct_lookahead *la, cl_mem from, cl_mem to) {
    CL_CHECK(clEnqueueCopyBuffer(la->m->cl->queue, from, to, 0, 0, la->m->n_params * sizeof(float), 0, NULL, NULL));
}

void ct_lookahead_update(ct_lookahead *la, float w) {
    ct_kargs(la->k, la->m->params, la->avg, (int)la->m->n_params, w);
    size_t gws = (la->m->n_params + (size_t)la->vw - 1) / (size_t)la->vw;
    ct_cl_run(la->m->cl, la->k, "lookahead_step", 1, &gws, NULL);
}

void ct_lookahead_after_step(ct_lookahead *la, int64_t g, int64_t total, int epoch, int epoch_end) {
    if (la->rate <= 0) return;
    if (ct_lookahead_due(g, epoch)) {
        if (!la->have) copy(la, la->m->params, la->avg);
        else ct_lookahead_update(la, (float)(1.0 - ct_lookahead_decay(la->rate, g + 1, total)));
        la->have = 1;
    }
    if (epoch_end && la->have) copy(la, la->avg, la->m->params);
}

void ct_lookahead_get(ct_lookahead *la, float *host) { ct_cl_read(la->m->cl, la->avg, 0, la->m->n_params * sizeof(float), host); }

void ct_lookahead_set(ct_lookahead *la, const float *host) {
    ct_cl_write(la->m->cl, la->avg, 0, la->m->n_params * sizeof(float), host);
    la->have = 1;
}

void ct_lookahead_free(ct_lookahead *la) {
    ct_cl_release(&la->avg);
    if (la->k) clReleaseKernel(la->k);
    memset(la, 0, sizeof *la);
}
