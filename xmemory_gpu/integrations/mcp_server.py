"""An MCP server over a ``MemoryEngine`` (the official SDK's ``MCPServer``, called ``FastMCP`` before
mcp 2; the ``mcp`` extra). Tools: ``add`` (mem0's messages: a string, one message or a list; ``metadata``,
``infer``; the ids and mem0's events back), ``search`` (the context string and the units as mem0's
results with their provenance: ``score`` the relevance; ``limit`` or mem0's ``top_k``, ``threshold``,
``filters``), ``get_all`` (``filters``; mem0's ``page`` / ``page_size``), ``update`` (the updated
message, as the engine gives it), ``delete``, ``delete_all`` (a whole scope), ``history``, ``scopes``.

Scope: every tool takes ``user_id`` (and optional ``agent_id``, ``run_id``; mem0's rules: a part left
out matches any, and ``agent_id`` or ``run_id`` alone is a scope where no user is bound). A server started with
a user (``xmemory mcp STORE --user ID``) serves that user only: ``user_id`` may be left out, and
any other user id is refused. Over HTTP every request needs ``Authorization: Bearer KEY`` (the keys
of ``xmemory serve``: ``XMEMORY_API_KEY``, ``--keys-file``; checked as it checks them,
``service.auth``); a key bound to user ids reaches those users only; a body must give its size and
stay within the service's limit (``service.framing``: 411, 413). A refused or failed call is a tool
error (``isError``) whose text names the argument.

Arguments follow the front doors' shared rules (``engine.rules``, as the HTTP service's do): typed
strictly (``true`` is no timestamp, ``"600"`` no number; no JSON parsed out of a string), within the
same limits, and an argument a tool does not name is refused.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.tools import Tool
from mcp.server.mcpserver.utilities.func_metadata import FuncMetadata
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PlainValidator,
    StrictBool,
    TypeAdapter,
    ValidationError,
)
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from ..engine import MemoryEngine
from ..engine.reads import MAX_PAGE, MAX_PAGE_SIZE, PAGE_SIZE
from ..engine.rules import (
    MAX_MESSAGES,
    BudgetTokens,
    Filters,
    Id,
    Integer,
    Limit,
    Metadata,
    Query,
    Strategy,
    Text,
    Threshold,
    Timestamp,
)
from ..service import auth, framing
from ..service.auth import Keys

INSTRUCTIONS = (
    "Long-term memory (xMemory). Call `search` with a question before answering from memory; its "
    "`context` is ready to quote. Call `add` with what the user said worth remembering. Unit ids from "
    "`search` and `get_all` work with `delete`."
)


class Message(BaseModel):
    """One message to remember."""

    model_config = ConfigDict(extra="forbid")
    content: Text = Field(description="the text")
    role: Id = Field("user", description="who said it (user, assistant, or a name)")
    timestamp: Timestamp | None = Field(None, description="ISO date-time or epoch seconds (default: none)")
    id: Id | None = Field(None, description="a message id (default: assigned)")


UserId = Annotated[
    Id | None, Field(description="whose memory (may be left out on a server started with --user)")
]
AgentId = Annotated[Id | None, Field(description="narrows the scope to one agent")]
RunId = Annotated[Id | None, Field(description="narrows the scope to one run or session")]


_MESSAGE_LIST = TypeAdapter(Annotated[list[Message], Field(min_length=1, max_length=MAX_MESSAGES)])
_TEXT = TypeAdapter(Text)


def _first_error(exc: ValidationError) -> str:
    """A validation error's first error in one line: ``[0].timestamp: why`` (``why`` at the top)."""
    e = exc.errors(include_url=False)[0]
    at = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in e["loc"]).lstrip(".")
    why = e["msg"].removeprefix("Value error, ")
    return f"{at}{why}" if why.startswith("[") else f"{at}: {why}" if at else why


def _messages(v: Any) -> list[Message]:
    """A list of messages, one message, or a string: one message from the user."""
    try:
        if isinstance(v, str):
            return [Message(content=_TEXT.validate_python(v))]
        return _MESSAGE_LIST.validate_python([v] if isinstance(v, dict) else v)
    except ValidationError as exc:
        raise ValueError(_first_error(exc)) from None


