"""A deterministic feature-hashing embedder (word unigrams and bigrams, signed buckets).

It needs no model: fast tests and an explicitly named fallback ("hashing-<dim>"). Quality is
far below a sentence encoder; never the default.
"""

from __future__ import annotations

import hashlib

import numpy as np

from ..text import words
from .base import normalize_rows


class HashingEmbedder:
    def __init__(self, dim: int = 64) -> None:
        if dim < 2:
            raise ValueError(f"HashingEmbedder: dim must be >= 2, got {dim}")
        self.dim = int(dim)
        self.name = f"hashing-{self.dim}"

    def _bucket(self, feature: str) -> tuple[int, float]:
        h = int.from_bytes(hashlib.blake2b(feature.encode(), digest_size=8).digest(), "little")
        return h % self.dim, 1.0 if (h >> 63) & 1 else -1.0

    def encode(self, texts: list[str]) -> np.ndarray:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for r, text in enumerate(texts):
            w = words(text)
            for f in w + [a + " " + b for a, b in zip(w, w[1:])]:
                col, sign = self._bucket(f)
                out[r, col] += sign
        return normalize_rows(out)
