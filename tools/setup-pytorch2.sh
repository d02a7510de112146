#!/bin/sh
# setup-pytorch2.sh VENV: a Python virtual environment with the newest
# PyTorch from PyPI (CPU use only; PyPI's Linux wheel brings its CUDA
# libraries along, several GB, unused here) for the PyTorch 2 twins and
# races (tools/pytorch_airbench.py; tools/bench-pytorch.sh BUILD makes and
# uses BUILD/pt2venv), rather than Debian's python3-torch 1.13.
# TORCH_SPEC pins a version (default: torch, the newest). Does nothing when
# VENV already imports torch. Installs python3-venv from Debian if needed.
set -e
venv=${1:-build/pt2venv}
spec=${TORCH_SPEC:-torch}
if [ -x "$venv/bin/python" ] && "$venv/bin/python" -c "import torch" 2>/dev/null; then
  "$venv/bin/python" -c "import torch; print('torch', torch.__version__, 'in $venv')"
  exit 0
fi
if ! python3 -m venv --help >/dev/null 2>&1 || ! python3 -c "import ensurepip" >/dev/null 2>&1; then
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
  $SUDO apt-get install -y -q python3-venv
fi
rm -rf "$venv"
python3 -m venv "$venv"
"$venv/bin/pip" install -q --disable-pip-version-check "$spec" numpy
"$venv/bin/python" -c "import torch; print('torch', torch.__version__, 'in $venv')"
