"""float64 NumPy reference for f(P), written from the paper's definitions (arXiv 2602.02007, the sparsity-semantics objective).

f(P) = SparsityScore + SemScore over the K non-empty themes of one memory (N nodes, sizes n_k):
SparsityScore = N^2 / (K sum_k n_k^2); SemScore = (1/K) sum_k cohesion_k g(s_k) with
cohesion_k = mean_{i in C_k} cos(x_i, mu_k) (mu_k the mean of the members), s_k = max_{j != k}
cos(mu_k, mu_j), g(s) = exp(-(s - m)^2 / (2 sigma^2)), m = median(s), sigma = median(|s - m|) + eps.

Edge cases: an empty memory has f = 0; a single theme has s_1 = 0 (no other theme), so g = 1; when
all s_k are equal (MAD = 0) sigma = eps and every theme gets g = 1; cos with a zero vector is 0.
"""

from __future__ import annotations

import numpy as np

from ..rows import add_rows_in_order, dot4_gram, segment_sums
from .state import _KEY, exp_fixed


def _cos(a: np.ndarray, b: np.ndarray) -> float:
    na, nb = np.linalg.norm(a), np.linalg.norm(b)
    return float(a @ b / (na * nb)) if na > 0 and nb > 0 else 0.0


def objective_one(x: np.ndarray, labels: np.ndarray, eps: float = 1e-8) -> float:
    """f(P) of one memory: x [n, d] (any norms; normalised here), labels [n] theme labels."""
    n = x.shape[0]
    if n == 0:
        return 0.0
    x = np.asarray(x, dtype=np.float64)
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    x = np.divide(x, norms, out=np.zeros_like(x), where=norms > 0)
    themes = [np.flatnonzero(labels == t) for t in np.unique(labels)]
    k = len(themes)
    sizes = np.array([len(m) for m in themes], dtype=np.float64)
    sparsity = n * n / (k * float(np.sum(sizes**2)))
    mu = [x[m].mean(axis=0) for m in themes]
    cohesion = np.array([np.mean([_cos(x[i], mu[t]) for i in m]) for t, m in enumerate(themes)])
    s = np.zeros(k)
    for a in range(k):
        s[a] = max((_cos(mu[a], mu[b]) for b in range(k) if b != a), default=0.0)
    m = float(np.median(s))
    sigma = float(np.median(np.abs(s - m))) + eps
    g = np.exp(-((s - m) ** 2) / (2 * sigma**2))
    return sparsity + float(np.mean(cohesion * g))


def partition_objective(
    x: np.ndarray, labels: np.ndarray, offsets: np.ndarray, *, eps: float = 1e-8
) -> np.ndarray:
    """f [B] float64 for each CSR segment; labels are local to each segment."""
    return np.array(
        [
            objective_one(x[offsets[b] : offsets[b + 1]], labels[offsets[b] : offsets[b + 1]], eps)
            for b in range(len(offsets) - 1)
        ],
        dtype=np.float64,
    )


def score_candidates(state, cands) -> np.ndarray:
    """f after each candidate, recomputed from scratch on the modified partition (the oracle)."""
    out = np.zeros(cands.n, dtype=np.float64)
    for c in range(cands.n):
        b = int(cands.memory[c])
        s, e = int(state.offsets[b]), int(state.offsets[b + 1])
        labels = state.labels[s:e].copy()
        removed = state.theme_label[cands.rem_rows[cands.rem_offsets[c] : cands.rem_offsets[c + 1]]]
        fresh = int(labels.max(initial=-1)) + 1
        for g in range(cands.add_offsets[c], cands.add_offsets[c + 1]):
            rows = cands.members[cands.group_offsets[g] : cands.group_offsets[g + 1]] - s
            labels[rows] = fresh
            fresh += 1
        assert not np.isin(labels, removed).any()
        out[c] = objective_one(state.x[s:e], labels, state.eps)
    return out


# ---- the partition state's blocks (``state.py``), the NumPy steps its C++ passes are tested against --


def theme_sums(x: np.ndarray, rows: np.ndarray, labels: np.ndarray, row_off: np.ndarray, kept) -> tuple:
    """``state.theme_sums`` in NumPy steps."""
    nb, d = len(row_off) - 1, x.shape[1]
    blk = np.repeat(np.arange(nb, dtype=np.int64), np.diff(row_off))
    uniq, inv = np.unique((blk << _KEY) | labels, return_inverse=True)
    inv = inv.reshape(-1)
    theme_off = np.searchsorted(uniq >> _KEY, np.arange(nb + 1)).astype(np.int64)
    sums = np.zeros((len(uniq), d))
    add = np.ones(len(inv), bool)
    if kept is not None and len(uniq):
        o_key = (np.repeat(np.arange(nb, dtype=np.int64), np.diff(kept.theme_off)) << _KEY) | kept.theme_label
        pos = np.minimum(np.searchsorted(uniq, o_key), len(uniq) - 1)
        old = np.flatnonzero(kept.keep & (uniq[pos] == o_key))
        has = np.zeros(len(uniq), bool)
        has[pos[old]] = True
        sums[pos[old]] = kept.theme_sum[old]
        add = ~has[inv] | (np.arange(len(inv)) - row_off[blk] >= kept.tail[blk])
    add_rows_in_order(sums, inv[add], x, rows[add], backend="reference")
    counts = np.bincount(inv, minlength=len(uniq)).astype(np.int64)
    members = np.argsort(inv, kind="stable").astype(np.int64)
    return theme_off, uniq & (2**_KEY - 1), sums, counts, members - row_off[blk[members]]


