/* optim.h: optimizers behind one interface. Each is one file in src/optim
 * (a table entry: name, number of state buffers, default learning rate, the
 * step kernel in kernels/optim.cl and how its arguments are set) with a
 * float64 reference in src/ref/optim.c. A step is one launch over the flat
 * parameter, gradient and state buffers (llm.c style). Weight decay touches
 * only the parameters the model's decay mask marks (weights, not biases nor
 * batch-norm parameters). A NaN or Inf gradient leaves parameters and state
 * untouched (the model's device-side guard, ct_model_guard_grads).
 * Tested by tests/test_layers.c (device against reference, every optimizer,
 * several steps) and tests/checkpoint.sh (state saved and resumed bit for bit). */
#ifndef CLTRAIN_OPTIM_H
#define CLTRAIN_OPTIM_H
#include "cltrain/model.h"

/* The values are stored in checkpoints: append, never renumber. */
enum { CT_OPT_ADAM, CT_OPT_SGD, CT_OPT_ADAMW, CT_OPT_NESTEROV, CT_OPT_COUNT };
#define CT_OPT_MAX_STATE 2

/* An optimizer's settings, its hyper-parameters (--lr, --momentum, --weight-decay; b1, b2, eps fixed). */
typedef struct ct_optim_hparams { int kind; float lr, b1, b2, eps, wd, momentum; } ct_optim_hparams;

typedef struct ct_optim_state ct_optim_state;
/* An optimizer type: its entry in the table of optimizers. */
typedef struct ct_optim_type {
    const char *name;          /* --optimizer NAME, and the printout */
    const char *help;          /* one line for --help */
    int n_state;               /* state buffers of n_params floats each (moments, velocity) */
    float default_lr;          /* --lr when not given */
    const char *kernel;        /* its step kernel in kernels/optim.cl */
    /* Set the step kernel's arguments for optimizer step o->m->step (1-based)
     * at learning rate lr (the schedule's value; o->hp.lr is the base rate). */
    void (*set_args)(const ct_optim_state *o, cl_kernel k, float lr);
} ct_optim_type;

/* An optimizer bound to a model: its kernel and state on the device. */
struct ct_optim_state {
    const ct_optim_type *type;
    ct_optim_hparams hp;
    ct_model *m;
    cl_program prog;
    cl_kernel k;
    cl_mem state[CT_OPT_MAX_STATE]; /* [n_params] floats each, the first type->n_state used */
    int vw;                          /* parameters per work-item: 16 on a CPU, 1 on a GPU (kernels/optim.cl) */
};
/* The step count is the model's (m->step: Adam's bias correction and the dropout
 * masks use it); ct_optim_step increments it, a caller that skips a step undoes it. */

extern const ct_optim_type ct_optim_adam, ct_optim_adamw, ct_optim_sgd, ct_optim_nesterov;
/* Indexed by kind (CT_OPT_*). */
extern const ct_optim_type *const ct_optim_types[CT_OPT_COUNT];
/* The optimizer called name, or NULL. */
const ct_optim_type *ct_optim_type_find(const char *name, int *kind);
/* "adam|adamw|sgd|nesterov", for messages. */
const char *ct_optim_type_list(void);

/* Build the step kernel and allocate type->n_state zeroed state buffers (m->step is left alone). */
int ct_optim_setup(ct_optim_state *o, ct_model *m, const ct_optim_hparams *hp);
/* The same with vw parameters per work-item (1 or 16; 0: the device's choice) */
int ct_optim_setup_vw(ct_optim_state *o, ct_model *m, const ct_optim_hparams *hp, int vw);
/* One step at learning rate lr over m->grads (skipped on the device when a gradient is not finite). */
void ct_optim_step(ct_optim_state *o, float lr);
/* State buffer i (< type->n_state) to or from the host: n_params floats. */
void ct_optim_get_state(ct_optim_state *o, int i, float *host);
void ct_optim_set_state(ct_optim_state *o, int i, const float *host);
void ct_optim_free(ct_optim_state *o);
#endif
