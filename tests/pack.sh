#!/usr/bin/env bash
# pack.sh: `cltrain pack` as a user meets it. Bad input of every kind gives
# exit 2 and exactly one stderr line naming the folder or option; a good pack
# prints its summary, writes train and test shards, skips an unreadable file
# with one stderr line (an error with --strict), leaves no temporary file, and
# writes byte-identical shards for any thread count. Prints TAP.
# Runs against $CLTRAIN_BUILD/cltrain (build/ by default; build-asan under make asan).
set -u
here=$(cd "$(dirname "$0")/.." && pwd)
case ${CLTRAIN_BUILD:-build} in /*) bin=$CLTRAIN_BUILD/cltrain ;; *) bin=$here/${CLTRAIN_BUILD:-build}/cltrain ;; esac
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
n=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
notok() { n=$((n + 1)); echo "not ok $n - $1"; shift; for l in "$@"; do echo "# $l"; done; }

# expect_fail NAME PATTERN -- ARGS...: exit 2, exactly one stderr line matching PATTERN
expect_fail() {
  local name=$1 pat=$2; shift 3
  timeout 120 "$@" >"$tmp/stdout" 2>"$tmp/stderr"
  local rc=$? lines
  lines=$(wc -l <"$tmp/stderr")
  if [[ $rc -eq 2 && $lines -eq 1 ]] && grep -qE -- "$pat" "$tmp/stderr"; then
    ok "$name"
  else
    notok "$name" "exit $rc (want 2), $lines stderr lines (want 1), pattern '$pat'" "$(head -5 "$tmp/stderr")"
  fi
}

le32() { printf '\\x%02x\\x%02x\\x%02x\\x%02x' $(($1 & 255)) $((($1 >> 8) & 255)) $((($1 >> 16) & 255)) $((($1 >> 24) & 255)); }
bmp() { # FILE W H R G B: a solid 24-bit BMP
  local f=$1 w=$2 h=$3 row pad px="" i
  row=$((w * 3)); pad=$(((4 - row % 4) % 4))
  for ((i = 0; i < w; i++)); do px+=$(printf '\\x%02x\\x%02x\\x%02x' "$6" "$5" "$4"); done
  for ((i = 0; i < pad; i++)); do px+='\x00'; done
  {
    printf "BM$(le32 $((54 + (row + pad) * h)))$(le32 0)$(le32 54)$(le32 40)$(le32 "$w")$(le32 "$h")\\x01\\x00\\x18\\x00"
    printf "$(le32 0)$(le32 $(((row + pad) * h)))$(le32 2835)$(le32 2835)$(le32 0)$(le32 0)"
    for ((i = 0; i < h; i++)); do printf "$px"; done
  } >"$f"
}
mkclass() { # DIR CLASS N: N small BMPs of distinct colours
  mkdir -p "$1/$2"
  local i
  for ((i = 0; i < $3; i++)); do bmp "$1/$2/img$i.bmp" 6 5 $((i * 20)) $((${#2} * 30)) 77; done
}

# --- bad input ---
expect_fail "no arguments" "needs an image folder and an output folder" -- "$bin" pack
expect_fail "missing --size" "needs --size" -- "$bin" pack "$tmp/x" "$tmp/out"
expect_fail "--size 0" "--size 0" -- "$bin" pack "$tmp/x" "$tmp/out" --size 0
expect_fail "--size abc" "--size abc" -- "$bin" pack "$tmp/x" "$tmp/out" --size abc
expect_fail "--channels 2" "--channels 2: expected 1 or 3" -- "$bin" pack "$tmp/x" "$tmp/out" --size 8 --channels 2
expect_fail "--val-split 1" "--val-split 1" -- "$bin" pack "$tmp/x" "$tmp/out" --size 8 --val-split 1
expect_fail "--threads 0" "--threads 0" -- "$bin" pack "$tmp/x" "$tmp/out" --size 8 --threads 0
expect_fail "unknown option" "unknown option --frob" -- "$bin" pack "$tmp/x" "$tmp/out" --size 8 --frob
expect_fail "an extra argument" "unexpected argument 'more'" -- "$bin" pack "$tmp/x" "$tmp/out" more --size 8
expect_fail "missing DIR" "nowhere: No such file" -- "$bin" pack "$tmp/nowhere" "$tmp/out" --size 8
mkdir -p "$tmp/empty"
expect_fail "an empty folder" "empty: no class sub-folders" -- "$bin" pack "$tmp/empty" "$tmp/out" --size 8
mkclass "$tmp/one" solo 3
expect_fail "one class" "only one class folder \(solo\)" -- "$bin" pack "$tmp/one" "$tmp/out" --size 8
mkclass "$tmp/vacant" cat 3; mkdir -p "$tmp/vacant/dog"
expect_fail "a class without images" "vacant/dog: class folder has no readable images" -- "$bin" pack "$tmp/vacant" "$tmp/out" --size 8
[[ ! -e $tmp/out ]] && ok "nothing written on bad input" || notok "nothing written on bad input" "$(ls -a "$tmp/out")"

# --- a good pack ---
mkclass "$tmp/set" cat 6; mkclass "$tmp/set" dog 5; mkclass "$tmp/set" emu 4
echo "not a png" >"$tmp/set/dog/fake.png"
expect_fail "--strict: an unreadable image is an error" "dog/fake.png: not a readable image" -- \
  "$bin" pack "$tmp/set" "$tmp/out" --size 8 --strict
timeout 120 "$bin" pack "$tmp/set" "$tmp/out" --size 8 --val-split 0.2 >"$tmp/out.txt" 2>"$tmp/err.txt"
rc=$?
if [[ $rc -eq 0 ]] && grep -q "3 classes, 12 train + 3 test images" "$tmp/out.txt" && grep -q "1 unreadable skipped" "$tmp/out.txt" &&
   grep -q "images/s" "$tmp/out.txt" && [[ -s $tmp/out/train-00000.shard && -s $tmp/out/test-00000.shard ]]; then
  ok "pack prints its summary and writes train and test shards"
else
  notok "pack: summary and shards" "exit $rc" "$(cat "$tmp/out.txt" "$tmp/err.txt")" "$(ls "$tmp/out" 2>&1)"
fi
if [[ $(wc -l <"$tmp/err.txt") -eq 1 ]] && grep -q "^cltrain: skipping .*dog/fake.png: " "$tmp/err.txt"; then
  ok "the unreadable file is reported once"
else
  notok "the unreadable file is reported once" "$(cat "$tmp/err.txt")"
fi
# 12 records of 8*8*3 + 8 bytes after the header
hs=$(od -An -tu4 -j12 -N4 "$tmp/out/train-00000.shard" | tr -d ' ')
size=$(stat -c %s "$tmp/out/train-00000.shard")
[[ $size -eq $((hs + 12 * 200)) ]] && ok "shard size is header + records" || notok "shard size" "$size bytes, header $hs"
ls -a "$tmp/out" | grep -q tmp && notok "no temporary files left" "$(ls -a "$tmp/out")" || ok "no temporary files left"

# --- the same shards for any thread count; fewer, larger files replace more, smaller ones ---
"$bin" pack "$tmp/set" "$tmp/t1" --size 7 --channels 1 --records-per-shard 2 --threads 1 >/dev/null 2>&1
"$bin" pack "$tmp/set" "$tmp/t3" --size 7 --channels 1 --records-per-shard 2 --threads 3 >/dev/null 2>&1
if [[ $(ls "$tmp/t1" | wc -l) -eq 8 ]] && diff -r "$tmp/t1" "$tmp/t3" >/dev/null; then
  ok "byte-identical shards with 1 and 3 threads (6 train + 2 test files)"
else
  notok "byte-identical shards with 1 and 3 threads" "$(ls "$tmp/t1" "$tmp/t3")"
fi
"$bin" pack "$tmp/set" "$tmp/t1" --size 7 --channels 1 >/dev/null 2>&1
[[ $(ls "$tmp/t1" | tr '\n' ' ') == "test-00000.shard train-00000.shard " ]] && ok "a repack removes stale shard files" ||
  notok "a repack removes stale shard files" "$(ls "$tmp/t1")"

# --- DIR/train and DIR/test ---
mkclass "$tmp/tt/train" a 3; mkclass "$tmp/tt/train" b 3; mkclass "$tmp/tt/test" a 1; mkclass "$tmp/tt/test" b 2
out=$("$bin" pack "$tmp/tt" "$tmp/tto" --size 4 2>&1); rc=$?
[[ $rc -eq 0 && $out == *"6 train + 3 test images (train/ and test/ folders)"* ]] && ok "train/ and test/ folders are the splits" ||
  notok "train/ and test/ folders" "exit $rc: $out"
mkclass "$tmp/tt/test" c 1
expect_fail "train/ and test/ with different classes" "'c' is only in test/" -- "$bin" pack "$tmp/tt" "$tmp/tto" --size 4
echo "1..$n"
