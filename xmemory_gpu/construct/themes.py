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

Here: the session steps over a batch (``grow_themes``). One ``PartitionState`` over the attached
nodes of every memory of the batch is kept for the whole run: ``extend`` adds each step's attached
nodes, ``apply`` each round's splits or merges, so no round rebuilds it from labels. A memory's
candidates are scored against its own block only, so its themes never depend on what else is in
the batch. ``theme_state.py`` holds one memory's themes as columns (attach, split, merge, the theme
graph), ``theme_split.py`` the split proposals.
"""

from __future__ import annotations

import numpy as np

from ..config import ThemeConfig
from ..ops.objective import Candidates, PartitionState, score_candidates
from .theme_split import split_proposals
from .theme_state import ThemeState


def grow_themes(states: list[ThemeState], steps: list[list[np.ndarray]], cfg: ThemeConfig, *, backend: str = "auto") -> None:
    """Attach memory b's rows ``steps[b][s]`` at step s (a session), for every memory at once; after
    each step split the overfull themes and merge the small ones of the memories that took it."""
    part: PartitionState | None = None
    for step in range(max((len(s) for s in steps), default=0)):
        active = [b for b, rows in enumerate(steps) if step < len(rows)]
        for b in active:
            states[b].attach(steps[b][step], cfg)
        if not active or not (cfg.split or cfg.merge):
            continue
        part = _synced(part, states)
        if cfg.split:
            split_overfull(states, part, active, cfg, backend=backend)
        if cfg.merge:
            merge_small(states, part, active, cfg, backend=backend)


def _synced(part: PartitionState | None, states: list[ThemeState]) -> PartitionState:
    """The f(P) state over each memory's attached rows (default eps, as scoring always used): built
    once, then extended by the rows attached since."""
    if part is None:
        x = np.concatenate([s.x[: s.n_attached] for s in states])
        labels = np.concatenate([s.label[: s.n_attached] for s in states])
        return PartitionState.from_labels(x, labels, np.cumsum([0] + [s.n_attached for s in states]))
    have = np.diff(part.offsets)
    part.extend({b: (s.x[have[b] : s.n_attached], s.label[have[b] : s.n_attached]) for b, s in enumerate(states)
                 if s.n_attached > have[b]})
    return part


def split_overfull(states: list[ThemeState], part: PartitionState, active: list[int], cfg: ThemeConfig, *,
                   backend: str = "auto", max_rounds: int = 8) -> None:
    """Split every theme above the cap by its best-scoring proposal (even when all lower f(P): the
    cap is hard), all memories in one proposal and one scoring call per round."""
    for _ in range(max_rounds):
        todo = [(b, t) for b in active for t in states[b].live_ids() if states[b].count(t) > cfg.size_cap]
        if not todo:
            return
        members = [part.members_of(part.theme_row(b, t)) for b, t in todo]  # global rows, ascending
        moff = np.cumsum([0] + [len(m) for m in members])
        xm = np.concatenate([states[b].x[m - part.offsets[b]] for (b, _), m in zip(todo, members)])
        proposals = split_proposals(
            xm, moff, ks=cfg.split_ks, n_init=cfg.split_n_init, seed=cfg.seed, cc_threshold=cfg.cc_threshold
        )
        items, owner = [], []
        for j, ((b, t), m, props) in enumerate(zip(todo, members, proposals)):
            if not props:  # e.g. identical vectors: cut in order so the cap still holds
                parts = -(-len(m) // cfg.size_cap)
                props = [np.minimum(np.arange(len(m)) * parts // len(m), parts - 1)]
            for lab in props:
                items.append((b, [t], [m[lab == c] for c in range(int(lab.max()) + 1)]))
                owner.append(j)
        f_after = score_candidates(part, Candidates.from_lists(part, items), backend=backend)
        best: dict[int, int] = {}
        for c, j in enumerate(owner):
            if j not in best or f_after[c] > f_after[best[j]]:
                best[j] = c
        edits = []
        for j, c in best.items():
            b, t = todo[j]
            groups = items[c][2]
            edits.append((b, [t], groups, states[b].split(t, [g - part.offsets[b] for g in groups])))
        part.apply(edits)


def merge_small(states: list[ThemeState], part: PartitionState, active: list[int], cfg: ThemeConfig, *,
                backend: str = "auto") -> None:
    """Merge tiny themes, and pairs closer than ``merge_pair_threshold``, into one of their nearest
    themes (theme kNN graph) when f(P) rises; the best gains first, a theme in one merge per call."""
    items, pairs = [], []
    for b in active:
        s = states[b]
        s.sync_graph()
        seen = set()
        for t in s.live_ids():
            n_t = s.count(t)
            for j, sim in s.nearest_themes(t, max(cfg.merge_candidates, 1) if n_t <= cfg.tiny_size else s.k):
                key = (min(t, j), max(t, j))
                if key in seen or n_t + s.count(j) > cfg.size_cap:
                    continue
                if n_t <= cfg.tiny_size or sim >= cfg.merge_pair_threshold:
                    seen.add(key)
                    rows = np.concatenate([part.members_of(part.theme_row(b, t)), part.members_of(part.theme_row(b, j))])
                    items.append((b, [t, j], [rows]))
                    pairs.append((b, t, j))
    if not items:
        return
    gains = score_candidates(part, Candidates.from_lists(part, items), backend=backend) - part.f[[p[0] for p in pairs]]
    used: set[tuple[int, int]] = set()
    edits = []
    for c in np.argsort(-gains, kind="stable"):
        b, t, j = pairs[c]
        if gains[c] <= 0:
            break
        if (b, t) in used or (b, j) in used:
            continue
        used.update({(b, t), (b, j)})
        edits.append((b, [t, j], items[c][2], [states[b].merge(t, j)]))
    part.apply(edits)


__all__ = ["ThemeState", "grow_themes", "merge_small", "split_overfull"]
