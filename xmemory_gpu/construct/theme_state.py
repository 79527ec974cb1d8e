"""``ThemeState``: the themes of one memory under construction, as columns.

A slot per theme ever opened, in opening order: ``sums [cap, d]`` float64 (the float32 member rows
added in the order they joined), ``counts``, ``ids`` (stable theme ids), ``alive`` and the lineage
``parents``; the columns double when full. Slot order is opening order: ties go to the earliest
slot and the stored theme rows follow it. Each memory has its own columns rather than a segment of
a shared arena (``memory/segments.py``): attach works one memory at a time and a memory holds a
few hundred themes, so doubling is the whole of the bookkeeping. The batched f(P) scoring keeps
its own sums in its ``PartitionState`` (rows renormalised in float64, summed in row order); one
array for both would move attach decisions and the theme graph by rounding.

The theme kNN graph follows the centroids lazily: ``sync_graphs`` (before the merge step reads it,
and at the end) recomputes the graphs of every memory whose themes changed since, in one ragged
``knn_graph`` call (the kernel the semantic graphs use, on the dispatcher, any backend): a memory
is one CSR segment of its live centroids in opening order. A memory holds tens to a few hundred
themes, so the exact recompute costs less than the bookkeeping of per-event upkeep, and the
kernel's similarities are one fixed FMA chain per pair: the graph is a function of the centroids
alone, bit for bit on every batch and ISA.
"""

from __future__ import annotations

import numpy as np

from ..config import ThemeConfig
from ..ops.attach import attach_rows_batch
from ..ops.knn import knn_graph
from ..ops.rows import live_rows, unit_rows

ZERO_COSINE = 1e-6  # float32 cosines at most this are zero (rounding: about 2**-24 x sum |u_i v_i| <= 6e-8)


