"""Partition state (per-theme sums, counts, top-2 neighbours), kept in place under edits, and
batches of candidate edits.

With unit rows and S_k the sum of theme k's members: cohesion_k = |S_k| / n_k and
cos(mu_k, mu_j) = S_k . S_j / (|S_k| |S_j|), so f(P) needs only sums, counts and each theme's
nearest other centroid; a candidate changes a few themes, and the others' s_k follow from the
kept top-2 (DESIGN section 1).

Layout: compact CSR, the one every ``score_candidates`` backend reads. Memory b's nodes are rows
``offsets[b]:offsets[b+1]``, its themes rows ``theme_offsets[b]:theme_offsets[b+1]`` in ascending
label order. ``apply`` (splits, merges, moves) and ``extend`` (new nodes) recompute only the touched
memories' blocks and re-pack the columns once per call, an O(K d + N) copy: per-memory slack rows
would avoid it, but every kernel would then have to skip them, and one call per round of edits
keeps the copy small next to the scoring. Sums are accumulated over members in ascending row order
from zero, so a kept, continued or fresh sum is bit-identical to ``from_labels`` on the same labels.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .._arrays import check_offsets, csr_offsets, to_numpy


def closed_form(sums: np.ndarray, counts: np.ndarray, n: int, eps: float) -> float:
    """f(P) from per-theme sums [K, d] float64 and counts [K] (all themes non-empty)."""
    k = len(counts)
    if k == 0 or n == 0:
        return 0.0
    norms = np.linalg.norm(sums, axis=1)
    unit = np.divide(sums, norms[:, None], out=np.zeros_like(sums), where=norms[:, None] > 0)
    cos = unit @ unit.T
    np.fill_diagonal(cos, -np.inf)
    return _f(norms, counts, cos.max(axis=1) if k > 1 else np.zeros(1), n, eps)


def _f(norms: np.ndarray, counts: np.ndarray, s: np.ndarray, n: int, eps: float) -> float:
    """f(P) from the themes' sum norms [K], counts [K] and nearest-centroid cosines s [K]."""
    k = len(counts)
    if k == 0 or n == 0:
        return 0.0
    cohesion = norms / counts
    m = float(np.median(s))
    sigma = float(np.median(np.abs(s - m))) + eps
    return n * n / (k * float(np.sum(counts.astype(np.float64) ** 2))) + float(np.mean(cohesion * np.exp(-((s - m) ** 2) / (2 * sigma**2))))


def _unit_rows(x) -> np.ndarray:
    """[n, d] float64 rows scaled to unit norm (zero rows stay zero)."""
    x = np.asarray(to_numpy(x), dtype=np.float64)
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    return np.divide(x, norms, out=np.zeros_like(x), where=norms > 0)


@dataclass
class _Block:
    """One memory's part of a PartitionState; theme and node rows local to the memory."""

    labels: np.ndarray  # [n]
    theme_label: np.ndarray  # [k] ascending
    theme_sum: np.ndarray  # [k, d]
    theme_count: np.ndarray  # [k]
    members: np.ndarray  # [n] node rows grouped by theme, ascending within a theme
    top_idx: np.ndarray  # [k, 2] theme rows (-1 none)
    top_cos: np.ndarray  # [k, 2]
    f: float


