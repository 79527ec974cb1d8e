"""Random ragged coverage-selection problems, shared by the tests and the benchmarks."""

from __future__ import annotations

import numpy as np

# (alpha, target) settings the cross-backend tests sweep: the authors' (0.7, 1.0), the extremes of
# alpha, and targets that stop early (0.0: after the first pick)
SETTINGS = [(0.7, 1.0), (0.7, 0.5), (0.3, 0.8), (1.0, 1.0), (0.0, 1.0), (0.5, 0.0)]


def random_problem(rng: np.random.Generator, sizes: list[int], k: int, *, edge_p: float = 0.7):
    """cand_offsets [Q+1], nbr_idx [M, k] int32 local positions (-1 none), nbr_w [M, k] float32 > 0,
    relevance [M] float32 in descending order per query; drawn in whole arrays (the GPU benchmarks'
    sizes too)."""
    n = np.asarray(sizes, np.int64)
    off = np.zeros(len(sizes) + 1, dtype=np.int64)
    np.cumsum(n, out=off[1:])
    m = int(off[-1])
    seg = np.repeat(np.arange(len(sizes)), n)
    rel = rng.uniform(0.1, 0.9, m).astype(np.float32)
    rel = rel[np.lexsort((-rel, seg))]  # descending within each query
    has = rng.random((m, k)) < edge_p
    idx = np.where(has, (rng.random((m, k)) * np.repeat(n, n)[:, None]).astype(np.int64), -1).astype(np.int32)
    w = np.where(has, rng.uniform(0.05, 1.0, (m, k)), 0.0).astype(np.float32)
    return off, idx, w, rel


def varied_problem(rng: np.random.Generator, n_queries: int, k: int, *, max_n: int = 40):
    """Many small queries with every feature the selection must get right: empty queries, single
    candidates, repeated neighbours (the largest weight counts), self listed as a neighbour,
    no edges, tied relevance (a coarse grid or all equal) and tied gains (weights on a grid of
    eighths, whose sums are exact in any order), and budgets from 0 to beyond the candidate count.

    Returns (cand_offsets, nbr_idx, nbr_w, relevance float64, budgets int64)."""
    kind = rng.integers(0, 8, n_queries)
    sizes = np.where(kind == 0, 0, np.where(kind == 1, 1, rng.integers(2, max_n + 1, n_queries)))
    off = np.zeros(n_queries + 1, np.int64)
    np.cumsum(sizes, out=off[1:])
    m = int(off[-1])
    idx = np.full((m, k), -1, np.int32)
    w = np.zeros((m, k), np.float32)
    rel = np.zeros(m, np.float64)
    for q in range(n_queries):
        s, n = int(off[q]), int(sizes[q])
        if n == 0:
            continue
        style = rng.integers(0, 4)
        if style == 0:
            rel[s : s + n] = np.sort(rng.uniform(-0.2, 0.9, n))[::-1]  # distinct, descending (as Stage I)
        elif style == 1:
            rel[s : s + n] = rng.integers(0, 4, n) / 4.0  # ties, unsorted
        elif style == 2:
            rel[s : s + n] = 0.3  # constant: rel~ = 0.5 for all
        else:
            rel[s : s + n] = rng.normal(size=n)
        p = rng.choice([0.0, 0.3, 0.7, 1.0])
        dyadic = rng.random() < 0.5
        for i in range(n):
            has = rng.random(k) < p
            row = rng.integers(0, n, k)
            if k > 1 and rng.random() < 0.3:
                row[1] = row[0]  # a repeated neighbour
            if rng.random() < 0.1:
                row[rng.integers(0, k)] = i  # self listed
            wr = rng.integers(1, 9, k) / 8.0 if dyadic else rng.uniform(0.05, 1.0, k)
            idx[s + i] = np.where(has, row, -1)
            w[s + i] = np.where(has, wr, 0.0)
    budgets = np.where(rng.random(n_queries) < 0.2, 10**6, rng.integers(0, max_n + 3, n_queries)).astype(
        np.int64
    )
    return off, idx, w, rel, budgets
