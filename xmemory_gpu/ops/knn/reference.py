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


def dots(a: np.ndarray, b: np.ndarray, rows: int = 16) -> np.ndarray:
    """a [m, d] @ b [n, d].T in float64, each entry summed in one order that depends on d alone (the
    products of a pair, then NumPy's sum along them), so a pair's cosine is the same bits wherever
    it sits: in a graph, a search, a block of any shape (BLAS products are not: their tiles add in
    orders that depend on the shapes). ``rows`` rows of a at a time: memory O(rows * n * d)."""
    out = np.empty((a.shape[0], b.shape[0]))
    for i in range(0, a.shape[0], rows):
        out[i : i + rows] = (a[i : i + rows, None, :] * b[None, :, :]).sum(axis=2)
    return out


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
        g = dots(xn[s:e], xn[s:e])
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
        idx[qs:qe], sim[qs:qe] = topk_rows(dots(qn[qs:qe], xn[xs:xe]), np.arange(xs, xe), k, drop_nonpositive)
    return idx, sim


# ---- ``KnnGraph``'s upkeep steps (``graph.py``) ------------------------------------------------------


def topk_per_row(
    sims: np.ndarray, ids: np.ndarray, k: int, drop_nonpositive: bool
) -> tuple[np.ndarray, np.ndarray]:
    """``topk_rows`` with ids given per row: sims, ids [r, c] (id -1 with sim -inf for an empty
    entry) -> the k best of each row, ties to the lower id, as (idx [r, k] int32, sim [r, k] float32)."""
    r = sims.shape[0]
    idx = np.full((r, k), -1, dtype=np.int32)
    out = np.full((r, k), -np.inf, dtype=np.float32)
    s32 = sims.astype(np.float32)  # rank at output precision, as topk_rows
    order = np.lexsort((ids, -s32), axis=1)[:, :k]
    top, top_ids = np.take_along_axis(s32, order, axis=1), np.take_along_axis(ids, order, axis=1)
    valid = np.isfinite(top) & (top_ids >= 0) & ((top > 0) if drop_nonpositive else True)
    m = order.shape[1]
    idx[:, :m] = np.where(valid, top_ids, -1)
    out[:, :m] = np.where(valid, top, -np.inf)
    return idx, out


def topk_select(
    sims: np.ndarray, ids: np.ndarray, k: int, drop_nonpositive: bool
) -> tuple[np.ndarray, np.ndarray]:
    """The k best of each row of float32 ``sims [r, c]`` (ids ``[c]`` shared or ``[r, c]``, -1 empty), ties
    to the lower id, as (idx [r, k] int32, sim [r, k] float32)."""
    if ids.ndim == 1:
        return topk_rows(sims.astype(np.float64), ids, k, drop_nonpositive)
    return topk_per_row(sims, ids, k, drop_nonpositive)


def offer_rows(
    dots: np.ndarray,
    others: np.ndarray,
    cand: np.ndarray,
    idx: np.ndarray,
    sim: np.ndarray,
    drop_nonpositive: bool,
) -> None:
    """Rows ``others`` [O] take any of the rows ``cand`` [C] that beat their k-th neighbour (``dots``
    [O, C] float32 their similarities), in place in the lists ``idx`` [cap, k] int32 / ``sim`` [cap, k]
    float32; a listed candidate comes back with its fresh similarity."""
    s = dots.astype(np.float64)
    if drop_nonpositive:
        s[s <= 0] = -np.inf
    kth = sim[others, -1].astype(np.float64)
    kth_id = idx[others, -1]
    beats = (s > kth[:, None]) | (
        (s == kth[:, None]) & (cand[None, :] < np.where(kth_id < 0, np.iinfo(np.int32).max, kth_id)[:, None])
    )
    hit = np.flatnonzero(beats.any(axis=1))
    if hit.size == 0:
        return
    is_cand = np.zeros(idx.shape[0] + 1, dtype=bool)  # the last entry, False, is what id -1 reads
    is_cand[cand] = True
    rows = others[hit]
    listed = idx[rows].astype(np.int64)
    stale = (listed < 0) | is_cand[listed]
    ids = np.concatenate([np.where(stale, -1, listed), np.broadcast_to(cand, (rows.size, cand.size))], axis=1)
    sims = np.concatenate([np.where(stale, -np.inf, sim[rows].astype(np.float64)), s[hit]], axis=1)
    idx[rows], sim[rows] = topk_per_row(sims, ids, idx.shape[1], drop_nonpositive)
