"""C++ CPU path of ``feature_counts``: each text's words from ``text.word_runs`` (the word rule, in
Python), their bigrams, BLAKE2b-64 and the counts in ``xmemory_gpu._C.FeatureCounter``, each feature's
bucket remembered per dim (at most 2**20 features per dim)."""

from __future__ import annotations

import os
import threading

import numpy as np

from ...text import word_runs

_COUNTERS: dict[int, object] = {}  # dim -> its FeatureCounter (the bucket memo lives there)
_LOCK = threading.Lock()
_INHERITED: list[object] = []  # a forked child's copies, never used (their lock may be held) nor freed


def _after_fork_in_child() -> None:
    """A child forked while another thread counted inherits a held lock: it starts with new counters."""
    global _LOCK
    _INHERITED.extend(_COUNTERS.values())
    _COUNTERS.clear()
    _LOCK = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def feature_counts(texts: list[str], dim: int) -> np.ndarray:
    from ... import _C

    with _LOCK:
        counter = _COUNTERS.get(dim)
        if counter is None:
            counter = _COUNTERS[dim] = _C.FeatureCounter(dim)
    return counter.counts(list(map(word_runs, texts)))
