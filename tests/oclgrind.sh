#!/usr/bin/env bash
# oclgrind.sh: every kernel program under Oclgrind (an OpenCL device simulator)
# with --data-races, at the launch shapes each device class really uses, on
# small shapes: a tiny residual model (conv, batch norm, shortcut with and
# without subsampling, max pooling, dropout, global average and max pooling,
# dense with ReLU and GELU, softmax cross-entropy) trains one step and evaluates, once per class and
# conv algorithm (im2col + GEMM, Winograd F(2x2) and F(4x4), fused and
# unfused, direct), with each optimizer, the resident data path, and the
# register GEMM at class gpu's work-group shape. Any report from the
# simulator fails the run: invalid reads or writes, data races, barrier
# divergence, API errors.
# Coverage: cltrain appends every program it builds (with the kernels the
# program defines) and every kernel it launches to CLTRAIN_KERNEL_LOG; a
# kernel file in kernels/ that no run builds, or a kernel no run launches,
# fails the last test.
# Oclgrind's --uninitialized plugin is not used: in Oclgrind 21.10 it stops
# on the `freeze` instruction LLVM 13+ emits ("Unhandled instruction"), so it
# cannot run these kernels. Reads of never-written memory are caught by the
# kernel tests instead (outputs poisoned with NaN before each launch).
# Bounded: 15 runs of one step on 8x8 images, a few minutes on 2 cores.
# Prints TAP. Needs oclgrind (Debian `oclgrind`; tools/setup-deps.sh).
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

if ! command -v oclgrind >/dev/null; then
  if [[ -n ${CI:-} ]]; then echo "1..1"; notok "oclgrind present (CI must install it: tools/setup-deps.sh)"; exit 0; fi
  echo "1..0 # SKIP oclgrind not installed (Debian: oclgrind; tools/setup-deps.sh installs it)"
  exit 0
fi
# A sanitizer's runtime and Oclgrind's interposed OpenCL library do not mix;
# the plain build runs this test.
if [[ -n ${CLTRAIN_SAN:-} ]]; then echo "1..0 # SKIP not under a sanitizer (CLTRAIN_SAN=$CLTRAIN_SAN)"; exit 0; fi

# three classes of 6 random 8x8 RGB images (uncompressed TGA)
python3 - "$tmp/set" <<'EOF'
import os, random, sys
random.seed(7)
for c in range(3):
    d = os.path.join(sys.argv[1], "c%d" % c)
    os.makedirs(d)
    for i in range(6):
        hdr = bytes([0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 8, 0, 8, 0, 24, 0])
        open(os.path.join(d, "%d.tga" % i), "wb").write(hdr + bytes(random.randrange(256) for _ in range(8 * 8 * 3)))
EOF
# Layer 0: 27 inputs per output (the direct kernel's first-layer case under
# class cpu); 2: 3x3 stride 1 with 16 outputs (Winograd fused under class cpu);
# 4: shortcut of the same shape; 7: another, whose add into the gradient of
# layer 4's output takes it through 4's ReLU (shortcut_bwd_act); 8: stride 2
# (direct or im2col); 10: shortcut that subsamples and pads channels (its add
# takes layer 7's ReLU gradient over all of it); 12: 3x3
# with 12 outputs (Winograd unfused in both classes: the fused kernel wants
# multiples of 16) and a batch norm over 12 channels (the 1-wide reduction;
# multiples of 8 take the 8-wide one). 16: a dense layer with GELU (its
# activation in a kernel of its own). Byte
# images (MNIST's format) are converted on the device (u8_to_f32) or gathered
# from a resident copy (gather_u8): a second tiny model over them, with
# global max pooling.
cat >"$tmp/tiny.cfg" <<'EOF'
[net]
height=8
width=8
channels=3
classes=3
[conv]
filters=16
size=3
pad=1
[batchnorm]
activation=relu
[conv]
filters=16
size=3
pad=1
[batchnorm]
[shortcut]
from=-3
activation=relu
[conv]
filters=16
size=3
pad=1
[batchnorm]
[shortcut]
from=-3
activation=relu
[conv]
filters=32
size=3
stride=2
pad=1
[batchnorm]
[shortcut]
from=-3
activation=relu
[maxpool]
size=2
[conv]
filters=12
size=3
pad=1
[batchnorm]
activation=relu
[dropout]
probability=0.5
[avgpool]
[dense]
outputs=6
activation=gelu
[dense]
outputs=3
[softmax]
EOF
mkdir -p "$tmp/idx"
python3 - "$tmp/idx" <<'EOF'
import os, random, struct, sys
random.seed(8)
for pre, n in (("train", 12), ("t10k", 4)):
    open(os.path.join(sys.argv[1], pre + "-images-idx3-ubyte"), "wb").write(
        struct.pack(">IIII", 0x803, n, 28, 28) + bytes(random.randrange(256) for _ in range(n * 28 * 28)))
    open(os.path.join(sys.argv[1], pre + "-labels-idx1-ubyte"), "wb").write(
        struct.pack(">II", 0x801, n) + bytes(random.randrange(10) for _ in range(n)))
