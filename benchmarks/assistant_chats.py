"""The live engine on role chats (``xmemory_gpu.datasets.assistant_chats``), as an app would use it:
each chat added exchange by exchange (a user turn and the assistant's reply per ``add``), the app's
``user_name`` passed where it knows one, then every question searched alone at a small budget.

Reports per strategy: evidence recall of answerable questions (first-person and named apart), the
share of changed facts whose newer value shows before the superseded one, the AUROC of
``top_relevance`` between answerable and unanswerable questions, what the default no-answer
threshold leaves (empty contexts on unanswerable questions, answerable recall kept), statements with
broken verb forms or cut abbreviations, and add / search times beside one encoder forward.

    python benchmarks/assistant_chats.py [--embedder SPEC] [--budget 150] [--strategies xmemory memory-only]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

from xmemory_gpu.datasets.assistant_chats import chats
from xmemory_gpu.embed import load_embedder
from xmemory_gpu.engine import MemoryEngine
from xmemory_gpu.eval.chat_metrics import auroc, broken_forms, evidence_recall, newer_first


def _ms(xs: list[float]) -> str:
    return f"p50 {1000 * statistics.median(xs):.1f} ms, max {1000 * max(xs):.1f} ms" if xs else "-"


def run(
    embedder: str | None, budget: int, strategies: list[str], threshold: float | None, small_talk: bool = True
) -> dict:
    CHATS = chats(small_talk)
    emb = load_embedder(embedder) if embedder else None
    out: dict = {"embedder": embedder or "default", "budget": budget, "strategies": {}}
    with tempfile.TemporaryDirectory() as tmp, MemoryEngine.open(Path(tmp) / "store", embedder=emb) as eng:
        adds = []
        for chat in CHATS:
            msgs = chat.messages()
            for i in range(0, len(msgs), 2):
                t = time.perf_counter()
                eng.add(
                    msgs[i : i + 2],
                    user_id=chat.user_id,
                    **({"user_name": chat.user_name} if chat.user_name else {}),
                )
                adds.append(time.perf_counter() - t)
        statements = [
            u["text"] for c in CHATS for u in eng.get_all(user_id=c.user_id) if u["type"] == "semantic"
        ]
        broken = [(s, b) for s in statements if (b := broken_forms(s))]
        probe = CHATS[0].turns[2][1]
        fw = []
        for _ in range(5):
            t = time.perf_counter()
            eng.embedder.encode_queries([probe])
            fw.append(time.perf_counter() - t)
        out |= {"add": _ms(adds), "one_forward": _ms(fw), "statements": len(statements), "broken": broken}
        for strategy in strategies:
            rows, times = [], []
            for chat in CHATS:
                for q in chat.questions:
                    t = time.perf_counter()
                    r = eng.search(
                        q.text,
                        user_id=chat.user_id,
                        strategy=strategy,
                        budget_tokens=budget,
                        **({"threshold": 0.0} if threshold is None else {}),
                    )[0]
                    times.append(time.perf_counter() - t)
                    order = [m for u in r.units if u.type != "theme" for m in u.message_ids]
                    ev, st = [chat.message_id(n) for n in q.evidence], [chat.message_id(n) for n in q.stale]
                    rows.append(
                        {
                            "kind": q.kind,
                            "question": q.text,
                            "recall": evidence_recall(ev, r.message_ids),
                            "newer_first": newer_first(order, ev, st) if st else None,
                            "top_relevance": r.top_relevance,
                            "empty": not r.units,
                            "context": r.context,
                        }
                    )
            ans = [r for r in rows if r["kind"] != "unanswerable"]
            una = [r for r in rows if r["kind"] == "unanswerable"]
            changed = [r["newer_first"] for r in rows if r["newer_first"] is not None]
            out["strategies"][strategy] = {
                "recall": statistics.mean(r["recall"] for r in ans),
                "recall_first": statistics.mean(r["recall"] for r in ans if r["kind"] == "first"),
                "recall_named": statistics.mean(r["recall"] for r in ans if r["kind"] == "named"),
                "newer_first": sum(changed) / len(changed),
                "changed_facts": len(changed),
                "auroc": auroc([r["top_relevance"] for r in ans], [r["top_relevance"] for r in una]),
                "unanswerable_empty": sum(r["empty"] for r in una) / len(una),
                "answerable_empty": sum(r["empty"] for r in ans) / len(ans),
                "search": _ms(times),
                "questions": len(rows),
                "rows": rows,
            }
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--embedder", default=None, help="embedder spec (default: all-MiniLM-L6-v2)")
    ap.add_argument("--budget", type=int, default=150)
    ap.add_argument("--strategies", nargs="+", default=["xmemory", "memory-only", "naive-rag"])
    ap.add_argument(
        "--default-threshold",
        action="store_true",
        help="searches keep the engine's default no-answer threshold (else threshold=0: off)",
    )
    ap.add_argument("--no-small-talk", action="store_true", help="the chats without the inserted small talk")
    ap.add_argument("--json", type=Path, help="write every row here")
    args = ap.parse_args(argv)
    res = run(
        args.embedder,
        args.budget,
        args.strategies,
        1.0 if args.default_threshold else None,
        not args.no_small_talk,
    )
    print(
        f"embedder {res['embedder']}, budget {res['budget']} tokens; add {res['add']}; one encoder forward "
        f"{res['one_forward']}; {res['statements']} statements, {len(res['broken'])} broken"
    )
    for s, b in res["broken"]:
        print(f"  broken: {s!r}: {b}")
    print(
        "| strategy | recall | first-person | named | newer first | AUROC top_relevance | unanswerable empty | "
        "answerable empty | search |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for name, m in res["strategies"].items():
        print(
            f"| {name} | {m['recall']:.3f} | {m['recall_first']:.3f} | {m['recall_named']:.3f} | "
            f"{m['newer_first']:.2f} ({m['changed_facts']}) | {m['auroc']:.3f} | {m['unanswerable_empty']:.2f} | "
            f"{m['answerable_empty']:.2f} | {m['search']} |"
        )
    if args.json:
        args.json.write_text(json.dumps(res, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
