#!/bin/sh
# Install the Debian packages cltrain needs to build, test and run, if any is
# missing. Runs apt-get as root (or through sudo); does nothing when all are there.
# Three OpenCL implementations are installed, so the suite runs with all their
# ICDs present: PoCL (the CPU device the tests run on), Mesa's rusticl and
# Clover (mesa-opencl-icd), and the Oclgrind simulator (tests/oclgrind.sh).
#   tools/setup-deps.sh          what build, test and run need (python3-numpy and
#                                python3-torch: tests/arrays.sh and tests/import.sh
#                                write their NumPy files and PyTorch models with them)
#   tools/setup-deps.sh --bench  also what `make bench` compares against: PyTorch
#                                and an optimised BLAS for it (Debian's PyTorch runs
#                                on whatever libblas.so.3 is installed, by default
#                                the reference one, which is 3x slower), OpenBLAS's
#                                SGEMM as the machine's GEMM limit, and the
#                                allocators tools/bench-pytorch.sh tries PyTorch 2
#                                with (jemalloc, tcmalloc; PyTorch 2 itself comes
#                                from PyPI, tools/setup-pytorch2.sh)
set -e
pkgs="build-essential pkg-config bc xxd ocl-icd-opencl-dev opencl-c-headers pocl-opencl-icd clinfo
mesa-opencl-icd oclgrind
libclblast-dev liblapacke-dev libstb-dev libturbojpeg0-dev libcmocka-dev zlib1g-dev libcurl4-openssl-dev libssl-dev
libopenmpi-dev openmpi-bin clang libclang-rt-14-dev iproute2
dataset-fashion-mnist python3 python3-venv python3-numpy python3-torch
fonts-arphic-ukai fonts-arphic-uming fonts-arphic-gbsn00lp fonts-arphic-gkai00mp fonts-arphic-bkai00mp
fonts-arphic-bsmi00lp fonts-wqy-zenhei fonts-wqy-microhei fonts-dejavu-core"
case "${1:-}" in
  "") ;;
  --bench) pkgs="$pkgs python3-torch libopenblas0-pthread libjemalloc2 libtcmalloc-minimal4" ;;
  *) echo "tools/setup-deps.sh: unknown option '$1'; expected nothing or --bench" >&2; exit 2 ;;
esac
missing=""
for p in $pkgs; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
[ -z "$missing" ] && exit 0
echo "cltrain: installing:$missing"
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO=sudo
$SUDO apt-get update -q
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends $missing
