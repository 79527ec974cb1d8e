"""Seeded spherical k-means over ragged segments: the theme stage's split proposals, every run of a
round in one call. The caller draws the randomness (a first centre and k - 1 uniforms per run, from its
own NumPy Generator), so a run's labels are a function of its segment and draws alone, on any backend,
ISA or batch. Host only (a theme is tens of rows): ``reference`` (float64 NumPy) and ``cpu`` (C++)."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..backends import implementation, register, resolve_backend
from ..checks import check_float_matrix, check_index, check_int, check_offsets
from ..devices import host

_ALL = {"reference": "reference", "cpu": "cpu"}
register("spherical_kmeans", __name__, _ALL)


def spherical_kmeans(
    x: Any,
    offsets: Any,
    segment: Any,
    k: Any,
    first: Any,
    uniforms: Any,
    *,
    iters: int = 12,
    backend: str = "auto",
) -> tuple[np.ndarray, np.ndarray]:
    """(labels [sum over runs of their segment's rows] int64, ok [R] bool): run q clusters the rows of
    segment ``segment[q]`` (``offsets`` CSR over x) into ``k[q]`` clusters; its labels, numbered by first
    appearance, follow the previous run's.

    x [N, d] real unit rows (float64 is used); segment, k, first [R] integers with 1 <= k[q] <= n and
    0 <= first[q] < n (n the segment's rows); uniforms [sum(k - 1)] in [0, 1), run q's k[q] - 1 values
    after run q - 1's. Seeding is k-means++ (cosine distance; the j-th further centre drawn with
    ``uniforms``: the first row whose prefix sum of the weights exceeds u times their total,
    ``reference.pick_centre``), then up to ``iters`` Lloyd steps that
    stop when the centres hold (``np.allclose``); an empty cluster takes the row farthest from its
    centre. ``ok[q]`` is False when the seeding weights were all zero (every row on a centre), and run
    q's labels are then zeros. Bad input raises ``ValueError`` naming the argument."""
    name = resolve_backend("spherical_kmeans", backend, on_cuda=False)
    x = np.ascontiguousarray(host(check_float_matrix("x", x)), dtype=np.float64)
    off = check_offsets("offsets", offsets, x.shape[0])
    seg = check_index("segment", segment, len(off) - 1, allow_missing=False).reshape(-1)
    n = (off[1:] - off[:-1])[seg]
    kk = np.asarray(host(k)).reshape(-1)
    if kk.shape != seg.shape or (kk.size and not np.issubdtype(kk.dtype, np.integer)):
        raise ValueError(
            f"k: expected {len(seg)} integers (one per run), got {kk.shape[0]} of dtype {kk.dtype}"
        )
    kk = kk.astype(np.int64)
    bad = np.flatnonzero((kk < 1) | (kk > n))
    if bad.size:
        q = int(bad[0])
        raise ValueError(
            f"k: run {q} asks for {int(kk[q])} clusters of a segment of {int(n[q])} rows (expected 1..{int(n[q])})"
        )
    fi = np.asarray(host(first)).reshape(-1)
    if fi.shape != seg.shape:
        raise ValueError(f"first: expected {len(seg)} values (one per run), got {fi.shape[0]}")
    fi = check_index("first", fi, n, allow_missing=False)
    u = np.ascontiguousarray(host(uniforms), dtype=np.float64).reshape(-1)
    if u.shape[0] != int((kk - 1).sum()):
        raise ValueError(f"uniforms: expected sum(k - 1) = {int((kk - 1).sum())} values, got {u.shape[0]}")
    if u.size and not (np.all(u >= 0) and np.all(u < 1)):
        raise ValueError("uniforms: expected values in [0, 1)")
    iters = check_int("iters", iters, lo=1)
    return implementation("spherical_kmeans", name)(x, off, seg, kk, fi, u, iters=iters)
