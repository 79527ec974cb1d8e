"""A deterministic feature-hashing embedder (word unigrams and bigrams, signed buckets).

It needs no model: fast tests and an explicitly named fallback ("hashing-<dim>"). Quality is
far below a sentence encoder; never the default. The counting is the host op
``ops.features.feature_counts`` (C++ when built, else its Python reference; the same counts).
"""

from __future__ import annotations

import numpy as np

from ..ops.features import feature_counts
from .base import normalize_rows


class HashingEmbedder:
    def __init__(self, dim: int = 64) -> None:
        if dim < 2:
            raise ValueError(f"HashingEmbedder: dim must be >= 2, got {dim}")
        self.dim = int(dim)
        self.name = f"hashing-{self.dim}"

    def encode(self, texts: list[str]) -> np.ndarray:
        """[n, dim] float32 unit rows: each text's signed counts of its word unigrams and bigrams
        (small integers, exact in any order), normalised."""
        return normalize_rows(feature_counts(texts, self.dim).astype(np.float32))
