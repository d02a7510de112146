/* train/onnx.c: the ONNX exporter (see onnx.h): the input preparation as
 * graph nodes, then each layer's own nodes (ct_layer_ops.onnx, written
 * with cltrain/onnx_graph.h), recording the name of each layer's output
 * (a layer that reads an earlier output, such as a residual Add, looks it
 * up there), then the ModelProto. Tested by tests/onnx.sh (onnx.checker and
 * onnxruntime against cltrain's forward pass for every built-in model). */
#include "cltrain/onnx_graph.h"
#include "cltrain/layer.h"
#include "cltrain/file.h"
#include "cltrain/common.h"
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <string.h>
#include <unistd.h>

typedef ct_onnx_graph graph;

/* x / 255, then the model's normalisation ([net] mean= and std=) or else
 * per-image standardisation as ct_augment_standardize:
 * (x - mean) / max(stddev, 1 / sqrt(C*H*W)) over each image. */
static void emit_input(graph *g, const ct_model *m, int standardize, char *x) {
    char c255[32], y[32];
    ct_onnx_fresh(g, c255, "c255");
    float v255 = 255.0f;
    ct_onnx_init_f32(g, c255, NULL, 0, &v255, 1);
    ct_onnx_fresh(g, y, "scaled");
    ct_onnx_node2(g, "Div", "pixels", c255, y);
    memcpy(x, y, 32);
    if (m->prep.c) { /* the model's own normalisation, (x - mean) / std per channel, as torchvision's Normalize */
        char mean[32], std[32], d[32];
        const int64_t dims[4] = {1, m->prep.c, 1, 1};
        ct_onnx_fresh(g, mean, "norm_mean");
        ct_onnx_init_f32(g, mean, dims, 4, m->prep.mean, (size_t)m->prep.c);
        ct_onnx_fresh(g, std, "norm_std");
        ct_onnx_init_f32(g, std, dims, 4, m->prep.std, (size_t)m->prep.c);
        ct_onnx_fresh(g, d, "norm_centred");
        ct_onnx_node2(g, "Sub", x, mean, d);
        ct_onnx_fresh(g, y, "normalized");
        ct_onnx_node2(g, "Div", d, std, y);
        memcpy(x, y, 32);
        return;
    }
    if (!standardize) return;
    char mean[32], d[32], d2[32], var[32], sd[32], fl[32], sdf[32];
    const int64_t axes[3] = {1, 2, 3};
    ct_onnx_fresh(g, mean, "mean");
    ct_onnx_begin(g, "ReduceMean", (const char *const[]){x}, 1, mean);
    ct_onnx_attr_ints(g, "axes", axes, 3);
    ct_onnx_end(g);
    ct_onnx_fresh(g, d, "centred");
    ct_onnx_node2(g, "Sub", x, mean, d);
    ct_onnx_fresh(g, d2, "sq");
    ct_onnx_node2(g, "Mul", d, d, d2);
    ct_onnx_fresh(g, var, "var");
    ct_onnx_begin(g, "ReduceMean", (const char *const[]){d2}, 1, var);
    ct_onnx_attr_ints(g, "axes", axes, 3);
    ct_onnx_end(g);
    ct_onnx_fresh(g, sd, "sd");
    ct_onnx_node1(g, "Sqrt", var, sd);
    ct_onnx_fresh(g, fl, "sd_floor");
    float floor_sd = (float)(1.0 / sqrt((double)m->in_h * m->in_w * m->in_c));
    ct_onnx_init_f32(g, fl, NULL, 0, &floor_sd, 1);
    ct_onnx_fresh(g, sdf, "sd_max");
    ct_onnx_node2(g, "Max", sd, fl, sdf);
    ct_onnx_fresh(g, y, "standardized");
    ct_onnx_node2(g, "Div", d, sdf, y);
    memcpy(x, y, 32);
}

int ct_onnx_encode(const ct_model *m, const float *params, const ct_onnx_meta *meta, uint8_t **out, size_t *n) {
    uint32_t one = 1;
    CT_ASSERT(*(uint8_t *)&one == 1 && sizeof(float) == 4);
    *out = NULL;
    *n = 0;
    if (m->n_params > ((size_t)1 << 29) - ((size_t)1 << 24))
        return ct_fail(CT_EINPUT, "%s: %zu parameters (%.1f GiB) exceed the 2 GiB a single ONNX file can hold", m->name,
                       m->n_params, (double)m->n_params * 4 / (1 << 30));
    graph *g = ct_onnx_graph_new();
    char x[CT_ONNX_NAME];
    int rank4 = 1, rc = 0;
    emit_input(g, m, meta->standardize, x);
    ct_onnx_set_output(g, -1, x, 1);
    for (int i = 0; i < m->n_layers && !rc; i++) {
        const ct_layer *L = &m->layers[i];
        const ct_layer_ops *o = ct_layer_ops_of(L);
        if (!o->onnx)
            rc = ct_fail(CT_EINPUT, "%s: layer %d ([%s], line %d) has no ONNX form in this exporter", m->name, i, o->name, L->line);
        else if (!(rc = o->onnx(g, m, i, params, x, &rank4)))
            ct_onnx_set_output(g, i, x, rank4);
    }
    if (!rc) rc = ct_onnx_graph_model(g, m, meta, x, out, n);
    ct_onnx_graph_free(g);
    return rc;
}

int ct_write_file_atomic(const char *path, const void *data, size_t n) {
    char tmp[4200];
    int rc = ct_file_check_target(path, "output"); /* never rename over a device, FIFO or folder */
    if (rc) return rc;
    snprintf(tmp, sizeof tmp, "%s.tmp.%d", path, (int)getpid());
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) return ct_fail(CT_EIO, "%s: cannot write (%s); check the folder exists and is writable", path, strerror(errno));
    int e = 0;
    const uint8_t *p = data;
    while (n && !e) {
        ssize_t k = write(fd, p, n);
        if (k < 0 && errno == EINTR) continue;
        if (k < 0) e = errno;
        else { p += k; n -= (size_t)k; }
    }
    if (!e && fsync(fd)) e = errno;
    if (close(fd) && !e) e = errno;
    if (e) unlink(tmp);
    else e = ct_file_replace(tmp, path);
    return e ? ct_fail(CT_EIO, "%s: cannot write (%s); nothing was written", path, strerror(e)) : 0;
}
