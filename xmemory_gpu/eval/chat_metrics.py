"""Measures of a live memory on role chats (``datasets.assistant_chats``): evidence recall, whether
a fact's newer value comes before its superseded one, how well the top relevance separates
answerable from unanswerable questions (AUROC), and statements with broken verb forms or cut
abbreviations. Pure functions over what a search returned; ``benchmarks/assistant_chats.py`` runs
the engine."""

from __future__ import annotations

import re
from collections.abc import Sequence

from ..construct.semantic import _ABBREV, _PAST


def evidence_recall(evidence: Sequence[str], shown: Sequence[str]) -> float:
    """The share of the evidence message ids among those the context shows (1.0 with none asked)."""
    if not evidence:
        return 1.0
    got = set(shown)
    return sum(e in got for e in evidence) / len(evidence)


def newer_first(order: Sequence[str], evidence: Sequence[str], stale: Sequence[str]) -> bool:
    """Whether the newer value (an evidence id) shows before every superseded one (stale ids) in
    ``order`` (message ids in context order): False when the newer one does not show."""
    pos = {}
    for i, m in enumerate(order):
        pos.setdefault(m, i)
    new = min((pos[e] for e in evidence if e in pos), default=None)
    if new is None:
        return False
    old = min((pos[s] for s in stale if s in pos), default=None)
    return old is None or new < old


def auroc(positive: Sequence[float], negative: Sequence[float]) -> float:
    """P(a positive scores above a negative), ties counting one half (Mann-Whitney U / (n_p n_n))."""
    if not positive or not negative:
        return float("nan")
    wins = sum((p > n) + 0.5 * (p == n) for p in positive for n in negative)
    return wins / (len(positive) * len(negative))


# pasts equal to their base form: "sets", "reads" are present tenses, not broken pasts
_SAME_AS_BASE = frozenset(
    "bet burst cast cost cut forecast hit hurt let put quit read set shut spread upset".split()
)
_BROKEN = frozenset(w for w in _PAST if w not in _SAME_AS_BASE)
_WORD = re.compile(r"[A-Za-z]+(?:'[a-z]+)?")
_CUT = re.compile(
    r"(?:^|\s)(?:" + "|".join(sorted(re.escape(a) for a in _ABBREV if "." not in a)) + r")\.$", re.I
)


def broken_forms(statement: str) -> list[str]:
    """What reads wrong in a statement: an irregular past given a third-person -s ("lefts",
    "brokes"), or a text cut after an abbreviation ("... at St.")."""
    out = [
        w
        for w in _WORD.findall(statement)
        if (w.lower().endswith("s") and w.lower()[:-1] in _BROKEN)
        or (w.lower().endswith("es") and w.lower()[:-2] in _BROKEN)
    ]
    if _CUT.search(statement.rstrip()):
        out.append("cut after an abbreviation")
    return out


__all__ = ["auroc", "broken_forms", "evidence_recall", "newer_first"]
