#!/usr/bin/python3
"""PyTorch reference for cltrain's accuracy claim on Fashion-MNIST.

Trains exactly cltrain's built-in model `mnist-cnn` (models/mnist-cnn.cfg,
pytorch_common.MnistCnn) on Fashion-MNIST, on the CPU, with the same settings
as `cltrain train`: inputs are bytes/255 (no mean/std normalisation), batch
128, Adam lr 3e-4, reshuffled each epoch with a fixed seed, and prints the
test accuracy after each of --epochs E epochs. Training speed is measured by
tools/pytorch_bench.py.

Run it with Debian's interpreter (/usr/bin/python3, package python3-torch).
"""
import argparse
import gzip
import os
import struct
import sys
import time

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pytorch_common import LR, SEED, MnistCnn, step  # noqa: E402

DATA = "/usr/share/datasets/fashion-mnist"
BATCH = 128


def read_idx(path):
    """Read a gzipped IDX file (ubyte data only) into a numpy array."""
    with gzip.open(path, "rb") as f:
        buf = f.read()
    zero, dtype, ndim = struct.unpack(">HBB", buf[:4])
    if zero != 0 or dtype != 0x08:
        raise ValueError(f"{path}: not an unsigned-byte IDX file")
    dims = struct.unpack(">" + "I" * ndim, buf[4:4 + 4 * ndim])
    return np.frombuffer(buf, np.uint8, offset=4 + 4 * ndim).reshape(dims)


def load(split):
    x = read_idx(os.path.join(DATA, f"{split}-images-idx3-ubyte.gz"))
    y = read_idx(os.path.join(DATA, f"{split}-labels-idx1-ubyte.gz"))
    x = torch.from_numpy(x.astype(np.float32) / 255.0).unsqueeze(1)  # N,1,28,28
    return x, torch.from_numpy(y.astype(np.int64))


def accuracy(model, x, y):
    model.eval()
    correct = 0
    with torch.no_grad():
        for i in range(0, len(x), 1000):
            correct += (model(x[i:i + 1000]).argmax(1) == y[i:i + 1000]).sum().item()
    model.train()
    return 100.0 * correct / len(x)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--epochs", type=int, default=1)
    a = ap.parse_args()
    if a.epochs <= 0:
        ap.error("--epochs must be at least 1")

    torch.set_num_threads(a.threads)
    torch.manual_seed(SEED)
    model = MnistCnn()
    opt = torch.optim.Adam(model.parameters(), lr=LR)
    xtr, ytr = load("train")
    xte, yte = load("t10k")
    gen = torch.Generator().manual_seed(SEED)
    for e in range(1, a.epochs + 1):
        t0 = time.perf_counter()
        perm = torch.randperm(len(xtr), generator=gen)
        for i in range(0, len(xtr), BATCH):  # last batch is partial
            idx = perm[i:i + BATCH]
            step(model, opt, xtr[idx], ytr[idx])
        t = time.perf_counter() - t0
        print(f"pytorch epoch {e} test accuracy: {accuracy(model, xte, yte):.2f}")
        print(f"pytorch epoch {e} train time: {t:.1f} s, "
              f"{torch.get_num_threads()} threads, torch {torch.__version__}")


if __name__ == "__main__":
    main()
