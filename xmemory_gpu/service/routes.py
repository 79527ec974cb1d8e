"""The HTTP API's routes (``router``), each a call of the app's engine (``request.app.state.service``,
a ``state.Service``): the body checked by ``schemas``, the key by ``auth`` (``Allowed``: the user ids
the caller's key may access, None for all), the engine's errors mapped to statuses (``_mapped``).

Every keyed route declares the bearer scheme and its 401 / 403; an app without keys publishes its
OpenAPI document without them (``without_keys``)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Annotated, Any

from fastapi import APIRouter, Depends, FastAPI, HTTPException, Path, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, PlainTextResponse, Response
from fastapi.routing import APIRoute
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from pydantic import TypeAdapter, ValidationError

from ..memory.store import StoreError
from . import auth, docs
from .errors import BodyRoute
from .schemas import (
    MAX_ID,
    MAX_PAGE,
    MAX_PAGE_SIZE,
    MAX_QUERY,
    PAGE_SIZE,
    AddBatchRequest,
    AddRequest,
    BatchDeleteRequest,
    BatchUpdateRequest,
    ErrorBody,
    Filters,
    SearchRequest,
    UpdateRequest,
    ValidationErrorBody,
)
from .state import Service

router = APIRouter(route_class=BodyRoute)
_COPIED = (  # what a route is made of, as ``install`` copies it
    "response_model status_code tags dependencies summary description response_description responses "
    "deprecated methods operation_id response_model_include response_model_exclude response_model_by_alias "
    "response_model_exclude_unset response_model_exclude_defaults response_model_exclude_none "
    "include_in_schema response_class name callbacks openapi_extra generate_unique_id_function"
).split()
KEYED = (401, 403)  # the statuses of a key check (left out of an app without keys)
_DESCRIBED = {
    400: "the body cannot be read: not UTF-8",
    401: "no valid API key",
    403: "the key may not access this user_id (or service-wide data)",
    404: "no such unit or memory",
    413: "body larger than the limit",
    503: "the server is shutting down, or the memory is quarantined (damaged)",
}
_JSON_ERROR = {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorBody"}}}


def _responses(*codes: int, invalid: bool = True) -> dict[int | str, dict[str, Any]]:
    """The OpenAPI responses of a keyed route: its error statuses, the key's, and (``invalid``: it
    takes input) the service's 422 body."""
    out: dict[int | str, dict[str, Any]] = {
        c: {"model": ErrorBody, "description": _DESCRIBED[c]} for c in sorted({*codes, *KEYED})
    }
    if invalid:
        out[422] = {"model": ValidationErrorBody, "description": "refused: each field and why"}
    return out


def install(app: FastAPI) -> None:
    """``router``'s routes made the app's own routes (``app.include_router`` may keep a router as
    one entry of ``app.routes``; the metrics' route labels and ``Allow`` read the routes)."""
    for r in router.routes:
        if isinstance(r, APIRoute):
            options = {k: getattr(r, k) for k in _COPIED}
            app.router.add_api_route(r.path, r.endpoint, route_class_override=type(r), **options)


def without_keys(spec: dict[str, Any]) -> dict[str, Any]:
    """An OpenAPI document as an app without keys publishes it: no bearer scheme, no 401 / 403."""
    spec.get("components", {}).pop("securitySchemes", None)
    for item in spec.get("paths", {}).values():
        for op in item.values():
            op.pop("security", None)
            for code in KEYED:
                op.get("responses", {}).pop(str(code), None)
    return spec


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


# -- dependencies --------------------------------------------------------------------------------


def service(request: Request) -> Service:
    return request.app.state.service


Svc = Annotated[Service, Depends(service)]
bearer = HTTPBearer(
    auto_error=False, scheme_name="bearer", description="an API key: Authorization: Bearer KEY"
)


def allowed_users(
    request: Request,
    svc: Svc,
    _declared: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)],  # the OpenAPI scheme
) -> frozenset[str] | None:
    """The caller's allowed user ids (None: all; every caller when the server has no keys); 401
    without a valid key."""
    keys = svc.cfg.api_keys
    if not keys:
        return None
    why, users = auth.authenticate(keys, request.headers.get("authorization"))
    if why is not None:
        raise HTTPException(401, why, headers=auth.CHALLENGE)
    return users


