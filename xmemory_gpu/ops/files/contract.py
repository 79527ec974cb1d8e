"""``write_durable``'s input contract, checked by its dispatcher before any file is touched
(``csrc/cpu/files.cpp`` checks the three lists' lengths and ``bytes`` data again): files a sequence of
(tmp, dst, data) with paths (str, bytes or path-like, without a NUL byte) and bytes-like data; threads
an integer >= 1. As the check and the ``accepts`` predicate (None in contract, else a one-line reason
naming the argument). What the file system then refuses is an ``OSError`` naming the path."""

from __future__ import annotations

import numbers
import os
from typing import Any


def durable_inputs(files: Any, threads: Any) -> tuple[list[bytes], list[bytes], list[Any]]:
    """(tmps, dsts as bytes paths, data) of ``files``."""
    if isinstance(threads, bool) or not isinstance(threads, numbers.Integral) or threads < 1:
        raise ValueError(f"threads: expected an integer >= 1, got {threads!r}")
    tmps, dsts, data = [], [], []
    for i, f in enumerate(files):
        if not isinstance(f, (tuple, list)) or len(f) != 3:
            raise ValueError(f"files[{i}]: expected (tmp, dst, data)")
        tmp, dst, d = f
        for name, p in (("tmp", tmp), ("dst", dst)):
            try:
                b = os.fsencode(p)
            except TypeError:
                raise ValueError(f"files[{i}] {name}: expected a path, got {type(p).__name__}") from None
            if b"\0" in b:
                raise ValueError(f"write_durable: embedded null byte in a path (files[{i}] {name})")
            (tmps if name == "tmp" else dsts).append(b)
        if not isinstance(d, (bytes, bytearray, memoryview)):
            raise ValueError(f"files[{i}] data: expected bytes-like, got {type(d).__name__}")
        data.append(d)
    return tmps, dsts, data


def accepts_write_durable(files: Any, *, threads: Any = 8, backend: str = "auto") -> str | None:
    """files a sequence of (tmp, dst, data): paths without NUL bytes, bytes-like data; threads >= 1."""
    try:
        durable_inputs(files, threads)
    except ValueError as exc:
        return str(exc)
    return None


__all__ = ["accepts_write_durable", "durable_inputs"]
