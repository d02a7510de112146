#!/usr/bin/python3
"""pytorch_onnx.py: models built in PyTorch, exported to ONNX, for `cltrain import`
(tests/import.sh). Run with Debian's interpreter (python3-torch, 1.13).

  pytorch_onnx.py export OUT [NAMES...]
      For each twin of tools/pytorch_common.py (mnist-cnn: a plain CNN,
      cifar-cnn: a CNN with batch norm, resnet20: residual blocks with
      option-A shortcuts; gelu-cnn: GELU and global max pooling; misc-cnn: a
      strided conv without bias, GELU's tanh formula, Dropout, Reshape before
      MatMul + Add; input-res: a residual that adds the model input itself):
      weights from seed 1, batch-norm statistics and
      affine parameters made non-trivial, exported with torch.onnx.export
      (opset 13, dynamic batch, batch norm kept as nodes) to OUT/NAME.onnx;
      64 test images as OUT/NAME-img/NN.png and
      PyTorch's logits for them (ToTensor: pixels / 255) as OUT/NAME.logits
      (float32, 64 x 10). cifar-cnn-norm and mnist-cnn-norm are the same
      networks fed torchvision's Normalize(mean, std) after ToTensor (their
      logits so), the mean and std written to OUT/NAME.norm ("M1,M2,M3
      S1,S2,S3") for `cltrain import --mean --std`.
  pytorch_onnx.py bad OUT.onnx KIND
      a model cltrain must refuse (KIND: op, dynamic, opset, stride); prints
      the file and what the refusal must say.
  pytorch_onnx.py seeds OUT
      small exports (a CNN, one with batch norm, dropout and softmax, one with
      an option-A residual and log-softmax) as fuzzing seeds.
  pytorch_onnx.py compare A.logits B.logits [TOL]
      max |a - b| / max |b|; exit 1 above TOL (1e-4).
"""
import os
import struct
import sys
import zlib

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pytorch_common import MODELS  # noqa: E402


class GeluCnn(torch.nn.Module):
    """GELU (exported as its Erf formula at opset 13) after batch norm and after a
    strided conv, global max pooling (exported as a MaxPool over the whole input)"""
    shape = (3, 16, 16)

    def __init__(self):
        super().__init__()
        nn = torch.nn
        self.f = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.GELU(), nn.Conv2d(8, 16, 3, 2, 1),
                               nn.GELU(), nn.AdaptiveMaxPool2d(1), nn.Flatten(), nn.Linear(16, 10))

    def forward(self, x):
        return self.f(x)


class MiscCnn(torch.nn.Module):
    """what the other twins do not export: a strided convolution without bias, GELU's tanh formula
    (approximate='tanh', which cltrain takes as its exact GELU), Dropout (an identity at inference), and a
    Reshape (with its shape arithmetic) before MatMul + Add instead of Gemm"""
    shape = (3, 12, 12)

    def __init__(self):
        super().__init__()
        nn = torch.nn
        self.c1, self.bn = nn.Conv2d(3, 8, 3, 2, 1, bias=False), nn.BatchNorm2d(8)
        self.gelu = nn.GELU(approximate="tanh")
        self.c2, self.pool, self.drop = nn.Conv2d(8, 8, 3, padding=1), nn.MaxPool2d(2), nn.Dropout(0.3)
        self.w = nn.Parameter(0.2 * torch.randn(8 * 3 * 3, 10))
        self.b = nn.Parameter(0.1 * torch.randn(10))

    def forward(self, x):
        y = self.pool(torch.relu(self.c2(self.gelu(self.bn(self.c1(x))))))
        y = self.drop(y).reshape(x.shape[0], -1)
        return torch.matmul(y, self.w) + self.b


class InputRes(torch.nn.Module):
    """a residual that adds the model input itself: relu(conv(x) + x)"""
    shape = (3, 8, 8)

    def __init__(self):
        super().__init__()
        self.conv, self.fc = torch.nn.Conv2d(3, 3, 3, padding=1), torch.nn.Linear(192, 10)

    def forward(self, x):
        return self.fc(torch.flatten(torch.relu(self.conv(x) + x), 1))


