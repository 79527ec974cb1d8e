#!/usr/bin/env bash
# Reproduce the LoCoMo dev-split retrieval table for every strategy without an LLM (CPU, embedded
# embedder, no downloads): build the store, evaluate the 885 non-adversarial questions, sweep the
# token budget. Usage: scripts/locomo_dev.sh [DATA.json] [OUT_DIR]   (about 3-4 minutes on 2 cores)
set -euo pipefail
DATA="${1:-../shared/data/locomo/locomo_dev.json}"
OUT="${2:-locomo_dev}"
export HF_HUB_OFFLINE=1
xmemory build "$DATA" --out "$OUT/store" --no-progress
xmemory eval "$OUT/store" --data "$DATA" --out "$OUT/eval" --sweep-budget 300,600,1200
