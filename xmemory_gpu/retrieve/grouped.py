"""One segment-restricted kNN search for a batch of queries given in any memory order."""

from __future__ import annotations

import numpy as np

from ..memory.bank import Level
from ..ops._arrays import csr_offsets
from ..ops.knn import knn_search


def search_by_memory(q_x: np.ndarray, mem_idx: np.ndarray, level: Level, k: int, *, x: np.ndarray | None = None,
                     backend: str = "auto") -> tuple[np.ndarray, np.ndarray]:
    """q_x [Q, d], mem_idx [Q] bank memory of each query; ``level``: the bank level searched (its
    ``x`` column, or ``x`` [rows, d] aligned with the level's arena). The kernel takes the level's
    segments directly (``Segments.kernel_view``); queries are grouped by segment for one
    ``knn_search`` call and come back in their order: idx [Q, k] int32 global rows, sim [Q, k] float32."""
    offsets, seg_of = level.seg.kernel_view()
    seg = seg_of[np.asarray(mem_idx, np.int64)]
    data = level["x"] if x is None else x
    # only the segments that hold a query go to the kernel (a lone query reads its memory's rows, not
    # the whole bank: checking and normalising every row per call made search O(bank))
    used = np.unique(seg)
    starts, ends = offsets[used], offsets[used + 1]
    sub_off = csr_offsets((ends - starts).tolist())
    shift_of = starts - sub_off[:-1]  # per used segment: its place in sub_x -> its global row
    if len(used) == 1:
        sub_x = data[int(starts[0]) : int(ends[0])]  # a view
    else:  # one gather of the used segments' rows
        sub_x = data[np.repeat(shift_of, ends - starts) + np.arange(int(sub_off[-1]))]
    local = np.searchsorted(used, seg)
    order = np.argsort(local, kind="stable")
    q_off = csr_offsets(np.bincount(local, minlength=len(used)))
    idx, sim = knn_search(q_x[order], q_off, sub_x, sub_off, k, backend=backend)
    idx = np.where(idx >= 0, idx + shift_of[local[order]][:, None], -1).astype(idx.dtype)
    out_i, out_s = np.empty_like(idx), np.empty_like(sim)
    out_i[order], out_s[order] = idx, sim
    return out_i, out_s
