#!/usr/bin/env bash
# cifar.sh: `cltrain cifar10` end to end on a generated CIFAR-format set
# (tools/make-cifar.c: class-dependent shapes and colours with noise):
# with no --model it trains cifar-fast with its [net]'s recipe (and a set
# without training images is one line, exit 2); cifar-cnn with batch norm
# and augmentation must learn the set; eval of its
# checkpoint applies the same standardisation; resnet20 (residual layers)
# trains and resumes bit for bit, resnet20b (projection shortcuts) resumes
# bit for bit too; the fast recipe's augmentation options run; bad input
# exits 2. Prints TAP.
set -u
here=$(cd "$(dirname "$0")/.." && pwd)
case ${CLTRAIN_BUILD:-build} in /*) b=$CLTRAIN_BUILD ;; *) b=$here/${CLTRAIN_BUILD:-build} ;; esac
bin=$b/cltrain
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
n=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
notok() { n=$((n + 1)); echo "not ok $n - $1"; shift; for l in "$@"; do echo "# $l"; done; }
"$b/tools/make-cifar" "$tmp/cf" --train 400 --test 500 --seed 1 >/dev/null || notok "make-cifar"
# `cltrain cifar10` with no --model: cifar-fast and its [net]'s recipe (batch
# 1024 with whole batches, 10 epochs, Nesterov, ...), its whitening from the
# images training uses, and its test-time augmentation at the end; one step
timeout 300 "$bin" cifar10 --data "$tmp/cf" --limit-train 1024 --limit-test 40 --steps 1 >"$tmp/def" 2>&1; rc=$?
want=("model cifar-fast: input 32x32x3, 10 classes"
      "training defaults from cifar-fast's [net]: batch-size 1024, drop-last 1, epochs 10, optimizer nesterov, lr 1.5, momentum 0.85, weight-decay 0.0013304348, schedule triangle, label-smoothing 0.2, lookahead 0.95, augment basic, translate 2, flip alternate, tta flip-translate"
      "recipe: 10 epochs, nesterov lr 1.5 momentum 0.85 weight decay 0.00133043, triangle schedule, label smoothing 0.2, lookahead 0.95, test-time augmentation flip-translate"
      "training on 1024 images, batch 1024, 1 steps per epoch"
      "augmentation basic, reflect translation by up to 2, alternating flips"
      "whitening: layer 0 from the first 1024 training images (984064 2x2 patches; whiten=5000 asks for more: --limit-train leaves no more)"
      "epoch 1 with test-time augmentation flip-translate: test: 40 images")
miss=()
for w in "${want[@]}"; do grep -qF -- "$w" "$tmp/def" || miss+=("missing: $w"); done
if [[ $rc -eq 0 && ${#miss[@]} -eq 0 ]]; then ok "cltrain cifar10 with no --model: cifar-fast, its [net] recipe, whitening and TTA"
else notok "cltrain cifar10 with no --model: cifar-fast and its recipe" "exit $rc" "${miss[@]}" "$(tail -3 "$tmp/def")"; fi
err=$("$bin" cifar10 --data "$tmp/cf" --limit-train 1000 --steps 1 2>&1 >/dev/null); rc=$?
if [[ $rc -eq 2 && $(printf '%s\n' "$err" | wc -l) -eq 1 && $err == *"--drop-last (the model's drop_last=1): 1000 training samples make no whole batch of 1024; use a smaller --batch-size"* ]]; then
  ok "fewer training images than the default's batch of 1024: one line, exit 2 (${err#cltrain: })"
else notok "fewer training images than the default's batch: one line, exit 2" "exit $rc: $err"; fi
# cifar100's default is cifar-fast too, its class count fitted to --labels
# (100 fine or 20 coarse); eval of the checkpoint repeats training's last
# test line, the one with the [net]'s test-time augmentation (--tta none: the
# plain one)
"$b/tools/make-cifar" "$tmp/c100" --train 256 --test 40 --seed 4 --cifar100 >/dev/null
for lab in fine:100 coarse:20; do
  timeout 300 "$bin" cifar100 --data "$tmp/c100" --labels ${lab%%:*} --batch-size 64 --steps 2 --checkpoint "$tmp/c100.ckpt" \
    >"$tmp/c100.out" 2>&1; rc=$?
  t=$(sed -n 's/^epoch 1 with test-time augmentation flip-translate: \(test: .*\)/\1/p' "$tmp/c100.out")
  tp=$(sed -n 's/^epoch 1: \(test: .*\)/\1/p' "$tmp/c100.out")
  e=$(timeout 300 "$bin" eval "$tmp/c100.ckpt" 2>&1 | grep '^test:')
  ep=$(timeout 300 "$bin" eval "$tmp/c100.ckpt" --tta none 2>&1 | grep '^test:')
  if [[ $rc -eq 0 && -n $t && $t == "$e" && -n $tp && $tp == "$ep" ]] && grep -q "^model cifar-fast: input 32x32x3, ${lab#*:} classes" "$tmp/c100.out" &&
     grep -q "^training defaults from cifar-fast's \[net\]: .*epochs 10, optimizer nesterov" "$tmp/c100.out"; then
    ok "cltrain cifar100 --labels ${lab%%:*}: cifar-fast with ${lab#*:} classes and its recipe; eval agrees ($e; --tta none: $ep)"
  else notok "cltrain cifar100 --labels ${lab%%:*}: cifar-fast with ${lab#*:} classes" "exit $rc" "training: $t / $tp" "eval: $e / $ep" \
    "$(grep -E '^model|^cltrain' "$tmp/c100.out")"; fi
done
mkdir -p "$tmp/empty"; cp "$tmp"/cf/* "$tmp/empty/"; for i in 1 2 3 4 5; do : >"$tmp/empty/data_batch_$i.bin"; done
err=$("$bin" cifar10 --data "$tmp/empty" --steps 1 2>&1 >/dev/null); rc=$?
if [[ $rc -eq 2 && $(printf '%s\n' "$err" | wc -l) -eq 1 && $err == *data_batch_1.bin*empty* ]]; then
  ok "no training images for the default's whitening: one line, exit 2 (${err#cltrain: })"
else notok "no training images for the default's whitening: one line, exit 2" "exit $rc: $err"; fi
timeout 300 "$bin" cifar10 --data "$tmp/cf" --model cifar-cnn --epochs 2 --batch-size 64 --augment basic --checkpoint "$tmp/c.ckpt" >"$tmp/out" 2>&1
rc=$?
acc=$(sed -n 's/^epoch 2: test: .*accuracy \([0-9.]*\)%.*/\1/p' "$tmp/out")
if [[ $rc -eq 0 && -n $acc ]] && awk -v a="$acc" 'BEGIN { exit !(a >= 80) }'; then ok "cifar-cnn learns the generated set: $acc% after 2 epochs (want >= 80%)"
else notok "cifar-cnn learns the generated set" "exit $rc, accuracy '$acc'" "$(tail -3 "$tmp/out")"; fi
ev=$("$bin" eval "$tmp/c.ckpt" 2>&1 | sed -n 's/^test: .*accuracy \([0-9.]*\)%.*/\1/p')
if [[ -n $ev && $ev == "$acc" ]]; then ok "eval of the checkpoint gives the same test accuracy ($ev%)"
else notok "eval of the checkpoint" "eval '$ev' vs training '$acc'"; fi
# resnet20 (residual [shortcut] layers): the loss falls within 12 steps, and
# 3 steps + resume for 3 = 6 steps straight, byte for byte; the resume also
# for resnet20b (1x1 projection shortcuts, whose weights and Adam moments the
# checkpoint carries too)
rn=("$bin" cifar10 --data "$tmp/cf" --batch-size 32 --limit-test 50 --lr 1e-3 --producers 0 --augment none)
timeout 300 "${rn[@]}" --model resnet20 --steps 12 --progress-every 1 >"$tmp/rn" 2>&1; rc=$?
losses=$(sed -n 's/^epoch 1 step [0-9]*\/[0-9]* loss \([0-9.]*\) .*/\1/p' "$tmp/rn" | tr '\n' ' ')
if [[ $rc -eq 0 ]] && echo "$losses" | awk '{ if (NF < 12) exit 1; f = ($1 + $2 + $3) / 3; l = ($(NF-2) + $(NF-1) + $NF) / 3; exit !(l < 0.9 * f) }'; then
  ok "resnet20 trains: loss per step $losses"
