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
