"""The LoCoMo evaluation harness: every strategy on the same questions through the batched
``Retriever.search``; retrieval metrics without any LLM and QA metrics with a reader, per
category and micro-averaged; per-question rows, a summary with the run's provenance, tables and
plots (``report``), and a token-budget sweep."""

from __future__ import annotations

import json
import os
import random
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from ..config import XMemoryConfig
from ..datasets.locomo import load_locomo
from ..memory.backend import MemoryBackend
from ..memory.store import Store
from ..retrieve import Retriever
from ..retrieve.answer import answer_prompt
from ..retrieve.context import answer_context
from ..retrieve.result import RetrievalResult
from ..retrieve.strategies import strategy_names
from .metrics import qa_scores
from .report import (
    QA_KEYS,
    plot_categories,
    plot_density,
    plot_recall_vs_tokens,
    plot_sweep,
    provenance,
    summary_markdown,
    sweep_markdown,
)
from .retrieval_metrics import (
    Block,
    aggregate,
    answer_coverage,
    evidence_density,
    evidence_precision,
    evidence_recall,
    evidence_word_recall,
    mean,
    normalize_evidence,
)

DEFAULT_STRATEGIES = strategy_names()
ABLATION_STRATEGIES = (
    "naive-rag",
    "memory-only",
    "xmemory-stage1",
    "xmemory-stage2",
    "xmemory",
)  # the paper's rows


def load_questions(
    data: str | Path, memory_ids: Sequence[str], categories: Sequence[int], limit: int | None
) -> list[dict]:
    """Questions of the conversations present in the store, of the given categories, in file order;
    ``qa_index`` is the question's position in its sample's ``qa`` list (all categories counted);
    ``evidence_messages``: evidence id (normalised) -> (speaker, text) of the evidence messages
    the conversation holds (for ``evidence_word_recall``)."""
    have = set(memory_ids)
    qs = []
    for conv in load_locomo(data):
        if conv.sample_id not in have:
            continue
        by_id = {i: (m.speaker, m.text) for m in conv.messages for i in normalize_evidence([m.id])}
        for i, qa in enumerate(conv.qa):
            if qa.category in categories:
                ev = {e: by_id[e] for e in sorted(normalize_evidence(qa.evidence)) if e in by_id}
                qs.append(
                    {
                        "sample_id": conv.sample_id,
                        "qa_index": i,
                        "question": qa.question,
                        "answer": qa.answer,
                        "evidence": list(qa.evidence),
                        "category": int(qa.category),
                        "evidence_messages": ev,
                    }
                )
    if not qs:
        raise ValueError(f"{data}: no questions of categories {list(categories)} for the store's memories")
    return qs[:limit] if limit else qs


def score(result: RetrievalResult, q: dict) -> dict:
    """One row of per-question retrieval metrics, with the context's provenance; evidence-word
    recall needs ``q["evidence_messages"]`` (``load_questions``) and is None without it."""
    blocks = [Block(u.text, u.message_ids, u.tokens) for u in result.units if u.type != "theme"]
    cov = answer_coverage(blocks, q["answer"])
    dens = evidence_density(blocks, q["answer"])
    ids = result.message_ids
    return {
        "sample_id": q["sample_id"],
        "qa_index": q["qa_index"],
        "category": q["category"],
        "strategy": result.strategy,
        "question": q["question"],
        "gold": q["answer"],
        "evidence": q["evidence"],
        "message_ids": ids,
        "context_tokens": result.context_tokens,
        "units": [
            {"type": u.type, "id": u.id, "tokens": u.tokens, "message_ids": u.message_ids}
            for u in result.units
        ],
        "answer": None,
        "recall": evidence_recall(ids, q["evidence"]),
        "precision": evidence_precision(ids, q["evidence"]),
        "evidence_word_recall": (
            evidence_word_recall(result.units, q["evidence"], q["evidence_messages"])
            if "evidence_messages" in q
            else None
        ),
        "blocks": len(blocks),
        "llm_calls": result.llm_calls,
        "llm_tokens": result.llm_tokens,
        "covered": float(cov["covered"]) if cov["words"] else None,
        "covered_share": cov["covered_share"],
        "blocks_to_cover": cov["blocks_to_cover"],
        "tokens_to_cover": cov["tokens_to_cover"],
        **{f"density_{k}": v for k, v in dens.items()},
    }


def summarise(rows: list[dict], seconds: float, categories: Sequence[int]) -> dict:
    keys = [
        "recall",
        "evidence_word_recall",
        "precision",
        "context_tokens",
        "covered",
        "covered_share",
        "blocks_to_cover",
        "tokens_to_cover",
        "density_0",
        "density_1",
        "density_2",
        "density_3+",
        "llm_calls",
        "llm_tokens",
    ]
    keys += [k for k in QA_KEYS if rows and k in rows[0]]
    return {
        "questions": len(rows),
        "seconds": seconds,
        "queries_per_second": len(rows) / seconds if seconds > 0 else None,
        **{k: aggregate(rows, k, categories) for k in keys},
    }


def _reader(spec_or_reader):
    if spec_or_reader is None or not isinstance(spec_or_reader, str):
        return spec_or_reader
    from ..llm import load_reader

    return load_reader(spec_or_reader)