class ThemeState:
    """Themes of one memory under construction. Rows of ``x`` are its semantic nodes in order."""

    def __init__(self, x: np.ndarray, k: int, drop_nonpositive: bool) -> None:
        n, d = x.shape
        self.x = x  # [n, d] float32 unit rows (all nodes of the memory, attached or not)
        self.k = k
        self.label = np.full(n, -1, dtype=np.int64)  # [n] theme id, -1 = not attached yet
        self.reassigned = np.zeros(n, dtype=bool)  # [n]
        self.n_attached = self.n_splits = self.n_merges = self.next_id = 0
        self.n_slots = 0
        self.sums = np.zeros((16, d))  # [cap, d] float64
        self.counts = np.zeros(16, np.int64)  # [cap]
        self.ids = np.full(16, -1, np.int64)  # [cap] theme id of each slot
        self.alive = np.zeros(16, bool)  # [cap]
        self.parents: list[list[int]] = []  # [n_slots] lineage
        self.slot_of: dict[int, int] = {}  # live theme id -> slot
        self.drop_nonpositive = drop_nonpositive
        # The theme graph as of the last ``sync_graphs``: its rows are the live slots then, ascending.
        self.graph_slots = np.zeros(0, np.int64)  # [L]
        self.graph_idx = np.full((0, k), -1, np.int32)  # [L, k] positions in graph_slots (-1 none)
        self.graph_sim = np.full((0, k), -np.inf, np.float32)  # [L, k] cosines, descending
        self.graph_stale = True  # a centroid changed, or a theme opened or closed, since

    @classmethod
    def restore(
        cls,
        x: np.ndarray,
        n_attached: int,
        theme_ids: np.ndarray,
        label_rows: np.ndarray,
        parents: dict[int, list[int]],
        next_id: int,
        k: int,
        drop_nonpositive: bool,
    ) -> ThemeState:
        """The state of a stored memory, to grow it with the same attach / split / merge code.

        x [n, d]: all nodes (the first ``n_attached`` already in themes); theme_ids [K] stable ids
        of the stored themes; label_rows [n_attached] each attached node's theme row."""
        st = cls(x, k, drop_nonpositive)
        label_rows = np.asarray(label_rows, np.int64)
        for r, t in enumerate(np.asarray(theme_ids, np.int64).tolist()):
            st._open(np.flatnonzero(label_rows == r), list(parents.get(t, [])), theme_id=t)
        st.n_attached = int(n_attached)
        st.next_id = max([int(next_id), *[t + 1 for t in st.slot_of]])
        return st

    # -- columns -----------------------------------------------------------------------------
    def live_ids(self) -> list[int]:
        """Live theme ids in opening order."""
        n = self.n_slots
        return self.ids[:n][self.alive[:n]].tolist()

    def count(self, t: int) -> int:
        return int(self.counts[self.slot_of[t]])

    def members(self, t: int) -> np.ndarray:
        return np.flatnonzero(self.label == t)

    def _grow(self) -> None:
        cap = 2 * len(self.ids)
        pad = lambda a, fill: np.concatenate([a, np.full((cap - len(a), *a.shape[1:]), fill, a.dtype)])  # noqa: E731
        self.sums, self.counts, self.ids = pad(self.sums, 0.0), pad(self.counts, 0), pad(self.ids, -1)
        self.alive = pad(self.alive, False)

    def _open(self, rows: np.ndarray, parents: list[int], theme_id: int | None = None) -> int:
        """A theme over ``rows`` (its sum in that order); returns its slot."""
        if self.n_slots == len(self.ids):
            self._grow()
        s = self.n_slots
        self.n_slots += 1
        t = self.next_id if theme_id is None else theme_id
        if theme_id is None:
            self.next_id += 1
        self.sums[s] = self.x[rows].astype(np.float64).sum(axis=0)
        self.counts[s], self.ids[s], self.alive[s] = len(rows), t, True
        self.parents.append(parents)
        self.slot_of[t] = s
        self.label[rows] = t
        self.graph_stale = True
        return s

    def _close(self, t: int) -> None:
        self.alive[self.slot_of.pop(t)] = False
        self.graph_stale = True

    # -- construction steps ----------------------------------------------------------------
    def attach(self, rows: np.ndarray, cfg: ThemeConfig) -> None:
        """Attach ``rows`` in order, each to the theme with the most similar centroid (cosine >=
        ``attach_threshold``, or >= ``lenient_floor`` when that theme is below the cap; ties to the
        earliest opened) or to a new theme: ``ops.attach.attach_rows`` on these columns (one fixed
        order of the float64 products, so the decisions are the same on every ISA).
        ``attach_all`` does this for many memories in one call."""
        attach_all([self], [rows], cfg)

    def _attach_item(self, rows: np.ndarray) -> tuple | None:
        """The ``attach_rows_batch`` item of ``rows`` on these columns (grown to take them), None for no rows."""
        rows = np.asarray(rows, np.int64)
        if rows.size == 0:
            return None
        while len(self.ids) < self.n_slots + rows.size:
            self._grow()
        return (
            self.x,
            rows,
            self.sums,
            self.counts,
            self.alive,
            self.ids,
            self.label,
            self.n_slots,
            self.next_id,
        )

    def _attached(self, rows: np.ndarray, n_slots: int, next_id: int, joined: bool) -> None:
        """The bookkeeping after ``rows`` were attached: the opened slots' lineage and ids, the graph's staleness."""
        n0 = self.n_slots
        self.n_slots, self.next_id = n_slots, next_id
        for s in range(n0, n_slots):
            self.parents.append([])
            self.slot_of[int(self.ids[s])] = s
        if joined or n_slots > n0:
            self.graph_stale = True
        self.n_attached = max(self.n_attached, int(rows.max()) + 1)

    def split(self, t: int, groups: list[np.ndarray]) -> list[int]:
        """Replace theme t by one theme per group of node rows; returns the new ids. Nodes outside
        the largest group count as reassigned."""
        largest = max(range(len(groups)), key=lambda g: len(groups[g]))
        self._close(t)
        new = []
        for g, rows in enumerate(groups):
            if g != largest:
                self.reassigned[rows] = True
            slot = self._open(rows, [t])
            new.append(int(self.ids[slot]))
        self.n_splits += 1
        return new

    def merge(self, a: int, b: int, members: tuple[np.ndarray, np.ndarray] | None = None) -> int:
        """Replace themes a and b by one; returns its id. The smaller side counts as reassigned.
        ``members``: a's and b's node rows, ascending, where the caller holds them (the f(P) state's
        member lists), else found from the labels."""
        ma, mb = members if members is not None else (self.members(a), self.members(b))
        self.reassigned[ma if len(ma) < len(mb) else mb] = True
        self._close(a)
        self._close(b)
        self.n_merges += 1
        slot = self._open(np.concatenate([ma, mb]), [a, b])
        return int(self.ids[slot])

    # -- theme graph (brought up to date by ``sync_graphs``) -------------------------------------
    def nearest_themes(self, t: int, n: int) -> list[tuple[int, float]]:
        """Up to n (theme id, cosine) nearest to theme t, from the synced graph."""
        self._check_synced()
        r = int(np.searchsorted(self.graph_slots, self.slot_of[t]))
        idx, sim = self.graph_idx[r], self.graph_sim[r]
        return [
            (int(self.ids[self.graph_slots[int(p)]]), float(s)) for p, s in zip(idx[:n], sim[:n]) if p >= 0
        ]

    def _check_synced(self) -> None:
        if self.graph_stale:
            raise RuntimeError("ThemeState: the theme graph is stale; call sync_graphs first")

    def merge_pair_item(self) -> tuple:
        """This memory's ``ops.attach.merge_pairs_batch`` item, from the synced graph: the merge
        candidates are the slots (t, j) in the order the per-theme rule meets them: t in opening
        order offers its neighbours j in graph order (the first ``merge_candidates`` when t is tiny,
        else all), a pair counts when the two fit under the cap and t is tiny or the cosine reaches
        ``merge_pair_threshold``; each unordered pair once, as first met."""
        self._check_synced()
        return self.graph_slots, self.graph_idx, self.graph_sim, self.counts, self.ids, self.n_slots, self.k

    def final(self) -> tuple[list[int], list[list[int]], np.ndarray, np.ndarray, np.ndarray]:
        """The finished themes, in opening order: ids [K], their parents, each node's theme row
        ``theme_of [n]`` int32, and the compacted theme graph ``knn_idx, knn_sim [K, k]``.
        Every node must be attached. Syncs the graph when stale (``sync_graphs`` does many at once)."""
        sync_graphs([self])
        order = self.graph_slots
        ids = self.ids[order].tolist()
        row_of = {t: r for r, t in enumerate(ids)}
        theme_of = np.array([row_of[int(t)] for t in self.label], dtype=np.int32)
        return ids, [self.parents[s] for s in order], theme_of, self.graph_idx.copy(), self.graph_sim.copy()

    def lineage(self) -> dict[str, list[int]]:
        """Theme id -> parent ids of every theme ever opened with parents, in opening order."""
        return {str(int(self.ids[s])): p for s, p in enumerate(self.parents) if p}


