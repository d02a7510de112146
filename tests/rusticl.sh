#!/usr/bin/env bash
# rusticl.sh: kernel tests on a second OpenCL implementation, Mesa's rusticl
# on llvmpipe (Debian mesa-opencl-icd, RUSTICL_ENABLE=llvmpipe), pinned with
# OCL_ICD_VENDORS, in both kernel classes (CLTRAIN_DEVICE_CLASS=cpu and gpu).
# Each test must pass and Mesa must print no warning (it once printed
# "Treating load_kernel_arg in control flow as uniform" for softmax_xent).
#
# Bounded: rusticl 22.3 on llvmpipe compiles each kernel variant in 10-40 s
# and runs cltrain's kernels 20-400 times slower than PoCL (BENCHMARKS.md),
# so the kernel tests run with CLTRAIN_TEST_SUBSET=device (tests/ct_test.h):
# test_bn, test_shortcut and test_model whole; test_gemm with the programs
# the class in force runs on this device (class cpu: gemm_img.cl and the
# register kernel; class gpu: the register kernel, since the gpu row's
# local tile needs 64 work-items and llvmpipe allows 32) on every shape;
# test_layers with every test, its conv tests (Winograd, direct, bias=0)
# on a few cases that reach every kernel of winograd.cl and conv_direct.cl
# (each test says which). PoCL's passes run all of both. Mesa's shader
# cache (the compiled kernels) is kept in the build tree between runs; a
# fresh clone, as in CI, starts it cold (BENCHMARKS.md has both times).
# Mesa 22.3's llvmpipe ends a work-item's loops after 65535 iterations in
# all, silently; cltrain measures that (ct_cl_loop_limit) and splits its
# work below it, and the tests here print the limit found.
# Skipped when rusticl is not installed. Prints TAP.
set -u
here=$(cd "$(dirname "$0")/.." && pwd)
build=${CLTRAIN_BUILD:-build}
[[ $build == /* ]] || build=$here/$build
icd=/etc/OpenCL/vendors/rusticl.icd
# the kernels are what this checks, not the host code under a sanitizer (and Mesa is slow there)
if [[ -n ${CLTRAIN_SAN:-} ]]; then echo "1..0 # SKIP not under a sanitizer (CLTRAIN_SAN=$CLTRAIN_SAN)"; exit 0; fi
if [[ ! -f $icd ]]; then echo "1..0 # SKIP no $icd (Debian: mesa-opencl-icd)"; exit 0; fi
export RUSTICL_ENABLE=llvmpipe OCL_ICD_VENDORS=$icd
if ! "$build/cltrain" devices 2>/dev/null | grep -q llvmpipe; then
  echo "1..0 # SKIP rusticl lists no llvmpipe device"; exit 0
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# rusticl's programs cached apart from PoCL's, and Mesa's compiled kernels (kept between runs of the suite)
export CLTRAIN_CACHE_DIR=$build/cache-rusticl
export MESA_SHADER_CACHE_DIR=${MESA_SHADER_CACHE_DIR:-$build/cache-mesa}
export CLTRAIN_TEST_SUBSET=device
limit=${CLTRAIN_RUSTICL_TIMEOUT:-300}
all_start=$(date +%s)
n=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
notok() { n=$((n + 1)); echo "not ok $n - $1"; shift; for l in "$@"; do echo "# $l"; done; }

# the device line says which class each run gets
for cls in cpu gpu; do
  out=$(CLTRAIN_DEVICE_CLASS=$cls "$build/cltrain" devices 2>&1)
  if grep -q "class $cls" <<<"$out"; then ok "rusticl devices: class $cls in force"
  else notok "rusticl devices: class $cls" "$out"; fi
done

for cls in cpu gpu; do
  for t in test_bn test_shortcut test_model test_gemm test_layers; do
    start=$(date +%s)
    CLTRAIN_DEVICE_CLASS=$cls CMOCKA_MESSAGE_OUTPUT=TAP timeout -k 10 "$limit" "$build/tests/$t" >"$tmp/log" 2>&1
    rc=$? secs=$(($(date +%s) - start))
    fails=$(grep -cE '^not ok' "$tmp/log")
    mesa=$(grep -c '^MESA: warning' "$tmp/log")
    loops=$(grep -m1 "loop limit" "$tmp/log")
    [[ -n $loops ]] && echo "# class $cls: ${loops#\# }"
    if [[ $rc -eq 0 && $fails -eq 0 && $mesa -eq 0 ]]; then
      ok "$t on rusticl, class $cls ($secs s)"
    else
      notok "$t on rusticl, class $cls" "exit $rc after $secs s (limit $limit s), $fails failed, $mesa Mesa warnings" \
        "$(grep -E '^not ok|^MESA|^# .*mismatch' "$tmp/log" | grep -v ' 0 mismatches' | head -5)" "$(tail -n 3 "$tmp/log")"
    fi
  done
done
echo "# rusticl kernel tests: $(($(date +%s) - all_start)) s in all (Mesa's shader cache: $MESA_SHADER_CACHE_DIR)"
echo "1..$n"
