"""xmemory_gpu: xMemory hierarchical agent memory with batched GPU/CPU kernels.

The public surface, imported lazily (``import xmemory_gpu`` needs no GPU, model or compiled module):
``MemoryEngine`` (the live memory; ``AsyncMemoryEngine``: its calls awaited), ``MemoryClient`` /
``AsyncMemoryClient`` (the same calls over HTTP), ``Retriever``, ``Store``, ``Bank``, ``XMemoryConfig``, ``build_store``; kernels under ``xmemory_gpu.ops``.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

_EXPORTS = {
    "MemoryEngine": "xmemory_gpu.engine.engine",
    "AsyncMemoryEngine": "xmemory_gpu.engine.aio",
    "MemoryClient": "xmemory_gpu.client",
    "AsyncMemoryClient": "xmemory_gpu.client",
    "MemoryAPI": "xmemory_gpu.api",
    "AsyncMemoryAPI": "xmemory_gpu.api",
    "Retriever": "xmemory_gpu.retrieve.retriever",
    "RetrievalResult": "xmemory_gpu.retrieve.result",
    "Store": "xmemory_gpu.memory.store",
    "Bank": "xmemory_gpu.memory.bank",
    "XMemoryConfig": "xmemory_gpu.config",
    "build_store": "xmemory_gpu.construct.pipeline",
}
__all__ = [*_EXPORTS, "__version__"]


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        value = getattr(importlib.import_module(_EXPORTS[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'xmemory_gpu' has no attribute {name!r}")
