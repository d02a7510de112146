/* optim/adamw.c: AdamW as in Loshchilov and Hutter (2019), Algorithm 2: the
 * decay is decoupled from the learning rate too. p -= lr*mhat/(sqrt(vhat)+eps)
 * + wd*(lr/lr_base)*p: --weight-decay is the share of each weight removed per
 * step at the base rate, and follows the schedule's factor, not --lr itself
 * (so tuning --lr leaves the decay alone; typical values 1e-5..1e-4).
 * Kernel adamw_step, reference ref_adamw; tested by tests/test_layers.c. */
#include "cltrain/optim.h"
#include <math.h>

static void adamw_args(const ct_optim_state *o, cl_kernel k, float lr) {
    const ct_optim_hparams *h = &o->hp;
    ct_model *m = o->m;
    float bc1 = (float)(1.0 - pow(h->b1, m->step)), bc2 = (float)(1.0 - pow(h->b2, m->step));
    float wdt = h->lr > 0 ? (float)((double)h->wd * lr / h->lr) : 0.0f; /* wd times the schedule's factor */
    ct_kargs(k, m->params, o->state[0], o->state[1], m->grads, m->decay_mask, m->groups, m->flag, (int)m->n_params, lr, h->b1, h->b2,
             h->eps, wdt, bc1, bc2);
}

const ct_optim_type ct_optim_adamw = {
    .name = "adamw",
    .help = "AdamW, decay decoupled from the rate: --weight-decay is per step",
    .n_state = 2,
    .default_lr = 3e-4f,
    .kernel = "adamw_step",
    .set_args = adamw_args,
};
