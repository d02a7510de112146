#!/usr/bin/env bash
# onnx.sh: `cltrain export` for every built-in model (models/*.cfg), each
# trained two steps: onnx.checker passes, and onnxruntime's logits on 64 real
# test images (Fashion-MNIST for 1-channel models; the CIFAR-10 JPEG copy in
# ../shared, or generated CIFAR images without it, for 3-channel ones) equal
# cltrain predict's within 1e-4 relative, with the same top-1 on every image
# (tools/onnx_check.py). CIFAR-trained models carry per-image standardisation
# in the graph, models with [net] mean= and std= their own normalisation (and
# cltrain.mean / cltrain.std metadata); image-folder models their class names. Refusals exit 2 with one
# line. Needs onnx and onnxruntime in the venv of tools/setup-tensorboard.sh:
# skipped without it, except under CI=true. Prints TAP.
set -u
here=$(cd "$(dirname "$0")/.." && pwd)
case ${CLTRAIN_BUILD:-build} in /*) b=$CLTRAIN_BUILD ;; *) b=$here/${CLTRAIN_BUILD:-build} ;; esac
bin=$b/cltrain
py=${CLTRAIN_PYTHON:-$here/build/tbvenv/bin/python}
chk=$here/tools/onnx_check.py
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
n=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
notok() { n=$((n + 1)); echo "not ok $n - $1"; shift; for l in "$@"; do echo "# $l"; done; }
skip() { n=$((n + 1)); echo "ok $n - $1 # SKIP $2"; }
one_line() { [[ $(printf '%s\n' "$1" | wc -l) -eq 1 ]]; }

# refusals first: they need no Python
err=$("$bin" export 2>&1); rc=$?
if [[ $rc -eq 2 ]] && one_line "$err"; then ok "export without arguments: exit 2"; else notok "export without arguments" "exit $rc: $err"; fi
printf 'not a checkpoint at all, just some bytes' >"$tmp/junk.ckpt"
err=$("$bin" export "$tmp/junk.ckpt" "$tmp/j.onnx" 2>&1); rc=$?
if [[ $rc -eq 2 && $err == *junk.ckpt* && ! -e $tmp/j.onnx ]] && one_line "$err"; then ok "a file that is no checkpoint: exit 2 naming it"
else notok "a file that is no checkpoint" "exit $rc: $err"; fi

fm=/usr/share/datasets/fashion-mnist
# 1-channel models on Fashion-MNIST
"$bin" fashion-mnist --model mlp --steps 2 --batch-size 16 --limit-train 256 --limit-test 16 --quiet \
  --checkpoint "$tmp/mlp.ckpt" >"$tmp/out" 2>&1 || notok "train mlp" "$(tail -3 "$tmp/out")"
# a checkpoint whose weights do not fit its model (the .cfg edited, the CRC made good again)
python3 - "$tmp/mlp.ckpt" "$tmp/bad.ckpt" <<'PY'
import sys, zlib
d = bytearray(open(sys.argv[1], "rb").read()[:-4])
i = d.index(b"outputs=")
d[i + 8] = ord("7") if d[i + 8] != ord("7") else ord("6")
open(sys.argv[2], "wb").write(d + zlib.crc32(d).to_bytes(4, "little"))
PY
err=$("$bin" export "$tmp/bad.ckpt" "$tmp/bad.onnx" 2>&1); rc=$?
# (the checkpoint reader refuses it first, since its fields are checked on load)
if [[ $rc -eq 2 && $err == *"bad.ckpt"*"parameter count"* && ! -e $tmp/bad.onnx ]] && one_line "$err"; then ok "a checkpoint it cannot represent: exit 2"
else notok "a checkpoint it cannot represent" "exit $rc: $err"; fi
err=$("$bin" export "$tmp/mlp.ckpt" "$tmp/no/such/dir/m.onnx" 2>&1); rc=$?
if [[ $rc -eq 2 && $err == *no/such/dir/m.onnx* ]] && one_line "$err"; then ok "an output path it cannot write: exit 2 naming it"
else notok "an unwritable output path" "exit $rc: $err"; fi

if ! "$py" -c "import onnx, onnxruntime, numpy" 2>/dev/null; then
  why="onnx/onnxruntime not in $py: run tools/setup-tensorboard.sh build/tbvenv (PyPI) to include these checks"
  if [[ ${CI:-} == true ]]; then notok "ONNX models checked by onnxruntime" "$why (required under CI=true)"
  else skip "ONNX models checked by onnxruntime" "$why"; fi
  echo "1..$n"
  exit 0
fi

mkdir -p "$tmp/fm" "$tmp/c3"
"$py" "$chk" pngs-idx "$fm/t10k-images-idx3-ubyte.gz" 64 "$tmp/fm"
# 3-channel: 64 real CIFAR-10 test images from the JPEG copy, else generated ones
"$b/tools/make-cifar" "$tmp/g10" --train 128 --test 64 --seed 3 >/dev/null
"$b/tools/make-cifar" "$tmp/g100" --train 128 --test 64 --seed 3 --cifar100 >/dev/null
"$py" "$chk" pngs-cifar "$tmp/g10/data_batch_1.bin" 128 "$tmp/folders" folders
jpeg=$here/../shared/datasets/cifar10-jpeg/cifar-10-jpeg-folders.tar.gz
if [[ -f $jpeg ]]; then
  tar xzf "$jpeg" -C "$tmp/c3" --wildcards '*test/*/000[0-6].jpg'
  mapfile -t c3 < <(find "$tmp/c3" -name '*.jpg' | sort | head -64)
  c3what="64 CIFAR-10 test JPEGs"
