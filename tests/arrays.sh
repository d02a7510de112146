#!/usr/bin/env bash
# arrays.sh: `cltrain arrays` on NumPy files written by NumPy itself
# (tools/arrays_write.py, Debian's python3-numpy): 256 + 64 Fashion-MNIST
# images as .npz (stored and compressed) and .npy files, uint8 and float32
# (also big-endian), NHW, NHWC and NCHW, labels of every integer width, keys
# named by --x/--y: each trains the same weights as the same images in IDX
# form (`cltrain fashion-mnist --data`). Three-channel arrays in NHWC and
# NCHW train the same weights as each other, and `cltrain pack` makes the
# same shards of them; eval reads the checkpoint's arrays back; --val-split holds out a
# share of each class; a compressed member larger than memory is refused;
# damaged files give one line naming file and key, exit 2. Needs
# python3-numpy (skipped without it, except under CI=true). Prints TAP.
set -u
here=$(cd "$(dirname "$0")/.." && pwd)
case ${CLTRAIN_BUILD:-build} in /*) b=$CLTRAIN_BUILD ;; *) b=$here/${CLTRAIN_BUILD:-build} ;; esac
bin=$b/cltrain
py=${CLTRAIN_NUMPY_PYTHON:-/usr/bin/python3}
w=$here/tools/arrays_write.py
fm=/usr/share/datasets/fashion-mnist
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
n=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
notok() { n=$((n + 1)); echo "not ok $n - $1"; shift; for l in "$@"; do echo "# $l"; done; }
if ! "$py" -c "import numpy" 2>/dev/null; then
  why="numpy is not importable by $py: install python3-numpy (tools/setup-deps.sh does)"
  if [[ ${CI:-} == true ]]; then notok "NumPy arrays" "$why (required under CI=true)"
  else echo "ok 1 - NumPy arrays # SKIP $why"; fi
  echo "1..1"
  exit 0
fi
"$py" "$w" mnist "$tmp" "$fm/train-images-idx3-ubyte.gz" "$fm/train-labels-idx1-ubyte.gz" 256 64 >"$tmp/list"
common=(--steps 3 --batch-size 16 --seed 7 --quiet)
same() { # same A.ckpt B.ckpt: identical parameters
  local d
  d=$("$b/tools/ckpt-diff" "$1" "$2" 2>&1)
  [[ $d == "relative difference 0.000e+00, max abs difference 0.000e+00"* ]] || { echo "$d"; return 1; }
}
"$bin" fashion-mnist --data "$tmp/idx" "${common[@]}" --checkpoint "$tmp/idx.ckpt" >"$tmp/idx.out" 2>&1 ||
  notok "the IDX reference trains" "$(tail -2 "$tmp/idx.out")"
while read -r name args; do
  # shellcheck disable=SC2086
  if ! "$bin" arrays $args "${common[@]}" --checkpoint "$tmp/$name.ckpt" >"$tmp/$name.out" 2>&1; then
    notok "$name: trains" "$(tail -2 "$tmp/$name.out")"; continue
  fi
  case $name in rgb-nhwc) ok "rgb-nhwc: trains"; continue ;; rgb-*) ref=$tmp/rgb-nhwc.ckpt ;; *) ref=$tmp/idx.ckpt ;; esac
  if d=$(same "$ref" "$tmp/$name.ckpt"); then ok "$name: the same weights as $(basename "$ref" .ckpt)"
  else notok "$name: the same weights as $(basename "$ref" .ckpt)" "$d"; fi
done <"$tmp/list"

# eval reads the recorded arrays back (here with their keys) and agrees with training's last evaluation
"$bin" arrays "$tmp/keys.npz" --x images,timages --y labels,tlabels --steps 3 --batch-size 16 --seed 7 >"$tmp/k.out" 2>&1
if e=$("$bin" eval "$tmp/keys.ckpt" 2>&1) && grep -q "test: 64 images" <<<"$e" &&
   [[ $(grep "^test:" <<<"$e") == "$(grep "test: 64 images" "$tmp/k.out" | sed 's/^epoch 1: //')" ]]; then
  ok "eval of a checkpoint trained with --x/--y: $(grep '^test:' <<<"$e")"
else notok "eval reads the arrays back" "$e" "$(grep test: "$tmp/k.out")"; fi

# pack: the same three-channel images as NCHW uint8, NHWC uint8 and NCHW float32 arrays give byte-identical
# shards (image sets serve shards in a seeded stratified order, so weights are compared between arrays above)
p1=$("$bin" pack "$tmp/rgb-nchw.npz" "$tmp/shards" --layout NCHW 2>&1) && p2=$("$bin" pack "$tmp/rgb-nhwc.npz" "$tmp/shards2" 2>&1) &&
  p3=$("$bin" pack "$tmp/rgbf-x.npy" "$tmp/rgbf-y.npy" "$tmp/rgbf-xt.npy" "$tmp/rgbf-yt.npy" "$tmp/shards3" --layout nchw 2>&1)
same_shards=1
for f in "$tmp"/shards/*.shard; do
  cmp -s "$f" "$tmp/shards2/${f##*/}" && cmp -s "$f" "$tmp/shards3/${f##*/}" || same_shards=0
done
if [[ -n ${p3:-} && $same_shards == 1 && $(ls "$tmp"/shards/*.shard | wc -l) -eq 2 ]] &&
   "$bin" images "$tmp/shards" --model mnist-cnn --augment none "${common[@]}" --checkpoint "$tmp/sh.ckpt" >"$tmp/sh.out" 2>&1; then
  ok "pack of NCHW, NHWC and float32 arrays: byte-identical shards, and they train (${p1#pack: })"
else notok "pack of arrays" "${p1:-}" "${p2:-}" "${p3:-}" "same shards: $same_shards" "$(tail -2 "$tmp/sh.out" 2>/dev/null)"; fi
if "$bin" pack "$tmp/rgbf-x.npy" "$tmp/rgbf-y.npy" "$tmp/shf" --layout nchw >"$tmp/pf.out" 2>&1 &&
   counts=$(grep -o 'wrote [0-9]* train and [0-9]* test' "$tmp/pf.out") && read -r _ tr _ _ te _ <<<"$counts" &&
   ((tr + te == 256 && te > 0)) && grep -q "round(x \* 255)" "$tmp/pf.out"; then
  ok "pack X.npy Y.npy OUT of float32: held-out split, quantisation said ($(grep -o '[0-9]* train and [0-9]* test' "$tmp/pf.out"))"
else notok "pack of float .npy" "$(cat "$tmp/pf.out")"; fi

# --val-split without test arrays: a share of each class held out, the same in eval
if "$bin" arrays "$tmp/u8-x.npy" "$tmp/u8-y.npy" --val-split 0.25 "${common[@]}" --checkpoint "$tmp/vs.ckpt" >/dev/null 2>&1 &&
   "$bin" arrays "$tmp/u8-x.npy" "$tmp/u8-y.npy" --val-split 0.25 --steps 1 --batch-size 16 --seed 7 >"$tmp/vs.out" 2>&1 &&
   grep -q "^arrays: 192 training and 64 test images, 10 classes" "$tmp/vs.out" && "$bin" eval "$tmp/vs.ckpt" 2>&1 | grep -q "test: 64 images"; then
  ok "X.npy Y.npy --val-split 0.25: 192 + 64 images, eval finds the same 64"
else notok "--val-split" "$(head -1 "$tmp/vs.out")"; fi

# a compressed member larger than memory (here: than a 200 MB address space) is refused
"$py" "$w" big "$tmp/big" 300000
err=$(ulimit -v 200000; "$bin" arrays "$tmp/big-deflate.npz" --steps 1 --producers 0 2>&1); rc=$?
if [[ -n ${CLTRAIN_SAN:-} ]]; then
  ok "a compressed array that does not fit # SKIP a sanitizer's shadow memory does not start under ulimit -v (CLTRAIN_SAN=$CLTRAIN_SAN)"
elif [[ $rc -eq 2 && $err == *"big-deflate.npz: x_train.npy: compressed"*"numpy.save"* && $(wc -l <<<"$err") -eq 1 ]]; then
  ok "a compressed array that does not fit: exit 2, ${err#cltrain: }"
else notok "compressed array too large" "rc $rc: $err"; fi

# damage: one line naming the file and what is wrong, exit 2
for kind in header fortran object shape dtype truncated key crc; do
  read -r file what < <("$py" "$w" bad "$tmp/bad-$kind" $kind)
  if [[ $file == *.npz ]]; then args=("$file"); else args=("$tmp/bad-$kind-x.npy" "$tmp/bad-$kind-y.npy"); fi
  err=$("$bin" arrays "${args[@]}" --steps 1 2>&1); rc=$?
  if [[ $rc -eq 2 && $err == *"$(basename "$file")"* && $err == *"$what"* && $(wc -l <<<"$err") -eq 1 ]]; then ok "$kind: exit 2, ${err#cltrain: }"
  else notok "$kind: one line naming $(basename "$file") and '$what', exit 2" "rc $rc: $err"; fi
done
for a in "--layout nhwc" "--layout nchw" "--x a,b,c"; do
  # shellcheck disable=SC2086
  err=$("$bin" arrays "$tmp/u8-nhw-stored.npz" $a --steps 1 2>&1); rc=$?
  if [[ $rc -eq 2 && $(wc -l <<<"$err") -eq 1 ]]; then ok "$a on NHW arrays: exit 2, ${err#cltrain: }"
  else notok "$a: exit 2, one line" "rc $rc: $err"; fi
done
echo "1..$n"
