"""The live engine: add, search, delete and scope memories over a store (``AsyncMemoryEngine``: its
calls awaited)."""

from ..memory.locks import WriterLockError
from .aio import AsyncMemoryEngine
from .engine import Limits, MemoryEngine, QuarantinedError, scope_key

__all__ = ["AsyncMemoryEngine", "Limits", "MemoryEngine", "QuarantinedError", "WriterLockError", "scope_key"]
