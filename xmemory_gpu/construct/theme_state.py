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
and at the end) brings up to date the graphs of every memory whose themes changed since. A graph
synced before (or restored with its memory) pays for what changed: the themes opened or moved are
searched against every live centroid, every other list keeps its unchanged entries and takes the
changed themes that beat them, and is searched again only where fewer than k of those rank at or
above its old k-th entry (a row outside the old list ranks below it); a memory where most
themes changed is built whole, all of them in one ragged ``knn_graph`` call (each memory a CSR
segment of its live centroids in opening order). One kernel computes every product, one fixed FMA
chain per pair: the graph is a function of the centroids alone, bit for bit on every batch, ISA
and path (``tests/test_grow_graphs.py``). A memory of one user's long history holds thousands of
themes, where a rebuild per write would cost the square of them.
"""

from __future__ import annotations

import numpy as np

from ..config import ThemeConfig
from ..ops.attach import attach_rows_batch
from ..ops.devices import host
from ..ops.knn import knn_graph, knn_search
from ..ops.rows import add_rows_in_order, live_rows, unit_rows

ZERO_COSINE = 1e-6  # float32 cosines at most this are zero (rounding: about 2**-24 x sum |u_i v_i| <= 6e-8)


def to_repair(sim: np.ndarray) -> np.ndarray:
    """[n] bool: the kNN lists marked to be searched again (no entries, similarities NaN): ``forget``
    marks a statement's list that held a forgotten row, and a theme's list where the theme lost a
    member or the list held a theme left empty."""
    return np.isnan(sim).all(axis=1) if sim.ndim == 2 and sim.shape[1] else np.zeros(len(sim), bool)


def kept_graph_fits(
    idx: np.ndarray,
    sim: np.ndarray,
    n: int,
    k: int,
    drop: bool,
    zero: float = 0.0,
    repair: np.ndarray | None = None,
) -> bool:
    """Whether stored kNN lists (idx, sim [n, k]) are a graph built with this k and edge rule, so
    upkeep may start from them: the shape is [n, k]; with ``drop`` no edge is at most ``zero``; without
    it every list is full (min(k, n - 1) entries: only the dropping rule leaves one short). The empty
    lists of an older ``forget`` fail the second test, a graph of another rule one of them.
    ``repair`` [n] bool: lists to be searched again (``forget.forget`` marks them), left out of the
    tests; when every list is to be searched again the graph is not kept."""
    if idx.shape != (n, k) or sim.shape != (n, k):
        return False
    if n < 2:
        return True
    if repair is not None:
        if repair.all():
            return False
        idx, sim = idx[~repair], sim[~repair]
    held = idx >= 0
    if drop:
        return bool(held.any()) and not bool((sim[held] <= zero).any())
    return bool((held.sum(axis=1) == min(k, n - 1)).all())


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
        self.graph_x: np.ndarray | None = None  # [L, d] float32: the unit centroids the graph was built on
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
        graph: tuple[np.ndarray, np.ndarray] | None = None,
    ) -> ThemeState:
        """The state of a stored memory, to grow it with the same attach / split / merge code.

        x [n, d]: all nodes (the first ``n_attached`` already in themes); theme_ids [K] stable ids
        of the stored themes; label_rows [n_attached] each attached node's theme row; ``graph``: the
        stored theme graph (idx [K, k], sim [K, k]), kept as the synced graph so that the next
        ``sync_graphs`` pays for what changed. A theme's sum is its members' rows added in ascending
        order, as construction adds them, so the restored centroids are the ones the stored graph
        was built on (a store written before merges summed in that order may differ in the last
        bit of a merged theme's centroid: its lists may then differ where two cosines tie to
        float32 rounding)."""
        st = cls(x, k, drop_nonpositive)
        label_rows = np.asarray(label_rows, np.int64)
        order = np.argsort(label_rows, kind="stable")  # each theme's members, ascending
        bounds = np.searchsorted(label_rows[order], np.arange(len(theme_ids) + 1))
        st._open_all(np.asarray(theme_ids, np.int64), order, bounds, parents)
        st.n_attached = int(n_attached)
        st.next_id = max([int(next_id), *[t + 1 for t in st.slot_of]])
        n_th = len(theme_ids)
        redo = None if graph is None else to_repair(np.asarray(graph[1]))
        if (
            graph is not None
            and n_th
            and kept_graph_fits(graph[0], graph[1], n_th, k, drop_nonpositive, ZERO_COSINE, repair=redo)
        ):
            st.graph_slots = np.arange(n_th, dtype=np.int64)
            st.graph_idx = np.asarray(graph[0], np.int32).copy()
            st.graph_sim = np.asarray(graph[1], np.float32).copy()
            st.graph_x = unit_rows(st.sums[:n_th], dtype=np.float32)
            # a list to be searched again counts as a moved centroid: searched whole, offered to the rest
            st.graph_x[redo] = np.nan
            st.graph_idx[redo], st.graph_sim[redo] = -1, -np.inf
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

    def _open_all(self, ids: np.ndarray, order: np.ndarray, bounds: np.ndarray, parents: dict) -> None:
        """``_open`` of theme ``ids[r]`` over rows ``order[bounds[r]:bounds[r + 1]]`` for each r, in
        that order, on a state with no theme yet: the same sums (each one's rows added in order, in
        float64), slots, labels and capacity, without a Python step per theme."""
        n = len(ids)
        while len(self.ids) < n:
            self._grow()
        counts = np.diff(bounds)
        if n:
            rows = order[bounds[0] : bounds[-1]]
            self.sums[:n] = 0.0  # each theme's rows added one after the other, in float64, as ``_open`` does
            add_rows_in_order(self.sums[:n], np.repeat(np.arange(n), counts), self.x, rows)
            self.label[rows] = np.repeat(ids, counts)
        self.counts[:n], self.ids[:n], self.alive[:n] = counts, ids, True
        self.n_slots = n
        self.parents = [list(parents.get(t, [])) for t in ids.tolist()]
        self.slot_of = {t: s for s, t in enumerate(ids.tolist())}
        self.graph_stale = True

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
        slot = self._open(np.union1d(ma, mb), [a, b])  # ascending, as a restored theme sums them
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
        ids = self.ids[order]
        by_id = np.argsort(ids, kind="stable")
        at = np.minimum(np.searchsorted(ids, self.label, sorter=by_id), max(len(ids) - 1, 0))
        theme_of = by_id[at].astype(np.int32) if len(ids) else np.zeros(len(self.label), np.int32)
        if len(self.label) and (not len(ids) or not np.array_equal(ids[theme_of], self.label)):
            raise ValueError("every node must be attached to a live theme before final()")
        return (
            ids.tolist(),
            [self.parents[s] for s in order],
            theme_of,
            self.graph_idx.copy(),
            self.graph_sim.copy(),
        )

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
    """Bring the theme graph of every stale state up to date: exact cosine top-k among its live
    centroids (in opening order; ties to the earlier opened), all states with the same k and edge
    rule together, each memory a segment. A state whose graph was synced before pays for what
    changed since (``_upkeep``: the themes opened or whose centroid moved, and the lists that a merge
    with them cannot settle); one where most themes changed is built whole (one ragged
    ``knn_graph`` call for all of them). Either way the lists and their float bits are the ones the
    whole build gives (the same kernel computes every product)."""
    groups: dict[tuple[int, bool, int], list[ThemeState]] = {}
    for st in states:
        if st.graph_stale:
            groups.setdefault((st.k, st.drop_nonpositive, st.sums.shape[1]), []).append(st)
    for (k, drop, d), group in groups.items():
        slots, off, sums = live_rows([(st.alive, st.sums, st.n_slots) for st in group], d)
        # unit_rows is row by row: one call over all memories' sums gives each row's bits of its own call
        x = unit_rows(sums, dtype=np.float32)
        bounds = off.tolist()
        parts = [
            (st, slots[bounds[b] : bounds[b + 1]], x[bounds[b] : bounds[b + 1]]) for b, st in enumerate(group)
        ]
        plans = [_upkeep_plan(st, sl, xb) for st, sl, xb in parts]
        whole = [b for b, plan in enumerate(plans) if plan is None]
        if whole:
            w_x = np.concatenate([parts[b][2] for b in whole])
            w_off = np.concatenate([[0], np.cumsum([len(parts[b][1]) for b in whole])]).astype(np.int64)
            idx, sim = knn_graph(w_x, w_off, k, drop_nonpositive=drop, backend=backend)
            idx, sim = host(idx), np.asarray(host(sim), np.float32)
            local = np.where(
                idx >= 0, idx - np.repeat(w_off[:-1], np.diff(w_off)).astype(np.int32)[:, None], -1
            ).astype(np.int32)
            for j, b in enumerate(whole):
                st, sl, xb = parts[b]
                lo, hi = int(w_off[j]), int(w_off[j + 1])
                _set_graph(st, sl, xb, local[lo:hi], sim[lo:hi], drop)
        inc = [b for b, plan in enumerate(plans) if plan is not None]
        if inc:
            _upkeep([parts[b] for b in inc], [plans[b] for b in inc], k, drop, backend)


def _set_graph(
    st: ThemeState, slots: np.ndarray, x: np.ndarray, idx: np.ndarray, sim: np.ndarray, drop: bool
):
    """Store a synced graph (rows: ``slots``; ``x`` their float32 unit centroids) on ``st``."""
    if drop:  # a cosine within float32 rounding of zero is not an edge (entries sort descending: the tail)
        near_zero = sim <= ZERO_COSINE
        idx, sim = np.where(near_zero, -1, idx).astype(np.int32), np.where(near_zero, -np.inf, sim)
    st.graph_slots, st.graph_x = slots, x
    st.graph_idx, st.graph_sim = idx.astype(np.int32, copy=False), np.asarray(sim, np.float32)
    st.graph_stale = False


UPKEEP_SHARE = 0.25  # more changed themes than this share of the live ones: the graph is built whole
UPKEEP_MIN = 64  # fewer live themes than this: built whole (one ragged launch costs less than the plan)


def _upkeep_plan(st: ThemeState, slots: np.ndarray, x: np.ndarray):
    """(changed positions, the clean positions, their old lists as new positions with the closed or
    changed entries dropped, their sims, and each one's bound ``(sim, position)``: the old k-th entry,
    position -1 where it closed, sim -inf where the list was short) of a state whose last synced
    graph can be kept, or None to build it whole. A clean list takes the changed rows that beat what
    it kept; it is exact when k of its candidates rank at or above its bound (every row outside the
    old list ranks below the old k-th), else ``_upkeep`` searches it whole."""
    old_slots = st.graph_slots
    if st.graph_x is None or len(old_slots) == 0 or len(slots) < max(UPKEEP_MIN, 1):
        return None
    pos_old = np.searchsorted(slots, old_slots)  # where each old row is now (if still live)
    live_old = (pos_old < len(slots)) & (slots[np.minimum(pos_old, len(slots) - 1)] == old_slots)
    old_at = np.full(len(slots), -1, np.int64)  # each live row's old row (-1: opened since)
    old_at[pos_old[live_old]] = np.flatnonzero(live_old)
    same = old_at >= 0
    same[same] = (x[same].view(np.int32) == st.graph_x[old_at[same]].view(np.int32)).all(axis=1)
    changed = np.flatnonzero(~same)
    if len(changed) + int((~live_old).sum()) > UPKEEP_SHARE * len(slots):
        return None
    new_pos = np.append(np.where(live_old, pos_old, -1), -1)  # old row -> new position (-1: closed, none)
    touched = np.zeros(len(old_slots) + 1, bool)  # old rows closed or changed (index -1 reads False)
    touched[:-1] = ~live_old
    touched[old_at[changed[old_at[changed] >= 0]]] = True
    clean = np.flatnonzero(same)
    lists = st.graph_idx[old_at[clean]].astype(np.int64)
    sims = st.graph_sim[old_at[clean]]
    gone = touched[lists]  # entries closed or changed: dropped (a changed row is offered again)
    full = (lists >= 0).all(axis=1)  # a short list held every edge there was
    last = lists[:, -1] if lists.shape[1] else np.full(len(clean), -1, np.int64)
    bound_sim = np.where(full, sims[:, -1] if sims.shape[1] else 0.0, -np.inf).astype(np.float32)
    bound_pos = np.where(full, new_pos[last], len(slots))
    return (
        changed,
        clean,
        np.where(gone | (lists < 0), -1, new_pos[lists]),
        np.where(gone | (lists < 0), -np.inf, sims).astype(np.float32),
        bound_sim,
        bound_pos,
    )


def _search_whole(
    x_all: np.ndarray, base: np.ndarray, rows: list[np.ndarray], k: int, drop: bool, backend: str
):
    """Each memory's ``rows`` (positions) searched against all its live rows, itself dropped: (ids
    [R, k] global rows, sims [R, k]) in one ``knn_search`` call."""
    q = np.concatenate([r + base[b] for b, r in enumerate(rows)]).astype(np.int64)
    if not len(q):
        return np.zeros((0, k), np.int64), np.zeros((0, k), np.float32)
    si, ss = knn_search(
        x_all[q], _offsets([len(r) for r in rows]), x_all, base, k + 1, drop_nonpositive=drop, backend=backend
    )
    si, ss = host(si), np.asarray(host(ss), np.float32)
    not_self = si != q[:, None]
    pick = np.argsort(~not_self, axis=1, kind="stable")[:, :k]  # the first k that are not the row itself
    si, ss = np.take_along_axis(si, pick, 1), np.take_along_axis(ss, pick, 1)
    gone = ~np.take_along_axis(not_self, pick, 1)
    return np.where(gone, -1, si), np.where(gone, -np.inf, ss).astype(np.float32)


def _offsets(counts) -> np.ndarray:
    return np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)


def _upkeep(parts: list[tuple], plans: list[tuple], k: int, drop: bool, backend: str) -> None:
    """The kept graphs brought up to date, all states in two or three ``knn_search`` calls: the
    changed rows whole against every live row (self dropped); the clean rows against the changed
    ones, each merged into what its kept list keeps (ties to the lower position, as ``knn_graph``);
    then the clean lists whose merge fell short of their bound searched whole."""
    xs = [xb for _, _, xb in parts]
    n_of = [len(xb) for xb in xs]
    base = _offsets(n_of)
    x_all = np.concatenate(xs)
    changed = [p[0] for p in plans]
    clean = [p[1] for p in plans]
    si, ss = _search_whole(x_all, base, changed, k, drop, backend)
    cq = np.concatenate([c + base[b] for b, c in enumerate(clean)]).astype(np.int64)
    cx = np.concatenate([c + base[b] for b, c in enumerate(changed)]).astype(np.int64)
    if len(cq) and len(cx):
        ci, cs = knn_search(
            x_all[cq],
            _offsets([len(c) for c in clean]),
            x_all[cx],
            _offsets([len(c) for c in changed]),
            k,
            drop_nonpositive=drop,
            backend=backend,
        )
        ci, cs = host(ci), np.asarray(host(cs), np.float32)
        ci = np.where(ci >= 0, cx[np.maximum(ci, 0)], -1)
    else:
        ci, cs = np.full((len(cq), 0), -1, np.int64), np.zeros((len(cq), 0), np.float32)
    row_b = np.repeat(np.arange(len(parts)), [len(c) for c in clean])
    cat = lambda j, empty: np.concatenate([p[j] for p in plans]) if len(cq) else empty  # noqa: E731
    kept_i = cat(2, np.zeros((0, k), np.int64)).astype(np.int64)
    kept_i = np.where(kept_i >= 0, kept_i + base[row_b][:, None], -1)
    kept_s = cat(3, np.zeros((0, k), np.float32))
    bound_s = cat(4, np.zeros(0, np.float32))
    bound_p = cat(5, np.zeros(0, np.int64)) + base[row_b]
    ids, sims = np.concatenate([kept_i, ci], 1), np.concatenate([kept_s, cs], 1)
    order = np.lexsort((np.where(ids >= 0, ids, np.iinfo(np.int64).max), -sims), axis=1)[:, :k]
    mi, ms = np.take_along_axis(ids, order, 1), np.take_along_axis(sims, order, 1)
    if k and len(cq):  # exact where the k-th pick ranks at or above the old k-th (a short list: always)
        kth_i, kth_s = mi[:, -1], ms[:, -1]
        ok = (kth_i >= 0) & ((kth_s > bound_s) | ((kth_s == bound_s) & (kth_i <= bound_p)))
        ok |= np.isneginf(bound_s)
    else:
        ok = np.ones(len(cq), bool)
    co = _offsets([len(c) for c in clean])
    again = [clean[b][~ok[co[b] : co[b + 1]]] for b in range(len(parts))]
    ai, as_ = _search_whole(x_all, base, again, k, drop, backend)
    so, ao = _offsets([len(c) for c in changed]), _offsets([len(a) for a in again])
    for b, (st, sl, xb) in enumerate(parts):
        idx = np.full((n_of[b], k), -1, np.int64)
        sim = np.full((n_of[b], k), -np.inf, np.float32)
        idx[changed[b]], sim[changed[b]] = si[so[b] : so[b + 1]], ss[so[b] : so[b + 1]]
        idx[clean[b]], sim[clean[b]] = mi[co[b] : co[b + 1]], ms[co[b] : co[b + 1]]
        idx[again[b]], sim[again[b]] = ai[ao[b] : ao[b + 1]], as_[ao[b] : ao[b + 1]]
        idx = np.where(idx >= 0, idx - base[b], -1).astype(np.int32)
        _set_graph(st, sl, xb, idx, sim, drop)
