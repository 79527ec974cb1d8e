"""Input checks shared by every op family, run once at each op's dispatcher before any backend:
one-line ``ValueError``s naming the argument (and the first bad rows); and the CSR helpers
(``csr_offsets`` builds offsets from counts, ``check_offsets`` validates them).

The checks take NumPy or torch (on any device) and return host NumPy where they return arrays.
"""

from __future__ import annotations

import numbers
from collections.abc import Callable
from typing import Any

import numpy as np

from .devices import array, host, is_torch

LABEL_BOUND = 2**31  # labels / ids above this cannot be narrowed to int32 and could exhaust memory


def _torch():
    import torch

    return torch


def dtype_kind(x: Any) -> str:
    """NumPy dtype kind of x ('f', 'c', 'i', 'u', 'b', 'O', ...), for NumPy and torch alike."""
    if is_torch(x):
        if x.dtype.is_complex:
            return "c"
        if x.dtype.is_floating_point:
            return "f"
        if x.dtype == _torch().bool:
            return "b"
        return "i"
    return np.asarray(x).dtype.kind


def check_real(name: str, x: Any, *, integers: bool = True) -> Any:
    """Refuse complex, boolean, object and string arrays (and integers unless ``integers``)."""
    kind = dtype_kind(x)
    ok = "f" + ("iu" if integers else "")
    if kind not in ok:
        what = {"c": "complex", "b": "boolean", "O": "object", "U": "string", "S": "bytes"}.get(
            kind, f"kind {kind!r}"
        )
        dt = getattr(x, "dtype", None)
        raise ValueError(f"{name}: expected a real floating array, got {what} dtype {dt}")
    return x


def check_finite(name: str, x: Any, *, max_report: int = 5) -> Any:
    """Refuse NaN / inf, naming the first bad rows (axis 0) of ``x`` [N, ...] (NumPy or torch)."""
    if dtype_kind(x) not in "fc":
        return x
    # a finite sum means every entry is finite (NaN and inf propagate): one cheap pass; only an
    # overflowing or non-finite sum pays for the row-by-row search
    if is_torch(x):
        torch = _torch()
        t = x.detach()
        if t.numel() and bool(torch.isfinite(t.sum())):
            return x
        bad = ~torch.isfinite(t)
        if t.ndim > 1:
            bad = bad.reshape(t.shape[0], -1).any(dim=1) if t.numel() else bad.reshape(-1)[:0]
        if not bool(bad.any()):
            return x
        rows = torch.nonzero(bad.reshape(-1)).reshape(-1)
        n_bad, first = int(rows.numel()), rows[:max_report].cpu().tolist()
    else:
        a = np.asarray(x)
        with np.errstate(over="ignore", invalid="ignore"):
            if a.size and np.isfinite(a.sum()):
                return x
        bad = ~np.isfinite(a)
        if a.ndim > 1:
            bad = bad.reshape(a.shape[0], -1).any(axis=1) if a.size else np.zeros(a.shape[0], bool)
        if not bad.any():
            return x
        rows = np.flatnonzero(bad)
        n_bad, first = int(rows.size), rows[:max_report].tolist()
    where = "rows" if getattr(x, "ndim", 1) > 1 else "entries"
    more = f" (first {len(first)} of {n_bad})" if n_bad > len(first) else ""
    raise ValueError(f"{name}: NaN or inf in {where} {first}{more}; inputs must be finite")


def check_float_matrix(name: str, x: Any, *, ndim: int = 2, finite: bool = True) -> Any:
    """Real (int or float) and finite, with ``ndim`` dimensions: the check for embedding inputs.
    Returns ``array(x)`` (lists become NumPy). ``finite=False`` leaves finiteness to a kernel whose own
    pass over ``x`` counts non-finite rows (its caller then calls ``check_finite`` to name them)."""
    x = array(x)
    if x.ndim != ndim:
        raise ValueError(f"{name}: expected a {ndim}-D array, got shape {tuple(x.shape)}")
    check_real(name, x)
    return check_finite(name, x) if finite else x


def check_int(name: str, v: Any, *, lo: int | None = None, hi: int | None = None) -> int:
    """An integer scalar (Python or NumPy int, a 0-d integer array; not bool, not 2.0) in [lo, hi]."""
    if is_torch(v) or isinstance(v, np.ndarray):
        if getattr(v, "ndim", 0) != 0 or dtype_kind(v) not in "iu":
            raise ValueError(f"{name}: expected an integer, got {v!r}")
        v = int(v.item())
    if isinstance(v, bool) or not isinstance(v, numbers.Integral):
        raise ValueError(f"{name}: expected an integer, got {v!r} ({type(v).__name__})")
    v = int(v)
    if lo is not None and v < lo:
        raise ValueError(f"{name} must be >= {lo}, got {v}")
    if hi is not None and v > hi:
        raise ValueError(f"{name} must be <= {hi}, got {v}")
    return v


