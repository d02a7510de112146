/* onnx.h: a trained network as an ONNX model (opset 13), for `cltrain export`,
 * and an ONNX model read back as a cltrain model, for `cltrain import`.
 *
 * The graph takes "pixels", float [N, C, H, W] holding raw 0..255 values,
 * and applies the input preparation cltrain trains with as graph nodes: x /
 * 255, then the model's own normalisation ([net] mean= and std=: Sub and
 * Div by [1, C, 1, 1] constants) or else (CIFAR data sets) per-image
 * standardisation. Layers map to Conv,
 * Relu, MaxPool, GlobalAveragePool, BatchNormalization (running statistics),
 * Flatten + Gemm; dropout is left out. cltrain's activations are NHWC, so
 * conv weights are transposed HWIO -> OIHW and the first dense layer after a
 * spatial tensor gets its weight rows permuted from (h, w, c) to (c, h, w)
 * order. Outputs: "logits" [N, classes] and "probabilities" (Softmax).
 * metadata_props: cltrain.version, cltrain.checkpoint_crc32, cltrain.model,
 * cltrain.dataset, cltrain.input (the preparation in words), cltrain.mean and
 * cltrain.std (a model's own normalisation, comma-separated), cltrain.classes
 * (class names, one per line) when known.
 * Encoded by hand (protobuf wire format), like tboard.c. Depends on model.h
 * (parsing only; no device). Tested by tests/onnx.sh with onnx's checker and
 * onnxruntime against cltrain's own forward pass. */
#ifndef CLTRAIN_ONNX_H
#define CLTRAIN_ONNX_H
#include "cltrain/model.h"

typedef struct ct_onnx_meta {
    int standardize;                 /* 1: per-image standardisation after x / 255 (CIFAR) */
    const char *dataset;             /* the checkpoint's data set name */
    const char *const *class_names;  /* n_names names, or NULL */
    int n_names;
    uint32_t ckpt_crc;               /* the source checkpoint's stored CRC32 */
} ct_onnx_meta;

/* Encode model m (parsed, no device needed) with its n_params weights
 * `params` as an ONNX ModelProto into *out (malloc'd, *n bytes). CT_EINPUT
 * naming the layer when a layer has no ONNX form, or when the weights exceed
 * protobuf's 2 GiB message limit; CT_ENOMEM. */
int ct_onnx_encode(const ct_model *m, const float *params, const ct_onnx_meta *meta, uint8_t **out, size_t *n);

/* An ONNX model read back (train/onnx_import.c): the .cfg text of the
 * equivalent cltrain model and its weights in cltrain's layouts. */
typedef struct ct_onnx_imported {
    char *cfg;
    float *params;
    size_t n_params;
    int n_layers;
    char **class_names;      /* from cltrain export's metadata, or NULL */
    int n_names;
    char dataset[32];        /* cltrain export's data set (its input preparation), or "" */
    ct_prep prep;            /* cltrain export's model normalisation (cltrain.mean, cltrain.std), or none */
    char model_name[256];    /* cltrain export's model name, or "" */
    char notes[512];         /* what was dropped, for the user */
} ct_onnx_imported;

/* Read the ONNX ModelProto buf[0..len) (path names it in messages) into out.
 * The graph's ops must be those cltrain has (see onnx_import.c); anything else
 * is CT_EINPUT with one line naming the node, its op and what is supported.
 * Nothing is left in out on failure. */
int ct_onnx_import(const uint8_t *buf, size_t len, const char *path, ct_onnx_imported *out);
void ct_onnx_imported_free(ct_onnx_imported *r);

/* Write n bytes to path atomically: PATH.tmp.<pid>, fsync, rename, fsync of
 * the folder. CT_EIO "PATH: cannot write ..." on failure (nothing left behind). */
int ct_write_file_atomic(const char *path, const void *data, size_t n);
#endif
