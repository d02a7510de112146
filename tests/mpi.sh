#!/usr/bin/env bash
# mpi.sh: data-parallel training under mpirun on PoCL (2 ranks on this CPU).
# Equivalence: 2 ranks x batch 64 train the same weights as 1 rank x batch
# 128; the pipelined and synchronous inputs agree bit for bit; resume is
# exact; a killed rank ends the whole job within 30 s; bad input exits 2.
# Prints TAP. Needs an MPI build (mpicc) and mpirun (openmpi-bin).
set -u
here=$(cd "$(dirname "$0")/.." && pwd)
build=${CLTRAIN_BUILD:-build}
[[ $build == /* ]] || build=$here/$build
bin=$build/cltrain
diffbin=$build/tools/ckpt-diff
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
n=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
notok() { n=$((n + 1)); echo "not ok $n - $1"; shift; for l in "$@"; do echo "# $l"; done; }

if ! command -v mpirun >/dev/null || ! "$bin" --version | grep -q "over mpi"; then
  if [[ -n ${CI:-} ]]; then echo "1..1"; notok "MPI build and mpirun present (CI must install libopenmpi-dev openmpi-bin)"; exit 0; fi
  echo "1..0 # SKIP cltrain built without MPI or no mpirun (install libopenmpi-dev openmpi-bin, rebuild)"
  exit 0
fi
export OMPI_MCA_rmaps_base_oversubscribe=1
# one node: shared memory between the ranks (Open MPI's TCP transport, which
# it would also try, takes its locks in an order ThreadSanitizer reports)
export OMPI_MCA_btl=${OMPI_MCA_btl:-self,vader}
mpi() { timeout 300 mpirun --allow-run-as-root --oversubscribe "$@"; }
fm=(fashion-mnist --quiet)

# rel A B: the relative parameter difference printed by ckpt-diff
rel() { "$diffbin" "$1" "$2" | awk 'NR == 1 { sub(/,/, "", $3); print $3 }'; }
lt() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a < b) }'; }

# 1. equivalence, mlp (Adam, 50 steps)
mpi -np 2 "$bin" "${fm[@]}" --model mlp --batch-size 64 --steps 50 --producers 0 --checkpoint "$tmp/mlp2.ckpt" >"$tmp/o1" 2>&1
"$bin" "${fm[@]}" --model mlp --batch-size 128 --steps 50 --producers 0 --checkpoint "$tmp/mlp1.ckpt" >>"$tmp/o1" 2>&1
d=$(rel "$tmp/mlp2.ckpt" "$tmp/mlp1.ckpt")
if [[ -n $d ]] && lt "$d" 1e-5; then ok "mlp: 2 ranks x 64 = 1 rank x 128 after 50 steps (relative difference $d)"
else notok "mlp: 2 ranks x 64 = 1 rank x 128 after 50 steps" "relative difference '$d' (want < 1e-5)" "$(tail -5 "$tmp/o1")"; fi

# 2. equivalence, mnist-cnn: as close as float32 summation order allows. The
# yardstick is one rank against itself with other split-K chunks (the same
# sums in other orders), after the same 50 steps: the larger of two, since
# Adam amplifies a rounding difference by a factor that depends on where it
# falls (seen here: chunks of 256 and 1024 gave 3.2e-4 and 1.3e-3, and
# 2 ranks 1.2e-3; after 1 step all three were 0.6-1.0e-7).
mpi -np 2 "$bin" "${fm[@]}" --batch-size 64 --steps 50 --producers 0 --checkpoint "$tmp/cnn2.ckpt" >"$tmp/o2" 2>&1
"$bin" "${fm[@]}" --batch-size 128 --steps 50 --producers 0 --checkpoint "$tmp/cnn1.ckpt" >>"$tmp/o2" 2>&1
CLTRAIN_GEMM=6,2,256 "$bin" "${fm[@]}" --batch-size 128 --steps 50 --producers 0 --checkpoint "$tmp/cnn1b.ckpt" >>"$tmp/o2" 2>&1
CLTRAIN_GEMM=6,2,1024 "$bin" "${fm[@]}" --batch-size 128 --steps 50 --producers 0 --checkpoint "$tmp/cnn1c.ckpt" >>"$tmp/o2" 2>&1
d=$(rel "$tmp/cnn2.ckpt" "$tmp/cnn1.ckpt")
floor=$(awk -v a="$(rel "$tmp/cnn1b.ckpt" "$tmp/cnn1.ckpt")" -v b="$(rel "$tmp/cnn1c.ckpt" "$tmp/cnn1.ckpt")" \
        'BEGIN { if (a == "" || b == "") exit; print (a + 0 > b + 0) ? a : b }')
bound=$(awk -v f="${floor:-0}" 'BEGIN { b = 2 * f; if (b < 1e-5) b = 1e-5; print b }')
if [[ -n $d ]] && lt "$d" "$bound"; then ok "mnist-cnn: 2 ranks x 64 vs 1 rank x 128: $d (one rank, other summation order: $floor)"
else notok "mnist-cnn: 2 ranks vs 1 rank" "relative difference '$d', bound $bound (rounding floor '$floor')" "$(tail -5 "$tmp/o2")"; fi

# 2b. residual networks: the shortcut's gradient routing under data
# parallelism. Without batch norm (whose batch statistics are per rank by
# design) 2 ranks x 64 = 1 rank x 128 to float rounding, the yardstick as
# in 2; resnet20 itself runs on 2 ranks and its ranks end in agreement.
"$build/tools/make-cifar" "$tmp/cf" --train 512 --test 50 --seed 2 >/dev/null
printf '%s\n' "[net]" height=32 width=32 channels=3 classes=10 "[conv]" filters=8 size=3 pad=1 activation=relu \
  "[conv]" filters=8 size=3 pad=1 "[shortcut]" from=-2 activation=relu "[conv]" filters=16 size=3 stride=2 pad=1 activation=relu \
  "[shortcut]" from=-2 activation=relu "[avgpool]" "[dense]" outputs=10 "[softmax]" >"$tmp/res.cfg"
cf=(cifar10 --data "$tmp/cf" --quiet --producers 0 --steps 3 --limit-test 50 --augment none)
# res-b: the stride-2 shortcut projects instead (projection=1: a 1x1
# convolution whose weights are all-reduced like any other layer's)
awk '{ print } /^\[shortcut\]$/ && ++k == 2 { print "projection=1" }' "$tmp/res.cfg" >"$tmp/res-b.cfg"
for net in res res-b; do
  what="residual net"
  [[ $net == res-b ]] && what="residual net, projection shortcut"
  mpi -np 2 "$bin" "${cf[@]}" --model "$tmp/$net.cfg" --batch-size 64 --checkpoint "$tmp/${net}2.ckpt" >"$tmp/o2b" 2>&1
  "$bin" "${cf[@]}" --model "$tmp/$net.cfg" --batch-size 128 --checkpoint "$tmp/${net}1.ckpt" >>"$tmp/o2b" 2>&1
  CLTRAIN_GEMM=6,2,256 "$bin" "${cf[@]}" --model "$tmp/$net.cfg" --batch-size 128 --checkpoint "$tmp/${net}1b.ckpt" >>"$tmp/o2b" 2>&1
  d=$(rel "$tmp/${net}2.ckpt" "$tmp/${net}1.ckpt")
  floor=$(rel "$tmp/${net}1b.ckpt" "$tmp/${net}1.ckpt")
  bound=$(awk -v f="${floor:-0}" 'BEGIN { b = 2 * f; if (b < 1e-5) b = 1e-5; print b }')
  if [[ -n $d ]] && lt "$d" "$bound"; then ok "$what: 2 ranks x 64 vs 1 rank x 128: $d (one rank, other summation order: $floor)"
  else notok "$what: 2 ranks vs 1 rank" "relative difference '$d', bound $bound (rounding floor '$floor')" "$(tail -5 "$tmp/o2b")"; fi
done
mpi -np 2 "$bin" "${cf[@]}" --model resnet20 --batch-size 16 --checkpoint "$tmp/rn2.ckpt" >"$tmp/o2c" 2>&1
rc=$?
if [[ $rc -eq 0 && -s $tmp/rn2.ckpt ]] && "$bin" eval "$tmp/rn2.ckpt" --limit-test 50 >/dev/null 2>&1; then
  ok "resnet20: 3 steps on 2 ranks, the checkpoint evaluates"
else notok "resnet20 on 2 ranks" "exit $rc" "$(tail -5 "$tmp/o2c")"; fi

# 3. producers change nothing, also with 2 ranks; the log states the global batch
mpi -np 2 "$bin" fashion-mnist --model mlp --batch-size 64 --steps 30 --producers 2 --checkpoint "$tmp/p2.ckpt" --progress-every 10 >"$tmp/o3" 2>&1
mpi -np 2 "$bin" "${fm[@]}" --model mlp --batch-size 64 --steps 30 --resident --checkpoint "$tmp/r2.ckpt" >>"$tmp/o3" 2>&1
mpi -np 2 "$bin" "${fm[@]}" --model mlp --batch-size 64 --steps 30 --producers 0 --checkpoint "$tmp/s2.ckpt" >>"$tmp/o3" 2>&1
if cmp -s "$tmp/p2.ckpt" "$tmp/s2.ckpt" && cmp -s "$tmp/r2.ckpt" "$tmp/s2.ckpt"; then
  ok "2 ranks: producers, resident and synchronous input give identical checkpoints"
else notok "2 ranks: producers, resident and synchronous input give identical checkpoints" "$("$diffbin" "$tmp/p2.ckpt" "$tmp/s2.ckpt")" "$(tail -5 "$tmp/o3")"; fi
if grep -q "2 ranks x batch 64 = global batch 128" "$tmp/o3" && grep -q "all-reduce .* ms/step" "$tmp/o3" &&
   [[ $(grep -c "^epoch 1 step" "$tmp/o3") -eq 3 ]]; then
  ok "rank 0 alone prints: global batch, all-reduce time in the progress lines"
else notok "rank 0 alone prints: global batch, all-reduce time in the progress lines" "$(head -20 "$tmp/o3")"; fi

# 4. resume is exact with 2 ranks; another rank count is refused
mpi -np 2 "$bin" "${fm[@]}" --model mlp --batch-size 64 --steps 20 --producers 0 --checkpoint "$tmp/full.ckpt" >"$tmp/o4" 2>&1
mpi -np 2 "$bin" "${fm[@]}" --model mlp --batch-size 64 --steps 10 --producers 0 --checkpoint "$tmp/half.ckpt" >>"$tmp/o4" 2>&1
mpi -np 2 "$bin" "${fm[@]}" --steps 20 --producers 0 --resume "$tmp/half.ckpt" --checkpoint "$tmp/half.ckpt" >>"$tmp/o4" 2>&1
if cmp -s "$tmp/full.ckpt" "$tmp/half.ckpt"; then ok "2 ranks: 10 steps + resume 10 = 20 steps, byte for byte"
else notok "2 ranks: 10 steps + resume 10 = 20 steps" "$("$diffbin" "$tmp/full.ckpt" "$tmp/half.ckpt")" "$(tail -5 "$tmp/o4")"; fi
"$bin" "${fm[@]}" --steps 30 --resume "$tmp/half.ckpt" >"$tmp/o5" 2>"$tmp/e5"
rc=$?
if [[ $rc -eq 2 ]] && [[ $(wc -l <"$tmp/e5") -eq 1 ]] && grep -q "trained with 2 ranks" "$tmp/e5"; then ok "resuming a 2-rank checkpoint on 1 rank: exit 2, one line"
else notok "resuming a 2-rank checkpoint on 1 rank: exit 2, one line" "exit $rc" "$(cat "$tmp/e5")"; fi

# 5. --device lists one device per rank; a rank without a usable one stops the job
mpi -np 2 "$bin" fashion-mnist --model mlp --steps 2 --device 0:0,0:0 >"$tmp/o8" 2>&1
rc=$?
mpi -np 2 "$bin" fashion-mnist --model mlp --steps 2 --device 0:0,7:7 >"$tmp/o9" 2>"$tmp/e9"
rc9=$?
if [[ $rc -eq 0 && $(grep -c "^  rank [01]: .*device 0:0" "$tmp/o8") -eq 2 && $rc9 -eq 2 ]] && grep -q "rank 1: --device '7:7': no such device" "$tmp/e9"; then
  ok "--device 0:0,0:0 gives each rank its device; a bad entry for rank 1 ends the job with exit 2"
else notok "--device per rank" "exits $rc $rc9" "$(grep rank "$tmp/o8")" "$(head -3 "$tmp/e9")"; fi

# 6. bad input under mpirun: exit 2 and the message, no hang
mpi -np 2 "$bin" fashion-mnist --epochs 0 >"$tmp/o6" 2>"$tmp/e6"
rc=$?
if [[ $rc -eq 2 ]] && grep -q "cltrain: --epochs 0: expected" "$tmp/e6"; then ok "bad option under mpirun: exit 2 with the message"
else notok "bad option under mpirun: exit 2 with the message" "exit $rc" "$(head -5 "$tmp/e6")"; fi

# 7. fault: kill -9 one rank mid-training; every process is gone within 30 s, exit non-zero
mpirun --allow-run-as-root --oversubscribe -np 2 "$bin" fashion-mnist --steps 100000 --progress-every 5 --seed 7177 >"$tmp/o7" 2>&1 &
mpid=$!
for _ in $(seq 1 600); do grep -q "step 10/" "$tmp/o7" && break; sleep 0.1; done
victim=""
for p in $(pgrep -f "cltrain fashion-mnist --steps 100000 --progress-every 5 --seed 7177"); do
  [[ $p == "$mpid" ]] && continue
  if tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx "OMPI_COMM_WORLD_RANK=1"; then victim=$p; fi
done
t0=$(date +%s.%N)
[[ -n $victim ]] && kill -9 "$victim"
for _ in $(seq 1 300); do kill -0 "$mpid" 2>/dev/null || break; sleep 0.1; done
wait "$mpid" 2>/dev/null
rc=$?
el=$(echo "$(date +%s.%N) - $t0" | bc)
left=$(pgrep -f "cltrain fashion-mnist --steps 100000 --progress-every 5 --seed 7177" | wc -l)
if [[ -n $victim && $rc -ne 0 && $left -eq 0 ]] && lt "$el" 30; then ok "kill -9 of rank 1: job gone in ${el%.*} s, exit $rc"
else
  notok "kill -9 of rank 1: job gone within 30 s, non-zero exit" "victim '$victim', exit $rc, ${el} s, $left processes left" "$(tail -5 "$tmp/o7")"
  pkill -9 -f "cltrain fashion-mnist --steps 100000 --progress-every 5 --seed 7177"
fi
echo "1..$n"
