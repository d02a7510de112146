#!/usr/bin/env bash
# tools/bench-mpi.sh BUILD [RANKS]: data-parallel scaling on this machine,
# `cltrain bench dist --model cifar-cnn` under mpirun. On a CPU (PoCL) each
# rank gets 1 / RANKS of the cores (POCL_MAX_PTHREAD_COUNT), so the 1-rank
# baseline and each of the N ranks compute on the same share and the
# efficiency shows what synchronising costs, not core contention. Called by
# `make bench`; does nothing (exit 0) without mpirun or an MPI build.
set -euo pipefail
build=${1:?usage: tools/bench-mpi.sh BUILD [RANKS]}
ranks=${2:-2}
if ! command -v mpirun >/dev/null || ! "$build/cltrain" --version | grep -q "over mpi"; then
    echo "bench-mpi: no mpirun or cltrain built without MPI (apt-get install libopenmpi-dev openmpi-bin; rebuild); skipping"
    exit 0
fi
cores=$(nproc)
per=$((cores / ranks > 0 ? cores / ranks : 1))
export OMPI_MCA_btl=${OMPI_MCA_btl:-self,vader}
POCL_MAX_PTHREAD_COUNT=$per mpirun --allow-run-as-root --oversubscribe -np "$ranks" \
    "$build/cltrain" bench dist --model cifar-cnn --batch-size 64 --steps 20
