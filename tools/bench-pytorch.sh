#!/usr/bin/env bash
# tools/bench-pytorch.sh BUILD: cltrain vs PyTorch (CPU) training throughput,
# same model, batch 128 and optimizer (Adam), PyTorch at its best:
#   - PyTorch must run on an optimised BLAS (tools/setup-deps.sh --bench
#     installs OpenBLAS); on the reference BLAS this script refuses to compare
#     (exit 2), since that figure would say nothing about PyTorch;
#   - PyTorch runs twice, with glibc's stock malloc and with the settings a
#     PyTorch user would apply (MALLOC_MMAP_THRESHOLD_ and friends, below),
#     and the faster of the two is the figure compared against.
# For each model: cltrain, PyTorch stock, PyTorch tuned, cltrain again; the
# mean of the two cltrain runs is reported, so drift on a shared machine shows,
# and beside the ratio of means the ratio of the fastest single steps (the
# best of each side's runs), which other jobs on the machine shift less.
# Called by `make bench`; does nothing (exit 0) when PyTorch is not installed.
# PYTORCH_MODELS (default "mnist-cnn cifar-cnn resnet20"), PYTORCH_THREADS (2) and
# PYTORCH_STEPS (30 for mnist-cnn, 10 otherwise) override.
set -euo pipefail

build=${1:?usage: tools/bench-pytorch.sh BUILD}
here=$(cd "$(dirname "$0")" && pwd)
py=/usr/bin/python3
threads=${PYTORCH_THREADS:-2}
models=${PYTORCH_MODELS:-mnist-cnn cifar-cnn resnet20}
batch=128
tuned_malloc=(MALLOC_MMAP_THRESHOLD_=4294967296 MALLOC_TRIM_THRESHOLD_=68719476736 MALLOC_TOP_PAD_=1073741824)

if ! "$py" -c 'import torch' >/dev/null 2>&1; then
    echo "bench-pytorch: PyTorch is not installed for $py (tools/setup-deps.sh --bench installs it); skipping the comparison"
    exit 0
fi

# field PREFIX WHAT TEXT: the number after the prefix, or fail clearly
field() {
    local v
    v=$(printf '%s\n' "$3" | awk -v k="$1" 'index($0, k) == 1 {
            $0 = substr($0, length(k) + 1); if ($1 ~ /^[0-9]+(\.[0-9]*)?([eE][-+]?[0-9]+)?$/) { print $1; exit } }')
    if [[ -z $v ]]; then
        echo "bench-pytorch: no '$1' line in the output of $2:" >&2
        printf '%s\n' "$3" >&2
        exit 1
    fi
    echo "$v"
}

