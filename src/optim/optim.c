/* optim/optim.c: the optimizer table and what every optimizer shares: the
 * step kernel's build, the state buffers, the NaN guard before the step, and
 * the state's way to and from the host (checkpoints). The optimizers
 * themselves are one file each (adam.c, adamw.c, sgd.c, nesterov.c).
 * Tested by tests/test_layers.c and tests/checkpoint.sh. */
#include "cltrain/optim.h"
#include <string.h>

const ct_optim_type *const ct_optim_types[CT_OPT_COUNT] = {
    [CT_OPT_ADAM] = &ct_optim_adam,
    [CT_OPT_SGD] = &ct_optim_sgd,
    [CT_OPT_ADAMW] = &ct_optim_adamw,
    [CT_OPT_NESTEROV] = &ct_optim_nesterov,
};

const ct_optim_type *ct_optim_type_find(const char *name, int *kind) {
    for (int i = 0; i < CT_OPT_COUNT; i++)
        if (!strcmp(ct_optim_types[i]->name, name)) {
            if (kind) *kind = i;
            return ct_optim_types[i];
        }
    return NULL;
}

const char *ct_optim_type_list(void) {
    static char list[128];
    if (!list[0])
        for (int i = 0; i < CT_OPT_COUNT; i++)
            snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", i ? "|" : "", ct_optim_types[i]->name);
    return list;
}

int ct_optim_setup(ct_optim_state *o, ct_model *m, const ct_optim_hparams *hp) { return ct_optim_setup_vw(o, m, hp, 0); }

int ct_optim_setup_vw(ct_optim_state *o, ct_model *m, const ct_optim_hparams *hp, int vw) {
    CT_ASSERT(vw == 0 || vw == 1 || vw == 16);
    memset(o, 0, sizeof *o);
    CT_ASSERT(hp->kind >= 0 && hp->kind < CT_OPT_COUNT);
    o->type = ct_optim_types[hp->kind];
    o->hp = *hp;
    o->m = m;
    o->vw = vw ? vw : m->cl->is_cpu ? 16 : 1; /* parameters per work-item: kernels/optim.cl */
    int rc = ct_cl_build(m->cl, &o->prog, "optim.cl", o->vw == 16 ? "-DOPT_VW=16" : "");
    if (rc) return rc;
    o->k = ct_cl_kernel(o->prog, o->type->kernel);
    for (int i = 0; i < o->type->n_state; i++) {
        char what[64];
        snprintf(what, sizeof what, "%s state %d", o->type->name, i + 1);
        if ((rc = ct_cl_alloc(m->cl, &o->state[i], m->n_params * sizeof(float), what))) return rc;
        ct_cl_fill0(m->cl, o->state[i], 0, m->n_params * sizeof(float));
    }
    return 0;
}

void ct_optim_step(ct_optim_state *o, float lr) {
    /* NaN guard on the device: the step kernel reads the flag and does nothing
     * if any gradient is NaN or Inf, so the parameters stay the last good ones
     * without a host round trip inside the step */
    ct_model_guard_grads(o->m);
    o->m->step++;
    o->type->set_args(o, o->k, lr);
    size_t gws = (o->m->n_params + (size_t)o->vw - 1) / (size_t)o->vw;
    ct_cl_run(o->m->cl, o->k, o->type->kernel, 1, &gws, NULL);
}

void ct_optim_get_state(ct_optim_state *o, int i, float *host) {
    CT_ASSERT(i >= 0 && i < o->type->n_state);
    ct_cl_read(o->m->cl, o->state[i], 0, o->m->n_params * sizeof(float), host);
}

void ct_optim_set_state(ct_optim_state *o, int i, const float *host) {
    CT_ASSERT(i >= 0 && i < o->type->n_state);
    ct_cl_write(o->m->cl, o->state[i], 0, o->m->n_params * sizeof(float), host);
}

void ct_optim_free(ct_optim_state *o) {
    for (int i = 0; i < CT_OPT_MAX_STATE; i++) ct_cl_release(&o->state[i]);
    if (o->k) clReleaseKernel(o->k);
    if (o->prog) clReleaseProgram(o->prog);
    memset(o, 0, sizeof *o);
}