EOF
printf '[net]\nheight=28\nwidth=28\nchannels=1\nclasses=10\n[maxpool]\nsize=4\n[conv]\nfilters=4\nsize=3\n[globalmaxpool]\n[dense]\noutputs=10\n[softmax]\n' >"$tmp/bytes.cfg"

klog=$tmp/kernels.log
export CLTRAIN_KERNEL_LOG=$klog CLTRAIN_CACHE_DIR=$tmp/cache
# run NAME CLASS [ENV=VALUE...] -- CLTRAIN-OPTIONS...
run() {
  local name=$1 cls=$2; shift 2
  local envs=()
  while [[ $1 != -- ]]; do envs+=("$1"); shift; done
  shift
  local log=$tmp/$name.oclgrind out=$tmp/$name.out start=$SECONDS rc
  env CLTRAIN_DEVICE_CLASS="$cls" "${envs[@]}" timeout 600 oclgrind --data-races --check-api --log "$log" \
    "$bin" "${data[@]}" --batch-size 2 --steps 1 --limit-test 2 --seed 3 "$@" >"$out" 2>&1
  rc=$?
  local secs=$((SECONDS - start))
  if [[ $rc -eq 0 && ! -s $log ]] && grep -q "kernels: class $cls" "$out"; then
    local algos
    algos=$(awk '$2 == "conv" { a = "im2col"; for (i = 3; i <= NF; i++) if ($i ~ /^(direct|wino[24])$/) a = $i; printf "%s%s", s, a; s = "," }' "$out")
    ok "class $cls, $name: no Oclgrind report ($secs s; convs $algos)"
  else
    notok "class $cls, $name" "exit $rc, $secs s, $(wc -l <"$log" 2>/dev/null || echo 0) report lines" "$(head -20 "$log" 2>/dev/null)" "$(tail -5 "$out")"
  fi
}

