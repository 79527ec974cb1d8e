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
"""

import asyncio
import hmac
import json
import logging
import os
import re
import time
import uuid
from collections.abc import Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Annotated, Any

from fastapi import Depends, FastAPI, HTTPException, Path, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, JSONResponse, PlainTextResponse, Response
from fastapi.routing import APIRoute
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from pydantic import TypeAdapter, ValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Match

from ..engine import MemoryEngine
from ..engine.metadata import MAX_DEPTH
from ..memory.store import StoreError
from . import docs
from .coalesce import Coalescer
from .metrics import Metrics
from .schemas import (
    MAX_ID,
    MAX_PAGE,
    MAX_PAGE_SIZE,
    MAX_QUERY,
    PAGE_SIZE,
    BatchDeleteRequest,
    BatchUpdateRequest,
    ErrorBody,
    Filters,
    UpdateRequest,
    ValidationErrorBody,
    limited_add,
    limited_batch,
    limited_search,
)

log = logging.getLogger("xmemory.serve")
BODY_DELETES = frozenset({"/v1/batch"})  # the DELETE routes that take a body (its size is checked)
UNMATCHED = "<unmatched>"  # the route label of a request no route matches: metric labels stay a fixed set
_FIELD = re.compile(r"([A-Za-z_]\w*(?:\[\d+\])*): ")
_DESCRIBED = {
    400: "the body cannot be read: not UTF-8",
    401: "no valid API key",
    403: "the key may not access this user_id (or service-wide data)",
    404: "no such unit or memory",
    413: "body larger than the limit",
    503: "the server is shutting down, or the memory is quarantined (damaged)",
}


@dataclass
class ServiceConfig:
    api_keys: dict[str, frozenset[str] | None] = field(
        default_factory=dict
    )  # key -> allowed user ids (None: all)
    coalesce_ms: float = 2.0
    max_batch: int = 64  # requests per coalesced call
    search_workers: int = max(1, min(4, os.cpu_count() or 1))  # coalesced search batches in flight at once
    max_body_bytes: int = 4 << 20
    max_messages: int = 1000  # per add request
    max_items: int = 256  # per batch request
    max_queries: int = 256  # per search request


def _result(r, hits: list[dict]) -> dict[str, Any]:
    """One query's answer: the context and the units as mem0's results (``MemoryEngine.hits``)."""
    d = r.to_dict()
    return {
        "query": d["query"],
        "context": d["context"],
        "units": hits,
        "message_ids": d["message_ids"],
        "context_tokens": d["context_tokens"],
        "tokenizer": d["tokenizer"],
        "notes": d["notes"],
        "top_relevance": d["top_relevance"],
        "llm_calls": d["llm_calls"],
    }


def _field_error(detail: str) -> dict[str, str]:
    """An engine refusal ``'messages[0]: timestamp: expected ...'`` as ``{"field": "messages.0.timestamp",
    "error": "expected ..."}`` (the field ``body`` when the message names none)."""
    parts, rest = [], detail
    while m := _FIELD.match(rest):
        parts.append(m.group(1))
        rest = rest[m.end() :]
    return {"field": re.sub(r"\[(\d+)\]", r".\1", ".".join(parts)) or "body", "error": rest}


def _pydantic_error(e: dict) -> dict[str, str]:
    """One of pydantic's errors as ``{"field", "error"}``; unparsable JSON is the body's error."""
    if e["type"] == "json_invalid":
        where = f" at character {e['loc'][1]}" if len(e["loc"]) > 1 else ""
        return {
            "field": "body",
            "error": f"invalid JSON{where}: {e.get('ctx', {}).get('error', 'cannot parse')}",
        }
    return {
        "field": ".".join(str(x) for x in e["loc"][1:]) or "body",
        "error": e["msg"].removeprefix("Value error, "),
    }


_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|[{}\[\],:]')  # a JSON string, or a structural character


def _deep_field(text: str, depth: int) -> list[str | int]:
    """The place in well-formed JSON ``text`` where objects and arrays first nest ``depth`` deep,
    cut to the field a client set: the first ``metadata`` key on the way (``items.0.metadata``),
    else the body's field it is in."""
    path: list[str | int | None] = []  # per open container: its current key or index
    last = ""
    try:
        for m in _TOKEN.finditer(text):
            t = m.group()
            if t in "{[":
                if len(path) >= depth:
                    break
                path.append(None if t == "{" else 0)
            elif t in "}]":
                path.pop()
            elif t == ",":
                if isinstance(path[-1], int):
                    path[-1] += 1
            elif t == ":":
                path[-1] = json.loads(last)
            else:
                last = t
    except (IndexError, ValueError):  # not JSON after all: the body as a whole
        return []
    steps = [p for p in path if p is not None]
    cut = steps.index("metadata") + 1 if "metadata" in steps else 1
    return steps[:cut]


