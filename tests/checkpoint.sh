#!/usr/bin/env bash
# checkpoint.sh: checkpoints, resume, signals and the NaN guard, through the
# command line. Bit-exact resume (2 epochs straight == 1 epoch + resume for 1),
# damaged files rejected with exit 2, kill -9 at 20 random moments always
# leaves a checkpoint that loads and resumes, SIGTERM saves and exits 143, a
# diverging run stops with exit 1 and the last good checkpoint untouched.
# Every optimizer resumes bit for bit with its hyper-parameters taken from the
# checkpoint; files of the previous format (tests/fixtures/ckpt-v2-*.ckpt, made
# by cltrain 546cfe0) load and resume bit for bit; a valid CRC over a field out
# of range is refused with one line, exit 2.
# Prints TAP. Uses Fashion-MNIST (Debian's dataset-fashion-mnist).
set -u
here=$(cd "$(dirname "$0")/.." && pwd)
case ${CLTRAIN_BUILD:-build} in /*) bin=$CLTRAIN_BUILD/cltrain ;; *) bin=$here/${CLTRAIN_BUILD:-build}/cltrain ;; esac
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
n=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
notok() { n=$((n + 1)); echo "not ok $n - $1"; shift; for l in "$@"; do echo "# $l"; done; }
check() { local name=$1; shift; if "$@"; then ok "$name"; else notok "$name" "failed: $*"; fi; }
# a small, fast setup: mlp, 640 images per epoch, batch 64 (10 steps per epoch)
train=("$bin" fashion-mnist --model mlp --limit-train 640 --limit-test 500 --batch-size 64 --quiet)

# --- bit-exact resume ---
"${train[@]}" --epochs 2 --checkpoint "$tmp/straight.ckpt"; rc1=$?
"${train[@]}" --epochs 1 --checkpoint "$tmp/resumed.ckpt"; rc2=$?
"${train[@]}" --epochs 2 --resume "$tmp/resumed.ckpt" --checkpoint "$tmp/resumed.ckpt"; rc3=$?
check "train 2 epochs straight, and 1 epoch then resume for 1" \
  test $rc1 -eq 0 -a $rc2 -eq 0 -a $rc3 -eq 0 -a -s "$tmp/straight.ckpt"
check "resumed weights bit-identical" cmp -s "$tmp/straight.ckpt" "$tmp/resumed.ckpt"
# the same with mnist-cnn and the pipeline on (2 producers), stopping mid-epoch
cnn=("$bin" fashion-mnist --limit-train 512 --batch-size 64 --quiet --producers 2)
"${cnn[@]}" --epochs 2 --checkpoint "$tmp/c1.ckpt"
"${cnn[@]}" --epochs 2 --steps 5 --checkpoint "$tmp/c2.ckpt"
"${cnn[@]}" --epochs 2 --resume "$tmp/c2.ckpt" --checkpoint "$tmp/c2.ckpt" --producers 0
check "mnist-cnn: stop at step 5, resume with other producers: bit-identical" cmp -s "$tmp/c1.ckpt" "$tmp/c2.ckpt"

# batch norm: its running averages travel in the checkpoint too
bn=("$bin" fashion-mnist --model mnist-cnn-bn --limit-train 512 --batch-size 64 --quiet)
"${bn[@]}" --epochs 2 --checkpoint "$tmp/b1.ckpt"
"${bn[@]}" --epochs 2 --steps 3 --checkpoint "$tmp/b2.ckpt"
"${bn[@]}" --epochs 2 --resume "$tmp/b2.ckpt" --checkpoint "$tmp/b2.ckpt"
check "mnist-cnn-bn: stop at step 3, resume: bit-identical (running averages included)" cmp -s "$tmp/b1.ckpt" "$tmp/b2.ckpt"

# the lookahead (moving average of the weights, batch-norm statistics included): 5 epochs of 8 steps, the
# average from the 4th epoch (steps 25, 30, 35, 40); the copy saved at step 33 (mid-epoch, an average
# kept) resumed without --lookahead (the checkpoint carries the rate and the average): bit-identical.
# (Not --steps 33: that makes a run of 33 steps, whose average decays by step/33.)
la=("$bin" fashion-mnist --model mnist-cnn-bn --limit-train 256 --batch-size 32 --quiet --optimizer nesterov --lr 0.05)
"${la[@]}" --epochs 5 --lookahead 0.95 --checkpoint "$tmp/la1.ckpt" --checkpoint-every 11 --keep 4
"${la[@]}" --epochs 5 --resume "$tmp/la1.ckpt.33" --checkpoint "$tmp/la2.ckpt"
check "lookahead: resumed from step 33: bit-identical" cmp -s "$tmp/la1.ckpt" "$tmp/la2.ckpt"
"${la[@]}" --epochs 5 --checkpoint "$tmp/la0.ckpt"
check "lookahead: the weights differ from a run without it" bash -c "! cmp -s '$tmp/la0.ckpt' '$tmp/la1.ckpt'"
err=$("${la[@]}" --epochs 6 --resume "$tmp/la1.ckpt" --lookahead 0 2>&1); rc=$?
if [[ $rc -eq 2 && $err == *"lookahead average"* ]]; then ok "resume with --lookahead 0 over a kept average is refused"; else notok "resume --lookahead 0" "exit $rc: $err"; fi

# --drop-last: 200 images at batch 64 make 3 whole batches per epoch; the copy at step 4 resumed without
# the option (the checkpoint fixes it) is bit-identical; --drop-last over a run without it is refused
dl=("$bin" fashion-mnist --model mlp --limit-train 200 --limit-test 100 --batch-size 64 --quiet)
"${dl[@]}" --drop-last --epochs 3 --checkpoint "$tmp/dl1.ckpt" --checkpoint-every 4 --keep 10
"${dl[@]}" --epochs 3 --resume "$tmp/dl1.ckpt.4" --checkpoint "$tmp/dl2.ckpt"
check "--drop-last: resumed from step 4 without the option: bit-identical" cmp -s "$tmp/dl1.ckpt" "$tmp/dl2.ckpt"
check "--drop-last: 3 steps per epoch (copies at steps 3, 6, 9, no 12th step)" test -s "$tmp/dl1.ckpt.3" -a -s "$tmp/dl1.ckpt.9" -a ! -e "$tmp/dl1.ckpt.12"
"${dl[@]}" --epochs 1 --checkpoint "$tmp/dl0.ckpt"
err=$("${dl[@]}" --epochs 2 --drop-last --resume "$tmp/dl0.ckpt" 2>&1); rc=$?
if [[ $rc -eq 2 && $err == *"--drop-last: "*"trained with every batch"* ]]; then ok "--drop-last over a checkpoint without it is refused"; else notok "--drop-last on resume" "exit $rc: $err"; fi

# every optimizer: the resumed run gets no optimizer flags, the checkpoint carries them
for opt in sgd adamw nesterov; do
  o=(--optimizer $opt --weight-decay 1e-3 --momentum 0.8 --lr 0.02)
  "${train[@]}" "${o[@]}" --epochs 2 --checkpoint "$tmp/$opt-1.ckpt"
  "${train[@]}" "${o[@]}" --epochs 2 --steps 13 --checkpoint "$tmp/$opt-2.ckpt"
  "${train[@]}" --epochs 2 --resume "$tmp/$opt-2.ckpt" --checkpoint "$tmp/$opt-2.ckpt"
  check "$opt: stop at step 13, resume without optimizer flags: bit-identical" cmp -s "$tmp/$opt-1.ckpt" "$tmp/$opt-2.ckpt"
done

# files of the previous format (version 2, written by cltrain 546cfe0 at step 2 of 4 of
# tests/fixtures/tiny.cfg): they evaluate, and resume to the weights of a straight run
fx=$here/tests/fixtures
tiny=("$bin" fashion-mnist --limit-train 64 --batch-size 16 --producers 0 --quiet --limit-test 50)
for opt in adam sgd; do
  (cd "$here" && "${tiny[@]}" --model tests/fixtures/tiny.cfg --optimizer $opt --steps 4 --checkpoint "$tmp/v2-$opt-straight.ckpt")
  (cd "$here" && "${tiny[@]}" --resume "$fx/ckpt-v2-$opt.ckpt" --steps 4 --checkpoint "$tmp/v2-$opt-resumed.ckpt")
  check "format 2 ($opt, made by cltrain 546cfe0) resumes bit for bit" cmp -s "$tmp/v2-$opt-straight.ckpt" "$tmp/v2-$opt-resumed.ckpt"
done
check "format 2 checkpoint evaluates" "$bin" eval "$fx/ckpt-v2-adam.ckpt" --limit-test 50

# --- damage ---
expect2() { # NAME PATTERN FILE
  local err
  err=$("$bin" eval "$3" --limit-test 10 2>&1 >/dev/null); local rc=$?
  if [[ $rc -eq 2 && $(printf '%s\n' "$err" | wc -l) -eq 1 && $err == *$2* ]]; then ok "$1"; else notok "$1" "exit $rc: $err"; fi
}
cp "$tmp/straight.ckpt" "$tmp/flip.ckpt"
printf '\x55' | dd of="$tmp/flip.ckpt" bs=1 seek=5000 conv=notrunc 2>/dev/null
expect2 "a flipped byte is detected" "CRC" "$tmp/flip.ckpt"
head -c 100000 "$tmp/straight.ckpt" >"$tmp/trunc.ckpt"
expect2 "a truncated checkpoint is rejected" "truncated" "$tmp/trunc.ckpt"
cp "$tmp/straight.ckpt" "$tmp/newer.ckpt"
printf '\x09' | dd of="$tmp/newer.ckpt" bs=1 seek=8 conv=notrunc 2>/dev/null
expect2 "a newer format version is rejected" "newer" "$tmp/newer.ckpt"
echo "not a checkpoint at all" >"$tmp/text.ckpt"
expect2 "a text file is rejected" "checkpoint" "$tmp/text.ckpt"
# a field out of range under a valid CRC (batch 100000; optimizer 7): one line, exit 2
patch_field() { # IN OUT OFFSET VALUE: write an int32 at OFFSET and fix the CRC
  python3 - "$@" <<'PY'
import struct, sys, zlib
b = bytearray(open(sys.argv[1], 'rb').read())
struct.pack_into('<i', b, int(sys.argv[3]), int(sys.argv[4]))
struct.pack_into('<I', b, len(b) - 4, zlib.crc32(bytes(b[:-4])))
open(sys.argv[2], 'wb').write(b)
PY
}
# version 3 header after magic, version, size: u64 seed, i64 next batch, then i32 batch, n_train, ranks, kind
patch_field "$tmp/straight.ckpt" "$tmp/batch.ckpt" 32 100000
patch_field "$tmp/straight.ckpt" "$tmp/kind.ckpt" 44 7
expect2 "a valid CRC over batch 100000 is refused" "field batch is 100000" "$tmp/batch.ckpt"
expect2 "a valid CRC over optimizer kind 7 is refused" "field optimizer is 7" "$tmp/kind.ckpt"
err=$("${train[@]}" --epochs 3 --resume "$tmp/kind.ckpt" 2>&1 >/dev/null); rc=$?
if [[ $rc -eq 2 && $err == *"field optimizer is 7"* ]]; then ok "resume refuses optimizer kind 7"; else notok "resume refuses kind 7" "exit $rc: $err"; fi
err=$("${train[@]}" --epochs 3 --resume "$tmp/straight.ckpt" --model mnist-cnn 2>&1); rc=$?
if [[ $rc -eq 2 && $err == *"holds model mlp"* ]]; then ok "resume with another --model is rejected"; else notok "resume with another --model" "exit $rc: $err"; fi
err=$("${train[@]}" --epochs 2 --resume "$tmp/straight.ckpt" 2>&1); rc=$?
if [[ $rc -eq 2 && $err == *"already trained"* ]]; then ok "resume with nothing left to do says so"; else notok "resume: nothing left" "exit $rc: $err"; fi

# --- resume checks the data set, and every option the checkpoint fixes ---
# refused: exit 2, one line matching PATTERN
refused() { # NAME PATTERN ARGS...
  local name=$1 pat=$2; shift 2
  local err rc
  err=$("$@" 2>&1 >/dev/null); rc=$?
  if [[ $rc -eq 2 && $(printf '%s\n' "$err" | wc -l) -eq 1 && $err =~ $pat ]]; then ok "$name"; else notok "$name" "exit $rc: $err"; fi
}
fm=/usr/share/datasets/fashion-mnist
mkdir -p "$tmp/imgs" "$tmp/fm-elsewhere"
for c in 0 1 2 3 4 5 6 7 8 9; do
  mkdir -p "$tmp/imgs/c$c"
  for f in rgb.bmp rgb.jpg grey.jpg red.gif; do cp "$here/tests/fuzz/corpus/image/$f" "$tmp/imgs/c$c/"; done
done
for f in "$fm"/*; do ln -s "$f" "$tmp/fm-elsewhere/"; done
refused "resume a Fashion-MNIST checkpoint on an image folder: refused, naming both" \
  "straight.ckpt: trained on fashion-mnist \($fm\), this run reads images \($tmp/imgs\)" \
  "$bin" images "$tmp/imgs" --size 28 --channels 1 --resume "$tmp/straight.ckpt" --epochs 4 --quiet
refused "resume on the same kind of data in another folder: refused, naming both" \
  "trained on fashion-mnist at $fm, this run reads $tmp/fm-elsewhere" \
  "${train[@]}" --epochs 3 --resume "$tmp/straight.ckpt" --data "$tmp/fm-elsewhere"
refused "resume with another --batch-size: refused, it comes from the checkpoint" \
  "--batch-size 32: .*straight.ckpt was trained with --batch-size 64, and a resumed run keeps it" \
  "$bin" fashion-mnist --model mlp --limit-train 640 --limit-test 500 --batch-size 32 --quiet --epochs 3 --resume "$tmp/straight.ckpt"
refused "resume with another --limit-train: refused, it comes from the checkpoint" \
  "--limit-train 320: .*trained with 640 samples per epoch, and a resumed run keeps it" \
  "${train[@]}" --limit-train 320 --epochs 3 --resume "$tmp/straight.ckpt"
refused "resume with another --seed: refused" "--seed 9: .*trained with --seed 1" \
  "${train[@]}" --seed 9 --epochs 3 --resume "$tmp/straight.ckpt"
refused "resume with another --optimizer: refused" "--optimizer sgd: .*trained with --optimizer adam" \
  "${train[@]}" --optimizer sgd --epochs 3 --resume "$tmp/straight.ckpt"
out=$("${train[@]}" --seed 1 --optimizer adam --epochs 3 --resume "$tmp/straight.ckpt" --checkpoint "$tmp/same.ckpt" 2>&1); rc=$?
if [[ $rc -eq 0 ]]; then ok "resume with the checkpoint's own --seed, --batch-size, --limit-train and --optimizer: accepted"
else notok "resume with the same values" "exit $rc: $out"; fi
out=$("$bin" fashion-mnist --model mlp --limit-train 640 --limit-test 500 --batch-size 64 --epochs 3 --resume "$tmp/straight.ckpt" 2>&1)
if [[ $out == *"from the checkpoint: seed 1, batch 64, 640 samples per epoch, the adam optimizer's state"* ]]; then
  ok "the resume line says what came from the checkpoint"
else notok "the resume line says what came from the checkpoint" "$(grep resum <<<"$out")"; fi
img=("$bin" images "$tmp/imgs" --size 8 --model mlp --batch-size 8 --quiet)
# the held-out split and the sample order of an image set depend on the seed: a resume without --seed takes the
# checkpoint's before the set opens, so 2 epochs straight and 1 + resume for 1 agree bit for bit with --seed 5
"${img[@]}" --val-split 0.25 --seed 5 --epochs 2 --checkpoint "$tmp/img5-straight.ckpt" >/dev/null 2>&1
"${img[@]}" --val-split 0.25 --seed 5 --epochs 1 --checkpoint "$tmp/img5.ckpt" >/dev/null 2>&1
"${img[@]}" --val-split 0.25 --epochs 2 --resume "$tmp/img5.ckpt" --checkpoint "$tmp/img5.ckpt" >/dev/null 2>&1
check "images --seed 5: 2 epochs straight, and 1 then resume without --seed: bit-identical" \
  cmp -s "$tmp/img5-straight.ckpt" "$tmp/img5.ckpt"
"${img[@]}" --val-split 0.25 --epochs 1 --checkpoint "$tmp/img.ckpt" >/dev/null 2>&1
refused "resume images with another --val-split: refused" "img.ckpt: trained with 0.25 of each class held out for testing, this run 0.1" \
  "${img[@]}" --epochs 2 --resume "$tmp/img.ckpt"
rm -r "$tmp/imgs/c9"
refused "resume images after a class folder went: refused" "img.ckpt: trained on 10 classes of $tmp/imgs, this run's data has 9" \
  "${img[@]}" --val-split 0.25 --epochs 2 --resume "$tmp/img.ckpt"
mv "$tmp/imgs/c8" "$tmp/imgs/c8-renamed"
mkdir "$tmp/imgs/c9" && cp "$tmp/imgs/c0/"* "$tmp/imgs/c9/"
refused "resume images whose class folders were renamed: refused" "img.ckpt: class 8 is 'c8' in the checkpoint, 'c8-renamed'" \
  "${img[@]}" --val-split 0.25 --epochs 2 --resume "$tmp/img.ckpt"

# --- kill -9 at random moments ---
bad=0
ck=$tmp/kill.ckpt
RANDOM=7
for i in $(seq 1 20); do
  if [[ -f $ck ]]; then args=(--resume "$ck"); else args=(); fi
  "${train[@]}" --epochs 1000 --checkpoint "$ck" --checkpoint-every 1 "${args[@]}" >/dev/null 2>&1 &
  pid=$!
  # the first run lives until it has written a checkpoint (start-up under a
  # sanitizer on a busy machine can outlast every random moment below)
  if (( i == 1 )); then for w in $(seq 1 600); do [[ -f $ck ]] && break; sleep 0.2; done; fi
  sleep "0.$((RANDOM % 9 + 1))$((RANDOM % 10))"
  kill -9 $pid 2>/dev/null; wait $pid 2>/dev/null
  if [[ -f $ck ]] && ! "$bin" eval "$ck" --limit-test 10 >/dev/null 2>&1; then bad=$((bad + 1)); echo "# kill $i: checkpoint does not load"; fi
  ls "$tmp"/kill.ckpt.tmp.* >/dev/null 2>&1 && rm -f "$tmp"/kill.ckpt.tmp.*   # a torn temporary is expected, never the real file
done
steps=$("$bin" eval "$ck" --limit-test 10 2>/dev/null | sed -n 's/.*trained \([0-9]*\) steps.*/\1/p')
if [[ $bad -eq 0 && -n $steps && $steps -gt 0 ]]; then ok "kill -9 x20: every checkpoint loads; training progressed to step $steps"
else notok "kill -9 x20" "$bad bad checkpoints, steps '$steps'"; fi

