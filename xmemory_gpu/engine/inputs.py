"""What the engine accepts: scopes, message fields, timestamps, queries and the size limits of a
write (the HTTP service's limits, so a caller of the engine cannot ask more than a client can).
Every refusal is a one-line ``ValueError`` naming the field."""

from __future__ import annotations

import functools
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from ..memory.codec import MAX_TIME, MIN_TIME
from .ids import parse_unit_id

MAX_ID_CHARS = 512
MAX_QUERY_CHARS = 4000  # characters of one query, at every front door
MAX_BUDGET_TOKENS = 1_000_000  # tokens of one search's context
MAX_LIMIT = 10_000  # units of one search result
MAX_INT64 = 2**63 - 1


@dataclass(frozen=True)
class Limits:
    """Size limits of one write: characters per message text, messages per memory per call, items
    per ``add_batch`` and messages per ``add_batch`` (one write holds every other write behind it,
    so its size is bounded)."""

    max_text_chars: int = 100_000  # the service's MAX_TEXT
    max_messages: int = 1000  # per memory per call: the service's max_messages per add request
    max_items: int = 256  # the service's max_items per batch request
    max_batch_messages: int = 10_000


def _unicode(v: str, name: str) -> str:
    try:
        v.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError(f"{name}: not valid Unicode text (lone surrogate)") from None
    return v


def check_id(v: Any, name: str) -> str:
    """A scope part or message id: a non-empty string of at most MAX_ID_CHARS characters, no NUL."""
    if not isinstance(v, str) or not v or len(v) > MAX_ID_CHARS or "\x00" in v:
        raise ValueError(
            f"{name}: expected a non-empty string of at most {MAX_ID_CHARS} characters without NUL, got {v!r:.80}"
        )
    return _unicode(v, name)


def scope_key(user_id: Any, agent_id: Any = None, run_id: Any = None) -> str:
    """The store id of a memory: its scope as a JSON array (an exact, unambiguous encoding). At least
    one part is given; ``user_id`` may be left out when ``agent_id`` or ``run_id`` is given."""
    parts = []
    alone = agent_id is None and run_id is None
    if user_id is None and alone:
        raise ValueError("user_id: give at least one of user_id, agent_id and run_id")
    for name, v in (("user_id", user_id), ("agent_id", agent_id), ("run_id", run_id)):
        parts.append(None if v is None and (name != "user_id" or not alone) else check_id(v, name))
    return json.dumps(parts, ensure_ascii=False)


def check_scope(user_id: Any, agent_id: Any = None, run_id: Any = None) -> dict[str, str | None]:
    """A scope to read: each part a checked id or None, at least one given."""
    if user_id is None and agent_id is None and run_id is None:
        raise ValueError("user_id: give at least one of user_id, agent_id and run_id")
    return {
        name: None if v is None else check_id(v, name)
        for name, v in (("user_id", user_id), ("agent_id", agent_id), ("run_id", run_id))
    }


@functools.lru_cache(maxsize=1 << 16)
def scope_of(memory_id: str) -> dict[str, str | None]:
    """The scope of a stored memory: its key's parts, or for a memory stored under a plain id (a bulk
    build's ``conv-26``) that id as ``user_id``. Do not modify the dict returned (it is cached)."""
    try:
        parts = json.loads(memory_id)
    except ValueError:
        parts = None
    if (
        isinstance(parts, list)
        and len(parts) == 3
        and all(p is None or isinstance(p, str) for p in parts)
        and any(p is not None for p in parts)
    ):
        return {"user_id": parts[0], "agent_id": parts[1], "run_id": parts[2]}
    return {"user_id": memory_id, "agent_id": None, "run_id": None}


def in_scope(memory_id: str, scope: dict[str, str | None]) -> bool:
    """Whether the memory ``memory_id`` lies in ``scope`` (its given parts equal; None: any)."""
    have = scope_of(memory_id)
    return all(v is None or have[k] == v for k, v in scope.items())


def messages_of(v: Any, where: str) -> list:
    """mem0's ``messages``: a string (one message from the user), one message object, or a list of
    message objects (each checked later)."""
    if isinstance(v, str):
        return [{"role": "user", "content": v}]
    if isinstance(v, dict):
        return [v]
    if isinstance(v, Sequence) and not isinstance(v, (bytes, bytearray)):
        return list(v)
    raise ValueError(
        f"{where}: expected a string, a message object or a list of message objects, got {type(v).__name__}"
    )


