#!/usr/bin/python3
"""PyTorch reference for cltrain's speed and accuracy claims.

Trains exactly cltrain's built-in model `mnist-cnn` (models/mnist-cnn.cfg) on
Fashion-MNIST, on the CPU, with the same settings as `cltrain train`:
conv3x3 1->32, ReLU, conv3x3 32->64, ReLU, maxpool 2x2, flatten,
dense 9216->128, ReLU, dense 128->10, cross-entropy; inputs are bytes/255
(no mean/std normalisation), batch 128, Adam lr 3e-4, reshuffled each epoch
with a fixed seed.

  --bench-steps S  time S training steps after 3 warm-up steps (data already
                   in memory as tensors; only the steps are timed) and print
                   `pytorch images/s: <float>`; used by tools/bench-pytorch.sh
  --epochs E       train E full epochs, print test accuracy after each

Run it with Debian's interpreter (/usr/bin/python3, package python3-torch).
"""
import argparse
import gzip
import os
import struct
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

DATA = "/usr/share/datasets/fashion-mnist"
BATCH = 128
LR = 3e-4
SEED = 1


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


class MnistCnn(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 32, 3)
        self.conv2 = nn.Conv2d(32, 64, 3)
        self.fc1 = nn.Linear(9216, 128)
        self.fc2 = nn.Linear(128, 10)

    def forward(self, x):
        x = F.relu(self.conv1(x))
        x = F.relu(self.conv2(x))
        x = torch.flatten(F.max_pool2d(x, 2), 1)
        return self.fc2(F.relu(self.fc1(x)))


def step(model, opt, x, y):
    opt.zero_grad()
    loss = F.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
    return loss


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
    ap.add_argument("--bench-steps", type=int, default=0)
    ap.add_argument("--epochs", type=int, default=0)
    a = ap.parse_args()
    if a.bench_steps <= 0 and a.epochs <= 0:
        ap.error("give --bench-steps S or --epochs E")

    torch.set_num_threads(a.threads)
    torch.manual_seed(SEED)
    model = MnistCnn()
    opt = torch.optim.Adam(model.parameters(), lr=LR)
    xtr, ytr = load("train")
    gen = torch.Generator().manual_seed(SEED)

    if a.bench_steps > 0:
        perm = torch.randperm(len(xtr), generator=gen)
        n = 3 + a.bench_steps
        batches = [(xtr[perm[j:j + BATCH]], ytr[perm[j:j + BATCH]])
                   for j in ((i * BATCH) % (len(xtr) - BATCH) for i in range(n))]
        for x, y in batches[:3]:  # warm-up
            step(model, opt, x, y)
        t0 = time.perf_counter()
        for x, y in batches[3:]:
            step(model, opt, x, y)
        t = time.perf_counter() - t0
        print(f"pytorch images/s: {a.bench_steps * BATCH / t:.1f}")
        print(f"pytorch bench: {a.bench_steps} steps of batch {BATCH}, "
              f"{torch.get_num_threads()} threads, torch {torch.__version__}")

    if a.epochs > 0:
        xte, yte = load("t10k")
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
