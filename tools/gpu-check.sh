#!/usr/bin/env bash
# gpu-check.sh: the GPU checks, run on a machine with an NVIDIA GPU and its
# driver but without Debian's OpenCL packages: point the ICD loader carried
# in .gpu/lib at NVIDIA's OpenCL library, then run the kernel tests (every
# GEMM candidate against the reference), `cltrain tune`, the kernel bench,
# the training bench for mnist-cnn, cifar-cnn and vgg16 at 128x128 (tuned
# database in use), the pipeline bench and one short Fashion-MNIST run.
# Both device classes' paths: the GPU gets class gpu (its own kernel shapes:
# gemm_local.cl, im2col, unfused Winograd); the kernel tests and one training
# bench run again under CLTRAIN_DEVICE_CLASS=cpu (register GEMM, fused
# Winograd, direct convolutions, 16-wide kernels on the GPU), bounded.
# Prints the FP32 peak estimated from the clock and the compute units.
# Usage: tools/gpu-check.sh OUTDIR   (after tools/gpu-carry.sh on the build machine)
set -uo pipefail
cd "$(dirname "$0")/.."
out=${1:-/tmp/gpu-out}
mkdir -p "$out"
lib=$(find / -name 'libnvidia-opencl.so.1' -not -path '/proc/*' 2>/dev/null | head -1)
echo "NVIDIA OpenCL library: ${lib:-not found}"
mkdir -p /tmp/icd && echo "${lib:-libnvidia-opencl.so.1}" >/tmp/icd/nvidia.icd
export OCL_ICD_VENDORS=/tmp/icd LD_LIBRARY_PATH=$PWD/.gpu/lib:${lib%/*}:${LD_LIBRARY_PATH:-}
export CLTRAIN_CACHE_DIR=/tmp/cltrain-cache
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv 2>&1 | tee "$out/nvidia-smi.txt"
build/cltrain devices 2>&1 | tee "$out/devices.txt"
# FP32 peak, an estimate: max clock x compute units (SMs) x 128 FP32 lanes per SM x 2 (FMA)
awk '/GPU/ {gpu=1} gpu && /compute units/ {
  for (i = 1; i <= NF; i++) { if ($i == "units") cu = $(i + 1) + 0; if ($i == "clock") mhz = $(i + 1) + 0 }
  printf "FP32 peak estimate: %d MHz x %d SMs x 128 lanes x 2 = %.1f TFLOP/s (clock x cores, not a datasheet figure)\n", mhz, cu, mhz * 1e6 * cu * 256 / 1e12
  exit }' "$out/devices.txt" | tee "$out/peak.txt"
for t in build/tests/test_gemm build/tests/test_layers build/tests/test_model build/tests/test_pipeline; do
  [[ -x $t ]] || continue
  echo "== $t (class gpu, the GPU's own)"
  CMOCKA_MESSAGE_OUTPUT=TAP timeout 240 "$t" 2>&1 | grep -E '^(ok|not ok)|mismatches|class' | grep -vE ' 0 mismatches' | tail -60
done 2>&1 | tee "$out/tests.txt"
# class cpu on the GPU: the CPU-shaped kernels must be correct on any device (slow is fine)
for t in build/tests/test_layers build/tests/test_model build/tests/test_bn build/tests/test_shortcut; do
  [[ -x $t ]] || continue
  echo "== $t (CLTRAIN_DEVICE_CLASS=cpu)"
  CLTRAIN_DEVICE_CLASS=cpu CMOCKA_MESSAGE_OUTPUT=TAP timeout 150 "$t" 2>&1 | grep -E '^(ok|not ok)|mismatches|class' | grep -vE ' 0 mismatches' | tail -40
done 2>&1 | tee "$out/tests-class-cpu.txt"
CLTRAIN_DEVICE_CLASS=cpu timeout 120 build/cltrain bench train --model mnist-cnn --steps 50 2>&1 | tee "$out/bench-train-class-cpu.txt"
# default step time first (no database yet), then the search (it prints defaults vs tuned)
for m in mnist-cnn cifar-cnn; do timeout 120 build/cltrain bench train --model $m --steps 50 2>&1; done | tee "$out/bench-train-defaults.txt"
for m in mnist-cnn cifar-cnn; do timeout 200 build/cltrain tune --model $m --budget 120 2>&1; done | tee "$out/tune.txt"
timeout 200 build/cltrain bench kernels 2>&1 | tee "$out/bench-kernels.txt"
timeout 200 build/cltrain bench kernels --model cifar-cnn 2>&1 | tee -a "$out/bench-kernels.txt"
{
  for m in mnist-cnn cifar-cnn; do
    for g in native clblast; do timeout 120 build/cltrain bench train --model $m --steps 50 --gemm $g 2>&1; done
    for c in winograd winograd4 direct; do timeout 120 build/cltrain bench train --model $m --steps 50 --conv $c 2>&1; done # auto is im2col on a GPU
  done
  timeout 200 build/cltrain bench train --model vgg16 --size 128 --batch-size 32 --steps 20 2>&1
} | tee "$out/bench-train.txt"
timeout 200 build/cltrain bench pipeline --data .gpu/data --steps 200 --producers auto 2>&1 | tee "$out/bench-pipeline.txt"
timeout 200 build/cltrain fashion-mnist --data .gpu/data --epochs 2 2>&1 | grep -v ' step ' | tee "$out/train.txt"
