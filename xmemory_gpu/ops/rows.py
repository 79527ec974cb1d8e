"""Row-wise helpers on host arrays (the construction's exact-bit arithmetic)."""

from __future__ import annotations

import numpy as np

from .devices import host


def row_norms(x: np.ndarray, *, keepdims: bool = False) -> np.ndarray:
    """Euclidean norms of the rows of a real x [m, d]: [m] (or [m, 1]). The bits of
    ``np.linalg.norm(x, axis=1)`` (the same square, sum and root), without its argument handling,
    which costs more than the arithmetic on the small blocks of the theme stage."""
    return np.sqrt(np.add.reduce(x * x, axis=1, keepdims=keepdims))


def unit_rows(x) -> np.ndarray:
    """[n, d] float64 rows scaled to unit norm (zero rows stay zero); x any real array, host or device."""
    x = np.asarray(host(x), dtype=np.float64)
    norms = row_norms(x, keepdims=True)
    return np.divide(x, norms, out=np.zeros_like(x), where=norms > 0)


def row_sum_in_order(m: np.ndarray) -> np.ndarray:
    """The rows of m [r, d] (r >= 1) added one after another: the bits of ``np.cumsum(m, axis=0)[-1]``
    without its [r, d] output (10x faster at a theme's size). NumPy reduces a C-contiguous array over
    its rows with the row as the inner loop, one row at a time; a single column is contiguous and
    would be summed pairwise, so it keeps the cumulative sum (tests/test_themes.py checks both)."""
    m = np.ascontiguousarray(m)
    return np.add.reduce(m, axis=0) if m.shape[1] > 1 else np.cumsum(m, axis=0)[-1]