else notok "resnet20 trains: the mean loss of the last 3 of 12 steps under 0.9x the first 3" "exit $rc, losses '$losses'" "$(tail -3 "$tmp/rn")"; fi
for model in resnet20 resnet20b; do
  rm -f "$tmp/r1.ckpt" "$tmp/r2.ckpt"
  timeout 300 "${rn[@]}" --model $model --steps 6 --quiet --checkpoint "$tmp/r1.ckpt" >/dev/null 2>&1
  timeout 300 "${rn[@]}" --model $model --steps 3 --quiet --checkpoint "$tmp/r2.ckpt" >/dev/null 2>&1
  timeout 300 "${rn[@]}" --model $model --steps 6 --quiet --resume "$tmp/r2.ckpt" --checkpoint "$tmp/r2.ckpt" >/dev/null 2>&1
  if [[ -s $tmp/r1.ckpt ]] && cmp -s "$tmp/r1.ckpt" "$tmp/r2.ckpt"; then ok "$model: 3 steps + resume for 3 = 6 steps, byte for byte"
  else notok "$model: 3 steps + resume for 3 = 6 steps, byte for byte" "$("$b/tools/ckpt-diff" "$tmp/r1.ckpt" "$tmp/r2.ckpt" 2>&1)"; fi
done
err=$("$bin" cifar10 --data "$tmp/cf" --augment sideways 2>&1); rc=$?
if [[ $rc -eq 2 && $err == *sideways* ]]; then ok "--augment unknown: exit 2"; else notok "--augment unknown" "exit $rc: $err"; fi
# the fast recipe's options: each bad value one line naming the option, exit 2
for bad in "--translate 32:--translate 32" "--translate x:--translate" "--flip sometimes:--flip sometimes" \
           "--tta mirror:--tta mirror"; do
  err=$("$bin" cifar10 --data "$tmp/cf" ${bad%%:*} --steps 1 2>&1); rc=$?
  if [[ $rc -eq 2 && $err == *"${bad#*:}"* && $(printf '%s\n' "$err" | wc -l) -eq 1 ]]; then ok "${bad%%:*}: exit 2 naming it"
  else notok "${bad%%:*}" "exit $rc: $err"; fi
