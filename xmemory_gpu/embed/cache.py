"""An embedder that reuses the vectors of texts it has embedded before.

The live engine re-derives a memory after a delete or an update: its statements are extracted
again and would be embedded again, though nearly all of them are the same texts. ``CachedEmbedder``
keys each vector by a digest of its text (the text itself is not kept), so only the texts that
changed reach the encoder. For a batch-invariant encoder (the default, the hashing one) a reused row
is the row the encoder would give; for another it is the row an earlier batch gave (within that
encoder's batch tolerance). Bounded: least recently used rows leave past ``max_rows`` (50,000 rows of
d = 384 float32: 77 MB).
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from collections.abc import Sequence

import numpy as np


def _digest(text: str) -> bytes:
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()


class CachedEmbedder:
    """``inner`` with a text -> row cache; every other attribute is ``inner``'s.

    ``encode(texts) -> [n, dim] float32``: the cached rows of texts seen before, one ``inner.encode``
    call for the others (each distinct text once)."""

    def __init__(self, inner, max_rows: int = 50_000) -> None:
        self.inner = inner
        self.max_rows = int(max_rows)
        self._rows: OrderedDict[bytes, np.ndarray] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def __getattr__(self, name: str):
        return getattr(self.inner, name)

    def prime(self, texts: Sequence[str], x: np.ndarray) -> None:
        """Remember ``x[i]`` as the row of ``texts[i]`` (rows the encoder gave for those texts)."""
        x = np.asarray(x, np.float32)
        with self._lock:
            for t, row in zip(texts, x):
                self._put(_digest(t), row.copy())

    def _put(self, key: bytes, row: np.ndarray) -> None:
        self._rows[key] = row
        self._rows.move_to_end(key)
        while len(self._rows) > self.max_rows:
            self._rows.popitem(last=False)

    def encode(self, texts: Sequence[str], *args, **kwargs) -> np.ndarray:
        keys = [_digest(t) for t in texts]
        out: list[np.ndarray | None] = [None] * len(keys)
        missing: dict[bytes, list[int]] = {}
        with self._lock:
            for i, k in enumerate(keys):
                row = self._rows.get(k)
                if row is None:
                    missing.setdefault(k, []).append(i)
                else:
                    self._rows.move_to_end(k)
                    out[i] = row
        self.hits += len(keys) - sum(len(v) for v in missing.values())
        self.misses += len(missing)
        if missing:
            firsts = [v[0] for v in missing.values()]
            new = np.asarray(self.inner.encode([texts[i] for i in firsts], *args, **kwargs), np.float32)
            with self._lock:
                for (k, where), row in zip(missing.items(), new):
                    row = row.copy()  # not a view of the whole batch: the bound holds
                    self._put(k, row)
                    for i in where:
                        out[i] = row
        if not keys:
            return np.zeros((0, self.inner.dim), np.float32)
        return np.stack(out).astype(np.float32, copy=False)  # type: ignore[arg-type]


__all__ = ["CachedEmbedder"]
