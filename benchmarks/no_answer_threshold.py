"""Calibrating the live engine's "nothing relevant" gate (``config.live.no_answer_threshold``).

The gate empties a result whose top relevance (the largest query-unit cosine among its units) is
below a threshold. Its cost is the evidence recall it takes from answerable questions; its use is
the unanswerable questions it answers with nothing. This prints both against the threshold:

- on a LoCoMo-format store and file (answerable questions only: categories 1-4), the evidence
  recall lost at each threshold, as a share of the recall without the gate (the calibration allows 1 point);
- on the role chats (``datasets.assistant_chats``, live engine), the share of unanswerable questions
  emptied and of answerable recall kept.

    python benchmarks/no_answer_threshold.py STORE DATA [--strategy xmemory] [--budget 600]
"""

from __future__ import annotations

import argparse
import sys

import numpy as np

from xmemory_gpu.datasets.locomo import load_locomo
from xmemory_gpu.engine.results import relevance
from xmemory_gpu.eval.chat_metrics import evidence_recall
from xmemory_gpu.retrieve.retriever import Retriever

GRID = [round(0.05 * i, 2) for i in range(0, 15)]


def top_relevance(r) -> float:
    """The largest unit relevance, as the live engine marks it (``engine.results.relevance``)."""
    return max((relevance(u) for u in r.units), default=0.0)


def locomo_side(store: str, data: str, strategy: str, budget: int) -> tuple[np.ndarray, np.ndarray]:
    """(top relevance [Q], evidence recall [Q]) of the answerable questions."""
    convs = {c.sample_id: c for c in load_locomo(data)}
    ret = Retriever.from_store(store)
    qs, mids, ev = [], [], []
    for mid in ret.bank.memory_ids:
        for qa in convs[mid].qa:
            if qa.category in (1, 2, 3, 4) and qa.evidence:
                qs.append(qa.question)
                mids.append(mid)
                ev.append(qa.evidence)
    res = ret.search(qs, mids, strategy=strategy, budget_tokens=budget)
    return np.array([top_relevance(r) for r in res]), np.array(
        [evidence_recall(e, r.message_ids) for e, r in zip(ev, res)]
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("store")
    ap.add_argument("data")
    ap.add_argument("--strategy", default="xmemory")
    ap.add_argument("--budget", type=int, default=600)
    ap.add_argument(
        "--chats-embedder", default=None, help="embedder of the role-chat side (default: the default)"
    )
    ap.add_argument("--out", default=None, help="also write the table here (JSON)")
    args = ap.parse_args(argv)
    top, rec = locomo_side(args.store, args.data, args.strategy, args.budget)
    sys.path.insert(0, str(__import__("pathlib").Path(__file__).parent))
    from assistant_chats import run

    chats = run(args.chats_embedder, 150, [args.strategy], None)["strategies"][args.strategy]["rows"]
    ans = [r for r in chats if r["kind"] != "unanswerable"]
    una = [r for r in chats if r["kind"] == "unanswerable"]
    print(
        f"LoCoMo: {len(top)} answerable questions, {args.strategy} at {args.budget} tokens, recall {rec.mean():.3f}; "
        f"role chats: {len(ans)} answerable, {len(una)} unanswerable, {args.strategy} at 150 tokens"
    )
    print(
        "| threshold | LoCoMo recall lost (points) | LoCoMo questions emptied | chats: unanswerable emptied | "
        "chats: answerable recall kept |"
    )
    print("|---|---|---|---|---|")
    table = []
    for t in GRID:
        row = {
            "threshold": t,
            "locomo_recall_lost_points": round(float(rec[top < t].sum() / len(rec) * 100), 2),
            "locomo_emptied": round(float(np.mean(top < t)), 3),
            "chats_unanswerable_emptied": round(float(np.mean([r["top_relevance"] < t for r in una])), 2),
            "chats_answerable_recall_kept": round(
                sum(r["recall"] for r in ans if r["top_relevance"] >= t) / len(ans), 3
            ),
        }
        table.append(row)
        print("| " + " | ".join(str(v) for v in row.values()) + " |")
    if args.out:
        from _record import write_record

        figures = {"strategy": args.strategy, "budget": args.budget, "locomo_answerable": len(top)}
        figures |= {"locomo_recall": round(float(rec.mean()), 3), "chats_answerable": len(ans)}
        write_record(args.out, figures | {"chats_unanswerable": len(una), "rows": table})
    return 0


if __name__ == "__main__":
    sys.exit(main())
