"""Theme construction guided by f(P), batched across memories.

Semantic nodes arrive session by session. Each attaches to the theme with the most similar
centroid (cosine >= ``attach_threshold``, or >= ``lenient_floor`` when that theme is below the
cap) or starts a new theme. After each session, for all memories at once: every theme above the
cap is split by the proposal (k-means k = 2..4 and connected components) that maximises f(P),
repeated until no theme exceeds the cap (the cap is a hard constraint, so a split happens even
when every proposal lowers f); then tiny themes, and pairs of themes whose centroids are closer
than ``merge_pair_threshold``, are merged into one of their nearest themes (from the theme kNN
graph) when the merge raises f(P). Theme ids are stable; a split or merge creates new ids whose
lineage names their parents. A node counts as reassigned when a split moves it out of the largest
part, or a merge moves it out of the larger theme (membership, not ids).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..config import ThemeConfig
from ..ops.knn.graph import KnnGraph
from ..ops.objective import Candidates, PartitionState, score_candidates, split_proposals


@dataclass
class ThemeState:
    """Themes of one memory under construction. Rows of ``x`` are its semantic nodes in order."""

    x: np.ndarray  # [n, d] float32 unit rows (all nodes of the memory, attached or not)
    k: int
    drop_nonpositive: bool
    label: np.ndarray = field(init=False)  # [n] theme id, -1 = not attached yet
    sums: dict[int, np.ndarray] = field(default_factory=dict)  # theme id -> float64 sum
    parents: dict[int, list[int]] = field(default_factory=dict)  # lineage
    reassigned: np.ndarray = field(init=False)
    n_attached: int = 0
    n_splits: int = 0
    n_merges: int = 0
    next_id: int = 0
    graph: KnnGraph = field(init=False)
    row_of: dict[int, int] = field(default_factory=dict)  # theme id -> graph row
    id_of_row: dict[int, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        n, d = self.x.shape
        self.label = np.full(n, -1, dtype=np.int64)
        self.reassigned = np.zeros(n, dtype=bool)
        self.graph = KnnGraph(np.zeros((0, d), np.float32), self.k, drop_nonpositive=self.drop_nonpositive)

    @classmethod
    def restore(cls, x: np.ndarray, n_attached: int, theme_ids: np.ndarray, label_rows: np.ndarray,
                parents: dict[int, list[int]], next_id: int, k: int, drop_nonpositive: bool) -> ThemeState:
        """The state of a stored memory, to grow it with the same attach / split / merge code.

        x [n, d]: all nodes (the first ``n_attached`` already in themes); theme_ids [K] stable ids
        of the stored themes; label_rows [n_attached] each attached node's theme row."""
        st = cls(x, k, drop_nonpositive)
        label_rows = np.asarray(label_rows, np.int64)
        for r, t in enumerate(np.asarray(theme_ids, np.int64).tolist()):
            rows = np.flatnonzero(label_rows == r)
            st.label[rows] = t
            st.sums[t] = x[rows].astype(np.float64).sum(axis=0)
            st.parents[t] = list(parents.get(t, []))
            (row,) = st.graph.insert(st._unit(st.sums[t])[None, :])
            st.row_of[t], st.id_of_row[int(row)] = int(row), t
        st.n_attached = int(n_attached)
        st.next_id = max([int(next_id), *[t + 1 for t in st.sums]])
        return st

    # -- theme bookkeeping -------------------------------------------------------------------
    def ids(self) -> list[int]:
        return list(self.sums)

    def members(self, t: int) -> np.ndarray:
        return np.flatnonzero(self.label == t)

    def count(self, t: int) -> int:
        return int(np.count_nonzero(self.label == t))

    @staticmethod
    def _unit(v: np.ndarray) -> np.ndarray:
        n = np.linalg.norm(v)
        return (v / n if n > 0 else v).astype(np.float32)

    def _new_theme(self, rows: np.ndarray, parents: list[int]) -> int:
        t = self.next_id
        self.next_id += 1
        self.label[rows] = t
        self.sums[t] = self.x[rows].astype(np.float64).sum(axis=0)
        self.parents[t] = parents
        (row,) = self.graph.insert(self._unit(self.sums[t])[None, :])
        self.row_of[t], self.id_of_row[int(row)] = int(row), t
        return t

    def _drop_theme(self, t: int) -> None:
        self.graph.remove(np.array([self.row_of.pop(t)]))
        del self.sums[t]

    # -- construction steps ----------------------------------------------------------------
    def attach(self, i: int, cfg: ThemeConfig) -> None:
        """Attach node i to the nearest theme or start a new one."""
        xi = self.x[i]
        best, best_cos = -1, -np.inf
        if self.sums:
            ids = self.ids()
            s = np.stack([self.sums[t] for t in ids])
            norms = np.linalg.norm(s, axis=1)
            cos = (s @ xi.astype(np.float64)) / np.where(norms > 0, norms, 1.0)
            j = int(np.argmax(cos))
            best, best_cos = ids[j], float(cos[j])
        below_cap = best >= 0 and self.count(best) < cfg.size_cap
        if best >= 0 and (best_cos >= cfg.attach_threshold or (below_cap and best_cos >= cfg.lenient_floor)):
            self.label[i] = best
            self.sums[best] += xi
            self.graph.update(np.array([self.row_of[best]]), self._unit(self.sums[best])[None, :])
        else:
            self._new_theme(np.array([i]), [])
        self.n_attached = max(self.n_attached, i + 1)

    def split(self, t: int, groups: list[np.ndarray]) -> None:
        largest = max(range(len(groups)), key=lambda g: len(groups[g]))
        self._drop_theme(t)
        for g, rows in enumerate(groups):
            if g != largest:
                self.reassigned[rows] = True
            self._new_theme(rows, [t])
        self.n_splits += 1

    def merge(self, a: int, b: int) -> None:
        ma, mb = self.members(a), self.members(b)
        self.reassigned[ma if len(ma) < len(mb) else mb] = True
        self._drop_theme(a)
        self._drop_theme(b)
        self._new_theme(np.concatenate([ma, mb]), [a, b])
        self.n_merges += 1

    def nearest_themes(self, t: int, n: int) -> list[tuple[int, float]]:
        idx, sim = self.graph.neighbors(self.row_of[t])
        return [(self.id_of_row[int(r)], float(s)) for r, s in zip(idx[:n], sim[:n]) if r >= 0]


