"""``xmemory eval STORE --data FILE --out DIR``: retrieval metrics for every strategy, no LLM."""

from __future__ import annotations

import argparse
from pathlib import Path


def _ints(s: str) -> list[int]:
    try:
        return [int(x) for x in s.split(",") if x]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {s!r}") from None


def add_parser(sub: argparse._SubParsersAction) -> None:
    from ..eval.runner import DEFAULT_STRATEGIES

    p = sub.add_parser("eval", help="evaluate retrieval strategies on LoCoMo questions (no LLM)")
    p.add_argument("store")
    p.add_argument("--data", required=True, help="LoCoMo-format JSON with the questions")
    p.add_argument("--out", required=True, help="folder for summary.json, table.md, questions.jsonl")
    p.add_argument("--strategies", default=",".join(DEFAULT_STRATEGIES), help="comma-separated strategy names")
    p.add_argument("--budget-tokens", type=int, default=None)
    p.add_argument("--categories", type=_ints, default=[1, 2, 3, 4], help="LoCoMo categories (5 = adversarial)")
    p.add_argument("--limit", type=int, default=None, help="first N questions only")
    p.add_argument("--sweep-budget", type=_ints, default=[], metavar="B1,B2,...", help="recall/coverage against these budgets")
    p.add_argument("--backend", default="auto")
    p.add_argument("--reader", default=None, help="reader LLM spec (smollm2, hf:PATH[#FILE.gguf]): Stage II gate + QA metrics")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ..eval.runner import run_eval
    from ..retrieve import STRATEGIES

    strategies = [s for s in args.strategies.split(",") if s]
    bad = [s for s in strategies if s not in STRATEGIES]
    if bad:
        raise ValueError(f"--strategies: unknown {bad}; expected some of {', '.join(STRATEGIES)}")
    report = run_eval(args.store, args.data, args.out, strategies=strategies, budget_tokens=args.budget_tokens,
                      categories=args.categories, limit=args.limit, sweep=args.sweep_budget, backend=args.backend,
                      reader=args.reader)
    out = Path(args.out)
    print((out / "table.md").read_text())
    if report.get("sweep"):
        print((out / "sweep.md").read_text())
    print(f"wrote {args.out}/summary.json, table.md, questions.jsonl")
    return 0
