"""Request and error bodies of the HTTP API (pydantic): the engine's arguments with the service's
limits, typed strictly (``true`` is no timestamp, ``"600"`` no number), so that what the OpenAPI
schema allows is what the service accepts."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PlainValidator,
    StrictInt,
    StrictStr,
    WithJsonSchema,
    model_validator,
)

from ..memory.store import MAX_TIME, MIN_TIME
from ..retrieve.strategies import strategy_names

CHUNK_RAG_WIDTHS = ("chunk-rag:16", "chunk-rag:32", "chunk-rag:128")  # beside chunk-rag (64 words)

MAX_ID = 512
MAX_QUERY = 4000  # characters of one query
MAX_TEXT = 100_000  # characters of one message
MAX_ISO = 64  # characters of an ISO date-time
# the engine takes sessions up to 2**63-1; the OpenAPI document writes bounds as floats, and 2**63-1024 is the
# largest integer below 2**63 that a float holds exactly, so the schema's bound is the service's
MAX_SESSION = 2**63 - 1024
Id = Annotated[StrictStr, Field(min_length=1, max_length=MAX_ID)]
Query = Annotated[StrictStr, Field(min_length=1, max_length=MAX_QUERY)]


def _timestamp(v: Any) -> float | str:
    """Epoch seconds within years 1-9999, or an ISO date-time string (which the engine parses)."""
    if isinstance(v, str) and 0 < len(v) <= MAX_ISO:
        return v
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        if MIN_TIME <= v < MAX_TIME:  # exact for any int, False for nan
            return float(v)
        shown = repr(v) if len(repr(v)) <= 24 else f"an integer of {len(str(v))} digits"
        raise ValueError(f"epoch seconds outside years 1-9999, got {shown}")
    raise ValueError(f"expected epoch seconds (a number) or an ISO date-time (a string of 1-{MAX_ISO} characters), "
                     f"got {type(v).__name__}")


Timestamp = Annotated[Any, PlainValidator(_timestamp), WithJsonSchema({"anyOf": [
    {"type": "number", "minimum": MIN_TIME, "exclusiveMaximum": MAX_TIME, "description": "epoch seconds"},
    {"type": "string", "minLength": 1, "maxLength": MAX_ISO, "description": "ISO date-time (UTC when it names no zone)"}]})]


def _given(*names: str, kind: str = "string") -> list[dict[str, Any]]:
    """JSON-schema branches: ``name`` present and of ``kind`` (null counts as absent), one per name."""
    return [{"required": [n], "properties": {n: {"type": kind}}} for n in names]


class Message(BaseModel):
    """One message: ``speaker`` or ``role`` and ``content`` or ``text`` (the first given of each pair is used)."""

    model_config = ConfigDict(extra="forbid", json_schema_extra={
        "allOf": [{"anyOf": _given("speaker", "role")}, {"anyOf": _given("content", "text")}]})
    speaker: Id | None = None
    role: Id | None = None
    content: Annotated[StrictStr, Field(max_length=MAX_TEXT)] | None = None
    text: Annotated[StrictStr, Field(max_length=MAX_TEXT)] | None = None
    timestamp: Timestamp | None = None
    id: Id | None = None
    session: Annotated[StrictInt, Field(ge=0, le=MAX_SESSION)] | None = None

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

    return AddRequest


def limited_batch(add_model: type[BaseModel], max_items: int) -> type[BaseModel]:
    class AddBatchRequest(BaseModel):
        model_config = ConfigDict(extra="forbid")
        items: list[add_model] = Field(min_length=1, max_length=max_items)  # type: ignore[valid-type]

    return AddBatchRequest


def limited_search(max_queries: int) -> type[BaseModel]:
    # chunk-rag's other widths are named, not any N: each width embeds a memory's passages once more
    Strategy = Literal[(*strategy_names(), *CHUNK_RAG_WIDTHS)]  # type: ignore[valid-type]

    class SearchRequest(Scope):
        """Exactly one of ``query`` and ``queries``."""

        model_config = ConfigDict(json_schema_extra={"oneOf": _given("query") + _given("queries", kind="array")})
        query: Query | None = None
        queries: list[Query] | None = Field(None, min_length=1, max_length=max_queries)
        strategy: Strategy = "xmemory"  # type: ignore[valid-type]
        budget_tokens: Annotated[StrictInt, Field(ge=0, le=1_000_000)] | None = None

        @model_validator(mode="after")
        def _one_query_field(self) -> SearchRequest:
            if (self.query is None) == (self.queries is None):
                raise ValueError("give exactly one of query and queries")
            return self

    return SearchRequest


class FieldError(BaseModel):
    field: str = Field(description="the field, dotted (messages.0.timestamp); 'body' for the body as a whole")
    error: str


class ValidationErrorBody(BaseModel):
    """A refused request (422): the first error as ``detail``, every error in ``errors``."""

    detail: str = Field(description="'FIELD: ERROR' of the first error")
    errors: list[FieldError]


class ErrorBody(BaseModel):
    detail: str
