/* model.h: a sequential network read from an INI-style .cfg (darknet-like,
 * read by its own line reader), its layers' forward and backward passes on the device,
 * and the flat parameter / gradient buffers (llm.c-style: the optimizer,
 * cltrain/optim.h, is one launch over them). Layout NHWC. Parameter gradients accumulate
 * (+=) and are cleared once per step (ct_model_zero_grad); input gradients
 * overwrite, then a [shortcut] reading that output adds its share. Tested by tests/test_layers.c (device vs reference, gradient
 * checks) and tests/test_model.c (cfg parsing and its errors). */
#ifndef CLTRAIN_MODEL_H
#define CLTRAIN_MODEL_H
#include "cltrain/gemm.h"
#include "cltrain/prep.h"

/* activations, fused into the layers' kernels: same values as kernels/prelude.cl, whose
 * CT_ACT and CT_ACT_BWD hold one line for each */
enum { CT_ACT_LINEAR = 0, CT_ACT_RELU = 1, CT_ACT_GELU = 2, CT_ACT_COUNT };
/* Indexed by CT_ACT_*: the name .cfg files write (activation=NAME), and 1 when its gradient
 * reads its input (GELU: the layer keeps the pre-activation while training) rather than its
 * output (ReLU). */
typedef struct ct_activation { const char *name; int grad_reads_input; } ct_activation;
extern const ct_activation ct_activations[CT_ACT_COUNT];
/* --conv: how 3x3 stride-1 convolutions run (the others always use im2col +
 * GEMM): im2col + GEMM, Winograd F(2x2, 3x3) or F(4x4, 3x3). auto: Winograd
 * F(4x4, 3x3) on a CPU device for those with at least 8 input channels (with
 * fewer, its GEMMs are too thin to pay for the transforms: cifar-cnn's first
 * layer, 3 channels, ran 2.4x slower); on other devices im2col until
 * Winograd is measured there (tools/gpu-check.sh times both). */
enum { CT_CONV_IM2COL = 0, CT_CONV_WINOGRAD = 1, CT_CONV_AUTO = 2, CT_CONV_WINOGRAD4 = 3, CT_CONV_DIRECT = 4 };
/* the output tile side m of the layer's Winograd F(m x m, 3x3), or 0: im2col */
static inline int ct_conv_wino_tile(int algo, int k, int stride, int ic, int is_cpu) {
    if (k != 3 || stride != 1) return 0;
    if (algo == CT_CONV_WINOGRAD) return 2;
    if (algo == CT_CONV_WINOGRAD4 || (algo == CT_CONV_AUTO && is_cpu && ic >= 8)) return 4;
    return 0;
}
/* The direct kernel (kernels/conv_direct.cl) takes a convolution of any size
 * and stride whose outputs are a multiple of 8 (and at most 16384 inputs
 * per output). --conv direct runs those
 * layers with it (the others im2col). --conv auto on a CPU device runs with
 * it the first layers (at most 32 inputs per output: 27 for a 3x3 over RGB),
 * where im2col + GEMM ran 9- or 27-long products at 5-20% of the machine's
 * SGEMM rate, and every other layer that is not Winograd's, where it skips
 * im2col's columns (bench kernels: resnet20's stride-2 layers, cifar-tf's
 * 5x5 ones). */
static inline int ct_conv_direct_fits(int k, int ic, int oc) { /* (its forward's windows of 4 pixels in private memory) */
    return oc % 8 == 0 && (long)k * k * ic <= 16384;
}
/* the algorithm the rule gives a layer: CT_TILE_DIRECT, a Winograd tile side (2, 4) or 0 (im2col) */
enum { CT_TILE_DIRECT = 1 };
static inline int ct_conv_rule(int algo, int k, int stride, int ic, int oc, int is_cpu) {
    int wino = ct_conv_wino_tile(algo, k, stride, ic, is_cpu);
    if (!ct_conv_direct_fits(k, ic, oc)) return wino;
    if (algo == CT_CONV_DIRECT) return CT_TILE_DIRECT;
    if (algo == CT_CONV_AUTO && is_cpu && (k * k * ic <= 32 || !wino)) return CT_TILE_DIRECT;
    return wino;
}

/* a layer type's own per-layer values (ct_layer.priv), laid out by its file */
typedef union ct_layer_priv { int i[4]; float f[4]; } ct_layer_priv;

