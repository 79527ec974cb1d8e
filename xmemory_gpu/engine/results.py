"""mem0's ``limit`` and ``threshold`` on a live search result.

A unit's relevance is the cosine between the query and the unit that its strategy ranked by:
``scores["relevance"]`` (themes, statements) or ``scores["similarity"]`` (episodes, messages,
chunks). ``threshold`` leaves out the units whose relevance is below it; ``limit`` keeps the
``limit`` most relevant of the rest that the context shows (ties: the earlier unit; themes, which
it never shows, neither count nor stay), so ``limit=1`` shows one unit. A statement that superseded
another ranks at least as high as it (``show_current``). The steps change the units only; ``render``
then renders the context once, from the units kept (the user's name shown, cut to the budget), so
it never shows a unit the result left out.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from datetime import datetime, timezone

from ..retrieve.context import assemble
from ..retrieve.result import UNIT_TYPES, RetrievalResult, RetrievedUnit
from .inputs import MAX_LIMIT
from .people import named

SHOWN = frozenset(UNIT_TYPES) - {"theme"}  # the unit types the context shows (``retrieve.context``)


def relevance(u: RetrievedUnit) -> float:
    """The query-unit cosine the unit was ranked by."""
    return float(u.scores.get("relevance", u.scores.get("similarity", u.score)))


# the no-answer gate per embedder (benchmarks/no_answer_threshold.py, RESULTS): the largest threshold
# that costs at most 1 point of evidence recall on the LoCoMo dev split (xmemory, 600 tokens)
CALIBRATED_NO_ANSWER = {"all-MiniLM-L6-v2": 0.40}


def gate_for(setting: float, embedder: str) -> float:
    """The no-answer threshold in force: ``setting`` (``live.no_answer_threshold``), -1 meaning the
    embedder's calibrated value (0, off, for one not calibrated)."""
    return CALIBRATED_NO_ANSWER.get(embedder, 0.0) if setting < 0 else setting


def mark_relevance(r: RetrievalResult) -> RetrievalResult:
    """Each unit's ``relevance`` and the result's ``top_relevance`` (0.0 with no unit), in place."""
    for u in r.units:
        u.relevance = relevance(u)
    r.top_relevance = max((u.relevance for u in r.units), default=0.0)
    return r


def no_answer(r: RetrievalResult, gate: float) -> RetrievalResult:
    """``r`` with no units and a note when its top relevance is below ``gate`` (0: no gate), in place."""
    if gate > 0 and r.units and (r.top_relevance or 0.0) < gate:
        r.units, r.context, r.context_tokens = [], "", 0
        r.notes.append(
            f"nothing relevant: the top relevance {r.top_relevance:.3f} is below the no-answer threshold {gate}"
        )
    return r


def show_current(
    r: RetrievalResult,
    superseded: dict[str, tuple[str, float | None]],
    count_tokens,
    successor: Callable[[str], RetrievedUnit | None] | None = None,
) -> RetrievalResult:
    """Facts that changed (``construct.supersede``), in place: a superseded statement (``superseded``:
    unit id -> (the id of the statement that superseded it, when)) reads as earlier ("previously,
    until 2024-03: ...") and its successor takes its place, the stale one just after it; a successor
    the search did not return is put in there too (``successor(id)`` builds it). The current value
    ranks first whatever its cosine: a successor's ``relevance`` (what ``limit_units`` ranks by) is
    at least its stale statement's, its ``scores`` keep its own cosine. Units only (``render``
    renders the context); ``count_tokens`` counts an added or relabelled unit's tokens."""
    hit = [i for i, u in enumerate(r.units) if u.type == "semantic" and u.id in superseded]
    if not hit:
        return r
    ids = {u.id for u in r.units}
    added = []
    for i in hit:
        new_id = superseded[r.units[i].id][0]
        if new_id not in ids and successor is not None and (unit := successor(new_id)) is not None:
            unit.relevance = r.units[i].relevance
            unit.scores = {"relevance": unit.relevance} if unit.relevance is not None else {}
            unit.tokens = int(count_tokens([unit.text])[0])
            added.append((i, unit))
            ids.add(new_id)
    for i, unit in reversed(added):
        r.units.insert(i, unit)
    for i, u in enumerate(r.units):
        if u.type == "semantic" and u.id in superseded:
            until = superseded[u.id][1]
            when = (
                datetime.fromtimestamp(until, tz=timezone.utc).strftime("%Y-%m")
                if until is not None
                else "a later message"
            )
            text = f"previously, until {when}: {u.text}"
            r.units[i] = replace(u, text=text, tokens=int(count_tokens([text])[0]))
    r.units = current_first(r.units, {k: v[0] for k, v in superseded.items()})
    return r


