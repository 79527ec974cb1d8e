"""The front doors' input rules: the HTTP service (``service.schemas``), the MCP server and the
LangGraph store take their arguments through these types and checks, so each refuses what the
others refuse, with the same limits:

- no coercion: a boolean is no number and no timestamp, a string is no number;
- an integer may be written ``3`` or ``3.0`` (JSON Schema's ``integer`` is any number without a
  fraction, so what the published schema allows is what is accepted); ``3.5`` is refused;
- a message's text (and an update's) has a non-space character; an id 1-MAX_ID characters;
- at most MAX_QUERY characters of a query, MAX_TEXT of a text, MAX_BUDGET tokens, MAX_LIMIT units;
- metadata and filters are JSON objects of valid Unicode nested at most ``metadata.MAX_DEPTH``
  deep (``engine.metadata``, which the engine applies itself); a filter is mem0's (operators,
  ``AND`` / ``OR`` / ``NOT``), checked by ``metadata.filter_problem`` at every door.

In a pydantic model a refusal is a validation error naming the field; ``check`` and ``integer``
raise a one-line ``ValueError`` naming it."""

from __future__ import annotations

import math
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    Field,
    PlainValidator,
    StrictStr,
    TypeAdapter,
    ValidationError,
    WithJsonSchema,
)

from ..memory.codec import MAX_TIME, MIN_TIME
from ..retrieve.strategies import strategy_names
from .inputs import MAX_BUDGET_TOKENS, MAX_ID_CHARS, MAX_LIMIT, MAX_QUERY_CHARS, Limits
from .metadata import MAX_DEPTH, OPERATORS, filter_problem, json_problem

MAX_ID = MAX_ID_CHARS
MAX_QUERY = MAX_QUERY_CHARS  # characters of one query
MAX_TEXT = Limits().max_text_chars  # characters of one message
MAX_MESSAGES = Limits().max_messages  # messages of one add
MAX_ISO = 64  # characters of an ISO date-time
MAX_BUDGET = MAX_BUDGET_TOKENS  # tokens of one search's context
# the engine takes sessions up to 2**63-1; the OpenAPI document writes bounds as floats, and 2**63-1024 is the
# largest integer below 2**63 that a float holds exactly, so the schema's bound is the service's
MAX_SESSION = 2**63 - 1024
CHUNK_RAG_WIDTHS = ("chunk-rag:16", "chunk-rag:32", "chunk-rag:128")  # beside chunk-rag (64 words)
_KINDS = {
    dict: "an object",
    list: "an array",
    str: "a string",
    bool: "a boolean",
    int: "a number",
    float: "a number",
}


def kind(v: Any) -> str:
    """``v``'s JSON type in words (``a string``), or the value itself for a NaN or an infinity."""
    if isinstance(v, float) and not math.isfinite(v):
        return repr(v)
    return _KINDS.get(type(v), "None" if v is None else type(v).__name__)


def integer(v: Any, lo: int, hi: int) -> int:
    """``v`` as an integer from ``lo`` to ``hi``: an int, or a float without a fraction; never a boolean
    or a string (``ValueError`` without a field name: the caller adds it)."""
    if isinstance(v, float) and math.isfinite(v) and v.is_integer():
        v = int(v)
    if isinstance(v, bool) or not isinstance(v, int):
        raise ValueError(
            f"expected an integer, got {v!r:.40}"
            if isinstance(v, float)
            else f"expected an integer, got {kind(v)}"
        )
    if not lo <= v <= hi:
        shown = str(v) if abs(v) < 10**20 else f"an integer of {len(str(abs(v)))} digits"
        raise ValueError(f"expected an integer from {lo} to {hi}, got {shown}")
    return v


def number(v: Any, lo: float, hi: float) -> float:
    """``v`` as a finite number from ``lo`` to ``hi`` (an int or a float; never a boolean or a string)."""
    if (
        isinstance(v, bool)
        or not isinstance(v, (int, float))
        or isinstance(v, float)
        and not math.isfinite(v)
    ):
        raise ValueError(f"expected a finite number, got {kind(v)}")
    if not lo <= v <= hi:
        raise ValueError(f"expected a number from {lo} to {hi}, got {v!r:.40}")
    return float(v)


def Integer(lo: int, hi: int) -> Any:  # noqa: N802 - a type
    """The pydantic type of an integer from ``lo`` to ``hi`` (``integer``)."""
    return Annotated[
        int,
        PlainValidator(lambda v: integer(v, lo, hi)),
        WithJsonSchema({"type": "integer", "minimum": lo, "maximum": hi}),
    ]


def Number(lo: float, hi: float) -> Any:  # noqa: N802 - a type
    """The pydantic type of a finite number from ``lo`` to ``hi`` (``number``)."""
    return Annotated[
        float,
        PlainValidator(lambda v: number(v, lo, hi)),
        WithJsonSchema({"type": "number", "minimum": lo, "maximum": hi}),
    ]


