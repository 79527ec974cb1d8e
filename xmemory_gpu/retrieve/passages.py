"""Budget parts of long units, ranked by relevance to the query: an episode's messages, and a long
message's passages (``text.passages``; their embeddings are the bank's ``psg`` level, stored at
construction, so ranking them costs a matrix-vector product and no encoder call). Under a
token budget (``context.TokenBudget.fit``) a unit that does not fit gives way to its parts, so an
episode larger than what is left contributes its most relevant messages, and a message larger than
the whole budget its best passage; with no budget the parts are dropped.

The parts a strategy offers are :class:`~.context.Deferred` groups (``Parts.episode_parts``,
``Parts.passage_parts``): built by the fit only where their unit did not fit, skipped unbuilt
elsewhere. A memory read from a store of format 3 (no passages stored) has its passages embedded
here: then only the first ``embed_messages`` long messages a query offers, in order, built or not,
are ranked (the rest keep text order), which bounds the encoder work a query can cause."""

from __future__ import annotations

import weakref
from typing import NamedTuple

import numpy as np

from ..memory.bank import Bank
from ..memory.hierarchy import time_or_none
from ..text import PASSAGE_WORDS, embedding_text, passages
from .context import Deferred, as_part, message_rows, message_unit, word_floor
from .result import RetrievedUnit

_CACHE: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # embedder -> {text: unit row}


def _embed(embedder, texts: list[str]) -> np.ndarray:
    cache = _CACHE.setdefault(embedder, {})
    new = list(dict.fromkeys(t for t in texts if t not in cache))
    if new:
        cache.update(zip(new, np.asarray(embedder.encode(new), np.float32)))
    return np.stack([cache[t] for t in texts]) if texts else np.zeros((0, embedder.dim), np.float32)


def _stored_at(first: np.ndarray, owner: np.ndarray, row: int, n: int) -> int | None:
    """The first ``psg`` row of message ``row``'s ``n`` stored passages (``first``: the messages'
    ``psg`` column, ``owner``: the passages' ``msg`` column), or None when it has none stored or
    they were cut with another passage length (embedded at search time)."""
    at = int(first[row])
    if at < 0 or at + n > owner.shape[0] or (owner[at : at + n] != row).any():
        return None
    return None if at + n < owner.shape[0] and owner[at + n] == row else at


class MessageShape(NamedTuple):
    """What a search keeps of one message: the ``speaker: passage`` lines of its passages
    (``text.passages``; None for a short message, one passage: its text; the passages alone are
    not kept as well, nor is the message's own line) and the least ``word_floor`` of its own line
    and those lines."""

    lines: tuple[str, ...] | None
    least_floor: int

    @property
    def passages(self) -> int:
        return 1 if self.lines is None else len(self.lines)


