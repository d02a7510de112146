#!/usr/bin/python3
"""PyTorch twin of `cltrain cifar10 --model cifar-cnn` (or `--model resnet20`), trained the same way.

It checks cltrain's kernels, augmentation and batch norm at scale: both
programs train the same network with the same recipe on the same files, so
their test accuracies should agree within noise (about a point).

What is the same as cltrain (read from its sources, not from its docs):
- network (models/cifar-cnn.cfg; --model resnet20: models/resnet20.cfg, the
  class in pytorch_common.py): three blocks of two conv3x3 pad 1 (with
  bias) + batch norm + ReLU, each ending in maxpool 2x2; dense 2048->256 +
  batch norm + ReLU; dense 256->10; softmax cross-entropy (mean over the batch);
- init (ct_model_init_weights): conv and dense weights normal with std
  sqrt(2 / fan_in) (fan_in = k*k*in_channels, or the dense input size),
  biases 0; batch norm gamma 1, beta 0, running mean 0, running variance 1;
- batch norm (kernels/bn.cl): eps 1e-5, momentum 0.1, biased variance in the
  forward pass, unbiased in the running average (as PyTorch);
- optimizer (kernels/optim.cl): SGD with momentum, buf = m*buf + (g + wd*p),
  p -= lr*buf (PyTorch's SGD); Nesterov, the same buf and p -= lr*((g + wd*p)
  + m*buf) (PyTorch's SGD with nesterov=True); or AdamW (decoupled: p -= lr*(mhat/(sqrt(vhat)
  + eps) + wd*p)); weight decay only on conv and dense weights: not on biases,
  not on batch-norm gamma and beta;
- schedule (ct_schedule_lr, per step g of `total` = steps/epoch * epochs):
  warm-up lr*(g+1)/warmup for g < warmup, then constant, step (x0.1 at 1/2,
  x0.01 at 3/4 of the rest) or cosine to 0 over the remaining steps;
- data: a fresh permutation each epoch, batch 128, the last batch of an
  epoch short; --limit-train/--limit-test take the first N images;
- augmentation (src/data/augment.c, ct_augment_apply with standardisation),
  per training sample, in this order, on the whole image (values x/255): flip
  left-right with p 1/2, (full) add one brightness delta uniform in
  [-63/255, 63/255], (full) contrast (x - mean_c)*f + mean_c per channel with
  f uniform in [0.2, 1.8), no clipping, per-image standardisation
  (x - mean) / max(std, 1/sqrt(3072)) over all 3072 values, then the crop
  32x32 out of the image padded by 4 pixels of 0 (its mean after
  standardising), offset uniform, crop-then-flip geometry; --cutout N then
  zeroes an NxN square centred on a uniform pixel (clipped at the border);
  test images: x/255, standardised;
- --label-smoothing E: targets (1-E)*onehot + E/10 (PyTorch's definition);
- --tta flip: test logits averaged over the image and its mirror.
What differs: the random numbers (numpy, not cltrain's generator), so the
data order, the augmentation draws and the initial weights differ sample by
sample; layout is NCHW, so the dense weights see the features in another
order (the init is i.i.d., so this changes nothing in distribution).

Run with Debian's interpreter, which has torch (python3-torch):
  /usr/bin/python3 tools/pytorch_cifar_cnn.py --data DIR --epochs 10 \
      --optimizer sgd --lr 0.05 --weight-decay 5e-4 --schedule cosine --warmup 200
DIR holds data_batch_1..5.bin and test_batch.bin (or cifar-10-batches-bin/).
Prints `pytorch epoch E test accuracy: A` after every epoch, like cltrain's
`epoch E: test: ... accuracy A%`.
"""
import argparse
import math
import os
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

import pytorch_common as common

SIDE, CH = 32, 3
PIXELS = SIDE * SIDE * CH


def read_batches(folder, names):
    """CIFAR-10 binary records (1 label byte + R, G, B planes) -> NHWC uint8, labels."""
    xs, ys = [], []
    for name in names:
        path = os.path.join(folder, name)
        raw = np.fromfile(path, np.uint8)
        if raw.size == 0 or raw.size % (PIXELS + 1):
            raise SystemExit(f"{path}: not a whole number of CIFAR-10 records")
        rec = raw.reshape(-1, PIXELS + 1)
        ys.append(rec[:, 0].astype(np.int64))
        xs.append(rec[:, 1:].reshape(-1, CH, SIDE, SIDE).transpose(0, 2, 3, 1))
    return np.concatenate(xs), np.concatenate(ys)


def load(data):
    sub = os.path.join(data, "cifar-10-batches-bin")
    folder = sub if os.path.isdir(sub) else data
    train = read_batches(folder, [f"data_batch_{i}.bin" for i in range(1, 6)])
    test = read_batches(folder, ["test_batch.bin"])
    return train, test


