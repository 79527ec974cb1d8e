"""The live engine: add, search, delete and scope memories over a store."""

from .engine import MemoryEngine, scope_key
from .locks import WriterLockError

__all__ = ["MemoryEngine", "WriterLockError", "scope_key"]
