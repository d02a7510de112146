#!/usr/bin/env bash
# readme.sh: README.md and the program agree on the options. Every option
# that `cltrain --help` or any command's --help shows is in README, every
# training option is in README's "Options of the training commands"
# paragraph, and every --option README names is one cltrain takes (or one of
# another program, listed below with the reason). Every command `cltrain
# --help` lists is shown in README's "Using it". Prints TAP.
set -u
here=$(cd "$(dirname "$0")/.." && pwd)
build=${CLTRAIN_BUILD:-build}
[[ $build == /* ]] || build=$here/$build
bin=$build/cltrain
readme=$here/README.md
n=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
notok() { n=$((n + 1)); echo "not ok $n - $1"; shift; for l in "$@"; do echo "# $l"; done; }
opts() { grep -oE -- '--[a-z][a-z0-9-]*' | sort -u; }

main_help=$("$bin" --help) || { notok "cltrain --help"; echo "1..$n"; exit 0; }
# the commands, as `cltrain --help` lists them (two spaces, the name, then its arguments or help)
cmds=$(awk '/^(Training|Other) commands:/ { on = 1; next } /^$/ { on = 0 } on && /^  [a-z]/ { print $1 }' <<<"$main_help")
[[ $(wc -w <<<"$cmds") -ge 10 ]] && ok "cltrain --help lists $(wc -w <<<"$cmds") commands" || notok "cltrain --help lists the commands" "$cmds"

all_help=$main_help
for c in $cmds; do
  h=$("$bin" "$c" --help 2>&1) || notok "$c --help exits 0"
  all_help+=$'\n'$h
done
help_opts=$(opts <<<"$all_help")
readme_opts=$(opts <"$readme")

# options of other programs that README shows, and why
foreign="--chars --fonts"         # build/tools/make-font-dataset, the font data set generator
foreign+=" --data-races"          # oclgrind
foreign+=" --hostfile --mca"      # mpirun
foreign+=" --mean --std"          # named as not supported by import (a Normalize before the model)

missing=$(comm -23 <(echo "$help_opts") <(echo "$readme_opts") | tr '\n' ' ')
if [[ -z $missing ]]; then ok "every option of every --help is in README ($(wc -l <<<"$help_opts") options)"
else notok "every option of every --help is in README" "missing from README: $missing"; fi

unknown=""
for o in $(comm -13 <(echo "$help_opts") <(echo "$readme_opts")); do
  [[ " $foreign " == *" $o "* ]] || unknown+=" $o"
done
if [[ -z $unknown ]]; then ok "every --option README names is one cltrain takes (or another program's, listed)"
else notok "every --option README names is one cltrain takes" "not in any --help:$unknown"; fi

# README's options paragraph lists every option of the training commands
para=$(awk '/^Options of the training commands:/ { on = 1 } on { print } on && /^$/ { exit }' "$readme")
train_opts=$(awk '/^Options of the training commands:/ { on = 1; next } on' <<<"$main_help" | opts)
missing=$(comm -23 <(echo "$train_opts") <(opts <<<"$para") | grep -vx -- '--version' | tr '\n' ' ')
if [[ -n $para && -z $missing ]]; then ok "README's options paragraph lists every training option"
else notok "README's options paragraph lists every training option" "missing: ${missing:-the paragraph itself}"; fi

# "Using it" shows every command (bench: every bench it has)
using=$(awk '/^## Using it/ { on = 1; next } /^## / { on = 0 } on' "$readme")
missing=""
for c in $cmds; do grep -qE "cltrain $c( |$)" <<<"$using" || missing+=" $c"; done
for b in kernels train pipeline dist images probe; do grep -q "cltrain bench $b" <<<"$using" || missing+=" bench-$b"; done
if [[ -z $missing ]]; then ok "README's \"Using it\" shows every command"
else notok "README's \"Using it\" shows every command" "missing:$missing"; fi
echo "1..$n"
