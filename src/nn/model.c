/* nn/model.c: the sequencer. Given a model read by nn/cfg.c, it allocates
 * every device buffer once (ct_model_setup), and runs the layers in order forward and in reverse
 * backward, each through its ct_layer_ops (src/nn/layers/); then softmax
 * cross-entropy and the optimizer launch. Nothing is allocated after
 * ct_model_setup. Tested by tests/test_model.c and tests/test_layers.c. */
#include "cltrain/layer.h"
#include <limits.h>
#include <math.h>
#include <string.h>

int ct_model_check_input(const ct_model *m, int h, int w, int c, int n_classes, const char *data_name, const char *advice) {
    if (h != m->in_h || w != m->in_w || c != m->in_c)
        return ct_fail(CT_EINPUT, "model %s expects %dx%dx%d input but %s has %dx%dx%d images; %s",
                       m->name, m->in_h, m->in_w, m->in_c, data_name, h, w, c, advice);
    if (n_classes != m->n_classes)
        return ct_fail(CT_EINPUT, "model %s has %d classes but %s has %d; %s", m->name, m->n_classes, data_name, n_classes, advice);
    return 0;
}

void ct_model_summary(const ct_model *m, FILE *out) {
    fprintf(out, "model %s: input %dx%dx%d, %d classes, %zu parameters, %.1f MFLOP/image forward\n", m->name, m->in_h,
            m->in_w, m->in_c, m->n_classes, m->n_params, m->flops_fwd * 1e-6);
    if (m->prep.c) {
        char d[2 * CT_PREP_MAX * 20 + 16];
        ct_prep_describe(&m->prep, d, sizeof d);
        fprintf(out, "  input prepared as the model says, (x / 255 - mean) / std per channel: %s\n", d);
    }
    for (int i = 0; i < m->n_layers; i++) {
        const ct_layer *L = &m->layers[i];
        fprintf(out, "  %2d %-9s %4dx%-4dx%-5d -> %4dx%-4dx%-5d", i, ct_layer_name(L), L->ih, L->iw, L->ic, L->oh, L->ow, L->oc);
        if (L->k) fprintf(out, " k%d s%d p%d", L->k, L->stride, L->pad);
        if (ct_layer_ops_of(L)->summary) ct_layer_ops_of(L)->summary(L, out);
        if (L->from >= -1) fprintf(out, " + layer %d", L->from);
        if (L->act != CT_ACT_LINEAR) fprintf(out, " %s", ct_activations[L->act].name);
        fputc('\n', out);
    }
}

/* ---------------- device ---------------- */

static int build_kernels(ct_model *m, ct_cl *cl) {
    int rc;
    if ((rc = ct_cl_build(cl, &m->p_ops, "ops.cl", ""))) return rc;
    m->k_u8 = ct_cl_kernel(m->p_ops, "u8_to_f32");
    m->k_gather = ct_cl_kernel(m->p_ops, "gather_u8");
    m->k_act_bwd = ct_cl_kernel(m->p_ops, "act_bwd");
    m->k_act_fwd = ct_cl_kernel(m->p_ops, "act_fwd");
    m->k_xent = ct_cl_kernel(m->p_ops, "softmax_xent");
    m->k_nonfinite = ct_cl_kernel(m->p_ops, "nonfinite");
    return 0;
}

/* The kernels index elements with int: refuse a batch whose tensors pass 2^31 - 1 values. */
static int check_counts(const ct_model *m, int batch) {
    size_t nin = (size_t)m->in_h * m->in_w * m->in_c * (size_t)batch;
    if (nin > INT_MAX)
        return ct_fail(CT_EINPUT, "%s: an input batch of %d holds %zu values, more than the %d the kernels index; use a smaller --batch",
                       m->name, batch, nin, INT_MAX);
    for (int i = 0; i < m->n_layers; i++) {
        const ct_layer *L = &m->layers[i];
        size_t n = ct_out_size(L) > ct_in_size(L) ? ct_out_size(L) : ct_in_size(L);
        size_t kk = (size_t)L->k * L->k * L->ic * L->oh * L->ow;
        if (kk > n) n = kk; /* im2col rows x columns: the conv GEMMs' sizes */
        if (n * (size_t)batch > INT_MAX)
            return ct_fail(CT_EINPUT, "%s:%d: layer %d (%s) holds %zu values for a batch of %d, more than the %d the kernels index; use a smaller --batch",
                           m->name, L->line, i, ct_layer_name(L), n * (size_t)batch, batch, INT_MAX);
    }
    return 0;
}

