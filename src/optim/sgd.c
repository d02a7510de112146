/* optim/sgd.c: SGD with momentum in PyTorch's form: buf = momentum*buf + (g + wd*p);
 * p -= lr*buf (--momentum 0: plain SGD). Kernel sgd_step, reference ref_sgd;
 * tested by tests/test_layers.c. */
#include "cltrain/optim.h"

static void sgd_args(const ct_optim_state *o, cl_kernel k, float lr) {
    const ct_optim_hparams *h = &o->hp;
    ct_model *m = o->m;
    ct_kargs(k, m->params, o->state[0], m->grads, m->decay_mask, m->groups, m->flag, (int)m->n_params, lr, h->momentum, h->wd);
}

const ct_optim_type ct_optim_sgd = {
    .name = "sgd",
    .help = "SGD with momentum (PyTorch's form)",
    .n_state = 1, /* the momentum buffer */
    .default_lr = 0.01f,
    .kernel = "sgd_step",
    .set_args = sgd_args,
};
