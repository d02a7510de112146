#!/usr/bin/env bash
# prep.sh: a model's own input preparation, the .cfg's [net] mean= and std=
# (x / 255 - mean) / std per channel, end to end. mean=0 std=1 is x / 255,
# so on Fashion-MNIST (read without producers: the affine map on the device
# or in the loop; and through producers, and --resident) it trains the very
# weights the plain model does, while Fashion-MNIST's own mean and std train
# others; on a generated CIFAR set it replaces per-image standardisation in
# training, in the evaluation during training and in `eval` (the same test
# line), resumes bit for bit, and travels with the checkpoint to --init; on
# NumPy arrays (producers, a test split of their own) the unit keys again
# train the same weights. Bad values give one line naming file:line and key,
# exit 2, and so does a channel count the images do not have. The float64
# reference is checked in tests/test_augment.c and test_datasets.c; predict
# and export against onnxruntime in tests/onnx.sh, against PyTorch's
# Normalize in tests/import.sh. Prints TAP.
set -u
here=$(cd "$(dirname "$0")/.." && pwd)
case ${CLTRAIN_BUILD:-build} in /*) b=$CLTRAIN_BUILD ;; *) b=$here/${CLTRAIN_BUILD:-build} ;; esac
bin=$b/cltrain
py=${CLTRAIN_NUMPY_PYTHON:-/usr/bin/python3}
fm=/usr/share/datasets/fashion-mnist
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
n=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
notok() { n=$((n + 1)); echo "not ok $n - $1"; shift; for l in "$@"; do echo "# $l"; done; }
same() { # same A.ckpt B.ckpt: identical parameters
  local d
  d=$("$b/tools/ckpt-diff" "$1" "$2" 2>&1)
  [[ $d == "relative difference 0.000e+00, max abs difference 0.000e+00"* ]] || { echo "$d"; return 1; }
}
# a model file: $1 with "mean=..." and "std=..." lines ($2, $3) after its [net] header
keyed() { awk -v m="$2" -v s="$3" '{ print } /^\[net\]/ && m != "" { print "mean=" m; print "std=" s }' "$1"; }

# 1. Fashion-MNIST: the unit keys change nothing in any input mode; Fashion-MNIST's own mean and std do
keyed "$here/models/mnist-cnn.cfg" 0 1 >"$tmp/unit.cfg"
keyed "$here/models/mnist-cnn.cfg" 0.2860 0.3530 >"$tmp/fm.cfg"
fmo=(fashion-mnist --data "$fm" --limit-train 256 --limit-test 64 --steps 4 --batch-size 16 --seed 3 --quiet)
for mode in "--producers 0" "--producers 2" "--resident"; do
  tag=${mode// /}
  # shellcheck disable=SC2086
  "$bin" "${fmo[@]}" $mode --model mnist-cnn --checkpoint "$tmp/p$tag.ckpt" >/dev/null 2>&1
  # shellcheck disable=SC2086
  "$bin" "${fmo[@]}" $mode --model "$tmp/unit.cfg" --checkpoint "$tmp/u$tag.ckpt" >"$tmp/u.out" 2>&1
  if d=$(same "$tmp/p$tag.ckpt" "$tmp/u$tag.ckpt"); then ok "fashion-mnist $mode: mean=0 std=1 trains the weights of the plain model"
  else notok "fashion-mnist $mode: mean=0 std=1 trains the weights of the plain model" "$d" "$(tail -2 "$tmp/u.out")"; fi
done
"$bin" "${fmo[@]}" --model "$tmp/fm.cfg" --checkpoint "$tmp/fm.ckpt" >"$tmp/fm.out" 2>&1; rc=$?
if [[ $rc -eq 0 ]] && ! same "$tmp/p--producers0.ckpt" "$tmp/fm.ckpt" >/dev/null &&
   [[ $("$bin" eval "$tmp/fm.ckpt" --limit-test 64 2>&1 | grep '^test:') == "$("$bin" eval "$tmp/p--producers0.ckpt" --limit-test 64 2>&1 | grep '^test:')" ]]; then
  notok "mean=0.2860 std=0.3530 feeds other inputs" "eval of both checkpoints agrees: the keys had no effect"
elif [[ $rc -eq 0 ]]; then ok "fashion-mnist with mean=0.2860 std=0.3530 trains other weights"
else notok "fashion-mnist with mean=0.2860 std=0.3530" "exit $rc: $(tail -2 "$tmp/fm.out")"; fi

# 2. a generated CIFAR set: the keys replace per-image standardisation in training, its evaluation and eval
"$b/tools/make-cifar" "$tmp/cf" --train 200 --test 100 --seed 2 >/dev/null || notok "make-cifar"
cat >"$tmp/small.cfg" <<'CFG'
[net]
height=32
width=32
channels=3
classes=10
[conv]
filters=16
size=3
pad=1
activation=relu
[maxpool]
size=2
[conv]
filters=16
size=3
pad=1
activation=relu
[maxpool]
size=4
[dense]
outputs=10
[softmax]
CFG
keyed "$tmp/small.cfg" 0.4914,0.4822,0.4465 0.2470,0.2435,0.2616 >"$tmp/c.cfg"
co=(cifar10 --data "$tmp/cf" --batch-size 32 --seed 5 --model "$tmp/c.cfg")
"$bin" "${co[@]}" --steps 6 --checkpoint "$tmp/c.ckpt" >"$tmp/c.out" 2>&1; rc=$?
"$bin" cifar10 --data "$tmp/cf" --batch-size 32 --seed 5 --model "$tmp/small.cfg" --steps 6 --quiet --checkpoint "$tmp/cs.ckpt" >/dev/null 2>&1
t=$(sed -n 's/^epoch 1: \(test: .*\)/\1/p' "$tmp/c.out")
e=$("$bin" eval "$tmp/c.ckpt" 2>&1 | grep '^test:')
if [[ $rc -eq 0 && -n $t && $t == "$e" ]] && grep -q "input prepared as the model says, (x / 255 - mean) / std per channel: mean=0.4914,0.4822,0.4465 std=0.247,0.2435,0.2616" "$tmp/c.out"; then
  ok "cifar10 with the keys: eval of the checkpoint gives training's test line ($e)"
else notok "cifar10 with the keys: eval agrees with training" "exit $rc" "training: $t" "eval: $e" "$(grep -i "input prep" "$tmp/c.out")"; fi
if ! d=$(same "$tmp/cs.ckpt" "$tmp/c.ckpt"); then ok "cifar10 with the keys trains other weights than per-image standardisation"
else notok "cifar10 with the keys trains other weights than per-image standardisation" "identical weights"; fi
rm -f "$tmp/r.ckpt"
"$bin" "${co[@]}" --steps 3 --quiet --checkpoint "$tmp/r.ckpt" >/dev/null 2>&1
"$bin" cifar10 --data "$tmp/cf" --batch-size 32 --steps 6 --quiet --resume "$tmp/r.ckpt" --checkpoint "$tmp/r.ckpt" >"$tmp/r.out" 2>&1
if cmp -s "$tmp/c.ckpt" "$tmp/r.ckpt"; then ok "cifar10 with the keys: 3 steps + resume for 3 = 6 steps, byte for byte"
else notok "cifar10 with the keys: resume" "$("$b/tools/ckpt-diff" "$tmp/c.ckpt" "$tmp/r.ckpt" 2>&1)" "$(tail -2 "$tmp/r.out")"; fi
# --init: the checkpoint's model, keys included, on the same set: its first evaluation is the checkpoint's
out=$("$bin" cifar10 --data "$tmp/cf" --batch-size 32 --init "$tmp/c.ckpt" --steps 1 --eval-every 1 --lr 0 2>&1); rc=$?
if [[ $rc -eq 0 && $out == *"input prepared as the model says"* && $out != *"note:"* &&
      $(grep -m1 -o 'test: [0-9]* images, loss [0-9.]*, accuracy [0-9.]*%' <<<"$out") == "${e%%,*}, ${e#*, }" ]]; then
  ok "--init keeps the checkpoint's preparation (lr 0: its test line again)"
else notok "--init keeps the preparation" "exit $rc" "want $e" "$(grep -E 'test:|note' <<<"$out" | head -3)"; fi

# 3. NumPy arrays (producers; the test split gets a source of its own): the unit keys again change nothing
if "$py" -c "import numpy" 2>/dev/null; then
  "$py" "$here/tools/arrays_write.py" mnist "$tmp" "$fm/train-images-idx3-ubyte.gz" "$fm/train-labels-idx1-ubyte.gz" 128 64 >/dev/null
  ao=(arrays "$tmp/u8-nhw-stored.npz" --steps 3 --batch-size 16 --seed 7 --augment shift)
  "$bin" "${ao[@]}" --checkpoint "$tmp/a.ckpt" >"$tmp/a.out" 2>&1
  "$bin" "${ao[@]}" --model "$tmp/unit.cfg" --checkpoint "$tmp/au.ckpt" >"$tmp/au.out" 2>&1
  ta=$(grep -o 'test: .*' "$tmp/a.out" | head -1); tu=$(grep -o 'test: .*' "$tmp/au.out" | head -1)
  if d=$(same "$tmp/a.ckpt" "$tmp/au.ckpt") && [[ -n $ta && $ta == "$tu" && $("$bin" eval "$tmp/au.ckpt" 2>&1 | grep '^test:') == "$tu" ]]; then
    ok "arrays: mean=0 std=1 trains the same weights, and training's and eval's test lines agree ($tu)"
  else notok "arrays with the unit keys" "${d:-}" "plain: $ta" "keys: $tu" "$(tail -2 "$tmp/au.out")"; fi
elif [[ ${CI:-} == true ]]; then notok "arrays with the keys" "numpy is not importable by $py (required under CI=true)"
else ok "arrays with the keys # SKIP numpy is not importable by $py"; fi

# 4. bad input: one line naming the file, its line and the key, exit 2
for bad in "std=0.2470,0,0.2616:value 2 (0) must be > 0" "std=0.2470,0.2435:std= has 2 values but channels=3" \
           "std=0.2470,x,0.2616:value 2 is not a number"; do
  keyed "$tmp/small.cfg" 0.4914,0.4822,0.4465 "${bad%%:*}" | sed 's/^std=std=/std=/' >"$tmp/bad.cfg"
  err=$("$bin" cifar10 --data "$tmp/cf" --model "$tmp/bad.cfg" --steps 1 2>&1); rc=$?
  if [[ $rc -eq 2 && $err == *"bad.cfg:"*": "*"${bad#*:}"* && $(wc -l <<<"$err") -eq 1 ]]; then ok "${bad%%:*}: exit 2, ${err#cltrain: }"
  else notok "${bad%%:*}: one line naming bad.cfg:LINE and the key, exit 2" "rc $rc: $err"; fi
done
err=$("$bin" "${fmo[@]}" --model "$tmp/c.cfg" 2>&1); rc=$?
if [[ $rc -eq 2 && $err == *"3 channels, but these images have 1"* && $(wc -l <<<"$err") -eq 1 ]]; then ok "three means for one-channel images: exit 2, ${err#cltrain: }"
else notok "three means for one-channel images: exit 2, one line" "rc $rc: $err"; fi
echo "1..$n"
