"""``chunk-rag`` at several passage widths beside ``naive-rag``, ``memory-only`` and
``xmemory``, at several token budgets, on evidence recall and evidence-word recall (micro over
categories 1-4), on a built store.

  python benchmarks/chunk_rag_sweep.py STORE DATA [--widths 16,32,64,128] [--budgets 300,600,1200]
      [--limit N] [--out sweep.json]

Prints one markdown table per measure, the passages each width makes and the seconds its level
took to build (splitting and embedding, once per width), and writes the sweep as JSON with ``--out``.
"""

from __future__ import annotations

import argparse
import json
import time

from xmemory_gpu.eval.report import fmt, git_commit
from xmemory_gpu.eval.runner import load_questions, run_sweep
from xmemory_gpu.retrieve import Retriever

CATEGORIES = (1, 2, 3, 4)


def _ints(s: str) -> list[int]:
    return [int(x) for x in s.split(",") if x]


def table(sweep: dict, key: str) -> str:
    budgets = sweep["budgets"]
    lines = [
        "| strategy | " + " | ".join(f"@{b}" for b in budgets) + " | tokens@" + f"{budgets[-1]} |",
        "|" + "---|" * (len(budgets) + 2),
    ]
    for s, r in sweep["strategies"].items():
        lines.append(
            f"| {s} | " + " | ".join(fmt(v) for v in r[key]) + f" | {fmt(r['context_tokens'][-1], 0)} |"
        )
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("store")
    ap.add_argument("data")
    ap.add_argument("--widths", type=_ints, default=[16, 32, 64, 128])
    ap.add_argument("--budgets", type=_ints, default=[300, 600, 1200])
    ap.add_argument("--limit", type=int, default=None, help="the first N questions only")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    r = Retriever.from_store(args.store)
    qs = [q for q in load_questions(args.data, r.bank.memory_ids, CATEGORIES, None) if q["evidence_messages"]]
    qs = qs[: args.limit] if args.limit else qs
    q_x = r.embedder.encode([q["question"] for q in qs])
    levels = {}
    for w in args.widths:  # build each width's passages level once, timed (the sweep's searches reuse it)
        t0 = time.perf_counter()
        lv = r._passages.level(r.bank, r.embedder, w, r.config.semantic.passage_words)
        levels[w] = {
            "passages": int(lv.level.seg.lengths.sum()),
            "seconds": round(time.perf_counter() - t0, 2),
        }
    strategies = ["naive-rag", *(f"chunk-rag:{w}" for w in args.widths), "memory-only", "xmemory"]
    t0 = time.perf_counter()
    sweep = run_sweep(r, qs, q_x, strategies, args.budgets, CATEGORIES)
    report = {
        "store": args.store,
        "data": args.data,
        "questions": len(qs),
        "memories": r.bank.n_memories,
        "messages": int(r.bank.msg.seg.lengths.sum()),
        "embedder": r.embedder.name,
        "tokenizer": r.tokens.name,
        "commit": git_commit(),
        "levels": levels,
        "sweep_seconds": round(time.perf_counter() - t0, 1),
        "sweep": sweep,
    }
    print(json.dumps({k: v for k, v in report.items() if k != "sweep"}))
    print("\nEvidence recall\n\n" + table(sweep, "recall"))
    print("\nEvidence-word recall\n\n" + table(sweep, "evidence_word_recall"))
    if args.out:
        with open(args.out, "w") as f:
            json.dump(report, f, indent=1)


if __name__ == "__main__":
    main()
