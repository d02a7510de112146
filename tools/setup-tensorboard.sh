#!/bin/sh
# setup-tensorboard.sh VENV: a Python virtual environment holding the
# `tensorboard` package, so the suite can check that TensorBoard itself reads
# cltrain's event files. Installs python3-venv from Debian if needed; the
# package comes from PyPI. Does nothing when VENV already has it.
set -e
venv=${1:-build/tbvenv}
[ -x "$venv/bin/python" ] && "$venv/bin/python" -c "import tensorboard" 2>/dev/null && exit 0
if ! python3 -m venv --help >/dev/null 2>&1 || ! python3 -c "import ensurepip" >/dev/null 2>&1; then
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
  $SUDO apt-get install -y -q python3-venv
fi
rm -rf "$venv"
python3 -m venv "$venv"
"$venv/bin/pip" install -q --disable-pip-version-check tensorboard
