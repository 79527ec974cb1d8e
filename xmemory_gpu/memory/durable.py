"""New files written durably, several at once: each one's bytes in a temporary file, made durable,
renamed into place; a file that fails leaves no temporary file behind. One C++ call without the
GIL when the compiled module is built (``csrc/cpu/files.cpp``: the files written on threads of its
own, then, from 16 files on (a bulk build's shard) in one folder of a local file system (ext4, xfs,
btrfs, tmpfs) on Linux 5.8 or later, one ``syncfs`` of the file system for all of them, else one
fsync each: a live engine's few files never wait on other writers' dirty pages, and a network or
FUSE file system, whose sync may not reach its server, is fsynced file by file):
a store commits a shard's files from one background thread while the build's thread runs Python,
and never waits on the interpreter in between (a thread that needs the GIL behind a busy
interpreter waits a 5 ms switch interval each time, and Python's steps need it five times a
file); Python's steps (an fsync per file) on a thread pool otherwise.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from ..ops.rows import compiled


def write_durable(files: list[tuple[Path, Path, bytes]], *, threads: int = 8, backend: str = "auto") -> None:
    """Each ``(tmp, dst, data)``: ``data`` to ``tmp`` (created or truncated), on disk, renamed to
    ``dst``, up to ``threads`` at once. Every file is attempted; the first that failed (in order)
    raises ``OSError`` after all are done (its ``tmp`` removed; the others are in place).
    ``backend="reference"``: Python's steps even where the C++ call is built."""
    tmps, dsts = [os.fsencode(t) for t, _, _ in files], [os.fsencode(d) for _, d, _ in files]
    if any(b"\0" in p for p in (*tmps, *dsts)):
        raise ValueError("write_durable: embedded null byte in a path")
    fn = compiled("write_durable", backend)
    if fn is not None and all(type(data) is bytes for _, _, data in files):
        failed = fn(tmps, dsts, [data for _, _, data in files], threads)
        if failed:
            _, err, path = failed[0]
            raise OSError(err, os.strerror(err), os.fsdecode(path))
        return
    if len(files) <= 1 or threads <= 1:
        errors = [_error(*f) for f in files]
    else:
        with ThreadPoolExecutor(max_workers=min(threads, len(files))) as pool:
            errors = list(pool.map(lambda f: _error(*f), files))
    first = next((e for e in errors if e is not None), None)
    if first is not None:
        raise first


def _error(tmp: Path, dst: Path, data: bytes) -> OSError | None:
    """One file written (the Python steps); the ``OSError`` that stopped it (naming the file), or
    None; an interrupt removes the temporary file too."""
    try:
        with open(tmp, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, dst)
    except BaseException as exc:
        Path(tmp).unlink(missing_ok=True)
        if not isinstance(exc, OSError):
            raise
        return exc if exc.filename else OSError(exc.errno, exc.strerror, os.fspath(tmp))
    return None