# --- SIGTERM saves and exits 143 ---
rm -f "$tmp/term.ckpt"
"${train[@]}" --epochs 1000 --checkpoint "$tmp/term.ckpt" >/dev/null 2>"$tmp/term.err" &
pid=$!
# the signal goes in once training is under way (its first epoch's checkpoint is
# there, so the handlers are installed), not after a fixed sleep that a loaded
# machine may not reach the handlers in
for w in $(seq 1 600); do [[ -f $tmp/term.ckpt ]] && break; sleep 0.2; done
sleep 0.2
kill -TERM $pid; wait $pid; rc=$?
if [[ $rc -eq 143 ]] && grep -q "SIGTERM" "$tmp/term.err" && "$bin" eval "$tmp/term.ckpt" --limit-test 10 >/dev/null 2>&1; then
  ok "SIGTERM finishes the step, saves, exits 143"
else notok "SIGTERM" "exit $rc: $(cat "$tmp/term.err")"; fi

# --- NaN guard: Adam at lr 1e9 sends mnist-cnn's logits past float range within two steps ---
"${cnn[@]}" --epochs 1 --checkpoint "$tmp/nan.ckpt" >/dev/null 2>&1
cp "$tmp/nan.ckpt" "$tmp/nan.before"
err=$("${cnn[@]}" --epochs 3 --resume "$tmp/nan.ckpt" --checkpoint "$tmp/nan.ckpt" --lr 1e9 2>&1); rc=$?
if [[ $rc -eq 1 && $err == *"NaN or infinite"* && $err == *"lower --lr"* ]] && cmp -s "$tmp/nan.ckpt" "$tmp/nan.before"; then
  ok "NaN guard: absurd --lr stops with exit 1, names where, last checkpoint untouched"
