"""An MCP server over a ``MemoryEngine`` (the official SDK's ``MCPServer``, called ``FastMCP`` before
mcp 2; the ``mcp`` extra). Tools: ``add`` (with ``metadata``), ``search`` (the context string and the
units with their provenance; ``limit``, ``threshold``, ``filters``), ``get_all`` (``filters``), ``update``,
``delete``, ``history``.

Scope: every tool takes ``user_id`` (and optional ``agent_id``, ``run_id``). A server started with
a user (``xmemory mcp STORE --user ID``) serves that user only: ``user_id`` may be left out, and
any other user id is refused. Over HTTP every request needs ``Authorization: Bearer KEY`` (the keys
of ``xmemory serve``: ``XMEMORY_API_KEY``, ``--keys-file``); a key bound to user ids reaches those
users only. A refused or failed call is a tool error (``isError``) whose text names the argument.
"""

from __future__ import annotations

import hmac
from typing import Annotated, Any

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import BaseModel, ConfigDict, Field
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from ..engine import MemoryEngine
from ..retrieve import STRATEGIES

Keys = dict[str, frozenset[str] | None]  # API key -> the user ids it may access (None: all)

INSTRUCTIONS = (
    "Long-term memory (xMemory). Call `search` with a question before answering from memory; its "
    "`context` is ready to quote. Call `add` with what the user said worth remembering. Unit ids from "
    "`search` and `get_all` work with `delete`."
)


class Message(BaseModel):
    """One message to remember."""

    model_config = ConfigDict(extra="forbid")
    content: str = Field(min_length=1, description="the text")
    role: str = Field("user", min_length=1, description="who said it (user, assistant, or a name)")
    timestamp: str | float | None = Field(None, description="ISO date-time or epoch seconds (default: none)")
    id: str | None = Field(None, description="a message id (default: assigned)")


UserId = Annotated[
    str | None, Field(description="whose memory (may be left out on a server started with --user)")
]
AgentId = Annotated[str | None, Field(description="narrows the scope to one agent")]
RunId = Annotated[str | None, Field(description="narrows the scope to one run or session")]


def _bearer(headers: Any) -> str | None:
    value = headers.get("authorization") if headers is not None else None
    scheme, _, token = (value or "").partition(" ")
    return token.strip() if scheme.lower() == "bearer" and token.strip() else None


def _key_users(keys: Keys, token: str) -> tuple[bool, frozenset[str] | None]:
    """(whether ``token`` is a key, the user ids it may access: None for all); every key compared in
    constant time."""
    found, users = False, None
    for key, allowed in keys.items():
        if hmac.compare_digest(key.encode(), token.encode()):
            found, users = True, allowed
    return found, users


def _unit(u: dict[str, Any]) -> dict[str, Any]:
    return {k: u[k] for k in ("type", "id", "text", "score", "message_ids", "timestamp")}


def _engine_error(exc: Exception, prefix: str = "") -> ToolError:
    """An engine refusal as a tool error with the engine's one-line message (``prefix``: the engine's
    name for the call's place in its batch, left out)."""
    msg = exc.args[0] if isinstance(exc, KeyError) and exc.args else str(exc)
    return ToolError(str(msg).removeprefix(prefix))