def _block(x: np.ndarray, labels: np.ndarray, eps: float, start: dict[int, np.ndarray] | None = None, tail: int = 0) -> _Block:
    """The block of one memory: x [n, d] unit float64 rows, labels [n] >= 0. A theme named in
    ``start`` begins from that sum and adds its rows from ``tail`` on; any other theme sums all its
    rows. Rows are added in ascending order, so the sums equal fresh ones bit for bit."""
    n, d = x.shape
    uniq, inv = np.unique(labels, return_inverse=True)
    k = len(uniq)
    sm = np.zeros((k, d))
    add = np.ones(n, dtype=bool)  # the rows still to add
    if start:
        has = np.array([t in start for t in uniq.tolist()], dtype=bool)
        for j in np.flatnonzero(has):
            sm[j] = start[int(uniq[j])]
        add = ~has[inv] | (np.arange(n) >= tail)
    np.add.at(sm, inv[add], x[add])
    cnt = np.bincount(inv, minlength=k).astype(np.int64)
    nrm = np.linalg.norm(sm, axis=1)
    unit = np.divide(sm, nrm[:, None], out=np.zeros_like(sm), where=nrm[:, None] > 0)
    cos = unit @ unit.T
    np.fill_diagonal(cos, -np.inf)
    ti = np.full((k, 2), -1, np.int64)
    tc = np.full((k, 2), -np.inf)
    if k > 1:  # the two largest per row, ties to the lower row (as a stable sort of -cos)
        rows = np.arange(k)
        ti[:, 0] = np.argmax(cos, axis=1)
        tc[:, 0] = cos[rows, ti[:, 0]]
        rest = cos.copy()
        rest[rows, ti[:, 0]] = -np.inf
        ti[:, 1] = np.argmax(rest, axis=1)
        tc[:, 1] = rest[rows, ti[:, 1]]
        ti[~np.isfinite(tc)] = -1
    f = _f(nrm, cnt, tc[:, 0] if k > 1 else np.zeros(1), n, eps)  # tc[:, 0] is cos.max(axis=1), as closed_form
    return _Block(labels, uniq.astype(np.int64), sm, cnt, np.argsort(inv, kind="stable").astype(np.int64), ti, tc, f)