data=(images "$tmp/set" --size 8 --model "$tmp/tiny.cfg")
# class gpu: the device class a GPU gets (Oclgrind reports the GPU and CPU
# type bits at once, which cltrain takes as gpu; set here anyway)
run gpu-auto gpu -- --conv auto
run gpu-winograd-sgd gpu -- --conv winograd --optimizer sgd --momentum 0.9
run gpu-winograd4-adamw gpu -- --conv winograd4 --optimizer adamw --weight-decay 0.01
run gpu-direct-nesterov gpu -- --conv direct --optimizer nesterov --momentum 0.9
# the register GEMM at class gpu's work-groups, and both kernels' split-K
# partial tiles and reduction (a 16-long K chunk splits the weight gradients)
run gpu-reg-gemm-split gpu CLTRAIN_GEMM=4,1,16 -- --conv im2col
run gpu-local-gemm-split gpu CLTRAIN_GEMM=local,32,32,16,4,4,4,16 -- --conv im2col
# class cpu: PoCL's shapes (register GEMM, split-K, 16-wide kernels, fused Winograd)
run cpu-auto cpu -- --conv auto
run cpu-im2col-sgd cpu -- --conv im2col --optimizer sgd --momentum 0.9
run cpu-winograd-nesterov cpu -- --conv winograd --optimizer nesterov --momentum 0.9
run cpu-winograd4-adamw cpu -- --conv winograd4 --optimizer adamw --weight-decay 0.01
run cpu-direct cpu -- --conv direct
run cpu-reg-gemm-split cpu CLTRAIN_GEMM=6,1,16 -- --conv im2col
# the image GEMM (the cpu-scalar row's: llvmpipe), split-K partials included
run cpu-img-gemm-split cpu CLTRAIN_GEMM=img,4,4,16 -- --conv im2col
# class cpu, Winograd convs that fuse with the 2x2 max pool after them: 80 -> 64 pools in
# wino_out_pool (too many inputs to fuse), its weight gradient from the pool's gradient
# (wino_dy_pool) and its data gradient through wino_fused's pool_in; 64 -> 80 pools in
# wino_fused, its data gradient through wino_in_pool; 64 channels of batch norm (bn_reduce64)
printf '[net]\nheight=8\nwidth=8\nchannels=3\nclasses=3\n[conv]\nfilters=80\nsize=3\npad=1\nactivation=relu\n[conv]\nfilters=64\nsize=3\npad=1\n[maxpool]\nsize=2\n[batchnorm]\n[conv]\nfilters=80\nsize=3\npad=1\n[maxpool]\nsize=2\n[dense]\noutputs=3\n[softmax]\n' >"$tmp/pool.cfg"
data=(images "$tmp/set" --size 8 --model "$tmp/pool.cfg")
run cpu-pool-fused cpu -- --conv winograd4
# class cpu, batch norms whose output a fused Winograd conv alone reads: the conv's forward and weight
# gradient read the batch norm's input and normalise it as they load (wino_fused's norm; the weight
# gradient 16 -> 32 through wino_dw_fused's, 32 -> 48 through wino_in's)
printf '[net]\nheight=8\nwidth=8\nchannels=3\nclasses=3\n[conv]\nfilters=16\nsize=3\npad=1\n[batchnorm]\nactivation=relu\n[conv]\nfilters=32\nsize=3\npad=1\n[batchnorm]\n[conv]\nfilters=48\nsize=3\npad=1\n[avgpool]\n[dense]\noutputs=3\n[softmax]\n' >"$tmp/norm.cfg"
data=(images "$tmp/set" --size 8 --model "$tmp/norm.cfg")
run cpu-bn-norm cpu -- --conv winograd4
# class cpu, the direct kernel with outputs in 8s, not 16s (rows not 64-byte aligned, a half vector
# last): a 2x2 to 24 outputs with GELU (cifar-fast's whitening layer's shape), then 24 -> 8 (216
# inputs per output: direct_dw_taps; its data gradient by im2col's col2im, 24 input channels)
printf '[net]\nheight=8\nwidth=8\nchannels=3\nclasses=3\n[conv]\nfilters=24\nsize=2\nactivation=gelu\n[conv]\nfilters=8\nsize=3\npad=1\n[dense]\noutputs=3\n[softmax]\n' >"$tmp/eights.cfg"
data=(images "$tmp/set" --size 8 --model "$tmp/eights.cfg")
run cpu-direct-8s cpu -- --conv direct
data=(fashion-mnist --data "$tmp/idx" --model "$tmp/bytes.cfg")
run gpu-bytes-resident gpu -- --resident
run cpu-bytes cpu -- --producers 0
# the lookahead's kernel: it averages from the 4th epoch on, every 5 steps
# (6 steps of 2 images per epoch here: step 20 starts the average, 25 and 30 update it)
run cpu-bytes-lookahead cpu -- --producers 0 --epochs 5 --steps 30 --optimizer nesterov --lookahead 0.95

# coverage: every kernels/*.cl (but the prelude) built, every kernel it defines launched
files_missing=() kernels_missing=()
for f in "$here"/kernels/*.cl; do
  b=$(basename "$f")
  [[ $b == prelude.cl ]] && continue
  grep -q "^program $b " "$klog" || files_missing+=("$b")
done
# the kernels a program defines, as the implementation lists them (macro-made
# ones included), and those the sources declare without a macro
defined=$( { sed -n 's/^program [^ ]* class [a-z]* kernels \([^ ]*\) options.*/\1/p' "$klog" | tr ';' '\n'
             cat "$here"/kernels/*.cl | tr '\n' ' ' | grep -oE '__kernel( __attribute__\(\([^)]*\)\)\))? +void +[A-Za-z_][A-Za-z0-9_]*' | awk '{print $NF}' | grep -v '^NAME$'
           } | sort -u | grep -v '^$')
for k in $defined; do grep -q "^launch $k " "$klog" || kernels_missing+=("$k"); done
nk=$(wc -w <<<"$defined")
nl=$(grep -c '^launch ' "$klog")
if [[ ${#files_missing[@]} -eq 0 && ${#kernels_missing[@]} -eq 0 && $nk -gt 0 ]]; then
  ok "coverage: all $(ls "$here"/kernels/*.cl | grep -vc prelude.cl) kernel files built, all $nk kernels launched ($nl distinct launch shapes over both classes)"
else
  notok "coverage: every kernel file built and every kernel launched under Oclgrind" \
    "files never built: ${files_missing[*]:-none}" "kernels never launched: ${kernels_missing[*]:-none}"
fi
echo "1..$n"
