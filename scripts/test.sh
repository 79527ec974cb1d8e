#!/usr/bin/env bash
# Install (if needed) and run the test suite on the CPU.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh dev
. "${XMEM_VENV:-.venv}/bin/activate"
export HF_HUB_OFFLINE=1
python -m pytest -q "$@"