/* the group of (lr multiplier, decays, last epoch), added when new */
static int group_of(ct_model *m, float lr, int decays, int until) {
    float wd = !decays || lr == 0 ? 0.0f : 1.0f / lr;
    for (int g = 0; g < m->n_groups; g++)
        if (m->group[g].lr == lr && m->group[g].wd == wd && m->group[g].until == until) return g;
    if (m->n_groups == CT_MAX_GROUPS) return -1;
    m->group[m->n_groups] = (struct ct_param_group){lr, wd, until};
    return m->n_groups++;
}

/* Every parameter's group into decay_mask: the weights by their layer's decay
 * op and lr multiplier, the biases by theirs (see CT_MAX_GROUPS) */
static int setup_groups(ct_model *m) {
    uint8_t *mask = ct_xcalloc(m->n_params ? m->n_params : 1, 1);
    m->n_groups = 0;
    group_of(m, 1.0f, 0, 0);
    group_of(m, 1.0f, 1, 0);
    int rc = 0;
    for (int i = 0; i < m->n_layers && !rc; i++) {
        const ct_layer *L = &m->layers[i];
        if (ct_layer_ops_of(L)->decay) ct_layer_ops_of(L)->decay(L, mask);
        int gw[2] = {group_of(m, L->lr_w, 0, 0), group_of(m, L->lr_w, 1, 0)};
        int gb = group_of(m, L->lr_b, L->decay_b || (L->n_b && mask[L->b_off]), L->bias_until);
        if (gw[0] < 0 || gw[1] < 0 || gb < 0) {
            rc = ct_fail(CT_EINPUT, "%s:%d: more than %d different lr=/bias_lr=/bias_decay=/bias_epochs= settings", m->name,
                         L->line, CT_MAX_GROUPS);
            break;
        }
        for (size_t j = L->w_off; j < L->w_off + L->n_w; j++) mask[j] = (uint8_t)gw[mask[j]];
        for (size_t j = L->b_off; j < L->b_off + L->n_b; j++) mask[j] = (uint8_t)gb;
    }
    if (!rc) rc = ct_cl_alloc(m->cl, &m->groups, CT_MAX_GROUPS * 2 * sizeof(float), "parameter groups");
    if (!rc) {
        ct_cl_write(m->cl, m->decay_mask, 0, m->n_params, mask);
        ct_model_groups_epoch(m, 0);
    }
    free(mask);
    return rc;
}

/* 1 if one of L's parameters has a learning rate in epoch */
static int layer_trains(const ct_layer *L, int epoch) {
    return (L->n_w && L->lr_w != 0.0f) || (L->n_b && L->lr_b != 0.0f && !(L->bias_until && epoch >= L->bias_until));
}

double ct_model_step_flops(const ct_model *m) {
    double f = 0;
    for (int i = 0; i < m->n_layers; i++) {
        const ct_layer_ops *o = ct_layer_ops_of(&m->layers[i]);
        double fl = o->flops ? o->flops(&m->layers[i]) : 0;
        f += fl * (i < m->grad_from ? 1 : i == m->grad_from ? 2 : 3);
    }
    return f;
}

void ct_model_groups_epoch(ct_model *m, int epoch) {
    /* past --freeze's layers and those whose parameters are all frozen; layers
     * without parameters too, but only above one of those (a model that starts
     * with a pooling layer keeps its input gradients, which the tests read) */
    int i = m->n_frozen, frozen = m->n_frozen > 0;
    for (; i < m->n_layers && !layer_trains(&m->layers[i], epoch); i++) frozen |= m->layers[i].n_w + m->layers[i].n_b > 0;
    m->grad_from = frozen ? i : 0;
    float t[CT_MAX_GROUPS * 2] = {0};
    for (int g = 0; g < m->n_groups; g++) {
        int off = m->group[g].until && epoch >= m->group[g].until;
        t[2 * g] = off ? 0.0f : m->group[g].lr;
        t[2 * g + 1] = off ? 0.0f : m->group[g].wd;
    }
    ct_cl_write(m->cl, m->groups, 0, sizeof t, t);
}

