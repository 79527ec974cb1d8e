"""Split proposals for overfull themes: seeded spherical k-means (k = 2..4, several restarts) and
the authors' connected components of the member graph at a cosine threshold; both compete under f(P).

Seeds derive from ``seed`` and the members' bytes, so a theme gets the same proposals whatever
else is in the batch (builds are reproducible shard by shard).
"""

from __future__ import annotations

import zlib

import numpy as np

from ..ops.backends import host_backend
from ..ops.checks import check_offsets
from ..ops.kmeans import spherical_kmeans
from ..ops.kmeans.reference import first_appearance, lloyd, pick_centre
from ..ops.rows import dot4_gram, unit_rows


def _kmeans_drawing(x: np.ndarray, k: int, rng: np.random.Generator, iters: int = 12) -> np.ndarray:
    """Labels [n] (by first appearance) of one k-means++ / Lloyd run drawing from ``rng`` as it goes:
    the per-theme rule ``spherical_kmeans``' pre-drawn runs reproduce, kept for the themes where
    seeding finds every row on a centre (then an integer is drawn, not a uniform)."""
    n = x.shape[0]
    centers = [x[rng.integers(n)]]
    for _ in range(1, k):
        w = np.maximum(1.0 - np.max(dot4_gram(x, np.stack(centers)), axis=1), 0.0)
        pick = pick_centre(w, rng.random())
        centers.append(x[pick] if pick is not None else x[rng.integers(n)])
    return lloyd(x, np.stack(centers), iters)


def connected_components(x: np.ndarray, threshold: float) -> np.ndarray:
    """Component labels [n] (each row's label the smallest row index of its component) of the graph
    with an edge i - j (i < j) where cos(x_i, x_j) >= threshold, read from the upper triangle of the
    cosines as the authors' union-find did (``dot4_gram``: the same edges on every CPU); found by propagating the smallest label along edges
    (a theme's diameter in vectorised steps, not a Python loop over edges)."""
    n = x.shape[0]
    adj = np.triu(dot4_gram(x, x) >= threshold, 1)
    adj |= adj.T
    np.fill_diagonal(adj, True)
    labels = np.arange(n)
    while True:
        new = np.where(adj, labels[None, :], n).min(axis=1)
        if np.array_equal(new, labels):
            return labels
        labels = new


def split_proposals(
    x,
    members_offsets,
    *,
    ks: tuple[int, ...] = (2, 3, 4),
    n_init: int = 4,
    seed: int = 0,
    cc_threshold: float = 0.5,
    backend: str = "auto",
) -> list[list[np.ndarray]]:
    """For each theme (rows ``members_offsets[t]:members_offsets[t+1]`` of x), distinct candidate
    label arrays [n_t] with values 0..k-1, every value used: the k-means runs (k in ``ks``,
    ``n_init`` each, in that order) of every theme in one ``spherical_kmeans`` call, drawn from the
    theme's own generator, then the connected components. ``backend``: the construction's (a GPU
    one runs the k-means on the host's best)."""
    x = unit_rows(x)
    off = check_offsets("members_offsets", members_offsets, x.shape[0])
    seg, ks_run, first, uniforms = [], [], [], []
    for t in range(len(off) - 1):
        n = int(off[t + 1] - off[t])
        rng = np.random.default_rng([seed, zlib.crc32(x[off[t] : off[t + 1]].tobytes())])
        for k in ks:
            if k >= n or k < 2:
                continue
            for _ in range(
                n_init
            ):  # the draws of one run: its first centre, then one uniform per further centre
                seg.append(t)
                ks_run.append(k)
                first.append(rng.integers(n))
                uniforms.append(rng.random(k - 1))
    labels, ok = spherical_kmeans(
        x,
        off,
        np.array(seg, dtype=np.int64),
        np.array(ks_run, dtype=np.int64),
        np.array(first, dtype=np.int64),
        np.concatenate(uniforms) if uniforms else np.zeros(0),
        backend=host_backend(backend),
    )
    redo = {seg[q] for q in np.flatnonzero(~ok)}
    out: list[list[np.ndarray]] = []
    pos, q = 0, 0
    for t in range(len(off) - 1):
        xt = x[off[t] : off[t + 1]]
        n = xt.shape[0]
        runs = []
        while q < len(seg) and seg[q] == t:
            runs.append(labels[pos : pos + n])
            pos, q = pos + n, q + 1
        if t in redo:  # a seeding found every row on a centre: the theme's runs again, drawing as they go
            rng = np.random.default_rng([seed, zlib.crc32(xt.tobytes())])
            runs = [_kmeans_drawing(xt, k, rng) for k in ks if 2 <= k < n for _ in range(n_init)]
        seen: dict[bytes, np.ndarray] = {}
        for lab in runs:
            if lab.max() >= 1:
                seen.setdefault(lab.tobytes(), lab)
        if n >= 2:
            cc = first_appearance(connected_components(xt, cc_threshold))
            if cc.max() >= 1:
                seen.setdefault(cc.tobytes(), cc)
        out.append(list(seen.values()))
    return out
