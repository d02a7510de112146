#!/usr/bin/env bash
# gpu-carry.sh: gather what a GPU machine without Debian's packages needs to
# run build/ there: the shared libraries build/cltrain and the tests load
# (except the C runtime, which the target's newer glibc provides) and the
# Fashion-MNIST files, into .gpu/ (git-ignored). tools/gpu-check.sh uses it.
set -euo pipefail
cd "$(dirname "$0")/.."
rm -rf .gpu && mkdir -p .gpu/lib .gpu/data
for b in build/cltrain build/tests/test_gemm; do
  ldd "$b" | awk '$3 ~ /^\// {print $3}'
done | sort -u | grep -vE '/(libc|libm|libresolv|libstdc\+\+|libgcc_s|libpthread|libdl|ld-linux[^/]*)\.so' |
  while read -r lib; do cp -L "$lib" .gpu/lib/; done
cp /usr/share/datasets/fashion-mnist/*.gz .gpu/data/
grep -qx '/.gpu/' .git/info/exclude 2>/dev/null || echo '/.gpu/' >>.git/info/exclude
du -sh .gpu