@dataclass
class PartitionState:
    """Themes of B memories. Theme rows of memory b: ``theme_offsets[b]:theme_offsets[b+1]``."""

    x: np.ndarray  # [N, d] float64 unit rows
    labels: np.ndarray  # [N] int64 theme labels, local to each memory
    offsets: np.ndarray  # [B+1] node offsets
    theme_offsets: np.ndarray  # [B+1]
    theme_label: np.ndarray  # [K] the label value of each theme row
    theme_sum: np.ndarray  # [K, d] float64
    theme_count: np.ndarray  # [K] int64
    member_offsets: np.ndarray  # [K+1] CSR over member_rows
    member_rows: np.ndarray  # [N] global node rows grouped by theme
    top_idx: np.ndarray  # [K, 2] global theme rows of the two nearest other centroids (-1 none)
    top_cos: np.ndarray  # [K, 2] their cosines (-inf none)
    f: np.ndarray  # [B] f(P) per memory
    eps: float
    _device_x: tuple | None = field(default=None, init=False, repr=False, compare=False)  # (x it copies, tensor)

    def device_x(self, device: Any) -> Any:
        """``x`` as a float64 torch tensor on ``device`` for the GPU scoring paths: uploaded when
        ``x`` changed (``extend`` re-packs it), reused by every call in between (``apply`` keeps
        ``x``), so a round of splits and merges does not send the node rows up again."""
        import torch

        held = self._device_x
        if held is None or held[0] is not self.x or held[1].device != torch.device(device):
            t = torch.from_numpy(np.ascontiguousarray(self.x, dtype=np.float64)).to(device)
            held = self._device_x = (self.x, t)
        return held[1]

    @classmethod
    def from_labels(cls, x, labels, offsets, *, eps: float = 1e-8) -> PartitionState:
        x = _unit_rows(x)
        labels = np.asarray(to_numpy(labels), dtype=np.int64)
        off = check_offsets(to_numpy(offsets), x.shape[0])
        if labels.shape != (x.shape[0],) or (labels.size and labels.min() < 0):
            raise ValueError(f"labels must be [N] non-negative ints, got shape {labels.shape}")
        blocks = [_block(x[s:e], labels[s:e], eps) for s, e in zip(off[:-1].tolist(), off[1:].tolist())]
        return cls(**_pack(x, blocks, eps))

    def theme_row(self, b: int, label: int) -> int:
        s, e = int(self.theme_offsets[b]), int(self.theme_offsets[b + 1])
        j = int(np.searchsorted(self.theme_label[s:e], label))
        if j >= e - s or self.theme_label[s + j] != label:
            raise ValueError(f"memory {b} has no theme labelled {label}")
        return s + j

    def members_of(self, row: int) -> np.ndarray:
        return self.member_rows[self.member_offsets[row] : self.member_offsets[row + 1]]

    # -- in-place updates ------------------------------------------------------------------------
    def apply(self, edits: Sequence[tuple[int, Sequence[int], Sequence[np.ndarray], Sequence[int]]]) -> None:
        """Apply edits in place, each ``(memory b, labels of the themes removed, groups of GLOBAL node
        rows, the new label of each group)``: a split, merge or move. The groups cover exactly the
        removed themes' members; a new label is not one of the memory's remaining themes. Edits of one
        memory apply in order. Kept themes keep their sums; new ones are summed; top-2 and f of the
        touched memories are recomputed: the state equals ``from_labels`` on the edited labels."""
        if not edits:
            return
        labels: dict[int, np.ndarray] = {}
        removed: dict[int, set[int]] = {}
        for c, (b, remove, groups, new) in enumerate(edits):
            s = int(self.offsets[b])
            lab = labels.setdefault(b, self.labels[s : int(self.offsets[b + 1])].copy())
            gone = removed.setdefault(b, set())
            remove = [int(t) for t in remove]
            if not set(remove) <= set(lab.tolist()):
                raise ValueError(f"edit {c}: memory {b} has no theme labelled {sorted(set(remove) - set(lab.tolist()))}")
            groups = [np.asarray(g, dtype=np.int64) - s for g in groups]
            got = np.sort(np.concatenate(groups)) if groups else np.zeros(0, np.int64)
            if not np.array_equal(np.flatnonzero(np.isin(lab, remove)), got):
                raise ValueError(f"edit {c} (memory {b}): the groups must cover exactly the members of the removed themes")
            new = [int(t) for t in new]
            if len(new) != len(groups) or len(set(new)) != len(new) or min(new, default=0) < 0 \
                    or set(new) & (set(lab.tolist()) - set(remove)):
                raise ValueError(f"edit {c} (memory {b}): one new non-negative label per group, none a remaining theme's")
            for g, t in zip(groups, new):
                lab[g] = t
            gone.update(remove)
        blocks = {}
        for b, lab in labels.items():
            s, e = int(self.offsets[b]), int(self.offsets[b + 1])
            ts, te = int(self.theme_offsets[b]), int(self.theme_offsets[b + 1])
            keep = {t: self.theme_sum[ts + j] for j, t in enumerate(self.theme_label[ts:te].tolist()) if t not in removed[b]}
            blocks[b] = _block(self.x[s:e], lab, self.eps, keep, tail=e - s)
        self._replace(blocks)

    def extend(self, nodes: dict[int, tuple[np.ndarray, np.ndarray]]) -> None:
        """Append nodes in place: memory b gains ``x [m, d]`` (any norms) at the end of its rows, with
        ``labels [m]`` (its themes' or new ones). The themes they join continue their sums, new ones
        are summed, top-2 and f of the touched memories are recomputed; later memories' rows shift.
        The state equals ``from_labels`` on the longer rows."""
        if not nodes:
            return
        blocks, xs = {}, {}
        for b, (xn, ln) in nodes.items():
            s, e = int(self.offsets[b]), int(self.offsets[b + 1])
            ts, te = int(self.theme_offsets[b]), int(self.theme_offsets[b + 1])
            xn = _unit_rows(xn)
            ln = np.asarray(to_numpy(ln), dtype=np.int64)
            if ln.shape != (xn.shape[0],) or (ln.size and ln.min() < 0):
                raise ValueError(f"memory {b}: labels must be [{xn.shape[0]}] non-negative ints, got shape {ln.shape}")
            xs[b] = np.concatenate([self.x[s:e], xn])
            start = {t: self.theme_sum[ts + j] for j, t in enumerate(self.theme_label[ts:te].tolist())}
            blocks[b] = _block(xs[b], np.concatenate([self.labels[s:e], ln]), self.eps, start, tail=e - s)
        self._replace(blocks, xs)

    def _replace(self, blocks: dict[int, _Block], xs: dict[int, np.ndarray] | None = None) -> None:
        """Swap in the touched memories' blocks (and node rows ``xs``); the others are kept as they are."""
        parts, x_parts = [], []
        for b in range(len(self.offsets) - 1):
            s, e = int(self.offsets[b]), int(self.offsets[b + 1])
            x_parts.append(xs[b] if xs and b in xs else self.x[s:e])
            if b in blocks:
                parts.append(blocks[b])
                continue
            ts, te = int(self.theme_offsets[b]), int(self.theme_offsets[b + 1])
            ti = self.top_idx[ts:te]
            parts.append(_Block(self.labels[s:e], self.theme_label[ts:te], self.theme_sum[ts:te], self.theme_count[ts:te],
                                self.member_rows[s:e] - s, np.where(ti >= 0, ti - ts, -1), self.top_cos[ts:te], float(self.f[b])))
        x = np.concatenate(x_parts) if xs else self.x
        for name, value in _pack(x, parts, self.eps).items():
            setattr(self, name, value)


