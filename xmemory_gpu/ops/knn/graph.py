"""``KnnGraph``: a cosine kNN graph kept exact under inserts, removals and moved vectors.

Rows keep their ids; removed rows become dead (no neighbours, in nobody's list) until
``compact()``. Every operation costs O(rows of the touched segment x d) per changed row:
never a from-scratch rebuild. Host NumPy state; similarities are float32 dot products of
unit rows, ties to the lower row id (as the reference).
"""

from __future__ import annotations

import numpy as np

from .. import _dispatch as dp
from .reference import topk_rows


def _unit(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, dtype=np.float32)
    if x.ndim != 2:
        raise ValueError(f"KnnGraph: vectors must be [n, d], got shape {x.shape}")
    n = np.linalg.norm(x, axis=1, keepdims=True)
    return np.divide(x, n, out=np.zeros_like(x), where=n > 0)


def _topk_per_row(sims: np.ndarray, ids: np.ndarray, k: int, drop_nonpositive: bool) -> tuple[np.ndarray, np.ndarray]:
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


class KnnGraph:
    def __init__(self, x: np.ndarray, k: int, *, segment_of: np.ndarray | None = None, drop_nonpositive: bool = False) -> None:
        self.k = dp.check_k("k", k)
        self.drop_nonpositive = drop_nonpositive
        self._x = _unit(dp.host(dp.check_float_matrix("x", x)))
        n = self._x.shape[0]
        self._seg = np.zeros(n, np.int64) if segment_of is None else np.asarray(segment_of, np.int64).copy()
        if self._seg.shape != (n,):
            raise ValueError(f"KnnGraph: segment_of must be [{n}], got {self._seg.shape}")
        self._alive = np.ones(n, dtype=bool)
        self._idx = np.full((n, self.k), -1, np.int32)
        self._sim = np.full((n, self.k), -np.inf, np.float32)
        self._n = n  # rows in use; the arrays above are buffers with spare capacity after inserts
        self._recompute(np.arange(n))

    # -- views -----------------------------------------------------------------------------------
    @property
    def n_rows(self) -> int:
        return self._n

    @property
    def x(self) -> np.ndarray:
        return self._x[: self._n]

    @property
    def alive(self) -> np.ndarray:
        return self._alive[: self._n]

    @property
    def idx(self) -> np.ndarray:
        return self._idx[: self._n]

    @property
    def sim(self) -> np.ndarray:
        return self._sim[: self._n]

    @property
    def segment_of(self) -> np.ndarray:
        return self._seg[: self._n]

    def neighbors(self, row: int) -> tuple[np.ndarray, np.ndarray]:
        return self._idx[row], self._sim[row]

    def to_arrays(self) -> tuple[np.ndarray, np.ndarray]:
        return self.idx.copy(), self.sim.copy()

    # -- internals -------------------------------------------------------------------------------
    def _peers(self, seg: int) -> np.ndarray:
        n = self._n
        return np.flatnonzero(self._alive[:n] & (self._seg[:n] == seg))

    def _dots(self, peers: np.ndarray, rows: np.ndarray) -> np.ndarray:
        """x[peers] @ x[rows].T [P, r]; for a segment that is most of the graph, one pass over all
        rows (no gather copy of the peers' vectors)."""
        if peers.size > self._n // 2:
            return (self._x[: self._n] @ self._x[rows].T)[peers]
        return self._x[peers] @ self._x[rows].T

    def _recompute(self, rows: np.ndarray) -> None:
        """Exact top-k of ``rows`` against the alive rows of their segments."""
        rows = np.asarray(rows, dtype=np.int64)
        for seg in np.unique(self._seg[rows]):
            r = rows[self._seg[rows] == seg]
            r = r[self._alive[r]]
            if r.size == 0:
                continue
            peers = self._peers(int(seg))
            sims = self._dots(peers, r).T
            sims[peers[None, :] == r[:, None]] = -np.inf  # self excluded
            self._idx[r], self._sim[r] = topk_rows(sims.astype(np.float64), peers, self.k, self.drop_nonpositive)

    def _offer(self, new_rows: np.ndarray) -> None:
        """Let alive rows not in ``new_rows`` take any of ``new_rows`` that beat their k-th neighbour."""
        for seg in np.unique(self._seg[new_rows]):
            cand = new_rows[(self._seg[new_rows] == seg) & self._alive[new_rows]]
            peers = self._peers(int(seg))
            keep = ~np.isin(peers, cand)
            others = peers[keep]
            if cand.size == 0 or others.size == 0:
                continue
            s = self._dots(peers, cand)[keep].astype(np.float64)
            if self.drop_nonpositive:
                s[s <= 0] = -np.inf
            kth = self._sim[others, -1].astype(np.float64)
            kth_id = self._idx[others, -1]
            beats = (s > kth[:, None]) | ((s == kth[:, None]) & (cand[None, :] < np.where(kth_id < 0, np.iinfo(np.int32).max, kth_id)[:, None]))
            hit = np.flatnonzero(beats.any(axis=1))
            if hit.size == 0:
                continue
            rows = others[hit]
            listed = self._idx[rows].astype(np.int64)
            stale = (listed < 0) | np.isin(listed, cand)  # a listed candidate comes back with its fresh sim
            ids = np.concatenate([np.where(stale, -1, listed), np.broadcast_to(cand, (rows.size, cand.size))], axis=1)
            sims = np.concatenate([np.where(stale, -np.inf, self._sim[rows].astype(np.float64)), s[hit]], axis=1)
            self._idx[rows], self._sim[rows] = _topk_per_row(sims, ids, self.k, self.drop_nonpositive)

    def _holders(self, rows: np.ndarray) -> np.ndarray:
        """Alive rows whose neighbour list contains any of ``rows``."""
        n = self._n
        return np.flatnonzero(self._alive[:n] & np.isin(self._idx[:n], rows).any(axis=1))

    # -- updates ---------------------------------------------------------------------------------
    def insert(self, new_x: np.ndarray, segment: int | np.ndarray = 0) -> np.ndarray:
        """Append rows (in ``segment``); returns their ids. Existing rows they enter are updated."""
        nx = _unit(dp.host(dp.check_float_matrix("new_x", new_x)))
        if nx.shape[1] != self._x.shape[1] and self.n_rows:
            raise ValueError(f"KnnGraph.insert: d = {nx.shape[1]}, graph has d = {self._x.shape[1]}")
        m, start = nx.shape[0], self._n
        rows = np.arange(start, start + m)
        if start + m > self._x.shape[0]:  # grow the buffers geometrically: amortised O(1) per row
            cap = max(start + m, 2 * self._x.shape[0], 16)
            grow = lambda a, fill: np.concatenate([a[:start], np.full((cap - start, *a.shape[1:]), fill, a.dtype)])  # noqa: E731
            self._x = grow(self._x.reshape(-1, nx.shape[1]), 0.0)
            self._seg, self._alive = grow(self._seg, -1), grow(self._alive, False)
            self._idx, self._sim = grow(self._idx, -1), grow(self._sim, -np.inf)
        self._x[rows] = nx
        self._seg[rows] = np.broadcast_to(np.asarray(segment, np.int64), (m,))
        self._alive[rows] = True
        self._n = start + m
        self._recompute(rows)
        self._offer(rows)
        return rows

    def remove(self, rows: np.ndarray) -> None:
        """Kill rows; rows that listed them are repaired exactly."""
        rows = dp.check_index("rows", rows, self._n, allow_missing=False)
        self._alive[rows] = False
        self._idx[rows] = -1
        self._sim[rows] = -np.inf
        self._recompute(self._holders(rows))

    def update(self, rows: np.ndarray, new_x: np.ndarray) -> None:
        """Move rows to new vectors; their lists, the lists that held them, and lists they now enter are fixed."""
        rows = dp.check_index("rows", rows, self._n, allow_missing=False)
        self._x[rows] = _unit(dp.host(dp.check_float_matrix("new_x", np.atleast_2d(dp.host(new_x)))))
        self._recompute(np.union1d(rows, self._holders(rows)))
        self._offer(rows)

    def compact(self) -> np.ndarray:
        """Drop dead rows and renumber; returns old_to_new [old n] (-1 for dropped rows)."""
        keep = np.flatnonzero(self.alive)
        old_to_new = np.full(self.n_rows, -1, dtype=np.int64)
        old_to_new[keep] = np.arange(keep.size)
        self._x, self._seg, self._alive = self._x[keep], self._seg[keep], self._alive[keep]
        idx = self._idx[keep]
        self._idx = np.where(idx >= 0, old_to_new[np.maximum(idx, 0)], -1).astype(np.int32)
        self._sim = self._sim[keep]
        self._n = keep.size
        return old_to_new
