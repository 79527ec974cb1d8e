"""Metadata on messages and the filters that select by it (mem0's ``metadata`` and ``filters``).

``add(..., metadata={...})`` stores one JSON object with every message of the call, kept in the
memory's stats (``stats["message_metadata"]``: message id -> object, written in the same atomic
commit as the messages and dropped with them).

A filter is mem0's: ``{"topic": "travel", "year": 2024}`` matches a message whose metadata has both,
with the same JSON type (``1`` is not ``true``); a key's value may be an object of operators
(``{"year": {"gte": 2023}}``): ``eq``, ``ne``, ``in``, ``nin``, ``gt``, ``gte``, ``lt``, ``lte``,
``contains``, ``icontains``; ``"*"`` matches any value the key has; ``{"AND": [f, ...]}``,
``{"OR": [f, ...]}`` and ``{"NOT": f | [f, ...]}`` combine filters. The keys ``created_at`` and
``updated_at`` compare the message's times (ISO date-times or epoch seconds), ``user_id``,
``agent_id`` and ``run_id`` its memory's scope; any other key is a metadata key. A message without
the key matches ``ne`` and ``nin`` only. A derived unit matches when all of its source messages do
(``memory.subset.restrict``), so a filtered result shows no text of a message that does not match.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from typing import Any

from ..memory.bank import MemorySlice
from ..memory.hierarchy import Memory
from .inputs import MAX_ID_CHARS, timestamp

MAX_METADATA_CHARS = 16_384  # one add's metadata as JSON
MAX_DEPTH = 32  # objects and arrays nested in one add's metadata
STATS_KEY = "message_metadata"


def _at(path: tuple) -> str:
    return "".join(f"[{p!r:.40}]" for p in path)


def json_problem(v: Any, max_depth: int = MAX_DEPTH) -> str | None:
    """What keeps ``v`` from being storable JSON, in a few words (None: nothing): a lone surrogate
    in a key or a string, a number that is not finite, a value that is no JSON type, or objects and
    arrays nested more than ``max_depth`` deep. Iterative: a deep value costs no recursion."""
    stack: list[tuple[Any, int, tuple]] = [(v, 1, ())]
    while stack:
        x, depth, path = stack.pop()
        if isinstance(x, str):
            if not _valid(x):
                return f"at {_at(path)}: not valid Unicode text (lone surrogate)"
        elif isinstance(x, (dict, list)):
            if depth > max_depth:
                return f"nested more than {max_depth} levels deep"
            for k, y in x.items() if isinstance(x, dict) else enumerate(x):
                if isinstance(x, dict) and not (isinstance(k, str) and _valid(k)):
                    at = f" at {_at(path)}" if path else ""
                    why = (
                        "not valid Unicode text (lone surrogate)"
                        if isinstance(k, str)
                        else "keys must be strings"
                    )
                    return f"key {k!r:.40}{at}: {why}"
                stack.append((y, depth + 1, (*path, k)))
        elif isinstance(x, float):
            if not math.isfinite(x):
                return f"at {_at(path)}: expected a finite number, got {x!r}"
        elif not (x is None or isinstance(x, (bool, int))):
            return f"at {_at(path)}: not JSON (strings, finite numbers, booleans, null, lists, objects): {type(x).__name__}"
    return None


def _valid(s: str) -> bool:
    try:
        s.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _scalar(v: Any) -> bool:
    return v is None or isinstance(v, (str, bool, int)) or (isinstance(v, float) and math.isfinite(v))


def _keys(d: dict, name: str) -> None:
    for k in d:
        if not isinstance(k, str) or not 0 < len(k) <= MAX_ID_CHARS:
            raise ValueError(f"{name}: keys must be strings of 1-{MAX_ID_CHARS} characters, got {k!r:.80}")


def _checked(v: dict, name: str) -> None:
    """Keys of 1-MAX_ID_CHARS characters, then ``json_problem``, as a ``ValueError`` naming ``name``."""
    _keys(v, name)
    problem = json_problem(v)
    if problem is not None:
        raise ValueError(f"{name}: {problem}")


def metadata(v: Any, name: str) -> dict | None:
    """A JSON object of at most MAX_METADATA_CHARS characters as JSON and MAX_DEPTH levels of
    nesting (finite numbers, valid Unicode), or None."""
    if v is None:
        return None
    if not isinstance(v, dict):
        raise ValueError(f"{name}: expected a JSON object, got {type(v).__name__}")
    _checked(v, name)
    try:
        raw = json.dumps(v, ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise ValueError(
            f"{name}: not JSON (finite numbers, strings, booleans, null, lists, objects): {exc}"
        ) from None
    if len(raw) > MAX_METADATA_CHARS:
        raise ValueError(
            f"{name}: {len(raw)} characters as JSON, more than the limit of {MAX_METADATA_CHARS}"
        )
    return json.loads(raw)


OPERATORS = ("eq", "ne", "in", "nin", "gt", "gte", "lt", "lte", "contains", "icontains")
LOGIC = ("AND", "OR", "NOT")
TIME_KEYS = ("created_at", "updated_at")
SCOPE_KEYS = ("user_id", "agent_id", "run_id")


def filter_problem(v: Any, depth: int = 1) -> str | None:
    """What keeps ``v`` from being a filter, in a few words (None: nothing)."""
    if not isinstance(v, dict):
        return f"expected a JSON object of key -> value or operators, got {type(v).__name__}"
    if depth > MAX_DEPTH:
        return f"nested more than {MAX_DEPTH} levels deep"
    for k, x in v.items():
        if not isinstance(k, str) or not 0 < len(k) <= MAX_ID_CHARS:
            return f"keys must be strings of 1-{MAX_ID_CHARS} characters, got {k!r:.80}"
        if k in LOGIC:
            parts = [x] if k == "NOT" and isinstance(x, dict) else x
            if not isinstance(parts, list) or not parts:
                return f"{k}: expected a non-empty list of filters"
            for i, p in enumerate(parts):
                if (why := filter_problem(p, depth + 1)) is not None:
                    return f"{k}[{i}]: {why}"
        elif isinstance(x, dict):
            if not x:
                return f"key {k!r:.80}: expected at least one operator of {list(OPERATORS)}"
            for op, y in x.items():
                if op not in OPERATORS:
                    return f"key {k!r:.80}: unknown operator {op!r:.40}; expected one of {list(OPERATORS)}"
                if op in ("in", "nin"):
                    if not isinstance(y, list) or not all(_scalar(z) for z in y):
                        return f"key {k!r:.80}: {op}: expected a list of strings, numbers, booleans or null"
                elif op in ("contains", "icontains"):
                    if not isinstance(y, str):
                        return f"key {k!r:.80}: {op}: expected a string, got {type(y).__name__}"
                elif op in ("gt", "gte", "lt", "lte"):
                    if isinstance(y, bool) or not (isinstance(y, str) or _scalar(y)) or y is None:
                        return f"key {k!r:.80}: {op}: expected a number or a string, got {y!r:.40}"
                elif not _scalar(y):
                    return f"key {k!r:.80}: {op}: expected a string, a finite number, a boolean or null, got {y!r:.80}"
        elif not _scalar(x):
            return f"key {k!r:.80}: expected a string, a finite number, a boolean, null or an object of operators, got {x!r:.80}"
    return json_problem(v)


def filters(v: Any, name: str) -> dict | None:
    """A filter checked (see the module's doc); None or ``{}`` is no filter."""
    if v is None:
        return None
    problem = filter_problem(v)
    if problem is not None:
        raise ValueError(f"{name}: {problem}")
    for k in TIME_KEYS:  # the times compared are checked now, not at the first message
        _times_in(v, k, name)
    return v or None


def _times_in(flt: dict, key: str, name: str) -> None:
    """Every value compared with the time ``key`` in ``flt``, parsed (a one-line error naming it)."""
    for k, x in flt.items():
        if k in LOGIC:
            for p in [x] if isinstance(x, dict) else x:
                _times_in(p, key, name)
        elif k == key:
            for y in x.values() if isinstance(x, dict) else [x]:
                if isinstance(y, list) and any(z is None or z == "*" for z in y):
                    raise ValueError(
                        f"{name}: {k}: a list of times holds ISO date-times or epoch seconds only"
                    )
                for z in y if isinstance(y, list) else [y]:
                    if z != "*" and z is not None:
                        _time(z, f"{name}: {k}")


def _time(v: Any, name: str) -> float:
    """A time compared with ``created_at`` / ``updated_at``: ISO date-time or epoch seconds."""
    return float(timestamp(v, name))


def _equal(a: Any, b: Any) -> bool:
    """JSON equality: booleans equal booleans only, numbers numbers (1 == 1.0), strings strings."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b
    return type(a) is type(b) and a == b


def _compare(have: Any, op: str, want: Any) -> bool:
    """``have`` (present) against ``want`` under ``op``."""
    if want == "*" and op == "eq":
        return True
    if op == "eq":
        return _equal(have, want)
    if op == "ne":
        return not _equal(have, want)
    if op == "in":
        return any(_equal(have, w) for w in want)
    if op == "nin":
        return not any(_equal(have, w) for w in want)
    if op in ("contains", "icontains"):
        if isinstance(have, list):
            return any(isinstance(h, str) and _contains(h, want, op) for h in have)
        return isinstance(have, str) and _contains(have, want, op)
    num = isinstance(have, (int, float)) and not isinstance(have, bool)
    if not (num and isinstance(want, (int, float)) or isinstance(have, str) and isinstance(want, str)):
        return False
    return {"gt": have > want, "gte": have >= want, "lt": have < want, "lte": have <= want}[op]


def _contains(have: str, want: str, op: str) -> bool:
    return want in have if op == "contains" else want.casefold() in have.casefold()


_ABSENT = object()


def _holds(flt: dict, value: Callable[[str], Any]) -> bool:
    """Whether a message passes ``flt``; ``value(key)`` is its value of a key (``_ABSENT``: none)."""
    for k, x in flt.items():
        if k in LOGIC:
            parts = [x] if isinstance(x, dict) else x
            if k == "AND" and not all(_holds(p, value) for p in parts):
                return False
            if k == "OR" and not any(_holds(p, value) for p in parts):
                return False
            if k == "NOT" and any(_holds(p, value) for p in parts):
                return False
            continue
        have = value(k)
        for op, want in x.items() if isinstance(x, dict) else [("eq", x)]:
            if have is _ABSENT or have is None and k in TIME_KEYS + SCOPE_KEYS:
                if op not in ("ne", "nin"):
                    return False
                continue
            if k in TIME_KEYS and want is not None and want != "*":
                want = [_time(w, k) for w in want] if isinstance(want, list) else _time(want, k)
            if not _compare(have, op, want):
                return False
    return True


def of_memory(mem: Memory | MemorySlice) -> dict[str, dict]:
    """Message id -> its metadata object."""
    return dict(mem.stats.get(STATS_KEY) or {})


def carry(
    old: Memory | MemorySlice, new: MemorySlice, added: dict[str, dict], dropped: set[str] = frozenset()
) -> None:
    """``new``'s metadata: ``old``'s without the ``dropped`` message ids, plus ``added`` (in place)."""
    md = {k: v for k, v in of_memory(old).items() if k not in dropped} | added
    alive = set(new.cols["msg"]["id"].tolist())
    md = {k: v for k, v in md.items() if k in alive}
    if md:
        new.stats[STATS_KEY] = md
    else:
        new.stats.pop(STATS_KEY, None)


def matching(
    mem: Memory,
    flt: dict,
    times: dict[str, tuple[float | None, float | None]] | None = None,
    scope: dict[str, str | None] | None = None,
) -> set[str]:
    """The ids of the memory's messages that pass ``flt``; ``times``: message id -> (created_at,
    updated_at) in epoch seconds; ``scope``: the memory's scope."""
    md, times, scope = of_memory(mem), times or {}, scope or {}
    out = set()
    for m in mem.messages:
        own = md.get(m.id, {})
        t = times.get(m.id, (None, None))

        def value(k: str, own=own, t=t) -> Any:
            if k in TIME_KEYS:
                return t[TIME_KEYS.index(k)]
            if k in SCOPE_KEYS:
                return scope.get(k)
            return own.get(k, _ABSENT)

        if _holds(flt, value):
            out.add(m.id)
    return out


def matches_unit(unit: dict, ok: set[str], theme_sources: dict[str, set[str]]) -> bool:
    """Whether a ``get_all`` unit passes: a message when it matches, a derived unit when all its
    source messages do (a theme: all its statements' sources)."""
    if unit["type"] == "message":
        return unit["id"] in ok
    src = unit.get("message_ids")
    if src is None:
        src = theme_sources.get(unit["id"], set())
    return bool(src) and set(src) <= ok


__all__ = [
    "LOGIC",
    "MAX_DEPTH",
    "OPERATORS",
    "MAX_METADATA_CHARS",
    "carry",
    "filter_problem",
    "filters",
    "json_problem",
    "matches_unit",
    "matching",
    "metadata",
    "of_memory",
]
