#!/usr/bin/env bash
# images.sh: `cltrain images`, `pack`, `predict` and `eval` as a user meets
# them, on a real font set from tools/make-font-dataset: training from the
# folder and from its shards gives the same weights; the font classes are
# learned; unreadable files are skipped and counted (or refused with
# --strict); bad input exits 2 with one line; VGG-16 builds and trains.
# Prints TAP.
set -u
here=$(cd "$(dirname "$0")/.." && pwd)
build=${CLTRAIN_BUILD:-build}
[[ $build == /* ]] || build=$here/$build
bin=$build/cltrain
fonts=$build/tools/make-font-dataset
diffbin=$build/tools/ckpt-diff
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
n=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
notok() { n=$((n + 1)); echo "not ok $n - $1"; shift; for l in "$@"; do echo "# $l"; done; }
expect_fail() { # NAME CODE PATTERN -- ARGS...: exit CODE, exactly one stderr line matching PATTERN
  local name=$1 code=$2 pat=$3; shift 4
  timeout 120 "$@" >"$tmp/out" 2>"$tmp/err"
  local rc=$? lines
  lines=$(wc -l <"$tmp/err")
  if [[ $rc -eq $code && $lines -eq 1 ]] && grep -qE -- "$pat" "$tmp/err"; then ok "$name"
  else notok "$name" "exit $rc (want $code), $lines stderr lines (want 1), pattern '$pat'" "$(head -5 "$tmp/err")"; fi
}

# a real font set: 4 fonts x 120 characters at 32x32
"$fonts" --chars 120 --size 32 "$tmp/fonts" >/dev/null || { echo "1..1"; notok "make-font-dataset renders the set"; exit 0; }

# 1. folder and shards train the same weights (same decode, same order, same split)
common=(--size 32 --channels 1 --epochs 1 --batch-size 32 --lr 2e-3 --producers 2 --quiet)
"$bin" pack "$tmp/fonts" "$tmp/shards" --size 32 --channels 1 >"$tmp/pack.out" 2>&1
"$bin" images "$tmp/fonts" "${common[@]}" --checkpoint "$tmp/folder.ckpt" >"$tmp/o1" 2>&1
rc1=$?
"$bin" images "$tmp/shards" --channels 1 --epochs 1 --batch-size 32 --lr 2e-3 --producers 2 --quiet --checkpoint "$tmp/shards.ckpt" >>"$tmp/o1" 2>&1
rc2=$?
d=$("$diffbin" "$tmp/folder.ckpt" "$tmp/shards.ckpt" 2>&1)
if [[ $rc1 -eq 0 && $rc2 -eq 0 && $d == "relative difference 0.000e+00, max abs difference 0.000e+00"* ]]; then
  ok "training from the folder and from its shards gives identical weights"
else notok "training from the folder and from its shards gives identical weights" "exits $rc1 $rc2: $d" "$(tail -5 "$tmp/o1")" "$(cat "$tmp/pack.out")"; fi

# 1b. --limit-train / --limit-test take a subset spread over the classes (not the first N files, all of
# one class), the same from the folder and its shards; a class with no test image reads "n/a (0 images)"
lim=(--channels 1 --epochs 1 --batch-size 16 --producers 2 --quiet --limit-train 64)
"$bin" images "$tmp/fonts" --size 32 "${lim[@]}" --checkpoint "$tmp/lim-folder.ckpt" >"$tmp/o1b" 2>&1
"$bin" images "$tmp/shards" "${lim[@]}" --checkpoint "$tmp/lim-shards.ckpt" >>"$tmp/o1b" 2>&1
d=$("$diffbin" "$tmp/lim-folder.ckpt" "$tmp/lim-shards.ckpt" 2>&1)
if [[ $d == "relative difference 0.000e+00, max abs difference 0.000e+00"* ]]; then
  ok "--limit-train 64: the folder and its shards train on the same subset (identical weights)"
else notok "--limit-train 64 from folder and shards" "$d" "$(tail -3 "$tmp/o1b")"; fi
"$bin" eval "$tmp/lim-folder.ckpt" --limit-test 8 >"$tmp/o1c" 2>&1
rows=$(sed -n '/^confusion matrix/,$p' "$tmp/o1c" | awk -F'|' 'NF == 2 { s = 0; n = split($2, v, " "); for (i = 1; i <= n; i++) s += v[i]; printf "%d ", s }')
if [[ $rows == "2 2 2 2 " ]]; then ok "eval --limit-test 8 on 4 classes: 2 test images of each class"
else notok "eval --limit-test 8 on 4 classes: 2 of each" "confusion row sums: $rows" "$(head -8 "$tmp/o1c")"; fi
"$bin" eval "$tmp/lim-folder.ckpt" --limit-test 2 >"$tmp/o1c" 2>&1
na=$(grep -o "n/a (0 images)" "$tmp/o1c" | wc -l)
if [[ $na -eq 2 ]]; then ok "eval --limit-test 2 on 4 classes: two classes read n/a (0 images), not 0.0%"
else notok "per-class accuracy of classes with no test image" "$na n/a" "$(head -4 "$tmp/o1c")"; fi

# 2. the fonts are learned (4 epochs of vgg-small at 32x32 on 432 images; rendered
# glyphs need no augmentation, and with the default crop and flip 4 epochs are too few).
# 48 images are held out, so one is 2.1 points: seeds 1-5 gave 79.2-87.5% (with
# im2col convolutions 79.2-85.4%), chance is 25%; the bar sits below that spread.
"$bin" images "$tmp/shards" --epochs 4 --batch-size 32 --lr 2e-3 --schedule cosine --augment none --checkpoint "$tmp/learned.ckpt" >"$tmp/o2" 2>&1
acc=$(grep -o "accuracy [0-9.]*%" "$tmp/o2" | tail -1 | tr -dc '0-9.')
if [[ -n $acc ]] && awk -v a="$acc" 'BEGIN { exit !(a >= 75) }'; then ok "vgg-small learns 4 fonts at 32x32: $acc% held out after 4 epochs"
else notok "vgg-small learns 4 fonts at 32x32 (want >= 75%)" "accuracy '$acc'" "$(tail -8 "$tmp/o2")"; fi

# 3. eval on the folder's held-out split and on the test shards agree
"$bin" eval "$tmp/learned.ckpt" >"$tmp/o3" 2>&1
rc=$?
"$bin" eval "$tmp/folder.ckpt" --data "$tmp/fonts" >"$tmp/o3b" 2>&1
rcb=$?
if [[ $rc -eq 0 && $rcb -eq 0 ]] && grep -q "test: 48 images" "$tmp/o3" && grep -q "confusion matrix" "$tmp/o3" &&
   grep -q "ukai" "$tmp/o3" && grep -q "test: 48 images" "$tmp/o3b"; then
  ok "eval: the held-out split of a folder and of shards, with class names and the confusion matrix"
else notok "eval on image checkpoints" "exits $rc $rcb" "$(head -12 "$tmp/o3")" "$(head -5 "$tmp/o3b")"; fi

# 4. predict: top-k with class names; the trained model names the right font
imgs=("$tmp/fonts/ukai/"*.png)
"$bin" predict "$tmp/learned.ckpt" "${imgs[0]}" "$tmp/fonts/wqy-zenhei/"U+4E00.png --top 2 >"$tmp/o4" 2>"$tmp/e4"
rc=$?
if [[ $rc -eq 0 && $(wc -l <"$tmp/o4") -eq 2 ]] && grep -qE "^.*ukai/U\+[0-9A-F]+\.png: [a-z-]+ [0-9.]+%, [a-z-]+ [0-9.]+%$" "$tmp/o4"; then
  ok "predict prints the top 2 classes with probabilities: $(head -1 "$tmp/o4" | sed 's|.*/||')"
else notok "predict prints the top 2 classes with probabilities" "exit $rc" "$(cat "$tmp/o4" "$tmp/e4")"; fi
right=0
for f in "$tmp/fonts/ukai/"U+4E0*.png "$tmp/fonts/wqy-zenhei/"U+4E0*.png; do
  want=$(basename "$(dirname "$f")")
  got=$("$bin" predict "$tmp/learned.ckpt" "$f" --top 1 2>/dev/null | sed 's/.*: \([a-z-]*\) .*/\1/')
  [[ $got == "$want" ]] && right=$((right + 1))
done
total=$(ls "$tmp/fonts/ukai/"U+4E0*.png "$tmp/fonts/wqy-zenhei/"U+4E0*.png | wc -l)
if [[ $right -ge $((total * 3 / 4)) ]]; then ok "predict names the right font for $right of $total images"
else notok "predict names the right font (want 3/4)" "$right of $total"; fi
printf 'not an image' >"$tmp/bad.png"
"$bin" predict "$tmp/learned.ckpt" "$tmp/bad.png" "${imgs[1]}" >"$tmp/o5" 2>"$tmp/e5"
rc=$?
if [[ $rc -eq 2 && $(wc -l <"$tmp/o5") -eq 1 ]] && grep -q "bad.png" "$tmp/e5"; then ok "predict: an unreadable image is named, the others still predicted, exit 2"
else notok "predict: an unreadable image" "exit $rc" "$(cat "$tmp/o5" "$tmp/e5")"; fi

# 5. unreadable files: skipped and counted, or refused with --strict
cp -r "$tmp/fonts" "$tmp/dirty"
head -c 90 "$tmp/fonts/uming/U+4E00.png" >"$tmp/dirty/uming/zz-truncated.png"
echo "hello" >"$tmp/dirty/ukai/zz-text.png"
"$bin" images "$tmp/dirty" --size 32 --channels 1 --epochs 1 --batch-size 32 --val-split 0 >"$tmp/o6" 2>"$tmp/e6"
rc=$?
if [[ $rc -eq 0 ]] && grep -q "skipping .*zz-text.png" "$tmp/e6" && grep -q "skipped 2 unreadable image files" "$tmp/o6"; then
  ok "unreadable files are reported and skipped, with the count at the end"
else notok "unreadable files are reported and skipped" "exit $rc" "$(cat "$tmp/e6")" "$(grep -i skip "$tmp/o6")"; fi
expect_fail "--strict: an unreadable file is an error" 2 "zz-text.png" -- "$bin" images "$tmp/dirty" --size 32 --steps 3 --strict

# 6. bad input: one line, exit 2
mkdir -p "$tmp/one/a" "$tmp/empty/a" "$tmp/empty/b"
cp "${imgs[0]}" "$tmp/one/a/"
cp "${imgs[0]}" "$tmp/empty/a/"
expect_fail "no such folder" 2 "nope: no such folder" -- "$bin" images "$tmp/nope"
expect_fail "a single class" 2 "class" -- "$bin" images "$tmp/one"
expect_fail "an empty class folder" 2 "b" -- "$bin" images "$tmp/empty"
expect_fail "--channels 2" 2 "channels 2" -- "$bin" images "$tmp/fonts" --channels 2
expect_fail "--size that the shards do not hold" 2 "shards hold 32x32x1" -- "$bin" images "$tmp/shards" --size 64
expect_fail "predict without images" 2 "needs a checkpoint and images" -- "$bin" predict "$tmp/learned.ckpt"
expect_fail "predict with a damaged checkpoint" 2 "checkpoint" -- "$bin" predict "$tmp/bad.png" "${imgs[0]}"

# 7. VGG-16 (13 conv + 3 dense) builds at 32x32 and trains a few steps
"$bin" images "$tmp/shards" --model vgg16 --batch-size 4 --steps 3 --val-split 0 >"$tmp/o7" 2>&1
rc=$?
if [[ $rc -eq 0 ]] && grep -q "model vgg16: input 32x32x1, 4 classes" "$tmp/o7" && [[ $(grep -c " conv " "$tmp/o7") -eq 13 ]] &&
   [[ $(grep -c " dense " "$tmp/o7") -eq 3 ]] && grep -q "trained 3 steps" "$tmp/o7"; then
  ok "vgg16 fits the data (32x32x1, 4 classes): 13 conv and 3 dense layers, trains"
else notok "vgg16 fits the data and trains" "exit $rc" "$(grep -E "model|trained|cltrain:" "$tmp/o7")"; fi
# 6. a whitening layer ([conv] whiten=N) on an image folder and on its shards, with the model's own
# normalisation ([net] mean= std=): computed from the first 100 training images, unaugmented
printf '[net]\nheight=32\nwidth=32\nchannels=1\nclasses=2\nmean=0.5\nstd=0.25\n[conv]\nfilters=8\nsize=2\nwhiten=100\nactivation=gelu\n[globalmaxpool]\n[dense]\noutputs=2\n[softmax]\n' >"$tmp/whiten.cfg"
for src in fonts shards; do
  timeout 120 "$bin" images "$tmp/$src" --size 32 --channels 1 --model "$tmp/whiten.cfg" --steps 2 --batch-size 16 --limit-test 20 >"$tmp/w.out" 2>&1; rc=$?
  if [[ $rc -eq 0 ]] && grep -q "^whitening: layer 0 from the first 100 training images (96100 2x2 patches)" "$tmp/w.out"; then ok "whiten=100 on the $src"
  else notok "whiten=100 on the $src" "exit $rc" "$(tail -3 "$tmp/w.out")"; fi
done
echo "1..$n"
