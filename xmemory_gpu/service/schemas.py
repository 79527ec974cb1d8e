"""Request and error bodies of the HTTP API (pydantic): the engine's arguments with the service's
limits, typed by the front doors' shared rules (``engine.rules``: ``true`` is no timestamp, ``"600"``
no number, ``3.0`` the integer 3), so that what the OpenAPI schema allows is what the service accepts.
The caps are the engine's: ``MAX_MESSAGES`` per add (the MCP server's too), ``MAX_ITEMS`` per batch."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StrictBool,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic_core import InitErrorDetails, PydanticCustomError

from ..engine.inputs import Limits
from ..engine.reads import MAX_PAGE, MAX_PAGE_SIZE, PAGE_SIZE
from ..engine.rules import (
    CHUNK_RAG_WIDTHS,
    MAX_ID,
    MAX_ISO,
    MAX_LIMIT,
    MAX_MESSAGES,
    MAX_QUERY,
    MAX_SESSION,
    MAX_TEXT,
    BudgetTokens,
    Filters,
    Id,
    Limit,
    Metadata,
    Query,
    Session,
    Strategy,
    Text,
    Threshold,
    Timestamp,
)
from ..engine.writes import MAX_BATCH_UNITS

__all__ = [
    "CHUNK_RAG_WIDTHS",
    "MAX_BATCH_UNITS",
    "MAX_PAGE",
    "MAX_PAGE_SIZE",
    "PAGE_SIZE",
    "MAX_ID",
    "MAX_ISO",
    "MAX_ITEMS",
    "MAX_LIMIT",
    "MAX_MESSAGES",
    "MAX_QUERIES",
    "MAX_QUERY",
    "MAX_SESSION",
    "MAX_TEXT",
    "AddBatchRequest",
    "AddRequest",
    "AnyScope",
    "BatchDeleteRequest",
    "BatchUpdateRequest",
    "ErrorBody",
    "FieldError",
    "Filters",
    "Message",
    "Metadata",
    "Scope",
    "SearchRequest",
    "Timestamp",
    "UpdateRequest",
    "ValidationErrorBody",
]

MAX_ITEMS = Limits().max_items  # items of one batch add
MAX_QUERIES = 256  # queries of one search request


SCOPE_PARTS = ("user_id", "agent_id", "run_id")


def _given(*names: str, kind: str = "string") -> list[dict[str, Any]]:
    """JSON-schema branches: ``name`` present and of ``kind`` (null counts as absent), one per name."""
    return [{"required": [n], "properties": {n: {"type": kind}}} for n in names]


class Message(BaseModel):
    """One message: ``speaker`` or ``role`` and ``content`` or ``text`` (the first given of each pair is used)."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "allOf": [{"anyOf": _given("speaker", "role")}, {"anyOf": _given("content", "text")}]
        },
    )
    speaker: Id | None = None
    role: Id | None = None
    content: Text | None = None
    text: Text | None = None
    name: Id | None = Field(None, description="the speaker's name in a role chat (with role)")
    timestamp: Timestamp | None = None
    id: Id | None = None
    session: Session | None = None

    @model_validator(mode="after")
    def _complete(self) -> Message:
        if self.speaker is None and self.role is None:
            raise ValueError("a message needs speaker or role")
        if self.content is None and self.text is None:
            raise ValueError("a message needs content or text")
        return self

    def as_engine(self) -> dict[str, Any]:
        return {k: v for k, v in self.model_dump().items() if v is not None}


class Scope(BaseModel):
    model_config = ConfigDict(extra="forbid")
    user_id: Id
    agent_id: Id | None = None
    run_id: Id | None = None


def _as_list(v: Any) -> Any:
    """mem0's ``messages``: a string is one message from the user, an object one message."""
    if isinstance(v, str):
        return [{"role": "user", "content": v}]
    return [v] if isinstance(v, dict) else v


class AnyScope(BaseModel):
    """A scope of which at least one part is given (mem0's: an agent's or a run's memory may have no user)."""

    model_config = ConfigDict(extra="forbid", json_schema_extra={"anyOf": _given(*SCOPE_PARTS)})
    user_id: Id | None = None
    agent_id: Id | None = None
    run_id: Id | None = None

    @model_validator(mode="wrap")
    @classmethod
    def _one_part(cls, data: Any, handler: Any) -> AnyScope:
        """At least one scope part; the refusal names ``user_id``."""
        m = handler(data)
        if m.user_id is None and m.agent_id is None and m.run_id is None:
            why = PydanticCustomError("value_error", "give at least one of user_id, agent_id and run_id")
            detail = InitErrorDetails(type=why, loc=("user_id",), input=data)
            raise ValidationError.from_exception_data(cls.__name__, [detail])
        return m