def standardize(x):
    """Per-image standardisation of float64 NHWC images, as ct_augment_standardize."""
    n = x[0].size
    mean = x.reshape(len(x), -1).mean(1)
    sd = x.reshape(len(x), -1).std(1)
    sd = np.maximum(sd, 1.0 / math.sqrt(n))
    return (x - mean[:, None, None, None]) / sd[:, None, None, None]


def augment(xb, level, cutout, rng, pad=4):
    """uint8 NHWC batch -> float32 NHWC, ct_augment_apply's steps (sums in double): flip, brightness and
    contrast on the whole image, standardisation, then the padded crop, whose padding is 0 (the mean)."""
    B = len(xb)
    x = xb.astype(np.float64) / 255.0
    if level >= 1:
        dy = rng.integers(0, 2 * pad + 1, B)
        dx = rng.integers(0, 2 * pad + 1, B)
        flip = rng.random(B) < 0.5
        x[flip] = x[flip][:, :, ::-1]
    if level >= 2:
        delta = (2.0 * rng.random(B) - 1.0) * (63.0 / 255.0)
        f = 0.2 + rng.random(B) * 1.6
        x = x + delta[:, None, None, None]
        mean_c = x.mean((1, 2), keepdims=True)
        x = (x - mean_c) * f[:, None, None, None] + mean_c
    x = standardize(x)
    if level >= 1:
        padded = np.zeros((B, SIDE + 2 * pad, SIDE + 2 * pad, CH))
        padded[:, pad:pad + SIDE, pad:pad + SIDE] = x
        for i in range(B):
            ox = 2 * pad - dx[i] if flip[i] else dx[i]  # crop-then-flip geometry, as cltrain
            x[i] = padded[i, dy[i]:dy[i] + SIDE, ox:ox + SIDE]
    if cutout > 0:
        cy = rng.integers(0, SIDE, B)
        cx = rng.integers(0, SIDE, B)
        for i in range(B):
            y0, x0 = cy[i] - cutout // 2, cx[i] - cutout // 2
            x[i, max(y0, 0):max(y0 + cutout, 0), max(x0, 0):max(x0 + cutout, 0)] = 0.0
    return x.astype(np.float32)


def conv_bn(cin, cout):
    return [nn.Conv2d(cin, cout, 3, padding=1), nn.BatchNorm2d(cout, eps=1e-5, momentum=0.1), nn.ReLU()]


class CifarCnn(nn.Module):
    """models/cifar-cnn.cfg"""

    def __init__(self, classes=10):
        super().__init__()
        self.features = nn.Sequential(
            *conv_bn(3, 32), *conv_bn(32, 32), nn.MaxPool2d(2),
            *conv_bn(32, 64), *conv_bn(64, 64), nn.MaxPool2d(2),
            *conv_bn(64, 128), *conv_bn(128, 128), nn.MaxPool2d(2))
        self.fc1 = nn.Linear(4 * 4 * 128, 256)
        self.bn1 = nn.BatchNorm1d(256, eps=1e-5, momentum=0.1)
        self.fc2 = nn.Linear(256, classes)
        he_init(self)

    def forward(self, x):
        x = torch.flatten(self.features(x), 1)
        return self.fc2(F.relu(self.bn1(self.fc1(x))))

    def param_groups(self, wd):
        """Weight decay on conv and dense weights only (cltrain's decay mask)."""
        decay, rest = [], []
        for mod in self.modules():
            if isinstance(mod, (nn.Conv2d, nn.Linear)):
                decay.append(mod.weight)
                rest.append(mod.bias)
            elif isinstance(mod, nn.BatchNorm2d) or isinstance(mod, nn.BatchNorm1d):
                rest += [mod.weight, mod.bias]
        return [{"params": decay, "weight_decay": wd}, {"params": rest, "weight_decay": 0.0}]


class ResNet20(common.ResNet20):
    """models/resnet20.cfg (pytorch_common.py), with cltrain's init and decay mask"""

    def __init__(self, classes=10):
        super().__init__(classes)
        he_init(self)

    param_groups = CifarCnn.param_groups


def he_init(model):
    for mod in model.modules():
        if isinstance(mod, (nn.Conv2d, nn.Linear)):
            fan_in = mod.weight[0].numel()
            nn.init.normal_(mod.weight, 0.0, math.sqrt(2.0 / fan_in))
            nn.init.zeros_(mod.bias)


def schedule_lr(a, g, total):
    """ct_schedule_lr"""
    if a.warmup > 0 and g < a.warmup:
        return a.lr * (g + 1) / a.warmup
    t = (g - a.warmup) / (total - a.warmup) if total > a.warmup else 1.0
    if a.schedule == "step":
        return a.lr * (1.0 if t < 0.5 else 0.1 if t < 0.75 else 0.01)
    if a.schedule == "cosine":
        return a.lr * 0.5 * (1.0 + math.cos(math.pi * t))
    return a.lr