typedef struct ct_layer {
    int type;                   /* its layer type: the index of its ct_layer_ops in ct_layer_table (cltrain/layer.h) */
    int act;                    /* CT_ACT_*, fused into the layer's kernels */
    int ih, iw, ic, oh, ow, oc; /* per-sample input and output shape */
    int k, stride, pad;         /* conv and pool window */
    size_t w_off, b_off, n_w, n_b; /* offsets (floats) into the flat parameter buffer; n_b 0: no bias */
    /* the optimizer's view of its parameters (ct_model_groups): lr multipliers of the weights and of
     * the biases, 1 when the biases decay too (the decay op marks the weights), and the epoch from
     * which the biases stop training (0: never) */
    float lr_w, lr_b;
    int decay_b, bias_until;
    float scale;                /* [dense]: y = scale * x W + b */
    int init;                   /* CT_INIT_* ([conv], [dense]) */
    int whiten;                 /* [conv] whiten=N: its weights from the first N training images' patches (ct_whiten) */
    int line;                   /* line of its section in the .cfg */
    int from;                   /* a second input: the output of layer `from` (-1: the network input); -2: none */
    cl_mem out;                 /* [batch, oh, ow, oc] */
    cl_mem dx;                  /* [batch, ih, iw, ic]: gradient w.r.t. the input (not for layer 0) */
    int relu_next;              /* act is ReLU and its backward is done by the next layer's (a maxpool's: kernels/pool.cl) */
    int pool_next;              /* the next layer is a 2x2, stride-2 [maxpool] that this layer alone feeds, and act is
                                   linear: in a whole forward (ct_model_forward) this layer's forward may pool into it */
    int pooled;                 /* its last forward wrote the next layer's output and maxima positions (pool_next):
                                   in a whole forward the maxpool's has nothing to do; this layer's own out is stale */
    int dy_pooled;              /* set by its last whole forward: its backward reads the next layer's (the maxpool's)
                                   gradient and maxima positions itself, and the maxpool's backward writes no dx */
    int add_next;               /* the next layer is a [shortcut] that alone reads this layer's output and adds an
                                   earlier output of the same shape to it, with no pre-activation to keep: in a
                                   whole forward this layer's forward may write the shortcut's output (batch norm) */
    int added;                  /* its last forward did (add_next): the shortcut's has nothing to do; this layer's own
                                   out is stale */
    int norm_next;              /* a [batchnorm] whose next layer, a fused Winograd conv, alone reads its output and
                                   can normalise its input as it loads it (act not GELU; set by the conv's setup) */
    int normed;                 /* its last forward did (norm_next, a whole forward): it computed its statistics and
                                   wrote no output (out is stale); the conv's forward and weight gradient read this
                                   layer's input and normalise it as bn_fwd would have */
    int act_done;               /* set in a backward by the last add into its gradient (ct_layer_ops.backward_from with
                                   ct_act_grad): its pass through the activation's gradient ran there; cleared by its
                                   own backward, which skips the pass */
    cl_mem act_in;              /* the activation's input, kept by the forward for the backward when the
                                   activation's gradient reads it (GELU) and the layer does not recompute it */
    cl_mem own[4];              /* buffers its type's setup allocated for it (its file names them); the model releases them */
    ct_layer_priv priv;         /* its type's own values, which its file alone reads and writes (conv: its algorithm;
                                   batchnorm: eps and momentum; dropout: its rate); plain values, copied with the layer */
} ct_layer;

/* The algorithm conv layer L runs as, as its setup chose it (0 for other
 * layers), in ct_conv_rule's terms: CT_TILE_DIRECT, a Winograd tile side
 * (2, 4) or 0 (im2col). ct_conv_use_im2col makes a direct layer run im2col
 * + GEMM (bench kernels times CLBlast's path so; save and restore L->priv
 * around it). In src/nn/layers/conv.c. */
int ct_conv_tile(const ct_layer *L);
void ct_conv_use_im2col(ct_layer *L);

/* A conv layer whose algorithm --conv auto may take from the tuning database
 * (3x3, stride 1), and its key there at batch B. */
static inline int ct_conv_tunable(const ct_layer *L) { return L->k == 3 && L->stride == 1; }
static inline ct_conv_choice ct_conv_key(const ct_layer *L, int B) {
    return (ct_conv_choice){B, L->ih, L->iw, L->ic, L->oc, L->pad, 0};
}

#define CT_MAX_LAYERS 64
/* Training defaults a model's [net] section may carry (darknet's habit):
 * key=value lines whose key is one of ct_recipe_keys, kept as text here; a
 * training command applies each as its option (the key with '_' as '-',
 * batch= as --batch-size) unless that option was given (cli/opts.c), and
 * checks its value as it checks the option's. */
