"""Role chats for a bulk build: the chats an assistant app keeps, read from JSON or JSONL files.

Shapes read (one file may hold any of them; ``detect_format`` tells them from LoCoMo's):

- conversations: ``{"user_id", "agent_id"?, "run_id"?, "user_name"?, "metadata"?, "messages": [...]}``,
  one object, a JSON list of them, ``{"conversations": [...]}``, or one per JSONL line;
- OpenAI / mem0 ``add`` messages: a bare list of ``{"role", "content"}`` (or ``{"messages": [...]}``),
  the scope given by the caller (``xmemory build --user-id``);
- mem0's ``get_all`` export: ``{"results": [{"id", "memory", "user_id", "created_at", ...}]}`` or the
  list of those records: each memory one user message of its scope, in the order given.

A message: ``role`` (``user`` / ``assistant``, or LangChain's and Gemini's names of them: ``human``,
``ai``, ``model``, ``bot``; ``system``, ``developer``, ``tool`` and ``function`` turns are skipped),
``content`` (a string, or OpenAI's list of parts whose ``text`` parts are joined; ``null``, as in a
tool call, is skipped), and optionally ``created_at`` / ``timestamp`` (ISO date-time, UTC when it
names no zone, or epoch seconds), ``name`` (who speaks), ``id`` and ``metadata``. Other fields are
ignored. Errors are ``DatasetError`` naming the file and the field
(``chats.json: conversations[3].messages[2].role: expected 'user' or 'assistant', got 'robot'``).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from ..memory.codec import MAX_TIME, MIN_TIME
from .locomo import DatasetError

ROLES = {
    "user": "user",
    "human": "user",
    "assistant": "assistant",
    "ai": "assistant",
    "model": "assistant",
    "bot": "assistant",
}
SKIPPED_ROLES = frozenset({"system", "developer", "tool", "function"})
SUFFIXES = (".json", ".jsonl")


@dataclass
class ChatMessage:
    role: str  # "user" | "assistant"
    content: str
    timestamp: float | None = None  # epoch seconds (UTC)
    name: str | None = None  # who speaks, when the chat names them
    id: str | None = None
    metadata: dict | None = None
    where: str = ""  # the message's place in its file, for errors found later


@dataclass
class RoleChat:
    """One conversation of one scope (a memory gathers every conversation of its scope, in order)."""

    user_id: str
    agent_id: str | None
    run_id: str | None
    messages: list[ChatMessage]
    user_name: str | None = None
    metadata: dict | None = None  # stored with each of its messages
    where: str = ""
    skipped: int = 0  # turns left out: system / tool turns, empty contents


@dataclass(frozen=True)
class Scope:
    """The ids a caller gives for chats whose file names none (OpenAI's bare message lists)."""

    user_id: str | None = None
    agent_id: str | None = None
    run_id: str | None = None


def chat_files(path: str | Path) -> list[Path]:
    """The file itself, or a folder's ``.json`` and ``.jsonl`` files (sorted)."""
    path = Path(path)
    if path.is_dir():
        files = sorted(p for p in path.iterdir() if p.suffix in SUFFIXES)
        if not files:
            raise DatasetError(f"{path}: folder holds no .json or .jsonl files")
        return files
    if not path.exists():
        raise FileNotFoundError(f"{path}: no such file or folder")
    return [path]


def read_json_or_lines(f: Path) -> tuple[Any, bool]:
    """File ``f`` parsed: (its JSON value, False), or for JSON Lines (a ``.jsonl`` file, or several
    JSON values one per line) (the list of its lines' values, True)."""
    try:
        text = f.read_bytes().decode("utf-8")
    except OSError as exc:
        raise DatasetError(f"{f}: cannot read ({exc.strerror or exc})") from None
    except UnicodeDecodeError as exc:
        raise DatasetError(f"{f}: not UTF-8 text (byte {exc.start}: {exc.reason})") from None
    if f.suffix != ".jsonl":
        try:
            return json.loads(text), False
        except json.JSONDecodeError as exc:
            if exc.msg != "Extra data":
                raise DatasetError(
                    f"{f}: malformed JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}"
                ) from None
        except RecursionError:
            raise DatasetError(f"{f}: JSON nested too deeply") from None
    out = []
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError as exc:
            raise DatasetError(f"{f}: line {n}, column {exc.colno}: malformed JSON: {exc.msg}") from None
        except RecursionError:
            raise DatasetError(f"{f}: line {n}: JSON nested too deeply") from None
    return out, True


def detect_format(data: Any) -> str:
    """``"locomo"`` for LoCoMo items (``sample_id`` and ``conversation``), else ``"chats"``."""
    first = data[0] if isinstance(data, list) and data else data
    if isinstance(first, dict) and "conversation" in first and "sample_id" in first:
        return "locomo"
    return "chats"


def read_chats(path: str | Path, scope: Scope = Scope()) -> list[RoleChat]:
    """Every role chat of a file or a folder's files, in order."""
    return [c for f in chat_files(path) for c in chats_of(f, *read_json_or_lines(f), scope)]


def chats_of(f: Path, data: Any, lines: bool, scope: Scope = Scope()) -> Iterator[RoleChat]:
    """The role chats of file ``f``'s parsed ``data`` (``lines``: a JSONL file's list of lines)."""
    item = "line {}" if lines else "conversations[{}]"
    if isinstance(data, dict) and "conversations" in data:
        data, item = data["conversations"], "conversations[{}]"
        if not isinstance(data, list):
            raise DatasetError(f"{f}: conversations: expected a list of conversations")
    if isinstance(data, dict) and isinstance(data.get("results"), list):
        yield from _mem0(f, data["results"], "results[{}]", scope)
        return
    if isinstance(data, dict):
        data, item = [data], "conversation"
    if not isinstance(data, list):
        raise DatasetError(f"{f}: expected conversations or messages, got {type(data).__name__}")
    if not data:
        return
    kinds = {_kind(x) for x in data}
    if kinds == {"message"}:  # OpenAI's shape: one conversation of the caller's scope
        yield _chat(f, {"messages": data}, "", scope, bare="line" if lines else "messages")
        return
    if kinds == {"memory"}:
        yield from _mem0(f, data, "[{}]" if not lines else "line {}", scope)
        return
    for i, x in enumerate(data):
        where = item.format(i + 1 if lines else i)
        if not isinstance(x, dict):
            raise DatasetError(f"{f}: {where}: expected a conversation object, got {type(x).__name__}")
        if "messages" not in x:
            raise DatasetError(
                f"{f}: {where}: messages: missing (expected a conversation {{'user_id', 'messages': [...]}}"
                + (", or a list holding only messages" if _kind(x) == "message" else "")
                + ")"
            )
        yield _chat(f, x, where, scope)


def _kind(x: Any) -> str:
    if isinstance(x, dict):
        if "messages" in x:
            return "conversation"
        if "role" in x:
            return "message"
        if "memory" in x:
            return "memory"
    return "other"


def _id(d: dict, key: str, where: str, default: str | None, required: bool = False) -> str | None:
    v = d.get(key)
    if v is None:
        v = default
    if v is None:
        if required:
            raise DatasetError(f"{where}{key}: missing (give it in the file, or with --user-id)")
        return None
    if isinstance(v, int) and not isinstance(v, bool):
        v = str(v)
    if not isinstance(v, str) or not v:
        raise DatasetError(f"{where}{key}: expected a non-empty string, got {v!r:.60}")
    return v


def _chat(f: Path, d: dict, where: str, scope: Scope, *, bare: str = "") -> RoleChat:
    """A conversation object; ``bare``: a file of messages only (``"messages"``: a JSON list,
    ``"line"``: JSONL), its scope the caller's."""
    pre = f"{f}: {where}." if where else f"{f}: "
    msgs = d["messages"]
    if not isinstance(msgs, list):
        raise DatasetError(f"{pre}messages: expected a list of messages, got {type(msgs).__name__}")
    chat = RoleChat(
        user_id=_id(d, "user_id", pre, scope.user_id, required=True),  # type: ignore[arg-type]
        agent_id=_id(d, "agent_id", pre, scope.agent_id),
        run_id=_id(d, "run_id", pre, scope.run_id),
        messages=[],
        user_name=_id(d, "user_name", pre, None),
        metadata=_object(d.get("metadata"), f"{pre}metadata"),
        where=f"{f}: {where or bare}",
    )
    for j, m in enumerate(msgs):
        at = (
            f"{pre}messages[{j}]"
            if not bare
            else f"{f}: {bare}[{j}]"
            if bare == "messages"
            else f"{f}: line {j + 1}"
        )
        msg = _message(m, at)
        if msg is None:
            chat.skipped += 1
        else:
            chat.messages.append(msg)
    return chat


def _message(m: Any, at: str) -> ChatMessage | None:
    if not isinstance(m, dict):
        raise DatasetError(f"{at}: expected a message object, got {type(m).__name__}")
    role = m.get("role")
    if not isinstance(role, str):
        raise DatasetError(f"{at}.role: missing (expected 'user' or 'assistant')")
    if role.lower() in SKIPPED_ROLES:
        return None
    if role.lower() not in ROLES:
        raise DatasetError(f"{at}.role: expected 'user' or 'assistant', got {role!r:.60}")
    text = _content(m.get("content", m.get("text")), f"{at}.content")
    if text is None:
        return None
    ts = m.get("created_at", m.get("timestamp"))
    return ChatMessage(
        role=ROLES[role.lower()],
        content=text,
        timestamp=_time(ts, f"{at}.{'created_at' if 'created_at' in m else 'timestamp'}"),
        name=_id(m, "name", f"{at}.", None),
        id=_id(m, "id", f"{at}.", None),
        metadata=_object(m.get("metadata"), f"{at}.metadata"),
        where=at,
    )


def _content(v: Any, where: str) -> str | None:
    """A message's text: a string, or the ``text`` parts of OpenAI's list of parts joined; None
    (skipped) for ``null`` or text of white space only."""
    if isinstance(v, list):
        parts = []
        for k, p in enumerate(v):
            if isinstance(p, str):
                parts.append(p)
            elif isinstance(p, dict) and isinstance(p.get("text"), str):
                parts.append(p["text"])
            elif not isinstance(p, dict):
                raise DatasetError(f"{where}[{k}]: expected a string or a {{'type', 'text'}} part")
        v = "\n".join(parts)
    if v is None:
        return None
    if not isinstance(v, str):
        raise DatasetError(f"{where}: expected a string, got {type(v).__name__}")
    try:
        v.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise DatasetError(f"{where}: not valid Unicode (lone surrogate at character {exc.start})") from None
    return v.strip() or None


def _object(v: Any, where: str) -> dict | None:
    if v is None:
        return None
    if not isinstance(v, dict):
        raise DatasetError(f"{where}: expected a JSON object, got {type(v).__name__}")
    return v


def _time(v: Any, where: str) -> float | None:
    """Epoch seconds or an ISO date-time (UTC when it names no zone), within years 1-9999."""
    if v is None:
        return None
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        if not (math.isfinite(v) and MIN_TIME <= v < MAX_TIME):
            raise DatasetError(f"{where}: epoch seconds outside years 1-9999, got {v!r:.40}")
        return float(v)
    if isinstance(v, str):
        try:
            dt = datetime.fromisoformat(v.replace("Z", "+00:00"))
        except ValueError:
            raise DatasetError(
                f"{where}: expected an ISO date-time or epoch seconds, got {v!r:.60}"
            ) from None
        t = (dt if dt.tzinfo else dt.replace(tzinfo=timezone.utc)).timestamp()
        if not MIN_TIME <= t < MAX_TIME:
            raise DatasetError(f"{where}: {v!r:.60} is outside years 1-9999 in UTC")
        return t
    raise DatasetError(f"{where}: expected an ISO date-time or epoch seconds, got {type(v).__name__}")


def _mem0(f: Path, records: list, item: str, scope: Scope) -> Iterator[RoleChat]:
    """mem0's exported memories: each record one user message (its ``memory``), grouped by scope
    in the order the scopes first appear."""
    chats: dict[tuple, RoleChat] = {}
    for i, r in enumerate(records):
        where = f"{f}: {item.format(i)}"
        if not isinstance(r, dict):
            raise DatasetError(f"{where}: expected a memory object, got {type(r).__name__}")
        pre = f"{where}."
        key = (
            _id(r, "user_id", pre, scope.user_id, required=True),
            _id(r, "agent_id", pre, scope.agent_id),
            _id(r, "run_id", pre, scope.run_id),
        )
        text = _content(r.get("memory"), f"{pre}memory")
        chat = chats.setdefault(key, RoleChat(*key, [], where=where))  # type: ignore[arg-type]
        if text is None:
            chat.skipped += 1
            continue
        ts = r.get("created_at", r.get("timestamp"))
        chat.messages.append(
            ChatMessage(
                "user",
                text,
                _time(ts, f"{pre}{'created_at' if 'created_at' in r else 'timestamp'}"),
                id=_id(r, "id", pre, None),
                metadata=_object(r.get("metadata"), f"{pre}metadata"),
                where=where,
            )
        )
    yield from chats.values()


def check_unique_ids(chats: list[RoleChat]) -> None:
    """A message id given twice in one scope is refused (naming both places)."""
    seen: dict[tuple, dict[str, str]] = {}
    for c in chats:
        ids = seen.setdefault((c.user_id, c.agent_id, c.run_id), {})
        for m in c.messages:
            if m.id is None:
                continue
            if m.id in ids:
                raise DatasetError(f"{m.where}.id: {m.id!r} is already used in this scope, at {ids[m.id]}")
            ids[m.id] = m.where