int ct_model_has_groups(const ct_model *m) { return m->n_groups > 2; }

int ct_model_setup(ct_model *m, ct_cl *cl, int batch, int gemm_mode) {
    m->cl = cl;
    m->batch = batch;
    int rc;
    if ((rc = check_counts(m, batch))) return rc;
    if ((rc = ct_gemm_init(&m->gemm, cl, gemm_mode))) return rc;
    if (m->db_defaults) m->gemm.use_choices = 0;
    if (m->conv_tuned) {
        m->gemm.n_convs = 0;
        for (int i = 0; i < m->n_conv_tuned; i++)
            if ((rc = ct_conv_choose(&m->gemm, &m->conv_tuned[i]))) return rc;
    }
    if ((rc = build_kernels(m, cl))) return rc;
    m->training = 1;
    size_t P = m->n_params * sizeof(float);
    size_t nin = (size_t)m->in_h * m->in_w * m->in_c * batch;
    if ((rc = ct_cl_alloc(cl, &m->params, P, "parameters"))) return rc;
    if ((rc = ct_cl_alloc(cl, &m->grads, P, "gradients"))) return rc;
    if ((rc = ct_cl_alloc(cl, &m->decay_mask, m->n_params, "weight-decay mask"))) return rc;
    for (int j = 0; j < 2; j++) {
        if ((rc = ct_cl_alloc(cl, &m->inputs[j], nin * sizeof(float), "input batch"))) return rc;
        if ((rc = ct_cl_alloc(cl, &m->labels2[j], (size_t)batch * 4, "labels"))) return rc;
    }
    m->input = m->inputs[0];
    m->labels = m->labels2[0];
    if ((rc = ct_cl_alloc(cl, &m->input_u8, nin, "input batch (bytes)"))) return rc;
    if ((rc = ct_cl_alloc(cl, &m->loss, (size_t)batch * 4, "loss"))) return rc;
    if ((rc = ct_cl_alloc(cl, &m->pred, (size_t)batch * 4, "predictions"))) return rc;
    if ((rc = ct_cl_alloc(cl, &m->dlogits, (size_t)batch * m->n_classes * 4, "logit gradients"))) return rc;
    if ((rc = ct_cl_alloc(cl, &m->flag, 4, "flag"))) return rc;
    ct_needs need = {.ws = 0, .ones = (size_t)batch, .ws2 = 0, .ws3 = 0};
    for (int i = 0; i < m->n_layers; i++) {
        ct_layer *L = &m->layers[i];
        char what[64];
        snprintf(what, sizeof what, "layer %d output", i);
        if ((rc = ct_cl_alloc(cl, &L->out, ct_out_size(L) * batch * sizeof(float), what))) return rc;
        if (i > 0) {
            snprintf(what, sizeof what, "layer %d input gradient", i);
            if ((rc = ct_cl_alloc(cl, &L->dx, ct_in_size(L) * batch * sizeof(float), what))) return rc;
        }
        const ct_layer_ops *o = ct_layer_ops_of(L);
        if (o->build && !m->kinds[L->type] && (rc = o->build(m, &m->kinds[L->type]))) return rc;
        if (ct_activations[L->act].grad_reads_input && !o->act_inside) {
            snprintf(what, sizeof what, "layer %d pre-activation", i);
            if ((rc = ct_cl_alloc(cl, &L->act_in, ct_out_size(L) * batch * sizeof(float), what))) return rc;
        }
        if (o->setup && (rc = o->setup(m, L, batch, &need))) return rc;
    }
    if ((rc = ct_cl_alloc(cl, &m->ws, (need.ws ? need.ws : 1) * sizeof(float), "workspace"))) return rc;
    if ((rc = ct_cl_alloc(cl, &m->ones, need.ones * sizeof(float), "ones"))) return rc;
    if (need.ws2 && (rc = ct_cl_alloc(cl, &m->ws2, need.ws2 * sizeof(float), "second workspace"))) return rc;
    if (need.ws3 && (rc = ct_cl_alloc(cl, &m->ws3, need.ws3 * sizeof(float), "third workspace"))) return rc;
    float one = 1.0f;
    CL_CHECK(clEnqueueFillBuffer(cl->queue, m->ones, &one, sizeof one, 0, need.ones * sizeof(float), 0, NULL, NULL));
    return setup_groups(m);
}

