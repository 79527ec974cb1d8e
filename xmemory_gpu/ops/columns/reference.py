"""The slice container's columns in Python: the format as first written (memory/codec.py's
``pack_arrays``, text columns and ``unpack_arrays``' entry loop), the rule the C++ path matches byte
for byte. Errors are ``ColumnsError`` (a ``ValueError``) naming the array; the codec prefixes the memory."""

from __future__ import annotations

import json
import math
import struct

import numpy as np

MAGIC = b"XMSLICE1"
ALIGN = 64
DTYPES = frozenset({"<f4", "<f8", "<i4", "<i8", "|u1"})  # what a container may hold


class ColumnsError(ValueError):
    """Columns the format cannot hold, or a container or text column that does not read; says which."""


def aligned(n: int) -> int:
    return -(-n // ALIGN) * ALIGN


def container_pieces(names: list[str], arrays: list[np.ndarray]) -> tuple[list[memoryview], int]:
    """Named numeric arrays as the container's bytes in consecutive pieces (the header, then each
    array's bytes: a contiguous little-endian array's own buffer, without a copy, another a converted
    copy; the zero padding between) and their total length: what ``pack_arrays`` joins, for a writer
    that streams them to a file."""
    entries, parts, offset = [], [], 0
    for name, a in zip(names, arrays):
        a = np.ascontiguousarray(a)  # as the format has always done: a 0-d array is stored as shape [1]
        dt = a.dtype.newbyteorder("<") if a.dtype.byteorder == ">" else a.dtype
        if dt.str not in DTYPES:
            raise ColumnsError(
                f"array {name}: dtype {a.dtype} cannot be stored (expected one of {sorted(DTYPES)})"
            )
        entries.append({"name": name, "dtype": dt.str, "shape": list(a.shape), "offset": offset})
        parts.append((offset, a if a.dtype == dt else a.astype(dt)))
        offset += aligned(a.size * dt.itemsize)
    header = json.dumps({"arrays": entries}, separators=(",", ":")).encode()
    head = MAGIC + struct.pack("<Q", len(header)) + header
    base = aligned(len(head))
    zeros = memoryview(bytes(ALIGN))
    pieces, at = [memoryview(head), zeros[: base - len(head)]], 0
    for off, a in parts:
        if off > at:
            pieces.append(zeros[: off - at])
        pieces.append(memoryview(a.reshape(-1).view(np.uint8)))
        at = off + a.nbytes
    if offset > at:
        pieces.append(zeros[: offset - at])
    return [p for p in pieces if p.nbytes], base + offset


def pack_arrays(names: list[str], arrays: list[np.ndarray]) -> bytes:
    """Named numeric arrays as one container; each array's bytes copied once, into the container."""
    return b"".join(container_pieces(names, arrays)[0])


def join_utf8(texts: list) -> tuple[np.ndarray, np.ndarray]:
    """A text column (each item as ``str``) as its UTF-8 bytes uint8 [B] ("surrogatepass") and
    offsets int64 [n + 1]."""
    texts = [str(s) for s in texts]
    joined = "".join(texts)
    off = np.zeros(len(texts) + 1, np.int64)
    if joined.isascii():  # one byte per character: the offsets are the lengths' sums
        raw = joined.encode("ascii")
        np.cumsum([len(t) for t in texts], out=off[1:])
    else:
        enc = [t.encode("utf-8", "surrogatepass") for t in texts]
        raw = b"".join(enc)
        np.cumsum([len(e) for e in enc], out=off[1:])
    return np.frombuffer(raw, np.uint8), off


def split_utf8(raw: bytes, off: np.ndarray) -> np.ndarray:
    """object [n] str from UTF-8 ``raw`` cut at ``off`` int64 [n + 1]; ``ColumnsError`` for offsets
    that do not cut ``raw``, ``UnicodeDecodeError`` for bytes that are not UTF-8."""
    if off.ndim != 1 or off.shape[0] < 1 or off[0] != 0 or off[-1] != len(raw) or (np.diff(off) < 0).any():
        raise ColumnsError("offsets do not cut the bytes")
    bounds = off.tolist()
    out = np.empty(len(bounds) - 1, dtype=object)
    out[:] = [raw[bounds[i] : bounds[i + 1]].decode("utf-8", "surrogatepass") for i in range(len(bounds) - 1)]
    return out


def container_views(entries: object, buf: bytearray, base: int) -> dict[str, np.ndarray]:
    """The arrays the header ``entries`` (parsed JSON) name, as views of ``buf`` from byte ``base``;
    an entry that is not valid or runs past ``buf`` raises ``ColumnsError`` naming it."""
    out = {}
    for e in entries if isinstance(entries, list) else [None]:
        try:
            name, dtype, shape, offset = e["name"], e["dtype"], [int(x) for x in e["shape"]], int(e["offset"])
        except (KeyError, TypeError, ValueError):
            raise ColumnsError(f"a header entry is not valid: {e!r:.80}") from None
        if dtype not in DTYPES or any(x < 0 for x in shape) or offset < 0:
            raise ColumnsError(f"array {name}: dtype {dtype!r} or shape {shape} is not allowed")
        count = math.prod(shape)
        size = count * np.dtype(dtype).itemsize
        if base + offset + size > len(buf):
            raise ColumnsError(f"array {name}: its bytes run past the end of the data")
        try:
            out[str(name)] = np.frombuffer(buf, dtype, count, base + offset).reshape(shape)
        except ValueError as exc:  # more dimensions than numpy takes
            raise ColumnsError(f"array {name}: shape {shape[:8]} is not allowed ({exc})") from None
    return out


def values_ok(*args, **kw) -> bool:
    """No fast yes without the C++ pass: the caller's own checks run."""
    return False
