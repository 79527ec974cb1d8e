"""Durable file writes in Python (``ops.files``): each file's bytes to its temporary path, fsynced,
renamed into place, then each destination folder fsynced once (the renames durable); the steps
``cpu`` (``csrc/cpu/files.cpp``) is tested against, file for file and error for error."""

from __future__ import annotations

import errno
import os
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

Failure = tuple[int, bytes]  # (errno, the path the failed step acted on)


def write_durable(
    tmps: Sequence[bytes], dsts: Sequence[bytes], data: Sequence[object], threads: int
) -> list[Failure]:
    """File i: ``data[i]`` (bytes-like) to ``tmps[i]``, fsynced, renamed to ``dsts[i]``, up to
    ``threads`` files at once; then the folders of the files that landed fsynced. Returns the
    failures: the files' in index order (a failed file's tmp removed), then the folders'."""
    jobs = list(zip(tmps, dsts, data))
    if len(jobs) <= 1 or threads <= 1:
        failed = [write_one(*job) for job in jobs]
    else:
        with ThreadPoolExecutor(max_workers=min(threads, len(jobs))) as pool:
            failed = list(pool.map(lambda job: write_one(*job), jobs))
    landed = [dst for dst, f in zip(dsts, failed) if f is None]
    return [f for f in failed if f is not None] + sync_folders(landed)


def write_one(tmp: bytes, dst: bytes, data: object) -> Failure | None:
    """One file: created or truncated at ``tmp``, written, fsynced, closed, renamed to ``dst``. The
    failure (naming ``dst`` when the rename failed, else ``tmp``), or None; on failure or interrupt
    the temporary file is removed."""
    at = tmp
    try:
        with open(tmp, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        at = dst
        os.replace(tmp, dst)
    except BaseException as exc:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        if not isinstance(exc, OSError):
            raise
        return exc.errno or errno.EIO, at
    return None


def sync_folders(dsts: Sequence[bytes]) -> list[Failure]:
    """The folder of each path in ``dsts`` fsynced once, in first-seen order, so that the entries
    renamed into it survive a crash; the failures (errno, folder)."""
    failed: list[Failure] = []
    for folder in dict.fromkeys(os.path.dirname(d) or b"." for d in dsts):
        try:
            fd = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        except OSError as exc:
            failed.append((exc.errno or errno.EIO, folder))
    return failed
