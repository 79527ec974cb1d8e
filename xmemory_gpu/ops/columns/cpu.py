"""C++ path of the slice container (``csrc/cpu/columns.cpp``): each call does the plain case in one
pass and hands anything else (a dtype the format refuses, a name JSON escapes, a str subclass, a lone
surrogate, a header entry that is not plain ints) to the reference, which gives the same bytes or
raises its message."""

from __future__ import annotations

import numpy as np

from . import reference
from .reference import ColumnsError


def _c():
    from ... import _C

    return _C


def pack_arrays(names: list[str], arrays: list[np.ndarray]) -> bytes:
    out = _c().pack_arrays(names, arrays)
    return reference.pack_arrays(names, arrays) if out is None else out


def join_utf8(texts: list) -> tuple[np.ndarray, np.ndarray]:
    out = _c().join_utf8(texts)
    return reference.join_utf8(texts) if out is None else out


def split_utf8(raw: bytes, off: np.ndarray) -> np.ndarray:
    try:
        return _c().split_utf8(raw, off)
    except UnicodeDecodeError:
        raise
    except ValueError as exc:  # the offsets: the reference's error
        raise ColumnsError(str(exc)) from None


def container_views(entries: object, buf: bytearray, base: int) -> dict[str, np.ndarray]:
    out = _c().container_views(entries, buf, base) if isinstance(entries, list) else None
    return reference.container_views(entries, buf, base) if out is None else out


def values_ok(refs, psg_msg, msg_psg, finite, times, tmin, tmax, nonan) -> bool:
    return bool(_c().values_ok(refs, psg_msg, msg_psg, finite, times, tmin, tmax, nonan))
