#!/usr/bin/env bash
# Create .venv (if missing) and install xmemory_gpu, CPU-only torch first.
#   bash scripts/setup.sh          the package and its core dependencies (what the main job needs)
#   bash scripts/setup.sh dev      plus the test and optional-backend tools (pytest, Ray, OpenVINO, faiss, Triton, ...)
set -euo pipefail
cd "$(dirname "$0")/.."
VENV="${XMEM_VENV:-.venv}"
EXTRAS="${1:-}"
[ -x "$VENV/bin/python" ] || python3 -m venv "$VENV"
. "$VENV/bin/activate"
python -m pip install -q --upgrade pip
echo "torch==2.13.0" > "$VENV/torch-pin.txt"
python -m pip install -q torch==2.13.0            # CPU wheel; a bare `torch` pulls a multi-GB CUDA build
python -m pip install -q -c "$VENV/torch-pin.txt" scikit-build-core pybind11   # scripts/dev-build.sh rebuilds without isolation
python -m pip install -q -c "$VENV/torch-pin.txt" -e ".${EXTRAS:+[$EXTRAS]}"
