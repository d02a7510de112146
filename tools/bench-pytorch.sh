#!/usr/bin/env bash
# tools/bench-pytorch.sh BUILD: cltrain vs PyTorch 2 (CPU) training
# throughput, same model, batch, optimizer and threads, PyTorch at its best.
#
# The peer is PyTorch 2 from PyPI in its own venv (PYTORCH_PYTHON, default
# BUILD/pt2venv/bin/python, made by tools/setup-pytorch2.sh when missing:
# that needs PyPI; without it the race is skipped with one line, exit 0).
# PYTORCH_PYTHON=/usr/bin/python3 races Debian's PyTorch 1.13 instead (eager
# only). PyTorch at its best is the fastest of:
#   - eager, with OpenMP's default thread wait and with OMP_WAIT_POLICY=PASSIVE
#     (threads that sleep rather than spin at each barrier: on a machine
#     shared with other jobs 2-3x faster, on a quiet one often a little
#     slower), then with the faster of those and each other allocator there
#     is: glibc tuned (MALLOC_MMAP_THRESHOLD_ and friends, below), jemalloc
#     and tcmalloc through LD_PRELOAD (Debian's libjemalloc2 and
#     libtcmalloc-minimal4, which tools/setup-deps.sh --bench installs); the
#     fastest of these environments is kept for the configurations below;
#   - eager with the weights and inputs in channels-last memory format;
#   - torch.compile (its compilation runs in the warm-up steps);
#   - torch.compile with channels-last.
# PyTorch runs on 2 threads (PYTORCH_THREADS) like cltrain's PoCL on these
# machines; refuses (exit 2) when PyTorch runs on the reference BLAS.
# Models and settings, the same on both sides: batch 128 (PYTORCH_BATCH);
# mnist-cnn, cifar-cnn and resnet20 with Adam (lr 3e-4, `cltrain bench
# train`'s default), cifar-fast with its recipe's Nesterov SGD (momentum
# 0.85, decay; tools/pytorch_bench.py; the recipe trains at batch 1024,
# PYTORCH_BATCH=1024 races that, 8x the time). Training images/s over
# timed steps after 3 warm-up ones, on random batches in memory.
# For each model cltrain runs before, between and after PyTorch's runs
# (interleaved, so drift on a shared machine shows); its figure is the mean
# of its runs, against PyTorch's best configuration. That configuration is
# chosen by one run each, and the fastest of some nine noisy runs is the one
# that luck favoured most, so it then runs PYTORCH_CONFIRM more times (default
# 2), each followed by a cltrain run, and its figure is the mean of those
# runs (the ratio against the single fastest run is printed too); beside that ratio,
# the ratio of the fastest single steps of all runs and of the process CPU
# time per step, which other jobs on the machine shift less. Called by
# `make bench`.
# PYTORCH_MODELS (default "mnist-cnn cifar-cnn resnet20 cifar-fast"),
# PYTORCH_CONFIGS (default "eager channels-last compile compile+channels-last"),
# PYTORCH_MALLOCS (default "stock tuned jemalloc tcmalloc", those installed;
# the first is the one the wait policies are tried with), PYTORCH_WAITS
# (default "default PASSIVE") and PYTORCH_STEPS (30 for mnist-cnn, 10 for
# cifar-cnn and resnet20, 4 for cifar-fast) override. The whole race takes
# 15-20 minutes on a quiet 2-core machine, much longer on a busy one.
set -euo pipefail

build=${1:?usage: tools/bench-pytorch.sh BUILD}
here=$(cd "$(dirname "$0")" && pwd)
threads=${PYTORCH_THREADS:-2}
batch=${PYTORCH_BATCH:-128}
models=${PYTORCH_MODELS:-mnist-cnn cifar-cnn resnet20 cifar-fast}
configs=${PYTORCH_CONFIGS:-eager channels-last compile compile+channels-last}
waits=${PYTORCH_WAITS:-default PASSIVE}
confirm=${PYTORCH_CONFIRM:-2}
tuned_malloc="MALLOC_MMAP_THRESHOLD_=4294967296 MALLOC_TRIM_THRESHOLD_=68719476736 MALLOC_TOP_PAD_=1073741824"

py=${PYTORCH_PYTHON:-}
if [[ -z $py ]]; then
    venv=$build/pt2venv
    if [[ ! -x $venv/bin/python ]] || ! "$venv/bin/python" -c 'import torch' >/dev/null 2>&1; then
        echo "bench-pytorch: making a PyTorch 2 venv in $venv (tools/setup-pytorch2.sh, from PyPI)"
        if ! "$here/setup-pytorch2.sh" "$venv"; then
            echo "bench-pytorch: no PyTorch 2 venv (tools/setup-pytorch2.sh $venv failed: PyPI unreachable?); skipping the comparison (PYTORCH_PYTHON=PYTHON races another PyTorch)"
            exit 0
        fi
    fi
    py=$venv/bin/python
