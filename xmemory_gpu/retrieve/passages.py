"""Budget parts of long units, ranked by relevance to the query: an episode's messages, and a long
message's passages (``text.passages``, embedded as the build embeds messages). Under a
token budget (``context.TokenBudget.fit``) a unit that does not fit gives way to its parts, so an
episode larger than what is left contributes its most relevant messages, and a message larger than
the whole budget its best passage; with no budget the parts are dropped."""

from __future__ import annotations

import weakref

import numpy as np

from ..memory.bank import Bank
from ..text import PASSAGE_WORDS, embedding_text, passages
from .context import as_part, messages_unit
from .result import RetrievedUnit

_CACHE: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # embedder -> {text: unit row}


def _embed(embedder, texts: list[str]) -> np.ndarray:
    cache = _CACHE.setdefault(embedder, {})
    new = list(dict.fromkeys(t for t in texts if t not in cache))
    if new:
        cache.update(zip(new, np.asarray(embedder.encode(new), np.float32)))
    return np.stack([cache[t] for t in texts]) if texts else np.zeros((0, embedder.dim), np.float32)


class Parts:
    """Builds the parts of episodes and messages for one batch of queries. ``embed_messages``: how
    many long messages per query get their passages ranked by embedding (the rest keep text order),
    which bounds the encoder work a query can cause."""

    def __init__(self, bank: Bank, embedder, max_words: int = PASSAGE_WORDS, embed_messages: int = 4) -> None:
        self.bank, self.embedder, self.max_words, self.embed_messages = bank, embedder, max_words, embed_messages
        self._ranked: dict[int, int] = {}

    def message(self, row: int, q: np.ndarray, qi: int, level: int, score: float) -> list[RetrievedUnit]:
        """The message at global ``row`` as a unit of ``level``, followed (when it is long) by its
        passages one level deeper, best first."""
        bank = self.bank
        unit = messages_unit("message", str(bank.msg["id"][row]), bank, [row], score, {"similarity": score})
        out = [as_part(unit, level) if level else unit]
        parts = passages(bank.msg["text"][row], self.max_words)
        if len(parts) == 1:
            return out
        order = np.arange(len(parts))
        sims = np.zeros(len(parts))
        if self._ranked.get(qi, 0) < self.embed_messages:
            self._ranked[qi] = self._ranked.get(qi, 0) + 1
            sp = bank.msg["speaker"][row]
            sims = _embed(self.embedder, [embedding_text(sp, p) for p in parts]) @ q.astype(np.float32)
            order = np.lexsort((order, -sims))
        for i in order:
            pu = RetrievedUnit("message", f"{bank.msg['id'][row]}#p{int(i) + 1}", f"{bank.msg['speaker'][row]}: {parts[i]}", 0,
                               float(sims[i]), [str(bank.msg["id"][row])], unit.timestamp,
                               {"similarity": float(sims[i]), "passage": float(i + 1)})
            out.append(as_part(pu, level + 1))
        return out

    def episode(self, row: int, q: np.ndarray, qi: int) -> list[RetrievedUnit]:
        """Parts of episode ``row`` (level 1): its messages by descending cosine to the query, each
        followed by its passages."""
        rows = self.bank.epi["msgs"][row]
        rows = rows[rows >= 0]
        if len(rows) == 0:
            return []
        sims = self.bank.msg["x"][rows].astype(np.float64) @ q.astype(np.float64)
        out: list[RetrievedUnit] = []
        for i in np.lexsort((rows, -sims)):
            out += self.message(int(rows[i]), q, qi, 1, float(sims[i]))
        return out
