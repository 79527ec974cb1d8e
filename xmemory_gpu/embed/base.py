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


def encode_queries(embedder: Embedder, texts: list[str]) -> np.ndarray:
    """Search queries' rows: the embedder's ``encode_queries`` when it has a cheaper query path
    (sentence-transformers: no batch-invariance filler), else ``encode``."""
    fn = getattr(embedder, "encode_queries", None)
    return fn(texts) if fn is not None else embedder.encode(texts)


def normalize_rows(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, dtype=np.float32)
    n = np.linalg.norm(x, axis=1, keepdims=True)
    return np.divide(x, n, out=np.zeros_like(x), where=n > 0)
