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

/* Hyper-parameters (--lr, --momentum, --weight-decay; b1, b2, eps fixed). */
typedef struct ct_optim { int kind; float lr, b1, b2, eps, wd, momentum; } ct_optim;

typedef struct ct_opt ct_opt;
typedef struct ct_optimizer {
    const char *name;          /* --optimizer NAME, and the printout */
    const char *help;          /* one line for --help */
    int n_state;               /* state buffers of n_params floats each (moments, velocity) */
    float default_lr;          /* --lr when not given */
    const char *kernel;        /* its step kernel in kernels/optim.cl */
    /* Set the step kernel's arguments for optimizer step o->m->step (1-based)
     * at learning rate lr (the schedule's value; o->hp.lr is the base rate). */
    void (*set_args)(const ct_opt *o, cl_kernel k, float lr);
} ct_optimizer;

/* An optimizer bound to a model: its kernel and state on the device. */
struct ct_opt {
    const ct_optimizer *ops;
    ct_optim hp;
    ct_model *m;
    cl_program prog;
    cl_kernel k;
    cl_mem state[CT_OPT_MAX_STATE]; /* [n_params] floats each, the first ops->n_state used */
    int vw;                          /* parameters per work-item: 16 on a CPU, 1 on a GPU (kernels/optim.cl) */
};
/* The step count is the model's (m->step: Adam's bias correction and the dropout
 * masks use it); ct_opt_step increments it, a caller that skips a step undoes it. */

extern const ct_optimizer ct_optim_adam, ct_optim_adamw, ct_optim_sgd, ct_optim_nesterov;
/* Indexed by kind (CT_OPT_*). */
extern const ct_optimizer *const ct_optimizers[CT_OPT_COUNT];
/* The optimizer called name, or NULL. */
const ct_optimizer *ct_optimizer_find(const char *name, int *kind);
/* "adam|adamw|sgd|nesterov", for messages. */
const char *ct_optimizer_list(void);

/* Build the step kernel and allocate ops->n_state zeroed state buffers (m->step is left alone). */
int ct_opt_setup(ct_opt *o, ct_model *m, const ct_optim *hp);
/* The same with vw parameters per work-item (1 or 16; 0: the device's choice) */
int ct_opt_setup_vw(ct_opt *o, ct_model *m, const ct_optim *hp, int vw);
/* One step at learning rate lr over m->grads (skipped on the device when a gradient is not finite). */
void ct_opt_step(ct_opt *o, float lr);
/* State buffer i (< ops->n_state) to or from the host: n_params floats. */
void ct_opt_get_state(ct_opt *o, int i, float *host);
void ct_opt_set_state(ct_opt *o, int i, const float *host);
void ct_opt_free(ct_opt *o);
#endif
