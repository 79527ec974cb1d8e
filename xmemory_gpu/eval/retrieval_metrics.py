"""LLM-free retrieval metrics for one question (DESIGN section 8).

A retrieved block is a unit of context text with its provenance message ids and token count.
Answer words are the answer's SQuAD-normalised tokens minus stopwords; a block "holds" a word
when the word is among the block's normalised tokens.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from .metrics import tokens

STOPWORDS = frozenset(
    "a an the and or but if of to in on at by for with from as is are was were be been being it its this that these "
    "those he she they them his her their him i me my we our you your do does did so not no yes very just than then "
    "there here what when where who whom which why how about into over after before up down out off also".split()
)


@dataclass
class Block:
    text: str
    message_ids: list[str]
    tokens: int


def evidence_recall(retrieved_ids: Sequence[str], evidence: Sequence[str]) -> float | None:
    """Share of distinct evidence ids retrieved; None when the question lists no evidence."""
    ev = set(evidence)
    return len(ev & set(retrieved_ids)) / len(ev) if ev else None


def evidence_precision(retrieved_ids: Sequence[str], evidence: Sequence[str]) -> float | None:
    """Share of distinct retrieved message ids that are evidence; None when nothing was retrieved
    or the question lists no evidence."""
    got = set(retrieved_ids)
    return len(got & set(evidence)) / len(got) if got and evidence else None


def answer_words(answer: object) -> list[str]:
    """Distinct content words of the answer, in order."""
    seen: dict[str, None] = {}
    for w in tokens(answer):
        if w not in STOPWORDS:
            seen.setdefault(w, None)
    return list(seen)


def answer_coverage(blocks: Sequence[Block], answer: object) -> dict:
    """words, covered (all answer words somewhere), covered_share, and the shortest prefix of the
    ranked blocks covering them all: blocks_to_cover / tokens_to_cover (None if never)."""
    words = set(answer_words(answer))
    found: set[str] = set()
    blocks_to_cover = tokens_to_cover = None
    total = 0
    for i, b in enumerate(blocks):
        found |= words & set(tokens(b.text))
        total += b.tokens
        if words and blocks_to_cover is None and found == words:
            blocks_to_cover, tokens_to_cover = i + 1, total
    return {
        "words": len(words),
        "covered": bool(words) and found == words,
        "covered_share": len(found) / len(words) if words else None,
        "blocks_to_cover": blocks_to_cover,
        "tokens_to_cover": tokens_to_cover,
    }


def evidence_density(blocks: Sequence[Block], answer: object) -> dict[str, float | None]:
    """Share of retrieved blocks holding 0, 1, 2 and 3+ distinct answer words (None if no blocks)."""
    words = set(answer_words(answer))
    counts = {"0": 0, "1": 0, "2": 0, "3+": 0}
    for b in blocks:
        n = len(words & set(tokens(b.text)))
        counts["3+" if n >= 3 else str(n)] += 1
    n = len(blocks)
    return {k: (v / n if n else None) for k, v in counts.items()}


def mean(values) -> float | None:
    vals = [float(v) for v in values if v is not None]
    return sum(vals) / len(vals) if vals else None


def aggregate(rows: Sequence[dict], key: str, categories: Sequence[int] = (1, 2, 3, 4)) -> dict[str, float | None]:
    """Mean of ``rows[i][key]`` per LoCoMo category (None values ignored) and ``micro``: the mean
    over all questions of ``categories``."""
    out: dict[str, float | None] = {}
    for c in sorted({int(r["category"]) for r in rows}):
        out[str(c)] = mean(r[key] for r in rows if int(r["category"]) == c)
    out["micro"] = mean(r[key] for r in rows if int(r["category"]) in categories)
    return out