else notok "NaN guard" "exit $rc: $err"; fi
"${cnn[@]}" --epochs 1 --lr 1e9 --on-nan skip >"$tmp/skip.out" 2>&1; rc=$?
out=$(grep -c "step skipped" "$tmp/skip.out")
if [[ $rc -eq 0 && $out -gt 0 ]]; then ok "--on-nan skip skips bad steps ($out skipped) and finishes"; else notok "--on-nan skip" "exit $rc, $out skipped"; fi
# --- eval --confusion-png writes a PNG ---
"$bin" eval "$tmp/straight.ckpt" --limit-test 200 --confusion-png "$tmp/conf.png" >/dev/null 2>&1; rc=$?
if [[ $rc -eq 0 && $(head -c 8 "$tmp/conf.png" | xxd -p) == 89504e470d0a1a0a ]]; then ok "eval --confusion-png writes a PNG"
else notok "eval --confusion-png" "exit $rc"; fi

# --- --logdir: metrics.csv and an event file with every tag ---
"${train[@]}" --epochs 1 --logdir "$tmp/logs" --eval-every 5 >/dev/null 2>&1
tags=$(tail -n +2 "$tmp/logs/metrics.csv" | cut -d, -f2 | sort -u | tr '\n' ' ')
if [[ $tags == *"data_wait images_per_s lr test/accuracy test/loss train/accuracy train/loss"* ]] && ls "$tmp"/logs/events.out.tfevents.* >/dev/null 2>&1; then
  ok "--logdir writes metrics.csv and an event file ($tags)"
else notok "--logdir" "tags: $tags"; fi
echo "1..$n"
