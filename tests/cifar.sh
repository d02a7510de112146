#!/usr/bin/env bash
# cifar.sh: `cltrain cifar10` end to end on a generated CIFAR-format set
# (tools/make-cifar.c: class-dependent shapes and colours with noise):
# cifar-cnn with batch norm and augmentation must learn it; eval of its
# checkpoint applies the same standardisation; bad input exits 2. Prints TAP.
set -u
here=$(cd "$(dirname "$0")/.." && pwd)
case ${CLTRAIN_BUILD:-build} in /*) b=$CLTRAIN_BUILD ;; *) b=$here/${CLTRAIN_BUILD:-build} ;; esac
bin=$b/cltrain
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
n=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
notok() { n=$((n + 1)); echo "not ok $n - $1"; shift; for l in "$@"; do echo "# $l"; done; }
"$b/tools/make-cifar" "$tmp/cf" --train 400 --test 500 --seed 1 >/dev/null || notok "make-cifar"
timeout 300 "$bin" cifar10 --data "$tmp/cf" --epochs 2 --batch-size 64 --augment basic --checkpoint "$tmp/c.ckpt" >"$tmp/out" 2>&1
rc=$?
acc=$(sed -n 's/^epoch 2: test: .*accuracy \([0-9.]*\)%.*/\1/p' "$tmp/out")
if [[ $rc -eq 0 && -n $acc ]] && awk -v a="$acc" 'BEGIN { exit !(a >= 80) }'; then ok "cifar-cnn learns the generated set: $acc% after 2 epochs (want >= 80%)"
else notok "cifar-cnn learns the generated set" "exit $rc, accuracy '$acc'" "$(tail -3 "$tmp/out")"; fi
ev=$("$bin" eval "$tmp/c.ckpt" 2>&1 | sed -n 's/^test: .*accuracy \([0-9.]*\)%.*/\1/p')
if [[ -n $ev && $ev == "$acc" ]]; then ok "eval of the checkpoint gives the same test accuracy ($ev%)"
else notok "eval of the checkpoint" "eval '$ev' vs training '$acc'"; fi
err=$("$bin" cifar10 --data "$tmp/cf" --augment sideways 2>&1); rc=$?
if [[ $rc -eq 2 && $err == *sideways* ]]; then ok "--augment unknown: exit 2"; else notok "--augment unknown" "exit $rc: $err"; fi
head -c 5000 "$tmp/cf/data_batch_2.bin" >"$tmp/cut.bin"; mkdir -p "$tmp/bad"; cp "$tmp"/cf/* "$tmp/bad/"; cp "$tmp/cut.bin" "$tmp/bad/data_batch_2.bin"
err=$("$bin" cifar10 --data "$tmp/bad" 2>&1); rc=$?
if [[ $rc -eq 2 && $err == *data_batch_2.bin* && $(printf '%s\n' "$err" | wc -l) -eq 1 ]]; then ok "a cut batch file: exit 2 naming it"
else notok "a cut batch file" "exit $rc: $err"; fi
err=$(CLTRAIN_CIFAR_MIRROR=http://127.0.0.1:9/ "$bin" cifar10 --data "$tmp/none" 2>&1); rc=$?
if [[ $rc -eq 2 && $err == *"--data"* ]]; then ok "CIFAR missing and offline: exit 2 saying where to put it"
else notok "CIFAR offline" "exit $rc: $err"; fi
echo "1..$n"
