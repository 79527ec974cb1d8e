"""``xmemory serve``: the live engine behind HTTP (FastAPI + uvicorn), with API keys, validation,
request coalescing and Prometheus metrics. Imported only when serving (the ``serve`` extra); its
``auth`` and ``framing`` modules (the servers' shared API-key and body-size rules) need no FastAPI."""

from __future__ import annotations

from typing import Any

__all__ = ["ServiceConfig", "create_app"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from . import app

        return getattr(app, name)
    raise AttributeError(f"module 'xmemory_gpu.service' has no attribute {name!r}")
