#!/usr/bin/env bash
# Reproduce the LoCoMo dev-split retrieval table without an LLM (CPU, embedded embedder, no downloads):
# build the store, check naive-rag at k = 5 / 10 / 20 chunks (no budget) against the flat anchor
# (0.392 / 0.482 / 0.577, the figures published with the dev split), then every strategy's evidence recall and
# mean context tokens at 300 / 600 / 1,200 tokens. Writes OUT_DIR/table.md.
# Usage: scripts/locomo_dev.sh DATA.json [OUT_DIR]
set -euo pipefail
DATA="${1:?usage: scripts/locomo_dev.sh DATA.json [OUT_DIR] (the LoCoMo dev split, a LoCoMo-format file)}"
OUT="${2:-locomo_dev}"
export HF_HUB_OFFLINE=1
[ -f "$OUT/store/memory.sqlite" ] || xmemory build "$DATA" --out "$OUT/store" --no-progress
for K in 5 10 20; do
  echo "{\"baselines\": {\"naive_rag_k\": $K}}" > "$OUT/k$K.json"
  xmemory eval "$OUT/store" --data "$DATA" --out "$OUT/naive_k$K" --strategies naive-rag --config "$OUT/k$K.json" > /dev/null
done
xmemory eval "$OUT/store" --data "$DATA" --out "$OUT/eval" --sweep-budget 300,600,1200
python - "$OUT" <<'PY' | tee "$OUT/table.md"
import json, sys
out = sys.argv[1]
anchor = {5: 0.392, 10: 0.482, 20: 0.577}
print("| naive-rag, no budget | recall | anchor | context tokens |\n|---|---|---|---|")
for k, a in anchor.items():
    s = json.load(open(f"{out}/naive_k{k}/summary.json"))["strategies"]["naive-rag"]
    print(f"| k = {k} | {s['recall']['micro']:.3f} | {a:.3f} | {s['context_tokens']['micro']:.0f} |")
sw = json.load(open(f"{out}/eval/sweep.json"))
b = sw["budgets"]
print("\n| strategy | " + " | ".join(f"recall@{x} | tokens@{x}" for x in b) + " |\n|---|" + "---|---|" * len(b))
for name, r in sw["strategies"].items():
    print(f"| {name} | " + " | ".join(f"{r['recall'][i]:.3f} | {r['context_tokens'][i]:.0f}" for i in range(len(b))) + " |")
PY