else
  "$py" "$chk" pngs-cifar "$tmp/g10/test_batch.bin" 64 "$tmp/c3"
  mapfile -t c3 < <(find "$tmp/c3" -name '*.png' | sort)
  c3what="64 generated CIFAR-format test images (no ../shared/datasets/cifar10-jpeg)"
fi
names=$(cd "$tmp/folders" && ls | paste -sd,)

# check NAME CKPT IMAGES-WHAT [NAMES]: export and predict the images in the array imgs; the
# onnxruntime side runs for all models at once at the end (one Python start)
check() {
  local name=$1 ck=$2 what=$3 nm=${4:-} out
  if ! out=$("$bin" export "$ck" "$tmp/$name.onnx" 2>&1); then notok "$name: export" "$out"; return; fi
  if ! out=$("$bin" predict "$ck" "${imgs[@]}" --top 1 --logits "$tmp/$name.lg" --pixels "$tmp/$name.px" 2>&1 >/dev/null); then
    notok "$name: predict" "$out"; return
  fi
  printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$name" "$tmp/$name.onnx" "$tmp/$name.px" "$tmp/$name.lg" "$ck" "$nm" >>"$tmp/list"
  whats[$name]=$what
}
declare -A whats
train() { # train NAME COMMAND ARGS...: two steps, checkpoint $tmp/NAME.ckpt (the model $tmp/NAME.cfg or tests/fixtures/NAME.cfg if there)
  local name=$1 model=$1; shift
  [[ -f $here/tests/fixtures/$name.cfg ]] && model=$here/tests/fixtures/$name.cfg
  [[ -f $tmp/$name.cfg ]] && model=$tmp/$name.cfg
  if ! "$bin" "$@" --model "$model" --steps 2 --quiet --checkpoint "$tmp/$name.ckpt" >"$tmp/out" 2>&1; then
    notok "$name: train" "$(tail -3 "$tmp/out")"; return 1
  fi
}
tested="" skipped=""
imgs=("$tmp"/fm/*.png)
check mlp "$tmp/mlp.ckpt" "64 Fashion-MNIST test images"
for m in mnist-cnn mnist-cnn-bn; do
  train $m fashion-mnist --batch-size 16 --limit-train 256 --limit-test 16 && check $m "$tmp/$m.ckpt" "64 Fashion-MNIST test images"
done
imgs=("${c3[@]}")
for m in cifar-cnn cifar-tf; do
  train $m cifar10 --data "$tmp/g10" --batch-size 16 --augment none && check $m "$tmp/$m.ckpt" "$c3what (standardised in the graph)"
done
train resnet20 cifar10 --data "$tmp/g10" --batch-size 16 --augment none &&
  check resnet20 "$tmp/resnet20.ckpt" "$c3what (standardised in the graph; Add, Slice and Pad for the shortcuts)"
train resnet20b cifar10 --data "$tmp/g10" --batch-size 16 --augment none &&
  check resnet20b "$tmp/resnet20b.ckpt" "$c3what (standardised in the graph; a strided 1x1 Conv and Add for the projecting shortcuts)"
# GELU after each kind of layer that takes an activation (conv, batch norm, shortcut, dense: an
# Erf formula at opset 13) and global max pooling (GlobalMaxPool): tests/fixtures/gelu-gmp.cfg,
# which tests/import.sh reads back too
train gelu-gmp cifar10 --data "$tmp/g10" --batch-size 16 --augment none &&
  check gelu-gmp "$tmp/gelu-gmp.ckpt" "$c3what (GELU as Erf, GlobalMaxPool)"
# a model's own normalisation ([net] mean= and std=, in place of the standardisation): Sub and Div per channel
norm() { awk -v m="$2" -v s="$3" '{ print } /^\[net\]/ { print "mean=" m; print "std=" s }' "$here/models/$1.cfg"; }
norm cifar-tf 0.4914,0.4822,0.4465 0.2470,0.2435,0.2616 >"$tmp/cifar-tf-norm.cfg"
train cifar-tf-norm cifar10 --data "$tmp/g10" --batch-size 16 --augment basic &&
  check cifar-tf-norm "$tmp/cifar-tf-norm.ckpt" "$c3what (the model's mean= and std= in the graph)"
imgs=("$tmp"/fm/*.png)
norm mnist-cnn 0.2860 0.3530 >"$tmp/mnist-cnn-norm.cfg"
train mnist-cnn-norm fashion-mnist --batch-size 16 --limit-train 256 --limit-test 16 &&
  check mnist-cnn-norm "$tmp/mnist-cnn-norm.ckpt" "64 Fashion-MNIST test images (the model's mean= and std= in the graph)"
imgs=("${c3[@]}")
# the airbench94 model: its whitening conv, its own mean= and std=
train cifar-fast cifar10 --data "$tmp/g10" --batch-size 16 --augment none &&
  check cifar-fast "$tmp/cifar-fast.ckpt" "$c3what (the model's mean= and std= in the graph)"
train cifar100-cnn cifar100 --data "$tmp/g100" --batch-size 16 --augment none &&
  check cifar100-cnn "$tmp/cifar100-cnn.ckpt" "$c3what (standardised in the graph)"
# the VGG nets at 32x32, the smallest input their five 2x2 pools take. vgg16
# (34 M parameters: a 400 MB checkpoint, 135 MB of ONNX) takes about 45 s here
# and exercises a subset of vgg16-bn's layers, so it runs under CI=true (or
# CLTRAIN_ONNX_ALL=1) only.
vggs="vgg-small vgg16-bn"
if [[ ${CI:-} == true || -n ${CLTRAIN_ONNX_ALL:-} ]]; then vggs+=" vgg16"; else skip "vgg16" "about 45 s; its layers are a subset of vgg16-bn's (CI=true or CLTRAIN_ONNX_ALL=1 runs it)"; skipped=" vgg16"; fi
for m in $vggs; do
  train $m images "$tmp/folders" --size 32 --batch-size 8 --limit-test 8 && check $m "$tmp/$m.ckpt" "$c3what" "$names"
done
if [[ -s $tmp/list ]]; then
  while IFS= read -r line; do
    name=${line#* }; name=${name%%:*}
    if [[ $line == PASS* ]]; then ok "$name on ${whats[$name]}: ${line#*: }"; tested+=" $name"
    else notok "$name: onnx.checker and onnxruntime agree with cltrain" "${line#FAIL }"; fi
  done < <("$py" "$chk" check-list "$tmp/list" 2>&1)
fi
# a new built-in model must be added here
all=$(cd "$here/models" && ls *.cfg | sed 's/\.cfg$//' | sort | paste -sd' ')
got=$(printf '%s\n' $tested $skipped | grep -vx 'gelu-gmp\|.*-norm' | sort | paste -sd' ')
if [[ $all == "$got" ]]; then ok "every built-in model covered (checked:$tested${skipped:+; skipped for time:$skipped})"
else notok "every built-in model covered" "built-in: $all" "checked: $tested; skipped: $skipped"; fi
echo "1..$n"