def to_nchw(x):
    return torch.from_numpy(np.ascontiguousarray(x.transpose(0, 3, 1, 2)))


def evaluate(model, x, y, tta, batch=500):
    model.eval()
    correct = 0
    loss = 0.0
    with torch.no_grad():
        for i in range(0, len(x), batch):
            xb = to_nchw(augment(x[i:i + batch], 0, 0, None))
            logits = model(xb)
            if tta == "flip":
                logits = 0.5 * (logits + model(torch.flip(xb, dims=[3])))
            yb = torch.from_numpy(y[i:i + batch])
            loss += F.cross_entropy(logits, yb, reduction="sum").item()
            correct += (logits.argmax(1) == yb).sum().item()
    model.train()
    return 100.0 * correct / len(x), loss / len(x)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", required=True, help="folder with the CIFAR-10 binary batches")
    ap.add_argument("--model", choices=["cifar-cnn", "resnet20"], default="cifar-cnn")
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--batch-size", type=int, default=128)
    ap.add_argument("--optimizer", choices=["sgd", "nesterov", "adam"], default="adam")
    ap.add_argument("--lr", type=float, default=None, help="[3e-4 for adam, 0.01 for sgd and nesterov] (as cltrain)")
    ap.add_argument("--momentum", type=float, default=0.9)
    ap.add_argument("--weight-decay", type=float, default=0.0)
    ap.add_argument("--schedule", choices=["constant", "step", "cosine"], default="constant")
    ap.add_argument("--warmup", type=int, default=0)
    ap.add_argument("--augment", choices=["none", "basic", "full"], default="full")
    ap.add_argument("--cutout", type=int, default=0)
    ap.add_argument("--label-smoothing", type=float, default=0.0)
    ap.add_argument("--tta", choices=["none", "flip"], default="none")
    ap.add_argument("--limit-train", type=int, default=0)
    ap.add_argument("--limit-test", type=int, default=0)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--threads", type=int, default=2)
    a = ap.parse_args()
    if a.lr is None:
        a.lr = 3e-4 if a.optimizer == "adam" else 0.01
    if not 0.0 <= a.label_smoothing < 1.0:
        ap.error("--label-smoothing: expected a number in [0, 1)")

    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    rng = np.random.default_rng(a.seed)
    (xtr, ytr), (xte, yte) = load(a.data)
    if a.limit_train > 0:
        xtr, ytr = xtr[:a.limit_train], ytr[:a.limit_train]
    if a.limit_test > 0:
        xte, yte = xte[:a.limit_test], yte[:a.limit_test]
    level = {"none": 0, "basic": 1, "full": 2}[a.augment]

    model = ResNet20() if a.model == "resnet20" else CifarCnn()
    groups = model.param_groups(a.weight_decay)
    if a.optimizer in ("sgd", "nesterov"):
        opt = torch.optim.SGD(groups, lr=a.lr, momentum=a.momentum, nesterov=a.optimizer == "nesterov")
    else:
        opt = torch.optim.AdamW(groups, lr=a.lr, betas=(0.9, 0.999), eps=1e-8)
    n, B = len(xtr), a.batch_size
    spe = (n + B - 1) // B
    total = spe * a.epochs
    print(f"pytorch twin of {a.model}: {n} training and {len(xte)} test images, batch {B}, {spe} steps per epoch, "
          f"{a.optimizer} lr {a.lr} wd {a.weight_decay} {a.schedule} warmup {a.warmup}, augment {a.augment}, "
          f"torch {torch.__version__}, {torch.get_num_threads()} threads", flush=True)
    g = 0
    for e in range(1, a.epochs + 1):
        t0 = time.perf_counter()
        perm = rng.permutation(n)
        seen = correct = 0
        loss_sum = 0.0
        for s in range(spe):
            idx = perm[s * B:(s + 1) * B]
            xb = to_nchw(augment(xtr[idx], level, a.cutout, rng))
            yb = torch.from_numpy(ytr[idx])
            for grp in opt.param_groups:
                grp["lr"] = schedule_lr(a, g, total)
            opt.zero_grad()
            logits = model(xb)
            loss = F.cross_entropy(logits, yb, label_smoothing=a.label_smoothing)
            loss.backward()
            opt.step()
            g += 1
            seen += len(idx)
            loss_sum += loss.item() * len(idx)
            correct += (logits.argmax(1) == yb).sum().item()
        t = time.perf_counter() - t0
        acc, tl = evaluate(model, xte, yte, a.tta)
        print(f"pytorch epoch {e} train loss {loss_sum / seen:.4f} acc {100.0 * correct / seen:.1f}% "
              f"({t:.0f} s, {seen / t:.0f} img/s); test loss {tl:.4f}", flush=True)
        print(f"pytorch epoch {e} test accuracy: {acc:.2f}", flush=True)


if __name__ == "__main__":
    main()
