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

Here: the session steps over a batch in lockstep (``grow_themes``): step s of every memory that has
one runs together. One ``PartitionState`` over the attached nodes of every memory of the batch is
kept for the whole run: ``extend`` adds each step's attached nodes, ``apply`` each round's splits or
merges (every touched memory's block in one call), so no round rebuilds it from labels; each round's
split or merge candidates of all memories are one CSR batch and one scoring call. A memory's
candidates are scored against its own block only, so its themes never depend on what else is in
the batch. Every decision is the per-conversation rule's to the last tie (tests/test_theme_lockstep.py
keeps that path as the reference): the values a decision reads are computed with the operations and
shapes the per-memory code used. ``theme_state.py`` holds one memory's themes as columns (attach,
split, merge, the theme graph), ``theme_split.py`` the split proposals.
"""

from __future__ import annotations

import contextlib
import functools

import numpy as np

from ..config import ThemeConfig
from ..ops.attach import merge_pairs_batch
from ..ops.objective import Candidates, PartitionState, score_candidates
from .theme_memo import Held, HeldThemes
from .theme_split import split_proposals
from .theme_state import ThemeState, attach_all, sync_graphs


def grow_themes(
    states: list[ThemeState],
    steps: list[list[np.ndarray]],
    cfg: ThemeConfig,
    *,
    backend: str = "auto",
    hints: list[Held | None] | None = None,
    keep_state: bool = False,
) -> np.ndarray | None:
    """Attach memory b's rows ``steps[b][s]`` at step s (a session), for every memory at once; after
    each step split the overfull themes and merge the small ones of the memories that took it.
    NumPy's BLAS runs on one thread meanwhile (``_one_blas_thread``). Returns f(P) [B] float64 of
    each memory's final partition as the stage's state holds it, or None where the stage kept no
    state (no step split or merged), scored with another eps than ``cfg.eps``, or left a row
    unattached. ``hints[b]``: memory b's themes as its last growth left them (or None), read when
    the state is first built (the same state, without building it over every statement again or
    comparing every pair of unchanged themes again) and replaced, in place, by this growth's: one
    memory's whole state (``HeldThemes``), several memories' ``ThemeTop2``, or None where the stage
    kept no state. ``keep_state``: one memory whose state the caller keeps even when no step built it
    (a delete's growth): it is built here, so that the next growth finds it in ``hints``, and its f
    is returned (the caller would otherwise score the partition again with ``partition_objective``,
    whose sums run in another order: the two agree to a relative 1e-12)."""
    with _one_blas_thread():
        part = _grow(states, steps, cfg, backend, hints)
        stepped = part is not None
        if not stepped and keep_state and hints is not None and len(states) == 1 and (cfg.split or cfg.merge):
            part = _synced(None, states, hints)
        sync_graphs(states, backend=backend)
    # this growth's themes, or none: never an older state's (a delete forgot part of it)
    if hints is not None:
        if part is None:
            hints[:] = [None] * len(states)
        elif len(states) == 1:
            hints[:] = [HeldThemes(part.detached(), states[0].x[: states[0].n_attached])]
        else:
            hints[:] = [part.block_top2(b) for b in range(len(states))]
    if part is None or part.eps != cfg.eps or any(s.n_attached != len(s.x) for s in states):
        return None
    return np.array(part.f, np.float64)


def held_themes(state: ThemeState, cfg: ThemeConfig, hint: Held | None = None) -> HeldThemes | None:
    """One memory's f(P) state as its next growth builds it first (``_synced``: from its attached
    rows and labels, with ``hint``'s top-2 where it still holds), ready for a ``ThemeMemo``: the
    growth then starts from a copy of it. ``hint`` itself where a growth would take it (``_held``:
    its rows and labels are the first of the memory's, bit for bit); None when the stage keeps no
    state (neither split nor merge) or no row is attached. Costs what building the state costs a
    growth (at nine public 1M-token conversations, most of a first write's theme stage)."""
    if not (cfg.split or cfg.merge) or state.n_attached == 0:
        return None
    if isinstance(hint, HeldThemes) and _held([state], [hint]) is not None:
        return hint
    with _one_blas_thread():
        part = _synced(None, [state], [hint])
    return HeldThemes(part.detached(), state.x[: state.n_attached])


def session_steps(sessions: np.ndarray, first_row: int = 0) -> list[np.ndarray]:
    """``grow_themes``' steps for nodes ``first_row, first_row + 1, ...`` of sessions [n]: one step per
    run of consecutive nodes of one session, in row order (a chat's sessions, one after another). Rows
    attach in ascending order, which the theme state needs: a session whose nodes are interleaved
    with another's (messages given out of session order) takes one step per run."""
    sessions = np.asarray(sessions, np.int64).reshape(-1)
    cuts = np.flatnonzero(sessions[1:] != sessions[:-1]) + 1
    return (
        np.split(np.arange(first_row, first_row + len(sessions), dtype=np.int64), cuts)
        if len(sessions)
        else []
    )


@functools.cache
def _blas_controller():
    """threadpoolctl's controller of the loaded BLAS libraries (scanned once), or None without it."""
    try:
        from threadpoolctl import ThreadpoolController
    except ImportError:
        return None
    return ThreadpoolController()


def _one_blas_thread() -> contextlib.AbstractContextManager:
    """BLAS limited to one thread: the stage's products are per memory and small (at most a few
    hundred rows), where a thread pool only adds hand-offs, and on a shared machine its spinning
    threads cost the stage 2x (dev split, 2 busy cores). Every product splits its output, never
    its sums, across threads, so the values, and every decision, are the same either way."""
    ctl = _blas_controller()
    return ctl.limit(limits=1, user_api="blas") if ctl is not None else contextlib.nullcontext()


def _grow(
    states: list[ThemeState],
    steps: list[list[np.ndarray]],
    cfg: ThemeConfig,
    backend: str,
    hints: list[Held | None] | None = None,
) -> PartitionState | None:
    """``grow_themes``' steps: attach, then the split rounds and the merge round over the active
    memories; the f(P) state after the last step (None when none was built)."""
    part: PartitionState | None = None
    for step in range(max((len(s) for s in steps), default=0)):
        active = [b for b, rows in enumerate(steps) if step < len(rows)]
        attach_all([states[b] for b in active], [steps[b][step] for b in active], cfg)
        if not active or not (cfg.split or cfg.merge):
            continue
        part = _synced(part, states, hints)
        if cfg.split:
            split_overfull(states, part, active, cfg, backend=backend)
        if cfg.merge:
            merge_small(states, part, active, cfg, backend=backend)
    return part if part is None else _synced(part, states)


def _synced(
    part: PartitionState | None, states: list[ThemeState], hints: list[Held | None] | None = None
) -> PartitionState:
    """The f(P) state over each memory's attached rows (default eps, as scoring always used): a copy
    of the one memory's held state where it still holds (``_held``), else built once (with the
    ``hints``' top-2 where they still hold); then extended by the rows attached since."""
    if part is None:
        part = _held(states, hints)
    if part is None:
        x = np.concatenate([s.x[: s.n_attached] for s in states])
        labels = np.concatenate([s.label[: s.n_attached] for s in states])
        offsets = np.cumsum([0] + [s.n_attached for s in states])
        top2 = None if hints is None else [h.top2() if isinstance(h, HeldThemes) else h for h in hints]
        return PartitionState.from_labels(x, labels, offsets, hints=top2)
    have = np.diff(part.offsets)
    part.extend(
        {
            b: (s.x[have[b] : s.n_attached], s.label[have[b] : s.n_attached])
            for b, s in enumerate(states)
            if s.n_attached > have[b]
        }
    )
    return part


def _held(states: list[ThemeState], hints: list[Held | None] | None) -> PartitionState | None:
    """A copy of the one memory's held state (``HeldThemes``) where the memory's first n attached
    rows and their labels are, bit for bit, the n rows and labels the state was built on (so it is
    ``from_labels`` of them), else None. O(n d) to compare, against O(n d) to build it again, but a
    memcmp next to a pass of float64 arithmetic and a fresh [n, d] float64 array."""
    if hints is None or len(states) != 1 or not isinstance(hints[0], HeldThemes):
        return None
    held, s = hints[0], states[0]
    st, n = held.state, len(held.state.labels)
    if len(st.offsets) != 2 or n > s.n_attached or held.rows.shape != (n, s.x.shape[1]):
        return None
    if held.rows.dtype != s.x.dtype or not _same_bits(held.rows, s.x[:n]):
        return None
    return st.detached() if _same_bits(st.labels, s.label[:n]) else None


def _same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    """Whether two arrays of one dtype and shape hold the same bits (-0.0 is not 0.0, a NaN is itself)."""
    if a.dtype != b.dtype or a.shape != b.shape:
        return False
    as_ints = np.dtype(f"u{a.dtype.itemsize}")
    return bool(np.array_equal(a.view(as_ints), b.view(as_ints)))


def split_overfull(
    states: list[ThemeState],
    part: PartitionState,
    active: list[int],
    cfg: ThemeConfig,
    *,
    backend: str = "auto",
    max_rounds: int = 8,
) -> None:
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
            xm,
            moff,
            ks=cfg.split_ks,
            n_init=cfg.split_n_init,
            seed=cfg.seed,
            cc_threshold=cfg.cc_threshold,
            backend=backend,
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
        part.apply(edits, check=False)  # each theme's members cut by its proposal's labels: a cover


def merge_small(
    states: list[ThemeState],
    part: PartitionState,
    active: list[int],
    cfg: ThemeConfig,
    *,
    backend: str = "auto",
) -> None:
    """Merge tiny themes, and pairs closer than ``merge_pair_threshold``, into one of their nearest
    themes (theme kNN graph) when f(P) rises; the best gains first, a theme in one merge per call."""
    cands, pairs = merge_candidates(states, part, active, cfg, backend=backend)
    if not pairs:
        return
    gains = score_candidates(part, cands, backend=backend) - part.f[cands.memory]
    used: set[tuple[int, int]] = set()
    edits = []
    go, mo = cands.group_offsets, cands.members
    n_t = part.theme_count[cands.rem_rows[0::2]]  # [C] t's members come first in each group
    for c in np.argsort(-gains, kind="stable").tolist():
        b, t, j = pairs[c]
        if gains[c] <= 0:
            break
        if (b, t) in used or (b, j) in used:
            continue
        used.update({(b, t), (b, j)})
        rows = mo[go[c] : go[c + 1]]
        local = rows - part.offsets[b]
        edits.append((b, [t, j], [rows], [states[b].merge(t, j, (local[: n_t[c]], local[n_t[c] :]))]))
    part.apply(edits, check=False)  # t's members then j's, from the state: a cover


def merge_candidates(
    states: list[ThemeState],
    part: PartitionState,
    active: list[int],
    cfg: ThemeConfig,
    *,
    backend: str = "auto",
) -> tuple[Candidates, list[tuple[int, int, int]]]:
    """The merge candidates of the active memories, as one CSR batch, and their (memory, t, j).

    Theme t (in opening order) offers its nearest themes j in graph order, the first
    ``merge_candidates`` when t is tiny, else all k: a pair joins when the two fit under the cap and
    t is tiny or their cosine reaches ``merge_pair_threshold``, the first time either side offers it.
    The candidate removes t and j and adds one group, t's members then j's (ascending within each).
    Equal to ``merge_candidates_reference`` (the per-theme loop), vectorised per memory."""
    sync_graphs([states[b] for b in active], backend=backend)
    owner, t_id, j_id = merge_pairs_batch(
        [states[b].merge_pair_item() for b in active],
        tiny_size=cfg.tiny_size,
        merge_candidates=cfg.merge_candidates,
        size_cap=cfg.size_cap,
        pair_threshold=cfg.merge_pair_threshold,
    )
    if not owner.size:
        return Candidates.from_lists(part, []), []
    mem = np.asarray(active, np.int64)[owner]
    pairs = list(zip(mem.tolist(), t_id.tolist(), j_id.tolist()))
    # theme rows: the state's rows are ordered by (memory, label), so one search over those keys
    t_mem = np.repeat(np.arange(len(part.theme_offsets) - 1, dtype=np.int64), np.diff(part.theme_offsets))
    keys = (t_mem << 32) | part.theme_label
    rem_rows = np.searchsorted(
        keys, (np.repeat(mem, 2) << 32) | np.stack([t_id, j_id], axis=1).reshape(-1)
    )  # [2C]: t's row, j's row
    starts, sizes = part.member_offsets[rem_rows], np.diff(part.member_offsets)[rem_rows]
    group_offsets = np.zeros(len(pairs) + 1, np.int64)
    np.cumsum(sizes.reshape(-1, 2).sum(axis=1), out=group_offsets[1:])
    seg_start = np.repeat(np.cumsum(sizes) - sizes, sizes)
    members = part.member_rows[np.repeat(starts, sizes) + np.arange(int(sizes.sum())) - seg_start]
    n = len(pairs)
    cands = Candidates(
        memory=mem,
        rem_offsets=np.arange(0, 2 * n + 1, 2, dtype=np.int64),
        rem_rows=rem_rows,
        add_offsets=np.arange(n + 1, dtype=np.int64),
        group_offsets=group_offsets,
        members=members,
    )
    return cands, pairs


def merge_candidates_reference(
    states: list[ThemeState], part: PartitionState, active: list[int], cfg: ThemeConfig
) -> tuple[Candidates, list[tuple[int, int, int]]]:
    """``merge_candidates`` as a loop over each memory's themes and their graph neighbours (the
    rule as first written; the equality tests compare the two)."""
    items, pairs = [], []
    sync_graphs([states[b] for b in active])
    for b in active:
        s = states[b]
        seen = set()
        for t in s.live_ids():
            n_t = s.count(t)
            for j, sim in s.nearest_themes(t, max(cfg.merge_candidates, 1) if n_t <= cfg.tiny_size else s.k):
                key = (min(t, j), max(t, j))
                if key in seen or n_t + s.count(j) > cfg.size_cap:
                    continue
                if n_t <= cfg.tiny_size or sim >= cfg.merge_pair_threshold:
                    seen.add(key)
                    rows = np.concatenate(
                        [part.members_of(part.theme_row(b, t)), part.members_of(part.theme_row(b, j))]
                    )
                    items.append((b, [t, j], [rows]))
                    pairs.append((b, t, j))
    return Candidates.from_lists(part, items), pairs


__all__ = [
    "ThemeState",
    "grow_themes",
    "sync_graphs",
    "merge_candidates",
    "merge_candidates_reference",
    "merge_small",
    "split_overfull",
]
