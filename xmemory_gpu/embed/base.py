"""The embedder interface: texts in, unit-norm float32 rows out."""

from __future__ import annotations

from typing import Protocol

import numpy as np


class Embedder(Protocol):
    name: str  # recorded in the store; a store only accepts its own embedder
    dim: int

    def encode(self, texts: list[str]) -> np.ndarray:
        """[n, dim] float32 unit-norm rows (zero rows only for empty text); [0, dim] for no texts."""
        ...

    def warm_up(self) -> None:
        """Prepare the first ``encode`` so it costs what the next ones do. Default: encode one text
        (here, now); an embedder with a model to load may start loading it in the background and
        return at once (``SentenceTransformerEmbedder``)."""
        self.encode(["warm up"])


def warm_up(embedder: Embedder) -> None:
    """``embedder.warm_up()``, or one ``encode`` for an embedder without it (any object with
    ``encode``, ``dim`` and ``name`` is an embedder)."""
    fn = getattr(embedder, "warm_up", None)
    if callable(fn):
        fn()
    else:
        embedder.encode(["warm up"])


def encode_queries(embedder: Embedder, texts: list[str]) -> np.ndarray:
    """Search queries' rows: the embedder's ``encode_queries`` when it has a cheaper query path
    (sentence-transformers: no batch-invariance filler), else ``encode``."""
    fn = getattr(embedder, "encode_queries", None)
    return fn(texts) if fn is not None else embedder.encode(texts)


def normalize_rows(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, dtype=np.float32)
    n = np.linalg.norm(x, axis=1, keepdims=True)
    return np.divide(x, n, out=np.zeros_like(x), where=n > 0)


def distinct_texts(texts: list[str]) -> tuple[list[str], np.ndarray]:
    """(the distinct texts, sorted; inverse [n]: each input's position among them), so each text
    is embedded once and repeats share its row."""
    uniq, inverse = np.unique(np.asarray(list(texts), dtype=object), return_inverse=True)
    return [str(t) for t in uniq], inverse.reshape(-1)


def same_length_batches(
    lengths: np.ndarray, batch_size: int, max_tokens: int | None = None
) -> list[tuple[int, np.ndarray]]:
    """(token count, rows) of each batch, rows of one token count each, longest first: nothing is
    padded, so a row does not depend on the rest of its call. A batch holds at most ``batch_size``
    rows, or with ``max_tokens`` at most ``max(batch_size, max_tokens // token count)``."""
    out = []
    for n_tokens in np.unique(lengths)[::-1]:
        same = np.flatnonzero(lengths == n_tokens)
        size = batch_size if max_tokens is None else max(batch_size, max_tokens // max(int(n_tokens), 1))
        out += [(int(n_tokens), same[s : s + size]) for s in range(0, len(same), size)]
    return out
