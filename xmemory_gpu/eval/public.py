"""Scoring of live searches on public role-chat sets (``datasets.beam``, ``datasets.longmemeval``):
pure functions over what a search returned; ``benchmarks/bench_public.py`` runs the engine.

One row per (question, strategy, budget) holds: the question's ``kind`` (``unanswerable`` for
never-said), ``recall`` (evidence recall over message ids; None when the set names no evidence
message), ``word_recall`` (the share of the reference answer's content words that the shown context
holds; None without a reference answer), ``current`` (for a changed fact: whether the newer value
shows before the superseded one; None for other questions), ``top_relevance`` and ``empty``
(whether the search under the engine's default no-answer gate came back empty).

Answer content words are the answer's SQuAD-normalised tokens minus stopwords and minus the words
of the question itself (a context that repeats the question's words shows nothing of the answer).
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Sequence

from .chat_metrics import auroc, evidence_recall, newer_first
from .metrics import tokens
from .retrieval_metrics import answer_words

CURRENT_WORD_SHARE = 0.5  # word-based current fact: at least this share of the answer's words shown


def content_words(answer: str, question: str = "") -> list[str]:
    """Distinct content words of ``answer`` that ``question`` does not already say, in order."""
    asked = set(tokens(question))
    return [w for w in answer_words(answer) if w not in asked]


def word_recall(answer: str, context: str, question: str = "") -> float | None:
    """The share of the answer's content words (``content_words``) among the context's tokens; None
    when the answer has none."""
    words = content_words(answer, question)
    if not words:
        return None
    shown = set(tokens(context))
    return sum(w in shown for w in words) / len(words)


def current_fact(
    order: Sequence[str],
    current: Sequence[str],
    stale: Sequence[str],
    answer: str = "",
    context: str = "",
    question: str = "",
) -> bool | None:
    """Whether a changed fact reads current: with ids (``current`` and ``stale`` message ids), the
    newer value shows before every superseded one in ``order`` (``chat_metrics.newer_first``);
    without, at least ``CURRENT_WORD_SHARE`` of the answer's content words show in ``context``.
    None when neither can be judged."""
    if current and stale:
        return newer_first(order, current, stale)
    share = word_recall(answer, context, question) if answer else None
    return None if share is None else share >= CURRENT_WORD_SHARE


def score(
    *,
    kind: str,
    category: str,
    evidence: Sequence[str],
    current: Sequence[str],
    stale: Sequence[str],
    answer: str,
    question: str,
    shown: Sequence[str],
    order: Sequence[str],
    context: str,
    top_relevance: float | None,
    empty: bool,
    changed: bool,
) -> dict:
    """One row (see the module doc). ``shown``: the message ids the context shows; ``order``: the
    message ids of its non-theme units in context order; ``changed``: the question is about a
    changed fact (knowledge update, contradiction)."""
    answerable = kind != "unanswerable"
    return {
        "kind": kind,
        "category": category,
        "recall": evidence_recall(evidence, shown) if answerable and evidence else None,
        "word_recall": word_recall(answer, context, question) if answerable and answer else None,
        "current": current_fact(order, current, stale, answer, context, question)
        if answerable and changed
        else None,
        "top_relevance": float(top_relevance or 0.0),
        "empty": bool(empty),
    }


def _mean(xs: Iterable[float]) -> float | None:
    xs = list(xs)
    return statistics.mean(xs) if xs else None


def hit(row: dict) -> float | None:
    """A row's answerable recall: evidence recall where ids are known, else word recall."""
    return row["recall"] if row["recall"] is not None else row["word_recall"]


def summarize(rows: Sequence[dict], changed_kinds: dict[str, str] | None = None) -> dict:
    """Figures over the rows of one (strategy, budget): means over answerable questions, the AUROC
    of ``top_relevance`` between answerable and never-said questions, and under the default gate
    the share of never-said contexts emptied and the share of answerable recall kept (the summed
    ``hit`` of the answerable rows not emptied over that of all). ``changed_kinds``: category ->
    label for the current-fact figures (e.g. ``{"knowledge_update": "ku"}``)."""
    ans = [r for r in rows if r["kind"] != "unanswerable"]
    never = [r for r in rows if r["kind"] == "unanswerable"]
    hits = [(h, r["empty"]) for r in ans if (h := hit(r)) is not None]
    total = sum(h for h, _ in hits)
    out = {
        "questions": len(rows),
        "answerable": len(ans),
        "never_said": len(never),
        "with_ids": sum(r["recall"] is not None for r in ans),
        "recall": _mean(r["recall"] for r in ans if r["recall"] is not None),
        "word_recall": _mean(r["word_recall"] for r in ans if r["word_recall"] is not None),
        "word_recall_no_ids": _mean(
            r["word_recall"] for r in ans if r["recall"] is None and r["word_recall"] is not None
        ),
        "auroc": auroc([r["top_relevance"] for r in ans], [r["top_relevance"] for r in never]),
        "never_said_emptied": _mean(float(r["empty"]) for r in never),
        "answerable_emptied": _mean(float(r["empty"]) for r in ans),
        "recall_kept": sum(h for h, e in hits if not e) / total if total else None,
    }
    for cat, label in (changed_kinds or {}).items():
        got = [r["current"] for r in ans if r["category"] == cat and r["current"] is not None]
        out[f"current_{label}"] = sum(got) / len(got) if got else None
        out[f"current_{label}_n"] = len(got)
    return out


__all__ = [
    "CURRENT_WORD_SHARE",
    "content_words",
    "current_fact",
    "hit",
    "score",
    "summarize",
    "word_recall",
]