MODELS = dict(MODELS, **{"gelu-cnn": GeluCnn, "misc-cnn": MiscCnn, "input-res": InputRes})
# models trained on torchvision's Normalize(mean, std) after ToTensor: the twin's network, and the
# normalisation cltrain import takes as --mean/--std (written beside the logits as NAME.norm)
NORMALIZED = {"cifar-cnn-norm": ("cifar-cnn", (0.4914, 0.4822, 0.4465), (0.2470, 0.2435, 0.2616)),
              "mnist-cnn-norm": ("mnist-cnn", (0.1307,), (0.3081,))}


def normalize(x, mean, std):
    """torchvision.transforms.Normalize on a batch: (x - mean[c]) / std[c]"""
    m = torch.tensor(mean, dtype=x.dtype).view(1, -1, 1, 1)
    s = torch.tensor(std, dtype=x.dtype).view(1, -1, 1, 1)
    return (x - m) / s


def images(shape, n, seed):
    """n smooth random images (uint8, N x C x H x W): noise at 1/4 size, upsampled"""
    g = torch.Generator().manual_seed(seed)
    c, h, w = shape
    small = torch.rand(n, c, max(h // 4, 1), max(w // 4, 1), generator=g)
    big = torch.nn.functional.interpolate(small, size=(h, w), mode="bilinear", align_corners=False)
    big = big + 0.15 * torch.rand(n, c, h, w, generator=g)
    return (big.clamp(0, 1) * 255).round().to(torch.uint8)


def write_png(path, img):
    """img: uint8 C x H x W (C = 1 or 3) as an 8-bit grey or RGB PNG"""
    c, h, w = img.shape
    rows = img.permute(1, 2, 0).contiguous().numpy().reshape(h, w * c)
    raw = b"".join(b"\0" + rows[y].tobytes() for y in range(h))

    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
    with open(path, "wb") as f:
        f.write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 0 if c == 1 else 2, 0, 0, 0)) +
                chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))


def export(out, names):
    os.makedirs(out, exist_ok=True)
    for name in names or list(MODELS) + list(NORMALIZED):
        torch.manual_seed(1)
        net, mean, std = NORMALIZED.get(name, (name, None, None))
        m = MODELS[net]()
        g = torch.Generator().manual_seed(2)
        for mod in m.modules():
            if isinstance(mod, (torch.nn.BatchNorm1d, torch.nn.BatchNorm2d)):
                n = mod.num_features
                mod.running_mean.copy_(0.2 * torch.randn(n, generator=g))
                mod.running_var.copy_(0.5 + torch.rand(n, generator=g))
                mod.weight.data.copy_(0.8 + 0.4 * torch.rand(n, generator=g))
                mod.bias.data.copy_(0.1 * torch.randn(n, generator=g))
        m.eval()
        x8 = images(m.shape, 64, 3)
        x = x8.float() / 255
        if mean:
            x = normalize(x, mean, std)
            with open(f"{out}/{name}.norm", "w") as f:
                f.write(",".join(map(str, mean)) + " " + ",".join(map(str, std)) + "\n")
        torch.onnx.export(m, x[:2], f"{out}/{name}.onnx", input_names=["input"], output_names=["logits"],
                          dynamic_axes={"input": {0: "N"}, "logits": {0: "N"}}, opset_version=13,
                          training=torch.onnx.TrainingMode.PRESERVE, do_constant_folding=False)
        with torch.no_grad():
            logits = m(x)
        with open(f"{out}/{name}.logits", "wb") as f:
            f.write(logits.float().contiguous().numpy().tobytes())
        d = f"{out}/{name}-img"
        os.makedirs(d, exist_ok=True)
        for i in range(64):
            write_png(f"{d}/{i:02d}.png", x8[i])
        print(name, f"{out}/{name}.onnx")


