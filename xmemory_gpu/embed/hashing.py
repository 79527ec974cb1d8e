"""A deterministic feature-hashing embedder (word unigrams and bigrams, signed buckets).

It needs no model: fast tests and an explicitly named fallback ("hashing-<dim>"). Quality is
far below a sentence encoder; never the default.
"""

from __future__ import annotations

import hashlib

import numpy as np

from ..text import words
from .base import normalize_rows

MAX_CACHED = 1 << 20  # features whose bucket is remembered (about 100 MB at most)


class HashingEmbedder:
    def __init__(self, dim: int = 64) -> None:
        if dim < 2:
            raise ValueError(f"HashingEmbedder: dim must be >= 2, got {dim}")
        self.dim = int(dim)
        self.name = f"hashing-{self.dim}"
        self._signed: dict[str, int] = {}  # feature -> its bucket + 1, negated for a negative sign

    def _bucket(self, feature: str) -> tuple[int, float]:
        h = int.from_bytes(hashlib.blake2b(feature.encode(), digest_size=8).digest(), "little")
        return h % self.dim, 1.0 if (h >> 63) & 1 else -1.0

    def _signed_bucket(self, feature: str) -> int:
        """``_bucket`` as one int (bucket + 1, negative for sign -1), remembered per feature."""
        v = self._signed.get(feature)
        if v is None:
            col, sign = self._bucket(feature)
            v = col + 1 if sign > 0 else -(col + 1)
            if len(self._signed) < MAX_CACHED:
                self._signed[feature] = v
        return v

    def encode(self, texts: list[str]) -> np.ndarray:
        """[n, dim] float32 unit rows: each text's signed counts of its word unigrams and bigrams
        (one counting pass for the batch; counts are small integers, exact in any order)."""
        rows, signed = [], []
        for r, text in enumerate(texts):
            w = words(text)
            feats = w + [a + " " + b for a, b in zip(w, w[1:])]
            signed.extend(map(self._signed_bucket, feats))
            rows.extend([r] * len(feats))
        v = np.array(signed, np.int64)
        flat = np.array(rows, np.int64) * self.dim + np.abs(v) - 1
        counts = np.bincount(flat, weights=np.sign(v).astype(np.float64), minlength=len(texts) * self.dim)
        return normalize_rows(counts.reshape(len(texts), self.dim).astype(np.float32))
