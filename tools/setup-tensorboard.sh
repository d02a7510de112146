#!/bin/sh
# setup-tensorboard.sh VENV: a Python virtual environment holding the PyPI
# packages the suite checks cltrain's files with: `tensorboard` (reads the
# event files), `onnx` and `onnxruntime` (check and run `cltrain export`'s
# models) and `tfrecord` (an independent TFRecord writer for the reader's
# tests). Installs python3-venv from Debian if needed. Does nothing when VENV
# already has them all; installs only the missing ones into an existing VENV.
set -e
venv=${1:-build/tbvenv}
pkgs="tensorboard onnx onnxruntime tfrecord"
missing() {
  for p in $pkgs; do "$venv/bin/python" -c "import $p" 2>/dev/null || echo "$p"; done
}
if [ -x "$venv/bin/python" ]; then
  todo=$(missing)
  [ -z "$todo" ] && exit 0
else
  if ! python3 -m venv --help >/dev/null 2>&1 || ! python3 -c "import ensurepip" >/dev/null 2>&1; then
    SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
    $SUDO apt-get install -y -q python3-venv
  fi
  rm -rf "$venv"
  python3 -m venv "$venv"
  todo=$pkgs
fi
# shellcheck disable=SC2086
"$venv/bin/pip" install -q --disable-pip-version-check $todo