def message_id(v: Any, where: str) -> str:
    """A caller's message id; one shaped like a derived unit's (``episode:0``) is refused, so an id
    always names one thing."""
    mid = check_id(v, f"{where}: id")
    if parse_unit_id(mid) is not None:
        raise ValueError(
            f"{where}: id: {mid!r} has the form of a derived unit id (episode:N, semantic:N, theme:N); "
            "choose another message id"
        )
    return mid


def timestamp(v: Any, where: str) -> float | None:
    """Epoch seconds or an ISO date-time (UTC when it names no zone), within years 1-9999."""
    if v is None:
        return None
    name = f"{where}: timestamp"
    if isinstance(v, bool):
        raise ValueError(f"{name}: expected an ISO date-time or epoch seconds, got {v!r}")
    if isinstance(v, int):
        if not MIN_TIME <= v < MAX_TIME:
            shown = str(v) if abs(v) < 10**20 else f"an integer of {v.bit_length()} bits"
            raise ValueError(f"{name}: epoch seconds outside years 1-9999, got {shown}")
        return float(v)
    if isinstance(v, float):
        if not math.isfinite(v) or not MIN_TIME <= v < MAX_TIME:
            raise ValueError(f"{name}: expected finite epoch seconds within years 1-9999, got {v!r}")
        return v
    if isinstance(v, str):
        try:
            dt = datetime.fromisoformat(v.replace("Z", "+00:00"))
        except ValueError:
            raise ValueError(f"{name}: expected an ISO date-time or epoch seconds, got {v!r:.80}") from None
        if dt.tzinfo is None:
            dt = dt.replace(tzinfo=timezone.utc)
        t = dt.timestamp()
        if not MIN_TIME <= t < MAX_TIME:
            raise ValueError(f"{name}: {v!r} is outside years 1-9999 in UTC")
        return t
    raise ValueError(f"{name}: expected an ISO date-time or epoch seconds, got {type(v).__name__}")


def session(v: Any, where: str) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v <= MAX_INT64:
        shown = (
            f"an integer of {v.bit_length()} bits"
            if isinstance(v, int) and abs(v) >= 10**20
            else repr(v)[:40]
        )
        raise ValueError(f"{where}: session: expected an integer from 0 to 2**63-1, got {shown}")
    return v


def flag(v: Any, name: str) -> bool:
    """A switch: ``True`` or ``False`` only (``"no"`` and ``None`` are no answer)."""
    if not isinstance(v, bool):
        raise ValueError(f"{name}: expected True or False, got {v!r:.40}")
    return v


def text(d: dict, keys: tuple[str, ...], where: str, max_chars: int) -> str:
    """The first of ``keys`` present in ``d``: a string of valid Unicode with at least one
    non-space character, of at most ``max_chars`` characters."""
    for k in keys:
        if k in d:
            v = d[k]
            if not isinstance(v, str):
                raise ValueError(f"{where}: {k}: expected a string, got {type(v).__name__}")
            if not v.strip():
                raise ValueError(
                    f"{where}: {k}: expected text, got {'an empty string' if not v else 'only whitespace'}"
                )
            if len(v) > max_chars:
                raise ValueError(f"{where}: {k}: {len(v)} characters, more than the limit of {max_chars}")
            return _unicode(v, f"{where}: {k}")
    raise ValueError(f"{where}: expected one of the fields {list(keys)}")


def queries(v: Any, name: str) -> list[str]:
    """One query (a string) or a list of them; each a non-empty string of valid Unicode."""
    if isinstance(v, str):
        out = [v]
    elif isinstance(v, Sequence) and not isinstance(v, (bytes, bytearray)):
        out = list(v)
        if not out:
            raise ValueError(f"{name}: expected at least one query")
    else:
        raise ValueError(f"{name}: expected a string or a list of strings, got {type(v).__name__}")
    for i, q in enumerate(out):
        where = name if isinstance(v, str) else f"{name}[{i}]"
        if not isinstance(q, str):
            raise ValueError(f"{where}: expected a string, got {type(q).__name__}")
        if not q:
            raise ValueError(f"{where}: expected a non-empty query")
        if len(q) > MAX_QUERY_CHARS:
            raise ValueError(f"{where}: {len(q)} characters, more than the limit of {MAX_QUERY_CHARS}")
        _unicode(q, where)
    return out


def budget_tokens(v: Any, name: str) -> int | None:
    """A search's token budget: None (the configured one) or an integer from 0 to MAX_BUDGET_TOKENS."""
    if v is None:
        return None
    if isinstance(v, float) and v.is_integer():
        v = int(v)
    if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v <= MAX_BUDGET_TOKENS:
        raise ValueError(f"{name}: expected an integer from 0 to {MAX_BUDGET_TOKENS}, got {v!r:.40}")
    return v
