"""``dedup_block``'s input contract, checked by its dispatcher before any backend (the shapes
``csrc/cpu/dedup.cpp`` checks again: inner [m, m], rows [m, d], best [m], arg [m]). NaN rows are in
contract (a NaN cosine merges nothing), and so are NaN and infinite thresholds. As the check and the ``accepts`` predicate (None in contract,
else a one-line reason naming the argument)."""

from __future__ import annotations

import numbers
from typing import Any

import numpy as np

from ..checks import reason
from .reference import TIE_TOL


def _real(name: str, a: Any, shape: tuple[int, ...] | None, ndim: int) -> np.ndarray:
    if not isinstance(a, np.ndarray) or a.ndim != ndim or (shape is not None and a.shape != shape):
        want = "[m, d]" if shape is None else list(shape)
        raise ValueError(f"{name}: expected {want}, got shape {np.shape(a)}")
    if a.dtype.kind not in "fiu":
        raise ValueError(f"{name}: expected a real array, got dtype {a.dtype}")
    return a


def dedup_inputs(inner, rows, best, arg, threshold, base, tie_tol) -> tuple:
    """(best float64 [m], arg int64 [m], threshold, tie_tol as floats, base as an int)."""
    m = _real("rows", rows, None, 2).shape[0]
    _real("inner", inner, (m, m), 2)
    best, arg = np.asarray(best), np.asarray(arg)
    if best.shape != (m,) or (best.size and best.dtype.kind not in "fiu"):
        raise ValueError(f"best: expected [m={m}] reals, got {best.dtype} of shape {best.shape}")
    if arg.shape != (m,) or (arg.size and arg.dtype.kind not in "iu"):
        raise ValueError(f"arg: expected [m={m}] integers, got {arg.dtype} of shape {arg.shape}")
    for name, v in (("threshold", threshold), ("tie_tol", tie_tol)):
        if isinstance(v, bool) or not isinstance(v, numbers.Real):
            raise ValueError(f"{name}: expected a number, got {v!r}")
    if isinstance(base, bool) or not isinstance(base, numbers.Integral):
        raise ValueError(f"base: expected an integer, got {base!r}")
    best = np.ascontiguousarray(best, dtype=np.float64)
    arg = np.ascontiguousarray(arg, dtype=np.int64)
    return best, arg, float(threshold), float(tie_tol), int(base)


def accepts_dedup_block(
    inner: Any,
    rows: Any,
    best: Any,
    arg: Any,
    threshold: Any,
    base: Any,
    *,
    tie_tol: Any = TIE_TOL,
    backend: str = "auto",
) -> str | None:
    """rows [m, d] and inner [m, m] real arrays, best [m] reals, arg [m] integers, threshold and tie_tol
    real numbers (a NaN or infinite threshold is the loop's rule: it merges nothing or everything), base an integer."""
    return reason(dedup_inputs, inner, rows, best, arg, threshold, base, tie_tol)


__all__ = ["accepts_dedup_block", "dedup_inputs"]