class Parts:
    """Builds the parts of episodes and messages for one batch of queries. ``embed_messages``: how
    many long messages per query get their passages ranked by embedding (the rest keep text order),
    which bounds the encoder work a query can cause."""

    def __init__(self, bank: Bank, embedder, max_words: int = PASSAGE_WORDS, embed_messages: int = 4) -> None:
        self.bank, self.embedder, self.max_words, self.embed_messages = (
            bank,
            embedder,
            max_words,
            embed_messages,
        )
        self._ranked: dict[int, int] = {}
        self._decided: dict[tuple[int, int], tuple | None] = {}  # (row, query) -> what ``_rank`` said
        self._lines = message_rows(bank)
        text, speaker = bank.msg["text"], bank.msg["speaker"]

        def shape(r: int) -> MessageShape:
            lines = tuple(f"{speaker[r]}: {p}" for p in passages(text[r], max_words))
            if len(lines) == 1:
                return MessageShape(None, word_floor(lines[0]))
            own = word_floor(f"{speaker[r]}: {text[r]}")  # newlines join words in the message's own line
            return MessageShape(lines, min(own, *map(word_floor, lines)))

        # a message's shape depends on its speaker and text alone: carried over renumbering
        self._shape = sh = bank.msg.rows_cache(
            f"retrieve.message_shape.{int(max_words)}", shape, key=("speaker", "text")
        )
        first, owner = bank.msg["psg"], bank.psg["msg"]

        def has_stored(r: int) -> bool:
            n = sh[r].passages
            return n > 1 and _stored_at(first, owner, r, n) is not None

        # the values a bank's caches compute read its columns, never this object (an evicted bank is freed)
        self._has_stored = bank.msg.rows_cache(
            f"retrieve.passages_stored.{int(max_words)}", has_stored, (bank.psg,)
        )
        epi = bank.epi

        def episode_info(row: int) -> tuple[np.ndarray, bool]:
            rows = epi["msgs"][row]
            rows = rows[rows >= 0]
            return rows, any(sh[int(r)].passages > 1 for r in rows)

        # per episode row: (its message rows, has a long message): an episode recurs across the queries
        self._episodes = eps = epi.rows_cache(
            f"retrieve.episode_parts.{int(max_words)}", episode_info, (bank.msg,)
        )
        time = bank.msg["time"]

        def episode_floor(row: int) -> list[tuple[float | None, int]]:
            """(timestamp, least ``word_floor``) per distinct timestamp of the episode's messages."""
            least: dict[float | None, int] = {}
            for r in eps[row][0]:
                ts, n = time_or_none(time[int(r)]), sh[int(r)].least_floor
                least[ts] = min(n, least.get(ts, n))
            return list(least.items())

        self._episode_floors = epi.rows_cache(
            f"retrieve.episode_floor.{int(max_words)}", episode_floor, (bank.msg,)
        )
        self._q64: dict[int, np.ndarray] = {}  # query index -> its embedding in float64

    def prime(self, msg_rows: np.ndarray, epi_rows: np.ndarray) -> None:
        """Compute ahead what searches compute on first use of these message and episode rows (global):
        each message's passages and word floors, whether its passages are stored, each episode's
        message rows and floors. Kept by the bank (``rows_cache``) until it rewrites the rows (or the
        bank is replaced)."""
        for r in np.asarray(msg_rows, np.int64).tolist():
            self._shape[r]
            self._has_stored[r]
        for r in np.asarray(epi_rows, np.int64).tolist():
            self._episodes[r]
            self._episode_floors[r]

    def _time(self, row: int) -> float | None:
        return time_or_none(self.bank.msg["time"][row])

    def _long(self, row: int) -> bool:
        return self._shape[row].passages > 1

    def _parts(self, row: int) -> list[str]:
        """Message ``row``'s passages (``text.passages``), from their lines."""
        lines, at = self._shape[row].lines, len(f"{self.bank.msg['speaker'][row]}: ")
        return [self.bank.msg["text"][row]] if lines is None else [line[at:] for line in lines]

    def _unit(self, row: int, level: int, score: float) -> RetrievedUnit:
        unit = message_unit(self._lines[row], score, {"similarity": score})
        return as_part(unit, level) if level else unit

    def _stored(self, row: int) -> np.ndarray | None:
        """The stored embeddings of long message ``row``'s passages, or None when it has none (a
        memory of format 3)."""
        n = self._shape[row].passages
        at = _stored_at(self.bank.msg["psg"], self.bank.psg["msg"], row, n)
        return None if at is None else self.bank.psg["x"][at : at + n]

    def _rank(self, row: int, qi: int) -> tuple[list[str], list[str]] | None:
        """Row ``row``'s passages (None for a short message or one with stored passages) counted
        against the query's encoder allowance; returns them with the texts to embed when ranked."""
        if not self._long(row) or self._has_stored[row]:
            return None
        key = (row, qi)
        if key in self._decided:  # a group skipped unbuilt and built later: decided (and counted) once
            return self._decided[key]
        ranked = None
        if self._ranked.get(qi, 0) < self.embed_messages:
            self._ranked[qi] = self._ranked.get(qi, 0) + 1
            sp, parts = self.bank.msg["speaker"][row], self._parts(row)
            ranked = parts, [embedding_text(sp, p) for p in parts]
        self._decided[key] = ranked
        return ranked

    def _passage_units(self, row: int, q: np.ndarray, qi: int, level: int) -> list[RetrievedUnit]:
        if not self._long(row):
            return []
        texts = self._shape[row].lines
        order = np.arange(len(texts))
        sims = np.zeros(len(texts))
        stored = self._stored(row)
        ranked = None if stored is not None else self._rank(row, qi)
        if stored is not None:
            sims = stored @ q.astype(np.float32)
            order = np.lexsort((order, -sims))
        elif ranked is not None:
            sims = _embed(self.embedder, ranked[1]) @ q.astype(np.float32)
            order = np.lexsort((order, -sims))
        mid, ts = self.bank.msg["id"][row], self._time(row)
        return [
            as_part(
                RetrievedUnit(
                    "message",
                    f"{mid}#p{int(i) + 1}",
                    texts[i],
                    0,
                    float(sims[i]),
                    [str(mid)],
                    ts,
                    {"similarity": float(sims[i])},
                    passage=int(i) + 1,
                ),
                level + 1,
            )
            for i in order
        ]

    def _skip_passages(self, row: int, qi: int) -> None:
        """What building the passages of ``row`` would have done besides the units: its place in the
        query's ranking allowance, and the encoder call for the embeddings of its passages."""
        ranked = self._rank(row, qi)
        if ranked is not None:
            _embed(self.embedder, ranked[1])

    def message(self, row: int, q: np.ndarray, qi: int, level: int, score: float) -> list[RetrievedUnit]:
        """The message at global ``row`` as a unit of ``level``, followed (when it is long) by its
        passages one level deeper, best first."""
        return [self._unit(row, level, score)] + self._passage_units(row, q, qi, level)

    def passage_parts(self, row: int, q: np.ndarray, qi: int, level: int) -> list[Deferred]:
        """The passages of the message at ``row`` (a unit of ``level``) as a deferred group; none
        for a short message."""
        if not self._long(row):
            return []
        return [
            Deferred(
                level + 1,
                (level + 1,),
                lambda: self._passage_units(row, q, qi, level),
                lambda: self._skip_passages(row, qi),
                lambda: [(self._time(row), self._shape[row].least_floor)],
            )
        ]

    def _order(self, row: int, q: np.ndarray, qi: int) -> tuple[list[int], list[float]]:
        """Episode ``row``'s message rows by descending cosine to query ``qi`` (ties: row order),
        and those cosines (float64)."""
        rows = self._episodes[row][0]
        if len(rows) == 0:
            return [], []
        q64 = self._q64.get(qi)
        if q64 is None:
            q64 = self._q64[qi] = q.astype(np.float64)
        sims = self.bank.msg["x"][rows].astype(np.float64) @ q64
        order = np.lexsort((rows, -sims))
        return rows[order].tolist(), sims[order].tolist()

    def episode(self, row: int, q: np.ndarray, qi: int) -> list[RetrievedUnit]:
        """Parts of episode ``row`` (level 1): its messages by descending cosine to the query, each
        followed by its passages."""
        rows, sims = self._order(row, q, qi)
        out: list[RetrievedUnit] = []
        for r, sim in zip(rows, sims):
            out += self.message(r, q, qi, 1, sim)
        return out

    def episode_parts(self, row: int, q: np.ndarray, qi: int) -> list[Deferred]:
        """``episode``'s parts as a deferred group (none for an episode without messages): its
        messages built when expanded, each followed by its passages, deferred in turn."""
        rows, long = self._episodes[row]
        if not len(rows):
            return []

        def expand() -> list:
            msgs, sims = self._order(row, q, qi)
            out: list = []
            for r, sim in zip(msgs, sims):
                out.append(self._unit(r, 1, sim))
                if long and self._long(r):
                    out += self.passage_parts(r, q, qi, 1)
            return out

        def skip() -> None:
            if not long or self._ranked.get(qi, 0) >= self.embed_messages:
                return
            for r in self._order(row, q, qi)[0]:
                self._skip_passages(r, qi)

        return [Deferred(1, (1, 2) if long else (1,), expand, skip, lambda: self._episode_floors[row])]
