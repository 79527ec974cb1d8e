"""Partition state (per-theme sums, counts, top-2 neighbours) and batches of candidate edits.

With unit rows and S_k the sum of theme k's members: cohesion_k = |S_k| / n_k and
cos(mu_k, mu_j) = S_k . S_j / (|S_k| |S_j|), so f(P) needs only sums, counts and each theme's
nearest other centroid; a candidate changes a few themes, and the others' s_k follow from the
kept top-2 (DESIGN section 1).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .._arrays import check_offsets, csr_offsets, to_numpy


def closed_form(sums: np.ndarray, counts: np.ndarray, n: int, eps: float) -> float:
    """f(P) from per-theme sums [K, d] float64 and counts [K] (all themes non-empty)."""
    k = len(counts)
    if k == 0 or n == 0:
        return 0.0
    norms = np.linalg.norm(sums, axis=1)
    cohesion = norms / counts
    unit = np.divide(sums, norms[:, None], out=np.zeros_like(sums), where=norms[:, None] > 0)
    cos = unit @ unit.T
    np.fill_diagonal(cos, -np.inf)
    s = cos.max(axis=1) if k > 1 else np.zeros(1)
    m = float(np.median(s))
    sigma = float(np.median(np.abs(s - m))) + eps
    return n * n / (k * float(np.sum(counts.astype(np.float64) ** 2))) + float(np.mean(cohesion * np.exp(-((s - m) ** 2) / (2 * sigma**2))))


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

    @classmethod
    def from_labels(cls, x, labels, offsets, *, eps: float = 1e-8) -> PartitionState:
        x = np.asarray(to_numpy(x), dtype=np.float64)
        norms = np.linalg.norm(x, axis=1, keepdims=True)
        x = np.divide(x, norms, out=np.zeros_like(x), where=norms > 0)
        labels = np.asarray(to_numpy(labels), dtype=np.int64)
        off = check_offsets(to_numpy(offsets), x.shape[0])
        if labels.shape != (x.shape[0],) or (labels.size and labels.min() < 0):
            raise ValueError(f"labels must be [N] non-negative ints, got shape {labels.shape}")
        d = x.shape[1]
        t_label, sums, counts, members, t_sizes, f = [], [], [], [], [], []
        top_idx, top_cos = [], []
        base = 0
        for b in range(len(off) - 1):
            s, e = int(off[b]), int(off[b + 1])
            lab = labels[s:e]
            uniq, inv = np.unique(lab, return_inverse=True)
            k = len(uniq)
            sm = np.zeros((k, d))
            np.add.at(sm, inv, x[s:e])
            cnt = np.bincount(inv, minlength=k).astype(np.int64)
            order = np.argsort(inv, kind="stable")
            t_label.append(uniq)
            sums.append(sm)
            counts.append(cnt)
            members.append(order + s)
            t_sizes.append(k)
            nrm = np.linalg.norm(sm, axis=1)
            unit = np.divide(sm, nrm[:, None], out=np.zeros_like(sm), where=nrm[:, None] > 0)
            cos = unit @ unit.T
            np.fill_diagonal(cos, -np.inf)
            ti = np.full((k, 2), -1, np.int64)
            tc = np.full((k, 2), -np.inf)
            if k > 1:
                o = np.argsort(-cos, axis=1, kind="stable")[:, :2]
                ti[:, : o.shape[1]] = o + base
                tc[:, : o.shape[1]] = np.take_along_axis(cos, o, axis=1)
                ti[~np.isfinite(tc)] = -1
            top_idx.append(ti)
            top_cos.append(tc)
            f.append(closed_form(sm, cnt, e - s, eps))
            base += k
        cat = lambda a, shape: np.concatenate(a) if a else np.zeros(shape)  # noqa: E731
        counts_all = cat(counts, (0,)).astype(np.int64)
        return cls(
            x=x, labels=labels, offsets=off, theme_offsets=csr_offsets(t_sizes), theme_label=cat(t_label, (0,)).astype(np.int64),
            theme_sum=cat(sums, (0, d)), theme_count=counts_all, member_offsets=csr_offsets(counts_all.tolist()),
            member_rows=cat(members, (0,)).astype(np.int64), top_idx=cat(top_idx, (0, 2)).astype(np.int64),
            top_cos=cat(top_cos, (0, 2)), f=np.array(f, dtype=np.float64), eps=eps,
        )

    def theme_row(self, b: int, label: int) -> int:
        s, e = int(self.theme_offsets[b]), int(self.theme_offsets[b + 1])
        j = int(np.searchsorted(self.theme_label[s:e], label))
        if j >= e - s or self.theme_label[s + j] != label:
            raise ValueError(f"memory {b} has no theme labelled {label}")
        return s + j

    def members_of(self, row: int) -> np.ndarray:
        return self.member_rows[self.member_offsets[row] : self.member_offsets[row + 1]]


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
