"""A memory's columns as one container of named arrays (the store's file format, ``memory/codec.py``)
and text columns as UTF-8 bytes plus offsets, both ways. Host only: ``reference`` (Python, the format
as first written) and ``cpu`` (C++, ``csrc/cpu/columns.cpp``: one call per container or column
instead of a NumPy call per array and a Python step per string), equal to the byte. Data errors are
``ColumnsError`` (a ``ValueError``) naming the array (``UnicodeDecodeError`` for text that is not
UTF-8); the codec adds which memory. A backend that does not exist raises a plain ``ValueError``."""

from __future__ import annotations

import os

import numpy as np

from ..backends import host_backend, implementation, register, resolve_backend
from . import reference as _reference
from .contract import ACCEPTS
from .reference import ALIGN, DTYPES, MAGIC, ColumnsError, aligned

_ALL = {"reference": "reference", "cpu": "cpu"}
for _op in ("pack_arrays", "join_utf8", "split_utf8", "container_views", "values_ok"):
    register(_op, __name__, _ALL, accepts=ACCEPTS[_op])


def refuse(why: str | None) -> None:
    """``ColumnsError(why)`` (a ``ValueError``) when a contract gave a reason: the family's error class."""
    if why is not None:
        raise ColumnsError(why)


_IMPLS: dict[tuple[str, str, str | None], object] = {}  # a codec calls these per column: resolved once


def _impl(op: str, backend: str):
    key = (op, backend, os.environ.get("XMEMORY_BACKEND") if backend == "auto" else None)
    fn = _IMPLS.get(key)
    if fn is None:  # host only: a GPU backend runs the host's best, as the other host-only ops
        name = resolve_backend(op, host_backend(backend), on_cuda=False)
        fn = _IMPLS[key] = implementation(op, name)
    return fn


def pack_arrays(names: list[str], arrays: list[np.ndarray], *, backend: str = "auto") -> bytes:
    """Named numeric arrays (float32/64, int32/64, uint8; names [n], arrays [n]) as one container:
    ``MAGIC``, a little-endian u64 header length, the JSON header (each array's name, dtype, shape
    and offset), then the arrays' bytes, each ``ALIGN``-byte aligned, zero padded."""
    names, arrays = list(names), list(arrays)
    refuse(ACCEPTS["pack_arrays"](names, arrays))
    return _impl("pack_arrays", backend)(names, arrays)


def container_pieces(names: list[str], arrays: list[np.ndarray]) -> tuple[list[memoryview], int]:
    """``pack_arrays``' container as consecutive pieces (the header, each array's bytes: a contiguous
    little-endian array's own buffer, another a converted copy; the zero padding) and its length, for
    a writer that streams them (checked as ``pack_arrays`` checks its input)."""
    names, arrays = list(names), list(arrays)
    refuse(ACCEPTS["pack_arrays"](names, arrays))
    return _reference.container_pieces(names, arrays)


def join_utf8(texts: list, *, backend: str = "auto") -> tuple[np.ndarray, np.ndarray]:
    """A text column: uint8 [B] its items' UTF-8 ("surrogatepass", each item as ``str``) joined, and
    int64 [n + 1] offsets."""
    refuse(ACCEPTS["join_utf8"](texts))
    return _impl("join_utf8", backend)(list(texts))


def split_utf8(raw: bytes, off: np.ndarray, *, backend: str = "auto") -> np.ndarray:
    """The inverse of ``join_utf8``: object [n] str of ``raw`` cut at ``off`` int64 [n + 1];
    ``ColumnsError`` unless the offsets are one row running from 0 to ``len(raw)`` without decreasing."""
    off = np.ascontiguousarray(off, np.int64)
    if off.ndim != 1:
        raise ColumnsError("offsets do not cut the bytes")
    return _impl("split_utf8", backend)(bytes(raw), off)


def container_views(
    entries: object, buf: bytearray, base: int, *, backend: str = "auto"
) -> dict[str, np.ndarray]:
    """The arrays a container's parsed header ``entries`` name, as writable views of ``buf`` (a
    bytearray) from byte ``base``; an entry that is not valid or runs past the end raises ``ValueError``."""
    return _impl("container_views", backend)(entries, buf, int(base))


def values_ok(
    refs: list[tuple[np.ndarray, int, int]],
    psg_msg: np.ndarray,
    msg_psg: np.ndarray,
    finite: list[np.ndarray],
    times: list[np.ndarray],
    tmin: float,
    tmax: float,
    nonan: list[np.ndarray],
    *,
    backend: str = "auto",
) -> bool:
    """A fast yes for a slice's value checks (``memory.codec.check_slice``), one C++ pass: True when
    every ``refs`` (int32/int64 array, lo, hi) value is in [lo, hi), ``psg_msg`` int32 does not
    decrease, each ``msg_psg`` int32 first passage >= 0 belongs to its message, ``finite`` float32
    arrays hold no NaN or inf, ``times`` float64 values are NaN or in [tmin, tmax) and ``nonan`` float32
    arrays hold no NaN. False when one fails, an array has another dtype, or the C++ module is not
    in use: the caller then runs its own checks, which say what fails."""
    refuse(ACCEPTS["values_ok"](refs, psg_msg, msg_psg, finite, times, tmin, tmax, nonan))
    return _impl("values_ok", backend)(refs, psg_msg, msg_psg, finite, times, float(tmin), float(tmax), nonan)


__all__ = [
    "ALIGN",
    "DTYPES",
    "MAGIC",
    "ColumnsError",
    "aligned",
    "container_pieces",
    "container_views",
    "join_utf8",
    "pack_arrays",
    "split_utf8",
    "values_ok",
]
