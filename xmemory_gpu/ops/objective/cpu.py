"""C++ CPU path for the objective family (``xmemory_gpu._C``, OpenMP across segments/candidates).

``x`` is read in place when it is float32 or float64 (no float64 copy of a float32 input): the
kernel accumulates row norms, theme sums and centroid dots in float64.
"""

from __future__ import annotations

import numpy as np


def _c():
    from ... import _C

    return _C


def _real(x) -> np.ndarray:
    """float32 stays float32 (read in place by the kernel); anything else becomes float64."""
    x = np.asarray(x)
    return np.ascontiguousarray(x, dtype=np.float32 if x.dtype == np.float32 else np.float64)


def partition_objective_counted(
    x: np.ndarray, labels: np.ndarray, offsets: np.ndarray, *, eps: float = 1e-8
) -> tuple[np.ndarray, int]:
    """(f [B] float64 per CSR segment, the number of rows of x holding a NaN or inf): the kernel's one
    pass over x is also the finiteness check (the dispatcher names the rows when the count is not 0)."""
    f, nonfinite = _c().partition_objective(
        _real(x), np.asarray(labels, np.int64), np.asarray(offsets, np.int64), eps
    )
    return f, int(nonfinite)


def partition_objective(
    x: np.ndarray, labels: np.ndarray, offsets: np.ndarray, *, eps: float = 1e-8
) -> np.ndarray:
    """f [B] float64 per CSR segment (labels local to each segment)."""
    return partition_objective_counted(x, labels, offsets, eps=eps)[0]


def score_candidates(state, cands) -> np.ndarray:
    """f after each candidate (incremental closed form over the kept theme sums and top-2)."""
    return _c().score_candidates(
        state.x,
        state.theme_sum,
        state.theme_count,
        state.theme_offsets,
        state.offsets,
        state.top_idx,
        state.top_cos,
        cands.memory,
        cands.rem_offsets,
        cands.rem_rows,
        cands.add_offsets,
        cands.group_offsets,
        cands.members,
        state.eps,
    )