def run_eval(
    store: str | Path | MemoryBackend,
    data: str | Path,
    out: str | Path,
    *,
    strategies: Sequence[str] = DEFAULT_STRATEGIES,
    budget_tokens: int | None = None,
    categories: Sequence[int] = (1, 2, 3, 4),
    limit: int | None = None,
    sweep: Sequence[int] = (),
    backend: str = "auto",
    reader=None,
    answer_tokens: int = 32,
    config: XMemoryConfig | None = None,
    seed: int = 0,
    labels: dict[str, str] | None = None,
) -> dict:
    """Evaluate ``strategies`` on the questions of ``data`` whose memories are in ``store`` (a folder,
    opened once here, or an open ``MemoryBackend``).

    Writes in ``out``: ``results.jsonl`` (one line per question and strategy), ``summary.json``
    (per strategy and category, with the config, package versions, seed and git commit),
    ``summary.md`` (the tables), ``recall_vs_tokens.png``, ``categories.png``, ``density.png``
    (and ``sweep.json``/``sweep.md``/``sweep.png`` for a budget sweep). ``reader``: a spec for
    ``xmemory_gpu.llm.load_reader`` or a reader; with one, Stage II uses its uncertainty and every
    strategy's context is answered by it (QA metrics; tokens per query = retrieval probes + answer
    prompt + output). ``config`` overrides the store's retrieval settings; ``labels`` renames
    strategies in the tables and plots."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    random.seed(seed)
    np.random.seed(seed)
    own = isinstance(store, (str, os.PathLike))
    st = Store.open(store) if own else store
    try:
        qs = load_questions(data, st.memory_ids(), categories, limit)
        llm = _reader(reader)
        retriever = Retriever.from_store(
            st,
            sorted({q["sample_id"] for q in qs}),
            backend=backend,
            reader=llm,
            **({"config": config} if config is not None else {}),
        )
    finally:
        if own:
            st.close()
    questions, mems = [q["question"] for q in qs], [q["sample_id"] for q in qs]
    t0 = time.perf_counter()
    q_x = retriever.embedder.encode(questions)
    t_embed = time.perf_counter() - t0
    summary: dict[str, dict] = {}
    tmp = out / "results.jsonl.tmp"
    with open(tmp, "w", encoding="utf-8") as fh:
        for name in strategies:
            t0 = time.perf_counter()
            results = retriever.search(
                questions, mems, strategy=name, budget_tokens=budget_tokens, query_x=q_x
            )
            rows = [score(r, q) for r, q in zip(results, qs)]
            if llm is not None:
                gen = llm.generate(
                    [answer_prompt(llm, q["question"], answer_context(r.units)) for r, q in zip(results, qs)],
                    max_tokens=answer_tokens,
                    purpose=f"answer {name}",
                )
                for row, r, q, text, p_tok, o_tok in zip(
                    rows, results, qs, gen.texts, gen.prompt_tokens, gen.output_tokens
                ):
                    row.update(
                        qa_scores(text, q["answer"], category=q["category"]),
                        answer=text.strip(),
                        tokens_per_query=r.llm_tokens + p_tok + o_tok,
                    )
            seconds = time.perf_counter() - t0 + t_embed
            for row in rows:
                fh.write(json.dumps(row) + "\n")
            summary[name] = summarise(rows, seconds, categories)
            summary[name]["notes"] = sorted({n for r in results for n in r.notes})
    tmp.replace(out / "results.jsonl")
    meta = {
        "store": str(store if own else st.path),
        "data": str(data),
        "budget_tokens": budget_tokens,
        "categories": list(categories),
        "questions": len(qs),
        "limit": limit,
        "tokenizer": retriever.tokens.name,
        "embedder": retriever.embedder.name,
        "reader": llm.name if llm is not None else None,
        "backend": backend,
        "config": retriever.config.to_dict(),
        "provenance": provenance(seed),
    }
    report = {"meta": meta, "strategies": summary}
    if sweep:
        report["sweep"] = run_sweep(retriever, qs, q_x, strategies, sweep, categories)
        (out / "sweep.json").write_text(json.dumps(report["sweep"], indent=1))
        (out / "sweep.md").write_text(sweep_markdown(report["sweep"], labels))
        plot_sweep(report["sweep"], out / "sweep.png", labels)
    _write_atomic(out / "summary.json", json.dumps(report, indent=1))
    _write_atomic(out / "summary.md", summary_markdown(summary, meta, labels))
    plot_recall_vs_tokens(summary, report.get("sweep"), out / "recall_vs_tokens.png", labels)
    plot_categories(summary, out / "categories.png", labels)
    plot_density(summary, out / "density.png", labels)
    return report


def _write_atomic(path: Path, text: str) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(path)


def run_sweep(
    retriever: Retriever,
    qs: list[dict],
    q_x: np.ndarray,
    strategies: Sequence[str],
    budgets: Sequence[int],
    categories: Sequence[int],
) -> dict:
    """Evidence recall, evidence-word recall, answer-word coverage and mean context tokens against
    the token budget, per strategy."""
    questions, mems = [q["question"] for q in qs], [q["sample_id"] for q in qs]
    res: dict[str, dict[str, list]] = {}
    for name in strategies:
        rec, words, cov, tok = [], [], [], []
        for b in budgets:
            rows = [
                score(r, q)
                for r, q in zip(
                    retriever.search(questions, mems, strategy=name, budget_tokens=b, query_x=q_x), qs
                )
            ]
            rec.append(aggregate(rows, "recall", categories)["micro"])
            words.append(aggregate(rows, "evidence_word_recall", categories)["micro"])
            cov.append(aggregate(rows, "covered", categories)["micro"])
            tok.append(mean(r["context_tokens"] for r in rows))
        res[name] = {"recall": rec, "evidence_word_recall": words, "covered": cov, "context_tokens": tok}
    return {"budgets": list(budgets), "strategies": res}
