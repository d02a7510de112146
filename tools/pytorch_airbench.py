"""PyTorch 2 twin of the fast CIFAR-10 recipe (airbench94, Keller Jordan 2024).

    tools/setup-pytorch2.sh build/pt2venv
    build/pt2venv/bin/python tools/pytorch_airbench.py --data DIR [--epochs 10] [--seed 0] [--threads 2]

DIR holds CIFAR-10's binary batches (data_batch_1..5.bin, test_batch.bin:
1 label byte + 3072 bytes of R, G, B planes per record), the files
`cltrain cifar10` reads. The network and recipe are airbench94's, in fp32 on
the CPU:

- net: a frozen 2x2 patch-whitening conv (24 filters: the eigenvectors of
  the training patches' covariance scaled by 1/sqrt(eigenvalue + 5e-4),
  and their negatives; its bias trains for the first 3 epochs), GELU; then
  three blocks of conv3x3 (no bias), maxpool 2, BN, GELU, conv3x3, BN,
  GELU, widths 64/256/256; maxpool 3 (global on the 3x3 map); linear
  256 -> 10 without bias, times 1/9. Convs start as Dirac (identity) on
  their first in-channels filters. BN: eps 1e-12, running-average
  momentum 0.4 (0.6 kept), scale frozen at 1, bias trained.
- optimizer: Nesterov SGD, momentum 0.85, batch 1024 (the last partial
  batch dropped), summed label-smoothed (0.2) cross-entropy, lr
  11.5 / (1024 (1 + 1/(1 - 0.85))) per step, the BN biases at 64x that lr;
  weight decay 0.0153 x 1024 / the same scale, applied through the lr (so
  the biases' decay is not scaled up); a triangular schedule 0.2 -> 1 (at
  23% of the steps) -> 0.07.
- lookahead: from epoch 3, every 5 steps, the weights (and BN buffers)
  move to an average kept with decay 0.95^5 (step/total)^3, and back.
- data: per-channel normalisation with CIFAR-10's mean and std; training
  images are flipped left-right at random once, then all of them flipped on
  every odd epoch (alternating flips), and translated by up to 2 pixels
  with reflect padding each epoch; test-time augmentation averages the
  logits of the image and its mirror (weight 1/2) and of the 1-pixel
  up-left and down-right reflect-translations of both (1/4 each).

Prints one line per epoch (test accuracy without TTA, train loss, seconds
of training so far, wall seconds so far) and the final TTA accuracy; with
--csv FILE also writes them there. Run with a PyTorch 2 from PyPI
(tools/setup-pytorch2.sh), not Debian's 1.13.
"""
import argparse
import math
import os
import sys
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

MEAN = (0.4914, 0.4822, 0.4465)
STD = (0.2470, 0.2435, 0.2616)


def read_batches(path, names):
    """uint8 images [N, 3, 32, 32] and int64 labels from CIFAR-10 binary batches."""
    raw = []
    for n in names:
        with open(os.path.join(path, n), 'rb') as f:
            b = f.read()
        if len(b) % 3073:
            sys.exit(f'pytorch_airbench: {n}: {len(b)} bytes is not a whole number of 3073-byte records')
        raw.append(np.frombuffer(b, np.uint8).reshape(-1, 3073))
    a = np.concatenate(raw)
    return torch.from_numpy(a[:, 1:].reshape(-1, 3, 32, 32).copy()), torch.from_numpy(a[:, 0].astype(np.int64))


def normalise(u8):
    m = torch.tensor(MEAN).view(1, 3, 1, 1)
    s = torch.tensor(STD).view(1, 3, 1, 1)
    return (u8.float() / 255 - m) / s


class BN(nn.BatchNorm2d):
    def __init__(self, c):
        super().__init__(c, eps=1e-12, momentum=0.4)
        self.weight.requires_grad_(False)


def conv(cin, cout, k=3, pad='same', bias=False):
    c = nn.Conv2d(cin, cout, k, padding=pad, bias=bias)
    with torch.no_grad():
        if bias:
            c.bias.zero_()
        nn.init.dirac_(c.weight[:min(cin, cout)])
    return c


class Block(nn.Module):
    def __init__(self, cin, cout):
        super().__init__()
        self.conv1, self.norm1 = conv(cin, cout), BN(cout)
        self.conv2, self.norm2 = conv(cout, cout), BN(cout)

    def forward(self, x):
        x = F.gelu(self.norm1(F.max_pool2d(self.conv1(x), 2)))
        return F.gelu(self.norm2(self.conv2(x)))


