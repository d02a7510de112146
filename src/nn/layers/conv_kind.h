/* nn/layers/conv_kind.h: what the three files of [conv] share (conv.c: the layer
 * and im2col + GEMM; conv_winograd.c: Winograd F(2x2, 3x3) and F(4x4, 3x3);
 * conv_direct.c: kernels/conv_direct.cl): the type's device state and each
 * algorithm's setup, forward and backward. Private to src/nn/layers. */
#ifndef CLTRAIN_LAYERS_CONV_KIND_H
#define CLTRAIN_LAYERS_CONV_KIND_H
#include "cltrain/layer.h"

/* [conv]'s device state (ct_layer_ops.build): conv.cl, and winograd.cl and
 * conv_direct.cl as its layers' setup builds them */
typedef struct ct_conv_kind {
    cl_program p;
    cl_kernel im2col, col2im;
    struct ct_wino_kernels {    /* winograd.cl built for one tile size: [0] F(2x2, 3x3), [1] F(4x4, 3x3) */
        cl_program p;
        cl_kernel in, w, out, dy, dw, fused, dw_fused; /* the fused ones: F(4x4) on a CPU only (wino[1]) */
        cl_kernel w16, dw16;    /* wino_w and wino_dw 16 channels per work-item, for CPUs */
        cl_kernel dy_pool, in_pool, out_pool; /* F(4x4) on a CPU, a 2x2 maxpool after the conv: wino_dy and wino_in
                                                  from its gradient, wino_out into it */
    } wino[2];
    struct ct_direct_kernels {  /* conv_direct.cl built for one layer shape (its -D options) */
        char opts[128];
        cl_program p;
        cl_kernel fwd, dw, wt, dx; /* dw: direct_dw or direct_dw_taps; wt, dx: for input channels in 16s */
    } direct[8];                /* CT_CONV_DIRECT(L) is 1 + the index of its layer's */
} ct_conv_kind;

static inline ct_conv_kind *ct_conv_kind_of(const ct_model *m, const ct_layer *L) { return ct_layer_kind(m, L); }
static inline size_t ct_max2(size_t a, size_t b) { return a > b ? a : b; }

/* The forward's V (Winograd) or im2col columns are kept for the weight
 * gradient, which then skips one of its two input transforms or its im2col,
 * while all the layers' buffers fit this budget (80 MB of V for cifar-cnn at
 * batch 128, 14 MB of columns for its first layer; the first layers of a
 * 128x128 VGG would take gigabytes, and recompute). */
#define KEEP_BYTES ((size_t)1 << 30)

/* A conv layer's own values (ct_layer.priv): the tile side m when it runs as
 * Winograd F(m x m, 3x3) (kernels/winograd.cl), else 0; 1 + its kernels'
 * slot in direct[] when it runs as kernels/conv_direct.cl, else 0 */
#define CT_CONV_WINO(L) ((L)->priv.i[0])
#define CT_CONV_DIRECT(L) ((L)->priv.i[1])

/* the buffer a layer keeps from its forward for its weight gradient (NULL: none) */
#define CT_CONV_KEPT(L) ((L)->own[0])
/* the direct kernel's bias for a layer without one (bias=0): oc zeros */
#define CT_DIRECT_ZEROS(L) ((L)->own[1])

/* Winograd (CT_CONV_WINO(L) = m): workspaces, kept V, GEMM shapes and winograd.cl for batch; forward; backward */
int ct_conv_wino_setup(ct_model *m, ct_layer *L, int batch, ct_needs *n);
void ct_conv_wino_forward(ct_model *m, ct_layer *L, cl_mem x, int B);
void ct_conv_wino_backward(ct_model *m, const ct_layer *L, cl_mem x, cl_mem dy, int B);

/* The direct kernel: conv_direct.cl for L's shape into a slot of the kind and
 * CT_CONV_DIRECT(L), its workspace and GEMM shapes, which stays 0 when all slots
 * are taken (L then runs im2col). Its data gradient needs input channels in 16s. */
int ct_conv_direct_setup(ct_model *m, ct_layer *L, int batch, ct_needs *n);
void ct_conv_direct_forward(ct_model *m, const ct_layer *L, cl_mem x, int B);
void ct_conv_direct_weight_grad(ct_model *m, const ct_layer *L, cl_mem x, cl_mem dy, int B);
void ct_conv_direct_data_grad(ct_model *m, const ct_layer *L, cl_mem dy, int B);
/* whether L's data gradient runs direct_dx (input channels in 16s, its lines within the device's loops) or im2col's */
int ct_conv_direct_dx(ct_model *m, const ct_layer *L);
#endif
