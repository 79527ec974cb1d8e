"""The LoCoMo evaluation harness: every strategy on the same questions through the batched
``Retriever.search``, retrieval metrics without any LLM, per category and micro-averaged,
written as JSON and a markdown table (and a budget sweep with a plot)."""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from ..datasets.locomo import load_locomo
from ..memory.store import Store
from ..retrieve import Retriever
from ..retrieve.result import RetrievalResult
from ..retrieve.stage2 import answer_prompt
from .metrics import qa_scores
from .retrieval_metrics import (
    Block,
    aggregate,
    answer_coverage,
    evidence_density,
    evidence_precision,
    evidence_recall,
    mean,
)

DEFAULT_STRATEGIES = ("naive-rag", "tir", "memory-only", "xmemory-stage1", "xmemory")


def load_questions(data: str | Path, memory_ids: Sequence[str], categories: Sequence[int], limit: int | None) -> list[dict]:
    """Questions of the conversations present in the store, of the given categories, in file order."""
    have = set(memory_ids)
    qs = []
    for conv in load_locomo(data):
        if conv.sample_id not in have:
            continue
        for qa in conv.qa:
            if qa.category in categories:
                qs.append({"memory": conv.sample_id, "question": qa.question, "answer": qa.answer,
                           "evidence": list(qa.evidence), "category": int(qa.category)})
    if not qs:
        raise ValueError(f"{data}: no questions of categories {list(categories)} for the store's memories")
    return qs[:limit] if limit else qs


def score(result: RetrievalResult, q: dict) -> dict:
    """One row of per-question retrieval metrics."""
    blocks = [Block(u.text, u.message_ids, u.tokens) for u in result.units if u.type != "theme"]
    cov = answer_coverage(blocks, q["answer"])
    dens = evidence_density(blocks, q["answer"])
    ids = result.message_ids
    return {
        "memory": q["memory"], "question": q["question"], "category": q["category"],
        "recall": evidence_recall(ids, q["evidence"]), "precision": evidence_precision(ids, q["evidence"]),
        "context_tokens": result.context_tokens, "blocks": len(blocks), "llm_calls": result.llm_calls,
        "covered": float(cov["covered"]) if cov["words"] else None, "covered_share": cov["covered_share"],
        "blocks_to_cover": cov["blocks_to_cover"], "tokens_to_cover": cov["tokens_to_cover"],
        **{f"density_{k}": v for k, v in dens.items()},
    }


QA_KEYS = ["f1_authors", "f1_squad", "exact_match", "bleu1", "rouge_l", "tokens_per_query"]


def summarise(rows: list[dict], seconds: float, categories: Sequence[int]) -> dict:
    keys = ["recall", "precision", "context_tokens", "covered", "covered_share", "blocks_to_cover", "tokens_to_cover",
            "density_0", "density_1", "density_2", "density_3+", "llm_calls"]
    keys += [k for k in QA_KEYS if rows and k in rows[0]]
    return {
        "questions": len(rows), "seconds": seconds, "queries_per_second": len(rows) / seconds if seconds > 0 else None,
        **{k: aggregate(rows, k, categories) for k in keys},
    }


def _fmt(v, digits=3) -> str:
    return "-" if v is None else f"{v:.{digits}f}" if isinstance(v, float) else str(v)


def table(summary: dict[str, dict], tokenizer: str) -> str:
    head = ("| strategy | evidence recall | precision | context tokens | answer covered | blocks to cover | "
            "tokens to cover | density 1 / 2 / 3+ | q/s |")
    lines = [f"Micro-averaged over categories 1-4; tokens in {tokenizer}.", "", head, "|" + "---|" * 9]
    for name, s in summary.items():
        m = {k: (v["micro"] if isinstance(v, dict) else v) for k, v in s.items()}
        dens = " / ".join(_fmt(m[f"density_{k}"], 2) for k in ("1", "2", "3+"))
        lines.append(
            f"| {name} | {_fmt(m['recall'])} | {_fmt(m['precision'])} | {_fmt(m['context_tokens'], 0)} | {_fmt(m['covered'])} | "
            f"{_fmt(m['blocks_to_cover'], 1)} | {_fmt(m['tokens_to_cover'], 0)} | {dens} | {_fmt(m['queries_per_second'], 0)} |"
        )
    if any("f1_authors" in s for s in summary.values()):
        lines += ["", "QA with the reader (micro over categories 1-4):", "",
                  "| strategy | F1 (authors) | F1 (SQuAD) | EM | BLEU-1 | ROUGE-L | tokens per query |", "|" + "---|" * 7]
        for name, s in summary.items():
            lines.append(f"| {name} | " + " | ".join(_fmt(s[k]["micro"], 0 if k == "tokens_per_query" else 3) for k in QA_KEYS) + " |")
    cats = sorted({c for s in summary.values() for c in s["recall"] if c != "micro"})
    lines += ["", "Evidence recall by category:", "", "| strategy | " + " | ".join(f"cat {c}" for c in cats) + " |",
              "|" + "---|" * (len(cats) + 1)]
    for name, s in summary.items():
        lines.append(f"| {name} | " + " | ".join(_fmt(s["recall"].get(c)) for c in cats) + " |")
    return "\n".join(lines) + "\n"


