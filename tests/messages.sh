#!/usr/bin/env bash
# messages.sh: what cltrain tells the user is true. Every command answers
# --help (exit 0) with lists generated from the tables (models, optimizers,
# data sets, each command's default model); an option a command does not
# use is refused with one line that says why and who takes it, never
# ignored; summaries of short runs say what is known; --quiet keeps the
# results. Prints TAP.
set -u
here=$(cd "$(dirname "$0")/.." && pwd)
build=${CLTRAIN_BUILD:-build}
[[ $build == /* ]] || build=$here/$build
bin=$build/cltrain
fm=/usr/share/datasets/fashion-mnist
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
n=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
notok() { n=$((n + 1)); echo "not ok $n - $1"; shift; for l in "$@"; do echo "# $l"; done; }
# expect_fail NAME CODE PATTERN -- ARGS...: exit CODE, exactly one stderr line matching PATTERN
expect_fail() {
  local name=$1 code=$2 pat=$3; shift 4
  timeout 120 "$@" >"$tmp/out" 2>"$tmp/err"
  local rc=$? lines
  lines=$(wc -l <"$tmp/err")
  if [[ $rc -eq $code && $lines -eq 1 ]] && grep -qE -- "$pat" "$tmp/err"; then ok "$name"
  else notok "$name" "exit $rc (want $code), $lines stderr lines (want 1), pattern '$pat'" "$(head -5 "$tmp/err")"; fi
}

# --- every command answers --help ---
for c in devices mnist fashion-mnist cifar10 cifar100 images arrays pack eval predict export import bench tune; do
  out=$("$bin" $c --help 2>&1); rc=$?
  if [[ $rc -eq 0 && $out == Usage:\ cltrain\ $c* ]]; then ok "$c --help"; else notok "$c --help" "exit $rc" "$(echo "$out" | head -2)"; fi
done
out=$("$bin" eval some.ckpt --help 2>&1); rc=$?
if [[ $rc -eq 0 && $out == Usage:\ cltrain\ eval* ]]; then ok "eval CKPT --help"; else notok "eval CKPT --help" "exit $rc"; fi

# --- the lists in --help come from the tables ---
help=$("$bin" --help)
missing=""
for f in "$here"/models/*.cfg; do
  m=$(basename "$f" .cfg)
  grep -qE "(^|[ ,:])$m(,| |$)" <<<"$help" || missing+=" $m"
done
if [[ -z $missing ]]; then ok "--help lists every built-in model"; else notok "--help lists every built-in model" "missing:$missing"; fi
for pair in mnist:mnist-cnn fashion-mnist:mnist-cnn cifar10:cifar-fast cifar100:cifar-fast images:vgg-small; do
  c=${pair%%:*} m=${pair#*:}
  if "$bin" "$c" --help | grep -q "^Default model: $m\.$" && "$bin" "$c" --help | grep -qE "\[$m\]$"; then
    ok "$c --help: default model $m"
  else notok "$c --help: default model $m" "$("$bin" "$c" --help | grep -E 'model' | head -3)"; fi
done
# a default model whose [net] gives training defaults: --help lists them, from the .cfg
h=$("$bin" cifar10 --help | tr '\n' ' ')
if [[ $h == *"Its [net] gives the training defaults"*"--batch-size 1024, --drop-last, --epochs 10, --optimizer nesterov, --lr 1.5,"* ]] &&
   "$bin" cifar100 --help | grep -q "^Its class count follows --labels" && ! "$bin" mnist --help | grep -q "gives the training defaults"; then
  ok "cifar10 and cifar100 --help: cifar-fast's [net] training defaults; cifar100's class count; none for mnist-cnn"
else notok "--help lists the default model's [net] training defaults" "$("$bin" cifar10 --help | sed -n 3,8p)"; fi
for o in adam adamw sgd nesterov; do
  if grep -qE " $o: " <<<"$help"; then ok "--help describes optimizer $o"; else notok "--help describes optimizer $o"; fi
done
for c in mnist fashion-mnist cifar10 cifar100 images arrays devices pack eval predict export import bench tune; do
  grep -qE "^  $c( |$)" <<<"$help" || notok "--help lists command $c"
done
ok "--help lists every command"

# --- options a command does not use are refused, naming who takes them ---
mkdir -p "$tmp/set"
expect_fail "--checkpoint-every without --checkpoint" 2 "checkpoint-every 5 needs --checkpoint" -- "$bin" fashion-mnist --checkpoint-every 5
expect_fail "--keep without --checkpoint" 2 "keep 3 needs --checkpoint" -- "$bin" fashion-mnist --keep 3
expect_fail "--labels on cifar10" 2 "labels does not apply to cifar10.*one set of labels.*cifar100" -- "$bin" cifar10 --labels coarse
for o in "--size 32" "--strict" "--channels 1" "--val-split 0.2"; do
  expect_fail "$o on fashion-mnist" 2 "${o%% *} does not apply to fashion-mnist.*cltrain images" -- "$bin" fashion-mnist $o
done
expect_fail "--top on fashion-mnist" 2 "top is an option of .cltrain predict." -- "$bin" fashion-mnist --top 3
expect_fail "--confusion-png on fashion-mnist" 2 "confusion-png is an option of .cltrain eval." -- "$bin" fashion-mnist --confusion-png x.png
expect_fail "--budget on a training command" 2 "budget is an option of .cltrain tune." -- "$bin" mnist --budget 5
expect_fail "--tfrecord-image on a training command" 2 "tfrecord-image does not apply to fashion-mnist.*cltrain images" -- "$bin" fashion-mnist --tfrecord-image img
expect_fail "--resident on cifar10 names why" 2 "resident does not apply to cifar10.*standardised" -- "$bin" cifar10 --resident --augment none
expect_fail "--augment on fashion-mnist" 2 "augment does not apply to fashion-mnist" -- "$bin" fashion-mnist --augment basic
expect_fail "eval refuses a training option" 2 "epochs is an option of the training commands, not of .cltrain eval." -- "$bin" eval x.ckpt --epochs 2
expect_fail "--data on images" 2 "data does not apply to images" -- "$bin" images "$tmp/set" --data "$tmp/set"
if [[ -x $build/tools/make-font-dataset ]] && "$build/tools/make-font-dataset" --chars 8 --size 16 "$tmp/fonts" >/dev/null 2>&1; then
  mkdir -p "$tmp/split"; cp -r "$tmp/fonts" "$tmp/split/train"; cp -r "$tmp/fonts" "$tmp/split/test"
  expect_fail "--val-split with train/ and test/" 2 "val-split 0.2: .*train/ and test/" -- "$bin" images "$tmp/split" --size 16 --val-split 0.2
else
  notok "--val-split with train/ and test/" "make-font-dataset failed (fonts-arphic-*, fonts-wqy-*)"
fi

# --- short runs: what is known, and "too few steps to measure" for the rest ---
if [[ -f $fm/train-images-idx3-ubyte.gz ]]; then
  for s in 1 2 3; do
    "$bin" fashion-mnist --model mlp --steps $s --limit-test 50 >"$tmp/short.out" 2>&1; rc=$?
    bad=$(grep -E -- "-1 producer|[^0-9.]0 images/s|efficiency 0\.00|trained 1 steps" "$tmp/short.out")
    if [[ $rc -eq 0 && -z $bad ]] && grep -q "^trained $s step.*too few steps to measure" "$tmp/short.out"; then
      ok "--steps $s: the summary says what it could not measure"
    else notok "--steps $s: the summary says what it could not measure" "exit $rc" "$bad" "$(tail -2 "$tmp/short.out")"; fi
  done
  "$bin" fashion-mnist --model mlp --steps 3 --producers 0 --limit-test 50 >"$tmp/short.out" 2>&1
  if grep -qE "^trained 3 steps, [1-9][0-9]* images/s" "$tmp/short.out" && grep -qE "efficiency (0\.[1-9]|1\.)" "$tmp/short.out"; then
    ok "--steps 3 --producers 0: rates measured"
  else notok "--steps 3 --producers 0: rates measured" "$(tail -2 "$tmp/short.out")"; fi
  # --quiet drops the progress and start-up lines, never the results
  "$bin" fashion-mnist --model mlp --steps 60 --progress-every 10 --limit-test 50 --quiet >"$tmp/quiet.out" 2>&1; rc=$?
  if [[ $rc -eq 0 ]] && grep -q "^epoch 1: test: 50 images, .*accuracy" "$tmp/quiet.out" && grep -q "^per-class accuracy" "$tmp/quiet.out" &&
     grep -q "^trained 60 steps" "$tmp/quiet.out" && ! grep -qE "^epoch 1 step|^device |^fashion-mnist: " "$tmp/quiet.out"; then
    ok "--quiet keeps the test accuracy and the summary, drops the progress"
  else notok "--quiet keeps the test accuracy and the summary, drops the progress" "exit $rc" "$(head -5 "$tmp/quiet.out")"; fi
else
  notok "short runs" "no Fashion-MNIST at $fm (dataset-fashion-mnist)"
fi

# --- under mpirun, rank 0 alone prints the data-set line ---
if command -v mpirun >/dev/null && "$bin" --version | grep -q "over mpi" && [[ -f $fm/train-images-idx3-ubyte.gz ]]; then
  timeout 300 mpirun --allow-run-as-root --oversubscribe -np 2 "$bin" fashion-mnist --model mlp --batch-size 32 --steps 2 \
    --limit-test 64 >"$tmp/mpi.out" 2>&1; rc=$?
  lines=$(grep -c "^fashion-mnist: .* training and .* test images" "$tmp/mpi.out")
  if [[ $rc -eq 0 && $lines -eq 1 ]]; then ok "mpirun -np 2: one data-set line"
  else notok "mpirun -np 2: one data-set line" "exit $rc, $lines data-set lines" "$(head -3 "$tmp/mpi.out")"; fi
else
  notok "mpirun -np 2: one data-set line" "needs an MPI build, mpirun and Fashion-MNIST"
fi

# --- bench train says what it does while it times the cold start ---
out=$(timeout 300 "$bin" bench train --model mlp --batch-size 16 --steps 2 2>&1); rc=$?
if [[ $rc -eq 0 ]] && grep -B1 "^start-up to first step done" <<<"$out" | grep -q "^timing start-up: one cold start"; then
  ok "bench train says it is timing the start-up before it does"
else notok "bench train says it is timing the start-up before it does" "exit $rc" "$(tail -3 <<<"$out")"; fi

# --- bench pipeline: compute measured as the rows are, and auto's choice shown beside its row ---
if [[ -f $fm/train-images-idx3-ubyte.gz ]]; then
  out=$(timeout 300 "$bin" bench pipeline --model mlp --steps 8 2>&1); rc=$?
  rows=$(grep -c "pipelined, auto" <<<"$out")
  explained=$(grep -cE "^ +auto: ceil\(1\.5 x compute [0-9]+ / one producer [0-9]+ images/s.*\) = [0-9]+" <<<"$out")
  agree=1
  while read -r row; do
    p=$(awk '{ print $(NF-1) }' <<<"$row")
    line=$(grep -A1 -F -- "$row" <<<"$out" | tail -1)
    [[ $line =~ \)\ =\ ([0-9]+) && ${BASH_REMATCH[1]} == "$p" ]] || agree=0
  done < <(grep "pipelined, auto" <<<"$out")
  if [[ $rc -eq 0 && $rows -eq 3 && $explained -eq 3 && $agree -eq 1 ]] && grep -q "compute [0-9]* images/s (resident, after a warm-up run)" <<<"$out"; then
    ok "bench pipeline: compute from a warm resident run; each auto row shows how it chose"
  else notok "bench pipeline: compute from a warm resident run; each auto row shows how it chose" "exit $rc, $rows auto rows, $explained explained, agree $agree" "$(head -3 <<<"$out")"; fi
fi

# --- a failed download leaves no folder behind ---
mkdir -p "$tmp/dl"
(cd "$tmp/dl" && CLTRAIN_MNIST_MIRROR=http://127.0.0.1:9/ "$bin" mnist >/dev/null 2>&1); rc=$?
if [[ $rc -eq 2 && -z $(ls -A "$tmp/dl") ]]; then ok "a failed download removes the folders it created"
else notok "a failed download removes the folders it created" "exit $rc, left: $(ls -R "$tmp/dl" | head -3)"; fi

# --- predict and eval: class names, data paths, advice that fits the command ---
if [[ -f $fm/train-images-idx3-ubyte.gz && -x $build/tools/make-font-dataset ]]; then
  mkdir -p "$tmp/fmcopy" "$tmp/run" "$tmp/elsewhere"
  cp "$fm"/*.gz "$tmp/fmcopy/"
  "$bin" fashion-mnist --data "$tmp/fmcopy" --model mlp --steps 3 --limit-test 20 --quiet --checkpoint "$tmp/fm.ckpt" >/dev/null 2>&1
  rm -rf "$tmp/fmcopy"
  img=$(find "$tmp/fonts" -name '*.png' | head -1)
  out=$("$bin" predict "$tmp/fm.ckpt" "$img" --top 3 2>&1); rc=$?
  if [[ $rc -eq 0 ]] && grep -qE "(T-shirt/top|Trouser|Pullover|Dress|Coat|Sandal|Shirt|Sneaker|Bag|Ankle boot) [0-9.]+%" <<<"$out" &&
     ! grep -q "class [0-9]" <<<"$out"; then ok "predict names the classes from the checkpoint (data set gone)"
  else notok "predict names the classes from the checkpoint (data set gone)" "exit $rc" "$out"; fi
  # a set trained from a relative folder evaluates from any folder
  "$build/tools/make-font-dataset" --chars 20 --size 16 "$tmp/run/glyphs" >/dev/null 2>&1
  (cd "$tmp/run" && "$bin" images glyphs --size 16 --model mlp --steps 2 --quiet --checkpoint g.ckpt >/dev/null 2>&1)
  out=$(cd "$tmp/elsewhere" && "$bin" eval "$tmp/run/g.ckpt" 2>&1); rc=$?
  if [[ $rc -eq 0 ]] && grep -q "^test: " <<<"$out"; then ok "eval from another folder finds a relative data set"
  else notok "eval from another folder finds a relative data set" "exit $rc" "$out"; fi
  mv "$tmp/run" "$tmp/moved"
  expect_fail "eval of a moved data set suggests --data" 2 "glyphs: no such folder.*give --data" -- "$bin" eval "$tmp/moved/g.ckpt"
  # the shapes differ: advice eval can follow (it has no --model)
  mkdir -p "$tmp/idx32"
  idx() { { printf '\x00\x00\x08\x03'; printf "%08x%08x%08x" 4 32 32 | xxd -r -p; head -c 4096 /dev/zero; } >"$1"; }
  lab() { { printf '\x00\x00\x08\x01'; printf "%08x" 4 | xxd -r -p; printf '\x00\x01\x02\x03'; } >"$1"; }
  idx "$tmp/idx32/t10k-images-idx3-ubyte"; lab "$tmp/idx32/t10k-labels-idx1-ubyte"
  idx "$tmp/idx32/train-images-idx3-ubyte"; lab "$tmp/idx32/train-labels-idx1-ubyte"
  expect_fail "eval of other-shaped data: advice without --model" 2 "expects 28x28x1 input.*32x32x1.*give --data the data set" -- "$bin" eval "$tmp/fm.ckpt" --data "$tmp/idx32"
  grep -q "another --model" "$tmp/err" && notok "eval never suggests --model" || ok "eval never suggests --model"
  # --tta flip where training never flips: a warning
  "$bin" fashion-mnist --model mlp --steps 2 --limit-test 20 --tta flip --quiet >/dev/null 2>"$tmp/tta.err"
  if grep -q "warning: --tta flip.*does not flip" "$tmp/tta.err"; then ok "training with --tta flip on fashion-mnist warns"
  else notok "training with --tta flip on fashion-mnist warns" "$(cat "$tmp/tta.err")"; fi
  "$bin" eval "$tmp/fm.ckpt" --data "$fm" --limit-test 20 --tta flip >/dev/null 2>"$tmp/tta.err"
  if grep -q "warning: --tta flip.*fashion-mnist training never flips" "$tmp/tta.err"; then ok "eval --tta flip of a fashion-mnist checkpoint warns"
  else notok "eval --tta flip of a fashion-mnist checkpoint warns" "$(cat "$tmp/tta.err")"; fi
  # figures: the confusion matrix with names, counts and a legend; the curves of the run
  # (pixels sampled: the title row has dark text, a diagonal cell is dark blue, the legend bar runs light to dark)
  out=$("$bin" eval "$tmp/fm.ckpt" --data "$fm" --limit-test 500 --confusion-png "$tmp/conf.png" 2>&1); rc=$?
  size=$(python3 -c "import struct,sys; d=open(sys.argv[1],'rb').read(24); print(*struct.unpack('>II', d[16:24]))" "$tmp/conf.png" 2>/dev/null)
  if [[ $rc -eq 0 ]] && grep -q "^wrote the confusion matrix to $tmp/conf.png" <<<"$out" && [[ ${size% *} -ge 600 && ${size#* } -ge 600 ]]; then
    ok "eval --confusion-png draws a labelled figure and says so ($size)"
  else notok "eval --confusion-png draws a labelled figure and says so" "exit $rc, size '$size'" "$out"; fi
  "$bin" fashion-mnist --model mlp --steps 40 --progress-every 5 --eval-every 20 --limit-test 100 --quiet --curves-png "$tmp/curves.png" >"$tmp/c.out" 2>&1; rc=$?
  size=$(python3 -c "import struct,sys; d=open(sys.argv[1],'rb').read(24); print(*struct.unpack('>II', d[16:24]))" "$tmp/curves.png" 2>/dev/null)
  if [[ $rc -eq 0 && $size == "1100 480" ]] && grep -q "^wrote the loss and accuracy curves to" "$tmp/c.out" && [[ -z $(ls /tmp | grep -c cltrain-curves- | grep -v '^0$') ]]; then
    ok "--curves-png draws the loss and accuracy curves ($size)"
  else notok "--curves-png draws the loss and accuracy curves" "exit $rc, size '$size'" "$(tail -2 "$tmp/c.out")"; fi
  "$bin" fashion-mnist --model mlp --steps 10 --limit-test 20 --quiet --curves-png "$tmp/nodir/c.png" >/dev/null 2>"$tmp/err"; rc=$?
  if [[ $rc -eq 2 && $(wc -l <"$tmp/err") -eq 1 ]] && grep -q "nodir" "$tmp/err"; then ok "--curves-png into a missing folder: one line before training"
  else notok "--curves-png into a missing folder: one line" "exit $rc" "$(cat "$tmp/err")"; fi
else
  notok "predict and eval messages" "needs Fashion-MNIST at $fm and build/tools/make-font-dataset"
fi

echo "1..$n"
