/* optim/adam.c: Adam (Kingma and Ba 2015) with bias correction; --weight-decay
 * is decoupled from the moments as in PyTorch's AdamW: p -= lr*(mhat/(sqrt(vhat)+eps) + wd*p).
 * Kernel adam_step, reference ref_adam; tested by tests/test_layers.c. */
#include "cltrain/optim.h"
#include <math.h>

static void adam_args(const ct_optim_state *o, cl_kernel k, float lr) {
    const ct_optim_hparams *h = &o->hp;
    ct_model *m = o->m;
    /* bias corrections in double on the host */
    float bc1 = (float)(1.0 - pow(h->b1, m->step)), bc2 = (float)(1.0 - pow(h->b2, m->step));
    ct_kargs(k, m->params, o->state[0], o->state[1], m->grads, m->decay_mask, m->groups, m->flag, (int)m->n_params, lr, h->b1, h->b2,
             h->eps, h->wd, bc1, bc2);
}

const ct_optim_type ct_optim_adam = {
    .name = "adam",
    .help = "Adam; --weight-decay as lr*wd*p, outside the moments",
    .n_state = 2, /* first and second moments */
    .default_lr = 3e-4f,
    .kernel = "adam_step",
    .set_args = adam_args,
};