def bad(out, kind):
    """models cltrain must refuse, each with what the message must name"""
    torch.manual_seed(1)
    x = torch.rand(2, 1, 8, 8)
    if kind == "op":
        m = torch.nn.Sequential(torch.nn.Conv2d(1, 4, 3), torch.nn.Sigmoid(), torch.nn.Flatten(), torch.nn.Linear(144, 3))
        want = "(Sigmoid): not an op cltrain imports"
    elif kind == "dynamic":
        m = torch.nn.Sequential(torch.nn.Conv2d(1, 4, 3), torch.nn.ReLU(), torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(),
                                torch.nn.Linear(4, 3))
        torch.onnx.export(m.eval(), x, out, input_names=["input"], dynamic_axes={"input": {0: "N", 2: "H", 3: "W"}},
                          opset_version=13)
        print(out, "dynamic or out-of-range height")
        return
    elif kind == "opset":
        m = torch.nn.Sequential(torch.nn.Conv2d(1, 4, 3), torch.nn.Flatten(), torch.nn.Linear(144, 3))
        torch.onnx.export(m.eval(), x, out, input_names=["input"], opset_version=9)
        print(out, "opset 9")
        return
    elif kind == "stride":
        m = torch.nn.Sequential(torch.nn.Conv2d(1, 4, (3, 1)), torch.nn.Flatten(), torch.nn.Linear(192, 3))
        want = "(Conv): kernel 3x1"
    else:
        sys.exit(f"unknown kind {kind}")
    torch.onnx.export(m.eval(), x, out, input_names=["input"], opset_version=13)
    print(out, want)


def seeds(out):
    """small exports (under 64 KiB) as fuzzing seeds: tests/fuzz/corpus/onnx"""
    import torch.nn as nn
    import torch.nn.functional as F

    class Res(nn.Module):
        def __init__(self):
            super().__init__()
            self.c1, self.b1, self.c2 = nn.Conv2d(2, 4, 3, 2, 1), nn.BatchNorm2d(4), nn.Conv2d(4, 4, 3, 1, 1)
            self.fc = nn.Linear(4, 3)

        def forward(self, x):
            y = self.c2(F.relu(self.b1(self.c1(x))))
            s = F.pad(x[:, :, ::2, ::2], (0, 0, 0, 0, 0, 2))
            return torch.log_softmax(self.fc(F.relu(y + s).mean((2, 3))), 1)
    os.makedirs(out, exist_ok=True)
    nets = {
        "cnn": (nn.Sequential(nn.Conv2d(1, 2, 3), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(), nn.Linear(18, 3)), (1, 8, 8)),
        "bn": (nn.Sequential(nn.Conv2d(3, 4, 3, padding=1, bias=False), nn.BatchNorm2d(4), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
                             nn.Flatten(), nn.Dropout(0.5), nn.Linear(4, 2), nn.Softmax(1)), (3, 6, 6)),
        "res": (Res(), (2, 6, 6)),
    }
    for name, (m, shape) in nets.items():
        torch.manual_seed(1)
        torch.onnx.export(m.eval(), torch.rand(2, *shape), f"{out}/{name}.onnx", input_names=["input"], opset_version=13,
                          dynamic_axes={"input": {0: "N"}}, training=torch.onnx.TrainingMode.PRESERVE, do_constant_folding=False)


def read_f32(path):
    data = open(path, "rb").read()
    return list(struct.unpack(f"<{len(data) // 4}f", data))


def compare(a, b, tol):
    x, y = read_f32(a), read_f32(b)
    if len(x) != len(y) or not x:
        print(f"{len(x)} and {len(y)} values")
        return 1
    scale = max(abs(v) for v in y)
    err = max(abs(p - q) for p, q in zip(x, y)) / (scale or 1)
    print(f"max relative difference {err:.2e} over {len(x)} logits (largest |logit| {scale:.3g})")
    return 0 if err <= tol else 1


if __name__ == "__main__":
    if len(sys.argv) >= 3 and sys.argv[1] == "export":
        export(sys.argv[2], sys.argv[3:])
    elif len(sys.argv) == 3 and sys.argv[1] == "seeds":
        seeds(sys.argv[2])
    elif len(sys.argv) == 4 and sys.argv[1] == "bad":
        bad(sys.argv[2], sys.argv[3])
    elif len(sys.argv) in (4, 5) and sys.argv[1] == "compare":
        sys.exit(compare(sys.argv[2], sys.argv[3], float(sys.argv[4]) if len(sys.argv) == 5 else 1e-4))
    else:
        sys.exit(__doc__)
