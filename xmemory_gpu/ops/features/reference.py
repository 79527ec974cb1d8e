"""``feature_counts`` in Python: the hashing embedder's rule as first written (a feature's bucket
remembered per dim, as the embedder did)."""

from __future__ import annotations

import hashlib

import numpy as np

from ...text import words

MAX_CACHED = 1 << 20  # features whose bucket is remembered per dim (about 200 MB at most)
_SIGNED: dict[int, dict[str, int]] = {}  # dim -> feature -> its bucket + 1, negated for sign -1


def signed_bucket(feature: str, dim: int) -> int:
    """The feature's bucket + 1, negative for sign -1."""
    memo = _SIGNED.setdefault(dim, {})
    v = memo.get(feature)
    if v is None:
        h = int.from_bytes(hashlib.blake2b(feature.encode(), digest_size=8).digest(), "little")
        v = h % dim + 1 if (h >> 63) & 1 else -(h % dim + 1)
        if len(memo) < MAX_CACHED:
            memo[feature] = v
    return v


def feature_counts(texts: list[str], dim: int) -> np.ndarray:
    rows, signed = [], []
    for r, text in enumerate(texts):
        w = words(text)
        feats = w + [a + " " + b for a, b in zip(w, w[1:])]
        signed.extend(signed_bucket(f, dim) for f in feats)
        rows.extend([r] * len(feats))
    v = np.array(signed, np.int64)
    flat = np.array(rows, np.int64) * dim + np.abs(v) - 1
    counts = np.bincount(flat, weights=np.sign(v).astype(np.float64), minlength=len(texts) * dim)
    return counts.reshape(len(texts), dim)
