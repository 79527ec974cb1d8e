"""Long user-assistant chats: statements per message, and budget fill and evidence recall
of a per-conversation question sample at 300 / 600 / 1,200 tokens, on a built store.

  xmemory synth --long --conversations 20 --out long20.json
  xmemory build long20.json --out STORE
  python benchmarks/long_chats.py STORE long20.json --per-conversation 10 --out long_chats.json

Fill is context tokens / budget per question; a question counts below 90% when its context is.
"""

from __future__ import annotations

import argparse
import json
import time
from collections import Counter

import numpy as np

from xmemory_gpu.eval.retrieval_metrics import evidence_recall
from xmemory_gpu.memory.hierarchy import view
from xmemory_gpu.retrieve import Retriever

STRATEGIES = ("naive-rag", "memory-only", "xmemory")
BUDGETS = (300, 600, 1200)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("store")
    ap.add_argument("data")
    ap.add_argument(
        "--per-conversation",
        type=int,
        default=10,
        help="the first N questions with evidence of each conversation",
    )
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    r = Retriever.from_store(args.store)
    views = {r.bank.memory_ids[b]: view(r.bank, b) for b in range(r.bank.n_memories)}
    first = Counter(
        (mid, s.message_ids[0]) for mid, v in views.items() for s in v.semantics
    )  # a node's own message
    per_msg: dict[str, list[int]] = {}
    for mid, v in views.items():
        for m in v.messages:
            per_msg.setdefault(m.speaker, []).append(first.get((mid, m.id), 0))
    report: dict = {
        "memories": len(views),
        "messages": sum(len(v.messages) for v in views.values()),
        "semantic_nodes": sum(len(v.semantics) for v in views.values()),
        "themes": sum(len(v.themes) for v in views.values()),
        "statements_per_message": {
            spk: {"max": max(c), "mean": round(float(np.mean(c)), 2)} for spk, c in per_msg.items()
        },
    }
    print(json.dumps(report))
    qs = []
    for conv in json.load(open(args.data)):
        sel = [q for q in conv["qa"] if q.get("category") in (1, 2, 3, 4) and q.get("evidence")][
            : args.per_conversation
        ]
        qs += [(conv["sample_id"], q) for q in sel]
    report["questions"] = len(qs)
    for strategy in STRATEGIES:
        for budget in BUDGETS:
            t0 = time.perf_counter()
            res = r.search(
                [q["question"] for _, q in qs], [m for m, _ in qs], strategy=strategy, budget_tokens=budget
            )
            rec = [evidence_recall(x.message_ids, q["evidence"]) for x, (_, q) in zip(res, qs)]
            fill = np.array([x.context_tokens / budget for x in res])
            row = {
                "recall": round(float(np.mean(rec)), 3),
                "fill_mean": round(float(fill.mean()), 3),
                "fill_min": round(float(fill.min()), 3),
                "below_90": int((fill < 0.9).sum()),
                "empty": int(sum(x.context_tokens == 0 for x in res)),
                "seconds": round(time.perf_counter() - t0, 1),
            }
            report[f"{strategy}@{budget}"] = row
            print(strategy, budget, json.dumps(row), flush=True)
    with open(args.out, "w") as f:
        json.dump(report, f, indent=1)


if __name__ == "__main__":
    main()
