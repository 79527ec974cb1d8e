"""Neutral text helpers shared by every layer: words, stopwords, keywords, dates, message lines."""

from __future__ import annotations

import re
from collections import Counter
from datetime import datetime, timezone

STOPWORDS = frozenset(
    """a an the and or but if then so of to in on at by for with about as from into over after before
    is are was were be been being am do does did have has had having i me my mine myself you your yours
    we us our ours he him his she her hers they them their theirs it its this that these those there here
    what which who whom whose when where why how all any both each few more most other some such no nor
    not only own same than too very can will just should now would could also really yeah yes oh ok okay
    like get got going go gonna lot lots thing things something anything one still even much well im ive
    dont thats its youre hey hi hello thanks thank wow great good nice awesome cool sure know think feel
    let lets up out again""".split()
)

_WORD = re.compile(r"[A-Za-z0-9][A-Za-z0-9'\-]*")


def words(text: str) -> list[str]:
    """Lower-cased word tokens (letters, digits, inner apostrophes/hyphens)."""
    return [w.lower().strip("'-") for w in _WORD.findall(text)]


def content_words(text: str) -> list[str]:
    return [w for w in words(text) if w not in STOPWORDS and len(w) > 1]


def keywords(texts: list[str], n: int = 4) -> list[str]:
    """The ``n`` most frequent content words over ``texts`` (ties by first appearance)."""
    counts: Counter[str] = Counter()
    for t in texts:
        counts.update(content_words(t))
    return [w for w, _ in counts.most_common(n)]


def fmt_date(ts: float | None) -> str:
    """``YYYY-MM-DD`` (UTC) or ``unknown date``."""
    if ts is None:
        return "unknown date"
    return datetime.fromtimestamp(ts, tz=timezone.utc).strftime("%Y-%m-%d")


def message_line(m) -> str:
    """One message as ``speaker: text`` (prompts and retrieved message blocks)."""
    return f"{m.speaker}: {m.text}"


def numbered(lines: list[str]) -> str:
    """Lines numbered from 1, one per line (prompt lists)."""
    return "\n".join(f"{i}. {t}" for i, t in enumerate(lines, 1))