def check_k(name: str, k: Any, max_k: int | None = None) -> int:
    """An integer k >= 1 (and <= max_k when given)."""
    return check_int(name, k, lo=1, hi=max_k)


def check_positive(name: str, v: Any) -> float:
    """A finite real scalar > 0 (e.g. ``eps``)."""
    if isinstance(v, bool) or not isinstance(v, numbers.Real):
        raise ValueError(f"{name}: expected a positive number, got {v!r} ({type(v).__name__})")
    f = float(v)
    if not np.isfinite(f) or f <= 0:
        raise ValueError(f"{name}: must be finite and > 0, got {v!r}")
    return f


def check_finite_scalar(name: str, v: Any) -> float:
    """A finite real scalar (e.g. ``alpha``, ``target``)."""
    if isinstance(v, bool) or not isinstance(v, numbers.Real) or not np.isfinite(float(v)):
        raise ValueError(f"{name}: expected a finite number, got {v!r}")
    return float(v)


def check_offsets(name: str, offsets: Any, n: int) -> np.ndarray:
    """CSR offsets [B+1] (integers, 0 .. n, non-decreasing) -> host int64 array."""
    off = host(offsets)
    if off.ndim != 1 or off.size < 1:
        raise ValueError(f"{name}: expected a 1-D array of B+1 offsets, got shape {off.shape}")
    if not np.issubdtype(off.dtype, np.integer):
        raise ValueError(f"{name}: expected integer offsets, got dtype {off.dtype}")
    off = off.astype(np.int64, copy=False)
    if off[0] != 0 or off[-1] != n:
        raise ValueError(f"{name}: must start at 0 and end at the row count {n}, got {off[0]}..{off[-1]}")
    step = np.diff(off)
    if np.any(step < 0):
        raise ValueError(
            f"{name}: must be non-decreasing (first decrease after entry {int(np.argmax(step < 0))})"
        )
    return off


def check_same_segments(name_a: str, a: np.ndarray, name_b: str, b: np.ndarray) -> None:
    """Two CSR offset arrays must describe the same number of segments."""
    if len(a) != len(b):
        raise ValueError(f"{name_a} and {name_b}: must have the same length (B+1), got {len(a)} and {len(b)}")


def check_labels(name: str, labels: Any, n: int, *, bound: int = LABEL_BOUND) -> np.ndarray:
    """Labels [n]: integers in [0, bound) -> host int64 (a bound that cannot exhaust memory)."""
    lab = host(labels)
    if lab.shape != (n,):
        raise ValueError(f"{name}: expected shape ({n},), got {lab.shape}")
    if lab.size and not np.issubdtype(lab.dtype, np.integer):
        if lab.dtype.kind != "f" or not np.all(np.isfinite(lab)) or np.any(lab != np.round(lab)):
            raise ValueError(f"{name}: expected integers, got dtype {lab.dtype}")
    lab = lab.astype(np.int64, copy=False)
    if lab.size:
        lo, hi = int(lab.min()), int(lab.max())
        if lo < 0:
            raise ValueError(f"{name}: must be >= 0, got {lo} at entry {int(np.argmin(lab))}")
        if hi >= bound:
            raise ValueError(f"{name}: must be < {bound}, got {hi} at entry {int(np.argmax(lab))}")
    return lab


def check_index(
    name: str, idx: Any, hi: Any, *, allow_missing: bool = True, dtype: Any = np.int64, in_place: bool = False
) -> Any:
    """Integer ids in [0, hi) (``-1`` = none when ``allow_missing``); ``hi`` a scalar or, per row
    of ``idx`` [M, ...], an [M] array of bounds (e.g. the row's segment size for local ids). Returns
    the ids as ``dtype`` (int64 unless asked; a caller asking for a narrower one has bounds that fit it),
    host NumPy; with ``in_place`` a torch ``idx`` is checked and returned on its own device (no copy to
    the host). A scalar comes back as a 1-element array. Signed ids are compared in their own dtype."""
    if in_place and is_torch(idx):
        return _check_index_torch(name, idx, hi, allow_missing, dtype)
    a = np.atleast_1d(host(idx))
    if a.size and not np.issubdtype(a.dtype, np.integer):
        raise ValueError(f"{name}: expected integer ids, got dtype {a.dtype}")
    if a.size == 0:
        return a.astype(dtype)
    if not np.issubdtype(a.dtype, np.signedinteger):  # unsigned: mixed comparisons would go through float64
        a = a.astype(np.int64)
    bound = np.asarray(hi, dtype=np.int64)
    if bound.ndim == 1:
        bound = bound.reshape((-1,) + (1,) * (a.ndim - 1))
    bad = (a < (-1 if allow_missing else 0)) | (a >= bound)
    if bad.any():
        pos = np.argwhere(bad)[0]
        row = int(pos[0])
        lim = int(bound.reshape(-1)[row]) if bound.ndim else int(bound)
        raise ValueError(
            f"{name}: id {int(a[tuple(pos)])} at {tuple(int(p) for p in pos)} outside [0, {lim})"
            + (" (-1 marks none)" if allow_missing else "")
        )
    return a.astype(dtype, copy=False)


