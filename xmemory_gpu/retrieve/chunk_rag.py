"""``chunk-rag``: the chunked RAG a user deploys, as a peer in the same harness. Every message is
split into passages of at most N words (``chunk-rag`` is 64 words, ``chunk-rag:N`` any width from 1
to ``MAX_WORDS``), each prefixed with its speaker and embedded once; a query ranks them by cosine and
the context takes them greedily, whole, while they fit the budget (``TokenBudget.greedy``).

The passages of a bank at one width are a searchable level (``PassageLevel``), built on the first
search and cached on the retriever (``MAX_LEVELS`` widths at most); it follows the bank as it changes
(``Bank.version``: the live engine's ingest and deletes, memories paged in and out), re-embedding
only the passages it has not seen. A message of at most N words is one passage, the message itself:
its embedding is the message level's row (the same text, embedded by the build), so only the
passages of longer messages are encoded.
"""

from __future__ import annotations

import math
import re
import threading
import weakref
from dataclasses import dataclass

import numpy as np

from ..memory.bank import Bank, Level
from ..memory.segments import Segments
from ..text import embedding_text
from .context import messages_unit
from .result import RetrievedUnit

NAME = "chunk-rag"
DEFAULT_WORDS = 64  # ``chunk-rag`` without a width
MAX_WORDS = 1000  # widest passage ``chunk-rag:N`` accepts (an encoder reads ~190 words; wider is not RAG)
NEAR_END = 0.25  # a window ends at the last sentence end within its last quarter, when it has one
MAX_LEVELS = 4  # widths whose passages a retriever keeps (the least recently searched one goes first)
FILL_WORDS = 6400  # under a budget, passages down to rank max(naive_rag_fill, FILL_WORDS / N) are candidates

_WORD = re.compile(r"\S+")


def width_of(strategy: str) -> int | None:
    """The passage width of a ``chunk-rag`` strategy name (``chunk-rag`` -> 64, ``chunk-rag:N`` -> N),
    None for any other name; a malformed width is an error naming the strategy."""
    if strategy == NAME:
        return DEFAULT_WORDS
    head, sep, n = strategy.partition(":")
    if head != NAME or not sep:
        return None
    if not (n.isascii() and n.isdigit()) or not 1 <= int(n) <= MAX_WORDS:
        raise ValueError(
            f"strategy {strategy!r}: expected chunk-rag:N with N a whole number of words from 1 to {MAX_WORDS}"
        )
    return int(n)


def windows(text: str, max_words: int) -> list[tuple[int, int]]:
    """Word ranges ``[a, b)`` of ``text.split()`` that cut it into passages of at most ``max_words``
    words: each window ends at the last sentence end (a word ending in ``.``, ``!`` or ``?``, or
    the last word of a line) within its last ``NEAR_END`` share, else after ``max_words`` words. A
    text of at most ``max_words`` words is one range; no word is lost or repeated."""
    spans = [m.span() for m in _WORD.finditer(text)]
    n = len(spans)
    if n <= max_words:
        return [(0, n)]
    gaps = [text[spans[i][1] : spans[i + 1][0]] for i in range(n - 1)] + [""]
    end = [text[e - 1] in ".!?" or "\n" in g for (_, e), g in zip(spans, gaps)]
    least = max(1, math.ceil(max_words * (1 - NEAR_END)))  # the shortest window a sentence end may close
    out, a = [], 0
    while a < n:
        b = min(a + max_words, n)
        if b < n:
            b = next((c for c in range(b, a + least - 1, -1) if end[c - 1]), b)
        out.append((a, b))
        a = b
    return out


@dataclass
class _Block:
    """One memory's passages: message (local row, word range), passage number (0: the whole
    message), the text each was embedded as, and the embeddings."""

    key: tuple  # the memory's (id, speaker, text) per message: the passages are current while it is
    local: np.ndarray  # [P] int64 local message row
    span: np.ndarray  # [P, 2] int64 word range in the message
    part: np.ndarray  # [P] int64 passage number, 1-based; 0 for a message that is one passage
    embedded: list[str]  # [P] the text each passage was embedded as
    x: np.ndarray  # [P, d] float32 unit rows


