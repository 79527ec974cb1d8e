"""Row-wise helpers on host arrays (the construction's exact-bit arithmetic)."""

from __future__ import annotations

import functools

import numpy as np

from .checks import csr_offsets
from .devices import host


@functools.cache
def compiled(name: str):
    """``_C.<name>`` when the compiled module is built, else None (the NumPy steps)."""
    try:
        from .. import _C
    except ImportError:
        return None
    return getattr(_C, name)


def add_rows_in_order(
    sums: np.ndarray, group: np.ndarray, x: np.ndarray, rows: np.ndarray, *, native: bool = True
) -> None:
    """``np.add.at(sums, group, x[rows])``, bit for bit, in place: each group's sum continues from its
    current value with its rows in the given order. sums float64 [k, d], group [m] in [0, k) (the C++
    pass refuses another index with ``ValueError``, where add.at would wrap a negative one), x [N, d]
    float32 or float64, rows [m] in [0, N). One C++ pass when the compiled module is built (and
    ``native``); else step i adds the i-th row of every group that has one (a few dozen vectorised
    steps: a theme holds at most a session's statements more than the cap), instead of add.at's
    element-by-element loop."""
    if group.size == 0:
        return
    add = compiled("add_rows") if native else None
    if (
        add is not None
        and sums.dtype == np.float64
        and sums.flags.c_contiguous
        and sums.flags.writeable
        and sums.flags.aligned
        and x.dtype in (np.float32, np.float64)
        and x.flags.aligned
        and group.dtype.kind in "iu"
        and rows.dtype.kind in "iu"
        and not np.may_share_memory(sums, x)
    ):
        add(
            sums,
            group.astype(np.int64, copy=False),
            np.ascontiguousarray(x),
            rows.astype(np.int64, copy=False),
        )
        return  # (rows of the sums themselves: the NumPy steps, which read x before writing, as add.at copies)
    order = np.argsort(group, kind="stable")
    t, r = group[order], rows[order]
    first = np.flatnonzero(np.r_[True, t[1:] != t[:-1]])  # each touched group's first row in the sorted order
    lens = np.diff(np.r_[first, len(t)])
    touched = t[first]
    acc = sums[touched]
    for i in range(int(lens.max())):
        g = np.flatnonzero(lens > i)
        acc[g] += x[r[first[g] + i]]
    sums[touched] = acc


