"""The store's durable file writes: the op ``ops.files.write_durable`` (temporary file, fsync,
rename, folder fsync; one C++ call without the GIL when built, Python's steps otherwise or under
``XMEMORY_BACKEND=reference``), named here where the store imports it."""

from __future__ import annotations

from ..ops.files import write_durable

__all__ = ["write_durable"]
