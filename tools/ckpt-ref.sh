#!/usr/bin/env bash
# ckpt-ref.sh: train every built-in model with each of the four optimizers
# for 30 steps from a fixed seed on small data, and keep the checkpoints:
# the reference that a restructuring must reproduce byte for byte on the
# same device. Also cifar-cnn and resnet20b under each --conv algorithm.
#   tools/ckpt-ref.sh make BIN DIR      write DIR/<model>-<optimizer>[-<conv>].ckpt
#   tools/ckpt-ref.sh check BIN DIR     train the same with BIN into a temporary
#                                       folder and compare each file with DIR's:
#                                       "same" when cmp finds them equal, or when
#                                       tools/ckpt-diff finds parameters and
#                                       optimizer state bit-identical (the data
#                                       folder's name, kept in the file, may
#                                       differ); exit 1 if any differs
# The device is pinned to PoCL (OCL_ICD_VENDORS) unless CLTRAIN_DEVICE is set.
# Needs the build's tools (make-cifar, make-font-dataset) beside BIN and
# Fashion-MNIST (Debian's dataset-fashion-mnist).
set -u
mode=${1:-} bin=${2:-} dir=${3:-}
if [[ ($mode != make && $mode != check) || -z $bin || -z $dir ]]; then
  echo "usage: tools/ckpt-ref.sh make|check BIN DIR" >&2
  exit 2
fi
bin=$(cd "$(dirname "$bin")" && pwd)/$(basename "$bin")
tools=$(dirname "$bin")/tools
export OCL_ICD_VENDORS=${OCL_ICD_VENDORS:-/etc/OpenCL/vendors/pocl.icd}
# the shipped kernel choices on both sides: no first-run kernel search (its picks follow the load)
export CLTRAIN_AUTOTUNE=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
out=$dir
[[ $mode == check ]] && out=$tmp/out
mkdir -p "$out"
# the data in one fixed place, so that the checkpoints (which name it) compare byte for byte
data=${CLTRAIN_REF_DATA:-${TMPDIR:-/tmp}/cltrain-ckpt-ref-data}
rm -rf "$data" && mkdir -p "$data" || exit 2
"$tools/make-cifar" "$data/c10" --train 200 --test 50 --seed 7 >/dev/null || exit 2
"$tools/make-cifar" "$data/c100" --train 500 --test 50 --seed 7 --cifar100 >/dev/null || exit 2
"$tools/make-font-dataset" --chars 60 --size 32 "$data/fonts" >/dev/null || exit 2

common=(--steps 30 --epochs 3 --batch-size 16 --seed 5 --producers 0 --quiet --limit-test 40) # 30 steps on every set
data_of() { # the command and data options for model $1
  case $1 in
    mlp | mnist-cnn | mnist-cnn-bn) echo "fashion-mnist --limit-train 600" ;;
    cifar100-cnn) echo "cifar100 --data $data/c100" ;;
    cifar-cnn | cifar-tf | resnet20 | resnet20b) echo "cifar10 --data $data/c10" ;;
    *) echo "images $data/fonts --size 32 --channels 3 --val-split 0.2" ;;
  esac
}
runs=()
for cfg in "$(dirname "$0")"/../models/*.cfg; do
  m=$(basename "$cfg" .cfg)
  for opt in adam adamw sgd nesterov; do runs+=("$m $opt auto"); done
done
for m in cifar-cnn resnet20b; do
  for conv in im2col winograd winograd4 direct; do runs+=("$m adam $conv"); done
done
bad=0
for r in "${runs[@]}"; do
  read -r m opt conv <<<"$r"
  name=$m-$opt
  [[ $conv != auto ]] && name=$name-$conv
  # shellcheck disable=SC2046
  if ! "$bin" $(data_of "$m") --model "$m" --optimizer "$opt" --conv "$conv" --weight-decay 1e-4 \
      "${common[@]}" --checkpoint "$out/$name.ckpt" >"$tmp/log" 2>&1; then
    echo "FAILED $name: $(tail -1 "$tmp/log")"
    bad=1
    continue
  fi
  if [[ $mode == check ]]; then
    diff=$("$tools/ckpt-diff" "$out/$name.ckpt" "$dir/$name.ckpt" 2>&1 | tr '\n' ' ')
    if cmp -s "$out/$name.ckpt" "$dir/$name.ckpt"; then echo "same      $name (cmp)"
    elif [[ $diff == *"parameters yes, optimizer state yes"* ]]; then echo "same      $name (ckpt-diff: $diff)"
    else echo "DIFFERENT $name: $diff"; bad=1; fi
  else
    echo "wrote     $name"
  fi
done
exit $bad