class AddRequest(AnyScope):
    """mem0's ``messages``: a list of messages, one message, or a string (one message from the user)."""

    messages: Annotated[
        list[Message],
        Field(min_length=1, max_length=MAX_MESSAGES),
        BeforeValidator(_as_list, json_schema_input_type=list[Message] | Message | Text),
    ] = Field(description="messages; one message; or a string: one message from the user")
    metadata: Metadata | None = Field(
        None, description="a JSON object stored with the messages (get, get_all)"
    )
    user_name: Id | None = Field(None, description="the user's name in a role chat")
    infer: StrictBool = Field(
        True, description="false: keep the messages as they are, derive no statement from them"
    )

    def as_engine(self) -> dict[str, Any]:
        given = [m.as_engine() for m in self.messages]
        item = {
            "user_id": self.user_id,
            "agent_id": self.agent_id,
            "run_id": self.run_id,
            "messages": given,
        }
        item |= {k: v for k in ("metadata", "user_name") if (v := getattr(self, k)) is not None}
        return item | ({"infer": False} if not self.infer else {})


class AddBatchRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    items: list[AddRequest] = Field(min_length=1, max_length=MAX_ITEMS)


class SearchRequest(AnyScope):
    """Exactly one of ``query`` and ``queries``; a scope part left out matches any (``user_id``
    alone: the user's memories across its agents and runs)."""

    model_config = ConfigDict(
        json_schema_extra={
            "oneOf": _given("query") + _given("queries", kind="array"),
            "anyOf": _given(*SCOPE_PARTS),
        }
    )
    query: Query | None = None
    queries: list[Query] | None = Field(None, min_length=1, max_length=MAX_QUERIES)
    strategy: Strategy = "xmemory"  # type: ignore[valid-type]
    budget_tokens: BudgetTokens | None = None
    limit: Limit | None = Field(None, description="at most this many units")
    top_k: Limit | None = Field(None, description="mem0's name of limit (both given: equal)")
    threshold: Threshold | None = Field(
        None, description="units less relevant than it (a query-unit cosine) are left out"
    )
    filters: Filters | None = Field(None, description="mem0's filters: a unit counts when its messages pass")

    @field_validator("top_k")
    @classmethod
    def _agrees(cls, v: int | None, info: ValidationInfo) -> int | None:
        limit = info.data.get("limit")
        if v is not None and limit is not None and v != limit:
            raise ValueError(f"{v} differs from limit {limit} (top_k is mem0's name of limit: give one)")
        return v

    def limit_asked(self) -> int | None:
        """``limit``, else ``top_k``."""
        return self.limit if self.limit is not None else self.top_k

    @model_validator(mode="after")
    def _one_query_field(self) -> SearchRequest:
        if (self.query is None) == (self.queries is None):
            raise ValueError("give exactly one of query and queries")
        return self

    def as_engine(self) -> dict[str, Any]:
        """The engine's ``search_batch`` item of this request."""
        item = {
            "queries": [self.query] if self.query is not None else self.queries,
            "user_id": self.user_id,
            "agent_id": self.agent_id,
            "run_id": self.run_id,
            "strategy": self.strategy,
            "budget_tokens": self.budget_tokens,
            "limit": self.limit_asked(),
        }
        return item | {k: v for k in ("threshold", "filters") if (v := getattr(self, k)) is not None}


class UpdateRequest(BaseModel):
    """The new text of a message (what was derived from the old text is derived again); the scope may be
    left out for a message id unique in the store."""

    model_config = ConfigDict(extra="forbid")
    user_id: Id | None = None
    agent_id: Id | None = None
    run_id: Id | None = None
    text: Text


class BatchDeleteItem(BaseModel):
    """A unit to delete (``DELETE /v1/memories/{id}``'s id and scope)."""

    model_config = ConfigDict(extra="forbid")
    memory_id: Id = Field(description="a unit or message id")
    user_id: Id | None = None
    agent_id: Id | None = None
    run_id: Id | None = None

    def as_engine(self) -> dict[str, Any]:
        return {k: v for k, v in self.model_dump().items() if v is not None}


class BatchUpdateItem(BatchDeleteItem):
    """A message's new text (``PUT /v1/memories/{id}``'s id, scope and text)."""

    memory_id: Id = Field(description="a message id")
    text: Text


class BatchUpdateRequest(BaseModel):
    """mem0's ``batch_update``: every update, or none (one commit)."""

    model_config = ConfigDict(extra="forbid")
    memories: list[BatchUpdateItem] = Field(min_length=1, max_length=MAX_BATCH_UNITS)


class BatchDeleteRequest(BaseModel):
    """mem0's ``batch_delete``: every delete, or none (one commit)."""

    model_config = ConfigDict(extra="forbid")
    memories: list[BatchDeleteItem] = Field(min_length=1, max_length=MAX_BATCH_UNITS)


class FieldError(BaseModel):
    field: str = Field(description="the field, dotted (messages.0.timestamp); 'body' for the body as a whole")
    error: str


class ValidationErrorBody(BaseModel):
    """A refused request (422): the first error as ``detail``, every error in ``errors``."""

    detail: str = Field(description="'FIELD: ERROR' of the first error")
    errors: list[FieldError]


class ErrorBody(BaseModel):
    detail: str
