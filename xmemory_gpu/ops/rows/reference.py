"""The row helpers in NumPy (``ops.rows``): the steps each C++ pass is tested against, bit for bit."""

from __future__ import annotations

import numpy as np

from ..checks import csr_offsets


def sum4(p: np.ndarray) -> np.ndarray:
    """Sums over the last axis of p [..., d] (float64) in the order of ``lanes4`` in
    ``csrc/include/xmemory/dot4.inc``: 4 x 8 lanes from zero, lane (u, l) taking k = 32t + 8u + l in
    order (np.cumsum: sequential), the tail k >= 32q added in order from zero, then per l in order the
    lanes' ((u0 + u1) + (u2 + u3))."""
    p = np.asarray(p, np.float64)
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


def dot4(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Row-wise dot products over the last axis of a [..., d] and b [d] (or [..., d]) in float64: each
    product rounded, then ``sum4`` (``dot4`` in ``csrc/include/xmemory/dot4.inc``)."""
    return sum4(a * b.astype(np.float64))


def add_rows_in_order(sums: np.ndarray, group: np.ndarray, x: np.ndarray, rows: np.ndarray) -> None:
    """Step i adds the i-th row of every group that has one (a few dozen vectorised steps: a theme
    holds at most a session's statements more than the cap), instead of add.at's element loop."""
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
    items: list[tuple[np.ndarray, np.ndarray, int]], d: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    live = [np.flatnonzero(a[:n]) for a, _, n in items]
    off = csr_offsets([len(v) for v in live])
    rows = np.concatenate([s[v] for (_, s, _), v in zip(items, live)]) if off[-1] else np.zeros((0, d))
    return (np.concatenate(live).astype(np.int64) if live else np.zeros(0, np.int64)), off, rows


def take_rows2(a: np.ndarray, b: np.ndarray, take: np.ndarray) -> np.ndarray:
    return np.concatenate([a, b])[take]


def row_norms(x: np.ndarray, keepdims: bool) -> np.ndarray:
    norms = np.sqrt(dot4(x, x))
    return norms[:, None] if keepdims else norms


def segment_sums(v: np.ndarray, off: np.ndarray) -> np.ndarray:
    return np.array([sum4(v[int(a) : int(b)]) for a, b in zip(off[:-1], off[1:])], np.float64).reshape(-1)


def unit_rows(x: np.ndarray, dtype: np.dtype) -> np.ndarray:
    norms = row_norms(x, keepdims=True)
    return np.divide(x, norms, out=np.zeros_like(x), where=norms > 0).astype(dtype, copy=False)


def dot4_gram(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    out = np.zeros((len(a), len(b)))
    for i in range(len(a) if a.shape[1] and len(b) else 0):  # row by row: O(m d) memory, not O(n m d)
        out[i] = dot4(b, a[i])
    return out


def drift_runs(x: np.ndarray, hard: np.ndarray, min_messages: int, drift_threshold: float) -> np.ndarray:
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