Allowed = Annotated[frozenset[str] | None, Depends(allowed_users)]


def check_scope(allowed: frozenset[str] | None, user_id: str | None) -> None:
    """403 when the key may not reach ``user_id``'s memory."""
    if (why := auth.user_refusal(allowed, user_id)) is not None:
        raise HTTPException(403, why)


def every_scope(allowed: frozenset[str] | None, route: str, needs: str) -> None:
    """403 unless the key may access every scope (``needs``: what ``route`` needs it for)."""
    if allowed is not None:
        raise HTTPException(403, f"{route}: this key is bound to user ids; {needs}")


def scope_params(
    user_id: Annotated[str | None, Query(max_length=MAX_ID)] = None,
    agent_id: Annotated[str | None, Query(max_length=MAX_ID)] = None,
    run_id: Annotated[str | None, Query(max_length=MAX_ID)] = None,
) -> dict:
    """The scope of a read: at least one part (a part left out matches any; an empty one is absent)."""
    scope = unit_scope_params(user_id, agent_id, run_id)
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


async def engine_call(svc: Service, fn: Callable[[Any], Any], prefix: str = "") -> Any:
    """``fn(engine)`` in a worker thread, its errors mapped to HTTP statuses (``prefix``: the
    engine's name for the call, left out of a 422's message)."""
    return await _mapped(asyncio.to_thread(lambda: fn(svc.engine)), prefix)


async def coalesced(svc: Service, kind: str, item: dict) -> Any:
    """One add or search request through the service's coalescer (or its own engine call)."""
    return await _mapped(svc.run(kind, item), prefix=f"{kind}_batch: items[0]: ")


# -- routes --------------------------------------------------------------------------------------


@router.get("/docs", include_in_schema=False)
async def docs_page() -> HTMLResponse:
    return HTMLResponse(docs.PAGE, headers={"Content-Security-Policy": docs.CSP})


@router.get("/health")
async def health(request: Request, svc: Svc) -> dict:
    """The status; the store-wide counts too for a key of every scope (or when the server has no keys)."""
    keys = svc.cfg.api_keys
    if keys and not auth.every_scope(keys, request.headers.get("authorization")):
        return {"status": "ok"}
    return {"status": "ok", **svc.engine.stats()}


@router.get(
    "/metrics",
    response_class=PlainTextResponse,
    responses={c: {"description": _DESCRIBED[c], "content": _JSON_ERROR} for c in KEYED},
)
async def metrics_route(svc: Svc, allowed: Allowed) -> str:
    """Prometheus metrics of the whole service: a key of every scope."""
    every_scope(allowed, "/metrics", "the service's metrics need a key of every scope")
    return svc.metrics.render()


def at_most(n: int, cap: int, field: str) -> None:
    """422 when a request holds more than the service's configured ``cap`` (``ServiceConfig``)."""
    if n > cap:
        raise HTTPException(422, f"{field}: at most {cap} per request (the server's setting), got {n}")


@router.post("/v1/memories", responses=_responses(400, 413, 503))
async def add(req: AddRequest, svc: Svc, allowed: Allowed) -> dict:
    """mem0's add: ``{"ids": [...], "results": [event, ...]}`` (``MemoryEngine.add_batch``)."""
    at_most(len(req.messages), svc.cfg.max_messages, "messages")
    check_scope(allowed, req.user_id)
    return await coalesced(svc, "add", req.as_engine())


@router.post("/v1/memories/batch", responses=_responses(400, 413, 503))
async def add_batch(req: AddBatchRequest, svc: Svc, allowed: Allowed) -> dict:
    at_most(len(req.items), svc.cfg.max_items, "items")
    for it in req.items:
        at_most(len(it.messages), svc.cfg.max_messages, "messages")
        check_scope(allowed, it.user_id)
    items = [it.as_engine() for it in req.items]
    out = await engine_call(svc, lambda e: e.add_batch(items, events=True))
    svc.metrics.inc("ingested_messages_total", sum(len(a["ids"]) for a in out))
    return {"ids": [a["ids"] for a in out], "results": [a["results"] for a in out]}


