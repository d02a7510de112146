/* cli/export.c: `cltrain export CHECKPOINT OUT.onnx`: the checkpoint's
 * network as an ONNX model (train/onnx.c), written atomically. The input
 * preparation follows training exactly as `cltrain predict` does: x / 255,
 * then the model's own normalisation ([net] mean= and std=) or else
 * per-image standardisation for CIFAR data sets. Tested by tests/onnx.sh. */
#include "cli.h"
#include "cltrain/checkpoint.h"
#include "cltrain/file.h"
#include "cltrain/onnx.h"
#include <errno.h>
#include <string.h>

/* the CRC32 a checkpoint stores in its last 4 bytes (ct_ckpt_load has checked it) */
static int ckpt_crc(const char *path, uint32_t *crc) {
    FILE *f = fopen(path, "rb");
    uint8_t b[4];
    int ok = f && fseek(f, -4, SEEK_END) == 0 && fread(b, 1, 4, f) == 4;
    if (f) fclose(f);
    if (!ok) return ct_fail(CT_EINPUT, "%s: cannot read its CRC (%s)", path, strerror(errno));
    *crc = (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
    return 0;
}

/* Checkpoints of built-in data sets written before they held class names:
 * the set's test split, when still at data_dir, gives them. */
void cli_dataset_names(const ct_ckpt *ck, ct_data *d) {
    memset(d, 0, sizeof *d);
    const ct_dataset_def *set = ct_dataset_find_kind(ck->data.kind);
    if (set && set->names_classes) ct_data_reopen(d, set, &ck->data, ck->data.path, ck->seed, 0, 0);
}

void cli_export_help(FILE *f) {
    fprintf(f, "Usage: cltrain export CHECKPOINT OUT.onnx\n"
               "Write the checkpoint's network as an ONNX model (opset 13). Input \"pixels\": float [N, C, H, W],\n"
               "raw 0..255 values (the graph scales them, then applies the model's mean= and std= or, for CIFAR,\n"
               "standardises them); outputs \"logits\" and\n"
               "\"probabilities\". Class names, the cltrain version and the checkpoint's CRC are in metadata_props.\n"
               "  --help                  this help\n");
}

int cmd_export(int argc, char **argv) {
    if (argc == 2 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))) {
        cli_export_help(stdout);
        return 0;
    }
    if (argc != 3 || argv[1][0] == '-' || argv[2][0] == '-') {
        ct_fail(CT_EINPUT, "export needs a checkpoint and an output file: cltrain export CHECKPOINT OUT.onnx");
        return cli_fail(CT_EINPUT);
    }
    const char *path = argv[1], *out = argv[2];
    ct_ckpt ck;
    int rc = ct_ckpt_load(&ck, path);
    if (rc) return cli_fail(rc);
    /* the output: a new file or a regular one, never the checkpoint itself (by inode, so links count) */
    if (ct_file_same(path, out))
        rc = ct_fail(CT_EINPUT, "export %s: that is the checkpoint %s itself; give another output file (OUT.onnx)", out, path);
    if (!rc) rc = ct_file_probe_write(out, "export");
    if (rc) {
        ct_ckpt_free(&ck);
        return cli_fail(rc);
    }
    ct_model m;
    const ct_dataset_def *set = ct_dataset_find_kind(ck.data.kind);
    ct_onnx_meta meta = {.standardize = set && set->standardize, .dataset = ck.data.kind,
                         .class_names = (const char *const *)ck.class_names, .n_names = ck.n_names};
    uint8_t *buf = NULL;
    size_t n = 0;
    rc = ct_model_parse(&m, ck.cfg, ck.model_name);
    if (!rc && m.prep.c) meta.standardize = 0; /* the model's own normalisation replaces the set's */
    if (!rc && m.n_params != ck.n_params)
        rc = ct_fail(CT_EINPUT, "%s: %zu parameters, its model %s has %zu; the checkpoint is not exportable", path,
                     ck.n_params, ck.model_name, m.n_params);
    if (!rc) rc = ckpt_crc(path, &meta.ckpt_crc);
    ct_data names;
    memset(&names, 0, sizeof names);
    if (!rc && !ck.n_names) {
        cli_dataset_names(&ck, &names);
        const ct_dataset *t = names.test;
        if (t && t->class_names && t->n_classes == m.n_classes) {
            meta.class_names = (const char *const *)t->class_names;
            meta.n_names = t->n_classes;
        } else {
            printf("export: %s: class names not found (data set %s not at %s); the model names classes by index\n",
                   path, ck.data.kind, ck.data.path);
        }
    }
    if (!rc) rc = ct_onnx_encode(&m, ck.params, &meta, &buf, &n);
    if (!rc) rc = ct_write_file_atomic(out, buf, n);
    if (!rc)
        printf("export: %s (model %s, %dx%dx%d -> %d classes, %zu parameters, trained %lld steps on %s) -> %s (%.1f MB, "
               "ONNX opset 13)\n", path, ck.model_name, m.in_c, m.in_h, m.in_w, m.n_classes, m.n_params,
               (long long)ck.next_batch, ck.data.kind, out, (double)n / 1e6);
    free(buf);
    ct_data_close(&names);
    ct_model_free(&m);
    ct_ckpt_free(&ck);
    return rc ? cli_fail(rc) : 0;
}
