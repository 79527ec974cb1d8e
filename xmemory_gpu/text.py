"""Neutral text helpers shared by every layer: words, stopwords, keywords, dates, message lines."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from datetime import datetime, timezone
from itertools import filterfalse
from string import ascii_lowercase, digits

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

# the word rule's bytes: ASCII letters (lower-cased), digits, ' and - belong to words; every other byte
# of a text's UTF-8 (a non-ASCII character's, a lone surrogate's) splits them
_WORD_BYTES = bytes(
    c + 32 if 65 <= c <= 90 else c if 48 <= c <= 57 or 97 <= c <= 122 or c in b"'-" else 32
    for c in range(256)
)
# a run of ' and - at either end of a run of word bytes (it starts one: nothing or a space before it, or it
# ends one: nothing or a space after it), written to start with its character class (a fast search)
_EDGE_RUN = re.compile(rb"['\-](?:(?<![^ ]['\-])['\-]*|['\-]*(?![^ ]))")
SHORT_WORDS = frozenset(ascii_lowercase + digits)  # the words of one character
NOT_CONTENT = STOPWORDS | SHORT_WORDS  # words that are no content word


ASSISTANT_SPEAKERS = frozenset(
    {"assistant", "system", "tool"}
)  # chat roles whose turns are answers, not the user's facts


def is_assistant(speaker: str) -> bool:
    """Whether ``speaker`` is a chat role that answers (``ASSISTANT_SPEAKERS``, any case) rather than
    a person whose memory this is."""
    return speaker.lower() in ASSISTANT_SPEAKERS


def word_runs(text: str) -> bytes:
    """The word rule, once: ``text``'s words as ASCII bytes separated by spaces. Its UTF-8 with every
    byte but ASCII letters (lower-cased), digits, ' and - made a space (a non-ASCII character splits
    words), the ' and - at either end of each run cut."""
    runs = str.encode(text, "utf-8", "surrogatepass").translate(_WORD_BYTES)
    return (
        _EDGE_RUN.sub(b"", runs) if b"'" in runs or b"-" in runs else runs
    )  # the search only where it can match


def words(text: str) -> list[str]:
    """Lower-cased word tokens (``word_runs``): the matches of ``[A-Za-z0-9][A-Za-z0-9'-]*``, lower-cased,
    their trailing ' and - cut."""
    return word_runs(text).decode("ascii").split()


def content_words(text: str) -> list[str]:
    return content_of(words(text))


def content_of(ws: list[str]) -> list[str]:
    """The content words among ``words`` of a text (stopwords and one-letter words dropped)."""
    return list(filterfalse(NOT_CONTENT.__contains__, ws))


def keywords(texts: Iterable[str], n: int | None = 4) -> list[str]:
    """The ``n`` most frequent content words over ``texts`` (ties by first appearance; all for None):
    the texts' words read in one pass (no word spans the newlines that join them)."""
    if n is not None and n <= 0:
        return []
    counts = Counter(filterfalse(NOT_CONTENT.__contains__, words("\n".join(texts))))
    return sorted(counts, key=counts.__getitem__, reverse=True)[
        :n
    ]  # a stable sort: Counter.most_common's order


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
    of CAPTION]``, the rendering of the LoCoMo dev split's published flat-retrieval anchor. The loader
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