def run_eval(
    store: str | Path, data: str | Path, out: str | Path, *, strategies: Sequence[str] = DEFAULT_STRATEGIES,
    budget_tokens: int | None = None, categories: Sequence[int] = (1, 2, 3, 4), limit: int | None = None,
    sweep: Sequence[int] = (), backend: str = "auto", reader: str | None = None, answer_tokens: int = 32,
) -> dict:
    """Evaluate ``strategies`` on the questions of ``data`` whose memories are in ``store``; write
    ``summary.json``, ``table.md``, ``questions.jsonl`` (and ``sweep.json``/``sweep.md``/``sweep.png``).
    With ``reader`` (a spec for ``xmemory_gpu.llm.load_reader``), Stage II uses its uncertainty and
    every strategy's context is answered by it: QA metrics and tokens per query (retrieval probes +
    answer prompt + output) are added."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    st = Store.open(store)
    ids = st.memory_ids()
    st.close()
    qs = load_questions(data, ids, categories, limit)
    llm = None
    if reader:
        from ..llm import load_reader

        llm = load_reader(reader)
    retriever = Retriever.from_store(store, sorted({q["memory"] for q in qs}), backend=backend, reader=llm)
    questions, mems = [q["question"] for q in qs], [q["memory"] for q in qs]
    t0 = time.perf_counter()
    q_x = retriever.embedder.encode(questions)
    t_embed = time.perf_counter() - t0
    summary: dict[str, dict] = {}
    with open(out / "questions.jsonl", "w") as fh:
        for name in strategies:
            t0 = time.perf_counter()
            results = retriever.search(questions, mems, strategy=name, budget_tokens=budget_tokens, query_x=q_x)
            rows = [score(r, q) for r, q in zip(results, qs)]
            if llm is not None:
                gen = llm.generate([answer_prompt(llm, q["question"], r.context) for r, q in zip(results, qs)],
                                   max_tokens=answer_tokens, purpose=f"answer {name}")
                for row, r, q, text, p_tok, o_tok in zip(rows, results, qs, gen.texts, gen.prompt_tokens, gen.output_tokens):
                    row.update(qa_scores(text, q["answer"]), prediction=text, tokens_per_query=r.llm_tokens + p_tok + o_tok)
            seconds = time.perf_counter() - t0 + t_embed
            for row in rows:
                fh.write(json.dumps({"strategy": name, **row}) + "\n")
            summary[name] = summarise(rows, seconds, categories)
            summary[name]["notes"] = sorted({n for r in results for n in r.notes})
    meta = {"store": str(store), "data": str(data), "budget_tokens": budget_tokens, "categories": list(categories),
            "questions": len(qs), "tokenizer": retriever.tokens.name, "embedder": retriever.embedder.name,
            "reader": llm.name if llm is not None else None}
    (out / "summary.json").write_text(json.dumps({"meta": meta, "strategies": summary}, indent=1))
    (out / "table.md").write_text(table(summary, retriever.tokens.name))
    report = {"meta": meta, "strategies": summary}
    if sweep:
        report["sweep"] = run_sweep(retriever, qs, q_x, strategies, sweep, categories, out)
    return report


def run_sweep(retriever: Retriever, qs: list[dict], q_x: np.ndarray, strategies: Sequence[str], budgets: Sequence[int],
              categories: Sequence[int], out: Path) -> dict:
    """Evidence recall and answer coverage against the token budget, per strategy."""
    questions, mems = [q["question"] for q in qs], [q["memory"] for q in qs]
    res: dict[str, dict[str, list]] = {}
    for name in strategies:
        rec, cov, tok = [], [], []
        for b in budgets:
            rows = [score(r, q) for r, q in zip(retriever.search(questions, mems, strategy=name, budget_tokens=b, query_x=q_x), qs)]
            rec.append(aggregate(rows, "recall", categories)["micro"])
            cov.append(aggregate(rows, "covered", categories)["micro"])
            tok.append(mean(r["context_tokens"] for r in rows))
        res[name] = {"recall": rec, "covered": cov, "context_tokens": tok}
    sweep = {"budgets": list(budgets), "strategies": res}
    (out / "sweep.json").write_text(json.dumps(sweep, indent=1))
    lines = ["| strategy | " + " | ".join(f"recall@{b} | covered@{b}" for b in budgets) + " |", "|" + "---|" * (2 * len(budgets) + 1)]
    for name, r in res.items():
        lines.append(f"| {name} | " + " | ".join(f"{_fmt(a)} | {_fmt(c)}" for a, c in zip(r["recall"], r["covered"])) + " |")
    (out / "sweep.md").write_text("\n".join(lines) + "\n")
    _plot(sweep, out / "sweep.png")
    return sweep


def _plot(sweep: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    for name, r in sweep["strategies"].items():
        axes[0].plot(sweep["budgets"], r["recall"], marker="o", label=name)
        axes[1].plot(sweep["budgets"], r["covered"], marker="o", label=name)
    for ax, title in zip(axes, ("evidence recall", "answer words covered")):
        ax.set_xlabel("context budget (tokens)")
        ax.set_title(title)
        ax.grid(alpha=0.3)
    axes[0].legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
