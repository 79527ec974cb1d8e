"""C++ CPU path of ``write_durable`` (``xmemory_gpu._C``, ``csrc/cpu/files.cpp``): the files written,
made durable (an fsync each, or from 16 files in one folder of a local file system one ``syncfs``)
and renamed on threads of its own in one call without the GIL, then the destination folders fsynced
(``reference.sync_folders``: the kernel does not sync folders). Data other than ``bytes`` objects
(the kernel reads ``bytes`` only): the Python steps of ``reference``."""

from __future__ import annotations

from collections.abc import Sequence

from ... import _C
from . import reference
from .reference import Failure


def write_durable(
    tmps: Sequence[bytes], dsts: Sequence[bytes], data: Sequence[object], threads: int
) -> list[Failure]:
    if not all(type(d) is bytes for d in data):
        return reference.write_durable(tmps, dsts, data, threads)
    failed = _C.write_durable(list(tmps), list(dsts), list(data), threads)
    bad = {i for i, _, _ in failed}
    landed = [dst for i, dst in enumerate(dsts) if i not in bad]
    return [(err, bytes(path)) for _, err, path in failed] + reference.sync_folders(landed)
