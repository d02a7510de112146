#!/usr/bin/env bash
# cli.sh: the command line as a user meets it. Bad input of every kind must
# give exit code 2 and one line on stderr naming the file or option, never a
# crash; a short real training run must learn. Prints TAP.
# Runs against $CLTRAIN_BUILD/cltrain (build/ by default; build-asan under make asan).
set -u
here=$(cd "$(dirname "$0")/.." && pwd)
bin=$here/${CLTRAIN_BUILD:-build}/cltrain
[[ $bin == /* ]] || bin=$here/$bin
case ${CLTRAIN_BUILD:-build} in /*) bin=${CLTRAIN_BUILD}/cltrain ;; esac
fm=/usr/share/datasets/fashion-mnist
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
n=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
notok() { n=$((n + 1)); echo "not ok $n - $1"; shift; for l in "$@"; do echo "# $l"; done; }

# expect_fail NAME CODE PATTERN -- ARGS...: exit CODE, exactly one stderr line matching PATTERN
expect_fail() {
  local name=$1 code=$2 pat=$3; shift 4
  local err=$tmp/err out=$tmp/out
  timeout 120 "$@" >"$out" 2>"$err"
  local rc=$? lines
  lines=$(grep -vc '^cltrain: downloading' "$err")
  if [[ $rc -eq $code && $lines -eq 1 ]] && grep -v '^cltrain: downloading' "$err" | grep -qE -- "$pat"; then
    ok "$name"
  else
    notok "$name" "exit $rc (want $code), $lines stderr lines (want 1), pattern '$pat'" "$(head -5 "$err")"
  fi
}

idx_images() { # FILE N ROWS COLS: an IDX image file of zeros
  { printf '\x00\x00\x08\x03'; printf "%08x%08x%08x" "$2" "$3" "$4" | xxd -r -p; head -c $(($2 * $3 * $4)) /dev/zero; } >"$1"
}
idx_labels() { # FILE LABEL...
  local f=$1; shift
  { printf '\x00\x00\x08\x01'; printf "%08x" $# | xxd -r -p; for l in "$@"; do printf "%02x" "$l"; done | xxd -r -p; } >"$f"
}
mkset() { # DIR: a valid 4-image MNIST-format set
  mkdir -p "$1"
  idx_images "$1/train-images-idx3-ubyte" 4 28 28; idx_labels "$1/train-labels-idx1-ubyte" 0 1 2 3
  idx_images "$1/t10k-images-idx3-ubyte" 2 28 28; idx_labels "$1/t10k-labels-idx1-ubyte" 4 5
}

# --- usage ---
expect_fail "unknown command" 2 "unknown command" -- "$bin" frobnicate
expect_fail "unknown option" 2 "unknown option --frob" -- "$bin" fashion-mnist --frob
expect_fail "missing option value" 2 "needs a value" -- "$bin" fashion-mnist --epochs
expect_fail "--batch-size 0" 2 "batch-size 0" -- "$bin" fashion-mnist --batch-size 0
expect_fail "--lookahead -0.5" 2 "lookahead -0.5: expected a number in 0..1" -- "$bin" fashion-mnist --lookahead -0.5
expect_fail "--lookahead 1.5" 2 "lookahead 1.5: expected a number in 0..1" -- "$bin" fashion-mnist --lookahead 1.5
expect_fail "--lookahead x" 2 "lookahead x" -- "$bin" fashion-mnist --lookahead x
expect_fail "--label-smoothing 1" 2 "label-smoothing 1.*\\[0, 1\\)" -- "$bin" fashion-mnist --label-smoothing 1
expect_fail "--label-smoothing -0.1" 2 "label-smoothing -0.1" -- "$bin" fashion-mnist --label-smoothing -0.1
expect_fail "--label-smoothing x" 2 "label-smoothing x" -- "$bin" fashion-mnist --label-smoothing x
expect_fail "--lr not a number" 2 "--lr abc" -- "$bin" fashion-mnist --lr abc
expect_fail "--optimizer unknown" 2 "--optimizer rmsprop" -- "$bin" fashion-mnist --optimizer rmsprop
mkset "$tmp/set"
expect_fail "--device malformed" 2 "PLATFORM:DEVICE" -- "$bin" fashion-mnist --data "$tmp/set" --device gpu
expect_fail "--device unknown" 2 "9:9.*no such device" -- "$bin" fashion-mnist --data "$tmp/set" --device 9:9
if "$bin" --help | grep -q "Usage: cltrain" && "$bin" --version | grep -q "^cltrain "; then ok "--help and --version"; else notok "--help and --version"; fi

# --- data files ---
expect_fail "missing data folder" 2 "nowhere" -- "$bin" fashion-mnist --data "$tmp/nowhere"
mkdir -p "$tmp/trunc"; cp "$fm"/*.gz "$tmp/trunc/" 2>/dev/null
if [[ -f $tmp/trunc/train-images-idx3-ubyte.gz ]]; then
  head -c 100000 "$fm/train-images-idx3-ubyte.gz" >"$tmp/trunc/train-images-idx3-ubyte.gz"
  expect_fail "truncated .gz" 2 "train-images-idx3-ubyte.gz.*(truncated|corrupt)" -- "$bin" fashion-mnist --data "$tmp/trunc"
  cp "$fm/train-images-idx3-ubyte.gz" "$tmp/trunc/"
  printf 'garbage' | dd of="$tmp/trunc/train-images-idx3-ubyte.gz" bs=1 seek=20000 conv=notrunc 2>/dev/null
  expect_fail "corrupt .gz" 2 "train-images-idx3-ubyte.gz" -- "$bin" fashion-mnist --data "$tmp/trunc"
else
  notok "truncated .gz" "no Fashion-MNIST at $fm (dataset-fashion-mnist)"
fi
mkset "$tmp/magic"; cp "$tmp/magic/train-labels-idx1-ubyte" "$tmp/magic/train-images-idx3-ubyte"
expect_fail "wrong IDX magic" 2 "train-images-idx3-ubyte.*magic" -- "$bin" fashion-mnist --data "$tmp/magic"
mkset "$tmp/count"; idx_labels "$tmp/count/train-labels-idx1-ubyte" 0 1 2
expect_fail "image and label counts differ" 2 "train-(images|labels).*(4|3)" -- "$bin" fashion-mnist --data "$tmp/count"
mkset "$tmp/label"; idx_labels "$tmp/label/train-labels-idx1-ubyte" 0 1 12 3
expect_fail "label out of range" 2 "train-labels-idx1-ubyte.*label 12" -- "$bin" fashion-mnist --data "$tmp/label"
expect_fail "mnist offline" 2 "fashion-mnist" -- env CLTRAIN_MNIST_MIRROR=http://127.0.0.1:9/ "$bin" mnist --data "$tmp/mnist-empty"

# --- model files ---
cfg() { printf '[net]\nheight=28\nwidth=28\nchannels=1\nclasses=10\n%s\n[dense]\noutputs=10\n[softmax]\n' "$2" >"$tmp/$1.cfg"; }
cfg unknown '[convv]\nfilters=3'
expect_fail "cfg: unknown layer" 2 "unknown.cfg:[0-9]+: unknown layer \[convv\]" -- "$bin" fashion-mnist --data "$tmp/set" --model "$tmp/unknown.cfg"
printf '[net]\nheight=28\nwidth=28\nchannels=1\nclasses=10\n[conv]\nfilters=abc\nsize=3\n[dense]\noutputs=10\n[softmax]\n' >"$tmp/badnum.cfg"
expect_fail "cfg: bad number" 2 "badnum.cfg:[0-9]+: filters=abc" -- "$bin" fashion-mnist --data "$tmp/set" --model "$tmp/badnum.cfg"
printf '[net]\nheight=28\nwidth=28\nchannels=1\nclasses=10\n[conv]\nfilters=4\nsize=40\n[dense]\noutputs=10\n[softmax]\n' >"$tmp/fit.cfg"
expect_fail "cfg: shapes do not fit" 2 "fit.cfg:[0-9]+: .*does not fit" -- "$bin" fashion-mnist --data "$tmp/set" --model "$tmp/fit.cfg"
printf '[net]\nheight=32\nwidth=32\nchannels=3\nclasses=10\n[dense]\noutputs=10\n[softmax]\n' >"$tmp/shape.cfg"
expect_fail "cfg: input shape differs from data" 2 "expects 32x32x3" -- "$bin" fashion-mnist --data "$tmp/set" --model "$tmp/shape.cfg"
expect_fail "cfg: missing file" 2 "nofile.cfg" -- "$bin" fashion-mnist --data "$tmp/set" --model "$tmp/nofile.cfg"
expect_fail "unknown built-in model" 2 "no such built-in model" -- "$bin" fashion-mnist --data "$tmp/set" --model resnet999

# --- the device class: CLTRAIN_DEVICE_CLASS picks the kernel shapes; a misspelt value is bad input ---
expect_fail "CLTRAIN_DEVICE_CLASS misspelt" 2 "CLTRAIN_DEVICE_CLASS='gpx': expected gpu, cpu or auto" -- env CLTRAIN_DEVICE_CLASS=gpx "$bin" fashion-mnist --data "$tmp/set" --steps 1
expect_fail "CLTRAIN_DEVICE_CLASS misspelt (devices)" 2 "CLTRAIN_DEVICE_CLASS='CPU'" -- env CLTRAIN_DEVICE_CLASS=CPU "$bin" devices
for c in gpu cpu; do
  out=$(CLTRAIN_DEVICE_CLASS=$c "$bin" fashion-mnist --data "$tmp/set" --steps 1 --batch-size 2 2>&1)
  dev=$(CLTRAIN_DEVICE_CLASS=$c "$bin" devices 2>&1)
  if grep -q "^device .*kernels: class $c (CLTRAIN_DEVICE_CLASS)" <<<"$out" && grep -q "kernels: class $c (CLTRAIN_DEVICE_CLASS)" <<<"$dev"; then
    ok "CLTRAIN_DEVICE_CLASS=$c: the run and \`cltrain devices\` say class $c and why"
  else
    notok "CLTRAIN_DEVICE_CLASS=$c: the run and \`cltrain devices\` say class $c and why" "$(grep -m1 '^device' <<<"$out")" "$(grep -m1 'class' <<<"$dev")"
  fi
done
out=$(env -u CLTRAIN_DEVICE_CLASS "$bin" devices 2>&1)
if grep -qE "kernels: class (cpu|gpu) \(device type" <<<"$out"; then ok "without CLTRAIN_DEVICE_CLASS the class comes from the device type"
else notok "without CLTRAIN_DEVICE_CLASS the class comes from the device type" "$(head -5 <<<"$out")"; fi

# --- device memory: a batch that cannot fit names the buffer and suggests a smaller batch ---
# One activation buffer (batch 4096 x 28 x 28 x F floats) just over the device's
# largest buffer (CL_DEVICE_MAX_MEM_ALLOC_SIZE, as `cltrain devices` prints it), so
# the test means the same on any device. The kernels index a tensor with int (2^31
# floats, 8 GiB), and PoCL allows a quarter of the machine's memory in one buffer
# (8 GiB on a 32 GiB machine): POCL_MEMORY_LIMIT=4 (GB; other implementations
# ignore it) brings PoCL's largest buffer to 1 GiB, under what a tensor may hold.
export POCL_MEMORY_LIMIT=4
maxbuf=$("$bin" devices 2>/dev/null | sed -n 's/.*largest buffer \([0-9]*\) MiB.*/\1/p' | head -1)
if [[ -z $maxbuf ]]; then
  notok "device allocation failure" "\`cltrain devices\` printed no 'largest buffer N MiB'"
elif (( maxbuf >= 8192 )); then
  n=$((n + 1)); echo "ok $n - device allocation failure # SKIP this device allows ${maxbuf} MiB in one buffer, more than a tensor the kernels index"
else
  filters=$(( maxbuf * 1048576 / (4096 * 28 * 28 * 4) + 1 ))
  printf '[net]\nheight=28\nwidth=28\nchannels=1\nclasses=10\n[conv]\nfilters=%d\nsize=1\n[dense]\noutputs=10\n[softmax]\n' "$filters" >"$tmp/wide.cfg"
  expect_fail "device allocation failure (a buffer over the device's ${maxbuf} MiB)" 1 "layer 0 output.*MiB.*smaller --batch-size" -- "$bin" fashion-mnist --data "$tmp/set" --model "$tmp/wide.cfg" --batch-size 4096 --steps 1
fi
unset POCL_MEMORY_LIMIT

# --- a short real training run learns (mnist-cnn, 100 steps of Fashion-MNIST) ---
if [[ -f $fm/train-images-idx3-ubyte.gz ]]; then
  timeout 300 "$bin" fashion-mnist --limit-train 12800 --limit-test 2000 --seed 3 >"$tmp/train.out" 2>&1
  rc=$?
  acc=$(sed -n 's/^epoch 1: test: .*accuracy \([0-9.]*\)%.*/\1/p' "$tmp/train.out")
  if [[ $rc -eq 0 && -n $acc ]] && awk -v a="$acc" 'BEGIN { exit !(a >= 78) }'; then
    ok "mnist-cnn learns Fashion-MNIST: $acc% after 100 steps (want >= 78%)"
  else
    notok "mnist-cnn learns Fashion-MNIST" "exit $rc, accuracy '${acc}' (want >= 78%)" "$(tail -5 "$tmp/train.out")"
  fi
  # the same with batch normalisation after each convolution
  timeout 300 "$bin" fashion-mnist --model mnist-cnn-bn --limit-train 12800 --limit-test 2000 --seed 3 >"$tmp/bn.out" 2>&1
  rc=$?
  acc=$(sed -n 's/^epoch 1: test: .*accuracy \([0-9.]*\)%.*/\1/p' "$tmp/bn.out")
  if [[ $rc -eq 0 && -n $acc ]] && awk -v a="$acc" 'BEGIN { exit !(a >= 78) }'; then
    ok "mnist-cnn-bn learns Fashion-MNIST: $acc% after 100 steps (want >= 78%)"
  else
    notok "mnist-cnn-bn learns Fashion-MNIST" "exit $rc, accuracy '${acc}' (want >= 78%)" "$(tail -5 "$tmp/bn.out")"
  fi
else
  notok "mnist-cnn learns Fashion-MNIST" "no Fashion-MNIST at $fm"
fi
echo "1..$n"
