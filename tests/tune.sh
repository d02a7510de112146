#!/usr/bin/env bash
# tune.sh: `cltrain tune` and its tuning database. A tiny budget must be kept
# and a database written; a database entry must change the kernel a shape
# runs; a damaged database, or one from another device, driver or kernel
# source, must be ignored with one line saying why while the run goes on
# with the defaults; a variant past the device's local memory or work-group limit is skipped
# with a message; bad --budget and CLTRAIN_GEMM values exit 2. Prints TAP.
set -u
here=$(cd "$(dirname "$0")/.." && pwd)
bin=$here/${CLTRAIN_BUILD:-build}/cltrain
[[ $bin == /* ]] || bin=$here/$bin
case ${CLTRAIN_BUILD:-build} in /*) bin=${CLTRAIN_BUILD}/cltrain ;; esac
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
n=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
notok() { n=$((n + 1)); echo "not ok $n - $1"; shift; for l in "$@"; do echo "# $l"; done; }
export CLTRAIN_CACHE_DIR=$tmp/cache
mkdir -p "$CLTRAIN_CACHE_DIR"
# compiled programs are keyed by source, options and device: reuse the suite's (test_gemm builds every candidate)
[[ -n ${CLTRAIN_BUILD:-} && -d $here/${CLTRAIN_BUILD}/cache ]] && cp "$here/${CLTRAIN_BUILD}"/cache/*.bin "$CLTRAIN_CACHE_DIR"/ 2>/dev/null
probe=("$bin" bench probe --model mlp --batch-size 8)

# --- a tuning run with a tiny budget ---
start=$(date +%s)
timeout 300 "$bin" tune --model mlp --batch-size 8 --budget 3 >"$tmp/out" 2>"$tmp/err"
rc=$? secs=$(($(date +%s) - start))
db=$(ls "$CLTRAIN_CACHE_DIR"/gemm-tune-*.txt 2>/dev/null | head -1)
if [[ $rc -eq 0 && -n $db ]] && grep -q '^step time: shipped defaults' "$tmp/out" && grep -q '^end [0-9]' "$db" && grep -q '^kernels [0-9a-f]\{16\}$' "$db"; then
  ok "tune --budget 3 writes $(basename "$db") ($secs s, $(grep -c '^shape' "$db") shapes)"
else
  notok "tune --budget 3" "exit $rc, db '${db:-none}'" "$(tail -3 "$tmp/out")" "$(head -3 "$tmp/err")"
fi
[[ -n $db ]] || db=$CLTRAIN_CACHE_DIR/none.txt
cp "$db" "$tmp/good" 2>/dev/null || : >"$tmp/good"
# the rows and the summary agree: a shape's best is compared with the default in interleaved rounds, a win is
# claimed only when it was faster in 6 or 7 of the 7 rounds, and the summary counts exactly the rows that say so
timeout 300 "$bin" tune --model mlp --batch-size 8 --budget 20 >"$tmp/out" 2>"$tmp/err"
cp "$tmp/good" "$db" 2>/dev/null
rows=$(grep -cE '^\[ *[0-9]+/[0-9]+\]' "$tmp/out")
compared=$(grep -cE 'faster in [0-7] of 7 interleaved rounds' "$tmp/out")
same=$(grep -c 'no other candidate was faster in the search' "$tmp/out")
wins=$(grep -E 'ms \([0-9.]+x in the median round; faster in [0-7] of 7 interleaved rounds\)' "$tmp/out" | grep -vcE 'faster in [0-5] of 7')
claimed=$(sed -n 's/^searched for .* s; \([0-9]*\) of [0-9]* shapes run faster.*/\1/p' "$tmp/out")
lost=$(grep -E 'faster in [0-5] of 7' "$tmp/out" | grep -c 'in the median round;')
if [[ $rows -gt 0 && $((compared + same)) -eq $rows && $lost -eq 0 && $wins == "$claimed" ]]; then
  ok "tune: every shape row compares default and best in interleaved rounds; $claimed wins claimed, as the rows say"
else
  notok "tune: rows and summary agree" "rows $rows, interleaved $compared, same $same, wins $wins, claimed '$claimed', lost $lost" "$(grep -E '^\[|^searched|^step' "$tmp/out" | head -12)"
fi

# --- a database entry changes what a shape runs (dense 1 forward of mlp at batch 8: 8x256x784) ---
head -n -1 "$tmp/good" | grep -v '^shape NN 8 256 784 ' >"$db"
echo "shape NN 8 256 784 native local 32 32 16 4 4 4 128" >>"$db"
echo "end $(grep -c '^shape' "$db")" >>"$db"
CLTRAIN_DEBUG=2 timeout 120 "${probe[@]}" >"$tmp/out" 2>"$tmp/err"
rc=$?
if [[ $rc -eq 0 ]] && grep -q 'gemm_local' "$tmp/err" && ! grep -q 'ignored' "$tmp/err"; then
  ok "a database entry makes the shape run gemm_local"
else
  notok "database entry used" "exit $rc" "$(grep -m3 -E 'tuning|gemm' "$tmp/err")"
fi
cp "$db" "$tmp/good"

# --- a conv line changes how a layer runs under --conv auto: mnist-cnn's 3x3
# layer 26x26x32->64 at batch 8 is Winograd F(4x4, 3x3) by the shipped rule,
# its first layer 28x28x1->32 the direct kernel ---
cprobe=("$bin" bench probe --model mnist-cnn --batch-size 8)
launches() { local pat=$1; shift; CLTRAIN_DEBUG=2 timeout 120 "${cprobe[@]}" "$@" 2>&1 >/dev/null | grep -cE "\] ($pat) "; }
before=$(launches 'wino_(in|fused)') dbefore=$(launches direct_fwd)
head -n -1 "$tmp/good" >"$db"
echo "conv 8 26 26 32 64 0 im2col" >>"$db"
echo "conv 8 28 28 1 32 0 im2col" >>"$db"
echo "end $(grep -c -E '^(shape|conv) ' "$db")" >>"$db"
after=$(launches 'wino_(in|fused)') dafter=$(launches direct_fwd) forced=$(launches 'wino_(in|fused)' --conv winograd4)
if [[ $before -gt 0 && $after -eq 0 && $forced -gt 0 && $dbefore -gt 0 && $dafter -eq 0 ]]; then
  ok "conv lines make the layers run im2col under --conv auto (Winograd input-transform launches $before -> $after, direct $dbefore -> $dafter; --conv winograd4 overrides it: $forced)"
else
  notok "conv line used" "Winograd input-transform launches: rule $before, with the line $after (want 0), --conv winograd4 $forced; direct_fwd $dbefore -> $dafter (want 0)"
fi
cp "$db" "$tmp/goodconv"
# a 'direct' line moves the Winograd layer to the direct kernel
sed 's/^conv 8 26 26 32 64 0 im2col$/conv 8 26 26 32 64 0 direct/' "$tmp/goodconv" >"$db"
wl=$(launches 'wino_(in|fused)') dl=$(launches direct_fwd)
if [[ $wl -eq 0 && $dl -gt 0 ]]; then  # (the first layer runs im2col by its line)
  ok "a 'direct' line makes the 3x3 layer run the direct kernel under --conv auto (Winograd launches $wl, direct $dl)"
else
  notok "direct line used" "Winograd launches $wl (want 0), direct_fwd $dl (want > 0)"
fi

# expect_ignored NAME PATTERN: the probe runs (exit 0) and prints one 'ignored' line matching PATTERN
expect_ignored() {
  timeout 120 "${probe[@]}" >"$tmp/out" 2>"$tmp/err"
  local rc=$? lines
  lines=$(grep -c 'tuning database' "$tmp/err")
  if [[ $rc -eq 0 && $lines -eq 1 ]] && grep -q "ignored: $2" "$tmp/err"; then
    ok "$1 database ignored: $(cut -c1-150 "$tmp/err" | grep 'tuning database')"
  else
    notok "$1 database" "exit $rc, $lines lines (want 1), pattern '$2'" "$(head -3 "$tmp/err")"
  fi
}
head -n -1 "$tmp/good" >"$db"; expect_ignored "truncated (no end line)" "damaged"
sed 's/^shape NN 8 256 784 native local .*/shape NN 8 256 784 native local 32 32 16 3 4 4 128/' "$tmp/good" >"$db"
expect_ignored "bad parameters" "damaged (line"
sed 's/^conv 8 26 26 32 64 0 im2col$/conv 8 26 26 32 64 0 fft/' "$tmp/goodconv" >"$db"
expect_ignored "an unknown conv algorithm" "damaged (line"
sed 's/^conv 8 26 26 32 64 0 im2col$/conv 8 26 26 32 0 wino4/' "$tmp/goodconv" >"$db"
expect_ignored "a conv line cut short" "damaged (line"
grep -v '^conv ' "$tmp/goodconv" >"$db"; expect_ignored "a conv line gone (end count)" "damaged (cut short or bad end count"
head -c 300 /dev/urandom >"$db"; expect_ignored "random bytes" "damaged"
sed 's/^driver .*/driver 0.0-other/' "$tmp/good" >"$db"; expect_ignored "another driver's" "written for driver '0.0-other'"
sed 's/^device .*/device Some Other GPU/' "$tmp/good" >"$db"; expect_ignored "another device's" "written for device 'Some Other GPU'"
sed 's/^kernels .*/kernels 0123456789abcdef/' "$tmp/good" >"$db"; expect_ignored "another kernel source's" "written for kernel sources"
: >"$db"; expect_ignored "empty" "damaged"

# `cltrain tune ARGS` with no database, into $tmp/out and $tmp/err: sets rc and secs
tune_fresh() {
  rm -f "$db"
  local start=$(date +%s)
  timeout 300 "$bin" tune "$@" >"$tmp/out" 2>"$tmp/err"
  rc=$? secs=$(($(date +%s) - start))
}

# --- the conv search: every 3x3 stride-1 shape timed four ways, the budget kept ---
tune_fresh --model mnist-cnn --batch-size 8 --budget 30
line=$(grep -m1 '^  26x26x32->64 pad 0 (1 layer)' "$tmp/out")
first=$(grep -m1 '^  28x28x1->32 pad 0 (1 layer)' "$tmp/out")
if [[ $rc -eq 0 && -f $db && $secs -le 45 ]] && grep -q "^conv search: 2 shapes" "$tmp/out" &&
   [[ $line == *"im2col "*" ms wino2 "*" ms wino4 "*" ms direct "*" ms -> "* ]] &&
   [[ $first == *" wino4 "*" ms direct "*" ms -> "* ]] && grep -q '^end [0-9]' "$db"; then
  ok "tune times mnist-cnn's 3x3 layers as im2col, F(2x2), F(4x4) and direct in $secs s of a 30 s budget:${line#*:};${first#*:}"
else
  notok "conv search" "exit $rc, $secs s (budget 30)" "$(grep -A2 'conv search' "$tmp/out")" "$(head -3 "$tmp/err")"
fi

# --- a conv search cut short by its share of the budget has timed the shipped rule's algorithm first ---
# (cifar-cnn at batch 256: F(4x4) is the rule for five of its six shapes; with 6 s the search cannot
# time all four algorithms here, and each layer's timing checks the deadline, so the whole run stays
# near its budget; before, im2col went first and ran to the end whatever the budget)
tune_fresh --model cifar-cnn --batch-size 256 --budget 6
shape=$(grep -m1 '^  16x16x32->64 pad 1 (1 layer)' "$tmp/out")
cut=$(grep -c 'not timed' "$tmp/out")
if [[ $rc -eq 0 ]] && (( secs <= 6 + 20 )) && ! grep -q '^  wino4 not timed: ' "$tmp/out" &&
   { [[ $shape == *" wino4 "*" ms"* ]] || grep -q '^  wino4 not timed on every layer' "$tmp/out"; } &&
   { [[ $shape != *" im2col "*" ms"* ]] || [[ $shape == *" wino4 "*" ms"* ]]; }; then
  ok "a conv search within its share of 6 s times F(4x4), the rule, first ($secs s in all, $cut algorithms cut or not timed):${shape#*:}"
else
  notok "conv search order and deadline" "exit $rc, $secs s (budget 6)" "$(grep -A8 'conv search' "$tmp/out")" "$(head -3 "$tmp/err")"
fi

# --- a variant the device cannot run is skipped, the run goes on ---
# The largest local-memory tile the parameters allow needs 1 MiB; a device
# with more (PoCL gives some CPUs 2 MiB) cannot be over it, so there the
# variant is one with work-groups of 65536 work-items, past every device's
# limit: the same check (ct_gemm_cfg_fits) skips both.
rm -f "$db"
lmem=$("$bin" devices 2>/dev/null | sed -n 's/.*local memory \([0-9]*\) KiB.*/\1/p' | head -1)
if [[ -n $lmem && $lmem -lt 1024 ]]; then
  cand="local,256,256,256,8,8,4,128" want='skipped: GEMM local TSM=256 .* KiB of local memory' why="over its $lmem KiB of local memory"
else
  cand="local,256,256,16,1,1,4,128" want='skipped: GEMM local TSM=256 .* work-groups of 65536' why="work-groups past its limit (local memory ${lmem:-?} KiB: no tile is over it)"
fi
CLTRAIN_TUNE_CANDIDATES="$cand" timeout 300 "$bin" tune --model mlp --batch-size 8 --budget 2 >"$tmp/out" 2>"$tmp/err"
rc=$?
if [[ $rc -eq 0 ]] && grep -q "$want" "$tmp/out" && [[ -f $db ]]; then
  ok "a variant with $why is skipped: $(grep -m1 'skipped' "$tmp/out" | cut -c1-120)"
else
  notok "a variant with $why is skipped" "exit $rc" "$(grep -m2 -E 'skipped|local' "$tmp/out")" "$(head -3 "$tmp/err")"
fi

# --- --gemm auto stores its choice (ours or CLBlast per shape) in the same database ---
fm=/usr/share/datasets/fashion-mnist
if [[ -f $fm/train-images-idx3-ubyte.gz ]]; then
  rm -f "$db"
  timeout 300 "$bin" fashion-mnist --data "$fm" --model mlp --batch-size 8 --steps 2 --limit-train 64 --limit-test 16 --gemm auto --quiet >"$tmp/out" 2>"$tmp/err"
  rc=$?
  if [[ $rc -eq 0 && -f $db ]] && grep -qE '^shape NN 8 256 784 (clblast|native reg)' "$db" && grep -q '^end [1-9]' "$db"; then
    ok "--gemm auto stores its choices: $(grep -c '^shape' "$db") shapes, $(grep -c 'clblast$' "$db") on CLBlast"
  else
    notok "--gemm auto database" "exit $rc" "$(head -3 "$tmp/err")" "$(cat "$db" 2>/dev/null | tail -3)"
  fi
elif [[ ${CI:-} == true ]]; then
  notok "--gemm auto database" "Fashion-MNIST missing under CI ($fm)"
else
  echo "ok $((n += 1)) - --gemm auto database # SKIP Fashion-MNIST not installed ($fm)"
fi

# --- the first training run on a device with no database searches once (CLTRAIN_AUTOTUNE) ---
if [[ -f $fm/train-images-idx3-ubyte.gz || -f $fm/train-images-idx3-ubyte ]]; then
  auto=$tmp/auto
  mkdir -p "$auto"
  cp "$CLTRAIN_CACHE_DIR"/*.bin "$auto"/ 2>/dev/null
  train=("$bin" fashion-mnist --data "$fm" --model mlp --batch-size 8 --steps 2 --limit-train 64 --limit-test 16 --quiet)
  start=$(date +%s)
  CLTRAIN_CACHE_DIR=$auto CLTRAIN_AUTOTUNE=6 timeout 300 "${train[@]}" >"$tmp/out" 2>"$tmp/err"
  rc=$? secs=$(($(date +%s) - start))
  adb=$(ls "$auto"/gemm-tune-*.txt 2>/dev/null | head -1)
  if [[ $rc -eq 0 && -n $adb ]] && grep -q '^end [0-9]' "$adb" && grep -q 'no tuning database for .*at most 6 s, once (CLTRAIN_AUTOTUNE=0 skips it)' "$tmp/err" &&
     grep -qE 'kernel search done in [0-9.]+ s|too long to search within 6 s' "$tmp/err" && (( secs < 6 + 60 )); then
    ok "a first training run searches once within CLTRAIN_AUTOTUNE=6 ($secs s in all): $(grep -E 'search done|too long' "$tmp/err" | cut -c1-120)"
  else
    notok "first-run search" "exit $rc after $secs s, db '${adb:-none}'" "$(head -4 "$tmp/err")"
  fi
  CLTRAIN_CACHE_DIR=$auto CLTRAIN_AUTOTUNE=6 timeout 300 "${train[@]}" >"$tmp/out" 2>"$tmp/err"
  rc=$?
  if [[ $rc -eq 0 ]] && ! grep -q 'tuning database for\|kernel search' "$tmp/err"; then ok "the second run finds the database and does not search"
  else notok "second run searched again" "exit $rc" "$(head -3 "$tmp/err")"; fi
  rm -f "$auto"/gemm-tune-*.txt
  CLTRAIN_CACHE_DIR=$auto CLTRAIN_AUTOTUNE=0 timeout 300 "${train[@]}" >"$tmp/out" 2>"$tmp/err"
  rc=$?
  if [[ $rc -eq 0 ]] && ! ls "$auto"/gemm-tune-*.txt >/dev/null 2>&1 && ! grep -q 'kernel search' "$tmp/err"; then ok "CLTRAIN_AUTOTUNE=0: no search, no database"
  else notok "CLTRAIN_AUTOTUNE=0" "exit $rc" "$(head -3 "$tmp/err")"; fi
  for v in abc -1 5000; do
    CLTRAIN_CACHE_DIR=$auto CLTRAIN_AUTOTUNE=$v timeout 60 "${train[@]}" >"$tmp/out" 2>"$tmp/err"
    rc=$?
    if [[ $rc -eq 2 && $(wc -l <"$tmp/err") -eq 1 ]] && grep -q "CLTRAIN_AUTOTUNE='$v'" "$tmp/err"; then ok "CLTRAIN_AUTOTUNE=$v: exit 2, one line"
    else notok "CLTRAIN_AUTOTUNE=$v" "exit $rc" "$(head -3 "$tmp/err")"; fi
  done
  # the same first-run search for the runs whose model is not --model as written: a resumed checkpoint's
  # (searched at its batch), a model fitted to an image folder's or NumPy arrays' shape (the rows show the
  # fitted input: mlp's first product is B x 256 x H*W*C), and under mpirun, where the ranks that share a
  # device search one after another, so only the first of them searches
  : >"$tmp/none"
  firstrun() { # NAME WANT-REGEX CMD...: a search announced once, a database written, the report matching WANT
    local name=$1 want=$2; shift 2
    rm -f "$auto"/gemm-tune-*.txt
    CLTRAIN_CACHE_DIR=$auto CLTRAIN_AUTOTUNE=8 CLTRAIN_DEBUG=1 timeout 300 "$@" >"$tmp/out" 2>"$tmp/err"
    local rc=$? ann adb
    ann=$(grep -c 'no tuning database for .*at most 8 s, once (CLTRAIN_AUTOTUNE=0 skips it)' "$tmp/err")
    adb=$(ls "$auto"/gemm-tune-*.txt 2>/dev/null | head -1)
    if [[ $rc -eq 0 && $ann -eq 1 && -n $adb ]] && grep -qE "$want" "$tmp/err"; then ok "first-run search: $name"
    else notok "first-run search: $name" "exit $rc, $ann announcements (want 1), db '${adb:-none}', report matching '$want': $(grep -cE "$want" "$tmp/err")" \
      "$(grep -E 'cltrain:|cltrain tune' "$tmp/err" | head -4)"; fi
  }
  CLTRAIN_CACHE_DIR=$auto CLTRAIN_AUTOTUNE=0 timeout 300 "${train[@]}" --checkpoint "$tmp/r.ckpt" >/dev/null 2>&1
  firstrun "--resume searches the checkpoint's model at its batch" '^cltrain tune: model mlp, batch 8,' \
    "$bin" fashion-mnist --data "$fm" --resume "$tmp/r.ckpt" --steps 4 --limit-test 16 --quiet
  py=${CLTRAIN_NUMPY_PYTHON:-/usr/bin/python3} # Debian's python3-numpy, as arrays.sh
  if "$py" -c 'import numpy' 2>/dev/null; then
    "$py" - "$tmp" <<'PY'
import numpy as np, struct, sys, os
d = sys.argv[1]
r = np.random.default_rng(5)
x = r.integers(0, 256, size=(48, 9, 9), dtype=np.uint8)
np.save(os.path.join(d, "x.npy"), x); np.save(os.path.join(d, "y.npy"), (np.arange(48) % 3).astype(np.uint8))
def bmp(path, px):  # 24-bit BMP, rows bottom-up, padded to 4 bytes
    h, w = px.shape[:2]; row = (w * 3 + 3) & ~3
    data = b"".join(px[y, :, ::-1].tobytes().ljust(row, b"\0") for y in range(h - 1, -1, -1))
    hdr = struct.pack("<2sIHHI", b"BM", 54 + len(data), 0, 0, 54) + struct.pack("<IiiHHIIiiII", 40, w, h, 1, 24, 0, len(data), 2835, 2835, 0, 0)
    open(path, "wb").write(hdr + data)
for c in "ab":
    os.makedirs(os.path.join(d, "img", c))
    for i in range(24): bmp(os.path.join(d, "img", c, f"{i}.bmp"), r.integers(0, 256, size=(14, 14, 3), dtype=np.uint8))
PY
    firstrun "images searches the model fitted to the folder (12x12x1)" 'NN +8x256 +x144 ' \
      "$bin" images "$tmp/img" --size 12 --channels 1 --model mlp --batch-size 8 --steps 2 --quiet
    firstrun "arrays searches the model fitted to the arrays (9x9x1)" 'NN +8x256 +x81 ' \
      "$bin" arrays "$tmp/x.npy" "$tmp/y.npy" --model mlp --batch-size 8 --steps 2 --quiet
  else
    notok "first-run search: images and arrays" "$py with NumPy is needed to write the test folder and arrays (python3-numpy)"
  fi
  if command -v mpirun >/dev/null && "$bin" --version | grep -q "over mpi"; then
    OMPI_MCA_btl=${OMPI_MCA_btl:-self,vader} firstrun "mpirun -np 2 on one device: rank 0 searches, rank 1 finds its database" \
      '^cltrain: rank 0 \([^)]*\): no tuning database' \
      mpirun --allow-run-as-root --oversubscribe -np 2 "${train[@]}"
  else
    notok "first-run search under mpirun" "cltrain built without MPI or no mpirun"
  fi
elif [[ ${CI:-} == true ]]; then
  notok "first-run search" "Fashion-MNIST missing under CI ($fm)"
else
  echo "ok $((n += 1)) - first-run search # SKIP Fashion-MNIST not installed ($fm)"
fi

# --- bad input: exit 2, one line ---
for args in "--budget abc" "--budget 0" "--budget"; do
  # shellcheck disable=SC2086
  timeout 60 "$bin" tune --model mlp $args >"$tmp/out" 2>"$tmp/err"
  rc=$?
  if [[ $rc -eq 2 && $(wc -l <"$tmp/err") -eq 1 ]] && grep -q -- '--budget' "$tmp/err"; then ok "tune $args: exit 2, one line"
  else notok "tune $args" "exit $rc" "$(head -3 "$tmp/err")"; fi
done
CLTRAIN_GEMM=local,64,64,16,3,4,4,128 timeout 60 "${probe[@]}" >"$tmp/out" 2>"$tmp/err"
rc=$?
if [[ $rc -eq 2 && $(wc -l <"$tmp/err") -eq 1 ]] && grep -q 'CLTRAIN_GEMM=.*WPTM' "$tmp/err"; then ok "CLTRAIN_GEMM with a bad micro-tile: exit 2, one line"
else notok "CLTRAIN_GEMM bad" "exit $rc" "$(head -3 "$tmp/err")"; fi
CLTRAIN_GEMM=local,32,32,16,4,4,4,128 CLTRAIN_DEBUG=2 timeout 120 "${probe[@]}" >"$tmp/out" 2>"$tmp/err"
rc=$?
if [[ $rc -eq 0 ]] && grep -q 'gemm_local' "$tmp/err" && ! grep -q 'ignored' "$tmp/err"; then ok "CLTRAIN_GEMM=local,... runs the local kernel and bypasses the database"
else notok "CLTRAIN_GEMM local" "exit $rc" "$(grep -m3 -E 'tuning|error' "$tmp/err")"; fi
echo "1..$n"
