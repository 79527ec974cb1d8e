"""float64 NumPy reference for the kNN family: the oracle for every fast path.

Cosine similarity of unit rows (zero rows have similarity 0 with everything); exact top-k within
each CSR segment, self excluded; ties broken by the lower row id; rows with fewer than k
neighbours padded with -1 / -inf; ``drop_nonpositive`` turns edges with similarity <= 0 into padding.
"""

from __future__ import annotations

import numpy as np


def normalize64(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, dtype=np.float64)
    n = np.linalg.norm(x, axis=1, keepdims=True)
    return np.divide(x, n, out=np.zeros_like(x), where=n > 0)


def topk_rows(
    sims: np.ndarray, cols: np.ndarray, k: int, drop_nonpositive: bool
) -> tuple[np.ndarray, np.ndarray]:
    """Per row of ``sims [r, c]`` the k largest (ties to the lower column id) as (ids from ``cols``, sims)."""
    r = sims.shape[0]
    idx = np.full((r, k), -1, dtype=np.int32)
    out = np.full((r, k), -np.inf, dtype=np.float32)
    if sims.shape[1] == 0:
        return idx, out
    sims = sims.astype(np.float32)  # rank at output precision: ties are ties however the dots were summed
    order = np.lexsort((np.broadcast_to(cols, sims.shape), -sims), axis=1)[:, :k]
    top = np.take_along_axis(sims, order, axis=1)
    ids = cols[order]
    valid = np.isfinite(top) & ((top > 0) if drop_nonpositive else True)
    m = order.shape[1]
    idx[:, :m] = np.where(valid, ids, -1)
    out[:, :m] = np.where(valid, top, -np.inf)
    return idx, out


def knn_graph(
    x: np.ndarray, offsets: np.ndarray, k: int, *, drop_nonpositive: bool = False
) -> tuple[np.ndarray, np.ndarray]:
    """x [N, d] (normalised here), offsets [B+1] -> idx [N, k] int32 global rows, sim [N, k] float32."""
    xn = normalize64(x)
    n = xn.shape[0]
    idx = np.full((n, k), -1, dtype=np.int32)
    sim = np.full((n, k), -np.inf, dtype=np.float32)
    for b in range(len(offsets) - 1):
        s, e = int(offsets[b]), int(offsets[b + 1])
        if e - s < 2:
            continue
        g = xn[s:e] @ xn[s:e].T
        np.fill_diagonal(g, -np.inf)  # self excluded
        idx[s:e], sim[s:e] = topk_rows(g, np.arange(s, e), k, drop_nonpositive)
    return idx, sim


def knn_search(
    q: np.ndarray,
    q_offsets: np.ndarray,
    x: np.ndarray,
    x_offsets: np.ndarray,
    k: int,
    *,
    drop_nonpositive: bool = False,
) -> tuple[np.ndarray, np.ndarray]:
    """Queries of segment b against rows of segment b of x -> idx [Q, k] global rows of x, sim [Q, k]."""
    qn, xn = normalize64(q), normalize64(x)
    idx = np.full((qn.shape[0], k), -1, dtype=np.int32)
    sim = np.full((qn.shape[0], k), -np.inf, dtype=np.float32)
    for b in range(len(q_offsets) - 1):
        qs, qe = int(q_offsets[b]), int(q_offsets[b + 1])
        xs, xe = int(x_offsets[b]), int(x_offsets[b + 1])
        if qe == qs:
            continue
        idx[qs:qe], sim[qs:qe] = topk_rows(qn[qs:qe] @ xn[xs:xe].T, np.arange(xs, xe), k, drop_nonpositive)
    return idx, sim