def _nonblank(v: str) -> str:
    if not v.strip():
        raise ValueError("expected text with a non-space character, got only whitespace")
    return v


Id = Annotated[StrictStr, Field(min_length=1, max_length=MAX_ID)]
Query = Annotated[StrictStr, Field(min_length=1, max_length=MAX_QUERY)]
Text = Annotated[
    StrictStr,
    Field(min_length=1, max_length=MAX_TEXT, json_schema_extra={"pattern": r"\S"}),
    AfterValidator(_nonblank),
]
Session = Integer(0, MAX_SESSION)
BudgetTokens = Integer(0, MAX_BUDGET)
Limit = Integer(1, MAX_LIMIT)
Threshold = Number(-1.0, 1.0)
# chunk-rag's other widths are named, not any N: each width embeds a memory's passages once more
Strategy = Literal[(*strategy_names(), *CHUNK_RAG_WIDTHS)]  # type: ignore[valid-type]


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
        f"got {kind(v)}"
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


def _object(scalars: bool) -> Any:
    """A JSON object with keys of 1-MAX_ID characters: values any JSON of valid Unicode nested at most
    MAX_DEPTH deep (``scalars``: strings, finite numbers, booleans or null)."""

    def validate(v: Any) -> dict[str, Any]:
        if not isinstance(v, dict):
            raise ValueError(f"expected a JSON object, got {kind(v)}")
        for k, x in v.items():
            if not isinstance(k, str) or not 0 < len(k) <= MAX_ID:
                raise ValueError(f"key {k!r:.40}: expected 1-{MAX_ID} characters")
            if scalars and not (
                x is None or isinstance(x, (str, int)) or isinstance(x, float) and math.isfinite(x)
            ):
                raise ValueError(
                    f"key {k!r:.40}: expected a string, a number, a boolean or null, got {kind(x)}"
                )
        problem = json_problem(v)
        if problem is not None:
            raise ValueError(problem)
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
                "description": f"a JSON object (valid Unicode, nested at most {MAX_DEPTH} deep)",
            }
        ),
    ]


Metadata = _object(scalars=False)


def _filters(v: Any) -> dict[str, Any]:
    problem = filter_problem(v)
    if problem is not None:
        raise ValueError(problem)
    return v


_SCALAR = {"type": ["string", "number", "boolean", "null"]}
_CONDITION = {
    "type": "object",
    "minProperties": 1,
    "additionalProperties": False,
    "properties": {
        **{op: _SCALAR for op in ("eq", "ne")},
        **{op: {"type": "array", "items": _SCALAR} for op in ("in", "nin")},
        **{op: {"type": ["number", "string"]} for op in ("gt", "gte", "lt", "lte")},
        **{op: {"type": "string"} for op in ("contains", "icontains")},
    },
}
_FILTER_LIST = {"type": "array", "minItems": 1, "items": {"type": "object"}}
# mem0's filters (engine.metadata): key -> value or operators; AND / OR / NOT combine filters
Filters = Annotated[
    dict,
    PlainValidator(_filters),
    WithJsonSchema(
        {
            "type": "object",
            "propertyNames": {"minLength": 1, "maxLength": MAX_ID},
            "properties": {
                "AND": _FILTER_LIST,
                "OR": _FILTER_LIST,
                "NOT": {"anyOf": [{"type": "object"}, _FILTER_LIST]},
            },
            "additionalProperties": {"anyOf": [_SCALAR, _CONDITION]},
            "description": "mem0's filters: key -> value (equality) or {operator: value} with operators "
            f"{', '.join(OPERATORS)}; AND / OR / NOT: lists of filters; keys created_at, updated_at "
            "(times), user_id, agent_id, run_id (scope), any other a metadata key",
        }
    ),
]


def check(type_: Any, v: Any, name: str) -> Any:
    """``v`` validated as ``type_`` (one of the types above), or a one-line ``ValueError`` naming ``name``."""
    try:
        return TypeAdapter(type_).validate_python(v)
    except ValidationError as exc:
        e = exc.errors()[0]
        at = "".join(f"[{p!r}]" for p in e["loc"])
        raise ValueError(f"{name}{at}: {e['msg'].removeprefix('Value error, ')}") from None


__all__ = [
    "CHUNK_RAG_WIDTHS",
    "MAX_BUDGET",
    "MAX_ID",
    "MAX_ISO",
    "MAX_LIMIT",
    "MAX_MESSAGES",
    "MAX_QUERY",
    "MAX_SESSION",
    "MAX_TEXT",
    "BudgetTokens",
    "Filters",
    "Id",
    "Integer",
    "Limit",
    "Metadata",
    "Number",
    "Query",
    "Session",
    "Strategy",
    "Text",
    "Threshold",
    "Timestamp",
    "check",
    "integer",
    "kind",
    "number",
]
