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
    order = np.argsort(seg, kind="stable")
    q_off = csr_offsets(np.bincount(seg, minlength=len(offsets) - 1))
    data = level["x"] if x is None else x
    idx, sim = knn_search(q_x[order], q_off, data[: offsets[-1]], offsets, k, backend=backend)
    out_i, out_s = np.empty_like(idx), np.empty_like(sim)
    out_i[order], out_s[order] = idx, sim
    return out_i, out_s