#define CT_MAX_RECIPE 24
typedef struct ct_recipe_entry { char key[24], value[48]; int line; } ct_recipe_entry;
extern const char *const ct_recipe_keys[]; /* NULL-terminated */
/* Parameter groups (the optimizer's view): every parameter belongs to one,
 * its byte in decay_mask. Group 0: lr x1, no decay; group 1: lr x1, decay
 * (the two every model has; --freeze moves parameters to group 0); then one
 * per other (lr multiplier, decay, last epoch) a layer's keys ask for. A
 * group with lr multiplier m decays by wd/m, as a PyTorch parameter group
 * with lr = m*lr and weight_decay = wd/m: every group's decay per step is
 * the same (airbench's rule); m = 0 freezes it (no step, no decay). */
#define CT_MAX_GROUPS 64
#define CT_MAX_LAYER_TYPES 32

typedef struct ct_model {
    char name[256];
    char *cfg;                  /* the definition as text, kept for checkpoints */
    ct_recipe_entry recipe[CT_MAX_RECIPE]; /* [net]'s training defaults, in file order */
    int n_recipe;
    int in_h, in_w, in_c, n_classes;
    ct_prep prep;               /* [net] mean= and std=: how inputs are prepared (c 0: the data set's way) */
    int n_layers;
    ct_layer layers[CT_MAX_LAYERS];
    size_t n_params;
    double flops_fwd;           /* per sample, multiply-add = 2 */
    /* device side, after ct_model_setup */
    ct_cl *cl;
    ct_gemm gemm;
    int batch;
    cl_program p_ops;           /* ops.cl: what the model does besides its layers */
    cl_kernel k_u8, k_gather, k_act_bwd, k_act_fwd, k_xent, k_nonfinite;
    cl_mem params, grads, decay_mask; /* decay_mask: a uchar per parameter, its group (ct_model_groups) */
    cl_mem groups;              /* float2 per group: its lr multiplier and weight-decay multiplier */
    int n_groups;
    struct ct_param_group { float lr, wd; int until; } group[CT_MAX_GROUPS];
    cl_mem input, input_u8, labels, loss, pred, dlogits, ws, ones, flag;
    cl_mem inputs[2], labels2[2];   /* double-buffered input; input/labels point at one pair */
    int conv_algo;              /* CT_CONV_*, set before ct_model_setup (0: im2col everywhere) */
    int wino_unfused;           /* 1: F(4x4) always in separate kernels, never wino_fused (tests run both) */
    int act_apart;              /* 1: every pass through an activation's gradient as its own act_bwd, never in the
                                   last add into that gradient (ct_layer_ops.backward_from; tests run both) */
    long act_folded;            /* how many such passes ran in an add so far */
    int wino_ft;                /* > 0: the fused Winograd kernels' tiles per work-item, not the device's (tests run both) */
    /* set before ct_model_setup, for `cltrain tune` (0 and NULL: the tuning database as written):
     * db_defaults 1: neither the database's GEMM choices nor its conv choices, the shipped defaults
     * and the --conv auto rule only (the tuner's baseline); conv_tuned: these conv choices replace
     * the database's */
    int db_defaults;
    const ct_conv_choice *conv_tuned;
    int n_conv_tuned;
    cl_mem ws2, ws3;            /* second and third workspaces, sized by the layers' setup (ct_needs; m->ws is the first) */
    void *kinds[CT_MAX_LAYER_TYPES]; /* each layer type's device state (its programs and kernels), made by its
                                        ct_layer_ops.build when setup meets its first layer, freed by .release */
    uint32_t seed;              /* dropout masks hash (seed, step, layer, index) */
    int training;               /* 1: batch statistics (and running averages updated); 0: running averages */
    int whole_pass;             /* inside ct_model_forward: layers may fuse across their boundary (pool_next); a layer
                                   run alone (bench kernels, tune) writes its own output */
    int step;                   /* optimizer steps taken (Adam's bias correction, dropout masks) */
    int nonfinite;              /* read back with the results: the last step met a NaN/Inf gradient and was skipped */
    float label_smoothing;      /* softmax cross-entropy targets (1-e)*onehot + e/C; 0: plain one-hot */
    int loss_batch;             /* > 0: the loss is the sum over this many samples' mean (data-parallel global batch); 0: B */
    int n_frozen;               /* --freeze N: layers 0..N-1 do not train (set before ct_model_groups_epoch) */
    int grad_from;              /* the first layer from n_frozen on with a parameter that trains this epoch
                                   (ct_model_groups_epoch): backward stops there, without its input gradient */
} ct_model;

