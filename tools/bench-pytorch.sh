#!/usr/bin/env bash
# tools/bench-pytorch.sh BUILD: cltrain vs PyTorch (CPU) training throughput
# on the reference model mnist-cnn, batch 128, 30 timed steps each.
# Runs cltrain, then PyTorch, then cltrain again, and reports the mean of the
# two cltrain runs so that drift on a shared machine shows up.  Called by
# `make bench`; does nothing (exit 0) when PyTorch is not installed.
set -euo pipefail

build=${1:?usage: tools/bench-pytorch.sh BUILD}
here=$(cd "$(dirname "$0")" && pwd)
py=/usr/bin/python3
steps=30
threads=${PYTORCH_THREADS:-2}

if ! "$py" -c 'import torch' >/dev/null 2>&1; then
    echo "bench-pytorch: PyTorch is not installed for $py (apt-get install python3-torch); skipping the comparison"
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

run_cltrain() {
    local out
    out=$("$build/cltrain" bench train --steps "$steps") || { echo "bench-pytorch: $build/cltrain bench train failed" >&2; exit 1; }
    field 'steady-state images/s:' "cltrain bench train" "$out"
}

c1=$(run_cltrain)
pout=$("$py" "$here/pytorch_mnist_cnn.py" --bench-steps "$steps" --threads "$threads") ||
    { echo "bench-pytorch: pytorch_mnist_cnn.py failed" >&2; exit 1; }
p=$(field 'pytorch images/s:' "pytorch_mnist_cnn.py" "$pout")
c2=$(run_cltrain)

awk -v c1="$c1" -v c2="$c2" -v p="$p" -v date="$(date '+%Y-%m-%d %H:%M:%S %z')" \
    -v nproc="$(nproc)" -v info="$(printf '%s\n' "$pout" | grep -m1 '^pytorch bench:' || true)" 'BEGIN {
    c = (c1 + c2) / 2
    print "cltrain vs PyTorch, mnist-cnn training, batch 128 (" date ", nproc " nproc ")"
    if (info != "") print "  " info
    printf "  %-40s %10.1f  (runs: %.1f before, %.1f after PyTorch)\n", "cltrain images/s (mean of 2 runs)", c, c1, c2
    printf "  %-40s %10.1f\n", "PyTorch images/s", p
    printf "  %-40s %10.2f\n", "ratio cltrain/PyTorch", (p > 0 ? c / p : 0)
}'
