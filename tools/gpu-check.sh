#!/usr/bin/env bash
# gpu-check.sh: the GPU checks, run on a machine with an NVIDIA GPU and its
# driver but without Debian's OpenCL packages: point the ICD loader carried
# in .gpu/lib at NVIDIA's OpenCL library, then run the kernel tests, the
# kernel and training benchmarks and one epoch of Fashion-MNIST.
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
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv 2>&1 | tee "$out/nvidia-smi.txt"
build/cltrain devices 2>&1 | tee "$out/devices.txt"
for t in build/tests/test_gemm build/tests/test_layers build/tests/test_model build/tests/test_pipeline; do
  [[ -x $t ]] || continue
  echo "== $t"
  CMOCKA_MESSAGE_OUTPUT=TAP timeout 240 "$t" 2>&1 | grep -E '^(ok|not ok)|max abs' | tail -60
done 2>&1 | tee "$out/tests.txt"
timeout 200 build/cltrain bench kernels 2>&1 | tee "$out/bench-kernels.txt"
for g in native clblast; do timeout 120 build/cltrain bench train --steps 50 --gemm $g 2>&1; done | tee "$out/bench-train.txt"
timeout 200 build/cltrain bench pipeline --data .gpu/data --steps 200 2>&1 | tee "$out/bench-pipeline.txt"
timeout 200 build/cltrain fashion-mnist --data .gpu/data --epochs 5 2>&1 | grep -v ' step ' | tee "$out/train.txt"
