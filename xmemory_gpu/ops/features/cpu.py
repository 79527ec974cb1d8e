"""C++ CPU path of ``feature_counts`` (``xmemory_gpu._C.FeatureCounter``: BLAKE2b-64 and the word
rule in C++, each feature's bucket remembered per dim)."""

from __future__ import annotations

import threading

import numpy as np

_COUNTERS: dict[int, object] = {}  # dim -> its FeatureCounter (the bucket memo lives there)
_LOCK = threading.Lock()


def feature_counts(texts: list[str], dim: int) -> np.ndarray:
    from ... import _C

    with _LOCK:
        counter = _COUNTERS.get(dim)
        if counter is None:
            counter = _COUNTERS[dim] = _C.FeatureCounter(dim)
    return counter.counts(texts)
