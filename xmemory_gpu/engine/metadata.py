"""Metadata on messages and the filters that select by it (mem0's ``metadata`` and ``filters``).

``add(..., metadata={...})`` stores one JSON object with every message of the call, kept in the
memory's stats (``stats["message_metadata"]``: message id -> object, written in the same atomic
commit as the messages and dropped with them). A filter is equality on keys: ``{"topic": "travel",
"year": 2024}`` matches a message whose metadata has both, with the same JSON type (``1`` is not
``true``); a message without metadata matches no non-empty filter. A derived unit matches when all
of its source messages do (``memory.subset.restrict``), so a filtered result shows no text of a
message that does not match.
"""

from __future__ import annotations

import json
import math
from typing import Any

from ..memory.bank import MemorySlice
from ..memory.hierarchy import Memory
from .inputs import MAX_ID_CHARS

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


def filters(v: Any, name: str) -> dict | None:
    """Equality filters: a JSON object of keys to strings, finite numbers, booleans or null; None or
    ``{}`` is no filter."""
    if v is None:
        return None
    if not isinstance(v, dict):
        raise ValueError(f"{name}: expected a JSON object of metadata key -> value, got {type(v).__name__}")
    for k, x in v.items():
        if isinstance(k, str) and not _scalar(x):
            raise ValueError(
                f"{name}: {k!r:.80}: expected a string, a finite number, a boolean or null, got {x!r:.80}"
            )
    _checked(v, name)
    return v or None


def _equal(a: Any, b: Any) -> bool:
    """JSON equality: booleans equal booleans only, numbers numbers (1 == 1.0), strings strings."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b
    return type(a) is type(b) and a == b


def of_memory(mem: Memory) -> dict[str, dict]:
    """Message id -> its metadata object."""
    return dict(mem.stats.get(STATS_KEY) or {})


def carry(old: Memory, new: MemorySlice, added: dict[str, dict], dropped: set[str] = frozenset()) -> None:
    """``new``'s metadata: ``old``'s without the ``dropped`` message ids, plus ``added`` (in place)."""
    md = {k: v for k, v in of_memory(old).items() if k not in dropped} | added
    alive = set(new.cols["msg"]["id"].tolist())
    md = {k: v for k, v in md.items() if k in alive}
    if md:
        new.stats[STATS_KEY] = md
    else:
        new.stats.pop(STATS_KEY, None)


def matching(mem: Memory, flt: dict) -> set[str]:
    """The ids of the memory's messages whose metadata matches every key of ``flt``."""
    md = of_memory(mem)
    return {
        m.id
        for m in mem.messages
        if m.id in md and all(k in md[m.id] and _equal(md[m.id][k], v) for k, v in flt.items())
    }


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
    "MAX_DEPTH",
    "MAX_METADATA_CHARS",
    "carry",
    "filters",
    "json_problem",
    "matches_unit",
    "matching",
    "metadata",
    "of_memory",
]