def _pack(x: np.ndarray, blocks: list[_Block], eps: float) -> dict:
    """The PartitionState columns of per-memory blocks, rows made global."""
    d = x.shape[1]
    n_sizes = [len(bl.labels) for bl in blocks]
    t_sizes = [len(bl.theme_label) for bl in blocks]
    off, t_off = csr_offsets(n_sizes), csr_offsets(t_sizes)
    cat = lambda a, shape, dt: np.concatenate(a).astype(dt, copy=False) if a else np.zeros(shape, dt)  # noqa: E731
    counts = cat([bl.theme_count for bl in blocks], (0,), np.int64)
    return dict(
        x=x, labels=cat([bl.labels for bl in blocks], (0,), np.int64), offsets=off, theme_offsets=t_off,
        theme_label=cat([bl.theme_label for bl in blocks], (0,), np.int64),
        theme_sum=cat([bl.theme_sum for bl in blocks], (0, d), np.float64), theme_count=counts,
        member_offsets=csr_offsets(counts), member_rows=cat([bl.members + off[b] for b, bl in enumerate(blocks)], (0,), np.int64),
        top_idx=cat([np.where(bl.top_idx >= 0, bl.top_idx + t_off[b], -1) for b, bl in enumerate(blocks)], (0, 2), np.int64),
        top_cos=cat([bl.top_cos for bl in blocks], (0, 2), np.float64), f=np.array([bl.f for bl in blocks], dtype=np.float64),
        eps=eps,
    )


@dataclass
class Candidates:
    """C candidate edits in CSR form: candidate c of memory ``memory[c]`` removes theme rows
    ``rem_rows[rem_offsets[c]:rem_offsets[c+1]]`` and adds groups ``add_offsets[c]:add_offsets[c+1]``,
    group g holding node rows ``members[group_offsets[g]:group_offsets[g+1]]``."""

    memory: np.ndarray
    rem_offsets: np.ndarray
    rem_rows: np.ndarray
    add_offsets: np.ndarray
    group_offsets: np.ndarray
    members: np.ndarray

    @property
    def n(self) -> int:
        return int(self.memory.shape[0])

    @classmethod
    def from_lists(cls, state: PartitionState, items: list[tuple[int, list[int], list[np.ndarray]]]) -> Candidates:
        """items: (memory b, labels of themes to remove, groups of GLOBAL node rows to add).

        The groups must cover exactly the members of the removed themes (split, merge, move).
        """
        memory, rem, rem_sizes, add_sizes, groups = [], [], [], [], []
        for c, (b, remove, add) in enumerate(items):
            rows = [state.theme_row(b, int(t)) for t in remove]
            if len(set(rows)) != len(rows):
                raise ValueError(f"candidate {c}: a theme is removed twice")
            want = np.sort(np.concatenate([state.members_of(r) for r in rows])) if rows else np.zeros(0, np.int64)
            add = [np.asarray(g, dtype=np.int64) for g in add if len(g)]
            got = np.sort(np.concatenate(add)) if add else np.zeros(0, np.int64)
            if not np.array_equal(want, got):
                raise ValueError(f"candidate {c} (memory {b}): the added groups must cover exactly the members of the removed themes")
            memory.append(b)
            rem.extend(rows)
            rem_sizes.append(len(rows))
            add_sizes.append(len(add))
            groups.extend(add)
        return cls(
            memory=np.array(memory, dtype=np.int64), rem_offsets=csr_offsets(rem_sizes), rem_rows=np.array(rem, dtype=np.int64),
            add_offsets=csr_offsets(add_sizes), group_offsets=csr_offsets([len(g) for g in groups]),
            members=np.concatenate(groups).astype(np.int64) if groups else np.zeros(0, np.int64),
        )
