/* layer_types.h: the table of layer types, one line each, in table order.
 * X(ENUM, name) makes the type CT_L_ENUM (cltrain/layer.h) and its line in
 * ct_layer_table, &ct_layer_<name>: the ct_layer_ops that its file
 * src/nn/layers/<name>.c defines. A new layer type is its files and one line
 * here (docs/ADDING_A_LAYER.md). */
#ifndef CLTRAIN_LAYER_TYPES_H
#define CLTRAIN_LAYER_TYPES_H
#define CT_LAYER_TYPE_LIST(X) \
    X(CONV, conv)             \
    X(MAXPOOL, maxpool)       \
    X(DENSE, dense)           \
    X(BATCHNORM, batchnorm)   \
    X(AVGPOOL, avgpool)       \
    X(DROPOUT, dropout)       \
    X(SHORTCUT, shortcut)     \
    X(GLOBALMAXPOOL, globalmaxpool)
#endif
