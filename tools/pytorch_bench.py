#!/usr/bin/python3
"""PyTorch's training speed on the twin of a cltrain model (CPU).

  pytorch_bench.py --model mnist-cnn|cifar-cnn|resnet20|cifar-fast [--batch 128] [--steps 30]
                   [--threads 2] [--compile] [--channels-last]
  pytorch_bench.py --blas      print only which BLAS PyTorch runs on

Prints `pytorch blas: KIND PATH`, then `pytorch images/s: <float>` for
--steps timed training steps after --warmup ones (3) on random in-memory
batches (as `cltrain bench train` does), and `pytorch fastest-step
images/s:` for the fastest of those steps, then the process's CPU time
per step (`pytorch process CPU time: <ms> ms per step`). The optimizer is Adam (lr 3e-4,
as `cltrain bench train` uses) except for cifar-fast, which trains as its
recipe does (tools/pytorch_airbench.py): Nesterov SGD, momentum 0.85, two
parameter groups, the label-smoothed loss summed over the batch.
--compile wraps the model in torch.compile (PyTorch 2; its compilation
happens in the warm-up steps, outside the timing); --channels-last keeps
the model's weights and the input batches in channels-last (NHWC) memory
format, in which oneDNN's CPU convolutions run without reordering.
Exits 3, after the blas line, when PyTorch runs on the reference BLAS: such
a figure says nothing about PyTorch at its best. Used by
tools/bench-pytorch.sh.
"""
import argparse
import os
import sys
import time

import torch
import torch.nn as nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pytorch_common as common  # noqa: E402


def cifar_fast():
    """models/cifar-fast.cfg: airbench94's net, as tools/pytorch_airbench.py builds it"""
    import pytorch_airbench
    net = pytorch_airbench.Net()
    net.shape = (3, 32, 32)
    return net


BENCH_MODELS = dict(common.MODELS, **{"cifar-fast": cifar_fast})


def optimizer(name, model):
    """(optimizer, loss function): cifar-fast's recipe (tools/pytorch_airbench.py), Adam otherwise"""
    if name != "cifar-fast":
        return torch.optim.Adam(model.parameters(), lr=common.LR), nn.CrossEntropyLoss()
    mom = 0.85
    scale = 1024 * (1 + 1 / (1 - mom))
    lr, wd = 11.5 / scale, 0.0153 * 1024 / scale
    norm_b = [p for n, p in model.named_parameters() if "norm" in n and p.requires_grad]
    other = [p for n, p in model.named_parameters() if "norm" not in n and p.requires_grad]
    opt = torch.optim.SGD([dict(params=norm_b, lr=64 * lr, weight_decay=wd / (64 * lr)),
                           dict(params=other, lr=lr, weight_decay=wd / lr)], momentum=mom, nesterov=True)
    return opt, nn.CrossEntropyLoss(label_smoothing=0.2, reduction="sum")


def bench(name, batch, steps, threads, compiled=False, channels_last=False, warmup=3):
    """(mean, fastest, cpu): images/s over `steps` timed training steps after
    `warmup` ones, of the fastest single step, and the process's CPU seconds
    per step, on random in-memory batches (like `cltrain bench train`). The
    fastest step and the CPU time are what a machine shared with other jobs
    shifts less than the mean."""
    torch.set_num_threads(threads)
    torch.manual_seed(common.SEED)
    model = BENCH_MODELS[name]()
    shape = model.shape
    fmt = torch.channels_last if channels_last else torch.contiguous_format
    model = model.to(memory_format=fmt)
    opt, lossf = optimizer(name, model)
    run = torch.compile(model) if compiled else model
    gen = torch.Generator().manual_seed(common.SEED)
    n = warmup + steps
    xs = [(torch.randint(0, 256, (batch,) + shape, generator=gen).float() / 255.0).contiguous(memory_format=fmt)
          for _ in range(n)]
    ys = torch.randint(0, 10, (n, batch), generator=gen)

    def step(x, y):
        opt.zero_grad(set_to_none=True)
        loss = lossf(run(x), y)
        loss.backward()
        opt.step()
        return loss.item()  # one sync per step, as cltrain's training loop reads its results

    for i in range(warmup):
        step(xs[i], ys[i])
    t0, c0 = time.perf_counter(), time.process_time()
    best = float("inf")
    for i in range(warmup, n):
        s0 = time.perf_counter()
        step(xs[i], ys[i])
        best = min(best, time.perf_counter() - s0)
    t, cpu = time.perf_counter() - t0, time.process_time() - c0
    return steps * batch / t, batch / best, cpu / steps


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", choices=sorted(BENCH_MODELS), default="mnist-cnn")
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--compile", action="store_true", help="torch.compile the model (PyTorch 2)")
    ap.add_argument("--channels-last", action="store_true", help="weights and inputs in channels-last format")
    ap.add_argument("--blas", action="store_true", help="print the BLAS line and stop")
    a = ap.parse_args()
    kind, path = common.blas_loaded()
    print(f"pytorch blas: {kind} {path}", flush=True)
    if kind == "reference":
        return 3
    if a.blas:
        return 0
    if a.batch < 1 or a.steps < 1 or a.threads < 1 or a.warmup < 1:
        ap.error("--batch, --steps, --warmup and --threads must be at least 1")
    if a.compile and not hasattr(torch, "compile"):
        ap.error(f"--compile needs PyTorch 2 (this is {torch.__version__})")
    ips, best, cpu = bench(a.model, a.batch, a.steps, a.threads, a.compile, a.channels_last, a.warmup)
    print(f"pytorch images/s: {ips:.1f}")
    print(f"pytorch fastest-step images/s: {best:.1f}")
    print(f"pytorch process CPU time: {cpu * 1e3:.2f} ms per step")
    print(f"pytorch bench: {a.model}, {a.steps} steps of batch {a.batch}, {torch.get_num_threads()} threads, "
          f"torch {torch.__version__}, {'compiled' if a.compile else 'eager'}, "
          f"{'channels-last' if a.channels_last else 'contiguous'}, LD_PRELOAD={os.environ.get('LD_PRELOAD', '')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
