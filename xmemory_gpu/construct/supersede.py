"""Facts that change, without an LLM: which statements a later one supersedes.

A later statement supersedes an earlier one of the same speaker when it says that something changed
(a change word: "now", "moved", "switched", "instead", "quit", "sold", "got a raise", ...), both are
about the same attribute (job, home, diet, income, transport, schedule, plans, relationship, health:
word patterns), and their embeddings are close (cosine >= ``threshold``). The earlier statement is
kept (history questions still find it); retrieval ranks it after the newer one and shows it as
earlier ("previously, until 2024-03: ..."). This goes past mem0's UPDATE, which overwrites the old
fact, and keeps what temporal graph memories (Graphiti / Zep's invalidated edges) keep.
"""

from __future__ import annotations

import re

import numpy as np

from ..ops.rows import dot4_gram

CHANGE = re.compile(
    r"\b(?:now|no longer|any ?more|moved|moving|relocat\w*|switched|switching|changed|changing|instead|new|started|"
    r"starting|began|quit|quitting|left|leaving|joined|joining|sold|raise|promoted|divorced|broke up|engaged|married|"
    r"is off|called off|cancel+ed|stopped|gave up|update[ds]?|these days|nowadays)\b",
    re.I,
)
ATTRIBUTES: dict[str, re.Pattern] = {
    name: re.compile(p, re.I)
    for name, p in {
        "job": r"\b(?:work\w*|job|jobs|career|hired|employ\w*|company|start-?up|office|position|role|quit|promoted|cto|ceo|"
        r"nurse|designer|engineer|teach\w*|doctor|manager|developer|hospital|intern\w*)\b",
        "home": r"\b(?:live[sd]?|living|moved|move|relocat\w*|flat|apartment|house|home|neighbou?rhood)\b",
        "diet": r"\b(?:vegetarian|vegan|pescatarian|diet|eat\w*|meat|fish|gluten|keto|dairy)\b",
        "income": r"\b(?:earn\w*|salary|income|take[s]? home|raise|wage|paid \$?\d)\b",
        "transport": r"\b(?:drive[s]?|driving|car|cycl\w*|bike|commut\w*|bus|train|subway|scooter)\b",
        "schedule": r"\b(?:mondays?|tuesdays?|wednesdays?|thursdays?|fridays?|saturdays?|sundays?|weekly|schedule|days)\b",
        "plans": r"\b(?:wedding|marathon|trip|plan\w*|training|holiday|vacation|visit\w*|move to)\b",
        "relationship": r"\b(?:married|engaged|dating|partner|girlfriend|boyfriend|wife|husband|divorc\w*|single|broke up|fianc\w*)\b",
        "health": r"\b(?:injur\w*|hurt|broke|broken|ankle|knee|shoulder|sick|surgery|pregnan\w*|allerg\w*)\b",
    }.items()
}
THRESHOLD = (
    0.40  # cosine of the two statements (all-MiniLM-L6-v2: same-attribute pairs 0.41-0.80 on our chats)
)


def attributes(text: str) -> frozenset[str]:
    """The attributes a statement speaks of."""
    return frozenset(name for name, pat in ATTRIBUTES.items() if pat.search(text))


def _mask(text: str) -> int:
    """The attributes of a statement as bits (one per ``ATTRIBUTES`` entry)."""
    return sum(1 << b for b, pat in enumerate(ATTRIBUTES.values()) if pat.search(text))


def supersessions(
    texts: list[str],
    x: np.ndarray,
    order: np.ndarray,
    speakers: list[str],
    *,
    threshold: float = THRESHOLD,
    new: np.ndarray | None = None,
) -> dict[int, int]:
    """Statement i -> the statement j that supersedes it (the first later one that does), for texts [n],
    unit rows x [n, d], ``order`` [n] (when each was said: message position) and ``speakers`` [n].
    ``new``: the rows that may supersede (the statements a write added; default all): the cost is
    one product of those change statements with every row, so a write pays for what it adds."""
    n = len(texts)
    if n < 2:
        return {}
    rows = np.arange(n) if new is None else np.asarray(new, np.int64)
    changes = [j for j in (int(r) for r in rows) if CHANGE.search(texts[j]) and _mask(texts[j])]
    if not changes:
        return {}
    order = np.asarray(order)
    spk = np.unique(np.asarray(speakers, dtype=object), return_inverse=True)[1]
    sims = dot4_gram(np.asarray(x)[changes], x)  # [C, n], the same bits on every CPU
    close = np.flatnonzero((sims >= threshold).any(axis=0))  # only these rows' attributes are read
    masks = np.zeros(n, np.int64)
    masks[close] = [_mask(texts[i]) for i in close.tolist()]
    masks[changes] = [_mask(texts[j]) for j in changes]
    out: dict[int, int] = {}
    for c in sorted(range(len(changes)), key=lambda c: (order[changes[c]], changes[c])):
        j = changes[c]
        hit = (order < order[j]) & (spk == spk[j]) & ((masks & masks[j]) != 0) & (sims[c] >= threshold)
        hit[j] = False
        for i in np.flatnonzero(hit).tolist():
            out.setdefault(i, j)
    return out


__all__ = ["ATTRIBUTES", "CHANGE", "THRESHOLD", "attributes", "supersessions"]
