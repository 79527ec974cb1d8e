"""``xmemory serve``: the live engine behind HTTP (FastAPI + uvicorn), with API keys, validation,
request coalescing and Prometheus metrics. Imported only when serving (the ``serve`` extra)."""

from .app import ServiceConfig, create_app

__all__ = ["ServiceConfig", "create_app"]
