"""Partition state (per-theme sums, counts, top-2 neighbours), kept in place under edits, and
batches of candidate edits.

With unit rows and S_k the sum of theme k's members: cohesion_k = |S_k| / n_k and
cos(mu_k, mu_j) = S_k . S_j / (|S_k| |S_j|), so f(P) needs only sums, counts and each theme's
nearest other centroid; a candidate changes a few themes, and the others' s_k follow from the
kept top-2.

Layout: compact CSR, the one every ``score_candidates`` backend reads. Memory b's nodes are rows
``offsets[b]:offsets[b+1]``, its themes rows ``theme_offsets[b]:theme_offsets[b+1]`` in ascending
label order. ``apply`` (splits, merges, moves) and ``extend`` (new nodes) recompute only the touched
memories' blocks and re-pack the columns once per call, an O(K d + N) copy: per-memory slack rows
would avoid it, but every kernel would then have to skip them, and one call per round of edits
keeps the copy small next to the scoring. The node rows x, the one O(N d) column, are appended in
place where the new rows follow all others (one long history: ``_appended``). A touched block's
top-2 costs O(changed K d): the themes whose sums kept their bits keep their two nearest, merged
with the changed ones (``top2_update``). Sums are accumulated over members in ascending row order
from zero, so a kept, continued or fresh sum is bit-identical to ``from_labels`` on the same labels.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..backends import host_implementation
from ..checks import check_offsets, csr_offsets, refuse
from ..devices import host
from ..rows import row_norms, sum4, take_rows2, unit_rows
from .state_contract import accepts_f_blocks, accepts_theme_sums, accepts_top2_blocks, accepts_top2_update


def closed_form(sums: np.ndarray, counts: np.ndarray, n: int, eps: float) -> float:
    """f(P) from per-theme sums [K, d] float64 and counts [K] (all themes non-empty)."""
    k = len(counts)
    if k == 0 or n == 0:
        return 0.0
    norms = row_norms(sums)
    unit = np.divide(sums, norms[:, None], out=np.zeros_like(sums), where=norms[:, None] > 0)
    cos = unit @ unit.T
    np.fill_diagonal(cos, -np.inf)
    return objective_from_parts(norms, counts, cos.max(axis=1) if k > 1 else np.zeros(1), n, eps)


_EXP_TAYLOR = tuple(1.0 / math.factorial(i) for i in range(14))  # 1 / i!, each correctly rounded


def exp_fixed(v: Any) -> np.ndarray:
    """exp of each element of v (float64), in plain IEEE operations in one order, the bits of
    ``exp_fixed`` in ``csrc/include/xmemory/exp_fixed.inc`` (f_blocks, partition_objective and
    score_candidates in C++) on every CPU (NumPy's own exp is vectorised per ISA, the C
    library's differs between libraries and FMA or not): NaN stays NaN, above 709.782712893384 inf,
    below -745.1332191019412 zero; else k = floor(x / ln 2 + 1/2), r = (x - k ln2_hi) - k ln2_lo
    (fdlibm's split of ln 2), exp(r) by the degree-13 Taylor polynomial in Horner's order, times 2^k
    (in two steps where 2^k alone is not a normal double). Within 1 ulp of the correctly rounded exp."""
    x = np.asarray(v, np.float64)
    with np.errstate(all="ignore"):
        k = np.floor(x * 1.44269504088896338700e00 + 0.5)
        k = np.where(np.isfinite(k), np.clip(k, -1100.0, 1100.0), 0.0)
        r = (x - k * 6.93147180369123816490e-01) - k * 1.90821492927058770002e-10
        p = np.full(x.shape, _EXP_TAYLOR[13])
        for c in _EXP_TAYLOR[12::-1]:
            p = p * r + c
        e = k.astype(np.int64)
        lo, hi = e < -1021, e > 1023
        y = p * np.ldexp(1.0, np.where(lo, e + 600, np.where(hi, e - 600, e)))
        y = np.where(lo, y * 2.0**-600, np.where(hi, y * 2.0**600, y))
        y = np.where(x > 709.782712893384, np.inf, np.where(x < -745.1332191019412, 0.0, y))
        return np.where(np.isnan(x), x, y)


def objective_from_parts(norms: np.ndarray, counts: np.ndarray, s: np.ndarray, n: int, eps: float) -> float:
    """f(P) from the themes' sum norms [K], counts [K] and nearest-centroid cosines s [K]; the Gaussian's
    denominator is ``2.0 * (sigma * sigma)`` and the mean of the per-theme terms their ``sum4`` / K
    (plain IEEE operations in one order, as ``f_blocks`` takes them)."""
    k = len(counts)
    if k == 0 or n == 0:
        return 0.0
    cohesion = norms / counts
    m = float(np.median(s))
    sigma = float(np.median(np.abs(s - m))) + eps
    return (
        n * n / (k * float(np.sum(counts.astype(np.float64) ** 2)))
        + float(sum4(cohesion * exp_fixed(-((s - m) ** 2) / (2.0 * (sigma * sigma))))) / k
    )


_KEY = 32  # (block, label) sort keys: block << 32 | label (labels are below 2**31)


@dataclass
class _Blocks:
    """Blocks of nb memories, as CSR: rows ``row_off``, themes ``theme_off``; node and theme rows
    local to each memory (the columns of a PartitionState, before they are made global)."""

    row_off: np.ndarray  # [nb+1]
    theme_off: np.ndarray  # [nb+1]
    labels: np.ndarray  # [M]
    theme_label: np.ndarray  # [T] ascending within a block
    theme_sum: np.ndarray  # [T, d]
    theme_count: np.ndarray  # [T]
    members: np.ndarray  # [M] local node rows grouped by theme, ascending within a theme
    top_idx: np.ndarray  # [T, 2] local theme rows (-1 none)
    top_cos: np.ndarray  # [T, 2]
    f: np.ndarray  # [nb]


@dataclass
class _Kept:
    """What the blocks keep from before an edit: their old themes (CSR ``theme_off``) with labels and
    sums, which of them stay (``keep``), ``tail [nb]``: the local row from which a kept theme's
    rows are new (the rows before it are in its sum), and optionally the old themes' top-2
    (``top_idx [T0, 2]`` old local rows, -1 none; ``top_cos [T0, 2]``), from which ``_blocks`` updates
    the top-2 of the themes whose sums did not change."""

    theme_off: np.ndarray
    theme_label: np.ndarray
    theme_sum: np.ndarray
    keep: np.ndarray
    tail: np.ndarray
    top_idx: np.ndarray | None = None
    top_cos: np.ndarray | None = None


@dataclass(frozen=True)
class ThemeTop2:
    """One memory's themes as a finished partition state held them: labels [K] int64 ascending, sums
    [K, d] float64, each theme's two nearest others (top_idx [K, 2] int64 rows of these K, -1 none;
    top_cos [K, 2] float64). Given to ``PartitionState.from_labels`` as a hint: a theme whose label and
    sum bits are found here again keeps its top-2 (``top2_update``), so a memory grown by a few nodes
    pays for the themes that changed, not for every pair. A hint ``block_top2`` exported (of any state,
    memory or age) costs speed only: its labels and sums are checked, its top-2 is trusted (checking
    it would cost the comparison the hint saves)."""

    labels: np.ndarray
    sums: np.ndarray
    top_idx: np.ndarray
    top_cos: np.ndarray

    @property
    def nbytes(self) -> int:
        return int(self.labels.nbytes + self.sums.nbytes + self.top_idx.nbytes + self.top_cos.nbytes)


def _fits(h: ThemeTop2, d: int) -> bool:
    """The hint's columns agree in shape (K themes, dimension d) and its labels ascend strictly in
    [0, 2**31), so that no (block, label) key reads as another block's (``_KEY``)."""
    if not isinstance(h, ThemeTop2) or np.ndim(h.labels) != 1:
        return False
    lab = np.asarray(h.labels)
    k = len(lab)
    return (
        lab.dtype.kind in "iu"
        and (k == 0 or (int(lab.min()) >= 0 and int(lab.max()) < 2**31 and bool((np.diff(lab) > 0).all())))
        and np.shape(h.sums) == (k, d)
        and np.shape(h.top_idx) == (k, 2)
        and np.shape(h.top_cos) == (k, 2)
        and bool(((np.asarray(h.top_idx) >= -1) & (np.asarray(h.top_idx) < k)).all())
    )


def _hinted(hints: Sequence[ThemeTop2 | None], d: int) -> _Kept:
    """``hints`` (one per block, None: none) as the ``_Kept`` whose top-2 ``_blocks`` updates."""
    have = [h if h is not None and _fits(h, d) else None for h in hints]
    sizes = [0 if h is None else len(h.labels) for h in have]
    held = [h for h in have if h is not None]
    cat = lambda f, shape, dt: np.concatenate([f(h) for h in held]) if held else np.zeros(shape, dt)  # noqa: E731
    return _Kept(
        csr_offsets(sizes),
        cat(lambda h: np.asarray(h.labels, np.int64), (0,), np.int64),
        cat(lambda h: np.asarray(h.sums, np.float64), (0, d), np.float64),
        np.ones(sum(sizes), bool),
        np.zeros(len(hints), np.int64),
        cat(lambda h: np.asarray(h.top_idx, np.int64), (0, 2), np.int64),
        cat(lambda h: np.asarray(h.top_cos, np.float64), (0, 2), np.float64),
    )


def _blocks(
    x: np.ndarray,
    rows: np.ndarray,
    labels: np.ndarray,
    row_off: np.ndarray,
    eps: float,
    kept: _Kept | None = None,
    *,
    hint: _Kept | None = None,
    backend: str = "auto",
) -> _Blocks:
    """The blocks of nb memories: their M node rows are ``x[rows]`` (x unit float64 rows; only the
    rows a sum takes are read), labels [M] >= 0, row_off [nb+1].

    Themes, members and sums of all blocks at once (``theme_sums``: a kept theme continues its sum
    with its rows from ``kept.tail`` on, any other sums all its rows, in row order, so every sum
    equals a fresh one bit for bit); then every block's top-2 in one call (``top2_blocks``: cosines in
    ``dot4``'s fixed order, the same bits on every CPU; with ``kept``, ``top2_update``: only the themes
    whose sums changed are compared with their whole block, the others merge them into their kept
    top-2, the same bits) and f (``f_blocks``, the per-memory code's
    operations and shapes), so the values do not depend on the batch (tests/test_theme_lockstep.py)
    and the build's decisions, to the last tie, not on the machine. ``hint`` (without ``kept``):
    the top-2 of earlier themes whose sums are found again bit for bit (``ThemeTop2``); the sums are
    all computed here."""
    if labels.size and int(labels.max()) >= 2**31:
        raise ValueError(f"labels must be below 2**31, got {int(labels.max())}")
    theme_off, theme_label, sums, counts, members = theme_sums(
        x, rows, labels, row_off, kept, backend=backend
    )
    nrm = row_norms(sums, backend=backend)  # row by row: each row's bits as a block's own call
    unit = unit_rows(sums, backend=backend)  # sums / nrm (zero rows zero): the same norms, one pass
    prior = kept if kept is not None else hint  # the themes whose top-2 may be kept
    if prior is None or prior.top_idx is None:
        top_idx, top_cos = top2_blocks(unit, theme_off, backend=backend)
    else:
        top_idx, top_cos = top2_update(
            unit, theme_off, *_kept_top2(prior, theme_off, theme_label, sums), backend=backend
        )
    return _Blocks(
        row_off,
        theme_off,
        labels,
        theme_label,
        sums,
        counts,
        members,
        top_idx,
        top_cos,
        f_blocks(nrm, counts, top_cos[:, 0], theme_off, np.diff(row_off), eps, backend=backend),
    )


def _kept_top2(
    kept: _Kept, theme_off: np.ndarray, theme_label: np.ndarray, sums: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``top2_update``'s (fresh [T], prev_idx [T, 2], prev_cos [T, 2]) for the new themes (``theme_off``,
    ``theme_label``, ``sums``) of blocks whose old themes ``kept`` holds with their top-2: a theme is
    kept when its label stays in its block with a sum of the same bits (so the same unit row:
    ``unit_rows`` is row by row), and its old top-2 is remapped to the new local rows, -1 where the
    neighbour is gone or fresh (``top2_update`` then redoes its row)."""
    nb = len(theme_off) - 1
    t_new, t_old = len(theme_label), len(kept.theme_label)
    new_blk = np.repeat(np.arange(nb, dtype=np.int64), np.diff(theme_off))
    old_blk = np.repeat(np.arange(nb, dtype=np.int64), np.diff(kept.theme_off))
    old_keys = (old_blk << _KEY) | kept.theme_label  # ascending: (block, label)
    if t_old == 0 or t_new == 0:
        return np.ones(t_new, bool), np.full((t_new, 2), -1, np.int64), np.full((t_new, 2), -np.inf)
    at = np.minimum(np.searchsorted(old_keys, (new_blk << _KEY) | theme_label), t_old - 1)
    same = (old_keys[at] == ((new_blk << _KEY) | theme_label)) & kept.keep[at]
    old_sum = np.ascontiguousarray(kept.theme_sum[at], dtype=np.float64)
    new_sum = np.ascontiguousarray(sums, dtype=np.float64)
    same &= (old_sum.view(np.int64) == new_sum.view(np.int64)).all(axis=1)
    new_local = np.arange(t_new, dtype=np.int64) - theme_off[new_blk]
    new_of_old = np.full(t_old, -1, np.int64)
    new_of_old[at[same]] = new_local[same]
    old = kept.top_idx[at]  # [T, 2] old local rows
    prev = np.where(
        old >= 0, new_of_old[np.where(old >= 0, old + kept.theme_off[old_blk[at]][:, None], 0)], -1
    )
    prev[~same] = -1
    return ~same, prev, np.where(same[:, None], kept.top_cos[at], -np.inf)


def theme_sums(
    x: np.ndarray,
    rows: np.ndarray,
    labels: np.ndarray,
    row_off: np.ndarray,
    kept: _Kept | None = None,
    *,
    backend: str = "auto",
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``_blocks``' bookkeeping: (theme_off [nb+1], theme_label [T] ascending within each block, sums
    [T, d] float64, counts [T], members [M] local rows grouped by theme, ascending within one) of the
    nodes ``x[rows]`` labelled ``labels`` (below 2**31), block b the entries ``row_off[b]:row_off[b+1]``.
    A kept theme continues its sum with its rows from ``kept.tail`` on, any other sums all its rows
    (``add_rows_in_order``: a sum's bits are a fresh one's). ``cpu``: one C++ pass
    (``csrc/cpu/partition.cpp``) when x is C-contiguous float64; ``reference``: NumPy steps."""
    refuse(accepts_theme_sums(x, rows, labels, row_off, kept))
    return host_implementation("theme_sums", backend)(x, rows, labels, row_off, kept)


def top2_blocks(
    unit: np.ndarray, theme_off: np.ndarray, *, backend: str = "auto"
) -> tuple[np.ndarray, np.ndarray]:
    """The two nearest other centroids of every block of unit [T, d] float64 (block b: rows
    ``theme_off[b]:theme_off[b+1]``; local rows, ties to the lower row; cosines by ``dot4``'s fixed
    order, the same bits on every CPU): (idx [T, 2] int64 local rows, cos [T, 2]), -1 / -inf for a
    block of one. ``cpu``: one C++ call; ``reference``: NumPy per block."""
    refuse(accepts_top2_blocks(unit, theme_off))
    return host_implementation("top2_blocks", backend)(unit, theme_off)


def top2_update(
    unit: np.ndarray,
    theme_off: np.ndarray,
    fresh: np.ndarray,
    prev_idx: np.ndarray,
    prev_cos: np.ndarray,
    *,
    backend: str = "auto",
) -> tuple[np.ndarray, np.ndarray]:
    """``top2_blocks`` after an edit, from the top-2 kept from before it: fresh [T] bool marks the rows
    that changed or are new; a kept row's prev_idx [T, 2] (local rows now, -1 gone) and prev_cos [T, 2]
    are its old top-2. Per block of k rows with f fresh: whole (``top2_blocks``) when 2 f >= k or k < 3;
    else each fresh row is compared with its whole block (O(f k d)), and a kept row takes the first
    two of its kept pair and the fresh rows by (cosine descending, row ascending), its row done whole
    where a kept entry is -1 or a cosine there is not finite. The bits of ``top2_blocks`` whenever each
    kept pair is the top-2 among the kept rows (cosines by ``dot4``, symmetric: the same bits either
    way round; tests/ops/test_top2_update.py). ``cpu``: one C++ call; ``reference``: NumPy per block."""
    refuse(accepts_top2_update(unit, theme_off, fresh, prev_idx, prev_cos))
    return host_implementation("top2_update", backend)(unit, theme_off, fresh, prev_idx, prev_cos)


def f_blocks(
    norms: np.ndarray,
    counts: np.ndarray,
    s: np.ndarray,
    theme_off: np.ndarray,
    n: np.ndarray,
    eps: float,
    *,
    backend: str = "auto",
) -> np.ndarray:
    """``objective_from_parts`` of every block at once, bit for bit: norms [T], counts [T], s [T] each theme's nearest
    cosine (its block's s is 0 where the block has one theme), theme_off [nb+1], n [nb] node counts.
    Medians are order statistics (the mean of the middle two, as ``np.median``), the per-theme terms
    elementwise, and each block's mean the ``sum4`` of its slice / k. ``cpu``: one
    C++ pass (``csrc/cpu/rows.cpp``); ``reference``: NumPy steps."""
    refuse(accepts_f_blocks(norms, counts, s, theme_off, n, eps))
    return host_implementation("f_blocks", backend)(norms, counts, s, theme_off, n, eps)


def _covers(lab: np.ndarray, remove: list[int], size: int, groups: list[np.ndarray]) -> bool:
    """Whether the local rows ``groups`` are exactly the ``size`` rows of ``lab`` labelled in ``remove``."""
    rows = np.concatenate(groups) if groups else np.zeros(0, np.int64)
    if rows.size != size:
        return False
    if size == 0:
        return True
    if rows.min() < 0 or rows.max() >= lab.size or np.unique(rows).size != size:
        return False
    got = lab[rows]
    return bool(np.logical_or.reduce([got == t for t in remove]).all())


def _checked_edit(
    c: int,
    b: int,
    lab: np.ndarray,
    have: dict[int, int],
    remove: Sequence[int],
    groups: list[np.ndarray],
    new: Sequence[int],
) -> tuple[list[int], list[int]]:
    """Edit c of memory b checked against its labels ``lab`` (local node rows) and theme sizes ``have``
    before it (``have`` updated to after it): the removed themes exist, the groups (local rows) cover
    exactly their members, one new label per group, none a remaining theme's. (remove, new) as ints;
    ``ValueError`` otherwise."""
    remove = [int(t) for t in remove]
    if any(t not in have for t in remove):
        raise ValueError(f"edit {c}: memory {b} has no theme labelled {sorted(set(remove) - set(have))}")
    if not _covers(lab, remove, sum(have[t] for t in remove), groups):
        raise ValueError(
            f"edit {c} (memory {b}): the groups must cover exactly the members of the removed themes"
        )
    new = [int(t) for t in new]
    if (
        len(new) != len(groups)
        or len(set(new)) != len(new)
        or min(new, default=0) < 0
        or any(t in have and t not in remove for t in new)
    ):
        raise ValueError(
            f"edit {c} (memory {b}): one new non-negative label per group, none a remaining theme's"
        )
    for t in remove:
        del have[t]
    for g, t in zip(groups, new):
        if g.size:
            have[t] = int(g.size)
    return remove, new


_SLACK_ROWS = 256  # the least room ``_appended`` leaves after the rows it takes


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
    _device_x: tuple | None = field(
        default=None, init=False, repr=False, compare=False
    )  # (x it copies, tensor)
    _x_buf: list | None = field(
        default=None, init=False, repr=False, compare=False
    )  # [buffer, the x that is its prefix view]: ``extend`` appends into it

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

    @property
    def nbytes(self) -> int:
        """Host bytes the state holds: its columns and the whole buffer its node rows are a prefix of."""
        buf = self._x_buf
        rows = buf[0] if buf is not None and buf[1] is self.x else self.x
        cols = (self.labels, self.offsets, self.theme_offsets, self.theme_label, self.theme_sum)
        cols += (self.theme_count, self.member_offsets, self.member_rows, self.top_idx, self.top_cos)
        return int(rows.nbytes + sum(np.asarray(c).nbytes for c in cols))

    def detached(self) -> PartitionState:
        """A shallow copy without the device copy of ``x``: what a memo holds between writes. Every
        update replaces columns rather than writing them (``_replace``; ``_appended`` never writes
        the rows of an earlier view), so this copy and its source can each be updated apart."""
        out = copy.copy(self)
        out._device_x = None
        return out

    @classmethod
    def from_labels(
        cls, x, labels, offsets, *, eps: float = 1e-8, hints: Sequence[ThemeTop2 | None] | None = None
    ) -> PartitionState:
        """The state of B memories' nodes x [N, d] labelled ``labels`` [N] (local to each memory),
        memory b the rows ``offsets[b]:offsets[b+1]``. ``hints`` [B]: each memory's themes as an
        earlier state held them (``block_top2``), or None: the same state, with the top-2 of the
        themes whose sums kept their bits taken from there."""
        x = unit_rows(x)
        labels = np.asarray(host(labels), dtype=np.int64)
        off = check_offsets("offsets", offsets, x.shape[0])
        if labels.shape != (x.shape[0],) or (labels.size and labels.min() < 0):
            raise ValueError(f"labels must be [N] non-negative ints, got shape {labels.shape}")
        # an empty state of B memories (every column consistent), then every block swapped in
        st = cls(
            x=x,
            labels=np.zeros(0, np.int64),
            offsets=np.zeros(len(off), np.int64),
            theme_offsets=np.zeros(len(off), np.int64),
            theme_label=np.zeros(0, np.int64),
            theme_sum=np.zeros((0, x.shape[1])),
            theme_count=np.zeros(0, np.int64),
            member_offsets=np.zeros(1, np.int64),
            member_rows=np.zeros(0, np.int64),
            top_idx=np.zeros((0, 2), np.int64),
            top_cos=np.zeros((0, 2)),
            f=np.zeros(len(off) - 1),
            eps=eps,
        )
        if hints is not None and len(hints) != len(off) - 1:
            raise ValueError(f"hints must have one entry per memory ({len(off) - 1}), got {len(hints)}")
        hint = _hinted(hints, x.shape[1]) if hints is not None and any(h is not None for h in hints) else None
        st._replace(list(range(len(off) - 1)), _blocks(x, np.arange(x.shape[0]), labels, off, eps, hint=hint))
        return st

    def block_top2(self, b: int) -> ThemeTop2:
        """Memory b's themes as a ``from_labels`` hint (copies)."""
        s, e = int(self.theme_offsets[b]), int(self.theme_offsets[b + 1])
        top = self.top_idx[s:e]
        return ThemeTop2(
            self.theme_label[s:e].copy(),
            self.theme_sum[s:e].copy(),
            np.where(top >= 0, top - s, -1),
            self.top_cos[s:e].copy(),
        )

    def theme_row(self, b: int, label: int) -> int:
        s, e = int(self.theme_offsets[b]), int(self.theme_offsets[b + 1])
        j = int(np.searchsorted(self.theme_label[s:e], label))
        if j >= e - s or self.theme_label[s + j] != label:
            raise ValueError(f"memory {b} has no theme labelled {label}")
        return s + j

    def members_of(self, row: int) -> np.ndarray:
        return self.member_rows[self.member_offsets[row] : self.member_offsets[row + 1]]

    # -- in-place updates ------------------------------------------------------------------------
    def apply(
        self,
        edits: Sequence[tuple[int, Sequence[int], Sequence[np.ndarray], Sequence[int]]],
        *,
        check: bool = True,
    ) -> None:
        """Apply edits in place, each ``(memory b, labels of the themes removed, groups of GLOBAL node
        rows, the new label of each group)``: a split, merge or move. The groups cover exactly the
        removed themes' members and a new label is none of the memory's remaining themes (both
        checked, ``ValueError`` otherwise, unless ``check`` is False: the theme stage's own edits,
        whose groups are cut from this state's members and whose labels are fresh ids). Edits of one
        memory apply in order. Kept themes keep their sums; new ones are summed; the touched memories'
        blocks are redone in one ``_blocks`` call: the state equals ``from_labels`` on the edited labels."""
        if not edits:
            return
        labels: dict[int, np.ndarray] = {}
        removed: dict[int, set[int]] = {}
        count: dict[int, dict[int, int]] = {}  # memory -> its current themes' sizes
        for c, (b, remove, groups, new) in enumerate(edits):
            s = int(self.offsets[b])
            if b not in labels:
                labels[b] = self.labels[s : int(self.offsets[b + 1])].copy()
                removed[b] = set()
                if check:
                    ts, te = int(self.theme_offsets[b]), int(self.theme_offsets[b + 1])
                    count[b] = dict(zip(self.theme_label[ts:te].tolist(), self.theme_count[ts:te].tolist()))
            groups = [np.asarray(g, dtype=np.int64) - s for g in groups]
            if check:
                remove, new = _checked_edit(c, b, labels[b], count[b], remove, groups, new)
            for g, t in zip(groups, new):
                labels[b][g] = t
            removed[b].update(remove)
        bs = sorted(labels)
        sizes = [int(self.offsets[b + 1] - self.offsets[b]) for b in bs]
        rows = np.concatenate([np.arange(int(self.offsets[b]), int(self.offsets[b + 1])) for b in bs])
        kept = self._kept(bs, sizes, removed)
        self._replace(
            bs,
            _blocks(
                self.x, rows, np.concatenate([labels[b] for b in bs]), csr_offsets(sizes), self.eps, kept
            ),
        )

    def extend(self, nodes: dict[int, tuple[np.ndarray, np.ndarray]]) -> None:
        """Append nodes in place: memory b gains ``x [m, d]`` (any norms) at the end of its rows, with
        ``labels [m]`` (its themes' or new ones). The themes they join continue their sums, new ones
        are summed, the touched memories' blocks are redone in one ``_blocks`` call; later memories'
        rows shift (the node rows are re-packed once). The state equals ``from_labels`` on the longer
        rows."""
        if not nodes:
            return
        bs = sorted(nodes)
        add: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        for b in bs:
            xn, ln = nodes[b]
            xn = np.asarray(host(xn), dtype=np.float64)
            ln = np.asarray(host(ln), dtype=np.int64)
            if xn.ndim != 2 or ln.shape != (xn.shape[0],) or (ln.size and ln.min() < 0):
                raise ValueError(
                    f"memory {b}: x must be [m, d] and labels [m] non-negative ints, got shapes {xn.shape}, {ln.shape}"
                )
            add[b] = (xn, ln)
        if len({a[0].shape[1] for a in add.values()} | {self.x.shape[1]}) != 1:
            raise ValueError(f"new nodes must have the state's dimension {self.x.shape[1]}")
        # unit_rows is row by row: one call over every memory's new rows gives each row's bits of its own call
        unit = unit_rows(np.concatenate([add[b][0] for b in bs]))
        n_mem, n_old = len(self.offsets) - 1, len(self.x)
        bs_arr = np.asarray(bs, np.int64)
        old_n = np.diff(self.offsets)
        add_n = np.zeros(n_mem, np.int64)
        add_n[bs_arr] = [len(add[b][1]) for b in bs]
        new_off = csr_offsets(old_n + add_n)
        # memory b's rows in [old x; new rows]: its old rows, then its new ones (one segment each)
        seg_start = np.stack([self.offsets[:-1], n_old + csr_offsets(add_n)[:-1]], axis=1).reshape(-1)
        seg_n = np.stack([old_n, add_n], axis=1).reshape(-1)
        take = np.repeat(seg_start - csr_offsets(seg_n)[:-1], seg_n) + np.arange(int(new_off[-1]))
        x = self._appended(unit) if int(self.offsets[bs[0] + 1]) == n_old else take_rows2(self.x, unit, take)
        sizes = (old_n + add_n)[bs_arr]
        rows = np.repeat(new_off[bs_arr] - csr_offsets(sizes)[:-1], sizes) + np.arange(int(sizes.sum()))
        ls = take_rows2(self.labels, np.concatenate([add[b][1] for b in bs]), take[rows])
        kept = self._kept(bs, old_n[bs_arr].tolist())
        self._replace(bs, _blocks(x, rows, ls, csr_offsets(sizes), self.eps, kept), x)

    def _appended(self, unit: np.ndarray) -> np.ndarray:
        """``[x; unit]`` where the new rows follow every old one (no old rows after the first extended
        memory's: one long history), as a prefix view of a buffer that grows by a quarter (and at
        least ``_SLACK_ROWS``) when full, so a step's rows cost their own copy, not the whole of x,
        and a held state's slack stays a quarter of its rows. The rows of earlier views are never
        written."""
        n_old, n_new = len(self.x), len(self.x) + len(unit)
        held = self._x_buf  # shared by shallow copies of the state: whoever appends first moves it on
        if held is None or held[1] is not self.x or len(held[0]) < n_new:
            grown = np.empty((n_new + max(n_new // 4, _SLACK_ROWS), self.x.shape[1]), np.float64)
            grown[:n_old] = self.x
            held = self._x_buf = [grown, self.x]
        held[0][n_old:n_new] = unit
        held[1] = held[0][:n_new]
        return held[1]

    def _kept(self, bs: list[int], tails: list[int], removed: dict[int, set[int]] | None = None) -> _Kept:
        """The old themes of memories ``bs`` as ``_blocks`` takes them, all kept but the ``removed`` labels."""
        bs_arr = np.asarray(bs, np.int64)
        start = self.theme_offsets[bs_arr]
        size = self.theme_offsets[bs_arr + 1] - start
        off = csr_offsets(size)
        rows = np.repeat(start - off[:-1], size) + np.arange(int(off[-1]))
        lab = self.theme_label[rows]
        keep = np.ones(len(rows), bool)
        gone = [(i << _KEY) | t for i, b in enumerate(bs) for t in (removed or {}).get(b, ())]
        if gone and len(rows):  # the (block, label) keys ascend: each removed old theme's row by one search
            keys = (np.repeat(np.arange(len(bs), dtype=np.int64), size) << _KEY) | lab
            want = np.array(gone, np.int64)
            at = np.minimum(np.searchsorted(keys, want), len(keys) - 1)
            keep[at[keys[at] == want]] = False  # (a label opened and removed within one call is not there)
        top = self.top_idx[rows]
        local = np.where(top >= 0, top - np.repeat(start, size)[:, None], -1)  # old local rows
        return _Kept(
            off, lab, self.theme_sum[rows], keep, np.array(tails, np.int64), local, self.top_cos[rows]
        )

    def _replace(self, bs: list[int], blocks: _Blocks, x: np.ndarray | None = None) -> None:
        """Swap in the blocks of memories ``bs`` (and ``x``, the node rows re-packed for their new sizes);
        the other memories' columns are kept as they are. Every column is one gather from the old
        column followed by the blocks' (the rows each memory takes, by CSR ranges; ``take_rows2``: one
        copy, no concatenation): no per-memory loop."""
        n_mem = len(self.offsets) - 1
        bs_arr = np.asarray(bs, np.int64)
        new = np.zeros(n_mem, bool)
        new[bs_arr] = True
        slot = np.zeros(n_mem, np.int64)
        slot[bs_arr] = np.arange(len(bs))
        old_n, old_t = np.diff(self.offsets), np.diff(self.theme_offsets)
        n_sizes = np.where(new, np.diff(blocks.row_off)[slot], old_n)
        t_sizes = np.where(new, np.diff(blocks.theme_off)[slot], old_t)
        # where each memory's rows start in [old column; blocks' column]
        n_src = np.where(new, len(self.labels) + blocks.row_off[:-1][slot], self.offsets[:-1])
        t_src = np.where(new, len(self.theme_label) + blocks.theme_off[:-1][slot], self.theme_offsets[:-1])
        off, t_off = csr_offsets(n_sizes), csr_offsets(t_sizes)
        n_take = np.repeat(n_src - off[:-1], n_sizes) + np.arange(int(off[-1]))
        t_take = np.repeat(t_src - t_off[:-1], t_sizes) + np.arange(int(t_off[-1]))
        old_members = self.member_rows - np.repeat(self.offsets[:-1], old_n)  # local to each memory
        old_top = np.where(
            self.top_idx >= 0, self.top_idx - np.repeat(self.theme_offsets[:-1], old_t)[:, None], -1
        )
        if x is not None:
            self.x = x
        self.labels = take_rows2(self.labels, blocks.labels.astype(np.int64, copy=False), n_take)
        members = take_rows2(old_members, blocks.members.astype(np.int64, copy=False), n_take)
        self.offsets, self.theme_offsets = off, t_off
        self.theme_label = take_rows2(
            self.theme_label, blocks.theme_label.astype(np.int64, copy=False), t_take
        )
        self.theme_sum = take_rows2(self.theme_sum, blocks.theme_sum.astype(np.float64, copy=False), t_take)
        self.theme_count = take_rows2(
            self.theme_count, blocks.theme_count.astype(np.int64, copy=False), t_take
        )
        self.member_offsets = csr_offsets(self.theme_count)
        self.member_rows = members + np.repeat(off[:-1], n_sizes)
        top = take_rows2(old_top, blocks.top_idx.astype(np.int64, copy=False), t_take)
        self.top_idx = np.where(top >= 0, top + np.repeat(t_off[:-1], t_sizes)[:, None], -1)
        self.top_cos = take_rows2(self.top_cos, blocks.top_cos.astype(np.float64, copy=False), t_take)
        f = np.array(self.f, np.float64)
        f[bs_arr] = blocks.f
        self.f = f


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
    def from_lists(
        cls, state: PartitionState, items: list[tuple[int, list[int], list[np.ndarray]]]
    ) -> Candidates:
        """items: (memory b, labels of themes to remove, groups of GLOBAL node rows to add).

        The groups must cover exactly the members of the removed themes (split, merge, move).
        """
        memory, rem, rem_sizes, add_sizes, groups = [], [], [], [], []
        for c, (b, remove, add) in enumerate(items):
            rows = [state.theme_row(b, int(t)) for t in remove]
            if len(set(rows)) != len(rows):
                raise ValueError(f"candidate {c}: a theme is removed twice")
            want = (
                np.sort(np.concatenate([state.members_of(r) for r in rows]))
                if rows
                else np.zeros(0, np.int64)
            )
            add = [np.asarray(g, dtype=np.int64) for g in add if len(g)]
            got = np.sort(np.concatenate(add)) if add else np.zeros(0, np.int64)
            if not np.array_equal(want, got):
                raise ValueError(
                    f"candidate {c} (memory {b}): the added groups must cover exactly the members of the removed themes"
                )
            memory.append(b)
            rem.extend(rows)
            rem_sizes.append(len(rows))
            add_sizes.append(len(add))
            groups.extend(add)
        return cls(
            memory=np.array(memory, dtype=np.int64),
            rem_offsets=csr_offsets(rem_sizes),
            rem_rows=np.array(rem, dtype=np.int64),
            add_offsets=csr_offsets(add_sizes),
            group_offsets=csr_offsets([len(g) for g in groups]),
            members=np.concatenate(groups).astype(np.int64) if groups else np.zeros(0, np.int64),
        )