def check_ids(name: str, a: np.ndarray, hi: int, *, allow_missing: bool = False) -> None:
    """``check_index`` for a host integer array and a scalar bound, at the cost of a min and a max when
    the ids are in range (the contracts of the per-block helpers run once a block); the position of
    the first bad id is found only to name it."""
    if a.size and (a.dtype.kind not in "iu" or a.min() < (-1 if allow_missing else 0) or a.max() >= hi):
        check_index(name, a, hi, allow_missing=allow_missing)


def _check_index_torch(name: str, idx: Any, hi: Any, allow_missing: bool, dtype: Any) -> Any:
    """check_index for a torch tensor, on its device: the same checks and messages."""
    torch = _torch()
    t = idx.detach()
    t = t.reshape(1) if t.ndim == 0 else t
    if t.numel() and (t.dtype.is_floating_point or t.dtype.is_complex or t.dtype == torch.bool):
        raise ValueError(f"{name}: expected integer ids, got dtype {str(t.dtype).replace('torch.', '')}")
    bound = torch.as_tensor(np.asarray(hi, dtype=np.int64), device=t.device)
    if bound.ndim == 1:
        bound = bound.reshape((-1,) + (1,) * (t.ndim - 1))
    if t.numel():
        bad = (t < (-1 if allow_missing else 0)) | (t >= bound)
        if bool(bad.any()):
            pos = tuple(int(p) for p in torch.nonzero(bad)[0].tolist())
            lim = int(bound.reshape(-1)[pos[0]]) if bound.ndim else int(bound)
            raise ValueError(
                f"{name}: id {int(t[pos])} at {pos} outside [0, {lim})"
                + (" (-1 marks none)" if allow_missing else "")
            )
    return t.to(getattr(torch, np.dtype(dtype).name))


def check_budgets(name: str, budget: Any, q: int) -> np.ndarray:
    """A budget scalar or [q] of integers >= 0 -> host int64 [q]."""
    b = host(budget)
    if b.size and not np.issubdtype(b.dtype, np.integer):
        if b.dtype.kind != "f" or not np.all(np.isfinite(b)) or np.any(b != np.round(b)):
            raise ValueError(f"{name}: expected integers, got {b.dtype} {b.reshape(-1)[:3].tolist()}")
    if b.ndim > 1 or (b.ndim == 1 and b.shape[0] != q):
        raise ValueError(f"{name}: expected a scalar or shape ({q},), got {b.shape}")
    b = np.broadcast_to(b.astype(np.int64), (q,)).copy()
    if b.size and b.min() < 0:
        raise ValueError(f"{name}: must be >= 0, got {int(b.min())} at entry {int(np.argmin(b))}")
    return b


# ---- contracts -------------------------------------------------------------------------------------


def reason(check: Callable[..., Any], *args: Any, **kwargs: Any) -> str | None:
    """None when ``check(*args, **kwargs)`` passes, else its ``ValueError``'s one-line message: an op's
    ``accepts`` predicate from the checks its dispatcher runs."""
    try:
        check(*args, **kwargs)
    except ValueError as exc:
        return str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return None


def refuse(why: str | None) -> None:
    """Raise ``ValueError(why)`` when an ``accepts`` predicate gave a reason."""
    if why is not None:
        raise ValueError(why)


# ---- CSR -------------------------------------------------------------------------------------------


def csr_offsets(counts: Any) -> np.ndarray:
    """CSR offsets [len(counts)+1] int64 from per-segment counts."""
    counts = np.asarray(counts, dtype=np.int64).reshape(-1)
    off = np.zeros(counts.size + 1, dtype=np.int64)
    np.cumsum(counts, out=off[1:])
    return off


__all__ = [
    "LABEL_BOUND",
    "check_budgets",
    "check_finite",
    "check_finite_scalar",
    "check_float_matrix",
    "check_ids",
    "check_index",
    "check_int",
    "check_k",
    "check_labels",
    "check_offsets",
    "check_positive",
    "check_real",
    "dtype_kind",
    "check_same_segments",
    "csr_offsets",
    "reason",
    "refuse",
]
