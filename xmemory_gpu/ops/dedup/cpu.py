"""C++ CPU path of ``dedup_block`` (``xmemory_gpu._C``, ``csrc/cpu/dedup.cpp``): the block's loop in
one pass without the GIL where rows and the gram are float32, else the NumPy steps of ``reference``
(the kernel reads float32 only; a cast would change the cosines)."""

from __future__ import annotations

import numpy as np

from ... import _C
from . import reference


def dedup_block(
    inner: np.ndarray,
    rows: np.ndarray,
    best: np.ndarray,
    arg: np.ndarray,
    threshold: float,
    tie_tol: float,
    base: int,
) -> np.ndarray:
    if rows.dtype == np.float32 and inner.dtype == np.float32:
        return _C.dedup_block(inner, rows, best, arg, threshold, tie_tol, base)
    return reference.dedup_block(inner, rows, best, arg, threshold, tie_tol, base)
