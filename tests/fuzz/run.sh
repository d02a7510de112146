#!/usr/bin/env bash
# tests/fuzz/run.sh BUILD [SECONDS] [NAME]: for each harness BUILD/fuzz/fuzz_NAME,
# replay every input in tests/fuzz/regress/NAME (each must run clean), then
# fuzz for SECONDS (10) from the seeds in tests/fuzz/corpus/NAME, new inputs
# going to BUILD/fuzz-corpus/NAME (never into the repository). A crash, leak,
# sanitizer report or timeout writes the input to BUILD/fuzz-crashes/ and fails.
# One line per harness with its execution count; exit 1 if any failed. With
# CLTRAIN_FUZZ_NEW_NONFATAL=1 (CI) an input the short run finds is reported
# with its file but does not fail: a regression input always does.
# For a long run: SECONDS 0 and CLTRAIN_FUZZ_RUNS=N (-runs=N) instead.
set -u
build=${1:?usage: tests/fuzz/run.sh BUILD [SECONDS] [NAME]}
secs=${2:-10}
only=${3:-}
here=$(cd "$(dirname "$0")" && pwd)
ok=0 bad=0
mkdir -p "$build/fuzz-crashes" "$build/fuzz-logs"
for h in "$build"/fuzz/fuzz_*; do
  [[ -x $h ]] || continue
  name=${h##*/fuzz_}
  [[ -n $only && $name != "$only" ]] && continue
  log=$build/fuzz-logs/$name.log
  status=ok
  regress=("$here/regress/$name"/*)
  if [[ -e ${regress[0]} ]]; then
    if ! "$h" -close_fd_mask=2 -timeout=10 -rss_limit_mb=4096 "${regress[@]}" >"$log.regress" 2>&1; then
      status="regression input failed (see $log.regress)"
    fi
  else
    regress=()
  fi
  corpus=$build/fuzz-corpus/$name
  mkdir -p "$corpus"
  limit=(-max_total_time="$secs")
  (( secs == 0 )) && limit=(-runs="${CLTRAIN_FUZZ_RUNS:-1000000}")
  if [[ $status == ok ]] && ! "$h" "${limit[@]}" -close_fd_mask=2 -timeout=10 -rss_limit_mb=4096 -max_len=65536 -print_final_stats=1 \
      -artifact_prefix="$build/fuzz-crashes/$name-" "$corpus" "$here/corpus/$name" >"$log" 2>&1; then
    status="FAILED (see $log and $build/fuzz-crashes)"
    if [[ ${CLTRAIN_FUZZ_NEW_NONFATAL:-0} == 1 ]]; then
      echo "fuzz $name: NEW FINDING, not a regression: $(ls "$build/fuzz-crashes/$name-"* 2>/dev/null | head -1); add it to tests/fuzz/regress/$name with the fix"
      tail -30 "$log" | grep -E 'ERROR|runtime error|SUMMARY|#0 |#1 |#2 ' | head -8 | sed 's/^/    /'
      status="ok (new finding reported above)"
    fi
  fi
  execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" 2>/dev/null | grep -o '[0-9]*$' || true)
  printf 'fuzz %-8s %9s executions, %2d regression inputs: %s\n' "$name" "${execs:-0}" "${#regress[@]}" "$status"
  if [[ $status == ok* ]]; then ok=$((ok + 1)); else bad=$((bad + 1)); fi
done
echo "fuzz: $ok harnesses clean, $bad failing"
(( bad == 0 && ok > 0 ))
