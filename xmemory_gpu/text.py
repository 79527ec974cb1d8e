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


def words_reference(text: str) -> list[str]:
    """Lower-cased word tokens (letters, digits, inner apostrophes/hyphens): the rule as written."""
    return [w.lower().strip("'-") for w in _WORD.findall(text)]


try:  # the same rules in one C++ call each (csrc/cpu/hashing.cpp), when the compiled module is built
    from ._C import keywords as _native_keywords
    from ._C import words as _native_words
except ImportError:
    _native_keywords = _native_words = None


def words(text: str) -> list[str]:
    """Lower-cased word tokens (letters, digits, inner apostrophes/hyphens): ``words_reference``'s
    list, from the compiled module when it is built (every build and search splits texts into words)."""
    return _native_words(text) if type(text) is str and _native_words is not None else words_reference(text)


def content_words(text: str) -> list[str]:
    return content_of(words(text))


def content_of(ws: list[str]) -> list[str]:
    """The content words among ``words`` of a text (stopwords and one-letter words dropped)."""
    return [w for w in ws if w not in STOPWORDS and len(w) > 1]


def keywords_reference(texts: list[str], n: int = 4) -> list[str]:
    """The ``n`` most frequent content words over ``texts`` (ties by first appearance): the rule as written."""
    counts: Counter[str] = Counter()
    for t in texts:
        counts.update(content_of(words_reference(t)))
    return [w for w, _ in counts.most_common(n)]


def keywords(texts: list[str], n: int = 4) -> list[str]:
    """``keywords_reference``'s list, in one call of the compiled module when it is built (every
    episode's title)."""
    if _native_keywords is None or type(texts) is not list or type(n) is not int or not 0 < n < 2**62:
        return keywords_reference(texts, n)
    return _native_keywords(texts, n, STOPWORDS)


_DATES: dict[float | None, str] = {}  # timestamp -> ``fmt_date`` (a pure function of it)
_DATES_MAX = 1 << 16


def fmt_date(ts: float | None) -> str:
    """``YYYY-MM-DD`` (UTC) or ``unknown date``; remembered per timestamp (episode titles and every
    unit of a context are dated)."""
    d = _DATES.get(ts)
    if d is None:
        if len(_DATES) >= _DATES_MAX:
            _DATES.clear()
        d = _DATES[ts] = (
            "unknown date" if ts is None else datetime.fromtimestamp(ts, tz=timezone.utc).strftime("%Y-%m-%d")
        )
    return d


def message_line(m) -> str:
    """One message as ``speaker: text`` (prompts and retrieved message blocks)."""
    return f"{m.speaker}: {m.text}"


def numbered(lines: list[str]) -> str:
    """Lines numbered from 1, one per line (prompt lists)."""
    return "\n".join(f"{i}. {t}" for i, t in enumerate(lines, 1))


# -- how a message is embedded (the bulk build, the live engine and retrieval's passages alike) ----
_CAPTION = re.compile(r"\[shares a photo: (?P<cap>[^\]]*)\]\s*$")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\n+")
PASSAGE_WORDS = 150  # words per embedded passage: all-MiniLM-L6-v2 reads 256 word pieces, about 190 words


def embedding_text(speaker: str, text: str) -> str:
    """A message as it is embedded (bulk build and live engine alike): ``Speaker: text [shares a photo
    of CAPTION]``, the rendering of the flat anchor in ``../shared/data/locomo/README.md``. The loader
    writes captions as ``[shares a photo: CAPTION]``; this renders them as the anchor does."""
    return f"{speaker}: {_CAPTION.sub(lambda m: f'[shares a photo of {m.group(1).strip()}]', text)}"


def passages(text: str, max_words: int = PASSAGE_WORDS) -> list[str]:
    """``text`` cut into passages of at most ``max_words`` words at sentence or line ends (a sentence
    longer than that is cut by words). A short text is one passage; no word is lost."""
    if len(text.split()) <= max_words:
        return [text]
    out: list[str] = []
    cur: list[str] = []
    for sent in (s for s in _SENTENCE_END.split(text) if s.strip()):
        ws = sent.split()
        while len(ws) > max_words:  # an over-long sentence: cut by words
            if cur:
                out.append(" ".join(cur))
                cur = []
            out.append(" ".join(ws[:max_words]))
            ws = ws[max_words:]
        if len(cur) + len(ws) > max_words and cur:
            out.append(" ".join(cur))
            cur = []
        cur += ws
    if cur:
        out.append(" ".join(cur))
    return out
