"""Compatibility import: the backend registry and resolver live in ``_dispatch.py``."""

from __future__ import annotations

from ._dispatch import (  # noqa: F401
    BACKENDS,
    BackendStatus,
    _statuses,
    available_backends,
    interpreting_triton,
    is_available,
    is_cuda_tensor,
    resolve_backend,
)

__all__ = ["BACKENDS", "BackendStatus", "available_backends", "interpreting_triton", "is_available", "is_cuda_tensor",
           "resolve_backend"]