done
out=$(timeout 300 "$bin" cifar10 --data "$tmp/cf" --model cifar-cnn --augment basic --translate 2 --flip alternate --tta flip-translate \
      --steps 3 --batch-size 16 --limit-test 40 --producers 0 2>&1); rc=$?
if [[ $rc -eq 0 && $out == *"test:"* ]]; then ok "--translate 2 --flip alternate --tta flip-translate train and evaluate"
else notok "--translate/--flip/--tta flip-translate" "exit $rc: $(printf '%s\n' "$out" | tail -3)"; fi
# the fast model's layer keys (tests/fixtures/whiten-small.cfg): the whitening
# layer is computed at the start from the set's first 300 images, which are
# the ones training uses ("whitening:" line; with fewer, --limit-train's
# first N, as the default's case above shows), the model learns, and
# 1 epoch + resume for 1 = 2 epochs straight byte for byte (the bias of the
# whitening layer stops at epoch 1: the resumed run freezes it too, and does
# not recompute the whitening)
wm=("$bin" cifar10 --data "$tmp/cf" --model "$here/tests/fixtures/whiten-small.cfg" --batch-size 50 --limit-train 300
    --limit-test 100 --optimizer nesterov --momentum 0.85 --lr 0.2 --weight-decay 5e-3 --augment none --producers 0)
timeout 300 "${wm[@]}" --epochs 2 --checkpoint "$tmp/w1.ckpt" >"$tmp/w1" 2>&1; rc=$?
acc=$(sed -n 's/^epoch 2: test: .*accuracy \([0-9.]*\)%.*/\1/p' "$tmp/w1")
if [[ $rc -eq 0 ]] && grep -q "^whitening: layer 0 from the first 300 training images (288300 2x2 patches)$" "$tmp/w1" &&
   awk -v a="$acc" 'BEGIN { exit !(a >= 25) }'; then ok "whitening, dirac, frozen-scale batch norm, scaled head: $acc% after 2 epochs (want >= 25%)"
else notok "the fast model's layer keys train" "exit $rc, accuracy '$acc'" "$(tail -3 "$tmp/w1")"; fi
timeout 300 "${wm[@]}" --epochs 1 --quiet --checkpoint "$tmp/w2.ckpt" >/dev/null 2>&1
timeout 300 "${wm[@]}" --epochs 2 --resume "$tmp/w2.ckpt" --checkpoint "$tmp/w2.ckpt" >"$tmp/w2" 2>&1
if [[ -s $tmp/w1.ckpt ]] && cmp -s "$tmp/w1.ckpt" "$tmp/w2.ckpt" && ! grep -q "^whitening" "$tmp/w2"; then
  ok "whiten-small: 1 epoch + resume for 1 = 2 epochs, byte for byte, no second whitening"
else notok "whiten-small: 1 epoch + resume for 1 = 2 epochs, byte for byte" "$("$b/tools/ckpt-diff" "$tmp/w1.ckpt" "$tmp/w2.ckpt" 2>&1)"; fi
head -c 5000 "$tmp/cf/data_batch_2.bin" >"$tmp/cut.bin"; mkdir -p "$tmp/bad"; cp "$tmp"/cf/* "$tmp/bad/"; cp "$tmp/cut.bin" "$tmp/bad/data_batch_2.bin"
err=$("$bin" cifar10 --data "$tmp/bad" 2>&1); rc=$?
if [[ $rc -eq 2 && $err == *data_batch_2.bin* && $(printf '%s\n' "$err" | wc -l) -eq 1 ]]; then ok "a cut batch file: exit 2 naming it"
else notok "a cut batch file" "exit $rc: $err"; fi
err=$(CLTRAIN_CIFAR_MIRROR=http://127.0.0.1:9/ "$bin" cifar10 --data "$tmp/none" 2>&1); rc=$?
if [[ $rc -eq 2 && $err == *"--data"* ]]; then ok "CIFAR missing and offline: exit 2 saying where to put it"
else notok "CIFAR offline" "exit $rc: $err"; fi
echo "1..$n"
