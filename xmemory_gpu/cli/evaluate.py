"""``xmemory eval STORE --data FILE --out DIR``: retrieval metrics for every strategy (no LLM), QA
metrics with ``--reader``, a budget sweep, and the paper's ablations (``--ablation``)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..config import XMemoryConfig
    from ..memory.backend import MemoryBackend


def _ints(s: str) -> list[int]:
    try:
        out = [int(x) for x in s.split(",") if x]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {s!r}") from None
    if any(v < 0 for v in out):
        raise argparse.ArgumentTypeError(f"expected integers >= 0, got {s!r}")
    return out


def add_retrieval_options(p: argparse.ArgumentParser) -> None:
    """Options shared by ``search`` and ``eval``: settings file, Stage II mode, TIR pruning, reader."""
    p.add_argument(
        "--config",
        default=None,
        help='JSON file of settings overriding the store\'s (e.g. {"stage2": {...}})',
    )
    p.add_argument(
        "--stage2-mode",
        choices=["independent", "sequential"],
        default=None,
        help="Stage II probes: each against the coarse context (authors) or against what was admitted so far",
    )
    p.add_argument(
        "--tir-prune",
        action="store_true",
        help="tir: the reader keeps only the turns of each session that bear on the query",
    )
    p.add_argument(
        "--reader",
        default=None,
        help="reader LLM spec (smollm2, hf:PATH[#FILE.gguf], vllm:ID, openai:URL#MODEL): Stage II gate, LLM steps, QA",
    )


def retrieval_config(args: argparse.Namespace, store: MemoryBackend) -> XMemoryConfig:
    """The store's settings, then ``--config``, then the flags (``config.resolve_config``)."""
    from ..config import resolve_config

    if args.tir_prune and not args.reader:
        raise ValueError("--tir-prune needs --reader (the LLM prunes the sessions)")
    stored = store.config
    overrides: dict = {}
    if args.stage2_mode:
        overrides["stage2"] = {"mode": args.stage2_mode}
    if args.tir_prune:
        overrides["baselines"] = {"tir_prune": True}
    return resolve_config(stored, args.config, overrides)


def add_parser(sub: argparse._SubParsersAction) -> None:
    from ..eval.runner import DEFAULT_STRATEGIES
    from .args import integer

    p = sub.add_parser("eval", help="evaluate retrieval strategies on LoCoMo questions")
    p.add_argument(
        "store", help="a built store (for --ablation construction: the folder for the four variant stores)"
    )
    p.add_argument("--data", required=True, help="LoCoMo-format JSON with the questions")
    p.add_argument(
        "--out", required=True, help="folder for results.jsonl, summary.json, summary.md and the plots"
    )
    p.add_argument(
        "--strategies",
        default=None,
        help=f"comma-separated strategy names (default: {','.join(DEFAULT_STRATEGIES)})",
    )
    p.add_argument("--budget-tokens", type=integer(0), default=None)
    p.add_argument(
        "--categories", type=_ints, default=[1, 2, 3, 4], help="LoCoMo categories (5 = adversarial)"
    )
    p.add_argument("--limit", type=integer(1), default=None, help="first N questions only")
    p.add_argument(
        "--sweep-budget",
        type=_ints,
        default=[],
        metavar="B1,B2,...",
        help="recall/coverage against these budgets",
    )
    p.add_argument(
        "--ablation",
        choices=["retrieval", "construction"],
        default=None,
        help="retrieval: Naive RAG / Memory-only / +RepSel / +UncSion / Full; construction: split+merge, "
        "without merge, without split, without both (builds the four stores under STORE)",
    )
    p.add_argument("--backend", default="auto")
    p.add_argument("--seed", type=int, default=0)
    add_retrieval_options(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ..eval.report import ABLATION_LABELS
    from ..eval.runner import ABLATION_STRATEGIES, DEFAULT_STRATEGIES, run_eval
    from ..retrieve import STRATEGIES

    default = ABLATION_STRATEGIES if args.ablation == "retrieval" else DEFAULT_STRATEGIES
    strategies = [s for s in args.strategies.split(",") if s] if args.strategies else list(default)
    bad = [s for s in strategies if s not in STRATEGIES]
    if bad:
        raise ValueError(f"--strategies: unknown {bad}; expected some of {', '.join(STRATEGIES)}")
    out = Path(args.out)
    if out.exists() and not out.is_dir():
        raise ValueError(f"--out {out}: is a file; expected a folder (created if missing)")
    if args.ablation == "construction":
        from ..config import resolve_config
        from ..eval.ablation import run_construction_ablation

        cfg = resolve_config(
            None, args.config, {"stage2": {"mode": args.stage2_mode}} if args.stage2_mode else None
        )
        res = run_construction_ablation(
            args.data,
            args.store,
            out,
            strategy=strategies[0] if args.strategies else "xmemory",
            config=cfg,
            categories=args.categories,
            question_limit=args.limit,
            budget_tokens=args.budget_tokens,
            backend=args.backend,
            reader=args.reader,
            seed=args.seed,
        )
        print((out / "construction.md").read_text())
        print(
            f"wrote {out}/construction.json, construction.md and one evaluation folder per variant ({len(res['rows'])})"
        )
        return 0
    from ..memory.store import Store

    store = Store.open(args.store)  # opened once: settings, memories and the evaluation read this one
    try:
        report = run_eval(
            store,
            args.data,
            out,
            strategies=strategies,
            budget_tokens=args.budget_tokens,
            categories=args.categories,
            limit=args.limit,
            sweep=args.sweep_budget,
            backend=args.backend,
            reader=args.reader,
            config=retrieval_config(args, store),
            seed=args.seed,
            labels=ABLATION_LABELS if args.ablation == "retrieval" else None,
        )
    finally:
        store.close()
    print((out / "summary.md").read_text())
    if report.get("sweep"):
        print((out / "sweep.md").read_text())
    print(
        f"wrote {out}/results.jsonl, summary.json, summary.md, recall_vs_tokens.png, categories.png, density.png"
        + (", sweep.*" if report.get("sweep") else "")
    )
    return 0
