"""Random ragged coverage-selection problems, shared by the tests and the benchmarks."""

from __future__ import annotations

import numpy as np


def random_problem(rng: np.random.Generator, sizes: list[int], k: int, *, edge_p: float = 0.7):
    """cand_offsets [Q+1], nbr_idx [M, k] int32 local positions (-1 none), nbr_w [M, k] float32 > 0,
    relevance [M] float32 in descending order per query."""
    off = np.zeros(len(sizes) + 1, dtype=np.int64)
    np.cumsum(sizes, out=off[1:])
    m = int(off[-1])
    idx = np.full((m, k), -1, np.int32)
    w = np.zeros((m, k), np.float32)
    rel = np.zeros(m, np.float32)
    for q, n in enumerate(sizes):
        s = int(off[q])
        if n == 0:
            continue
        rel[s : s + n] = np.sort(rng.uniform(0.1, 0.9, n))[::-1]
        for i in range(n):
            has = rng.random(k) < edge_p
            idx[s + i] = np.where(has, rng.integers(0, n, k), -1)
            w[s + i] = np.where(has, rng.uniform(0.05, 1.0, k), 0.0)
    return off, idx, w, rel
