"""The HTTP API over a ``MemoryEngine`` (FastAPI). Routes mirror the engine:

``POST /v1/memories`` (add: mem0's ``messages``, a string or one message or a list; ``infer``; the
answer ``{"ids", "results"}`` with mem0's events), ``POST /v1/memories/batch``, ``POST /v1/search``
(``limit`` or mem0's ``top_k``), ``GET /v1/memories`` (a scope's units; mem0's ``page`` /
``page_size``), ``GET /v1/memories/{id}``, ``DELETE /v1/memories/{id}`` (an id may hold ``/``),
``PUT /v1/memories/{id}`` (a message's new text; the updated message back, as the engine gives it),
``PUT /v1/batch`` / ``DELETE /v1/batch`` (mem0's ``batch_update`` / ``batch_delete``:
``{"memories": [...]}``, every item or none), ``DELETE /v1/memories`` (a whole scope),
``POST /v1/reset`` (every memory; a key of every scope), ``GET /v1/scopes`` (every memory's scope; a key of every scope), ``GET /v1/history``, ``GET /health`` (no key: the status
only; store-wide counts for a key of every scope), ``GET /metrics`` (Prometheus; a key of every
scope), ``GET /docs`` (an offline page over ``/openapi.json``).

Concurrent searches (and adds) within ``coalesce_ms`` are answered by one batched engine call;
with ``coalesce_ms=0`` every request is its own call. Keys: ``Authorization: Bearer KEY``, compared
in constant time; a key may be bound to a set of user ids (403 outside them). Bad requests get
422 ``{"detail": "FIELD: ERROR", "errors": [{"field", "error"}]}`` (the arguments' rules are the MCP
server's and the LangGraph store's too: ``engine.rules``); a body that is not UTF-8 400; bodies over
the limit 413; a method a path lacks 405 with every method it has in ``Allow``; internal errors 500
with a request id (the traceback goes to the server's log, never to the client).

The routes are ``routes.router``; the runtime (engine, coalescers, metrics) ``state.Service``; keys
``auth`` and body framing ``framing`` (shared with the MCP server and the Ray Serve ingress); how a
refusal is told ``errors``. ``create_app`` puts them together: lifecycle and middleware.
"""

import logging
import time
import uuid
from collections.abc import Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Match

from ..engine import MemoryEngine
from . import errors, framing, routes
from .state import Service, ServiceConfig

__all__ = ["ServiceConfig", "create_app"]

log = logging.getLogger("xmemory.serve")
UNMATCHED = "<unmatched>"  # the route label of a request no route matches: metric labels stay a fixed set


def route_of(request: Request) -> str:
    """The route template a request goes to (a method it lacks included), else UNMATCHED."""
    found = [
        (r.matches(request.scope)[0], r.path) for r in request.app.router.routes if getattr(r, "path", None)
    ]
    for want in (Match.FULL, Match.PARTIAL):
        for match, path in found:
            if match == want:
                return path
    return UNMATCHED


async def frame(request: Request, call_next: Callable[[Request], Awaitable[Response]]) -> Response:
    """Every request: its framing checked (411 / 413 before the body is read), its id given
    (``X-Request-Id``), an internal error answered 500 with that id, its status and latency counted."""
    svc: Service = request.app.state.service
    rid = uuid.uuid4().hex[:16]
    request.state.rid = rid
    t0 = time.perf_counter()
    route = route_of(request)
    unframed = framing.refusal(
        request.method, route, request.headers.get("content-length"), svc.cfg.max_body_bytes
    )
    if unframed is not None:
        resp = JSONResponse({"detail": unframed[1]}, status_code=unframed[0])
        svc.metrics.observe(request.method, route, resp.status_code, time.perf_counter() - t0)
        return resp
    try:
        resp = await call_next(request)
    except Exception:  # noqa: BLE001 - logged with its id; the client gets the id only
        log.exception("request %s %s %s failed", rid, request.method, route)
        resp = JSONResponse({"detail": "internal error", "request_id": rid}, status_code=500)
    svc.metrics.observe(request.method, route, resp.status_code, time.perf_counter() - t0)
    resp.headers["X-Request-Id"] = rid
    return resp


def create_app(
    engine: MemoryEngine | Callable[[], MemoryEngine], config: ServiceConfig | None = None
) -> FastAPI:
    """The app; ``engine`` an open engine or a factory called at start-up (closed at shutdown)."""
    svc = Service(engine, config or ServiceConfig())

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        svc.start()
        yield
        await svc.stop()

    app = FastAPI(
        title="xmemory_gpu",
        version="0.1.0",
        lifespan=lifespan,
        docs_url=None,
        redoc_url=None,
        description="xMemory agent memory: add, search, delete and scope live memories.",
    )
    app.state.service = svc
    routes.install(app)
    app.middleware("http")(frame)
    app.add_exception_handler(RequestValidationError, errors.invalid)
    app.add_exception_handler(StarletteHTTPException, errors.refused)
    if not svc.cfg.api_keys:
        published = app.openapi

        def openapi() -> dict[str, Any]:
            return routes.without_keys(published())

        app.openapi = openapi  # type: ignore[method-assign]
    return app