Messages = Annotated[
    list[Message],
    PlainValidator(
        _messages,
        json_schema_input_type=Annotated[list[Message], Field(min_length=1, max_length=MAX_MESSAGES)]
        | Message
        | Text,
    ),
]


class _Refused(ValidationError):
    """Refused arguments told in one line: the first one's name and why (and how many more)."""

    def __str__(self) -> str:
        n = self.error_count()
        return _first_error(self) + (f" (and {n - 1} more)" if n > 1 else "")


class _AsGiven(FuncMetadata):
    """A tool's arguments validated as they came: the SDK's parsing of JSON out of a string argument
    (``"[1]"`` read as a list) is left out; a refusal is one line."""

    def pre_parse_json(self, data: dict[str, Any]) -> dict[str, Any]:
        return dict(data)

    def validate_arguments(self, arguments_to_validate: dict[str, Any]) -> dict[str, Any]:
        try:
            return super().validate_arguments(arguments_to_validate)
        except ValidationError as exc:
            raise _Refused.from_exception_data(exc.title, exc.errors(include_url=False)) from None


def _strict_tool(fn: Callable[..., Any], description: str) -> Tool:
    """``fn`` as a tool whose arguments are taken as given and whose unknown arguments are refused
    (the published input schema says ``additionalProperties: false``)."""
    tool = Tool.from_function(fn, description=description)
    meta = tool.fn_metadata
    base = meta.arg_model
    model = type(
        base.__name__,
        (base,),
        {"__module__": __name__, "model_config": ConfigDict(**base.model_config, extra="forbid")},
    )
    strict = _AsGiven(
        arg_model=model,
        output_schema=meta.output_schema,
        output_model=meta.output_model,
        wrap_output=meta.wrap_output,
    )
    return tool.model_copy(
        update={"fn_metadata": strict, "parameters": model.model_json_schema(by_alias=True)}
    )


def _caller(keys: Keys, ctx: Context) -> frozenset[str] | None:
    """The user ids the key of the call's HTTP request may access (None: all); a tool error
    without a valid key."""
    headers = ctx.headers
    why, users = auth.authenticate(keys, headers.get("authorization") if headers is not None else None)
    if why is not None:
        raise ToolError(why)
    return users


HIT_FIELDS = (
    "type",
    "id",
    "memory",
    "text",
    "score",
    "rank_score",
    "message_ids",
    "timestamp",
    "created_at",
    "updated_at",
    "user_id",
    "agent_id",
    "run_id",
    "metadata",
)


def _unit(u: dict[str, Any]) -> dict[str, Any]:
    """A search hit (``MemoryEngine.hits``) as the tool gives it: mem0's fields and the provenance."""
    return {k: u[k] for k in HIT_FIELDS if k in u}


def _engine_error(exc: Exception, prefix: str = "") -> ToolError:
    """An engine refusal as a tool error with the engine's one-line message (``prefix``: the engine's
    name for the call's place in its batch, left out)."""
    msg = exc.args[0] if isinstance(exc, KeyError) and exc.args else str(exc)
    return ToolError(str(msg).removeprefix(prefix))


