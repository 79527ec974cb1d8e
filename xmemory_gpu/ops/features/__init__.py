"""Hashed word features: each text's signed counts of its word unigrams and bigrams in ``dim`` buckets,
the hashing embedder's arithmetic (``embed/hashing.py``). A feature's bucket and sign come from the
64-bit BLAKE2b of its UTF-8 bytes (``hashlib.blake2b(digest_size=8)``, little-endian): bucket h % dim,
sign +1 when bit 63 is set. Words are ``text.words`` (``text.word_runs``: the one word rule, in Python,
for both backends); counts are small integers, exact in any order. Host only: ``reference`` (Python, the rule
as first written) and ``cpu`` (the hashing and counting in C++, ``csrc/cpu/hashing.cpp``), equal to the
last bit. Both remember the buckets of up to 2**20 features per dim for the life of the process (a
few hundred MB at most)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..backends import host_backend, implementation, register, resolve_backend

_ALL = {"reference": "reference", "cpu": "cpu"}
register("feature_counts", __name__, _ALL)


def feature_counts(texts: Sequence[str], dim: int, *, backend: str = "auto") -> np.ndarray:
    """[n, dim] float64 signed counts of each text's word unigrams and bigrams. Bad input raises
    ``ValueError`` (``dim``) or ``TypeError`` (a text that is not a str) naming the argument."""
    if isinstance(dim, bool) or not isinstance(dim, (int, np.integer)) or not 2 <= dim < 2**31:
        raise ValueError(f"dim: expected an integer >= 2 and below 2**31, got {dim!r}")
    if isinstance(texts, str):
        raise TypeError("texts: expected a sequence of str, got one str")
    texts = list(texts)
    for i, t in enumerate(texts):
        if not isinstance(t, str):
            raise TypeError(f"texts[{i}]: expected a str, got {type(t).__name__}")
    name = resolve_backend(
        "feature_counts", host_backend(backend) if backend == "auto" else backend, on_cuda=False
    )
    return implementation("feature_counts", name)(texts, int(dim))


__all__ = ["feature_counts"]
