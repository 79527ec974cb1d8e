#!/usr/bin/env bash
# The main job on the embedded defaults (CPU, no API keys, no downloads at run time):
# generate 20 synthetic conversations, bulk-build a memory store, print its stats, query it.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
. "${XMEM_VENV:-.venv}/bin/activate"
export HF_HUB_OFFLINE=1
OUT=quickstart
xmemory synth --conversations 20 --seed 0 --out "$OUT/synthetic.json"
xmemory build "$OUT/synthetic.json" --out "$OUT/store"
xmemory stats "$OUT/store"
MEM=$(xmemory stats "$OUT/store" --ids | sed -n 1p)
xmemory search "$OUT/store" --memory "$MEM" "What does Alice do for work?"
