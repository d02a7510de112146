#!/usr/bin/env bash
# cifar-real.sh: cifar-cnn on real CIFAR-10 images. Builds the JPEG copy in
# ../shared/datasets/cifar10-jpeg (exact labels and order, JPEG-recompressed
# pixels) into the original binary batches once per build folder, trains on
# the first 5,000 training images for 4 epochs with 16 producer threads, and
# checks the accuracy on 2,000 real test images: a broken augmentation,
# normalisation or batch-norm path stays near chance or far below what this
# recipe reaches (about 55%). Then eval with --tta flip on the checkpoint.
# Without the copy it skips, saying why; under CI=true it must run. Prints TAP.
set -u
here=$(cd "$(dirname "$0")/.." && pwd)
case ${CLTRAIN_BUILD:-build} in /*) b=$CLTRAIN_BUILD ;; *) b=$here/${CLTRAIN_BUILD:-build} ;; esac
bin=$b/cltrain
copy=$here/../shared/datasets/cifar10-jpeg
n=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
notok() { n=$((n + 1)); echo "not ok $n - $1"; shift; for l in "$@"; do echo "# $l"; done; }
if [[ ! -x $copy/build.sh ]]; then
  if [[ ${CI:-} == true ]]; then
    notok "the CIFAR-10 JPEG copy is missing at $copy (CI=true: this test must run)"
  else
    echo "ok 1 - real CIFAR-10 # SKIP no CIFAR-10 copy at $copy (../shared/datasets/cifar10-jpeg next to the project)"
    n=1
  fi
  echo "1..$n"
  exit 0
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
real=$b/cifar10-real
data=$real/cifar-10-batches-bin
if [[ ! -f $real/.built ]]; then
  rm -rf "$real"
  if "$copy/build.sh" "$real" >"$tmp/build.log" 2>&1; then touch "$real/.built"; ok "built the binary batches from the JPEG copy (SHA-256 checked)"
  else notok "build.sh of the JPEG copy" "$(tail -3 "$tmp/build.log")"; echo "1..$n"; exit 0; fi
fi
recipe=(--model cifar-cnn --limit-train 5000 --limit-test 2000 --epochs 4 --batch-size 64 --optimizer sgd --lr 0.05
        --weight-decay 5e-4 --schedule cosine --warmup 50 --progress-every 1000)
timeout 600 "$bin" cifar10 --data "$data" "${recipe[@]}" --producers 16 --checkpoint "$tmp/r.ckpt" >"$tmp/out" 2>&1
rc=$?
acc=$(sed -n 's/^epoch 4: test: .*accuracy \([0-9.]*\)%.*/\1/p' "$tmp/out")
if [[ $rc -eq 0 && -n $acc ]] && awk -v a="$acc" 'BEGIN { exit !(a >= 45) }'; then
  ok "cifar-cnn on 5,000 real training images, 4 epochs: $acc% on 2,000 real test images (want >= 45%; chance 10%)"
else notok "cifar-cnn on real CIFAR-10 (want >= 45% after 4 epochs)" "exit $rc, accuracy '$acc'" "$(tail -4 "$tmp/out")"; fi
line=$(grep '^input:' "$tmp/out")
if [[ $line == *"16 producers"* && $line == *"pipeline efficiency"* ]] && grep -q 'data-wait' "$tmp/out"; then
  ok "--producers 16 on this machine: $line"
else notok "--producers 16: producer count, pipeline efficiency and data-wait printed" "$line"; fi
ev=$("$bin" eval "$tmp/r.ckpt" --data "$data" --limit-test 2000 2>&1 | sed -n 's/^test: .*accuracy \([0-9.]*\)%.*/\1/p')
if [[ -n $ev && $ev == "$acc" ]]; then ok "eval of the checkpoint gives the training run's accuracy ($ev%)"
else notok "eval of the checkpoint" "eval '$ev' vs training '$acc'"; fi
tta=$("$bin" eval "$tmp/r.ckpt" --data "$data" --limit-test 2000 --tta flip 2>&1 | sed -n 's/^test: .*accuracy \([0-9.]*\)%.*/\1/p')
if [[ -n $tta && -n $ev ]] && awk -v t="$tta" -v e="$ev" 'BEGIN { exit !(t >= e - 2 && t != e) }'; then
  ok "--tta flip: $tta% against $ev% without (a mirror that is not left-right would cost points)"
else notok "--tta flip (want a different figure, not more than 2 points below $ev%)" "tta '$tta'"; fi
err=$("$bin" eval "$tmp/r.ckpt" --data "$data" --tta rotate 2>&1); rc=$?
if [[ $rc -eq 2 && $err == *"--tta rotate"* && $(printf '%s\n' "$err" | wc -l) -eq 1 ]]; then ok "--tta rotate: one line, exit 2"
else notok "--tta unknown mode" "exit $rc: $err"; fi
echo "1..$n"
