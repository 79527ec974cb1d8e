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
from .contract import accepts_feature_counts, feature_inputs

_ALL = {"reference": "reference", "cpu": "cpu"}
register("feature_counts", __name__, _ALL, accepts=accepts_feature_counts)


def feature_counts(texts: Sequence[str], dim: int, *, backend: str = "auto") -> np.ndarray:
    """[n, dim] float64 signed counts of each text's word unigrams and bigrams. Bad input raises
    ``ValueError`` (``dim``) or ``TypeError`` (a text that is not a str) naming the argument."""
    texts = feature_inputs(texts, dim)
    name = resolve_backend(
        "feature_counts", host_backend(backend) if backend == "auto" else backend, on_cuda=False
    )
    return implementation("feature_counts", name)(texts, int(dim))


__all__ = ["feature_counts"]
