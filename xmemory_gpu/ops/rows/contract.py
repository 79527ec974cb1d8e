"""The row helpers' input contracts, checked by each op's dispatcher before any backend: what
``csrc/cpu/rows.cpp`` refuses (shapes, indices outside their arrays, offsets outside v or
decreasing, 0 <= n_slots <= cap) and what its wrappers hand to the NumPy steps stays in contract
(another real dtype, a non-contiguous array: the kernel's fast types are not the op's contract). As
``accepts`` predicates (None in contract, else a one-line reason naming the argument)."""

from __future__ import annotations

import numbers
from typing import Any

import numpy as np

from ..checks import check_finite_scalar, check_ids, check_int, dtype_kind, reason
from ..devices import is_torch


def _real(name: str, a: Any, ndim: int) -> np.ndarray:
    """a (NumPy, torch on any device, or a nested list) of ``ndim`` dimensions and a real (bool, integer
    or float) dtype; a torch tensor is checked where it is (no copy)."""
    if not (isinstance(a, np.ndarray) or is_torch(a)):
        a = np.asarray(a)
    if a.ndim != ndim:
        raise ValueError(f"{name}: expected {ndim} dimension(s), got shape {tuple(a.shape)}")
    if dtype_kind(a) not in "biuf":
        raise ValueError(f"{name}: expected a real array, got dtype {a.dtype}")
    return a


def _named(op: str, why: str | None) -> str | None:
    """The reason prefixed with the op (these helpers run inside other ops: the message says which)."""
    return None if why is None else f"{op}: {why}"


def _ids(name: str, a: Any) -> np.ndarray:
    a = np.asarray(a)
    if a.ndim != 1:
        raise ValueError(f"{name}: expected [m], got shape {a.shape}")
    if a.size and a.dtype.kind not in "iu":
        raise ValueError(f"{name}: expected integers, got dtype {a.dtype}")
    return a


def add_rows_inputs(sums: Any, group: Any, x: Any, rows: Any) -> None:
    if not (
        isinstance(sums, np.ndarray) and sums.ndim == 2 and sums.dtype.kind == "f" and sums.flags.writeable
    ):
        raise ValueError(
            f"sums: expected a writable float [k, d] array (added to in place), got "
            f"{getattr(sums, 'dtype', type(sums).__name__)} of shape {np.shape(sums)}"
        )
    x = _real("x", x, 2)
    if x.shape[1] != sums.shape[1]:
        raise ValueError(f"x: expected rows of the sums' d = {sums.shape[1]}, got shape {x.shape}")
    group, rows = _ids("group", group), _ids("rows", rows)
    if group.shape != rows.shape:
        raise ValueError(f"group and rows: expected [m] each, got {group.shape} and {rows.shape}")
    check_ids("group", group, sums.shape[0])
    check_ids("rows", rows, x.shape[0])


def accepts_add_rows_in_order(
    sums: Any, group: Any, x: Any, rows: Any, *, backend: str = "auto"
) -> str | None:
    """sums a writable float [k, d] array, group [m] integers in [0, k), x [N, d] real, rows [m] in [0, N)."""
    return _named("add_rows_in_order", reason(add_rows_inputs, sums, group, x, rows))


def live_rows_inputs(items: Any, d: Any) -> None:
    d = check_int("d", d, lo=0)
    for b, item in enumerate(items):
        if len(item) != 3:
            raise ValueError(f"items[{b}]: expected (alive, sums, n_slots), got {len(item)} values")
        alive, sums, n_slots = item
        alive = _real(f"items[{b}] alive", alive, 1)
        if alive.dtype != np.bool_:
            raise ValueError(f"items[{b}] alive: expected bool, got dtype {alive.dtype}")
        sums = _real(f"items[{b}] sums", sums, 2)
        if sums.shape[1] != d:
            raise ValueError(f"items[{b}] sums: expected [cap, d={d}], got shape {sums.shape}")
        check_int(f"items[{b}] n_slots", n_slots, lo=0, hi=min(alive.shape[0], sums.shape[0]))


def accepts_live_rows(items: Any, d: Any, *, backend: str = "auto") -> str | None:
    """items of (alive [cap] bool, sums [cap, d] real, n_slots an integer in [0, cap]); d an integer >= 0."""
    return _named("live_rows", reason(live_rows_inputs, items, d))