class _BodyRoute(APIRoute):
    """A route whose body JSON cannot parse says why: nesting deeper than the parser goes is a 422 of
    the field it is in (``metadata: nested more than 32 levels deep``, as a shallower excess is), a
    body that is not UTF-8 a 400 naming the byte; FastAPI would answer 400 without either."""

    def get_route_handler(self) -> Callable:
        handler = super().get_route_handler()

        async def route(request: Request) -> Response:
            try:
                return await handler(request)
            except StarletteHTTPException as exc:
                cause = exc.__cause__
                if exc.status_code != 400 or not isinstance(cause, (RecursionError, UnicodeDecodeError)):
                    raise
                if isinstance(cause, UnicodeDecodeError):
                    raise HTTPException(400, f"body: not valid UTF-8 at byte {cause.start}") from None
                field = _deep_field((await request.body()).decode("utf-8"), 2 * MAX_DEPTH)
                raise RequestValidationError(
                    [
                        {
                            "type": "value_error",
                            "loc": ("body", *field),
                            "msg": f"nested more than {MAX_DEPTH} levels deep",
                        }
                    ]
                ) from None

        return route


def _responses(*codes: int, invalid: bool = True) -> dict[int | str, dict[str, Any]]:
    """The OpenAPI responses of a route: its error statuses and (``invalid``: it takes input) the service's 422 body."""
    out: dict[int | str, dict[str, Any]] = {
        c: {"model": ErrorBody, "description": _DESCRIBED[c]} for c in codes
    }
    if invalid:
        out[422] = {"model": ValidationErrorBody, "description": "refused: each field and why"}
    return out


_FILTERS = TypeAdapter(Filters)
FILTERS_PARAM = {
    "name": "filters",
    "in": "query",
    "required": False,
    "content": {"application/json": {"schema": _FILTERS.json_schema()}},
    "description": "mem0's filters as a JSON object (URL-encoded, at most "
    f'{MAX_QUERY} characters): ?filters={{"topic":"travel"}} keeps the units whose source messages were added '
    'with metadata topic "travel"; operators: {"year": {"gte": 2024}}, {"OR": [...]}',
}


def _filters(raw: str | None) -> dict | None:
    """The ``filters`` query parameter: a JSON object of metadata key -> value (422 naming it otherwise)."""
    if raw is None:
        return None
    try:
        return _FILTERS.validate_json(raw)
    except ValidationError as exc:
        errs = [
            {
                "type": "value_error",
                "loc": ("query", "filters", *e["loc"]),
                "msg": f"invalid JSON: {e.get('ctx', {}).get('error', 'cannot parse')}"
                if e["type"] == "json_invalid"
                else e["msg"],
            }
            for e in exc.errors()
        ]
        raise RequestValidationError(errs) from None


async def _mapped(aw, prefix: str = "") -> Any:
    """Await ``aw``; the engine's errors become HTTP statuses (store damage stays a 500). ``prefix``:
    the engine's name for a request's place in its batch, left out of a 422's message."""
    try:
        return await aw
    except StoreError:
        raise
    except KeyError as exc:
        raise HTTPException(404, str(exc.args[0] if exc.args else exc)) from None
    except ValueError as exc:
        raise HTTPException(422, str(exc).removeprefix(prefix)) from None
    except RuntimeError as exc:
        raise HTTPException(503, str(exc)) from None