def attach_all(states: list[ThemeState], rows: list[np.ndarray], cfg: ThemeConfig) -> None:
    """``states[b].attach(rows[b], cfg)`` for every b, in one ``attach_rows_batch`` call (one C++ call
    when built): the memories are independent, so each takes the decisions of its own call."""
    todo = [
        (st, item) for st, r in zip(states, rows, strict=True) if (item := st._attach_item(r)) is not None
    ]
    if not todo:
        return
    done = attach_rows_batch(
        [item for _, item in todo],
        attach_threshold=cfg.attach_threshold,
        lenient_floor=cfg.lenient_floor,
        size_cap=cfg.size_cap,
    )
    for (st, item), (n_slots, next_id, joined) in zip(todo, done):
        st._attached(item[1], n_slots, next_id, joined)


def sync_graphs(states: list[ThemeState], *, backend: str = "auto") -> None:
    """Recompute the theme graph of every stale state: exact cosine top-k among its live centroids
    (in opening order; ties to the earlier opened), all states with the same k and edge rule in one
    ragged ``knn_graph`` call, each memory a segment."""
    groups: dict[tuple[int, bool, int], list[ThemeState]] = {}
    for st in states:
        if st.graph_stale:
            groups.setdefault((st.k, st.drop_nonpositive, st.sums.shape[1]), []).append(st)
    for (k, drop, d), group in groups.items():
        slots, off, sums = live_rows([(st.alive, st.sums, st.n_slots) for st in group], d)
        # unit_rows is row by row: one call over all memories' sums gives each row's bits of its own call
        x = unit_rows(sums, dtype=np.float32)
        idx, sim = knn_graph(x, off, k, drop_nonpositive=drop, backend=backend)
        if (
            drop
        ):  # a cosine within float32 rounding of zero is not an edge (entries sort descending: the tail)
            near_zero = sim <= ZERO_COSINE
            idx, sim = np.where(near_zero, -1, idx), np.where(near_zero, -np.inf, sim).astype(np.float32)
        # positions local to each memory, for all memories at once; each state keeps row views
        local = np.where(
            idx >= 0, idx - np.repeat(off[:-1], np.diff(off)).astype(np.int32)[:, None], -1
        ).astype(np.int32)
        sim = np.asarray(sim, np.float32)
        bounds = off.tolist()
        for b, st in enumerate(group):
            st.graph_slots = slots[bounds[b] : bounds[b + 1]]
            st.graph_idx = local[bounds[b] : bounds[b + 1]]
            st.graph_sim = sim[bounds[b] : bounds[b + 1]]
            st.graph_stale = False