def take_rows2_inputs(a: Any, b: Any, take: Any) -> None:
    if not (isinstance(a, np.ndarray) and isinstance(b, np.ndarray)):
        raise ValueError(f"a and b: expected arrays, got {type(a).__name__} and {type(b).__name__}")
    if a.ndim < 1 or a.ndim != b.ndim or a.shape[1:] != b.shape[1:]:
        raise ValueError(f"a and b: expected one row shape, got shapes {a.shape} and {b.shape}")
    check_ids("take", _ids("take", take), a.shape[0] + b.shape[0])


def accepts_take_rows2(a: Any, b: Any, take: Any, *, backend: str = "auto") -> str | None:
    """a [na, ...] and b [nb, ...] arrays of one row shape (any dtypes NumPy concatenates), take [n]
    integers in [0, na + nb)."""
    return _named("take_rows2", reason(take_rows2_inputs, a, b, take))


def accepts_row_norms(x: Any, *, keepdims: bool = False, backend: str = "auto") -> str | None:
    """x [m, d] real."""
    return _named("row_norms", reason(_real, "x", x, 2))


def segment_sums_inputs(v: Any, off: Any) -> None:
    v = _real("v", v, 1)
    o = _ids("off", off)
    if o.size < 1:
        raise ValueError("off: expected [nb+1] offsets, got none")
    o = o.astype(np.int64)
    if o.min() < 0 or o.max() > v.shape[0] or np.any(np.diff(o) < 0):
        raise ValueError(f"off: offsets must lie in [0, {v.shape[0]}] (v's length) and not decrease")


def accepts_segment_sums(v: Any, off: Any, *, backend: str = "auto") -> str | None:
    """v [n] real, off [nb+1] integers in [0, n], not decreasing."""
    return _named("segment_sums", reason(segment_sums_inputs, v, off))


def unit_rows_inputs(x: Any, dtype: Any) -> None:
    _real("x", x, 2)
    try:
        dt = np.dtype(dtype)
    except TypeError:
        raise ValueError(f"dtype: expected float32 or float64, got {dtype!r}") from None
    if dt not in (np.float64, np.float32):
        raise ValueError(f"dtype: expected float32 or float64, got {dt}")


def accepts_unit_rows(x: Any, *, dtype: Any = np.float64, backend: str = "auto") -> str | None:
    """x [n, d] real, dtype float32 or float64."""
    return _named("unit_rows", reason(unit_rows_inputs, x, dtype))


def dot4_gram_inputs(a: Any, b: Any) -> None:
    a, b = _real("a", a, 2), _real("b", b, 2)
    if a.shape[1] != b.shape[1]:
        raise ValueError(f"a and b: expected [n, d] and [m, d], got shapes {a.shape} and {b.shape}")


def accepts_dot4_gram(a: Any, b: Any, *, backend: str = "auto") -> str | None:
    """a [n, d] and b [m, d] real, one d."""
    return _named("dot4_gram", reason(dot4_gram_inputs, a, b))


def drift_runs_inputs(x: Any, hard: Any, min_messages: Any, drift_threshold: Any) -> None:
    x = _real("x", x, 2)
    if x.shape[0] < 1:
        raise ValueError("x: expected [n, d] with n >= 1, got no rows")
    h = np.asarray(hard)
    if h.shape != (x.shape[0],):
        raise ValueError(f"hard: expected [n={x.shape[0]}], got shape {h.shape}")
    if isinstance(min_messages, bool) or not isinstance(min_messages, numbers.Integral) or min_messages < 0:
        raise ValueError(f"min_messages: expected an integer >= 0, got {min_messages!r}")
    check_finite_scalar("drift_threshold", drift_threshold)


def accepts_drift_runs(
    x: Any, hard: Any, min_messages: Any, drift_threshold: Any, *, backend: str = "auto"
) -> str | None:
    """x [n, d] real with n >= 1, hard [n], min_messages an integer >= 0, drift_threshold finite."""
    return _named("drift_runs", reason(drift_runs_inputs, x, hard, min_messages, drift_threshold))


ACCEPTS = {
    "add_rows_in_order": accepts_add_rows_in_order,
    "live_rows": accepts_live_rows,
    "take_rows2": accepts_take_rows2,
    "row_norms": accepts_row_norms,
    "segment_sums": accepts_segment_sums,
    "unit_rows": accepts_unit_rows,
    "dot4_gram": accepts_dot4_gram,
    "drift_runs": accepts_drift_runs,
}

__all__ = [
    "ACCEPTS",
    "accepts_add_rows_in_order",
    "accepts_dot4_gram",
    "accepts_drift_runs",
    "accepts_live_rows",
    "accepts_row_norms",
    "accepts_segment_sums",
    "accepts_take_rows2",
    "accepts_unit_rows",
]