@router.post("/v1/search", responses=_responses(400, 413, 503))
async def search(req: SearchRequest, svc: Svc, allowed: Allowed) -> Response:
    at_most(len(req.queries or ()), svc.cfg.max_queries, "queries")
    check_scope(allowed, req.user_id)
    results = await coalesced(svc, "search", req.as_engine())
    # plain JSON types: serialised directly, not re-encoded by FastAPI
    return Response(
        json.dumps({"results": results}, ensure_ascii=False).encode(), media_type="application/json"
    )


@router.get("/v1/memories", responses=_responses(503), openapi_extra={"parameters": [FILTERS_PARAM]})
async def get_all(
    scope: ScopeQ,
    svc: Svc,
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
    units = await engine_call(
        svc, lambda e: e.get_all(**scope, filters=given, page=page, page_size=page_size)
    )
    return {"units": units}


@router.get("/v1/memories/{unit_id:path}", responses=_responses(404, 503))
async def get(unit_id: UnitId, scope: UnitScopeQ, svc: Svc, allowed: Allowed) -> dict:
    check_scope(allowed, scope["user_id"])
    return await engine_call(svc, lambda e: e.get(unit_id, **scope))


@router.put("/v1/memories/{unit_id:path}", responses=_responses(400, 404, 413, 503))
async def update(unit_id: UnitId, req: UpdateRequest, svc: Svc, allowed: Allowed) -> dict:
    """A message's new text; what was derived from the old text is derived again (as after a delete)."""
    check_scope(allowed, req.user_id)
    scope = {"user_id": req.user_id, "agent_id": req.agent_id, "run_id": req.run_id}
    return await engine_call(svc, lambda e: e.update(unit_id, req.text, **scope))


@router.delete("/v1/memories/{unit_id:path}", responses=_responses(404, 503))
async def delete(unit_id: UnitId, scope: UnitScopeQ, svc: Svc, allowed: Allowed) -> dict:
    check_scope(allowed, scope["user_id"])
    await engine_call(svc, lambda e: e.delete(unit_id, **scope))
    return {"deleted": unit_id}


@router.put("/v1/batch", responses=_responses(400, 404, 413, 503))
async def batch_update(req: BatchUpdateRequest, svc: Svc, allowed: Allowed) -> dict:
    """mem0's ``batch_update``: messages' new texts, every one or none (one commit); the updated
    messages back, in order."""
    for it in req.memories:
        check_scope(allowed, it.user_id)
    items = [it.as_engine() for it in req.memories]
    return {"results": await engine_call(svc, lambda e: e.batch_update(items), "batch_update: ")}


@router.delete("/v1/batch", responses=_responses(400, 404, 413, 503))
async def batch_delete(req: BatchDeleteRequest, svc: Svc, allowed: Allowed) -> dict:
    """mem0's ``batch_delete``: units forgotten, every one or none (one commit); their ids back."""
    for it in req.memories:
        check_scope(allowed, it.user_id)
    items = [it.as_engine() for it in req.memories]
    return {"deleted": await engine_call(svc, lambda e: e.batch_delete(items), "batch_delete: ")}


@router.delete("/v1/memories", responses=_responses(503))
async def delete_all(scope: ScopeQ, svc: Svc, allowed: Allowed) -> dict:
    check_scope(allowed, scope["user_id"])
    return {"deleted_messages": await engine_call(svc, lambda e: e.delete_all(**scope))}


@router.post("/v1/reset", responses=_responses(503, invalid=False))
async def reset(svc: Svc, allowed: Allowed) -> dict:
    """Delete every memory of the store: a key of every scope."""
    every_scope(allowed, "/v1/reset", "a reset needs a key of every scope")
    return {"deleted_memories": await engine_call(svc, lambda e: e.reset())}


@router.get("/v1/scopes", responses=_responses(503))
async def scopes(svc: Svc, allowed: Allowed, scope: UnitScopeQ) -> dict:
    """Every memory's scope ``{"user_id", "agent_id", "run_id"}``, narrowed by the parts given: a
    key of every scope."""
    every_scope(allowed, "/v1/scopes", "the list of scopes needs a key of every scope")
    return {"scopes": await engine_call(svc, lambda e: e.scopes(**scope))}


@router.get("/v1/history", responses=_responses(503))
async def history(scope: ScopeQ, svc: Svc, allowed: Allowed) -> dict:
    check_scope(allowed, scope["user_id"])
    return {"history": await engine_call(svc, lambda e: e.history(**scope))}
