#!/usr/bin/env bash
# Set-up on a fresh machine with Python 3.11: libmagic (system library), a virtualenv with torch
# (the CPU build) and the package. Idempotent; used by both README commands.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! ldconfig -p 2>/dev/null | grep -q 'libmagic\.so\.1'; then
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq || true
  $SUDO apt-get install -y -qq libmagic1 >/dev/null
fi
PY=${PYTHON:-python3.11}
command -v "$PY" >/dev/null || PY=python3
[ -x .venv/bin/python ] || "$PY" -m venv .venv
# torch pinned to the CPU build; an unpinned torch would pull a multi-GB CUDA build
.venv/bin/python -m pip install -q "torch==2.13.0"
.venv/bin/python -m pip install -q -e ".[test,dask]"