fi
if ! "$py" -c 'import torch' >/dev/null 2>&1; then
    echo "bench-pytorch: $py cannot import torch (PYTORCH_PYTHON names the Python to race); skipping the comparison"
    exit 0
fi
has_compile=$("$py" -c 'import torch; print(int(hasattr(torch, "compile")))')

# the allocators: NAME=ENV... (an LD_PRELOAD library only where it is installed)
mallocs=()
for m in ${PYTORCH_MALLOCS:-stock tuned jemalloc tcmalloc}; do
    case $m in
    stock) mallocs+=("stock=") ;;
    tuned) mallocs+=("tuned=$tuned_malloc") ;;
    jemalloc | tcmalloc)
        lib=$(/sbin/ldconfig -p 2>/dev/null | awk -v n="$([[ $m == jemalloc ]] && echo libjemalloc.so.2 || echo libtcmalloc_minimal.so.4)" \
            '$1 == n && !f && /x86-64|x86_64|AArch64|aarch64/ { print $NF; f = 1 }')
        if [[ -n $lib ]]; then mallocs+=("$m=LD_PRELOAD=$lib"); else echo "bench-pytorch: no $m installed (tools/setup-deps.sh --bench installs it); not tried"; fi ;;
    *) echo "bench-pytorch: unknown allocator '$m' in PYTORCH_MALLOCS; expected stock, tuned, jemalloc or tcmalloc" >&2; exit 2 ;;
    esac
done
for c in $configs; do
    case $c in
    eager | channels-last) ;;
    compile | compile+channels-last) [[ $has_compile == 1 ]] || { echo "bench-pytorch: this PyTorch has no torch.compile; '$c' not tried"; }; ;;
    *) echo "bench-pytorch: unknown configuration '$c' in PYTORCH_CONFIGS; expected eager, channels-last, compile or compile+channels-last" >&2; exit 2 ;;
    esac
done

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
blas=$("$py" "$here/pytorch_bench.py" --blas 2>/dev/null) || rc=$?
blas=${blas#pytorch blas: }
if [[ $rc == 3 ]]; then
    echo "bench-pytorch: PyTorch runs on the reference BLAS (${blas#* }), not comparing: install an optimised one (tools/setup-deps.sh --bench installs libopenblas0-pthread)" >&2
    exit 2
elif [[ $rc != 0 ]]; then
    echo "bench-pytorch: $here/pytorch_bench.py --blas failed (exit $rc)" >&2
    exit 1
fi

# settings MODEL: "BATCH CLTRAIN-OPTIONS..." (the PyTorch side's are in pytorch_bench.py)
settings() {
    case $1 in
    cifar-fast) echo "$batch --optimizer nesterov --momentum 0.85 --lr 1.5 --weight-decay 0.0013304348" ;;
    *) echo "$batch --optimizer adam --lr 0.0003" ;;
    esac
}

# each prints "MEAN FASTEST CPU": images/s over the timed steps and of the
# fastest step, and the process's CPU milliseconds per step
run_cltrain() { # MODEL STEPS
    local out opts what="cltrain bench train --model $1"
    read -r _ opts <<<"$(settings "$1")"
    # shellcheck disable=SC2086 # opts is a list of options
    out=$(CLTRAIN_BENCH_STARTUP=0 "$build/cltrain" bench train --model "$1" --batch-size "$batch" --steps "$2" $opts 2>&1) ||
        { echo "bench-pytorch: $build/cltrain bench train --model $1 failed:" >&2; printf '%s\n' "$out" >&2; exit 1; }
    printf '%s\n' "$out" | sed -n 's/.*device \(.*\), gemm.*/\1/p' | head -1 >"$tmp/device"
    echo "$(field 'steady-state images/s:' "$what" "$out") $(field 'fastest-step images/s:' "$what" "$out")" \
        "$(field 'process CPU time:' "$what" "$out")"
}
run_pytorch() { # MODEL STEPS CONFIG MALLOC-ENV
    local model=$1 steps=$2 cfg=$3 env=$4 out flags=() what="pytorch_bench.py --model $1"
    [[ $cfg == compile* ]] && flags+=(--compile)
    [[ $cfg == *channels-last ]] && flags+=(--channels-last)
    # shellcheck disable=SC2086 # env is a list of VAR=VALUE words
    out=$(env $env "$py" "$here/pytorch_bench.py" --model "$model" --batch "$batch" --steps "$steps" --threads "$threads" "${flags[@]}" 2>&1) ||
        { echo "bench-pytorch: pytorch_bench.py --model $model ${flags[*]} ($env) failed:" >&2; printf '%s\n' "$out" | tail -20 >&2; exit 1; }
    echo "$(field 'pytorch images/s:' "$what" "$out") $(field 'pytorch fastest-step images/s:' "$what" "$out")" \
        "$(field 'pytorch process CPU time:' "$what" "$out")"
}
# show LABEL "MEAN FASTEST CPU"
show() {
    local v
    read -r -a v <<<"$2"
    printf '    %-52s %8s  fastest step %8s  CPU %7.1f ms/step\n' "$1" "${v[0]}" "${v[1]}" "${v[2]}"
}

