"""The columns family's input contracts as ``accepts`` predicates (None in contract, else a one-line
reason naming the argument). Their data errors are the backends' own, alike on both (``ColumnsError``,
a ``ValueError``; ``csrc/cpu/columns.cpp`` hands what it does not take to the reference or raises its
message): the dispatchers check the structure only, and a predicate says in advance what they would
refuse. A text column's bytes that are not UTF-8 are found by decoding them (``UnicodeDecodeError``,
a ``ValueError``), which the predicate of ``split_utf8`` does not do."""

from __future__ import annotations

import numbers
from typing import Any

import numpy as np

from ..checks import reason
from .reference import DTYPES, ColumnsError, container_views


def pack_inputs(names: Any, arrays: Any) -> None:
    names, arrays = list(names), list(arrays)
    if len(names) != len(arrays):
        raise ValueError(f"names and arrays: {len(names)} names for {len(arrays)} arrays")
    for i, (name, a) in enumerate(zip(names, arrays)):
        if not isinstance(name, str):
            raise ValueError(f"names[{i}]: expected a str, got {type(name).__name__}")
        dt = np.asarray(a).dtype
        dt = dt.newbyteorder("<") if dt.byteorder == ">" else dt
        if dt.str not in DTYPES:
            raise ColumnsError(
                f"array {name}: dtype {dt} cannot be stored (expected one of {sorted(DTYPES)})"
            )


def accepts_pack_arrays(names: Any, arrays: Any, *, backend: str = "auto") -> str | None:
    """names [n] str, arrays [n] numeric arrays of a dtype the format holds (float32/64, int32/64, uint8)."""
    return reason(pack_inputs, names, arrays)


def accepts_join_utf8(texts: Any, *, backend: str = "auto") -> str | None:
    """texts an iterable (each item taken as ``str``), not one str."""
    if isinstance(texts, (str, bytes)):
        return f"texts: expected a sequence of items, got one {type(texts).__name__}"
    try:
        iter(texts)
    except TypeError:
        return f"texts: expected a sequence of items, got {type(texts).__name__}"
    return None


def split_inputs(raw: Any, off: Any) -> None:
    if not isinstance(raw, (bytes, bytearray, memoryview)):
        raise ValueError(f"raw: expected bytes, got {type(raw).__name__}")
    o = np.asarray(off)
    if o.size and o.dtype.kind not in "iu":
        raise ValueError(f"off: expected integer offsets, got dtype {o.dtype}")
    n = len(bytes(raw)) if isinstance(raw, memoryview) else len(raw)
    if o.ndim != 1 or o.shape[0] < 1 or o[0] != 0 or o[-1] != n or (np.diff(o) < 0).any():
        raise ColumnsError("offsets do not cut the bytes")


def accepts_split_utf8(raw: Any, off: Any, *, backend: str = "auto") -> str | None:
    """raw bytes, off [n + 1] integers from 0 to len(raw), not decreasing (the bytes UTF-8)."""
    return reason(split_inputs, raw, off)


def views_inputs(entries: Any, buf: Any, base: Any) -> None:
    if not isinstance(buf, bytearray):
        raise ValueError(f"buf: expected a bytearray (the views are writable), got {type(buf).__name__}")
    if isinstance(base, bool) or not isinstance(base, numbers.Integral) or base < 0:
        raise ValueError(f"base: expected an integer >= 0, got {base!r}")
    container_views(entries, buf, int(base))  # views only: every entry's checks, no copy


def accepts_container_views(entries: Any, buf: Any, base: Any, *, backend: str = "auto") -> str | None:
    """entries a list of {name, dtype in the format's, shape >= 0, offset >= 0} whose bytes lie in buf (a
    bytearray) from byte base >= 0."""
    return reason(views_inputs, entries, buf, base)


def values_inputs(refs, psg_msg, msg_psg, finite, times, tmin, tmax, nonan) -> None:
    for i, r in enumerate(refs):
        if len(r) != 3:
            raise ValueError(f"refs[{i}]: expected (array, lo, hi), got {len(r)} values")
    for name, v in (("tmin", tmin), ("tmax", tmax)):
        if isinstance(v, bool) or not isinstance(v, numbers.Real):
            raise ValueError(f"{name}: expected a number, got {v!r}")
    for name, seq in (("finite", finite), ("times", times), ("nonan", nonan)):
        if isinstance(seq, np.ndarray) or not hasattr(seq, "__len__"):
            raise ValueError(f"{name}: expected a list of arrays, got {type(seq).__name__}")
    for name, a in (("psg_msg", psg_msg), ("msg_psg", msg_psg)):
        if not isinstance(a, np.ndarray):
            raise ValueError(f"{name}: expected an array, got {type(a).__name__}")


def accepts_values_ok(
    refs: Any,
    psg_msg: Any,
    msg_psg: Any,
    finite: Any,
    times: Any,
    tmin: Any,
    tmax: Any,
    nonan: Any,
    *,
    backend: str = "auto",
) -> str | None:
    """refs a list of (array, lo, hi); psg_msg, msg_psg arrays; finite, times, nonan lists of arrays;
    tmin, tmax numbers. (Values that fail, or arrays of other dtypes, are a "no", not an error.)"""
    return reason(values_inputs, refs, psg_msg, msg_psg, finite, times, tmin, tmax, nonan)


ACCEPTS = {
    "pack_arrays": accepts_pack_arrays,
    "join_utf8": accepts_join_utf8,
    "split_utf8": accepts_split_utf8,
    "container_views": accepts_container_views,
    "values_ok": accepts_values_ok,
}

__all__ = [
    "ACCEPTS",
    "accepts_container_views",
    "accepts_join_utf8",
    "accepts_pack_arrays",
    "accepts_split_utf8",
    "accepts_values_ok",
]
