#!/usr/bin/env bash
# recipe.sh: training defaults in a model's [net] section (ct_model.recipe,
# cli_apply_recipe): taken as the options would be, overridden by options
# given, their lr/momentum/weight decay dropped with another --optimizer,
# below a resumed checkpoint's saved hyper-parameters, and a bad value
# refused with one line naming the .cfg line (exit 2). The same run from the
# .cfg's defaults and from the same options on the command line trains the
# same figures, step for step.
# Prints TAP. Uses Fashion-MNIST (Debian's dataset-fashion-mnist).
set -u
here=$(cd "$(dirname "$0")/.." && pwd)
case ${CLTRAIN_BUILD:-build} in /*) build=$CLTRAIN_BUILD ;; *) build=$here/${CLTRAIN_BUILD:-build} ;; esac
bin=$build/cltrain
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
n=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
notok() { n=$((n + 1)); echo "not ok $n - $1"; shift; for l in "$@"; do echo "# $l"; done; }
if [[ ! -f /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz ]]; then
  echo "1..0 # SKIP Fashion-MNIST (dataset-fashion-mnist) is not installed"
  exit 0
fi
net='[net]
height=28
width=28
channels=1
classes=10'
layers='[conv]
filters=4
size=3
activation=relu
[batchnorm]
[dense]
outputs=10
[softmax]'
printf '%s\n%s\n' "$net" "$layers" >"$tmp/plain.cfg"
printf '%s\n%s\n%s\n' "$net" 'batch=32
optimizer=nesterov
lr=0.05      ; the rate
momentum=0.8
weight_decay=0.001
schedule=triangle
label_smoothing=0.2
lookahead=0.9
drop_last=1
epochs=5' "$layers" >"$tmp/r.cfg"
fm=("$bin" fashion-mnist --limit-train 250 --limit-test 100 --producers 0)
recipe_line() { grep '^recipe: ' "$1"; }

# 1. taken: the effective recipe and where it came from are printed
"${fm[@]}" --model "$tmp/r.cfg" --epochs 1 >"$tmp/r.out" 2>&1; rc=$?
want='recipe: 1 epoch, nesterov lr 0.05 momentum 0.8 weight decay 0.001, triangle schedule, label smoothing 0.2, lookahead 0.9'
if [[ $rc -eq 0 && $(recipe_line "$tmp/r.out") == "$want"* ]] && grep -q "^training on 250 images, batch 32, 7 steps per epoch" "$tmp/r.out" &&
   grep -q "^training defaults from $tmp/r.cfg's \[net\]: batch-size 32, optimizer nesterov, lr 0.05, momentum 0.8" "$tmp/r.out"; then
  ok "the [net] training defaults are taken and printed"
else notok "the [net] training defaults are taken and printed" "exit $rc" "$(grep -E '^recipe|^training' "$tmp/r.out")"; fi

# 2. the same options on the command line over a .cfg without defaults: the same training, step for step
# (the checkpoints hold different .cfg texts, so the figures printed are compared: every epoch's test loss
# and accuracy, per class, and the training loss every 2 steps)
"${fm[@]}" --model "$tmp/r.cfg" --progress-every 2 >"$tmp/r2.out" 2>&1
"${fm[@]}" --model "$tmp/plain.cfg" --batch-size 32 --optimizer nesterov --lr 0.05 --momentum 0.8 --weight-decay 0.001 \
  --schedule triangle --label-smoothing 0.2 --lookahead 0.9 --drop-last --epochs 5 --progress-every 2 >"$tmp/plain.out" 2>&1
figures() { grep -E "^epoch [0-9]+: test|^  |^epoch [0-9]+ step" "$1" | sed 's/ [0-9]* img\/s.*//'; }
if [[ $(figures "$tmp/r2.out" | wc -l) -gt 20 ]] && diff <(figures "$tmp/r2.out") <(figures "$tmp/plain.out") >/dev/null; then
  ok "the .cfg's defaults train what the same options train (every figure printed)"
else notok "the .cfg's defaults train what the same options train" "$(diff <(figures "$tmp/r2.out") <(figures "$tmp/plain.out") | head -5)"; fi

# 3. options given win, and are named
"${fm[@]}" --model "$tmp/r.cfg" --lr 0.02 --epochs 1 >"$tmp/o.out" 2>&1; rc=$?
if [[ $rc -eq 0 && $(recipe_line "$tmp/o.out") == "recipe: 1 epoch, nesterov lr 0.02 momentum 0.8"* ]] &&
   grep -q "; given instead: lr, epochs$" "$tmp/o.out"; then ok "options given override the defaults and are named"
else notok "options given override the defaults" "exit $rc" "$(grep -E '^recipe|^training def' "$tmp/o.out")"; fi

