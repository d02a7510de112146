#!/usr/bin/env bash
# Run every test program in BUILD/tests (cmocka, TAP output) and every
# tests/*.sh script (TAP too), each in its own process with a timeout.
# Ends with one line: "N passed, N failed, N skipped"; exit 1 on any failure.
# A test that crashes or times out counts as one failure of its own.
# Usage: tests/run.sh [BUILD] [NAME-FILTER]
# CLTRAIN_TESTS="NAME NAME ..." runs only the tests named (exactly), in that order.
set -u
build=${1:-build}
filter=${2:-}
here=$(cd "$(dirname "$0")" && pwd)
export CLTRAIN_BUILD=$build CMOCKA_MESSAGE_OUTPUT=TAP
# No first-run kernel search in the tests (each training test would pay for it, and what it
# picks would depend on the machine's load); tests/tune.sh runs it once on purpose.
export CLTRAIN_AUTOTUNE=${CLTRAIN_AUTOTUNE:-0}
# Kernel binaries are cached per build so sanitizer runs do not share a cache with plain runs.
export CLTRAIN_CACHE_DIR=${CLTRAIN_CACHE_DIR:-$build/cache}
timeout_s=${CLTRAIN_TEST_TIMEOUT:-600}
pass=0 fail=0 skip=0
failed_names=()
logdir=$build/test-logs
mkdir -p "$logdir"
progs=()
for t in "$build"/tests/test_*; do
  [[ -x $t && $t != *.d ]] && progs+=("$t")
done
for t in "$here"/*.sh; do
  [[ $(basename "$t") == run.sh ]] && continue
  progs+=("$t")
done
# run_one NAME PROGRAM [ENV=VALUE...]
run_one() {
  local name=$1 t=$2; shift 2
  local log=$logdir/$name.log start rc secs p s f status
  start=$(date +%s.%N)
  env "$@" timeout -k 10 "$timeout_s" "$t" >"$log" 2>&1
  rc=$?
  secs=$(printf '%.1f' "$(echo "$(date +%s.%N) - $start" | bc)")
  p=$(grep -cE '^ok [0-9]+' "$log" | tr -d ' ')
  # a skipped cmocka test prints "not ok N - name # SKIP": a skip, not a failure
  s=$(grep -cE '^(not )?ok [0-9]+.*# ?SKIP' "$log" | tr -d ' ')
  f=$(grep -E '^not ok [0-9]+' "$log" | grep -cvE '# ?SKIP' | tr -d ' ')
  p=$((p + $(grep -cE '^not ok [0-9]+.*# ?SKIP' "$log" | tr -d ' ')))
  p=$((p - s))
  # a TAP plan "1..0 # SKIP reason" (a whole script that cannot run here) is one skip
  if (( p == 0 && f == 0 && s == 0 )) && grep -qE '^1\.\.0 *# ?SKIP' "$log"; then s=1; fi
  status=ok
  if (( rc != 0 && f == 0 )); then
    f=$((f + 1)); status="exit $rc"
    (( rc == 124 || rc == 137 )) && status="timed out after ${timeout_s}s"
  fi
  (( f > 0 )) && [[ $status == ok ]] && status=FAILED
  printf '%-28s %3d passed %3d failed %3d skipped  %6ss  %s\n' "$name" "$p" "$f" "$s" "$secs" "$status"
  if (( f > 0 )); then
    failed_names+=("$name")
    grep -E '^not ok|^# ' "$log" | head -20 | sed 's/^/    /'
    tail -5 "$log" | sed 's/^/    | /'
  fi
  pass=$((pass + p)); fail=$((fail + f)); skip=$((skip + s))
}
if [[ -n ${CLTRAIN_TESTS:-} ]]; then
  chosen=()
  for want in $CLTRAIN_TESTS; do
    found=
    for t in "${progs[@]}"; do [[ $(basename "$t") == "$want" ]] && found=$t; done
    if [[ -z $found ]]; then echo "tests/run.sh: CLTRAIN_TESTS names '$want', which is no test here"; exit 2; fi
    chosen+=("$found")
  done
  progs=("${chosen[@]}")
fi
for t in "${progs[@]}"; do
  name=$(basename "$t")
  [[ -n $filter && $name != *$filter* ]] && continue
  run_one "$name" "$t" CLTRAIN_SAN=${CLTRAIN_SAN:-}
done
# The threaded parts once more under ThreadSanitizer (make test builds them in build-tsan).
if [[ -n ${CLTRAIN_TSAN_BUILD:-} ]]; then
  for name in test_ring test_pipeline; do
    [[ -n $filter && $name != *$filter* ]] && continue
    run_one "$name[tsan]" "$CLTRAIN_TSAN_BUILD/tests/$name" CLTRAIN_SAN=tsan CLTRAIN_CACHE_DIR="$CLTRAIN_TSAN_BUILD/cache" \
      TSAN_OPTIONS="suppressions=$here/tsan.supp halt_on_error=1"
  done
fi
(( fail > 0 )) && echo "failed: ${failed_names[*]} (logs in $logdir)"
echo "$pass passed, $fail failed, $skip skipped"
(( fail == 0 ))
