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


# ---- the partition state's blocks (``state.py``) ---------------------------------------------------


def theme_sums(x: np.ndarray, rows: np.ndarray, labels: np.ndarray, row_off: np.ndarray, kept) -> tuple:
    """``state.theme_sums`` in one C++ pass (``csrc/cpu/partition.cpp``) when x is C-contiguous float64,
    else the NumPy steps of ``reference.theme_sums``."""
    from .reference import theme_sums as numpy_steps
    from .state import _Kept

    if not (x.dtype == np.float64 and x.flags.c_contiguous):
        return numpy_steps(x, rows, labels, row_off, kept)
    nb, d = len(row_off) - 1, x.shape[1]
    if kept is None:
        kept = _Kept(
            np.zeros(nb + 1, np.int64),
            np.zeros(0, np.int64),
            np.zeros((0, d)),
            np.zeros(0, bool),
            np.zeros(nb, np.int64),
        )
    i64 = lambda a: np.ascontiguousarray(a, dtype=np.int64)  # noqa: E731
    return _c().theme_blocks(
        x,
        i64(rows),
        i64(labels),
        i64(row_off),
        i64(kept.theme_off),
        i64(kept.theme_label),
        np.ascontiguousarray(kept.theme_sum, dtype=np.float64),
        np.ascontiguousarray(kept.keep, dtype=bool),
        i64(kept.tail),
    )


def top2_blocks(unit: np.ndarray, theme_off: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``state.top2_blocks`` in one C++ call."""
    return _c().top2_blocks(
        np.ascontiguousarray(unit, dtype=np.float64), np.ascontiguousarray(theme_off, dtype=np.int64)
    )


def top2_update(
    unit: np.ndarray, theme_off: np.ndarray, fresh: np.ndarray, prev_idx: np.ndarray, prev_cos: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """``state.top2_update`` in one C++ call."""
    return _c().top2_update(
        np.ascontiguousarray(unit, dtype=np.float64),
        np.ascontiguousarray(theme_off, dtype=np.int64),
        np.ascontiguousarray(fresh, dtype=bool),
        np.ascontiguousarray(prev_idx, dtype=np.int64),
        np.ascontiguousarray(prev_cos, dtype=np.float64),
    )


def f_blocks(
    norms: np.ndarray, counts: np.ndarray, s: np.ndarray, theme_off: np.ndarray, n: np.ndarray, eps: float
) -> np.ndarray:
    """``state.f_blocks`` in one C++ pass (``csrc/cpu/rows.cpp``)."""
    i64 = lambda a: np.ascontiguousarray(a, dtype=np.int64)  # noqa: E731
    return _c().f_blocks(
        np.ascontiguousarray(norms, dtype=np.float64),
        i64(counts),
        np.ascontiguousarray(s, dtype=np.float64),
        i64(theme_off),
        i64(n),
        float(eps),
    )
