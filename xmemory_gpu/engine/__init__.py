"""The live engine: add, search, delete and scope memories over a store."""

from ..memory.locks import WriterLockError
from .engine import MemoryEngine, scope_key

__all__ = ["MemoryEngine", "WriterLockError", "scope_key"]
