"""The row helpers in C++ (``xmemory_gpu._C``, ``csrc/cpu/rows.cpp``): one pass each where the inputs
are of the types the kernel takes, else the NumPy steps of ``reference`` (the same bits)."""

from __future__ import annotations

import numpy as np

from ... import _C
from . import reference


def add_rows_in_order(sums: np.ndarray, group: np.ndarray, x: np.ndarray, rows: np.ndarray) -> None:
    if (
        sums.dtype == np.float64
        and sums.flags.c_contiguous
        and sums.flags.writeable
        and sums.flags.aligned
        and x.dtype in (np.float32, np.float64)
        and x.flags.aligned
        and group.dtype.kind in "iu"
        and rows.dtype.kind in "iu"
        and not np.may_share_memory(sums, x)
    ):
        _C.add_rows(
            sums,
            group.astype(np.int64, copy=False),
            np.ascontiguousarray(x),
            rows.astype(np.int64, copy=False),
        )
        return  # (rows of the sums themselves: the NumPy steps, which read x before writing, as add.at copies)
    reference.add_rows_in_order(sums, group, x, rows)


def live_rows(
    items: list[tuple[np.ndarray, np.ndarray, int]], d: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    if all(
        a.dtype == np.bool_ and s.dtype == np.float64 and a.flags.c_contiguous and s.flags.c_contiguous
        for a, s, _ in items
    ):
        return _C.live_rows(items, int(d))
    return reference.live_rows(items, d)


def take_rows2(a: np.ndarray, b: np.ndarray, take: np.ndarray) -> np.ndarray:
    if a.dtype == b.dtype and a.dtype.kind in "biuf" and a.ndim == b.ndim >= 1 and a.shape[1:] == b.shape[1:]:
        return _C.take_rows2(
            np.ascontiguousarray(a), np.ascontiguousarray(b), np.ascontiguousarray(take, dtype=np.int64)
        )
    return reference.take_rows2(a, b, take)


def row_norms(x: np.ndarray, keepdims: bool) -> np.ndarray:
    out = _C.row_norms(x, False, False)
    return out[:, None] if keepdims else out


def segment_sums(v: np.ndarray, off: np.ndarray) -> np.ndarray:
    return _C.segment_sums(v, off)


def unit_rows(x: np.ndarray, dtype: np.dtype) -> np.ndarray:
    return _C.row_norms(x, True, dtype == np.float32)


def dot4_gram(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return _C.dot4_gram(a, b)


def drift_runs(x: np.ndarray, hard: np.ndarray, min_messages: int, drift_threshold: float) -> np.ndarray:
    if x.dtype == np.float32 and type(min_messages) is int:
        return _C.drift_runs(np.ascontiguousarray(x), hard, min_messages, float(drift_threshold))
    return reference.drift_runs(x, hard, min_messages, drift_threshold)
