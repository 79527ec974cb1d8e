#!/usr/bin/env bash
# Rebuild the C++/CUDA modules into the editable install of .venv (serialised with a lock so
# several shells can call it). Incremental: build/{wheel_tag} keeps the CMake state.
set -euo pipefail
cd "$(dirname "$0")/.."
. "${XMEM_VENV:-.venv}/bin/activate"
export PATH="$PATH:/usr/local/cuda/bin"
# Developer builds tune for this CPU; wheels (pyproject default OFF) stay portable, the kernels
# pick AVX-512 / AVX2 at run time either way.
export XMEM_NATIVE="${XMEM_NATIVE:-ON}"
exec flock /tmp/xmemory-dev-build.lock python -m pip install -q --no-build-isolation --no-deps -e .