# try_env LABEL ENV: eager PyTorch in that environment; keeps the fastest
# in best_env, best_m and best_ips and every result in prow
try_env() {
    local r
    r=$(run_pytorch "$model" "$steps" eager "$2")
    show "PyTorch eager, $1" "$r"
    prow+=("eager, $1|$r")
    if awk -v a="${r%% *}" -v b="$best_ips" 'BEGIN { exit !(a > b) }'; then best_ips=${r%% *} best_env=$2 best_m=$1; fi
    keep_top eager "$2" "eager, $1" "$r"
}

# keep_top CONFIG ENV LABEL "MEAN FASTEST CPU": the configuration of the highest mean so far (top_*)
keep_top() {
    if awk -v a="${4%% *}" -v b="$top_ips" 'BEGIN { exit !(a > b) }'; then top_ips=${4%% *} top_cfg=$1 top_env=$2 top_label=$3; fi
}

# cpu_ticks: "STEAL TOTAL" from /proc/stat's first line (all CPUs, clock ticks; guest time is inside user)
cpu_ticks() { awk '/^cpu /{t = 0; for (i = 2; i <= 9; i++) t += $i; print $9, t; exit}' /proc/stat; }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
torch_version=$("$py" -c 'import torch; print(torch.__version__)')
echo "cltrain vs PyTorch, training ($(date -u '+%Y-%m-%d %H:%M UTC'), nproc $(nproc), load average $(cut -d' ' -f1-3 /proc/loadavg))"
echo "  PyTorch $torch_version ($py), $threads threads, BLAS: $blas"
echo "  PyTorch convolutions: $("$py" -c 'import re, torch
m = re.search(r"MKL-DNN v([0-9.]+)", torch.__config__.show())
print(("oneDNN (MKL-DNN) " + (m.group(1) if m else "?")) if torch.backends.mkldnn.is_available() else "im2col + BLAS (no oneDNN)")')"
echo "  allocators tried: ${mallocs[*]%%=*} (tuned: $tuned_malloc); OpenMP waits: $waits"
summary=()
for model in $models; do
    case $model in mnist-cnn) steps=30 ;; cifar-fast) steps=4 ;; *) steps=10 ;; esac
    steps=${PYTORCH_STEPS:-$steps}
    read -r _ opts <<<"$(settings "$model")"
    echo "  $model: batch $batch, $steps timed steps per run; cltrain bench train $opts"
    read -r st0 tt0 <<<"$(cpu_ticks)"
    crun=() prow=()
    crun+=("$(run_cltrain "$model" "$steps")")
    show "cltrain, run 1" "${crun[0]}"
    # the environment, on eager: OpenMP's wait policies with the first
    # allocator, then the other allocators with the faster policy
    best_env="" best_m="" best_ips=0 wait_env="" wait_m="" top_ips=0 top_cfg="" top_env="" top_label=""
    m0=${mallocs[0]%%=*} e0=${mallocs[0]#*=}
    for w in $waits; do
        if [[ $w == default ]]; then try_env "$m0 malloc" "$e0"; else try_env "$m0 malloc, ${w,,} OpenMP wait" "$e0 OMP_WAIT_POLICY=$w"; fi
    done
    if [[ $best_env == *OMP_WAIT_POLICY=* ]]; then wait_env=OMP_WAIT_POLICY=${best_env##*OMP_WAIT_POLICY=} wait_m=", ${wait_env##*=}"; wait_m="${wait_m,,} OpenMP wait"; fi
    for me in "${mallocs[@]:1}"; do
        try_env "${me%%=*} malloc$wait_m" "${me#*=} $wait_env"
    done
    crun+=("$(run_cltrain "$model" "$steps")")
    show "cltrain, run 2" "${crun[1]}"
    for cfg in $configs; do
        [[ $cfg == eager ]] && continue
        [[ $cfg == compile* && $has_compile != 1 ]] && continue
        r=$(run_pytorch "$model" "$steps" "$cfg" "$best_env")
        show "PyTorch $cfg, $best_m" "$r"
        prow+=("$cfg, $best_m|$r")
        keep_top "$cfg" "$best_env" "$cfg, $best_m" "$r"
    done
    crun+=("$(run_cltrain "$model" "$steps")")
    show "cltrain, run 3" "${crun[2]}"
    # The configuration that won ran once, and the fastest of some nine noisy runs is the one luck
    # favoured most: it runs again (PYTORCH_CONFIRM times, interleaved with cltrain), and those runs,
    # not the one that chose it, give its speed.
    conf=()
    for ((j = 1; j <= confirm; j++)); do
        r=$(run_pytorch "$model" "$steps" "$top_cfg" "$top_env")
        show "PyTorch $top_label, again ($j)" "$r"
        conf+=("$r")
        prow+=("$top_label|$r")
        crun+=("$(run_cltrain "$model" "$steps")")
        show "cltrain, run ${#crun[@]}" "${crun[-1]}"
    done
    read -r st1 tt1 <<<"$(cpu_ticks)"
    # PyTorch's best: the configuration of the highest mean; the fastest step
    # and the least CPU time per step over all configurations
    line=$(printf '%s\n' "${crun[@]}" | awk -v m="$model" -v steal="$((st1 - st0))" -v ticks="$((tt1 - tt0))" \
        -v rows="$(IFS=';'; echo "${prow[*]}")" -v conf="$(IFS=';'; echo "${conf[*]}")" 'BEGIN { n = split(rows, r, ";"); pcpu = 1e30
            nc = split(conf, cr, ";"); for (i = 1; i <= nc; i++) { split(cr[i], v, " "); pconf += v[1] }
            if (nc) pconf /= nc
            for (i = 1; i <= n; i++) { split(r[i], f, "|"); split(f[2], v, " ")
                if (v[1] + 0 > p) { p = v[1] + 0; pc = f[1] }
                if (v[2] + 0 > pf) pf = v[2] + 0
                if (v[3] + 0 < pcpu) pcpu = v[3] + 0 } }
        { c += $1; k++; if ($2 + 0 > cf) cf = $2 + 0; ccpu += $3 }
        END { c /= k; ccpu /= k
            printf "    %-44s %10.1f\n", "cltrain images/s (mean of " k " runs)", c
            if (nc) {
                printf "    %-44s %10.1f  (%s, mean of %d runs after the one that chose it)\n", "PyTorch images/s at its best", pconf, pc, nc
                printf "    %-44s %10.2f\n", "ratio cltrain/PyTorch", c / pconf
                printf "    %-44s %10.2f  (its %.1f images/s)\n", "ratio against the fastest single PyTorch run", (p > 0 ? c / p : 0), p
                p = pconf
            } else {
                printf "    %-44s %10.1f  (%s)\n", "PyTorch images/s at its best", p, pc
                printf "    %-44s %10.2f\n", "ratio cltrain/PyTorch", (p > 0 ? c / p : 0)
            }
            printf "    %-44s %10.2f  (cltrain %.1f, PyTorch %.1f images/s)\n", "ratio of the fastest steps of all runs", (pf > 0 ? cf / pf : 0), cf, pf
            printf "    %-44s %10.2f  (cltrain %.1f ms, PyTorch %.1f ms per step: its least)\n", "ratio of CPU time per step, PyTorch/cltrain", (ccpu > 0 ? pcpu / ccpu : 0), ccpu, pcpu
            printf "    CPU time stolen by the host meanwhile: %.0f%%%s; load average now %s\n", (ticks > 0 ? 100 * steal / ticks : 0),
                (ticks > 0 && steal / ticks > 0.05 ? " (noisy: ratios can drift)" : ""), load
            printf "SUMMARY|%s|%s|%.1f|%.1f|%.2f|%.2f|%.2f\n", m, pc, p, c, (p > 0 ? c / p : 0), (pf > 0 ? cf / pf : 0), (ccpu > 0 ? pcpu / ccpu : 0) }' \
        load="$(cut -d' ' -f1-3 /proc/loadavg)")
    printf '%s\n' "$line" | grep -v '^SUMMARY|'
    summary+=("$(printf '%s\n' "$line" | sed -n 's/^SUMMARY|//p')")
done
echo "summary (PyTorch $torch_version, $threads threads; cltrain on $(cat "$tmp/device" 2>/dev/null || echo ?)):"
printf '  %-11s %-52s %10s %10s %7s %8s %8s\n' model "PyTorch at its best" "PyTorch/s" "cltrain/s" ratio fastest "CPU/step"
for s in "${summary[@]}"; do
    IFS='|' read -r m pc p c r rf rc <<<"$s"
    printf '  %-11s %-52s %10s %10s %6sx %7sx %7sx\n' "$m" "$pc" "$p" "$c" "$r" "$rf" "$rc"
done
echo "  (ratio: cltrain's mean images/s over PyTorch's best configuration's, that configuration's mean over the"
echo "   PYTORCH_CONFIRM runs after the one that chose it (0: that one run); fastest: of the fastest single steps;"
echo "   CPU/step: PyTorch's least process CPU time per step over cltrain's mean, the figure other jobs on the machine move least)"
