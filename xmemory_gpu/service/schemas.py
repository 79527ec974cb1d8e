"""Request and error bodies of the HTTP API (pydantic): the engine's arguments with the service's
limits, typed by the front doors' shared rules (``engine.rules``: ``true`` is no timestamp, ``"600"``
no number, ``3.0`` the integer 3), so that what the OpenAPI schema allows is what the service accepts."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from ..engine.rules import (
    CHUNK_RAG_WIDTHS,
    MAX_ID,
    MAX_ISO,
    MAX_LIMIT,
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

__all__ = [
    "CHUNK_RAG_WIDTHS",
    "MAX_ID",
    "MAX_ISO",
    "MAX_LIMIT",
    "MAX_QUERY",
    "MAX_SESSION",
    "MAX_TEXT",
    "ErrorBody",
    "FieldError",
    "Filters",
    "Message",
    "Metadata",
    "Scope",
    "Timestamp",
    "UpdateRequest",
    "ValidationErrorBody",
    "limited_add",
    "limited_batch",
    "limited_search",
]


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


def limited_add(max_messages: int) -> type[BaseModel]:
    class AddRequest(Scope):
        messages: list[Message] = Field(min_length=1, max_length=max_messages)
        metadata: Metadata | None = Field(
            None, description="a JSON object stored with the messages (get, get_all)"
        )
        user_name: Id | None = Field(None, description="the user's name in a role chat")

        def as_engine(self) -> dict[str, Any]:
            item = {
                "user_id": self.user_id,
                "agent_id": self.agent_id,
                "run_id": self.run_id,
                "messages": [m.as_engine() for m in self.messages],
            }
            return item | {k: v for k in ("metadata", "user_name") if (v := getattr(self, k)) is not None}

    return AddRequest


def limited_batch(add_model: type[BaseModel], max_items: int) -> type[BaseModel]:
    class AddBatchRequest(BaseModel):
        model_config = ConfigDict(extra="forbid")
        items: list[add_model] = Field(min_length=1, max_length=max_items)  # type: ignore[valid-type]

    return AddBatchRequest


def limited_search(max_queries: int) -> type[BaseModel]:
    class SearchRequest(Scope):
        """Exactly one of ``query`` and ``queries``."""

        model_config = ConfigDict(
            json_schema_extra={"oneOf": _given("query") + _given("queries", kind="array")}
        )
        query: Query | None = None
        queries: list[Query] | None = Field(None, min_length=1, max_length=max_queries)
        strategy: Strategy = "xmemory"  # type: ignore[valid-type]
        budget_tokens: BudgetTokens | None = None
        limit: Limit | None = Field(None, description="at most this many units")
        threshold: Threshold | None = Field(
            None, description="units less relevant than it (a query-unit cosine) are left out"
        )
        filters: Filters | None = Field(
            None, description="metadata equality: a unit counts when its messages match"
        )

        @model_validator(mode="after")
        def _one_query_field(self) -> SearchRequest:
            if (self.query is None) == (self.queries is None):
                raise ValueError("give exactly one of query and queries")
            return self

    return SearchRequest


class UpdateRequest(Scope):
    """The new text of a message (what was derived from the old text is derived again)."""

    text: Text


class FieldError(BaseModel):
    field: str = Field(description="the field, dotted (messages.0.timestamp); 'body' for the body as a whole")
    error: str


class ValidationErrorBody(BaseModel):
    """A refused request (422): the first error as ``detail``, every error in ``errors``."""

    detail: str = Field(description="'FIELD: ERROR' of the first error")
    errors: list[FieldError]


class ErrorBody(BaseModel):
    detail: str
