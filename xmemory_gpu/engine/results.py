"""mem0's ``limit`` and ``threshold`` on a live search result.

A unit's relevance is the cosine between the query and the unit that its strategy ranked by:
``scores["relevance"]`` (themes, statements) or ``scores["similarity"]`` (episodes, messages,
chunks). ``threshold`` leaves out the units whose relevance is below it; ``limit`` keeps the
``limit`` most relevant of the rest (ties: the earlier unit). The kept units stay in the result's
order and the context is assembled again from them, so it never shows a unit the result left out.
"""

from __future__ import annotations

from ..retrieve.context import assemble
from ..retrieve.result import RetrievalResult, RetrievedUnit


def relevance(u: RetrievedUnit) -> float:
    """The query-unit cosine the unit was ranked by."""
    return float(u.scores.get("relevance", u.scores.get("similarity", u.score)))


def limit_units(r: RetrievalResult, count_tokens, limit: int | None, threshold: float | None) -> RetrievalResult:
    """``r`` with units below ``threshold`` and past the ``limit`` most relevant removed, in place;
    ``count_tokens(texts) -> [int]`` counts the new context in the result's tokenizer."""
    if limit is None and threshold is None:
        return r
    keep = [i for i, u in enumerate(r.units) if threshold is None or relevance(u) >= threshold]
    if limit is not None and len(keep) > limit:
        best = sorted(keep, key=lambda i: (-relevance(r.units[i]), i))[:limit]
        keep = sorted(best)
    if len(keep) == len(r.units):
        return r
    dropped = len(r.units) - len(keep)
    r.units = [r.units[i] for i in keep]
    r.context = assemble(r.units)
    r.context_tokens = int(count_tokens([r.context])[0]) if r.context else 0
    why = [f"below threshold {threshold}"] if threshold is not None else []
    why += [f"past limit {limit}"] if limit is not None else []
    r.notes.append(f"{dropped} units left out ({' or '.join(why)})")
    return r


def check_limit(v, name: str) -> int | None:
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, int) or v < 1:
        raise ValueError(f"{name}: expected a positive integer, got {v!r:.40}")
    return v


def check_threshold(v, name: str) -> float | None:
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not -1.0 <= float(v) <= 1.0:
        raise ValueError(f"{name}: expected a number from -1 to 1 (a cosine), got {v!r:.40}")
    return float(v)


__all__ = ["check_limit", "check_threshold", "limit_units", "relevance"]
