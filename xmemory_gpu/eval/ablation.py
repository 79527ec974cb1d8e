"""The paper's construction ablation: the same conversations built with split and merge, without
merge, without split and without both, each evaluated with the same retrieval strategy. Rows hold
the structure (theme counts and sizes, mean f(P), mean reassignment ratio) beside the metrics."""

from __future__ import annotations

import copy
import json
from collections.abc import Sequence
from pathlib import Path

from ..config import XMemoryConfig
from .report import fmt

# label -> (split, merge, folder name)
CONSTRUCTIONS = {
    "split + merge": (True, True, "full"),
    "without merge": (True, False, "no-merge"),
    "without split": (False, True, "no-split"),
    "without both": (False, False, "no-split-no-merge"),
}


def run_construction_ablation(
    data: str | Path,
    root: str | Path,
    out: str | Path,
    *,
    strategy: str = "xmemory",
    config: XMemoryConfig | None = None,
    embedder=None,
    limit: int | None = None,
    categories: Sequence[int] = (1, 2, 3, 4),
    question_limit: int | None = None,
    budget_tokens: int | None = None,
    backend: str = "auto",
    reader=None,
    seed: int = 0,
    progress: bool = False,
) -> dict:
    """Build (or resume) the four variant stores under ``root`` and evaluate ``strategy`` on each
    (``out/<variant>/`` holds each run's files). Writes ``out/construction.json`` and ``.md``."""
    from ..construct.pipeline import build_store
    from ..embed import load_embedder
    from ..memory.store import Store
    from ..memory.summary import collect
    from .runner import _reader, run_eval

    base = config or XMemoryConfig()
    root, out = Path(root), Path(out)
    out.mkdir(parents=True, exist_ok=True)
    emb = embedder if embedder is not None else load_embedder(base.embed.model)
    llm = _reader(reader)
    rows = []
    for label, (split, merge, folder) in CONSTRUCTIONS.items():
        cfg = copy.deepcopy(base)
        cfg.theme.split, cfg.theme.merge = split, merge
        build = build_store(
            [data], root / folder, config=cfg, embedder=emb, limit=limit, progress=progress, backend=backend
        )
        store = Store.open(root / folder)
        try:
            st = collect(store)
        finally:
            store.close()
        rep = run_eval(
            root / folder,
            data,
            out / folder,
            strategies=[strategy],
            budget_tokens=budget_tokens,
            categories=categories,
            limit=question_limit,
            backend=backend,
            reader=llm,
            seed=seed,
        )
        s = rep["strategies"][strategy]
        t = st["totals"]
        rows.append(
            {
                "construction": label,
                "store": str(root / folder),
                "built_now": len(build.built),
                "build_seconds": build.wall_s,
                "themes": t["n_themes"],
                "max_theme_size": t["max_theme_size"],
                "mean_theme_size": t["mean_mean_theme_size"],
                "semantics": t["n_semantics"],
                "mean_f_P": t["mean_f_P"],
                "mean_reassignment_ratio": t["mean_reassignment_ratio"],
                "recall": s["recall"]["micro"],
                "evidence_word_recall": s["evidence_word_recall"]["micro"],
                "context_tokens": s["context_tokens"]["micro"],
                "covered": s["covered"]["micro"],
                **({"f1_authors": s["f1_authors"]["micro"]} if "f1_authors" in s else {}),
            }
        )
    result = {
        "strategy": strategy,
        "questions": rep["meta"]["questions"],
        "rows": rows,
        "provenance": rep["meta"]["provenance"],
    }
    (out / "construction.json").write_text(json.dumps(result, indent=1))
    (out / "construction.md").write_text(construction_markdown(result))
    return result


def construction_markdown(result: dict) -> str:
    qa = any("f1_authors" in r for r in result["rows"])
    head = (
        "| construction | themes | max theme size | mean f(P) | mean reassignment ratio | evidence recall | evidence-word recall "
        "| context tokens | answer covered |" + (" F1 (authors) |" if qa else "")
    )
    lines = [
        f"Construction ablation, `{result['strategy']}` retrieval, {result['questions']} questions (micro over categories).",
        "",
        head,
        "|" + "---|" * (9 + qa),
    ]
    for r in result["rows"]:
        lines.append(
            f"| {r['construction']} | {r['themes']} | {r['max_theme_size']} | {fmt(r['mean_f_P'], 4)} | "
            f"{fmt(r['mean_reassignment_ratio'])} | {fmt(r['recall'])} | {fmt(r.get('evidence_word_recall'))} | {fmt(r['context_tokens'], 0)} | "
            f"{fmt(r['covered'])} |" + (f" {fmt(r.get('f1_authors'))} |" if qa else "")
        )
    return "\n".join(lines) + "\n"