def live_rows(
    items: list[tuple[np.ndarray, np.ndarray, int]], d: int, *, native: bool = True
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The live slots of many column sets, each ``(alive [cap] bool, sums [cap, d] float64, n_slots)``:
    (slots [L] int64, item b's the live s < n_slots ascending at ``slots[off[b]:off[b+1]]``; off [B+1]
    int64; rows [L, d] float64 their sums), the bits of concatenating each item's
    ``sums[np.flatnonzero(alive[:n_slots])]``. One C++ pass when the compiled module is built (and
    ``native``) and the columns are C-contiguous bool / float64, else those NumPy steps."""
    fn = compiled("live_rows") if native else None
    if fn is not None and all(
        a.dtype == np.bool_ and s.dtype == np.float64 and a.flags.c_contiguous and s.flags.c_contiguous
        for a, s, _ in items
    ):
        return fn(items, int(d))
    live = [np.flatnonzero(a[:n]) for a, _, n in items]
    off = csr_offsets([len(v) for v in live])
    rows = np.concatenate([s[v] for (_, s, _), v in zip(items, live)]) if off[-1] else np.zeros((0, d))
    return (np.concatenate(live).astype(np.int64) if live else np.zeros(0, np.int64)), off, rows


def take_rows2(a: np.ndarray, b: np.ndarray, take: np.ndarray, *, native: bool = True) -> np.ndarray:
    """``np.concatenate([a, b])[take]`` (a [na, ...], b [nb, ...] of one numeric dtype and row shape,
    take [n] in [0, na + nb)) without forming the concatenation: one copy of the rows taken, one C++
    call when the compiled module is built (and ``native``)."""
    fn = compiled("take_rows2") if native else None
    if (
        fn is not None
        and a.dtype == b.dtype
        and a.dtype.kind in "biuf"
        and a.ndim == b.ndim >= 1
        and a.shape[1:] == b.shape[1:]
    ):
        return fn(
            np.ascontiguousarray(a), np.ascontiguousarray(b), np.ascontiguousarray(take, dtype=np.int64)
        )
    return np.concatenate([a, b])[take]


def row_norms(x: np.ndarray, *, keepdims: bool = False, native: bool = True) -> np.ndarray:
    """Euclidean norms of the rows of a real x [m, d]: [m] (or [m, 1]). The bits of
    ``np.linalg.norm(x, axis=1)`` (the same square, sum and root), without its argument handling,
    which costs more than the arithmetic on the small blocks of the theme stage. One C++ pass for
    C-contiguous float64 x when the compiled module is built (and ``native``): NumPy's pairwise sum of
    the squares (``csrc/cpu/rows.cpp``), the same bits (other layouts: NumPy, which sums them in
    another order)."""
    fn = compiled("row_norms") if native else None
    if fn is not None and x.dtype == np.float64 and x.ndim == 2 and x.flags.c_contiguous:  # (NumPy sums other
        out = fn(x, False, False)  # layouts in another order)
        return out[:, None] if keepdims else out
    return np.sqrt(np.add.reduce(x * x, axis=1, keepdims=keepdims))


def segment_sums(v: np.ndarray, off: np.ndarray, *, native: bool = True) -> np.ndarray:
    """``np.sum(v[off[b]:off[b + 1]])`` of every segment b of v [n] float64 (off [nb+1]): [nb], the
    same bits (NumPy's pairwise sum), in one C++ call when the compiled module is built (and
    ``native``), else one NumPy sum per segment."""
    v = np.ascontiguousarray(v, dtype=np.float64)
    off = np.ascontiguousarray(off, dtype=np.int64)
    fn = compiled("segment_sums") if native else None
    if fn is not None:
        return fn(v, off)
    return np.array([v[int(a) : int(b)].sum() for a, b in zip(off[:-1], off[1:])], np.float64).reshape(-1)


def unit_rows(x, *, dtype=np.float64, native: bool = True) -> np.ndarray:
    """[n, d] rows scaled to unit norm in float64 (zero rows stay zero), returned as ``dtype``
    (float64, or float32 rounded from them); x any real array, host or device. One C++ pass when
    the compiled module is built (and ``native``), the NumPy steps' bits."""
    x = np.asarray(host(x), dtype=np.float64)
    fn = compiled("row_norms") if native else None
    if (
        fn is not None
        and x.ndim == 2
        and x.flags.c_contiguous
        and np.dtype(dtype) in (np.float64, np.float32)
    ):
        return fn(x, True, np.dtype(dtype) == np.float32)
    norms = np.sqrt(np.add.reduce(x * x, axis=1, keepdims=True))
    return np.divide(x, norms, out=np.zeros_like(x), where=norms > 0).astype(dtype, copy=False)


def row_sum_in_order(m: np.ndarray) -> np.ndarray:
    """The rows of m [r, d] (r >= 1) added one after another: the bits of ``np.cumsum(m, axis=0)[-1]``
    without its [r, d] output (10x faster at a theme's size). NumPy reduces a C-contiguous array over
    its rows with the row as the inner loop, one row at a time; a single column is contiguous and
    would be summed pairwise, so it keeps the cumulative sum (tests/test_themes.py checks both)."""
    m = np.ascontiguousarray(m)
    return np.add.reduce(m, axis=0) if m.shape[1] > 1 else np.cumsum(m, axis=0)[-1]


def dot4(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Row-wise dot products over the last axis of a [..., d] and b [d] (or [..., d]) in float64, in the
    order of ``dot4`` in ``csrc/include/xmemory/dot4.inc``: 4 x 8 lanes from zero, lane (u, l) taking
    k = 32t + 8u + l in order (np.cumsum: sequential), the tail k >= 32q added in order from zero, then
    per l in order the lanes' ((u0 + u1) + (u2 + u3))."""
    p = a * b.astype(np.float64)
    lead, d = p.shape[:-1], p.shape[-1]
    q = d // 32
    lanes = np.zeros((*lead, 1, 4, 8))
    if q:
        lanes = np.concatenate([lanes, p[..., : 32 * q].reshape(*lead, q, 4, 8)], axis=-3)
    acc = np.cumsum(lanes, axis=-3)[..., -1, :, :]  # [..., 4, 8]
    total = np.zeros(lead)
    for k in range(32 * q, d):
        total = total + p[..., k]
    for lane in range(8):
        total = total + ((acc[..., 0, lane] + acc[..., 1, lane]) + (acc[..., 2, lane] + acc[..., 3, lane]))
    return total


def dot4_gram(a: np.ndarray, b: np.ndarray, *, native: bool = True) -> np.ndarray:
    """``dot4`` of every row of a [n, d] with every row of b [m, d] (real, taken as float64): [n, m]
    float64, the same bits on every CPU (a BLAS product's depend on its kernel). One C++ call when the
    compiled module is built (and ``native``), else NumPy ``dot4``."""
    a = np.ascontiguousarray(host(a), dtype=np.float64)
    b = np.ascontiguousarray(host(b), dtype=np.float64)
    if a.ndim != 2 or b.ndim != 2 or a.shape[1] != b.shape[1]:
        raise ValueError(f"dot4_gram: expected a [n, d] and b [m, d], got shapes {a.shape} and {b.shape}")
    fn = compiled("dot4_gram") if native else None
    if fn is not None:
        return fn(a, b)
    out = np.zeros((len(a), len(b)))
    for i in range(len(a) if a.shape[1] and len(b) else 0):  # row by row: O(m d) memory, not O(n m d)
        out[i] = dot4(b, a[i])
    return out


def drift_runs(
    x: np.ndarray, hard: np.ndarray, min_messages: int, drift_threshold: float, *, native: bool = True
) -> np.ndarray:
    """The starts [r] int64 (0 first) of runs of x [n, d] unit rows (n >= 1): a run is cut before
    row i when ``hard[i]`` or, once it holds ``min_messages`` rows, when the cosine of x_i to the run's
    float64 sum, ``dot4(x_i, s) / sqrt(dot4(s, s))``, is below ``drift_threshold``. One C++ pass when
    the compiled module is built (and ``native``) and x is float32, else this loop (rows of another
    real dtype are read as they are, not cast to float32)."""
    x = np.asarray(host(x))
    hard = np.ascontiguousarray(hard, dtype=bool)
    if x.ndim != 2 or hard.shape != (x.shape[0],) or x.shape[0] < 1:
        raise ValueError(
            f"drift_runs: expected x [n, d] (n >= 1) and hard [n], got shapes {x.shape} and {hard.shape}"
        )
    fn = compiled("drift_runs") if native and x.dtype == np.float32 and type(min_messages) is int else None
    if fn is not None:
        return fn(np.ascontiguousarray(x), hard, min_messages, float(drift_threshold))
    starts, start, acc = [0], 0, x[0].astype(np.float64)
    for i in range(1, x.shape[0]):
        cut = bool(hard[i])
        if not cut and i - start >= min_messages:
            norm = float(np.sqrt(dot4(acc, acc)))
            cut = norm > 0 and float(dot4(x[i].astype(np.float64), acc)) / norm < drift_threshold
        if cut:
            starts.append(i)
            start, acc = i, x[i].astype(np.float64)
        else:
            acc = acc + x[i]
    return np.array(starts, np.int64)