def create_server(engine: MemoryEngine, *, user_id: str | None = None, keys: Keys | None = None) -> MCPServer:
    """The MCP server over ``engine``. ``user_id``: the one user it serves (None: each call names
    its user). ``keys``: the HTTP transport's API keys; a key bound to user ids limits the calls that
    carry it to those users."""
    keys = keys or {}
    user_id_served = user_id

    def scope(ctx: Context, user: str | None, agent: str | None, run: str | None) -> dict[str, str | None]:
        if user is None:
            if user_id is None and agent is None and run is None:
                raise ToolError(
                    "user_id: required, or agent_id or run_id (this server was started without --user)"
                )
            user = user_id
        elif user_id is not None and user != user_id:
            raise ToolError(f"user_id: this server serves user {user_id!r} only (--user); got {user!r:.80}")
        if keys:  # HTTP: RequireKey let only valid keys in; checked again here, with the key's users
            if (why := auth.user_refusal(_caller(keys, ctx), user)) is not None:
                raise ToolError(why)
        return {"user_id": user, "agent_id": agent, "run_id": run}

    def add(
        messages: Messages,
        ctx: Context,
        user_id: UserId = None,
        agent_id: AgentId = None,
        run_id: RunId = None,
        metadata: Annotated[
            Metadata | None,
            Field(description="a JSON object kept with these messages (search and get_all can filter on it)"),
        ] = None,
        user_name: Annotated[
            Id | None, Field(description="the user's name, for statements about them")
        ] = None,
        infer: Annotated[
            StrictBool, Field(description="false: keep the messages as they are, derive no statement")
        ] = True,
    ) -> dict[str, Any]:
        where = scope(ctx, user_id, agent_id, run_id)
        try:
            return engine.add(
                [m.model_dump(exclude_none=True) for m in messages],
                **where,
                metadata=metadata,
                user_name=user_name,
                infer=infer,
                events=True,
            )
        except (ValueError, KeyError, RuntimeError) as exc:
            raise _engine_error(exc, "add: ") from None

    def search(
        query: Query,
        ctx: Context,
        user_id: UserId = None,
        agent_id: AgentId = None,
        run_id: RunId = None,
        strategy: Annotated[Strategy, Field(description="the retrieval strategy")] = "xmemory",  # type: ignore
        budget_tokens: Annotated[BudgetTokens | None, Field(description="context size in tokens")] = None,
        limit: Annotated[
            Limit | None, Field(description="at most this many units, the most relevant")
        ] = None,
        top_k: Annotated[Limit | None, Field(description="mem0's name of limit (both given: equal)")] = None,
        threshold: Annotated[
            Threshold | None,
            Field(description="leave out units less relevant than this query-unit cosine (0: keep all)"),
        ] = None,
        filters: Annotated[
            Filters | None,
            Field(
                description='mem0\'s filters, e.g. {"topic": "travel"} or {"year": {"gte": 2024}}: '
                "only units whose source messages match"
            ),
        ] = None,
    ) -> dict[str, Any]:
        where = scope(ctx, user_id, agent_id, run_id)
        try:
            found = engine.search(
                query,
                **where,
                strategy=strategy,
                budget_tokens=budget_tokens,
                limit=limit,
                threshold=threshold,
                filters=filters,
                top_k=top_k,
            )[0]
            hits = engine.hits(found)
        except (ValueError, KeyError, RuntimeError) as exc:
            raise _engine_error(exc, "search: ") from None
        r = found.to_dict()
        return {
            "context": r["context"],
            "units": [_unit(u) for u in hits],
            "message_ids": r["message_ids"],
            "context_tokens": r["context_tokens"],
            "notes": r["notes"],
            "top_relevance": r["top_relevance"],
        }

    def get_all(
        ctx: Context,
        user_id: UserId = None,
        agent_id: AgentId = None,
        run_id: RunId = None,
        filters: Annotated[Filters | None, Field(description="mem0's filters, as in search")] = None,
        page: Annotated[
            Integer(1, MAX_PAGE) | None, Field(description="this page (1-based) of the units")
        ] = None,
        page_size: Annotated[
            Integer(1, MAX_PAGE_SIZE) | None,
            Field(description=f"units per page (default {PAGE_SIZE})"),
        ] = None,
    ) -> dict[str, Any]:
        where = scope(ctx, user_id, agent_id, run_id)
        try:
            return {"units": engine.get_all(**where, filters=filters, page=page, page_size=page_size)}
        except (ValueError, KeyError, RuntimeError) as exc:
            raise _engine_error(exc, "get_all: ") from None

    def delete_all(
        ctx: Context, user_id: UserId = None, agent_id: AgentId = None, run_id: RunId = None
    ) -> dict[str, Any]:
        where = scope(ctx, user_id, agent_id, run_id)
        try:
            return {"deleted_messages": engine.delete_all(**where)}
        except (ValueError, KeyError, RuntimeError) as exc:
            raise _engine_error(exc) from None

    def delete(
        unit_id: Id,
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

    def update(
        unit_id: Id,
        text: Text,
        ctx: Context,
        user_id: UserId = None,
        agent_id: AgentId = None,
        run_id: RunId = None,
    ) -> dict[str, Any]:
        where = scope(ctx, user_id, agent_id, run_id)
        try:
            return engine.update(unit_id, text, **where)
        except (ValueError, KeyError, RuntimeError) as exc:
            raise _engine_error(exc) from None

    def scopes(ctx: Context, user_id: UserId = None) -> dict[str, Any]:
        """Every memory's scope (of ``user_id`` when given); the server's user or the key's users only."""
        users: frozenset[str] | None = None
        if user_id is not None or user_id_served is not None:  # checked as every tool checks it
            users = frozenset([scope(ctx, user_id, None, None)["user_id"]])
        elif keys:
            users = _caller(keys, ctx)
        try:
            listed = engine.scopes()
        except (ValueError, KeyError, RuntimeError) as exc:
            raise _engine_error(exc) from None
        return {"scopes": [s for s in listed if users is None or s["user_id"] in users]}

    def history(
        ctx: Context, user_id: UserId = None, agent_id: AgentId = None, run_id: RunId = None
    ) -> dict[str, Any]:
        where = scope(ctx, user_id, agent_id, run_id)
        try:
            return {"history": engine.history(**where)}
        except (ValueError, KeyError, RuntimeError) as exc:
            raise _engine_error(exc) from None

    tools = [
        _strict_tool(
            add,
            "Remember messages (a string is one message from the user). Returns their `ids` and "
            "`results`: what was added, updated or superseded, as mem0's events (ADD, UPDATE, DELETE, NONE).",
        ),
        _strict_tool(
            search,
            "Search the memory with a question. Returns `context` (the retrieved memories, "
            "ready to quote) and `units` (each with its type, id, memory, score (relevance, 0-1), "
            "created_at, scope and source message ids).",
        ),
        _strict_tool(get_all, "Every unit of the memory: messages, episodes, semantic statements, themes."),
        _strict_tool(
            delete,
            "Forget one unit (a message id, episode:N, semantic:N or theme:N from search or "
            "get_all); what was derived from it is derived again.",
        ),
        _strict_tool(
            delete_all,
            "Forget every memory of the scope (a part left out matches any: user_id alone is all of "
            "the user's memories). Returns how many messages they held.",
        ),
        _strict_tool(
            update,
            "Give a message (its id from add, search or get_all) new text; what was derived "
            "from the old text is derived again and the old text is forgotten.",
        ),
        _strict_tool(history, "The memory's operations log, oldest first: {op, ids, time}."),
        _strict_tool(scopes, "The scopes that hold memories: {user_id, agent_id, run_id} each."),
    ]
    return MCPServer("xmemory", instructions=INSTRUCTIONS, log_level="WARNING", tools=tools)


class RequireKey:
    """ASGI middleware of the HTTP transport: a request whose body is of no declared size gets 411,
    one over ``max_body_bytes`` 413 (``service.framing``), one without a valid ``Authorization:
    Bearer KEY`` 401 (``service.auth``)."""

    def __init__(self, app: ASGIApp, keys: Keys, max_body_bytes: int = framing.MAX_BODY_BYTES) -> None:
        if not keys:
            raise ValueError("keys: expected at least one API key")
        self.app = app
        self.keys = keys
        self.max_body_bytes = max_body_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
            refused = framing.refusal(
                scope["method"], scope["path"], headers.get("content-length"), self.max_body_bytes
            )
            if refused is not None:
                await JSONResponse({"detail": refused[1]}, refused[0])(scope, receive, send)
                return
            why, _ = auth.authenticate(self.keys, headers.get("authorization"))
            if why is not None:
                await JSONResponse({"detail": why}, 401, auth.CHALLENGE)(scope, receive, send)
                return
        await self.app(scope, receive, send)
