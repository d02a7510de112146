#!/usr/bin/env python3
"""onnx_check.py: helpers for tests/onnx.sh (run in the venv of tools/setup-tensorboard.sh).

  onnx_check.py pngs-idx IMAGES.idx3[.gz] N OUTDIR    first N images of an IDX file as grey PNGs
  onnx_check.py pngs-cifar BATCH.bin N OUTDIR [folders]  first N images of a CIFAR-10 binary batch as RGB
                                                      PNGs (with `folders`: OUTDIR/LABEL/NNNN.png)
  onnx_check.py check MODEL.onnx PIXELS LOGITS CKPT [NAMES]  onnx.checker, then onnxruntime on PIXELS (uint8 NHWC
                                                      images, as `cltrain predict --pixels` wrote them)
                                                      against LOGITS (float32, `cltrain predict --logits`)

  onnx_check.py check-list FILE                       check for each line "NAME<TAB>MODEL<TAB>PIXELS<TAB>LOGITS
                                                      <TAB>CKPT<TAB>NAMES" (one Python start for all): prints
                                                      "PASS NAME: ..." or "FAIL NAME: ..." per line

check prints one line and exits 1 when the checker fails, a logit differs by more than 1e-4 of the
row's largest |logit| (at least 1e-4 * 1), the top-1 class differs on any image, probabilities are
not softmax(logits), the metadata lacks the checkpoint's CRC (the last 4 bytes of CKPT) or
its class names are not NAMES (comma-separated; any names at all when NAMES is not given).
"""
import gzip
import struct
import sys
import zlib

import numpy as np


def write_png(path, img):
    """img: uint8 [H, W] or [H, W, 3]; an 8-bit grey or RGB PNG, no filtering."""
    h, w = img.shape[:2]
    colour = 0 if img.ndim == 2 else 2
    raw = b"".join(b"\0" + img[y].tobytes() for y in range(h))
    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)
    png = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, colour, 0, 0, 0))
    png += chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b"")
    with open(path, "wb") as f:
        f.write(png)


def pngs_idx(path, n, out):
    data = (gzip.open if path.endswith(".gz") else open)(path, "rb").read()
    magic, count, rows, cols = struct.unpack(">IIII", data[:16])
    assert magic == 0x803 and count >= n
    imgs = np.frombuffer(data, np.uint8, n * rows * cols, 16).reshape(n, rows, cols)
    for i in range(n):
        write_png(f"{out}/{i:04d}.png", imgs[i])


def pngs_cifar(path, n, out, folders=False):
    import os
    data = np.fromfile(path, np.uint8).reshape(-1, 3073)[:n]
    for i in range(n):
        d = f"{out}/{data[i, 0]}" if folders else out
        os.makedirs(d, exist_ok=True)
        write_png(f"{d}/{i:04d}.png", data[i, 1:].reshape(3, 32, 32).transpose(1, 2, 0).copy())


def check(model_path, pixels_path, logits_path, ckpt_path, names=None):
    import onnx
    import onnxruntime as ort
    model = onnx.load(model_path)
    onnx.checker.check_model(model, full_check=True)
    meta = {p.key: p.value for p in model.metadata_props}
    crc = struct.unpack("<I", open(ckpt_path, "rb").read()[-4:])[0]
    if meta.get("cltrain.checkpoint_crc32") != f"{crc:08x}":
        sys.exit(f"metadata crc {meta.get('cltrain.checkpoint_crc32')} is not the checkpoint's {crc:08x}")
    got = meta.get("cltrain.classes", "").split("\n")
    if (names is not None and got != names.split(",")) or not got[0]:
        sys.exit(f"metadata class names {got} are not {names}")
    if "cltrain.mean" in meta:  # a model's own normalisation: its metadata names what the graph applies
        from onnx import numpy_helper
        inits = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
        for key in ("mean", "std"):
            vals = np.array([float(v) for v in meta["cltrain." + key].split(",")], np.float32)
            init = next((v for k, v in inits.items() if k.startswith(f"norm_{key}_")), None)
            if init is None or not np.array_equal(init.ravel(), vals):
                sys.exit(f"metadata cltrain.{key} {meta['cltrain.' + key]} is not the graph's norm_{key} {init}")
    inp = model.graph.input[0].type.tensor_type.shape.dim
    c, h, w = (d.dim_value for d in inp[1:])
    want = np.fromfile(logits_path, np.float32)
    px = np.fromfile(pixels_path, np.uint8)
    n = px.size // (h * w * c)
    want = want.reshape(n, -1)
    x = px.reshape(n, h, w, c).transpose(0, 3, 1, 2).astype(np.float32)
    sess = ort.InferenceSession(model_path, providers=["CPUExecutionProvider"])
    logits, probs = sess.run(["logits", "probabilities"], {"pixels": x})
    scale = np.maximum(np.abs(want).max(axis=1, keepdims=True), 1.0)
    rel = (np.abs(logits - want) / scale).max()
    e = np.exp(logits - logits.max(axis=1, keepdims=True))
    soft = np.abs(probs - e / e.sum(axis=1, keepdims=True)).max()
    agree = int((logits.argmax(1) == want.argmax(1)).sum())
    line = (f"{n} images, {want.shape[1]} classes: max relative logit difference {rel:.2e}, top-1 agrees on "
            f"{agree}/{n}, softmax error {soft:.1e}, opset {model.opset_import[0].version}, "
            f"{len(model.graph.node)} nodes")
    print(line)
    if not (rel <= 1e-4 and agree == n and soft <= 1e-5 and n > 0):
        sys.exit(1)


def check_list(path):
    import contextlib
    import io
    for line in open(path):
        f = line.rstrip("\n").split("\t")
        out = io.StringIO()
        try:
            with contextlib.redirect_stdout(out):
                check(f[1], f[2], f[3], f[4], f[5] or None)
            print(f"PASS {f[0]}: {out.getvalue().strip()}")
        except SystemExit as e:
            print(f"FAIL {f[0]}: {out.getvalue().strip()} {e.code if isinstance(e.code, str) else ''}".strip())
        except Exception as e:  # the checker's own errors, onnxruntime's load errors
            print(f"FAIL {f[0]}: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}")


if __name__ == "__main__":
    cmd = sys.argv[1]
    if cmd == "pngs-idx":
        pngs_idx(sys.argv[2], int(sys.argv[3]), sys.argv[4])
    elif cmd == "pngs-cifar":
        pngs_cifar(sys.argv[2], int(sys.argv[3]), sys.argv[4], len(sys.argv) > 5 and sys.argv[5] == "folders")
    elif cmd == "check-list":
        check_list(sys.argv[2])
    elif cmd == "check":
        check(*sys.argv[2:7])
    else:
        sys.exit(__doc__)