void ct_model_init_weights(ct_model *m, uint64_t seed) {
    m->seed = (uint32_t)(seed ^ (seed >> 32));
    float *p = ct_xcalloc(m->n_params ? m->n_params : 1, sizeof *p);
    for (int i = 0; i < m->n_layers; i++) {
        const ct_layer_ops *o = ct_layer_ops_of(&m->layers[i]);
        if (o->init && m->layers[i].n_w) o->init(&m->layers[i], i, p, seed);
    }
    ct_model_set_params(m, p);
    free(p);
    ct_cl_fill0(m->cl, m->grads, 0, m->n_params * 4);
    m->step = 0;
}

void ct_model_get_params(ct_model *m, float *host) { ct_cl_read(m->cl, m->params, 0, m->n_params * 4, host); }
void ct_model_set_params(ct_model *m, const float *host) { ct_cl_write(m->cl, m->params, 0, m->n_params * 4, host); }

void ct_model_free(ct_model *m) {
    for (int i = 0; i < m->n_layers; i++) {
        ct_cl_release(&m->layers[i].out);
        ct_cl_release(&m->layers[i].dx);
        ct_cl_release(&m->layers[i].act_in);
        for (int j = 0; j < 4; j++) ct_cl_release(&m->layers[i].own[j]);
    }
    m->input = m->labels = NULL; /* aliases of inputs[] and labels2[] */
    cl_mem *mems[] = {&m->params, &m->grads, &m->decay_mask, &m->groups, &m->inputs[0], &m->inputs[1],
                      &m->labels2[0], &m->labels2[1], &m->input_u8,
                      &m->loss, &m->pred, &m->dlogits, &m->ws, &m->ones, &m->flag, &m->ws2, &m->ws3};
    for (size_t i = 0; i < sizeof mems / sizeof *mems; i++) ct_cl_release(mems[i]);
    cl_kernel ks[] = {m->k_gather, m->k_u8, m->k_act_bwd, m->k_act_fwd, m->k_xent, m->k_nonfinite};
    for (size_t i = 0; i < sizeof ks / sizeof *ks; i++)
        if (ks[i]) clReleaseKernel(ks[i]);
    if (m->p_ops) clReleaseProgram(m->p_ops);
    for (int t = 0; t < CT_LAYER_TYPES; t++)
        if (m->kinds[t]) ct_layer_table[t]->release(m->kinds[t]);
    if (m->gemm.cl) ct_gemm_free(&m->gemm);
    free(m->cfg);
    memset(m, 0, sizeof *m);
}

/* ---------------- passes ---------------- */

void ct_model_set_batch(ct_model *m, const uint8_t *images, const int32_t *labels, int B, float scale, float shift) {
    CT_ASSERT(B >= 1 && B <= m->batch);
    size_t n = (size_t)B * m->in_h * m->in_w * m->in_c;
    CL_CHECK(clEnqueueWriteBuffer(m->cl->queue, m->input_u8, CL_FALSE, 0, n, images, 0, NULL, NULL));
    CL_CHECK(clEnqueueWriteBuffer(m->cl->queue, m->labels, CL_FALSE, 0, (size_t)B * 4, labels, 0, NULL, NULL));
    ct_kargs(m->k_u8, m->input, m->input_u8, 0, scale, shift, (int)n);
    ct_cl_run(m->cl, m->k_u8, "u8_to_f32", 1, &n, NULL);
    /* the writes above read host memory after returning; finish so the caller may reuse it */
    ct_cl_finish(m->cl);
}

void ct_layer_forward(ct_model *m, int i, int B) {
    ct_layer *L = &m->layers[i];
    ct_layer_ops_of(L)->forward(m, i, ct_layer_output(m, i - 1), B);
    if (ct_fused_act(m, L) != L->act) { /* split: the kernels wrote the pre-activation */
        size_t n = (size_t)B * ct_out_size(L);
        int vw = ct_channel_vw(m, (int)n);
        size_t gws = n / (size_t)vw;
        ct_kargs(m->k_act_fwd, L->out, L->act_in, L->act, (int)n, vw);
        ct_cl_run(m->cl, m->k_act_fwd, "act_fwd", 1, &gws, NULL);
    }
}

