"""Shared pieces of cltrain's PyTorch references (tools/pytorch_*.py).

The PyTorch twins of cltrain's built-in models, the BLAS PyTorch loaded, and
a timed training loop on in-memory batches. Run with Debian's interpreter
(/usr/bin/python3, package python3-torch).
"""
import ctypes
import os
import re
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

SEED = 1
LR = 3e-4  # Adam, as `cltrain train` uses by default


class MnistCnn(nn.Module):
    """models/mnist-cnn.cfg: conv3x3 1->32, ReLU, conv3x3 32->64, ReLU,
    maxpool 2x2, dense 9216->128, ReLU, dense 128->10."""
    shape = (1, 28, 28)

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


class CifarCnn(nn.Module):
    """models/cifar-cnn.cfg: three blocks of two (conv3x3 pad 1, batch norm,
    ReLU) ending in maxpool 2x2 (32, 64, 128 filters), dense 2048->256 with
    batch norm and ReLU, dense 256->10."""
    shape = (3, 32, 32)

    def __init__(self):
        super().__init__()
        layers, c = [], 3
        for f in (32, 64, 128):
            for _ in range(2):
                layers += [nn.Conv2d(c, f, 3, padding=1), nn.BatchNorm2d(f), nn.ReLU()]
                c = f
            layers.append(nn.MaxPool2d(2))
        self.features = nn.Sequential(*layers)
        self.fc1 = nn.Linear(128 * 4 * 4, 256)
        self.bn1 = nn.BatchNorm1d(256)
        self.fc2 = nn.Linear(256, 10)

    def forward(self, x):
        # cltrain keeps activations NHWC; flatten order does not change the cost
        x = torch.flatten(self.features(x), 1)
        return self.fc2(F.relu(self.bn1(self.fc1(x))))


class Block(nn.Module):
    """A basic block of models/resnet20.cfg: conv, bn, relu, conv, bn, + shortcut, relu."""

    def __init__(self, cin, cout, stride):
        super().__init__()
        self.c1 = nn.Conv2d(cin, cout, 3, stride=stride, padding=1)
        self.b1 = nn.BatchNorm2d(cout, eps=1e-5, momentum=0.1)
        self.c2 = nn.Conv2d(cout, cout, 3, padding=1)
        self.b2 = nn.BatchNorm2d(cout, eps=1e-5, momentum=0.1)
        self.stride, self.pad = stride, cout - cin

    def forward(self, x):
        y = self.b2(self.c2(F.relu(self.b1(self.c1(x)))))
        s = x[:, :, ::self.stride, ::self.stride] if self.stride > 1 else x
        if self.pad:  # option A: the new channels are zeros, after the old ones
            s = F.pad(s, (0, 0, 0, 0, 0, self.pad))
        return F.relu(y + s)


class ResNet20(nn.Module):
    """models/resnet20.cfg: conv3x3 3->16 + batch norm + ReLU, 3 stages of 3
    basic blocks (16, 32, 64 filters; stride 2 and option-A shortcuts at the
    starts of stages 2 and 3), global average pooling, dense 64->10."""
    shape = (3, 32, 32)

    def __init__(self, classes=10):
        super().__init__()
        layers = [nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16, eps=1e-5, momentum=0.1), nn.ReLU()]
        cin = 16
        for cout in (16, 32, 64):
            for b in range(3):
                layers.append(Block(cin, cout, 2 if (b == 0 and cout != 16) else 1))
                cin = cout
        self.features = nn.Sequential(*layers)
        self.fc = nn.Linear(64, classes)

    def forward(self, x):
        return self.fc(self.features(x).mean((2, 3)))


MODELS = {"mnist-cnn": MnistCnn, "cifar-cnn": CifarCnn, "resnet20": ResNet20}


class _DlInfo(ctypes.Structure):
    _fields_ = [("fname", ctypes.c_char_p), ("fbase", ctypes.c_void_p),
                ("sname", ctypes.c_char_p), ("saddr", ctypes.c_void_p)]


def blas_loaded():
    """(kind, path): the library that provides the sgemm_ PyTorch's own
    library binds to, after a matrix product. kind is openblas, mkl, blis,
    reference or unknown. Several BLAS libraries can be mapped at once (Debian
    pulls libopenblas.so.0 in through OpenCV even when libblas.so.3 is the
    reference one), so the mapped files alone do not say which one runs."""
    a = torch.ones(64, 64)
    (a @ a).sum().item()
    with open("/proc/self/maps") as f:
        paths = sorted({line.split()[-1] for line in f if "/" in line})
    torch_cpu = [p for p in paths if "libtorch_cpu" in os.path.basename(p)]
    path = None
    if torch_cpu:
        try:
            fn = ctypes.CDLL(torch_cpu[0]).sgemm_  # dlsym: the library, then its dependencies
            info = _DlInfo()
            if ctypes.CDLL(None).dladdr(ctypes.cast(fn, ctypes.c_void_p), ctypes.byref(info)):
                path = os.path.realpath(info.fname.decode())
        except (AttributeError, OSError):
            path = None
    if path is None:  # a build with MKL or a bundled BLAS: no sgemm_ to look up
        hits = [p for p in paths if re.search(r"openblas|mkl|blis|libblas\.so", os.path.basename(p))]
        if not hits:
            return "unknown", "no BLAS library mapped"
        path = hits[0]
    low = path.lower()
    if "libtorch_cpu" in os.path.basename(low):  # PyPI's wheels link their BLAS in (MKL on x86-64)
        m = re.search(r"BLAS_INFO=(\w+)", torch.__config__.show())
        if m and m.group(1) in ("mkl", "openblas", "blis"):
            return m.group(1), path + " (linked in)"
    for key in ("openblas", "mkl", "blis"):
        if key in low:
            return key, path
    if "/blas/" in low or os.path.basename(low).startswith("libblas.so"):
        return "reference", path
    return "unknown", path


def step(model, opt, x, y):
    opt.zero_grad()
    loss = F.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
    return loss


def bench(name, batch, steps, threads, warmup=3):
    """(mean, fastest): images/s over `steps` timed Adam training steps after
    `warmup` ones, and of the fastest single step, on random in-memory batches
    (like `cltrain bench train`). The fastest step is what a machine shared
    with other jobs still shows reliably."""
    torch.set_num_threads(threads)
    torch.manual_seed(SEED)
    model = MODELS[name]()
    opt = torch.optim.Adam(model.parameters(), lr=LR)
    gen = torch.Generator().manual_seed(SEED)
    n = warmup + steps
    xs = torch.randint(0, 256, (n, batch) + model.shape, generator=gen).float() / 255.0
    ys = torch.randint(0, 10, (n, batch), generator=gen)
    for i in range(warmup):
        step(model, opt, xs[i], ys[i])
    t0 = time.perf_counter()
    best = float("inf")
    for i in range(warmup, n):
        s0 = time.perf_counter()
        step(model, opt, xs[i], ys[i])
        best = min(best, time.perf_counter() - s0)
    t = time.perf_counter() - t0
    return steps * batch / t, batch / best
