"""New files written durably, several at once: each file's bytes to a temporary path, made durable,
renamed into place, then each destination folder fsynced once (the renames durable). Every file is
attempted; a file that fails leaves no temporary file behind. Host only: ``reference`` (Python's
steps, an fsync per file on a thread pool) and ``cpu`` (one C++ call without the GIL,
``csrc/cpu/files.cpp``: the files written on threads of its own, then, from 16 files (a bulk build's
shard) in one folder of a local file system (ext4, xfs, btrfs, tmpfs) on Linux 5.8 or later, one
``syncfs`` of the file system for all of them, else one fsync each; a network or FUSE file system,
whose sync may not reach its server, is fsynced file by file). A store commits a shard's files from
a background thread while the build's thread runs Python: in C++ the writes never wait on the
interpreter (a thread needing the GIL behind a busy interpreter waits a 5 ms switch interval each
time, and Python's steps need it five times a file)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from ..backends import host_implementation, register
from .contract import accepts_write_durable, durable_inputs

register("write_durable", __name__, {"reference": "reference", "cpu": "cpu"}, accepts=accepts_write_durable)


def write_durable(
    files: Sequence[tuple[str | Path, str | Path, bytes]], *, threads: int = 8, backend: str = "auto"
) -> None:
    """Each ``(tmp, dst, data)``: ``data`` (bytes-like; the ``cpu`` pass takes ``bytes``) to ``tmp``
    (created or truncated), on disk, renamed to ``dst``, up to ``threads`` at once; then the folders of
    the files that landed fsynced. Every file is attempted; the first failure (the files' in order,
    then the folders') raises ``OSError`` naming its path after all are done (a failed file's ``tmp``
    removed, the others in place). ``backend="reference"``: Python's steps even where the C++ call is
    built."""
    tmps, dsts, data = durable_inputs(files, threads)
    failed = host_implementation("write_durable", backend)(tmps, dsts, data, int(threads))
    if failed:
        err, path = failed[0]
        raise OSError(err, os.strerror(err), os.fsdecode(path))


__all__ = ["write_durable"]
