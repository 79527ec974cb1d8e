"""``spherical_kmeans``'s input contract: the checks its dispatcher runs before any backend (and that
``csrc/cpu/kmeans.cpp`` makes again: x [N, d], CSR offsets, k and first [R] in range per run's segment,
sum(k - 1) uniforms), as the checks returning the checked inputs and as the ``accepts`` predicate
(None in contract, else a one-line reason naming the argument)."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..checks import check_float_matrix, check_index, check_int, check_offsets, reason
from ..devices import host


def kmeans_inputs(x: Any, offsets: Any, segment: Any, k: Any, first: Any, uniforms: Any, iters: Any) -> tuple:
    """(x [N, d] float64, offsets, segment, k, first int64, uniforms float64, iters) checked."""
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
    return x, off, seg, kk, fi, u, iters


def accepts_spherical_kmeans(
    x: Any,
    offsets: Any,
    segment: Any,
    k: Any,
    first: Any,
    uniforms: Any,
    *,
    iters: Any = 12,
    backend: str = "auto",
) -> str | None:
    """x [N, d] real finite, offsets [B+1] CSR over N, segment [R] in [0, B), k [R] integers in 1..n of
    the run's segment, first [R] in [0, n), uniforms [sum(k - 1)] in [0, 1), iters an integer >= 1."""
    return reason(kmeans_inputs, x, offsets, segment, k, first, uniforms, iters)


__all__ = ["accepts_spherical_kmeans", "kmeans_inputs"]