class PassageLevel:
    """Every memory's passages at one width as a searchable level: ``level["x"]`` [P, d] with
    segments per memory (bank order), and per passage its global message ``row``, word ``span``
    and ``part`` number. ``previous``: the level this one replaces (its embeddings are reused)."""

    def __init__(
        self, bank: Bank, embedder, width: int, passage_words: int, previous: PassageLevel | None = None
    ) -> None:
        self.width = width
        self._bank = weakref.ref(bank)
        self._version = bank.version  # read before the build: a write during it makes this level stale
        old = previous.blocks if previous is not None else {}
        msg = bank.msg
        plans: dict[str, tuple] = {}
        for b, mid in enumerate(bank.memory_ids):
            rows = msg.seg.rows(b)
            key = tuple(
                zip(msg["id"][rows].tolist(), msg["speaker"][rows].tolist(), msg["text"][rows].tolist())
            )
            if mid in old and old[mid].key == key:
                plans[mid] = (old[mid],)
                continue
            local, span, part, embedded, reuse = [], [], [], [], []
            for j, (_, speaker, text) in enumerate(key):
                ranges = windows(text, width)
                words = text.split() if len(ranges) > 1 else []
                for k, (a, e) in enumerate(ranges):
                    local.append(j)
                    span.append((a, e))
                    part.append(0 if len(ranges) == 1 else k + 1)
                    embedded.append(
                        embedding_text(speaker, text if len(ranges) == 1 else " ".join(words[a:e]))
                    )
                    # a whole message the build embedded as one passage: its row is this passage's embedding
                    reuse.append(int(rows[j]) if len(ranges) == 1 and e <= passage_words else -1)
            plans[mid] = (key, local, span, part, embedded, reuse)
        seen = {t: blk.x[i] for blk in old.values() for i, t in enumerate(blk.embedded)}
        new = list(
            dict.fromkeys(
                t for p in plans.values() if len(p) > 1 for t, r in zip(p[4], p[5]) if r < 0 and t not in seen
            )
        )
        if new:  # one batched encoder call for every passage not embedded before
            seen.update(zip(new, np.asarray(embedder.encode(new), np.float32)))
        self.blocks: dict[str, _Block] = {}
        for mid, p in plans.items():
            if len(p) == 1:
                self.blocks[mid] = p[0]
                continue
            key, local, span, part, embedded, reuse = p
            x = (
                np.stack([msg["x"][r] if r >= 0 else seen[t] for t, r in zip(embedded, reuse)]).astype(
                    np.float32
                )
                if embedded
                else np.zeros((0, bank.dim), np.float32)
            )
            self.blocks[mid] = _Block(
                key,
                np.asarray(local, np.int64),
                np.asarray(span, np.int64).reshape(-1, 2),
                np.asarray(part, np.int64),
                embedded,
                x,
            )
        blocks = [self.blocks[m] for m in bank.memory_ids]
        self.row = np.concatenate(
            [msg.seg.rows(b)[blk.local] for b, blk in enumerate(blocks)] or [np.zeros(0, np.int64)]
        )
        self.span = np.concatenate([blk.span for blk in blocks] or [np.zeros((0, 2), np.int64)])
        self.part = np.concatenate([blk.part for blk in blocks] or [np.zeros(0, np.int64)])
        x = np.concatenate([blk.x for blk in blocks] or [np.zeros((0, bank.dim), np.float32)])
        self.level = Level({"x": x}, Segments.from_lengths([len(blk.part) for blk in blocks]))

    def current(self, bank: Bank) -> bool:
        """True while ``bank`` is the bank this level was built from, unwritten since (``Bank.version``)."""
        return self._bank() is bank and self._version == bank.version

    def unit(self, bank: Bank, p: int, score: float) -> RetrievedUnit:
        """Passage ``p`` (global) as a unit: a whole message (its id), or a passage ``ID#pK``."""
        row, k = int(self.row[p]), int(self.part[p])
        if k == 0:
            return messages_unit(
                "message", str(bank.msg["id"][row]), bank, [row], score, {"similarity": score}
            )
        mid, speaker = str(bank.msg["id"][row]), bank.msg["speaker"][row]
        a, e = (int(v) for v in self.span[p])
        text = " ".join(bank.msg["text"][row].split()[a:e])
        ts = bank.msg["time"][row]
        return RetrievedUnit(
            "message",
            f"{mid}#p{k}",
            f"{speaker}: {text}",
            0,
            score,
            [mid],
            None if math.isnan(ts) else float(ts),
            {"similarity": score},
            passage=int(k),
        )


class PassageCache:
    """The passage levels of a retriever by width: the ``MAX_LEVELS`` most recently searched, each
    rebuilt (reusing its embeddings) when the bank has changed since. Safe across threads."""

    def __init__(self) -> None:
        self._levels: dict[int, PassageLevel] = {}
        self._lock = threading.Lock()

    def level(self, bank: Bank, embedder, width: int, passage_words: int) -> PassageLevel:
        with self._lock:
            lv = self._levels.get(width)
        if lv is None or not lv.current(bank):
            lv = PassageLevel(bank, embedder, width, passage_words, lv)
        with self._lock:
            self._levels.pop(width, None)
            self._levels[width] = lv  # the most recently searched width last
            while len(self._levels) > MAX_LEVELS:
                self._levels.pop(next(iter(self._levels)))
        return lv


def candidates(width: int, naive_rag_k: int, naive_rag_fill: int) -> int:
    """Passages ranked per query: enough to fill a budget of several thousand tokens at any width."""
    return max(naive_rag_k, naive_rag_fill, math.ceil(FILL_WORDS / width))