def current_first(units: list[RetrievedUnit], successor_of: dict[str, str]) -> list[RetrievedUnit]:
    """``units`` with each successor (``successor_of``: superseded statement id -> the id of the one
    that superseded it) moved to just before its stale statement where it came after it, and its
    ``relevance`` raised to the stale one's where lower (in place), so that a stale statement never
    ranks above the statement that superseded it; a chain (A by B by C) reads C, B, A."""
    units = list(units)
    for _ in range(len(units) + 1):  # a chain settles in at most as many passes as it has links
        changed = False
        at = {u.id: k for k, u in enumerate(units) if u.type == "semantic"}
        for old in [u for u in units if u.type == "semantic" and u.id in successor_of]:
            k, j = at.get(old.id), at.get(successor_of[old.id])
            if k is None or j is None:
                continue
            new = units[j]
            if old.relevance is not None and (new.relevance is None or new.relevance < old.relevance):
                new.relevance = old.relevance
                changed = True
            if j > k:
                units.insert(k, units.pop(j))
                at = {u.id: n for n, u in enumerate(units) if u.type == "semantic"}
                changed = True
        if not changed:
            break
    return units


def render(r: RetrievalResult, count_tokens, budget: int | None, name: str | None = None) -> RetrievalResult:
    """The result's context rendered once from its units, in place: "the user" read as the user's
    ``name`` where one is known (``engine.people``; units and context), the context assembled
    (``retrieve.context.assemble``) and counted, and cut from its last non-theme unit while over
    ``budget`` (a relabelled fact or a longer name can make it longer than the search's fit)."""
    if name:
        changed = []
        for u in r.units:
            text = named(u.text, name)
            if text != u.text:
                if u.message_ends is not None:
                    u.message_ends = [len(named(u.text[:e], name)) for e in u.message_ends]
                u.text = text
                changed.append(u)
        for u, n in zip(changed, count_tokens([u.text for u in changed]) if changed else []):
            u.tokens = int(n)

    def shown() -> None:
        r.context = named(assemble(r.units), name) if name else assemble(r.units)
        r.context_tokens = int(count_tokens([r.context])[0]) if r.context else 0

    shown()
    while budget is not None and r.context_tokens > budget and any(u.type != "theme" for u in r.units):
        last = max(k for k, u in enumerate(r.units) if u.type != "theme")
        r.units = r.units[:last] + r.units[last + 1 :]
        shown()
    return r


def limit_units(r: RetrievalResult, limit: int | None, threshold: float | None) -> RetrievalResult:
    """``r`` with units below ``threshold`` removed and, under a ``limit``, only the ``limit`` most
    relevant units the context shows (themes, which it never shows, leave with it), in place; a unit
    ranks by its ``relevance`` where set (``show_current`` gives a successor its stale statement's),
    else by :func:`relevance`. Units only (``render`` renders the context)."""
    if limit is None and threshold is None:
        return r
    rank = [u.relevance if u.relevance is not None else relevance(u) for u in r.units]
    keep = [i for i in range(len(r.units)) if threshold is None or rank[i] >= threshold]
    if limit is not None:
        shown = [i for i in keep if r.units[i].type in SHOWN]
        keep = sorted(sorted(shown, key=lambda i: (-rank[i], i))[:limit])
    if len(keep) == len(r.units):
        return r
    dropped = len(r.units) - len(keep)
    r.units = [r.units[i] for i in keep]
    why = [f"below threshold {threshold}"] if threshold is not None else []
    why += [f"past limit {limit}"] if limit is not None else []
    r.notes.append(f"{dropped} units left out ({' or '.join(why)})")
    return r


def check_limit(v, name: str) -> int | None:
    if v is None:
        return None
    if isinstance(v, float) and v.is_integer():
        v = int(v)
    if isinstance(v, bool) or not isinstance(v, int) or not 1 <= v <= MAX_LIMIT:
        raise ValueError(f"{name}: expected an integer from 1 to {MAX_LIMIT}, got {v!r:.40}")
    return v


def check_threshold(v, name: str) -> float | None:
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not -1.0 <= float(v) <= 1.0:
        raise ValueError(f"{name}: expected a number from -1 to 1 (a cosine), got {v!r:.40}")
    return float(v)


__all__ = [
    "CALIBRATED_NO_ANSWER",
    "check_limit",
    "gate_for",
    "check_threshold",
    "current_first",
    "limit_units",
    "mark_relevance",
    "no_answer",
    "relevance",
    "SHOWN",
    "show_current",
    "render",
]
