#!/usr/bin/python3
"""PyTorch's training speed on the twin of a cltrain model (CPU).

  pytorch_bench.py --model mnist-cnn|cifar-cnn|resnet20 [--batch 128] [--steps 30] [--threads 2]
  pytorch_bench.py --blas      print only which BLAS PyTorch runs on

Prints `pytorch blas: KIND PATH`, then `pytorch images/s: <float>` for
--steps timed Adam steps after 3 warm-up steps on random in-memory batches
(as `cltrain bench train` does), and `pytorch fastest-step images/s:` for
the fastest of those steps. Exits 3, after the blas line, when PyTorch
runs on the reference BLAS: such a figure says nothing about PyTorch at its
best. Used by tools/bench-pytorch.sh. Run with Debian's /usr/bin/python3.
"""
import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pytorch_common as common  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", choices=sorted(common.MODELS), default="mnist-cnn")
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--blas", action="store_true", help="print the BLAS line and stop")
    a = ap.parse_args()
    kind, path = common.blas_loaded()
    print(f"pytorch blas: {kind} {path}", flush=True)
    if kind == "reference":
        return 3
    if a.blas:
        return 0
    if a.batch < 1 or a.steps < 1 or a.threads < 1:
        ap.error("--batch, --steps and --threads must be at least 1")
    ips, best = common.bench(a.model, a.batch, a.steps, a.threads)
    print(f"pytorch images/s: {ips:.1f}")
    print(f"pytorch fastest-step images/s: {best:.1f}")
    malloc = os.environ.get("MALLOC_MMAP_THRESHOLD_") is not None
    print(f"pytorch bench: {a.model}, {a.steps} steps of batch {a.batch}, {torch.get_num_threads()} threads, "
          f"torch {torch.__version__}, malloc {'tuned' if malloc else 'stock'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