def _partition(states: list[ThemeState]) -> tuple[PartitionState, np.ndarray]:
    """The f(P) state over the attached nodes of every memory; returns it and the row offsets."""
    offs = np.zeros(len(states) + 1, dtype=np.int64)
    np.cumsum([s.n_attached for s in states], out=offs[1:])
    d = states[0].x.shape[1]
    x = np.concatenate([s.x[: s.n_attached] for s in states]) if offs[-1] else np.zeros((0, d), np.float32)
    labels = np.concatenate([s.label[: s.n_attached] for s in states]) if offs[-1] else np.zeros(0, np.int64)
    return PartitionState.from_labels(x, labels, offs), offs


def split_overfull(states: list[ThemeState], cfg: ThemeConfig, *, backend: str = "auto", max_rounds: int = 8) -> None:
    """Split every theme above the cap, all memories in one batched proposal and scoring call per round."""
    for _ in range(max_rounds):
        todo = [(b, t) for b, s in enumerate(states) for t in s.ids() if s.count(t) > cfg.size_cap]
        if not todo:
            return
        state, offs = _partition(states)
        members = [states[b].members(t) for b, t in todo]
        moff = np.zeros(len(todo) + 1, dtype=np.int64)
        np.cumsum([len(m) for m in members], out=moff[1:])
        xm = np.concatenate([states[b].x[m] for (b, _), m in zip(todo, members)])
        proposals = split_proposals(
            xm, moff, ks=cfg.split_ks, n_init=cfg.split_n_init, seed=cfg.seed, cc_threshold=cfg.cc_threshold
        )
        items, owner = [], []
        for j, ((b, t), m, props) in enumerate(zip(todo, members, proposals)):
            if not props:  # e.g. identical vectors: cut in order so the cap still holds
                parts = -(-len(m) // cfg.size_cap)
                props = [np.minimum(np.arange(len(m)) * parts // len(m), parts - 1)]
            for lab in props:
                groups = [m[lab == c] for c in range(int(lab.max()) + 1)]
                items.append((b, [t], [g + offs[b] for g in groups]))
                owner.append((j, groups))
        f_after = score_candidates(state, Candidates.from_lists(state, items), backend=backend)
        best: dict[int, int] = {}
        for c, (j, _) in enumerate(owner):
            if j not in best or f_after[c] > f_after[best[j]]:
                best[j] = c
        for j, c in best.items():
            b, t = todo[j]
            states[b].split(t, owner[c][1])


def merge_small(states: list[ThemeState], cfg: ThemeConfig, *, backend: str = "auto") -> None:
    """Merge tiny themes (and near-identical pairs) into a nearest theme when f(P) rises; one batched call."""
    state, offs = _partition(states)
    items, pairs = [], []
    for b, s in enumerate(states):
        seen = set()
        for t in s.ids():
            n_t = s.count(t)
            for j, sim in s.nearest_themes(t, max(cfg.merge_candidates, 1) if n_t <= cfg.tiny_size else s.k):
                key = (min(t, j), max(t, j))
                if key in seen or n_t + s.count(j) > cfg.size_cap:
                    continue
                if n_t <= cfg.tiny_size or sim >= cfg.merge_pair_threshold:
                    seen.add(key)
                    rows = np.concatenate([s.members(t), s.members(j)]) + offs[b]
                    items.append((b, [t, j], [rows]))
                    pairs.append((b, t, j))
    if not items:
        return
    gains = score_candidates(state, Candidates.from_lists(state, items), backend=backend) - state.f[[p[0] for p in pairs]]
    used: set[tuple[int, int]] = set()
    for c in np.argsort(-gains, kind="stable"):
        b, t, j = pairs[c]
        if gains[c] <= 0:
            break
        if (b, t) in used or (b, j) in used:
            continue
        used.update({(b, t), (b, j)})
        states[b].merge(t, j)
