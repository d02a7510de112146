#!/usr/bin/env bash
# badinput.sh: the bad-input catalogue. Each case is a command line a user
# could type (bad numbers, huge values, wrong file kinds, FIFOs, folders,
# read-only targets, damaged files) and must end with exit 2 (or 1 for a
# training failure) and exactly one stderr line naming the file or option,
# within 20 s (a FIFO must not block), with no sanitizer report (this runs
# under make asan too). Then the disk-full cases: a checkpoint save that
# fails leaves the previous checkpoint intact and loadable and stops training
# with exit 1; a log write error is reported once and training goes on.
# Runs against $CLTRAIN_BUILD/cltrain. Prints TAP.
set -u
here=$(cd "$(dirname "$0")/.." && pwd)
bin=$here/${CLTRAIN_BUILD:-build}/cltrain
case ${CLTRAIN_BUILD:-build} in /*) bin=${CLTRAIN_BUILD}/cltrain ;; esac
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
n=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
notok() { n=$((n + 1)); echo "not ok $n - $1"; shift; for l in "$@"; do echo "# $l"; done; }
san='AddressSanitizer|LeakSanitizer|UndefinedBehaviorSanitizer|runtime error:|ThreadSanitizer'

# bad NAME CODE PATTERN -- ARGS...: exit CODE, one stderr line matching PATTERN, no sanitizer report
bad() {
  local name=$1 code=$2 pat=$3; shift 4
  local err=$tmp/err
  timeout -k 5 20 "$@" >/dev/null 2>"$err" </dev/null
  local rc=$? lines
  lines=$(wc -l <"$err")
  if [[ $rc -eq $code && $lines -eq 1 ]] && grep -qE -- "$pat" "$err" && ! grep -qE "$san" "$err"; then
    ok "$name"
  else
    notok "$name" "exit $rc (want $code), $lines stderr lines (want 1), pattern '$pat'" "$(head -3 "$err")"
  fi
}

idx_images() { # FILE N ROWS COLS [BYTES]: an IDX image file of zeros (BYTES of data, default N*ROWS*COLS)
  { printf '\x00\x00\x08\x03'; printf "%08x%08x%08x" "$2" "$3" "$4" | xxd -r -p; head -c "${5:-$(($2 * $3 * $4))}" /dev/zero; } >"$1"
}
idx_labels() { # FILE LABEL...
  local f=$1; shift
  { printf '\x00\x00\x08\x01'; printf "%08x" $# | xxd -r -p; for l in "$@"; do printf "%02x" "$l"; done | xxd -r -p; } >"$f"
}
mkset() { # DIR: a valid MNIST-format set of 4 + 2 images
  mkdir -p "$1"
  idx_images "$1/train-images-idx3-ubyte" 4 28 28; idx_labels "$1/train-labels-idx1-ubyte" 0 1 2 3
  idx_images "$1/t10k-images-idx3-ubyte" 2 28 28; idx_labels "$1/t10k-labels-idx1-ubyte" 4 5
}
mkset "$tmp/set"
FM=("$bin" fashion-mnist --data "$tmp/set" --model mlp --steps 1)
mkdir "$tmp/dir"
mkfifo "$tmp/fifo" "$tmp/fifo.cfg" "$tmp/fifo.ckpt"
: >"$tmp/empty"
head -c 3000 /dev/urandom >"$tmp/random.bin"

# --- numbers ---
bad "--epochs 0" 2 "--epochs 0" -- "${FM[@]}" --epochs 0
bad "--epochs -1" 2 "--epochs -1" -- "${FM[@]}" --epochs -1
bad "--epochs 1e3 (not whole)" 2 "--epochs 1e3" -- "${FM[@]}" --epochs 1e3
bad "--epochs 2^70" 2 "--epochs 1180591620717411303424" -- "${FM[@]}" --epochs 1180591620717411303424
bad "--batch-size 4097" 2 "--batch-size 4097" -- "${FM[@]}" --batch-size 4097
bad "--batch-size 12abc" 2 "--batch-size 12abc" -- "${FM[@]}" --batch-size 12abc
bad "--batch-size empty" 2 "--batch-size " -- "${FM[@]}" --batch-size ''
bad "--lr -1" 2 "--lr -1" -- "${FM[@]}" --lr -1
bad "--lr nan" 2 "--lr nan" -- "${FM[@]}" --lr nan
bad "--lr inf" 2 "--lr inf" -- "${FM[@]}" --lr inf
bad "--momentum 1.5" 2 "--momentum 1.5" -- "${FM[@]}" --momentum 1.5
bad "--weight-decay -0.1" 2 "--weight-decay -0.1" -- "${FM[@]}" --weight-decay -0.1
bad "--seed -5" 2 "--seed -5" -- "${FM[@]}" --seed -5
bad "--seed 2^64" 2 "--seed 18446744073709551616" -- "${FM[@]}" --seed 18446744073709551616
bad "--eval-every 2^32+1 (was every step)" 2 "--eval-every 4294967297" -- "${FM[@]}" --eval-every 4294967297
bad "--eval-every 2^31 (was never)" 2 "--eval-every 2147483648" -- "${FM[@]}" --eval-every 2147483648
bad "--checkpoint-every 0" 2 "--checkpoint-every 0" -- "${FM[@]}" --checkpoint-every 0
bad "--checkpoint-every 2^32+1" 2 "--checkpoint-every 4294967297" -- "${FM[@]}" --checkpoint-every 4294967297
bad "--steps 0" 2 "--steps 0" -- "${FM[@]}" --steps 0
bad "--steps 2^40+1" 2 "--steps 1099511627777" -- "${FM[@]}" --steps 1099511627777
bad "--limit-train 0" 2 "--limit-train 0" -- "${FM[@]}" --limit-train 0
bad "--limit-test 2^31" 2 "--limit-test 2147483648" -- "${FM[@]}" --limit-test 2147483648
bad "--producers 257" 2 "--producers 257" -- "${FM[@]}" --producers 257
bad "--prefetch 1" 2 "--prefetch 1" -- "${FM[@]}" --prefetch 1
bad "--keep 1001" 2 "--keep 1001" -- "${FM[@]}" --keep 1001
bad "--warmup -1" 2 "--warmup -1" -- "${FM[@]}" --warmup -1
bad "--progress-every 0" 2 "--progress-every 0" -- "${FM[@]}" --progress-every 0
bad "--bucket-mb 0" 2 "--bucket-mb 0" -- "${FM[@]}" --bucket-mb 0
bad "--comm-timeout 0.5" 2 "--comm-timeout 0.5: expected 0 .no limit. or at least 1 second" -- "${FM[@]}" --comm-timeout 0.5
bad "--comm-timeout -3" 2 "--comm-timeout -3: expected a number" -- "${FM[@]}" --comm-timeout -3
bad "--io-latency-us 10^8" 2 "--io-latency-us 100000000" -- "${FM[@]}" --io-latency-us 100000000
bad "--size 3" 2 "--size 3" -- "$bin" images "$tmp/dir" --size 3
bad "--channels 2" 2 "--channels 2" -- "$bin" images "$tmp/dir" --channels 2
bad "--val-split 0.95" 2 "--val-split 0.95" -- "$bin" images "$tmp/dir" --val-split 0.95
bad "--top 0" 2 "--top 0" -- "$bin" predict "$tmp/empty" x.png --top 0

# --- files of the wrong kind ---
bad "--resume a folder" 2 "dir: is a folder.*--resume" -- "${FM[@]}" --resume "$tmp/dir"
bad "--resume a FIFO (no hang)" 2 "fifo.ckpt: is a FIFO.*--resume" -- "${FM[@]}" --resume "$tmp/fifo.ckpt"
bad "--resume a device" 2 "/dev/null: is a device.*--resume" -- "${FM[@]}" --resume /dev/null
bad "--resume missing" 2 "nothere.ckpt: No such file" -- "${FM[@]}" --resume "$tmp/nothere.ckpt"
bad "--resume empty file" 2 "empty: truncated or not a cltrain checkpoint" -- "${FM[@]}" --resume "$tmp/empty"
bad "--resume random bytes" 2 "random.bin: .*(not a cltrain checkpoint|truncated|corrupt)" -- "${FM[@]}" --resume "$tmp/random.bin"
bad "--model a FIFO (no hang)" 2 "fifo.cfg: is a FIFO.*--model" -- "${FM[@]}" --model "$tmp/fifo.cfg"
bad "--model a FIFO with --resume" 2 "(fifo.cfg: is a FIFO|dir: is a folder)" -- "${FM[@]}" --model "$tmp/fifo.cfg" --resume "$tmp/dir"
bad "--model a folder" 2 "dir/: is a folder.*--model" -- "${FM[@]}" --model "$tmp/dir/"
bad "--model random bytes" 2 "random.cfg" -- sh -c "cp '$tmp/random.bin' '$tmp/random.cfg' && exec '$bin' fashion-mnist --data '$tmp/set' --steps 1 --model '$tmp/random.cfg'"
bad "--checkpoint a folder" 2 "--checkpoint .*dir: is a folder" -- "${FM[@]}" --checkpoint "$tmp/dir"
bad "--checkpoint in a missing folder" 2 "--checkpoint .*nodir/x.ckpt: its folder does not exist" -- "${FM[@]}" --checkpoint "$tmp/nodir/x.ckpt"
bad "--checkpoint on a read-only file system" 2 "--checkpoint /proc/cltrain.ckpt: " -- "${FM[@]}" --checkpoint /proc/cltrain.ckpt
bad "--checkpoint a device" 2 "--checkpoint /dev/null: is a device" -- "${FM[@]}" --checkpoint /dev/null
bad "--logdir a file" 2 "--logdir .*empty: exists and is not a folder" -- "${FM[@]}" --logdir "$tmp/empty"
bad "--logdir on a read-only file system" 2 "--logdir /proc/cltrain-logs" -- "${FM[@]}" --logdir /proc/cltrain-logs
bad "--data a file" 2 "random.bin" -- "$bin" fashion-mnist --data "$tmp/random.bin" --steps 1
mkset "$tmp/fifoset"; rm "$tmp/fifoset/train-images-idx3-ubyte"; mkfifo "$tmp/fifoset/train-images-idx3-ubyte"
bad "IDX file a FIFO (no hang)" 2 "train-images-idx3-ubyte: is a FIFO" -- "$bin" fashion-mnist --data "$tmp/fifoset" --steps 1
mkset "$tmp/huge"; idx_images "$tmp/huge/train-images-idx3-ubyte" 1000000 64 64 100
{ printf '\x00\x00\x08\x01'; printf "%08x" 1000000 | xxd -r -p; } >"$tmp/huge/train-labels-idx1-ubyte"
bad "IDX header declaring 4 GB" 2 "train-images-idx3-ubyte: truncated" -- "$bin" fashion-mnist --data "$tmp/huge" --steps 1
mkdir -p "$tmp/c10"; head -c 5000 /dev/zero >"$tmp/c10/test_batch.bin"
for i in 1 2 3 4 5; do head -c 3073 /dev/zero >"$tmp/c10/data_batch_$i.bin"; done
bad "CIFAR batch not whole records" 2 "test_batch.bin" -- "$bin" cifar10 --data "$tmp/c10" --steps 1
rm "$tmp/c10/data_batch_3.bin"; mkfifo "$tmp/c10/data_batch_3.bin"; head -c 3073 /dev/zero >"$tmp/c10/test_batch.bin"
bad "CIFAR batch a FIFO (no hang)" 2 "data_batch_3.bin" -- "$bin" cifar10 --data "$tmp/c10" --steps 1
bad "images: a file that is no folder and no TFRecord" 2 "random.bin: record 0 at offset 0: bad length CRC" -- "$bin" images "$tmp/random.bin"
mkdir -p "$tmp/one/cls"
bad "images: one class" 2 "only one class folder" -- "$bin" images "$tmp/one"
bad "eval: a folder" 2 "dir: is a folder" -- "$bin" eval "$tmp/dir"
bad "eval: a FIFO (no hang)" 2 "fifo: is a FIFO" -- "$bin" eval "$tmp/fifo"
mkdir -p "$tmp/two/a" "$tmp/two/b"
for c in a b; do for i in 1 2; do cp "$here/tests/fuzz/corpus/image/rgb.bmp" "$tmp/two/$c/$i.bmp"; done; done
bad "pack: OUT a file" 2 "empty" -- "$bin" pack "$tmp/two" "$tmp/empty" --size 8

# --- nothing overwritten, nothing lost ---
tfr() { # OUT IMAGE N CUT: N TF-Slim records of IMAGE (labels 0 1 0 1 ...); OUT.gz compressed; CUT > 0: a gzip
        # stream flushed after record CUT and cut off there (gzip -t: "unexpected end of file")
  python3 - "$@" <<'PY'
import gzip, struct, sys, zlib
def crc32c(b):
    c = 0xffffffff
    for x in b:
        c ^= x
        for _ in range(8): c = (c >> 1) ^ (0x82f63b78 & -(c & 1))
    return c ^ 0xffffffff
def mask(c): return (((c >> 15) | (c << 17)) + 0xa282ead8) & 0xffffffff
def vi(n):
    o = b""
    while n >= 0x80: o += bytes([n & 0x7f | 0x80]); n >>= 7
    return o + bytes([n])
def ld(f, b): return vi(f << 3 | 2) + vi(len(b)) + b
def feat(k, v): return ld(1, ld(1, k) + ld(2, v))
def rec(img, lab):
    d = ld(1, feat(b"image/encoded", ld(1, ld(1, img))) + feat(b"image/class/label", ld(3, ld(1, vi(lab)))))
    h = struct.pack("<Q", len(d))
    return h + struct.pack("<I", mask(crc32c(h))) + d + struct.pack("<I", mask(crc32c(d)))
out, img, n, cut = sys.argv[1], open(sys.argv[2], "rb").read(), int(sys.argv[3]), int(sys.argv[4])
body = [rec(img, i % 2) for i in range(n)]
if cut:
    c = zlib.compressobj(9, zlib.DEFLATED, 31)
    data = c.compress(b"".join(body[:cut])) + c.flush(zlib.Z_FULL_FLUSH)
else:
    data = gzip.compress(b"".join(body)) if out.endswith(".gz") else b"".join(body)
open(out, "wb").write(data)
PY
}
# check NAME COND DETAIL: ok when the shell condition holds
check() { if eval "$2"; then ok "$1"; else notok "$1" "$3"; fi; }
ex=$tmp/ex.ckpt
if timeout 300 "${FM[@]}" --quiet --checkpoint "$ex" >/dev/null 2>"$tmp/err"; then
  cp "$ex" "$tmp/ex.orig"
  bad "export over a FIFO" 2 "export .*fifo: is a FIFO" -- "$bin" export "$ex" "$tmp/fifo"
  check "export leaves the FIFO in place" "[[ -p $tmp/fifo ]]" "$tmp/fifo is no longer a FIFO"
  bad "export over a folder" 2 "export .*dir: is a folder" -- "$bin" export "$ex" "$tmp/dir"
  # a device node of our own (a copy of /dev/null) where the file system allows one
  dev=$tmp/null; mknod "$dev" c 1 3 2>/dev/null || dev=/dev/null
  bad "export over a device" 2 "export .*null: is a device" -- "$bin" export "$ex" "$dev"
  check "export leaves the device in place" "[[ -c $dev ]]" "$dev is no longer a device"
  bad "export onto its own checkpoint" 2 "ex.ckpt: that is the checkpoint .*ex.ckpt itself" -- "$bin" export "$ex" "$ex"
  ln "$ex" "$tmp/ex-link.ckpt"
  bad "export onto a hard link of its checkpoint" 2 "ex-link.ckpt: that is the checkpoint .*itself" -- "$bin" export "$ex" "$tmp/ex-link.ckpt"
  check "the checkpoint is untouched" "cmp -s $ex $tmp/ex.orig" "export changed the checkpoint"
  # a NaN held-out share in a checkpoint whose CRC is right: refused, never cast to an integer (UBSan)
  python3 -c 'import struct, sys, zlib
b = bytearray(open(sys.argv[1], "rb").read())
struct.pack_into("<d", b, 72, float("nan"))  # hdr_v3.data_split: magic 8 + version 4 + size 4 + 56
b[-4:] = struct.pack("<I", zlib.crc32(bytes(b[:-4])))
open(sys.argv[2], "wb").write(b)' "$ex" "$tmp/nan.ckpt"
  bad "checkpoint with a NaN held-out share" 2 "nan.ckpt: checkpoint field held-out share is nan" -- "$bin" eval "$tmp/nan.ckpt"
else
  notok "a checkpoint to export" "$(head -3 "$tmp/err")"
fi
bmp=$here/tests/fuzz/corpus/image/rgb.bmp
tfr "$tmp/cut.tfrecord.gz" "$bmp" 20 10
bad "gzip TFRecord cut off after record 10" 2 "cut.tfrecord.gz: the gzip stream is cut short .*10 whole records" -- \
  "$bin" images "$tmp/cut.tfrecord.gz" --size 8 --model mlp --steps 1
tfr "$tmp/ok.tfrecord.gz" "$bmp" 20 0
{ head -c 60 "$tmp/ok.tfrecord.gz"; printf 'damage'; tail -c +67 "$tmp/ok.tfrecord.gz"; } >"$tmp/dmg.tfrecord.gz"
bad "gzip TFRecord damaged: where, and the path once" 2 "^cltrain: [^ ]*dmg.tfrecord.gz: the gzip stream is damaged at byte [1-9][0-9]* of [0-9]+, after [0-9]+ bytes[^/]*$" -- \
  "$bin" images "$tmp/dmg.tfrecord.gz" --size 8 --model mlp --steps 1
bad "--train a FIFO (no hang)" 2 "fifo: is a FIFO" -- "$bin" images --train "$tmp/fifo" --size 8 --model mlp --steps 1
bad "--test a FIFO (no hang)" 2 "fifo: is a FIFO" -- "$bin" images --train "$tmp/ok.tfrecord.gz" --test "$tmp/fifo" --size 8 --model mlp --steps 1
printf 'This is a text file, not a picture; cltrain must say so.\n' >"$tmp/text.png"
tfr "$tmp/text.tfrecord" "$tmp/text.png" 4 0
bad "a text file inside a TFRecord" 2 "text.tfrecord: record [0-9]+ at offset [0-9]+: not an image" -- "$bin" images "$tmp/text.tfrecord" --size 8 --model mlp --steps 1
timeout -k 5 20 "$bin" predict "$tmp/ex.ckpt" "$tmp/text.png" >/dev/null 2>"$tmp/err"; rc=$?
check "predict: a text file is not an image" "[[ \$rc -eq 2 ]] && head -1 $tmp/err | grep -q 'text.png: not an image'" "$(head -2 "$tmp/err")"
bad "--device 0:2^66 (wrapped to the default device)" 2 "--device '0:99999999999999999999'" -- "${FM[@]}" --device 0:99999999999999999999
bad "--device 4294967296:0" 2 "--device '4294967296:0'" -- "${FM[@]}" --device 4294967296:0
timeout -k 5 60 "${FM[@]}" --quiet --label-smoothing 1e-320 >/dev/null 2>"$tmp/err"; rc=$?
check "--label-smoothing 1e-320 (a denormal) is a number in [0, 1)" "[[ \$rc -eq 0 ]]" "$(head -2 "$tmp/err")"
# the tuning database: a FIFO there is refused without blocking; an unwritable cache is found before the search
mkdir -p "$tmp/cache"
CLTRAIN_CACHE_DIR=$tmp/cache timeout 120 "$bin" tune --model mlp --budget 1 >/dev/null 2>&1
db=$(ls "$tmp/cache"/gemm-tune-*.txt 2>/dev/null | head -1)
if [[ -n $db ]]; then
  rm "$db"; mkfifo "$db"
  CLTRAIN_CACHE_DIR=$tmp/cache timeout -k 5 60 "${FM[@]}" --quiet >/dev/null 2>"$tmp/err"; rc=$?
  check "training with a FIFO as the tuning database (no hang): one line, trains" \
    "[[ \$rc -eq 0 && \$(wc -l <$tmp/err) -eq 1 ]] && grep -q 'tuning database ignored: .*is a FIFO' $tmp/err" "$(head -2 "$tmp/err")"
  CLTRAIN_CACHE_DIR=$tmp/cache timeout -k 5 20 "$bin" tune --model mlp --budget 60 >/dev/null 2>"$tmp/err"; rc=$?
  check "tune with a FIFO as the tuning database (no hang): refused before the search" \
    "[[ \$rc -eq 2 ]] && tail -1 $tmp/err | grep -q 'gemm-tune.*is a FIFO.*nothing was searched' && [[ -p $db ]]" "$(head -2 "$tmp/err")"
else
  notok "a tuning database to replace by a FIFO" "cltrain tune --budget 1 wrote none"
fi
CLTRAIN_CACHE_DIR=/proc/cltrain-cache timeout -k 5 20 "$bin" tune --model mlp --budget 60 >/dev/null 2>"$tmp/err"; rc=$?
check "tune: an unwritable cache folder is found before the search" \
  "[[ \$rc -eq 2 ]] && tail -1 $tmp/err | grep -q 'proc/cltrain-cache/gemm-tune.*nothing was searched'" "$(head -2 "$tmp/err")"

# --- disk full: the save fails, the previous checkpoint survives, exit 1 ---
ck=$tmp/run.ckpt
if timeout 300 "$bin" fashion-mnist --data "$tmp/set" --model mlp --quiet --checkpoint "$ck" >/dev/null 2>"$tmp/err"; then
  cp "$ck" "$tmp/orig.ckpt"
  kb=$(( $(stat -c %s "$ck") / 2048 ))
  # a file-size limit of half a checkpoint: the next save cannot complete (EFBIG)
  bad "checkpoint save past a file-size limit" 1 "run.ckpt: writing the checkpoint failed.*previous checkpoint is untouched.*stopped after step 2" -- \
    bash -c "ulimit -f $kb; exec '$bin' fashion-mnist --data '$tmp/set' --model mlp --quiet --epochs 2 --resume '$ck' --checkpoint '$ck'"
  leftover=$(ls "$tmp" | grep -c 'run.ckpt.tmp')
  if cmp -s "$ck" "$tmp/orig.ckpt" && [[ $leftover -eq 0 ]] &&
     timeout 300 "$bin" eval "$ck" --data "$tmp/set" >/dev/null 2>"$tmp/err"; then
    ok "the previous checkpoint is intact and loads; no temporary file left"
  else
    notok "the previous checkpoint is intact and loads" "cmp/eval failed or $leftover temporary files" "$(head -3 "$tmp/err")"
  fi
  # with no limit the same resume goes on
  if timeout 300 "$bin" fashion-mnist --data "$tmp/set" --model mlp --quiet --epochs 2 --resume "$ck" --checkpoint "$ck" >/dev/null 2>"$tmp/err"; then
    ok "resuming from it works once there is room"
  else
    notok "resuming from it works once there is room" "$(head -3 "$tmp/err")"
  fi
else
  notok "a first checkpoint" "$(head -3 "$tmp/err")"
fi
# a log that cannot grow: one line, training goes on (exit 0)
timeout 300 bash -c "ulimit -f 2; exec '$bin' fashion-mnist --data '$tmp/set' --model mlp --quiet --epochs 200 --progress-every 1 --logdir '$tmp/logs'" \
  >/dev/null 2>"$tmp/err"
rc=$?
lines=$(wc -l <"$tmp/err")
if [[ $rc -eq 0 && $lines -eq 1 ]] && grep -q "writing the training log failed" "$tmp/err"; then
  ok "a log write error is reported once, training goes on"
else
  notok "a log write error is reported once" "exit $rc, $lines lines" "$(head -3 "$tmp/err")"
fi
echo "1..$n"