class Net(nn.Module):
    def __init__(self, widths=(64, 256, 256)):
        super().__init__()
        self.whiten = conv(3, 24, k=2, pad=0, bias=True)
        self.whiten.weight.requires_grad_(False)
        c, blocks = 24, []
        for w in widths:
            blocks.append(Block(c, w))
            c = w
        self.blocks = nn.Sequential(*blocks)
        self.head = nn.Linear(c, 10, bias=False)

    def forward(self, x):
        x = self.blocks(F.gelu(self.whiten(x)))
        x = F.max_pool2d(x, 3).flatten(1)
        return self.head(x) / 9


def init_whitening(layer, images, eps=5e-4):
    """images: normalised [N, 3, 32, 32]; every 2x2 patch of them, in float64."""
    p = images.unfold(2, 2, 1).unfold(3, 2, 1)            # N, 3, 31, 31, 2, 2
    p = p.permute(0, 2, 3, 1, 4, 5).reshape(-1, 12).double()
    cov = p.T @ p / p.shape[0]
    val, vec = torch.linalg.eigh(cov)
    val, vec = val.flip(0), vec.T.flip(0)                  # largest first
    w = (vec / torch.sqrt(val + eps)[:, None]).reshape(12, 3, 2, 2).float()
    with torch.no_grad():
        layer.weight.copy_(torch.cat([w, -w]))


def translate(padded, r, gen):
    """Random crops of padded ([N, C, 32 + 2r, 32 + 2r]) back to 32x32, shifts in [-r, r]."""
    n, size = padded.shape[0], padded.shape[-1] - 2 * r
    sy = torch.randint(0, 2 * r + 1, (n,), generator=gen)
    sx = torch.randint(0, 2 * r + 1, (n,), generator=gen)
    out = torch.empty(n, padded.shape[1], size, size)
    for dy in range(2 * r + 1):
        for dx in range(2 * r + 1):
            m = (sy == dy) & (sx == dx)
            out[m] = padded[m, :, dy:dy + size, dx:dx + size]
    return out


def triangle(step, total, start=0.2, peak_at=0.23, end=0.07):
    p = int(peak_at * total)
    if step < p:
        return start + (1 - start) * step / p
    return 1 + (end - 1) * (step - p) / (total - p)


def tta_logits(net, x):
    def mirror(v):
        return 0.5 * net(v) + 0.5 * net(v.flip(-1))
    pad = F.pad(x, (1, 1, 1, 1), mode='reflect')
    shifted = 0.5 * mirror(pad[:, :, 0:32, 0:32]) + 0.5 * mirror(pad[:, :, 2:34, 2:34])
    return 0.5 * mirror(x) + 0.5 * shifted