/* Parse a model definition. name is for messages (file name or built-in name). */
int ct_model_parse(ct_model *m, const char *text, const char *name);
/* Load --model NAME|FILE.cfg: a path if it contains '/' or ends in .cfg, else a built-in. */
int ct_model_load(ct_model *m, const char *spec);
/* "mnist-cnn, mnist-cnn-bn, mlp, ...": the built-in models (for --help and messages) */
const char *ct_model_builtins(void);
/* The same, fitted to the data: the [net] section's height, width, channels
 * and classes and the last [dense] section's outputs are set to these, and
 * m->cfg holds the rewritten text (so checkpoints load without the data). */
int ct_model_load_shaped(ct_model *m, const char *spec, int h, int w, int c, int classes);
/* The .cfg text cfg with its [net] section's mean= and std= lines replaced
 * by p's (p->c 0: removed), placed right after the [net] header; malloc'd. */
char *ct_model_cfg_set_prep(const char *cfg, const ct_prep *p);
/* Check the data shape fits the model's input: CT_EINPUT naming both shapes (or class counts), then advice. */
int ct_model_check_input(const ct_model *m, int h, int w, int c, int n_classes, const char *data_name, const char *advice);
/* Allocate every device buffer for batch size `batch` (nothing is allocated later). */
int ct_model_setup(ct_model *m, ct_cl *cl, int batch, int gemm_mode);
/* He-normal weights, zero biases, from seed; zero gradients, step 0. */
void ct_model_init_weights(ct_model *m, uint64_t seed);
void ct_model_free(ct_model *m);
/* Print the layer table. */
void ct_model_summary(const ct_model *m, FILE *out);

/* Upload B images of bytes (B*in_h*in_w*in_c) and labels, converting x = byte*scale + shift on the device. */
void ct_model_set_batch(ct_model *m, const uint8_t *images, const int32_t *labels, int B, float scale, float shift);
/* Make input buffer pair j (0 or 1) the one forward/backward read. */
void ct_model_select_input(ct_model *m, int j);
/* Resident data: x[b] = data[idx[b]] * scale + shift, labels[b] = lab[idx[b]], on the device. */
void ct_model_gather(ct_model *m, cl_mem data, cl_mem lab, cl_mem idx, int B, float scale, float shift);
void ct_model_forward(ct_model *m, int B);
/* Softmax cross-entropy on the last layer's output, with m->label_smoothing;
 * fills loss, pred, dlogits (mean over B). */
void ct_model_loss(ct_model *m, int B);
/* Backward from the last layer to the first. When on_layer_done is given it is
 * called after each layer's gradients are enqueued (top to bottom), e.g. to
 * start a gradient bucket's all-reduce. B == 0 (a rank with no samples this
 * step) enqueues no layer but still calls on_layer_done for each layer. */
void ct_model_backward(ct_model *m, int B, void (*on_layer_done)(void *ctx, int layer), void *ctx);
/* One layer: input is the previous layer's out (or m->input), dy is the next
 * layer's dx (or m->dlogits). The activation's backward is applied to dy in place. */
void ct_layer_forward(ct_model *m, int i, int B);
void ct_layer_backward(ct_model *m, int i, int B);
void ct_model_zero_grad(ct_model *m);
/* The NaN guard an optimizer step (ct_optim_step) reads on the device: sets
 * m->flag when any gradient is NaN or Inf, so the step leaves everything as it
 * was; ct_model_read_results then sets m->nonfinite (the caller should undo
 * m->step if it goes on). */
void ct_model_guard_grads(ct_model *m);
/* Read back per-sample loss and predictions (blocking). Returns the loss sum. */
double ct_model_read_results(ct_model *m, int B, int32_t *pred);
/* 1 if any parameter gradient is NaN or Inf (blocking). */
int ct_model_grads_nonfinite(ct_model *m);
/* The layer whose parameter gradient went non-finite first in backward order, or -1. */
int ct_model_first_nonfinite_layer(ct_model *m);

/* Upload the groups' multipliers for epoch (0-based): a group whose biases
 * stop training at `until` gets lr 0 from then on; and set grad_from, so
 * that backward skips the frozen layers below the first that trains (they
 * would get gradients multiplied by 0). Idempotent; setup calls it for epoch 0. */
void ct_model_groups_epoch(ct_model *m, int epoch);
/* FLOPs per sample of a training step as backward runs now: every layer's
 * forward, twice that for the backward of those from grad_from up (input
 * and parameter gradients), once for layer grad_from (parameters only) */
double ct_model_step_flops(const ct_model *m);
/* 1 if some group has a multiplier other than x1 (or freezes) */
int ct_model_has_groups(const ct_model *m);

void ct_model_get_params(ct_model *m, float *host);
void ct_model_set_params(ct_model *m, const float *host);
#endif
