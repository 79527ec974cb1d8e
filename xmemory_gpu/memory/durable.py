"""The store's durable file writes: the op ``ops.files.write_durable`` (temporary file, fsync,
rename, folder fsync; one C++ call without the GIL when built, Python's steps otherwise or under
``XMEMORY_BACKEND=reference``), named here where the store imports it, and :func:`write_hashed`, a
file streamed from pieces while a thread hashes them."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Sequence
from concurrent.futures import Executor, Future, wait
from pathlib import Path

from ..ops.files import write_durable

_IOV = 512  # buffers per writev call (Linux takes up to 1,024)


def _sha256(pieces: Sequence[memoryview]) -> str:
    h = hashlib.sha256()
    for p in pieces:
        h.update(p)  # hashlib leaves the GIL for a piece of 2 KiB or more
    return h.hexdigest()


def _writev_all(fd: int, pieces: Sequence[memoryview]) -> None:
    """Every byte of ``pieces``, in order, to ``fd`` (``os.writev`` writes from the buffers themselves;
    a short write goes on from where it stopped)."""
    todo = [p.cast("B") if p.format != "B" or p.ndim != 1 else p for p in pieces if p.nbytes]
    i = 0
    while i < len(todo):
        n = os.writev(fd, todo[i : i + _IOV])
        while n and i < len(todo):
            if n >= todo[i].nbytes:
                n -= todo[i].nbytes
                i += 1
            else:
                todo[i], n = todo[i][n:], 0


def write_hashed(path: Path, pieces: Sequence[memoryview], hasher: Executor) -> str:
    """The bytes of ``pieces`` (in order) in the new file ``path`` (created or truncated, mode 0666
    less the umask, as ``write_durable``'s files), on disk (fsync) when this returns, and their sha256
    (hex), computed on ``hasher``'s thread while the file is written: the hash costs the write's time,
    not its own, and no piece is copied into one buffer first (an executor that no longer takes work,
    as at the interpreter's exit: hashed here after the write). The caller renames the file and
    fsyncs its folder; on any failure the file is removed and the error raised. POSIX (``os.writev``),
    as the store is."""
    try:
        hashed = hasher.submit(_sha256, pieces)
    except RuntimeError:  # shut down
        hashed = None
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_CLOEXEC", 0), 0o666)
        try:
            _writev_all(fd, pieces)
            os.fsync(fd)
        finally:
            os.close(fd)
        return hashed.result() if hashed is not None else _sha256(pieces)
    except BaseException:
        if hashed is not None:
            wait([hashed])  # the thread reads the caller's buffers: done before they are given back
        try:
            path.unlink(missing_ok=True)
        except OSError:
            pass
        raise


_READ_CHUNK = 8 << 20  # bytes read before their hash is handed to the thread


def read_hashed(path: Path, hasher: Executor) -> tuple[bytearray, str]:
    """A file's bytes, read into one buffer of their size (``readinto``: no second copy), and their
    sha256 (hex), each chunk hashed on ``hasher``'s thread (one worker: in order) while the next is
    read, so the check costs about the read's time, not its own (an executor that no longer takes
    work: hashed here). A file that changes size while it is read is read to its end."""
    h = hashlib.sha256()
    pending: list[Future] = []
    pool: Executor | None = hasher

    def hash_chunk(chunk: memoryview) -> None:
        nonlocal pool
        if pool is not None:
            try:
                pending.append(pool.submit(h.update, chunk))
                return
            except RuntimeError:  # shut down (the interpreter's exit): the rest here, in order
                pool = None
        wait(pending)
        h.update(chunk)

    with open(path, "rb", buffering=0) as f:
        buf = bytearray(os.fstat(f.fileno()).st_size)
        view, got = memoryview(buf), 0
        try:
            while got < len(buf):
                n = f.readinto(view[got : got + _READ_CHUNK])
                if not n:
                    break
                hash_chunk(view[got : got + n])
                got += n
        finally:
            wait(pending)  # the thread reads the buffer: done before it is given back
        for fut in pending:
            fut.result()
        del view
        rest = f.read() if got == len(buf) else b""
    if got < len(buf):
        buf = buf[:got]
    if rest:
        h.update(rest)
        buf += rest
    return buf, h.hexdigest()


__all__ = ["read_hashed", "write_durable", "write_hashed"]