# which BLAS PyTorch's sgemm_ comes from; refuse on the reference one
rc=0
blas=$("$py" "$here/pytorch_bench.py" --blas) || rc=$?
blas=${blas#pytorch blas: }
if [[ $rc == 3 ]]; then
    echo "bench-pytorch: PyTorch runs on the reference BLAS (${blas#* }), not comparing: install an optimised one (tools/setup-deps.sh --bench installs libopenblas0-pthread)" >&2
    exit 2
elif [[ $rc != 0 ]]; then
    echo "bench-pytorch: $here/pytorch_bench.py --blas failed (exit $rc)" >&2
    exit 1
fi

# each prints "MEAN FASTEST": images/s over the timed steps and of the fastest step
run_cltrain() { # MODEL STEPS
    local out
    out=$(CLTRAIN_BENCH_STARTUP=0 "$build/cltrain" bench train --model "$1" --batch-size "$batch" --steps "$2") ||
        { echo "bench-pytorch: $build/cltrain bench train --model $1 failed" >&2; exit 1; }
    echo "$(field 'steady-state images/s:' "cltrain bench train --model $1" "$out") $(field 'fastest-step images/s:' "cltrain bench train --model $1" "$out")"
}
run_pytorch() { # MODEL STEPS [ENV...]
    local model=$1 steps=$2 out
    shift 2
    out=$(env "$@" "$py" "$here/pytorch_bench.py" --model "$model" --batch "$batch" --steps "$steps" --threads "$threads") ||
        { echo "bench-pytorch: pytorch_bench.py --model $model failed" >&2; exit 1; }
    echo "$(field 'pytorch images/s:' "pytorch_bench.py --model $model" "$out") $(field 'pytorch fastest-step images/s:' "pytorch_bench.py --model $model" "$out")"
}

# cpu_ticks: "STEAL TOTAL" from /proc/stat's first line (all CPUs, clock ticks; guest time is inside user)
cpu_ticks() { awk '/^cpu /{t = 0; for (i = 2; i <= 9; i++) t += $i; print $9, t; exit}' /proc/stat; }

echo "cltrain vs PyTorch, training at batch $batch ($(date -u '+%Y-%m-%d %H:%M UTC'), nproc $(nproc), load average $(cut -d' ' -f1-3 /proc/loadavg))"
echo "  PyTorch $("$py" -c 'import torch; print(torch.__version__)'), $threads threads, BLAS: $blas"
# PyTorch's CPU convolutions run on oneDNN when it is built in (Debian's is), not on the BLAS
echo "  PyTorch convolutions: $("$py" -c 'import re, torch
m = re.search(r"MKL-DNN v([0-9.]+)", torch.__config__.show())
print(("oneDNN (MKL-DNN) " + (m.group(1) if m else "?")) if torch.backends.mkldnn.is_available() else "im2col + BLAS (no oneDNN)")')"
for model in $models; do
    case $model in mnist-cnn) steps=30 ;; *) steps=10 ;; esac
    steps=${PYTORCH_STEPS:-$steps}
    read -r st0 tt0 <<<"$(cpu_ticks)"
    c1=$(run_cltrain "$model" "$steps")
    ps=$(run_pytorch "$model" "$steps")
    pt=$(run_pytorch "$model" "$steps" "${tuned_malloc[@]}")
    c2=$(run_cltrain "$model" "$steps")
    read -r st1 tt1 <<<"$(cpu_ticks)"
    read -r c1 c1f <<<"$c1"; read -r c2 c2f <<<"$c2"; read -r ps psf <<<"$ps"; read -r pt ptf <<<"$pt"
    awk -v m="$model" -v s="$steps" -v c1="$c1" -v c2="$c2" -v ps="$ps" -v pt="$pt" \
        -v c1f="$c1f" -v c2f="$c2f" -v psf="$psf" -v ptf="$ptf" \
        -v steal="$((st1 - st0))" -v ticks="$((tt1 - tt0))" 'BEGIN {
        c = (c1 + c2) / 2; p = ps > pt ? ps : pt
        cf = c1f > c2f ? c1f : c2f; pf = psf > ptf ? psf : ptf
        printf "  %s, %d timed steps each; CPU time stolen by the host meanwhile: %.0f%%%s\n", m, s,
               (ticks > 0 ? 100 * steal / ticks : 0), (ticks > 0 && steal / ticks > 0.05 ? " (noisy: ratios can drift)" : "")
        printf "    %-44s %10.1f  (runs: %.1f before, %.1f after PyTorch)\n", "cltrain images/s (mean of 2 runs)", c, c1, c2
        printf "    %-44s %10.1f\n", "PyTorch images/s, stock malloc", ps
        printf "    %-44s %10.1f\n", "PyTorch images/s, tuned malloc", pt
        printf "    %-44s %10.2f  (against the faster PyTorch, %s)\n", "ratio cltrain/PyTorch", (p > 0 ? c / p : 0), (ps > pt ? "stock" : "tuned")
        printf "    %-44s %10.2f  (cltrain %.1f, PyTorch %.1f images/s; best single steps of all runs)\n", "ratio of the fastest steps", (pf > 0 ? cf / pf : 0), cf, pf
    }'
done
echo "  tuned malloc: ${tuned_malloc[*]}"
