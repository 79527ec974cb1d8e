"""How the HTTP API tells a refusal: 422 ``{"detail": "FIELD: ERROR", "errors": [{"field", "error"}]}``
for the schema's refusals (``invalid``) and the engine's (``field_error``) alike, a body that cannot
parse named by why (``BodyRoute``), 405 with every method the path has in ``Allow`` (``refused``)."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

from fastapi import HTTPException, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from fastapi.routing import APIRoute
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Match

from ..engine.metadata import MAX_DEPTH

_FIELD = re.compile(r"([A-Za-z_]\w*(?:\[\d+\])*): ")
_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|[{}\[\],:]')  # a JSON string, or a structural character


def field_error(detail: str) -> dict[str, str]:
    """An engine refusal ``'messages[0]: timestamp: expected ...'`` as ``{"field": "messages.0.timestamp",
    "error": "expected ..."}`` (the field ``body`` when the message names none)."""
    parts, rest = [], detail
    while m := _FIELD.match(rest):
        parts.append(m.group(1))
        rest = rest[m.end() :]
    return {"field": re.sub(r"\[(\d+)\]", r".\1", ".".join(parts)) or "body", "error": rest}


def pydantic_error(e: dict) -> dict[str, str]:
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


def deep_field(text: str, depth: int) -> list[str | int]:
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


class BodyRoute(APIRoute):
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
                field = deep_field((await request.body()).decode("utf-8"), 2 * MAX_DEPTH)
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


async def invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
    """The schema's refusal: 422, every field and why."""
    errs = [pydantic_error(e) for e in exc.errors()] or [{"field": "body", "error": "invalid"}]
    return JSONResponse(
        {"detail": f"{errs[0]['field']}: {errs[0]['error']}", "errors": errs}, status_code=422
    )


def methods_of(request: Request) -> str:
    """Every method of the routes whose path the request's is (the router names the first route's
    only), ``HEAD`` with ``GET``."""
    found = {
        m
        for r in request.app.router.routes
        if isinstance(r, APIRoute) and r.matches(request.scope)[0] != Match.NONE
        for m in r.methods
    }
    return ", ".join(sorted(found | ({"HEAD"} if "GET" in found else set())))


async def refused(request: Request, exc: StarletteHTTPException) -> JSONResponse:
    """An HTTP error: the engine's 422 with the schema's body, a 405 with ``Allow``."""
    body: dict[str, Any] = {"detail": exc.detail}
    headers = exc.headers
    if exc.status_code == 422:  # the engine's refusals get the same body as the schema's
        body["errors"] = [field_error(str(exc.detail))]
    elif exc.status_code == 405:
        headers = {**(headers or {}), "Allow": methods_of(request)}
    return JSONResponse(body, status_code=exc.status_code, headers=headers)