# 4. another optimizer: the .cfg's lr, momentum and weight decay are its optimizer's, so they are left out
"${fm[@]}" --model "$tmp/r.cfg" --optimizer adam --epochs 1 >"$tmp/a.out" 2>&1; rc=$?
if [[ $rc -eq 0 && $(recipe_line "$tmp/a.out") == "recipe: 1 epoch, adam lr 0.0003, triangle"* ]] &&
   grep -q "; not taken here: lr, momentum, weight-decay$" "$tmp/a.out"; then ok "--optimizer adam drops the .cfg's nesterov lr, momentum and decay"
else notok "--optimizer adam drops the .cfg's lr" "exit $rc" "$(grep -E '^recipe|^training def' "$tmp/a.out")"; fi

# 5. resume: the checkpoint's saved rate (given as an option then) stays above the .cfg's default
"${fm[@]}" --model "$tmp/r.cfg" --lr 0.02 --epochs 2 --steps 3 --checkpoint "$tmp/s.ckpt" --quiet >/dev/null 2>&1
"${fm[@]}" --resume "$tmp/s.ckpt" --epochs 2 >"$tmp/s.out" 2>&1; rc=$?
if [[ $rc -eq 0 && $(recipe_line "$tmp/s.out") == "recipe: 2 epochs, nesterov lr 0.02 momentum 0.8"* ]]; then
  ok "a resumed run keeps its checkpoint's lr over the .cfg's"
else notok "a resumed run keeps its checkpoint's lr" "exit $rc" "$(grep -E '^recipe|^training def|cltrain' "$tmp/s.out")"; fi

# 6. a data set's options from the .cfg (augment=, flip=: kept as text by the options) reach the data set
"$build/tools/make-cifar" "$tmp/cf" --train 64 --test 20 --seed 1 >/dev/null
printf '%s\n' '[net]' height=32 width=32 channels=3 classes=10 augment=basic translate=2 flip=alternate tta=flip \
  '[conv]' filters=4 size=3 '[globalmaxpool]' '[dense]' outputs=10 '[softmax]' >"$tmp/c.cfg"
"$bin" cifar10 --data "$tmp/cf" --model "$tmp/c.cfg" --epochs 2 --batch-size 32 --producers 0 >"$tmp/c.out" 2>&1; rc=$?
if [[ $rc -eq 0 ]] && grep -q "augmentation basic, reflect translation by up to 2, alternating flips" "$tmp/c.out" &&
   grep -q "test-time augmentation flip$" "$tmp/c.out" && [[ $(grep -c "^epoch [12]: test: 20 images" "$tmp/c.out") -eq 2 ]] &&
   [[ $(grep -c "with test-time augmentation" "$tmp/c.out") -eq 1 ]] && grep -q "^epoch 2 with test-time augmentation flip: test: 20 images" "$tmp/c.out"; then
  ok "augment=, translate=, flip=, tta= in [net] reach the CIFAR set (the views evaluated at the end, after the plain figure)"
else notok "augment=, translate=, flip=, tta= reach the CIFAR set" "exit $rc" "$(head -3 "$tmp/c.out")"; fi

# 6. bad values: one line naming the file, line and key, exit 2
bad() { # NAME LINE PATTERN
  printf '%s\n%s\n%s\n' "$net" "$2" "$layers" >"$tmp/bad.cfg"
  local err rc
  err=$("${fm[@]}" --model "$tmp/bad.cfg" 2>&1 >/dev/null); rc=$?
  if [[ $rc -eq 2 && $(printf '%s\n' "$err" | wc -l) -eq 1 && $err =~ $3 ]]; then ok "$1"; else notok "$1" "exit $rc: $err"; fi
}
bad "lr=abc in [net]: refused naming the line" "lr=abc" "bad.cfg:6: training default lr=abc in \[net\]: --lr abc: expected a number"
bad "lookahead=-1 in [net]: refused" "lookahead=-1" "bad.cfg:6: training default lookahead=-1 .*expected a number in 0..1"
bad "schedule=fast in [net]: refused" "schedule=fast" "bad.cfg:6: training default schedule=fast .*constant, step, cosine or triangle"
bad "a key twice: refused" "$(printf 'lr=1\nlr=2')" "bad.cfg:7: \[net\] lr= given twice \(first on line 6\)"
bad "an empty value: refused" "lr=" "bad.cfg:6: \[net\] lr= needs a value"
bad "drop_last=yes: refused" "drop_last=yes" "bad.cfg:6: training default drop_last=yes .*takes 1 \(on\) or 0 \(off\)"
bad "an unknown [net] key: refused" "learning_rate=1" "bad.cfg:6: .*\[net\] takes no key 'learning_rate'"
echo "1..$n"
