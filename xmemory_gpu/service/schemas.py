"""Request and error bodies of the HTTP API (pydantic): the engine's arguments with the service's
limits, typed strictly (``true`` is no timestamp, ``"600"`` no number), so that what the OpenAPI
schema allows is what the service accepts."""

from __future__ import annotations

import math
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PlainValidator,
    StrictFloat,
    StrictInt,
    StrictStr,
    WithJsonSchema,
    model_validator,
)

from ..memory.codec import MAX_TIME, MIN_TIME
from ..retrieve.strategies import strategy_names

MAX_ID = 512
MAX_QUERY = 4000  # characters of one query
MAX_TEXT = 100_000  # characters of one message
MAX_ISO = 64  # characters of an ISO date-time
# the engine takes sessions up to 2**63-1; the OpenAPI document writes bounds as floats, and 2**63-1024 is the
# largest integer below 2**63 that a float holds exactly, so the schema's bound is the service's
MAX_SESSION = 2**63 - 1024
Id = Annotated[StrictStr, Field(min_length=1, max_length=MAX_ID)]
Query = Annotated[StrictStr, Field(min_length=1, max_length=MAX_QUERY)]
Text = Annotated[StrictStr, Field(max_length=MAX_TEXT)]
CHUNK_RAG_WIDTHS = ("chunk-rag:16", "chunk-rag:32", "chunk-rag:128")  # beside chunk-rag (64 words)
MAX_LIMIT = 10_000  # units of one search result
_KINDS = {
    dict: "an object",
    list: "an array",
    str: "a string",
    bool: "a boolean",
    int: "a number",
    float: "a number",
}


def _kind(v: Any) -> str:
    if isinstance(v, float) and not math.isfinite(v):
        return repr(v)
    return _KINDS.get(type(v), type(v).__name__)


def _finite(v: Any, where: str) -> None:
    """Refuse NaN and infinities anywhere in ``v`` (Python's JSON reads them; JSON cannot write them)."""
    if isinstance(v, float) and not math.isfinite(v):
        raise ValueError(f"{where}: expected a finite number, got {v!r}")
    for k, x in v.items() if isinstance(v, dict) else enumerate(v) if isinstance(v, list) else ():
        _finite(x, f"{where}[{k!r}]")


def _object(scalars: bool) -> Any:
    """A JSON object with keys of 1-MAX_ID characters: values any JSON (``scalars``: strings, finite
    numbers, booleans or null)."""

    def validate(v: Any) -> dict[str, Any]:
        if not isinstance(v, dict):
            raise ValueError(f"expected a JSON object, got {_kind(v)}")
        for k, x in v.items():
            if not 0 < len(k) <= MAX_ID:
                raise ValueError(f"key {k[:40]!r}: expected 1-{MAX_ID} characters, got {len(k)}")
            if scalars and not (
                x is None or isinstance(x, (str, int)) or isinstance(x, float) and math.isfinite(x)
            ):
                raise ValueError(
                    f"key {k[:40]!r}: expected a string, a number, a boolean or null, got {_kind(x)}"
                )
            _finite(x, f"key {k[:40]!r}")
        return v

    values = {"type": ["string", "number", "boolean", "null"]} if scalars else {}
    return Annotated[
        dict,
        PlainValidator(validate),
        WithJsonSchema(
            {
                "type": "object",
                "propertyNames": {"minLength": 1, "maxLength": MAX_ID},
                "additionalProperties": values,
            }
        ),
    ]


Metadata = _object(scalars=False)
Filters = _object(scalars=True)


def _timestamp(v: Any) -> float | str:
    """Epoch seconds within years 1-9999, or an ISO date-time string (which the engine parses)."""
    if isinstance(v, str) and 0 < len(v) <= MAX_ISO:
        return v
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        if MIN_TIME <= v < MAX_TIME:  # exact for any int, False for nan
            return float(v)
        shown = repr(v) if len(repr(v)) <= 24 else f"an integer of {len(str(v))} digits"
        raise ValueError(f"epoch seconds outside years 1-9999, got {shown}")
    raise ValueError(
        f"expected epoch seconds (a number) or an ISO date-time (a string of 1-{MAX_ISO} characters), "
        f"got {type(v).__name__}"
    )


Timestamp = Annotated[
    Any,
    PlainValidator(_timestamp),
    WithJsonSchema(
        {
            "anyOf": [
                {
                    "type": "number",
                    "minimum": MIN_TIME,
                    "exclusiveMaximum": MAX_TIME,
                    "description": "epoch seconds",
                },
                {
                    "type": "string",
                    "minLength": 1,
                    "maxLength": MAX_ISO,
                    "description": "ISO date-time (UTC when it names no zone)",
                },
            ]
        }
    ),
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
    # chunk-rag's other widths are named, not any N: each width embeds a memory's passages once more
    Strategy = Literal[(*strategy_names(), *CHUNK_RAG_WIDTHS)]  # type: ignore[valid-type]

    class SearchRequest(Scope):
        """Exactly one of ``query`` and ``queries``."""

        model_config = ConfigDict(
            json_schema_extra={"oneOf": _given("query") + _given("queries", kind="array")}
        )
        query: Query | None = None
        queries: list[Query] | None = Field(None, min_length=1, max_length=max_queries)
        strategy: Strategy = "xmemory"  # type: ignore[valid-type]
        budget_tokens: Annotated[StrictInt, Field(ge=0, le=1_000_000)] | None = None
        limit: Annotated[StrictInt, Field(ge=1, le=MAX_LIMIT)] | None = Field(
            None, description="at most this many units"
        )
        threshold: Annotated[StrictFloat, Field(ge=-1.0, le=1.0)] | None = Field(
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
