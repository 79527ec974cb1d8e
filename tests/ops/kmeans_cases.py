"""Inputs shared by tests/ops/test_kmeans.py and benchmarks/bench_kmeans.py: ragged themes of
clustered rows, and the k-means draws ``construct/theme_split.split_proposals`` makes for them."""

from __future__ import annotations

import zlib

import numpy as np


def clustered_themes(rng: np.random.Generator, sizes: list[int], d: int) -> tuple[np.ndarray, np.ndarray]:
    """Ragged themes: clustered rows, some exact duplicates, a theme of one repeated row."""
    rows = []
    for t, n in enumerate(sizes):
        centres = rng.standard_normal((3, d))
        x = centres[rng.integers(3, size=n)] + 0.4 * rng.standard_normal((n, d))
        if n > 4 and t % 3 == 1:
            x[n // 2 :] = x[: n - n // 2]  # duplicated rows
        if t % 5 == 4:
            x[:] = x[0]  # every row the same: seeding weights all zero
        rows.append(x)
    return np.concatenate(rows), np.cumsum([0] + sizes)


def split_draws(x, off, ks, n_init, seed):
    """The runs' segments, k, first centres and uniforms as split_proposals draws them."""
    seg, kk, first, u = [], [], [], []
    for t in range(len(off) - 1):
        n = int(off[t + 1] - off[t])
        rng = np.random.default_rng([seed, zlib.crc32(x[off[t] : off[t + 1]].tobytes())])
        for k in ks:
            for _ in range(n_init if 2 <= k < n else 0):
                seg.append(t), kk.append(k), first.append(rng.integers(n)), u.append(rng.random(k - 1))
    return np.array(seg), np.array(kk), np.array(first), np.concatenate(u)
