"""The theme stage's split proposals run by run (one k-means run at a time, drawing from the theme's
generator as it goes), with the fixed-order arithmetic of the rule (cosines and norms by ``dot4``,
centre sums row by row, a further centre the first row whose prefix sum of the weights exceeds a
uniform times their total): the oracle tests/ops/test_kmeans.py holds the batched op and
``construct/theme_split.split_proposals`` to."""

from __future__ import annotations

import itertools
import zlib

import numpy as np

from xmemory_gpu.ops.checks import check_offsets
from xmemory_gpu.ops.rows import dot4, dot4_gram, row_norms, row_sum_in_order, unit_rows


def _canonical(labels: np.ndarray) -> np.ndarray:
    """Relabel by first appearance (0, 1, ...) so equal partitions compare equal."""
    _, first, inv = np.unique(labels, return_index=True, return_inverse=True)
    rank = np.argsort(np.argsort(first))
    return rank[inv].astype(np.int64)


def spherical_kmeans(x: np.ndarray, k: int, rng: np.random.Generator, iters: int = 12) -> np.ndarray:
    """Labels [n] of a cosine k-means with k-means++ seeding; no cluster is left empty."""
    n = x.shape[0]
    centers = [x[rng.integers(n)]]
    for _ in range(1, k):
        w = [max(1.0 - v, 0.0) for v in np.max(dot4_gram(x, np.stack(centers), backend="reference"), axis=1)]
        c = [float(v) for v in itertools.accumulate(w)]  # prefix sums, one add at a time
        if c[-1] > 0:
            bar = rng.random() * c[-1]
            centers.append(x[next((i for i, v in enumerate(c) if v > bar), n - 1)])
        else:
            centers.append(x[rng.integers(n)])
    c = np.stack(centers)
    labels = np.zeros(n, dtype=np.int64)
    for _ in range(iters):
        labels = np.argmax(dot4_gram(x, c, backend="reference"), axis=1)
        if np.bincount(labels, minlength=k).min() == 0:
            for j in range(k):  # refill an empty cluster with the point farthest from its centre
                if not np.any(labels == j):
                    far = int(np.argmin(dot4(x, c[labels])))
                    labels[far] = j
        new = np.zeros_like(c)
        for j in range(k):  # running sums in row order: the bits of np.add.at
            members = x[labels == j]
            if len(members):  # (a refill can empty another cluster: its sum stays zero, as before)
                new[j] = row_sum_in_order(members)
        norms = row_norms(new, keepdims=True)
        new = np.divide(new, norms, out=c.copy(), where=norms > 0)
        if np.all(
            np.abs(new - c) <= 1e-8 + 1e-5 * np.abs(c)
        ):  # np.allclose(new, c) for finite input, without its overhead
            break
        c = new
    return labels


def connected_components(x: np.ndarray, threshold: float) -> np.ndarray:
    """Component labels of the graph with an edge where cos(x_i, x_j) >= threshold."""
    n = x.shape[0]
    parent = np.arange(n)

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    ii, jj = np.nonzero(np.triu(x @ x.T >= threshold, 1))
    for i, j in zip(ii, jj):
        ri, rj = find(int(i)), find(int(j))
        if ri != rj:
            parent[max(ri, rj)] = min(ri, rj)
    return np.array([find(i) for i in range(n)])


def split_proposals(
    x,
    members_offsets,
    *,
    ks: tuple[int, ...] = (2, 3, 4),
    n_init: int = 4,
    seed: int = 0,
    cc_threshold: float = 0.5,
) -> list[list[np.ndarray]]:
    """For each theme (rows ``members_offsets[t]:members_offsets[t+1]`` of x), distinct candidate
    label arrays [n_t] with values 0..k-1, every value used."""
    x = unit_rows(x)
    off = check_offsets("members_offsets", members_offsets, x.shape[0])
    out: list[list[np.ndarray]] = []
    for t in range(len(off) - 1):
        xt = x[off[t] : off[t + 1]]
        n = xt.shape[0]
        rng = np.random.default_rng([seed, zlib.crc32(xt.tobytes())])
        seen: dict[bytes, np.ndarray] = {}
        for k in ks:
            if k >= n or k < 2:
                continue
            for _ in range(n_init):
                lab = _canonical(spherical_kmeans(xt, k, rng))
                if lab.max() >= 1:
                    seen.setdefault(lab.tobytes(), lab)
        if n >= 2:
            cc = _canonical(connected_components(xt, cc_threshold))
            if cc.max() >= 1:
                seen.setdefault(cc.tobytes(), cc)
        out.append(list(seen.values()))
    return out
