"""Float64 NumPy reference of ``spherical_kmeans``: the theme stage's k-means, one run at a time, in the
kernel's fixed order (cosines and norms by ``dot4``, totals by ``sum4``, centre sums row by row)."""

from __future__ import annotations

import numpy as np

from ..rows import dot4, row_norms, row_sum_in_order
from ..rows.reference import dot4_gram


def first_appearance(labels: np.ndarray) -> np.ndarray:
    """Relabel by first appearance (0, 1, ...) so equal partitions compare equal."""
    _, first, inv = np.unique(labels, return_index=True, return_inverse=True)
    rank = np.argsort(np.argsort(first))
    return rank[inv].astype(np.int64)


def pick_centre(w: np.ndarray, u: float) -> int | None:
    """k-means++'s draw from weights w [n] (>= 0) and a uniform u in [0, 1): with c the prefix sums of
    w in row order, the first row with c[i] > u * c[n - 1] (the last row if none); None when c[n - 1]
    is not positive (every weight zero). ``csrc/cpu/kmeans_runs.inc`` draws alike."""
    c = np.cumsum(w)  # sequential: c[i] = c[i - 1] + w[i]
    if not c[-1] > 0:
        return None
    above = np.flatnonzero(c > u * c[-1])
    return int(above[0]) if above.size else len(w) - 1


def seeded_run(x: np.ndarray, k: int, first: int, uniforms: np.ndarray, iters: int) -> np.ndarray | None:
    """Labels [n] (by first appearance) of one cosine k-means of the unit rows x [n, d]: k-means++ from
    centre ``first``, the j-th further centre ``pick_centre(w, uniforms[j - 1])`` (w = 1 - max cosine
    to the centres so far, cosines by ``dot4``), then Lloyd steps that refill an empty cluster with the
    point farthest from its centre. None when every weight is zero (all rows on a centre: the caller
    draws an integer instead)."""
    centers = [x[first]]
    for j in range(1, k):
        w = np.maximum(1.0 - np.max(dot4_gram(x, np.stack(centers)), axis=1), 0.0)
        pick = pick_centre(w, float(uniforms[j - 1]))
        if pick is None:
            return None
        centers.append(x[pick])
    return lloyd(x, np.stack(centers), iters)


def lloyd(x: np.ndarray, c: np.ndarray, iters: int) -> np.ndarray:
    """Labels [n] (by first appearance) after up to ``iters`` Lloyd steps of the unit rows x [n, d] from
    the centres c [k, d]: nearest centre (the first on a tie), an empty cluster refilled with the point
    farthest from its centre, centres renormalised, stop when they hold (``np.allclose``)."""
    k = c.shape[0]
    labels = np.zeros(x.shape[0], dtype=np.int64)
    for _ in range(iters):
        labels = np.argmax(dot4_gram(x, c), axis=1)
        if np.bincount(labels, minlength=k).min() == 0:
            for j in range(k):
                if not np.any(labels == j):
                    far = int(np.argmin(dot4(x, c[labels])))
                    labels[far] = j
        new = np.zeros_like(c)
        for j in range(k):  # running sums in row order
            members = x[labels == j]
            if len(members):  # (a refill can empty another cluster: its sum stays zero)
                new[j] = row_sum_in_order(members)
        norms = row_norms(new, keepdims=True)
        new = np.divide(new, norms, out=c.copy(), where=norms > 0)
        if np.all(np.abs(new - c) <= 1e-8 + 1e-5 * np.abs(c)):  # np.allclose(new, c) for finite input
            break
        c = new
    return first_appearance(labels)


def spherical_kmeans(
    x, offsets, segment, k, first, uniforms, *, iters: int = 12
) -> tuple[np.ndarray, np.ndarray]:
    """See ``ops.kmeans.spherical_kmeans`` (checked inputs)."""
    uo = np.concatenate([[0], np.cumsum(k - 1)])
    out, ok = [], np.ones(len(segment), dtype=bool)
    for q, s in enumerate(segment):
        xs = x[offsets[s] : offsets[s + 1]]
        lab = seeded_run(xs, int(k[q]), int(first[q]), uniforms[uo[q] : uo[q + 1]], iters)
        ok[q] = lab is not None
        out.append(lab if lab is not None else np.zeros(len(xs), dtype=np.int64))
    return (np.concatenate(out) if out else np.zeros(0, dtype=np.int64)), ok
