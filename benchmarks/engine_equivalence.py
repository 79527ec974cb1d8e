"""Streaming equals bulk: every conversation of a LoCoMo-format file streamed into a live engine
one dated chat part at a time (one ``add_batch`` per round of parts across all memories, as the bulk
build advances them), then compared with a bulk-built store of the same file: per-memory f(P), counts,
and evidence recall of ``xmemory`` and ``memory-only`` on the non-adversarial questions.

  python benchmarks/engine_equivalence.py BULK_STORE --data locomo_dev.json --out DIR [--budgets 0,300,600,1200]

(``BULK_STORE`` from ``xmemory build DATA --out BULK_STORE``; budget 0 means none.)
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

from xmemory_gpu.datasets.locomo import load_locomo
from xmemory_gpu.engine import MemoryEngine, scope_key
from xmemory_gpu.eval.retrieval_metrics import evidence_recall
from xmemory_gpu.memory.store import Store
from xmemory_gpu.retrieve import Retriever

STRATEGIES = ("xmemory", "memory-only")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("bulk_store")
    ap.add_argument("--data", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--budgets", default="0,300,600,1200")
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    convs = load_locomo(args.data)
    bulk = Retriever.from_store(args.bulk_store)
    t0 = time.perf_counter()
    live = out / "live_store"
    with MemoryEngine.open(live, embedder=bulk.embedder, config=bulk.config) as eng:
        if not eng.bank.n_memories:
            sessions = [sorted({m.session for m in c.messages}) for c in convs]
            for step in range(max(len(s) for s in sessions)):
                eng.add_batch(
                    [
                        {
                            "user_id": c.sample_id,
                            "messages": [
                                {
                                    "id": m.id,
                                    "speaker": m.speaker,
                                    "content": m.text,
                                    "timestamp": m.timestamp,
                                    "session": m.session,
                                }
                                for m in c.messages
                                if step < len(s) and m.session == s[step]
                            ],
                        }
                        for c, s in zip(convs, sessions)
                    ]
                )
        stream_s = time.perf_counter() - t0
        st = Store.open(args.bulk_store)
        per_memory = {}
        for c in convs:
            b = st.stats(c.sample_id)
            e = eng.bank.stats[eng.bank.index[scope_key(c.sample_id)]]
            per_memory[c.sample_id] = {
                k: (b.get(k), e.get(k))
                for k in ("n_messages", "n_episodes", "n_semantics", "n_themes", "f_P")
            }
            per_memory[c.sample_id]["f_P_rel_diff"] = abs(e["f_P"] - b["f_P"]) / abs(b["f_P"])
        qs = [(c.sample_id, q) for c in convs for q in c.qa if q.category != 5]
        recall = {}
        for budget in [int(x) for x in args.budgets.split(",")]:
            bud = budget or None
            for s in STRATEGIES:
                rb = bulk.search(
                    [q.question for _, q in qs], [m for m, _ in qs], strategy=s, budget_tokens=bud
                )
                re_ = []
                for c in convs:  # one batched search per memory
                    mine = [q.question for m, q in qs if m == c.sample_id]
                    re_ += (
                        eng.search(mine, user_id=c.sample_id, strategy=s, budget_tokens=bud) if mine else []
                    )
                vb = [evidence_recall(r.message_ids, q.evidence) for r, (_, q) in zip(rb, qs)]
                ve = [evidence_recall(r.message_ids, q.evidence) for r, (_, q) in zip(re_, qs)]
                mb = float(np.mean([v for v in vb if v is not None]))
                me = float(np.mean([v for v in ve if v is not None]))
                recall[f"{s}@{budget or 'none'}"] = {"bulk": mb, "stream": me, "diff": me - mb}
    report = {
        "data": args.data,
        "questions": len(qs),
        "stream_s": stream_s,
        "per_memory": per_memory,
        "max_f_P_rel_diff": max(v["f_P_rel_diff"] for v in per_memory.values()),
        "recall": recall,
    }
    (out / "equivalence.json").write_text(json.dumps(report, indent=2))
    print(json.dumps({k: v for k, v in report.items() if k != "per_memory"}, indent=2))


if __name__ == "__main__":
    main()