def evaluate(net, x, y, tta=False, chunk=1000, fmt=torch.contiguous_format):
    net.eval()
    correct = 0
    with torch.no_grad():
        for i in range(0, len(x), chunk):
            xb = x[i:i + chunk].contiguous(memory_format=fmt)
            out = tta_logits(net, xb) if tta else net(xb)
            correct += (out.argmax(1) == y[i:i + chunk]).sum().item()
    return correct / len(x)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--data', required=True, help='folder with CIFAR-10 binary batches')
    ap.add_argument('--epochs', type=float, default=10.0)
    ap.add_argument('--seed', type=int, default=0)
    ap.add_argument('--threads', type=int, default=2)
    ap.add_argument('--batch-size', type=int, default=1024)
    ap.add_argument('--limit-train', type=int, default=0, help='first N training images only (tests)')
    ap.add_argument('--limit-test', type=int, default=0)
    ap.add_argument('--csv', help='write the per-epoch figures here')
    ap.add_argument('--channels-last', action=argparse.BooleanOptionalAction, default=True,
                    help='NHWC activations and weights (torch.channels_last, the default: 1.35x eager NCHW here; --no-channels-last for NCHW)')
    ap.add_argument('--compile', action='store_true', help='torch.compile the network')
    a = ap.parse_args()
    t_start = time.time()
    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    gen = torch.Generator().manual_seed(a.seed)

    xtr8, ytr = read_batches(a.data, [f'data_batch_{i}.bin' for i in range(1, 6)])
    xte8, yte = read_batches(a.data, ['test_batch.bin'])
    if a.limit_train:
        xtr8, ytr = xtr8[:a.limit_train], ytr[:a.limit_train]
    if a.limit_test:
        xte8, yte = xte8[:a.limit_test], yte[:a.limit_test]
    xtr, xte = normalise(xtr8), normalise(xte8)

    bs, mom = a.batch_size, 0.85
    scale = 1024 * (1 + 1 / (1 - mom))
    lr, wd = 11.5 / scale, 0.0153 * bs / scale
    lr_bias = 64 * lr
    steps_per_epoch = len(xtr) // bs
    total = math.ceil(steps_per_epoch * a.epochs)

    net = Net()
    init_whitening(net.whiten, xtr[:5000])
    fmt = torch.channels_last if a.channels_last else torch.contiguous_format
    net = net.to(memory_format=fmt)
    fwd = torch.compile(net) if a.compile else net
    norm_b = [p for n, p in net.named_parameters() if 'norm' in n and p.requires_grad]
    other = [p for n, p in net.named_parameters() if 'norm' not in n and p.requires_grad]
    opt = torch.optim.SGD([dict(params=norm_b, lr=lr_bias, weight_decay=wd / lr_bias),
                           dict(params=other, lr=lr, weight_decay=wd / lr)], momentum=mom, nesterov=True)
    base_lr = [g['lr'] for g in opt.param_groups]
    lossf = nn.CrossEntropyLoss(label_smoothing=0.2, reduction='sum')

    # alternating flips: one random flip per image, then every odd epoch flips all
    flip0 = torch.rand(len(xtr), generator=gen) < 0.5
    base = torch.where(flip0.view(-1, 1, 1, 1), xtr.flip(-1), xtr)
    padded = F.pad(base, (2, 2, 2, 2), mode='reflect')

    print(f'pytorch_airbench: torch {torch.__version__}, {torch.get_num_threads()} threads, '
          f'{len(xtr)} train / {len(xte)} test images, batch {bs}, {total} steps, seed {a.seed}, '
          f'{"channels_last" if a.channels_last else "NCHW"}{", compiled" if a.compile else ""}', flush=True)
    rows, ema, step, train_s = [], None, 0, 0.0
    for epoch in range(math.ceil(a.epochs)):
        t0 = time.time()
        net.whiten.bias.requires_grad_(epoch < 3)
        x = translate(padded, 2, gen)
        if epoch % 2 == 1:
            x = x.flip(-1)
        perm = torch.randperm(len(x), generator=gen)
        net.train()
        loss_sum = 0.0
        for i in range(steps_per_epoch):
            if step >= total:
                break
            idx = perm[i * bs:(i + 1) * bs]
            for g, b in zip(opt.param_groups, base_lr):
                g['lr'] = b * triangle(step, total)
            loss = lossf(fwd(x[idx].contiguous(memory_format=fmt)), ytr[idx])
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            step += 1
            loss_sum += loss.item() / bs
            if epoch >= 3 and step % 5 == 0:
                sd = net.state_dict()
                if ema is None:
                    ema = {k: v.clone() for k, v in sd.items() if v.is_floating_point()}
                else:
                    rho = 0.95 ** 5 * (step / total) ** 3
                    for k, v in ema.items():
                        v.lerp_(sd[k], 1 - rho)
                        sd[k].copy_(v)
        if ema is not None:
            sd = net.state_dict()
            for k, v in ema.items():
                sd[k].copy_(v)
        train_s += time.time() - t0
        acc = evaluate(net, xte, yte, fmt=fmt)
        row = dict(epoch=epoch + 1, test_acc=acc, train_loss=loss_sum / max(1, steps_per_epoch),
                   train_s=train_s, wall_s=time.time() - t_start)
        rows.append(row)
        print('epoch {epoch:2d}  test {test_acc:.4f}  train loss {train_loss:.4f}  train {train_s:.0f} s  '
              'wall {wall_s:.0f} s'.format(**row), flush=True)
    tta = evaluate(net, xte, yte, tta=True, fmt=fmt)
    wall = time.time() - t_start
    print(f'final: test {rows[-1]["test_acc"]:.4f}, with TTA {tta:.4f}, wall {wall:.0f} s '
          f'(training {train_s:.0f} s), torch {torch.__version__}', flush=True)
    if a.csv:
        with open(a.csv, 'w') as f:
            f.write('epoch,test_acc,train_loss,train_s,wall_s\n')
            for r in rows:
                f.write('{epoch},{test_acc:.4f},{train_loss:.4f},{train_s:.1f},{wall_s:.1f}\n'.format(**r))
            f.write(f'tta,{tta:.4f},,{train_s:.1f},{wall:.1f}\n')


if __name__ == '__main__':
    main()