void ct_model_select_input(ct_model *m, int j) {
    m->input = m->inputs[j];
    m->labels = m->labels2[j];
}

void ct_model_gather(ct_model *m, cl_mem data, cl_mem lab, cl_mem idx, int B, float scale, float shift) {
    int sz = m->in_h * m->in_w * m->in_c;
    ct_kargs(m->k_gather, m->input, m->labels, data, lab, idx, sz, scale, shift);
    size_t gws[2] = {(size_t)sz, (size_t)B};
    ct_cl_run(m->cl, m->k_gather, "gather_u8", 2, gws, NULL);
}

void ct_model_forward(ct_model *m, int B) {
    m->whole_pass = 1;
    for (int i = 0; i < m->n_layers; i++) ct_layer_forward(m, i, B);
    m->whole_pass = 0;
}

void ct_model_loss(ct_model *m, int B) {
    ct_layer *last = &m->layers[m->n_layers - 1];
    ct_kargs(m->k_xent, m->loss, m->pred, m->dlogits, last->out, m->labels, 0, B, m->n_classes,
               1.0f / (float)(m->loss_batch > 0 ? m->loss_batch : B), m->label_smoothing);
    size_t gws = (size_t)B;
    ct_cl_run(m->cl, m->k_xent, "softmax_xent", 1, &gws, NULL);
}

/* whether layer s reads layer j's output as a second input and adds its gradient w.r.t. it */
static int adds_into(const ct_model *m, int s, int j) {
    return m->layers[s].from == j && ct_layer_ops_of(&m->layers[s])->backward_from;
}

/* layer i's pass through its activation's gradient (ct_act_pass): its arguments */
static ct_act_grad act_grad_of(const ct_model *m, int i) {
    const ct_layer *L = &m->layers[i];
    int both = ct_layer_ops_of(L)->dx_is_dy && L->dx && i != m->grad_from;
    return (ct_act_grad){.t = ct_activations[L->act].grad_reads_input ? L->act_in : L->out, .dx2 = both ? L->dx : NULL,
                         .act = L->act, .both = both};
}

/* Layer i's dx is the gradient w.r.t. layer i-1's output. After layer i
 * has written it, every layer reading that output as a second input
 * (from == i-1) adds its share: input gradients overwrite, except there.
 * The last of them may take the sum through layer i-1's activation in the
 * same pass (backward_from with a ct_act_grad): resnet20's block outputs,
 * 7 memory passes of a block output's size per identity block down to 5
 * (with the batch norm's output left to the conv, resnet20's step 1.050x,
 * 15 of 16 pairs of bench train; the downsampling blocks' too, 1.028x
 * more, 14 of 16).
 * Below m->grad_from no parameter trains: those layers are skipped, and
 * layer grad_from computes its parameters' gradients without its dx. */
void ct_layer_backward(ct_model *m, int i, int B) {
    ct_layer *L = &m->layers[i];
    if (i < m->grad_from) return; /* frozen, and so is everything below */
    cl_mem dy = i == m->n_layers - 1 ? m->dlogits : m->layers[i + 1].dx;
    const ct_layer_ops *o = ct_layer_ops_of(L);
    if (ct_act_pass(L) && !L->act_done) {
        size_t n = (size_t)B * ct_out_size(L);
        int vw = ct_channel_vw(m, (int)n);
        size_t gws = n / (size_t)vw;
        ct_act_grad ag = act_grad_of(m, i);
        ct_kargs(m->k_act_bwd, dy, ag.t, ag.act, (int)n, vw, ag.both ? ag.dx2 : dy, ag.both);
        ct_cl_run(m->cl, m->k_act_bwd, "act_bwd", 1, &gws, NULL);
    }
    L->act_done = 0;
    cl_mem dx = L->dx;
    if (i == m->grad_from) L->dx = NULL; /* its parameters' gradients only: no layer below wants dx */
    o->backward(m, i, ct_layer_output(m, i - 1), dy, B);
    L->dx = dx;
    if (!L->dx || i == m->grad_from) return;
    /* the adds of the layers reading layer i-1's output as well; the last may take the gradient through
     * layer i-1's activation in the same pass (its backward then skips it) */
    int last = -1;
    for (int s = i; s < m->n_layers; s++)
        if (adds_into(m, s, i - 1)) last = s;
    for (int s = i; s <= last; s++)
        if (adds_into(m, s, i - 1)) {
            int fold = s == last && !m->act_apart && i > 0 && i - 1 >= m->grad_from && ct_act_pass(&m->layers[i - 1]);
            ct_act_grad ag = fold ? act_grad_of(m, i - 1) : (ct_act_grad){0};
            if (ct_layer_ops_of(&m->layers[s])->backward_from(m, s, L->dx, B, fold ? &ag : NULL)) {
                m->layers[i - 1].act_done = 1;
                m->act_folded++;
            }
        }
}

