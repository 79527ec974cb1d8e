"""The live engine: add, search, delete and scope memories over a store."""

from ..memory.locks import WriterLockError
from .engine import Limits, MemoryEngine, QuarantinedError, scope_key

__all__ = ["Limits", "MemoryEngine", "QuarantinedError", "WriterLockError", "scope_key"]
