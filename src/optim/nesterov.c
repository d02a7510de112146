/* optim/nesterov.c: SGD with Nesterov momentum in PyTorch's form:
 * g' = g + wd*p; buf = momentum*buf + g'; p -= lr*(g' + momentum*buf).
 * Kernel nesterov_step, reference ref_nesterov; tested by tests/test_layers.c. */
#include "cltrain/optim.h"

static void nesterov_args(const ct_optim_state *o, cl_kernel k, float lr) {
    const ct_optim_hparams *h = &o->hp;
    ct_model *m = o->m;
    ct_kargs(k, m->params, o->state[0], m->grads, m->decay_mask, m->groups, m->flag, (int)m->n_params, lr, h->momentum, h->wd);
}

const ct_optim_type ct_optim_nesterov = {
    .name = "nesterov",
    .help = "SGD with Nesterov momentum (PyTorch's form)",
    .n_state = 1,
    .default_lr = 0.01f,
    .kernel = "nesterov_step",
    .set_args = nesterov_args,
};
