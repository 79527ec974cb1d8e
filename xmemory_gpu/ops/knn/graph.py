"""``KnnGraph``: a cosine kNN graph kept exact under inserts, removals and moved vectors.

Rows keep their ids; removed rows become dead (no neighbours, in nobody's list) until
``compact()``. Every operation costs O(rows of the touched segment x d) per changed row:
never a from-scratch rebuild. Host NumPy state; similarities are float32 dot products of
unit rows (NumPy products), ties to the lower row id (as the reference). The selection of each
list and the offer of new rows to the others are the host ops ``topk_select`` and ``offer_rows``
(``reference``: NumPy; ``cpu``: one C++ call each, on those products, the lists the NumPy steps' to
the bit), run on the graph's ``backend``.
"""

from __future__ import annotations

import numpy as np

from ..backends import host_implementation
from ..checks import check_float_matrix, check_index, check_k, refuse
from ..devices import host
from .contract import accepts_offer_rows, accepts_topk_select


def _unit(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, dtype=np.float32)
    if x.ndim != 2:
        raise ValueError(f"KnnGraph: vectors must be [n, d], got shape {x.shape}")
    n = np.linalg.norm(x, axis=1, keepdims=True)
    return np.divide(x, n, out=np.zeros_like(x), where=n > 0)


def topk_select(
    sims: np.ndarray, ids: np.ndarray, k: int, drop_nonpositive: bool, *, backend: str = "auto"
) -> tuple[np.ndarray, np.ndarray]:
    """The k best of each row of float32 ``sims [r, c]`` (ids ``[c]`` shared or ``[r, c]``, -1 empty), ties
    to the lower id, as (idx [r, k] int32, sim [r, k] float32): the op ``topk_select`` (the sims are the
    caller's, so their bits are kept). Out-of-contract input raises ``ValueError``."""
    refuse(accepts_topk_select(sims, ids, k, drop_nonpositive))
    return host_implementation("topk_select", backend)(sims, ids, k, drop_nonpositive)


def _select(
    sims: np.ndarray, ids: np.ndarray, k: int, drop_nonpositive: bool, backend: str = "auto"
) -> tuple[np.ndarray, np.ndarray]:
    """``topk_select`` with the backend positional (the graph's own calls)."""
    return topk_select(sims, ids, k, drop_nonpositive, backend=backend)


def offer_rows(
    dots: np.ndarray,
    others: np.ndarray,
    cand: np.ndarray,
    idx: np.ndarray,
    sim: np.ndarray,
    drop_nonpositive: bool,
    *,
    backend: str = "auto",
) -> None:
    """The op ``offer_rows``: rows ``others`` [O] take any of the rows ``cand`` [C] that beat their k-th
    neighbour (``dots`` [O, C] their float32 similarities), in place in the lists ``idx`` [n, k] int32 /
    ``sim`` [n, k] float32. Out-of-contract input raises ``ValueError`` before any list is edited."""
    refuse(accepts_offer_rows(dots, others, cand, idx, sim, drop_nonpositive))
    host_implementation("offer_rows", backend)(dots, others, cand, idx, sim, drop_nonpositive)


class KnnGraph:
    def __init__(
        self,
        x: np.ndarray,
        k: int,
        *,
        segment_of: np.ndarray | None = None,
        drop_nonpositive: bool = False,
        backend: str = "auto",
    ) -> None:
        self.k = check_k("k", k)
        self.drop_nonpositive = drop_nonpositive
        self.backend = backend  # of the upkeep's ops ``topk_select`` and ``offer_rows`` (host only)
        self._x = _unit(host(check_float_matrix("x", x)))
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

    def _mask(self, rows: np.ndarray) -> np.ndarray:
        """[n + 1] bool, True at ``rows`` (the last entry, False, is what id -1 reads)."""
        m = np.zeros(self._n + 1, dtype=bool)
        m[rows] = True
        return m

    def _segments(self, rows: np.ndarray) -> list[tuple[int, np.ndarray]]:
        """(segment, its rows) of ``rows`` in ascending segment order; one pass when they share one."""
        seg = self._seg[rows]
        if seg.size == 0 or (seg == seg[0]).all():
            return [(int(seg[0]), rows)] if seg.size else []
        return [(int(g), rows[seg == g]) for g in np.unique(seg)]

    def _recompute(self, rows: np.ndarray) -> None:
        """Exact top-k of ``rows`` against the alive rows of their segments."""
        rows = np.asarray(rows, dtype=np.int64)
        for seg, r in self._segments(rows):
            r = r[self._alive[r]]
            if r.size == 0:
                continue
            peers = self._peers(seg)
            sims = self._dots(peers, r).T
            sims[peers[None, :] == r[:, None]] = -np.inf  # self excluded
            self._idx[r], self._sim[r] = _select(sims, peers, self.k, self.drop_nonpositive, self.backend)

    def _offer(self, new_rows: np.ndarray) -> None:
        """Let alive rows not in ``new_rows`` take any of ``new_rows`` that beat their k-th neighbour."""
        for seg, cand in self._segments(np.asarray(new_rows, dtype=np.int64)):
            cand = cand[self._alive[cand]]
            peers = self._peers(seg)
            is_cand = self._mask(cand)
            keep = ~is_cand[peers]
            others = peers[keep]
            if cand.size == 0 or others.size == 0:
                continue
            offer_rows(
                self._dots(peers, cand)[keep],
                others,
                cand,
                self._idx,
                self._sim,
                self.drop_nonpositive,
                backend=self.backend,
            )

    def _holders(self, rows: np.ndarray) -> np.ndarray:
        """Alive rows whose neighbour list contains any of ``rows``."""
        n = self._n
        return np.flatnonzero(self._alive[:n] & self._mask(rows)[self._idx[:n]].any(axis=1))

    # -- updates ---------------------------------------------------------------------------------
    def insert(self, new_x: np.ndarray, segment: int | np.ndarray = 0) -> np.ndarray:
        """Append rows (in ``segment``); returns their ids. Existing rows they enter are updated."""
        nx = _unit(host(check_float_matrix("new_x", new_x)))
        if nx.shape[1] != self._x.shape[1] and self.n_rows:
            raise ValueError(f"KnnGraph.insert: d = {nx.shape[1]}, graph has d = {self._x.shape[1]}")
        m, start = nx.shape[0], self._n
        rows = np.arange(start, start + m)
        if start + m > self._x.shape[0]:  # grow the buffers geometrically: amortised O(1) per row
            cap = max(start + m, 2 * self._x.shape[0], 16)

            def grow(a: np.ndarray, fill) -> np.ndarray:
                return np.concatenate([a[:start], np.full((cap - start, *a.shape[1:]), fill, a.dtype)])

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
        rows = check_index("rows", rows, self._n, allow_missing=False)
        self._alive[rows] = False
        self._idx[rows] = -1
        self._sim[rows] = -np.inf
        self._recompute(self._holders(rows))

    def update(self, rows: np.ndarray, new_x: np.ndarray) -> None:
        """Move rows to new vectors; their lists, the lists that held them, and lists they now enter are fixed."""
        rows = check_index("rows", rows, self._n, allow_missing=False)
        self._x[rows] = _unit(host(check_float_matrix("new_x", np.atleast_2d(host(new_x)))))
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
