"""One segment-restricted kNN search for a batch of queries given in any memory order."""

from __future__ import annotations

import numpy as np

from ..ops._arrays import csr_offsets
from ..ops.knn import knn_search


def search_by_memory(q_x: np.ndarray, mem_idx: np.ndarray, x: np.ndarray, x_offsets: np.ndarray, k: int, *,
                     backend: str = "auto") -> tuple[np.ndarray, np.ndarray]:
    """q_x [Q, d], mem_idx [Q] bank memory of each query; x [N, d] with CSR ``x_offsets`` [B+1].
    Queries are grouped by memory for one ``knn_search`` call; rows come back in the queries'
    order: idx [Q, k] int32 global rows of x, sim [Q, k] float32."""
    mem_idx = np.asarray(mem_idx, np.int64)
    order = np.argsort(mem_idx, kind="stable")
    q_off = csr_offsets(np.bincount(mem_idx, minlength=len(x_offsets) - 1))
    idx, sim = knn_search(q_x[order], q_off, x, x_offsets, k, backend=backend)
    out_i, out_s = np.empty_like(idx), np.empty_like(sim)
    out_i[order], out_s[order] = idx, sim
    return out_i, out_s