def create_app(
    engine: MemoryEngine | Callable[[], MemoryEngine], config: ServiceConfig | None = None
) -> FastAPI:
    """The app; ``engine`` an open engine or a factory called at start-up (closed at shutdown)."""
    cfg = config or ServiceConfig()
    metrics = Metrics()
    state: dict[str, Any] = {}
    AddRequest = limited_add(cfg.max_messages)
    AddBatchRequest = limited_batch(AddRequest, cfg.max_items)
    SearchRequest = limited_search(cfg.max_queries)

    def eng() -> MemoryEngine:
        return state["engine"]

    def do_search(items: list[dict]) -> list[list[dict]]:
        e = eng()
        res = e.search_batch(items)
        metrics.inc("engine_search_calls_total")
        metrics.inc("searched_queries_total", sum(len(r) for r in res))
        return [[_result(x, e.hits(x)) for x in r] for r in res]

    def do_add(items: list[dict]) -> list[dict]:
        out = eng().add_batch(items, events=True)
        metrics.inc("engine_add_calls_total")
        metrics.inc("ingested_messages_total", sum(len(a["ids"]) for a in out))
        return out

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        state["engine"] = engine() if callable(engine) and not isinstance(engine, MemoryEngine) else engine
        if cfg.coalesce_ms > 0:
            state["search"] = Coalescer(
                do_search,
                window_s=cfg.coalesce_ms / 1e3,
                max_batch=cfg.max_batch,
                on_batch=lambda n: metrics.inc("coalesced_search_requests_total", n),
                workers=cfg.search_workers,
            )
            state["add"] = Coalescer(
                do_add,
                window_s=cfg.coalesce_ms / 1e3,
                max_batch=cfg.max_batch,
                on_batch=lambda n: metrics.inc("coalesced_add_requests_total", n),
            )
            state["search"].start()
            state["add"].start()
            metrics.gauges["queue_depth_search"] = lambda: state["search"].depth
            metrics.gauges["queue_depth_add"] = lambda: state["add"].depth
        yield
        for name in ("add", "search"):  # graceful: finish what was accepted, then commit and close
            if name in state:
                await state[name].drain()
        state["engine"].close()

    app = FastAPI(
        title="xmemory_gpu",
        version="0.1.0",
        lifespan=lifespan,
        docs_url=None,
        redoc_url=None,
        description="xMemory agent memory: add, search, delete and scope live memories.",
    )
    app.router.route_class = _BodyRoute

    async def run(kind: str, item: dict) -> Any:
        """Through the coalescer when coalescing is on, else one engine call for this request."""
        if kind in state:
            return await state[kind].submit(item)
        return (await asyncio.to_thread(do_search if kind == "search" else do_add, [item]))[0]

    def route_of(request: Request) -> str:
        """The route template a request goes to (a method it lacks included), else UNMATCHED."""
        found = [(r.matches(request.scope)[0], r.path) for r in app.router.routes if getattr(r, "path", None)]
        for want in (Match.FULL, Match.PARTIAL):
            for match, path in found:
                if match == want:
                    return path
        return UNMATCHED

    @app.middleware("http")
    async def frame(request: Request, call_next):
        rid = uuid.uuid4().hex[:16]
        request.state.rid = rid
        t0 = time.perf_counter()
        route = route_of(request)
        if request.method in ("POST", "PUT", "PATCH") or (
            request.method == "DELETE" and route in BODY_DELETES
        ):
            length = request.headers.get("content-length")
            if length is None:
                resp = JSONResponse({"detail": "a Content-Length header is required"}, status_code=411)
            elif not length.isdigit() or int(length) > cfg.max_body_bytes:
                resp = JSONResponse(
                    {"detail": f"body larger than the limit of {cfg.max_body_bytes} bytes"}, status_code=413
                )
            else:
                resp = None
            if resp is not None:
                metrics.observe(request.method, route, resp.status_code, time.perf_counter() - t0)
                return resp
        try:
            resp = await call_next(request)
        except Exception:  # noqa: BLE001 - logged with its id; the client gets the id only
            log.exception("request %s %s %s failed", rid, request.method, route)
            resp = JSONResponse({"detail": "internal error", "request_id": rid}, status_code=500)
        metrics.observe(request.method, route, resp.status_code, time.perf_counter() - t0)
        resp.headers["X-Request-Id"] = rid
        return resp

    @app.exception_handler(RequestValidationError)
    async def invalid(request: Request, exc: RequestValidationError):
        errs = [_pydantic_error(e) for e in exc.errors()] or [{"field": "body", "error": "invalid"}]
        return JSONResponse(
            {"detail": f"{errs[0]['field']}: {errs[0]['error']}", "errors": errs}, status_code=422
        )

    def methods_of(request: Request) -> str:
        """Every method of the routes whose path the request's is (the router names the first route's only)."""
        found = {
            m
            for r in app.router.routes
            if isinstance(r, APIRoute) and r.matches(request.scope)[0] != Match.NONE
            for m in r.methods
        }
        return ", ".join(sorted(found | ({"HEAD"} if "GET" in found else set())))

    @app.exception_handler(StarletteHTTPException)
    async def refused(request: Request, exc: StarletteHTTPException):
        body: dict[str, Any] = {"detail": exc.detail}
        headers = exc.headers
        if exc.status_code == 422:  # the engine's refusals get the same body as the schema's
            body["errors"] = [_field_error(str(exc.detail))]
        elif exc.status_code == 405:
            headers = {**(headers or {}), "Allow": methods_of(request)}
        return JSONResponse(body, status_code=exc.status_code, headers=headers)

    bearer = HTTPBearer(
        auto_error=False, scheme_name="bearer", description="an API key: Authorization: Bearer KEY"
    )

    def key_scope(token: str) -> tuple[bool, frozenset[str] | None]:
        """(whether ``token`` is a key, the user ids it may access: None for all)."""
        found, allowed = False, None
        for key, users in cfg.api_keys.items():  # every key compared, in constant time
            if hmac.compare_digest(key.encode(), token.encode()):
                found, allowed = True, users
        return found, allowed

    def scoped(
        creds: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)],
    ) -> frozenset[str] | None:
        """The caller's allowed user ids (None: all); 401 without a valid key."""
        if creds is None:
            raise HTTPException(
                401, "missing API key (Authorization: Bearer KEY)", headers={"WWW-Authenticate": "Bearer"}
            )
        found, allowed = key_scope(creds.credentials)
        if not found:
            raise HTTPException(401, "invalid API key", headers={"WWW-Authenticate": "Bearer"})
        return allowed

    def open_scope() -> None:
        """No keys configured: every caller may access every scope."""
        return None

    Allowed = Annotated[frozenset[str] | None, Depends(scoped if cfg.api_keys else open_scope)]
    auth = (401, 403) if cfg.api_keys else ()

    def check_scope(allowed: frozenset[str] | None, user_id: str | None) -> None:
        if allowed is not None and user_id is None:
            raise HTTPException(403, "this key is bound to user ids: give user_id")
        if allowed is not None and user_id not in allowed:
            raise HTTPException(403, f"this key may not access user_id {user_id!r}")

    async def engine_call(fn: Callable[[], Any], prefix: str = "") -> Any:
        """An engine call in a worker thread, its errors mapped to HTTP statuses (``prefix``: the
        engine's name for the call, left out of a 422's message)."""
        return await _mapped(asyncio.to_thread(fn), prefix)

    async def engine_async(kind: str, item: dict) -> Any:
        return await _mapped(run(kind, item), prefix=f"{kind}_batch: items[0]: ")

    @app.get("/docs", include_in_schema=False)
    async def docs_page() -> HTMLResponse:
        return HTMLResponse(docs.PAGE, headers={"Content-Security-Policy": docs.CSP})

    @app.get("/health")
    async def health(request: Request) -> dict:
        """The status; the store-wide counts too for a key of every scope (or when the server has no keys)."""
        if cfg.api_keys:
            creds = await bearer(request)
            if creds is None or key_scope(creds.credentials) != (True, None):
                return {"status": "ok"}
        return {"status": "ok", **eng().stats()}

    json_error = {
        "application/json": {"schema": {"$ref": "#/components/schemas/ErrorBody"}}
    }  # declared by the routes below

    @app.get(
        "/metrics",
        response_class=PlainTextResponse,
        responses={c: {"description": _DESCRIBED[c], "content": json_error} for c in auth},
    )
    async def metrics_route(allowed: Allowed) -> str:
        """Prometheus metrics of the whole service: a key of every scope."""
        if allowed is not None:
            raise HTTPException(
                403,
                "/metrics: this key is bound to user ids; the service's metrics need a key of every scope",
            )
        return metrics.render()

    @app.post("/v1/memories", responses=_responses(400, *auth, 413, 503))
    async def add(req: AddRequest, allowed: Allowed) -> dict:  # type: ignore[valid-type]
        """mem0's add: ``{"ids": [...], "results": [event, ...]}`` (``MemoryEngine.add_batch``)."""
        check_scope(allowed, req.user_id)
        return await engine_async("add", req.as_engine())

    @app.post("/v1/memories/batch", responses=_responses(400, *auth, 413, 503))
    async def add_batch(req: AddBatchRequest, allowed: Allowed) -> dict:  # type: ignore[valid-type]
        for it in req.items:
            check_scope(allowed, it.user_id)
        items = [it.as_engine() for it in req.items]
        out = await engine_call(lambda: eng().add_batch(items, events=True))
        metrics.inc("ingested_messages_total", sum(len(a["ids"]) for a in out))
        return {"ids": [a["ids"] for a in out], "results": [a["results"] for a in out]}

    @app.post("/v1/search", responses=_responses(400, *auth, 413, 503))
    async def search(req: SearchRequest, allowed: Allowed) -> Response:  # type: ignore[valid-type]
        check_scope(allowed, req.user_id)
        item = {
            "queries": [req.query] if req.query is not None else req.queries,
            "user_id": req.user_id,
            "agent_id": req.agent_id,
            "run_id": req.run_id,
            "strategy": req.strategy,
            "budget_tokens": req.budget_tokens,
            "limit": req.limit_asked(),
        }
        item |= {k: v for k in ("threshold", "filters") if (v := getattr(req, k)) is not None}
        results = await engine_async(
            "search", item
        )  # plain JSON types: serialised directly, not re-encoded by FastAPI
        return Response(
            json.dumps({"results": results}, ensure_ascii=False).encode(), media_type="application/json"
        )

    def scope_params(
        user_id: Annotated[str | None, Query(max_length=MAX_ID)] = None,
        agent_id: Annotated[str | None, Query(max_length=MAX_ID)] = None,
        run_id: Annotated[str | None, Query(max_length=MAX_ID)] = None,
    ) -> dict:
        """The scope of a read: at least one part (a part left out matches any; an empty one is absent)."""
        scope = {"user_id": user_id or None, "agent_id": agent_id or None, "run_id": run_id or None}
        if not any(scope.values()):
            raise RequestValidationError(
                [
                    {
                        "type": "value_error",
                        "loc": ("query", "user_id"),
                        "msg": "give at least one of user_id, agent_id and run_id",
                    }
                ]
            )
        return scope

    def unit_scope_params(
        user_id: Annotated[str | None, Query(max_length=MAX_ID)] = None,
        agent_id: Annotated[str | None, Query(max_length=MAX_ID)] = None,
        run_id: Annotated[str | None, Query(max_length=MAX_ID)] = None,
    ) -> dict:
        """The scope of a unit id (none for a message id unique in the store)."""
        return {"user_id": user_id or None, "agent_id": agent_id or None, "run_id": run_id or None}

    ScopeQ = Annotated[dict, Depends(scope_params)]
    UnitScopeQ = Annotated[dict, Depends(unit_scope_params)]
    UnitId = Annotated[
        str, Path(min_length=1, max_length=MAX_ID, description="a unit or message id ('/' allowed)")
    ]

    @app.get("/v1/memories", responses=_responses(*auth, 503), openapi_extra={"parameters": [FILTERS_PARAM]})
    async def get_all(
        scope: ScopeQ,
        allowed: Allowed,
        filters: Annotated[str | None, Query(include_in_schema=False, max_length=MAX_QUERY)] = None,
        page: Annotated[
            int | None,
            Query(ge=1, le=MAX_PAGE, description="mem0's paging: this page (1-based) of the units"),
        ] = None,
        page_size: Annotated[
            int | None,
            Query(ge=1, le=MAX_PAGE_SIZE, description=f"units per page (default {PAGE_SIZE})"),
        ] = None,
    ) -> dict:
        """A scope's units; with ``page`` / ``page_size``, that page of them (the same order)."""
        check_scope(allowed, scope["user_id"])
        given = _filters(filters)
        return {
            "units": await engine_call(
                lambda: eng().get_all(**scope, filters=given, page=page, page_size=page_size)
            )
        }

    @app.get("/v1/memories/{unit_id:path}", responses=_responses(*auth, 404, 503))
    async def get(unit_id: UnitId, scope: UnitScopeQ, allowed: Allowed) -> dict:
        check_scope(allowed, scope["user_id"])
        return await engine_call(lambda: eng().get(unit_id, **scope))

    @app.put("/v1/memories/{unit_id:path}", responses=_responses(400, *auth, 404, 413, 503))
    async def update(unit_id: UnitId, req: UpdateRequest, allowed: Allowed) -> dict:
        """A message's new text; what was derived from the old text is derived again (as after a delete)."""
        check_scope(allowed, req.user_id)
        return await engine_call(
            lambda: eng().update(
                unit_id, req.text, user_id=req.user_id, agent_id=req.agent_id, run_id=req.run_id
            )
        )

    @app.delete("/v1/memories/{unit_id:path}", responses=_responses(*auth, 404, 503))
    async def delete(unit_id: UnitId, scope: UnitScopeQ, allowed: Allowed) -> dict:
        check_scope(allowed, scope["user_id"])
        await engine_call(lambda: eng().delete(unit_id, **scope))
        return {"deleted": unit_id}

    @app.put("/v1/batch", responses=_responses(400, *auth, 404, 413, 503))
    async def batch_update(req: BatchUpdateRequest, allowed: Allowed) -> dict:
        """mem0's ``batch_update``: messages' new texts, every one or none (one commit); the updated
        messages back, in order."""
        for it in req.memories:
            check_scope(allowed, it.user_id)
        items = [it.as_engine() for it in req.memories]
        return {"results": await engine_call(lambda: eng().batch_update(items), "batch_update: ")}

    @app.delete("/v1/batch", responses=_responses(400, *auth, 404, 413, 503))
    async def batch_delete(req: BatchDeleteRequest, allowed: Allowed) -> dict:
        """mem0's ``batch_delete``: units forgotten, every one or none (one commit); their ids back."""
        for it in req.memories:
            check_scope(allowed, it.user_id)
        items = [it.as_engine() for it in req.memories]
        return {"deleted": await engine_call(lambda: eng().batch_delete(items), "batch_delete: ")}

    @app.delete("/v1/memories", responses=_responses(*auth, 503))
    async def delete_all(scope: ScopeQ, allowed: Allowed) -> dict:
        check_scope(allowed, scope["user_id"])
        n = await engine_call(lambda: eng().delete_all(**scope))
        return {"deleted_messages": n}

    @app.post("/v1/reset", responses=_responses(*auth, 503, invalid=False))
    async def reset(allowed: Allowed) -> dict:
        """Delete every memory of the store: a key of every scope."""
        if allowed is not None:
            raise HTTPException(
                403, "/v1/reset: this key is bound to user ids; a reset needs a key of every scope"
            )
        return {"deleted_memories": await engine_call(lambda: eng().reset())}

    @app.get("/v1/scopes", responses=_responses(*auth, 503))
    async def scopes(
        allowed: Allowed,
        user_id: Annotated[str | None, Query(max_length=MAX_ID)] = None,
        agent_id: Annotated[str | None, Query(max_length=MAX_ID)] = None,
        run_id: Annotated[str | None, Query(max_length=MAX_ID)] = None,
    ) -> dict:
        """Every memory's scope ``{"user_id", "agent_id", "run_id"}``, narrowed by the parts given: a
        key of every scope."""
        if allowed is not None:
            raise HTTPException(
                403,
                "/v1/scopes: this key is bound to user ids; the list of scopes needs a key of every scope",
            )
        want = {"user_id": user_id or None, "agent_id": agent_id or None, "run_id": run_id or None}
        return {"scopes": await engine_call(lambda: eng().scopes(**want))}

    @app.get("/v1/history", responses=_responses(*auth, 503))
    async def history(scope: ScopeQ, allowed: Allowed) -> dict:
        check_scope(allowed, scope["user_id"])
        return {"history": await engine_call(lambda: eng().history(**scope))}

    return app