def _top2(unit: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """One block's two nearest other centroids (local rows, ties to the lower row, as a stable sort of
    -cos; -1 / -inf none) from its unit centroids [k, d], k >= 2: cosines by ``dot4``'s fixed order (a
    BLAS product's bits depend on the CPU's kernel, and with them which of two near-equal merges goes
    first), then the picks."""
    k = unit.shape[0]
    cos = dot4_gram(unit, unit, backend="reference")
    np.fill_diagonal(cos, -np.inf)
    rows = np.arange(k)
    ti = np.empty((k, 2), np.int64)
    tc = np.empty((k, 2))
    ti[:, 0] = np.argmax(cos, axis=1)
    tc[:, 0] = cos[rows, ti[:, 0]]
    cos[rows, ti[:, 0]] = -np.inf
    ti[:, 1] = np.argmax(cos, axis=1)
    tc[:, 1] = cos[rows, ti[:, 1]]
    ti[~np.isfinite(tc)] = -1
    return ti, tc


def top2_blocks(unit: np.ndarray, theme_off: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``state.top2_blocks``: a NumPy ``_top2`` per block."""
    top_idx = np.full((unit.shape[0], 2), -1, np.int64)
    top_cos = np.full((unit.shape[0], 2), -np.inf)
    for b in range(len(theme_off) - 1):
        t0, t1 = int(theme_off[b]), int(theme_off[b + 1])
        if t1 - t0 > 1:
            top_idx[t0:t1], top_cos[t0:t1] = _top2(unit[t0:t1])
    return top_idx, top_cos


def top2_update(
    unit: np.ndarray, theme_off: np.ndarray, fresh: np.ndarray, prev_idx: np.ndarray, prev_cos: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """``state.top2_update`` in NumPy steps: per block, ``_top2`` whole when 2 x fresh >= k or k < 3,
    else the fresh rows' cosines and each kept row's first two of its kept pair and the fresh rows."""
    top_idx, top_cos = top2_blocks(unit, theme_off)  # the reference's whole blocks, kept where due
    for b in range(len(theme_off) - 1):
        t0, t1 = int(theme_off[b]), int(theme_off[b + 1])
        k = t1 - t0
        fr = np.flatnonzero(fresh[t0:t1])
        if k < 3 or 2 * fr.size >= k:
            continue
        cf = dot4_gram(unit[t0:t1][fr], unit[t0:t1], backend="reference")  # [f, k]
        cf[np.arange(fr.size), fr] = -np.inf
        for i in range(k):
            if fresh[t0 + i]:
                continue
            p, c, v = prev_idx[t0 + i], prev_cos[t0 + i], cf[:, i]
            if (p < 0).any() or not np.isfinite(c).all() or not np.isfinite(v).all():
                continue  # done whole: the reference's full row
            j = np.concatenate([p, fr])
            cos = np.concatenate([c, v])
            order = np.lexsort((j, -cos))[:2]
            top_idx[t0 + i], top_cos[t0 + i] = j[order], cos[order]
    return top_idx, top_cos


def f_blocks(
    norms: np.ndarray, counts: np.ndarray, s: np.ndarray, theme_off: np.ndarray, n: np.ndarray, eps: float
) -> np.ndarray:
    """``state.f_blocks`` in NumPy steps."""
    nb = len(theme_off) - 1
    k = np.diff(theme_off)
    f = np.zeros(nb)
    live = np.flatnonzero((k > 0) & (n > 0))
    if live.size == 0:
        return f
    t_blk = np.repeat(np.arange(nb), k)
    s = np.where(k[t_blk] > 1, s, 0.0)

    def median(v: np.ndarray) -> np.ndarray:
        srt = v[np.lexsort((v, t_blk))]
        lo, hi = srt[theme_off[live] + (k[live] - 1) // 2], srt[theme_off[live] + k[live] // 2]
        out = np.zeros(nb)
        out[live] = np.where(k[live] % 2 == 1, hi, (lo + hi) / 2)
        return out

    m = median(s)
    sigma = median(np.abs(s - m[t_blk])) + eps
    den = 2.0 * (sigma * sigma)
    term = norms / counts * exp_fixed(-((s - m[t_blk]) ** 2) / den[t_blk])
    sumsq = segment_sums(counts.astype(np.float64) ** 2, theme_off, backend="reference")[
        live
    ]  # integers: exact in any order
    # per block, as the per-memory code's Python floats: n * n / (k * sumsq) + sum(term) / k, the sum
    # sum4's over the block's slice; each operation one IEEE rounding either way
    nl, kl = n[live].astype(np.int64), k[live].astype(np.int64)
    f[live] = (nl * nl).astype(np.float64) / (kl.astype(np.float64) * sumsq) + segment_sums(
        term, theme_off, backend="reference"
    )[live] / kl.astype(np.float64)
    return f
