"""Seeded spherical k-means over ragged segments: the theme stage's split proposals, every run of a
round in one call. The caller draws the randomness (a first centre and k - 1 uniforms per run, from its
own NumPy Generator), so a run's labels are a function of its segment and draws alone, on any backend,
ISA or batch. Host only (a theme is tens of rows): ``reference`` (float64 NumPy) and ``cpu`` (C++)."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..backends import implementation, register, resolve_backend
from .contract import accepts_spherical_kmeans, kmeans_inputs

_ALL = {"reference": "reference", "cpu": "cpu"}
register("spherical_kmeans", __name__, _ALL, accepts=accepts_spherical_kmeans)


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
    x, off, seg, kk, fi, u, iters = kmeans_inputs(x, offsets, segment, k, first, uniforms, iters)
    return implementation("spherical_kmeans", name)(x, off, seg, kk, fi, u, iters=iters)