def create_server(engine: MemoryEngine, *, user_id: str | None = None, keys: Keys | None = None) -> MCPServer:
    """The MCP server over ``engine``. ``user_id``: the one user it serves (None: each call names
    its user). ``keys``: the HTTP transport's API keys; a key bound to user ids limits the calls that
    carry it to those users."""
    server = MCPServer("xmemory", instructions=INSTRUCTIONS, log_level="WARNING")
    keys = keys or {}

    def scope(ctx: Context, user: str | None, agent: str | None, run: str | None) -> dict[str, str | None]:
        if user is None:
            if user_id is None:
                raise ToolError("user_id: required (this server was started without --user)")
            user = user_id
        elif user_id is not None and user != user_id:
            raise ToolError(f"user_id: this server serves user {user_id!r} only (--user); got {user!r:.80}")
        if keys:  # HTTP: RequireKey let only valid keys in; checked again here, with the key's users
            found, allowed = _key_users(keys, _bearer(ctx.headers) or "")
            if not found:
                raise ToolError("no valid API key (Authorization: Bearer KEY)")
            if allowed is not None and user not in allowed:
                raise ToolError(f"user_id: this API key may not access user {user!r:.80}")
        return {"user_id": user, "agent_id": agent, "run_id": run}

    @server.tool(description="Remember messages (a string is one message from the user). Returns their ids.")
    def add(
        messages: list[Message] | str,
        ctx: Context,
        user_id: UserId = None,
        agent_id: AgentId = None,
        run_id: RunId = None,
        metadata: Annotated[
            dict[str, Any] | None,
            Field(description="a JSON object kept with these messages (search and get_all can filter on it)"),
        ] = None,
        user_name: Annotated[
            str | None, Field(description="the user's name, for statements about them")
        ] = None,
    ) -> dict[str, Any]:
        where = scope(ctx, user_id, agent_id, run_id)
        msgs = [Message(content=messages)] if isinstance(messages, str) else messages
        try:
            ids = engine.add(
                [m.model_dump(exclude_none=True) for m in msgs],
                **where,
                metadata=metadata,
                user_name=user_name,
            )
        except (ValueError, KeyError, RuntimeError) as exc:
            raise _engine_error(exc, "add_batch: items[0]: ") from None
        return {"ids": ids}

    @server.tool(
        description="Search the memory with a question. Returns `context` (the retrieved memories, ready "
        "to quote) and `units` (each with its type, id, text, score and source message ids)."
    )
    def search(
        query: Annotated[str, Field(min_length=1)],
        ctx: Context,
        user_id: UserId = None,
        agent_id: AgentId = None,
        run_id: RunId = None,
        strategy: Annotated[str, Field(description=f"one of {', '.join(STRATEGIES)}")] = "xmemory",
        budget_tokens: Annotated[int | None, Field(ge=1, description="context size in tokens")] = None,
        limit: Annotated[
            int | None, Field(ge=1, description="at most this many units, the most relevant")
        ] = None,
        threshold: Annotated[
            float | None,
            Field(
                ge=-1.0,
                le=1.0,
                description="leave out units less relevant than this query-unit cosine (0: keep all)",
            ),
        ] = None,
        filters: Annotated[
            dict[str, Any] | None,
            Field(
                description='metadata equality, e.g. {"topic": "travel"}: '
                "only units whose source messages match"
            ),
        ] = None,
    ) -> dict[str, Any]:
        where = scope(ctx, user_id, agent_id, run_id)
        try:
            r = engine.search(
                query,
                **where,
                strategy=strategy,
                budget_tokens=budget_tokens,
                limit=limit,
                threshold=threshold,
                filters=filters,
            )[0].to_dict()
        except (ValueError, KeyError, RuntimeError) as exc:
            raise _engine_error(exc) from None
        return {
            "context": r["context"],
            "units": [_unit(u) for u in r["units"]],
            "message_ids": r["message_ids"],
            "context_tokens": r["context_tokens"],
            "notes": r["notes"],
            "top_relevance": r["top_relevance"],
        }

    @server.tool(description="Every unit of the memory: messages, episodes, semantic statements, themes.")
    def get_all(
        ctx: Context,
        user_id: UserId = None,
        agent_id: AgentId = None,
        run_id: RunId = None,
        filters: Annotated[
            dict[str, Any] | None, Field(description="metadata equality, as in search")
        ] = None,
    ) -> dict[str, Any]:
        where = scope(ctx, user_id, agent_id, run_id)
        try:
            return {"units": engine.get_all(**where, filters=filters)}
        except (ValueError, KeyError, RuntimeError) as exc:
            raise _engine_error(exc) from None

    @server.tool(
        description="Forget one unit (a message id, episode:N, semantic:N or theme:N from search or "
        "get_all); what was derived from it is derived again."
    )
    def delete(
        unit_id: Annotated[str, Field(min_length=1)],
        ctx: Context,
        user_id: UserId = None,
        agent_id: AgentId = None,
        run_id: RunId = None,
    ) -> dict[str, Any]:
        where = scope(ctx, user_id, agent_id, run_id)
        try:
            engine.delete(unit_id, **where)
        except (ValueError, KeyError, RuntimeError) as exc:
            raise _engine_error(exc) from None
        return {"deleted": unit_id}

    @server.tool(
        description="Give a message (its id from add, search or get_all) new text; what was derived from "
        "the old text is derived again and the old text is forgotten."
    )
    def update(
        unit_id: Annotated[str, Field(min_length=1)],
        text: Annotated[str, Field(min_length=1)],
        ctx: Context,
        user_id: UserId = None,
        agent_id: AgentId = None,
        run_id: RunId = None,
    ) -> dict[str, Any]:
        where = scope(ctx, user_id, agent_id, run_id)
        try:
            return {"updated": engine.update(unit_id, text, **where)}
        except (ValueError, KeyError, RuntimeError) as exc:
            raise _engine_error(exc) from None

    @server.tool(description="The memory's operations log, oldest first: {op, ids, time}.")
    def history(
        ctx: Context, user_id: UserId = None, agent_id: AgentId = None, run_id: RunId = None
    ) -> dict[str, Any]:
        where = scope(ctx, user_id, agent_id, run_id)
        try:
            return {"history": engine.history(**where)}
        except (ValueError, KeyError, RuntimeError) as exc:
            raise _engine_error(exc) from None

    return server


class RequireKey:
    """ASGI middleware: an HTTP request without a valid ``Authorization: Bearer KEY`` gets 401."""

    def __init__(self, app: ASGIApp, keys: Keys) -> None:
        if not keys:
            raise ValueError("keys: expected at least one API key")
        self.app = app
        self.keys = keys

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            token = _bearer({k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]})
            if token is None or not _key_users(self.keys, token)[0]:
                detail = "missing API key (Authorization: Bearer KEY)" if token is None else "invalid API key"
                await JSONResponse({"detail": detail}, 401, {"WWW-Authenticate": "Bearer"})(
                    scope, receive, send
                )
                return
        await self.app(scope, receive, send)
