#!/usr/bin/env bash
# devices.sh: several OpenCL implementations installed at once. With the ICDs
# of PoCL, Mesa's rusticl and Clover present (tools/setup-deps.sh installs
# them), `cltrain devices` lists every platform, a platform without devices
# (Clover here) is listed without an error, a missing or broken ICD library is
# listed as unusable (never a crash), --device P:D and CLTRAIN_DEVICE pick any
# device, and the default device is a GPU if any, else the one whose tuning
# database records the fastest step, else the first CPU. Prints TAP.
set -u
here=$(cd "$(dirname "$0")/.." && pwd)
build=${CLTRAIN_BUILD:-build}
[[ $build == /* ]] || build=$here/$build
bin=$build/cltrain
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
n=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
notok() { n=$((n + 1)); echo "not ok $n - $1"; shift; for l in "$@"; do echo "# $l"; done; }

vendors=/etc/OpenCL/vendors
for icd in pocl rusticl mesa; do
  if [[ ! -f $vendors/$icd.icd ]]; then
    if [[ -n ${CI:-} ]]; then echo "1..1"; notok "$vendors/$icd.icd present (CI installs pocl-opencl-icd and mesa-opencl-icd)"; exit 0; fi
    echo "1..0 # SKIP $vendors/$icd.icd missing (tools/setup-deps.sh installs pocl-opencl-icd and mesa-opencl-icd)"
    exit 0
  fi
done
# only these three, in this order (whatever else the machine has), plus two broken ones
mkdir "$tmp/vendors"
cp "$vendors/pocl.icd" "$tmp/vendors/1-pocl.icd"
cp "$vendors/rusticl.icd" "$tmp/vendors/2-rusticl.icd"
cp "$vendors/mesa.icd" "$tmp/vendors/3-clover.icd"
export OCL_ICD_VENDORS=$tmp/vendors RUSTICL_ENABLE=llvmpipe CLTRAIN_CACHE_DIR=$tmp/cache
unset CLTRAIN_DEVICE

# --- every platform listed; Clover's empty platform is no error ---
# (the loader's platform order is its own: the indices are read from the list)
out=$("$bin" devices 2>&1)
rc=$?
P=$(sed -n 's/^platform \([0-9]*\): Portable Computing Language.*/\1/p' <<<"$out")
R=$(sed -n 's/^platform \([0-9]*\): rusticl.*/\1/p' <<<"$out")
C=$(sed -n 's/^platform \([0-9]*\): Clover.*/\1/p' <<<"$out")
if [[ $rc -eq 0 && -n $P && -n $R && -n $C ]] && grep -q "^  $R:0 .*llvmpipe" <<<"$out" \
   && grep -A1 "^platform $C: Clover" <<<"$out" | grep -q 'no devices'; then
  ok "PoCL ($P:0), rusticl on llvmpipe ($R:0) and Clover ($C, no devices) listed, exit 0"
else
  notok "PoCL, rusticl and Clover listed" "exit $rc" "$(head -20 <<<"$out")"
  echo "1..$n"
  exit 0
fi
first_cpu=$(grep -m1 -E '^  [0-9]+:[0-9]+  CPU' <<<"$out" | awk '{print $1}')

# --- a missing library and a library that is no OpenCL driver: listed as unusable, not a crash ---
echo "libcltrain-no-such-driver.so.1" >"$tmp/vendors/4-missing.icd"
echo "libz.so.1" >"$tmp/vendors/5-notocl.icd"
out=$("$bin" devices 2>&1)
rc=$?
if [[ $rc -eq 0 ]] && grep -q '^unusable: .*4-missing.icd (libcltrain-no-such-driver.so.1): cannot load it' <<<"$out" \
   && grep -q '^unusable: .*5-notocl.icd (libz.so.1): not an OpenCL ICD' <<<"$out" && [[ $(grep -c '^platform' <<<"$out") -eq 3 ]]; then
  ok "a missing and a non-OpenCL ICD library are listed as unusable; the three platforms still listed, exit 0"
else
  notok "broken ICDs listed as unusable" "exit $rc" "$(tail -6 <<<"$out")"
fi
common=(fashion-mnist --model mlp --steps 1 --batch-size 8 --limit-test 8)
out=$("$bin" "${common[@]}" --device "$P:0" 2>&1)
rc=$?
if [[ $rc -eq 0 ]] && grep -q "^device $P:0 .*Portable Computing Language" <<<"$out"; then ok "training runs beside broken ICDs"
else notok "training runs beside broken ICDs" "exit $rc" "$(tail -3 <<<"$out")"; fi
err=$(OCL_ICD_VENDORS=$tmp/vendors/4-missing.icd "$bin" fashion-mnist --model mlp --steps 1 2>&1 >/dev/null)
rc=$?
if [[ $rc -eq 1 && $(wc -l <<<"$err") -eq 1 ]] && grep -q 'no usable OpenCL platform: 1 ICD is unusable.*4-missing.icd.*cannot load it' <<<"$err"; then
  ok "only a broken ICD: one line naming it, exit 1"
else
  notok "only a broken ICD: one line naming it, exit 1" "exit $rc" "$(head -3 <<<"$err")"
fi
rm "$tmp/vendors/4-missing.icd" "$tmp/vendors/5-notocl.icd"

# --- --device and CLTRAIN_DEVICE pick any device ---
for sel in "--device $R:0" "CLTRAIN_DEVICE=$R:0" "--device $P:0" "CLTRAIN_DEVICE=$P:0"; do
  want=${sel##* }
  want=${want##*=}
  if [[ $sel == CLTRAIN_DEVICE=* ]]; then out=$(env "$sel" timeout 300 "$bin" "${common[@]}" 2>&1)
  else out=$(timeout 300 "$bin" "${common[@]}" $sel 2>&1); fi
  rc=$?
  name=$([[ $want == "$R:0" ]] && echo rusticl || echo "Portable Computing Language")
  if [[ $rc -eq 0 ]] && grep -q "^device $want .*($name)" <<<"$out" && grep -q 'accuracy' <<<"$out"; then
    ok "$sel trains on $name"
  else
    notok "$sel trains on $name" "exit $rc" "$(grep -m1 '^device' <<<"$out")" "$(tail -3 <<<"$out")"
  fi
done
out=$("$bin" "${common[@]}" --device "$C:0" 2>&1)
rc=$?
if [[ $rc -eq 2 ]] && grep -q "'$C:0': no such device" <<<"$out"; then ok "--device $C:0 (Clover, no devices): no such device, exit 2"
else notok "--device $C:0: no such device, exit 2" "exit $rc" "$(head -2 <<<"$out")"; fi

# --- the default device: no GPU here, so the fastest tuned one, else the first CPU ---
out=$("$bin" "${common[@]}" 2>&1)
if grep -q "^device $first_cpu " <<<"$out"; then ok "no GPU, no tuning database: the first CPU listed ($first_cpu)"
else notok "no GPU, no tuning database: the first CPU listed ($first_cpu)" "$(grep -m1 '^device' <<<"$out")"; fi
# tune both (mlp: seconds), then make rusticl's record the faster: the default follows the record
timeout 300 "$bin" tune --device "$P:0" --model mlp --batch-size 8 --budget 1 >"$tmp/t0" 2>&1
timeout 300 "$bin" tune --device "$R:0" --model mlp --batch-size 8 --budget 1 >"$tmp/t1" 2>&1
db0=$(grep -l '^platform Portable Computing Language' "$tmp"/cache/gemm-tune-*.txt 2>/dev/null | head -1)
db1=$(grep -l '^platform rusticl' "$tmp"/cache/gemm-tune-*.txt 2>/dev/null | head -1)
s0=$(sed -n 's/^speed //p' "$db0" 2>/dev/null)
s1=$(sed -n 's/^speed //p' "$db1" 2>/dev/null)
if [[ -n $s0 && -n $s1 ]]; then
  fast=$(awk -v a="$s0" -v b="$s1" -v p="$P:0" -v r="$R:0" 'BEGIN { print (b > a) ? r : p }')
  out=$("$bin" "${common[@]}" 2>&1)
  sed -i 's/^speed .*/speed 1000000/' "$db1"
  out2=$("$bin" "${common[@]}" 2>&1)
  if grep -q "^device $fast " <<<"$out" && grep -q "^device $R:0 " <<<"$out2"; then
    ok "tuned: the default is the faster record ($fast; PoCL $s0, rusticl $s1 GFLOP/s), and rusticl once its record is faster"
  else
    notok "the default device follows the tuning databases' speed" "PoCL $s0, rusticl $s1: $(grep -m1 '^device' <<<"$out")" \
      "rusticl 1e6: $(grep -m1 '^device' <<<"$out2")"
  fi
else
  notok "cltrain tune records a speed in each database" "PoCL '$s0' ($db0), rusticl '$s1' ($db1)" "$(tail -2 "$tmp/t0")" "$(tail -2 "$tmp/t1")"
fi
echo "1..$n"