void ct_model_backward(ct_model *m, int B, void (*on_layer_done)(void *ctx, int layer), void *ctx) {
    for (int i = 0; i < m->n_layers; i++) m->layers[i].act_done = 0; /* (a backward left unfinished) */
    for (int i = m->n_layers - 1; i >= 0; i--) {
        if (B) ct_layer_backward(m, i, B);
        if (on_layer_done) on_layer_done(ctx, i);
    }
}

void ct_model_zero_grad(ct_model *m) { ct_cl_fill0(m->cl, m->grads, 0, m->n_params * 4); }

static void enqueue_nonfinite(ct_model *m, cl_mem x, size_t off, size_t n) {
    int io = (int)off, in = (int)n, contiguous = m->cl->is_cpu;
    ct_kargs(m->k_nonfinite, m->flag, x, io, in, contiguous);
    size_t gws = 1024;
    long room = ct_cl_loop_room(m->cl, 1); /* a device that ends long loops early (cl.h): more work-items */
    if ((long)((n + gws - 1) / gws) > room && room > 0) gws = (n + (size_t)room - 1) / (size_t)room;
    ct_cl_run(m->cl, m->k_nonfinite, "nonfinite", 1, &gws, NULL);
}

void ct_model_guard_grads(ct_model *m) {
    int zero = 0;
    CL_CHECK(clEnqueueFillBuffer(m->cl->queue, m->flag, &zero, sizeof zero, 0, sizeof zero, 0, NULL, NULL));
    enqueue_nonfinite(m, m->grads, 0, m->n_params);
}

double ct_model_read_results(ct_model *m, int B, int32_t *pred) {
    float loss[4096];
    CT_ASSERT(B <= 4096);
    CL_CHECK(clEnqueueReadBuffer(m->cl->queue, m->loss, CL_FALSE, 0, (size_t)B * 4, loss, 0, NULL, NULL));
    if (pred) CL_CHECK(clEnqueueReadBuffer(m->cl->queue, m->pred, CL_FALSE, 0, (size_t)B * 4, pred, 0, NULL, NULL));
    CL_CHECK(clEnqueueReadBuffer(m->cl->queue, m->flag, CL_FALSE, 0, 4, &m->nonfinite, 0, NULL, NULL));
    ct_cl_finish(m->cl);
    double s = 0;
    for (int i = 0; i < B; i++) s += loss[i];
    return s;
}

static int range_nonfinite(ct_model *m, size_t off, size_t n) {
    int zero = 0, flag = 0;
    CL_CHECK(clEnqueueWriteBuffer(m->cl->queue, m->flag, CL_FALSE, 0, 4, &zero, 0, NULL, NULL));
    enqueue_nonfinite(m, m->grads, off, n);
    ct_cl_read(m->cl, m->flag, 0, 4, &flag);
    return flag;
}

int ct_model_grads_nonfinite(ct_model *m) { return range_nonfinite(m, 0, m->n_params); }

int ct_model_first_nonfinite_layer(ct_model *m) {
    /* backward runs from the last layer to the first: the first to go bad is the highest index */
    for (int i = m->n_layers - 1; i >= 0; i--) {
        const ct_layer *L = &m->layers[i];
        if (L->n_w + L->n_b && range_nonfinite(m, L->w_off, L->n_w + L->n_b)) return i;
    }
    return -1;
}
