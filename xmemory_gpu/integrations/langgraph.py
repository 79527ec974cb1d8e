"""``XMemoryStore``: LangGraph's long-term memory (``BaseStore``) over a ``MemoryEngine`` (the
``langgraph`` extra). Every ``BaseStore`` call works, sync and async (``abatch`` runs ``batch`` in a
worker thread); ``search`` with a ``query`` runs xMemory retrieval.

Namespaces -> scopes: a namespace is one engine memory, ``(a,)`` -> ``user_id=a``; ``(a, b)`` ->
``user_id=a, agent_id=b``; ``(a, b, c)`` -> ``run_id=c``; deeper ones (or a third label starting
with ``[``) -> ``run_id`` = the JSON array of the labels after the second. So ``("alice",)`` is the
memory ``xmemory search STORE --user alice`` and the MCP server's ``user_id="alice"`` read, and two
namespaces never share a memory. A namespace prefix spans the memories of every namespace under it.

Values: each item's value (a JSON object) is kept, with its key and times, in the store's catalogue
(``memory.sqlite``, table ``langgraph_items``; ``get`` returns the value exactly), as a row of the
namespace's memory: the engine's ``delete_all`` of that scope and its ``reset`` remove the rows in
the same transaction as the memory (``memory.store``). A store written by an earlier release kept
them in ``langgraph.sqlite``; opening it moves them over (leaving out an indexed item whose message
the engine no longer holds: a reset or ``delete_all`` took it) and removes that file. Its text is
added to the namespace's memory as one message (speaker ``user``): the value's ``text``,
``content`` or ``memory`` field when it is a non-blank string, else the value as JSON;
``index=[paths]`` picks the fields (LangGraph's list of field paths; a value whose fields hold no
text is kept unindexed), ``index=False`` adds none.
A put to an existing key adds the new text first, then deletes the old message (the engine derives
the memory again, so no statement or theme of the old text stays), as does a delete. Each write
records the messages it may leave behind before touching the engine, so a crash in between is
finished (those messages deleted) when the store is opened again.

``search`` with a ``query`` returns the items whose messages the retrieved units came from, each
with the best score of those units (the relevance in [0, 1], as every front door scores), best
first (``filter`` applies to the values); without a
query, the items under the prefix that match ``filter``, most recently updated first. TTLs are not
supported (``supports_ttl = False``). Arguments follow the front doors' rules (``engine.rules``):
``limit``, ``offset`` and ``max_depth`` are non-negative integers, a query at most ``MAX_QUERY``
characters, ``index`` None, False or a list of field paths; anything else is a ``ValueError``
naming the argument.
"""

from __future__ import annotations

import asyncio
import json
import operator
import sqlite3
import threading
import time
import uuid
from collections.abc import Iterable, Mapping
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from langgraph.store.base import (
    BaseStore,
    GetOp,
    InvalidNamespaceError,
    Item,
    ListNamespacesOp,
    MatchCondition,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
    get_text_at_path,
)

from ..config import XMemoryConfig
from ..embed import Embedder
from ..engine import MemoryEngine, scope_key
from ..engine.metadata import json_problem
from ..engine.results import relevance
from ..engine.rules import MAX_QUERY, integer
from ..memory.store import DB_NAME, SCOPED_ROWS

DB_FILE = DB_NAME  # the items live in the store's catalogue
OLD_DB_FILE = "langgraph.sqlite"  # where an earlier release kept them
SPEAKER = "user"  # statements read "user likes ..."
TEXT_FIELDS = ("text", "content", "memory")
MAX_COUNT = 2**63 - 1
_SCHEMA = f"""
CREATE TABLE IF NOT EXISTS {SCOPED_ROWS} (namespace TEXT NOT NULL, key TEXT NOT NULL, value TEXT NOT NULL,
                                  message_id TEXT, created_at REAL NOT NULL, updated_at REAL NOT NULL,
                                  memory_id TEXT NOT NULL, PRIMARY KEY (namespace, key));
CREATE INDEX IF NOT EXISTS langgraph_items_message ON {SCOPED_ROWS} (message_id);
CREATE INDEX IF NOT EXISTS langgraph_items_memory ON {SCOPED_ROWS} (memory_id);
CREATE TABLE IF NOT EXISTS langgraph_pending (namespace TEXT NOT NULL, message_id TEXT NOT NULL,
                                              PRIMARY KEY (namespace, message_id));
"""
_COMPARE = {
    "$eq": operator.eq,
    "$ne": operator.ne,
    "$gt": operator.gt,
    "$gte": operator.ge,
    "$lt": operator.lt,
    "$lte": operator.le,
}


def namespace_scope(namespace: tuple[str, ...]) -> dict[str, str | None]:
    """The engine scope of a namespace (see the module's docstring)."""
    rest = namespace[2:]
    run = (
        None
        if not rest
        else rest[0]
        if len(rest) == 1 and not rest[0].startswith("[")
        else json.dumps(list(rest), ensure_ascii=False)
    )
    scope = {"user_id": namespace[0], "agent_id": namespace[1] if len(namespace) > 1 else None, "run_id": run}
    try:
        scope_key(**scope)
    except ValueError as exc:
        raise InvalidNamespaceError(f"namespace {namespace}: {exc}") from None
    return scope


def _check_labels(namespace: tuple[str, ...], name: str) -> None:
    if not isinstance(namespace, tuple):
        raise InvalidNamespaceError(f"{name}: expected a tuple of strings, got {type(namespace).__name__}")
    for label in namespace:
        if not isinstance(label, str) or not label or "." in label or "\x00" in label:
            raise InvalidNamespaceError(
                f"{name} {namespace}: label {label!r:.80}: expected a non-empty string without '.' or NUL"
            )


def _count(v: Any, name: str) -> None:
    try:
        integer(v, 0, MAX_COUNT)
    except ValueError as exc:
        raise ValueError(f"{name}: {exc}") from None


def _check(op: Op) -> None:
    """The namespace rules of ``BaseStore`` and the arguments' rules for an op given to ``batch`` directly."""
    if isinstance(op, (GetOp, PutOp)):
        _check_labels(op.namespace, "namespace")
        if not isinstance(op.key, str) or not op.key:
            raise ValueError(f"key: expected a non-empty string, got {op.key!r:.80}")
    if isinstance(op, GetOp):
        return
    if isinstance(op, PutOp):
        if not op.namespace or op.namespace[0] == "langgraph":
            raise InvalidNamespaceError(
                f"namespace {op.namespace}: expected at least one label, the first not 'langgraph'"
            )
        if op.ttl is not None:
            raise NotImplementedError("ttl: XMemoryStore does not support TTLs; leave ttl=None")
        if not (
            op.index is None
            or op.index is False
            or isinstance(op.index, (list, tuple))
            and all(isinstance(p, str) and p for p in op.index)
        ):
            raise ValueError(
                f"index: expected None, False or a list of field paths (e.g. ['text']), got {op.index!r:.80}"
            )
    elif isinstance(op, SearchOp):
        _check_labels(op.namespace_prefix, "namespace_prefix")
        _count(op.limit, "limit")
        _count(op.offset, "offset")
        if op.query is not None and (not isinstance(op.query, str) or len(op.query) > MAX_QUERY):
            shown = f"{len(op.query)} characters" if isinstance(op.query, str) else type(op.query).__name__
            raise ValueError(f"query: expected a string of at most {MAX_QUERY} characters, got {shown}")
        if op.filter is not None and not isinstance(op.filter, Mapping):
            raise ValueError(f"filter: expected a dict, got {type(op.filter).__name__}")
    elif isinstance(op, ListNamespacesOp):
        for cond in op.match_conditions or ():
            _check_labels(tuple(p for p in cond.path if p != "*"), f"{cond.match_type}")
        _count(op.limit, "limit")
        _count(op.offset, "offset")
        if op.max_depth is not None:
            _count(op.max_depth, "max_depth")
    else:
        raise ValueError(
            f"unknown operation {type(op).__name__}: expected GetOp, PutOp, SearchOp or ListNamespacesOp"
        )


def _text(value: dict[str, Any], index: Any) -> str | None:
    """The text a value is remembered by; None: not indexed."""
    if index is False:
        return None
    if index is None:
        found = next(
            (value[f] for f in TEXT_FIELDS if isinstance(value.get(f), str) and value[f].strip()), None
        )
        return found or json.dumps(value, ensure_ascii=False, sort_keys=True)
    text = "\n".join(t for path in index for t in get_text_at_path(value, path))
    return text if text.strip() else None


def _matches(value: Any, want: Any) -> bool:
    """LangGraph's filter semantics: equality, nested objects, ``$eq $ne $gt $gte $lt $lte``."""
    if isinstance(want, dict):
        if any(k.startswith("$") for k in want):
            for op, target in want.items():
                if op not in _COMPARE:
                    raise ValueError(
                        f"filter: unsupported operator {op!r}; expected one of {', '.join(_COMPARE)}"
                    )
                if op in ("$eq", "$ne"):
                    if not _COMPARE[op](value, target):
                        return False
                    continue
                try:
                    if not _COMPARE[op](float(value), float(target)):
                        return False
                except (TypeError, ValueError):
                    return False
            return True
        return isinstance(value, dict) and all(_matches(value.get(k), v) for k, v in want.items())
    return value == want


def _matches_condition(cond: MatchCondition, namespace: tuple[str, ...]) -> bool:
    path = tuple(cond.path)
    if len(namespace) < len(path):
        return False
    part = namespace[: len(path)] if cond.match_type == "prefix" else namespace[len(namespace) - len(path) :]
    return all(p == "*" or p == n for p, n in zip(path, part))


def _time(t: float) -> datetime:
    return datetime.fromtimestamp(t, tz=timezone.utc)


class XMemoryStore(BaseStore):
    """LangGraph's ``BaseStore`` over a ``MemoryEngine`` (see the module's docstring)."""

    supports_ttl = False

    def __init__(
        self,
        engine: MemoryEngine,
        *,
        strategy: str = "xmemory",
        budget_tokens: int | None = None,
        close_engine: bool = False,
    ) -> None:
        """A store over an open engine (``open`` opens one). ``strategy`` and ``budget_tokens``: the
        retrieval of ``search``; ``close_engine``: ``close`` closes the engine too."""
        self.engine = engine
        self.strategy = strategy
        self.budget_tokens = budget_tokens
        self._close_engine = close_engine
        self._lock = threading.RLock()
        root = Path(engine.store.path)
        self._db = sqlite3.connect(root / DB_FILE, timeout=30, check_same_thread=False)
        self._db.execute(
            "PRAGMA secure_delete = ON"
        )  # a replaced or deleted value's bytes are zeroed in the file
        with self._db:
            self._db.executescript(_SCHEMA)
        self._move_old(root / OLD_DB_FILE)
        self._settle()  # what a crash left behind

    @classmethod
    def open(
        cls,
        path: str | Path,
        *,
        embedder: Embedder | str | None = None,
        config: XMemoryConfig | None = None,
        backend: str = "auto",
        strategy: str = "xmemory",
        budget_tokens: int | None = None,
    ) -> XMemoryStore:
        """Create or reopen the store at ``path`` (``MemoryEngine.open``'s arguments); ``close`` closes it."""
        engine = MemoryEngine.open(path, embedder=embedder, config=config, backend=backend)
        try:
            return cls(engine, strategy=strategy, budget_tokens=budget_tokens, close_engine=True)
        except BaseException:
            engine.close()
            raise

    def _move_old(self, old: Path) -> None:
        """An earlier release's ``langgraph.sqlite`` moved into the catalogue in one transaction (an
        indexed item whose message the engine no longer holds left out: a reset or ``delete_all``
        took it), then removed; a crash before the removal moves the same rows again."""
        if not old.is_file():
            return
        src = sqlite3.connect(old)
        try:
            items = src.execute(
                "SELECT namespace, key, value, message_id, created_at, updated_at FROM items"
            ).fetchall()
            pending = src.execute("SELECT namespace, message_id FROM pending").fetchall()
        finally:
            src.close()
        kept = [
            (*row, scope_key(**namespace_scope(tuple(json.loads(row[0])))))
            for row in items
            if row[3] is None or self.engine.store.find_message(row[3])
        ]
        with self._db:
            self._db.executemany(f"INSERT OR IGNORE INTO {SCOPED_ROWS} VALUES (?, ?, ?, ?, ?, ?, ?)", kept)
            self._db.executemany("INSERT OR IGNORE INTO langgraph_pending VALUES (?, ?)", pending)
        for f in (old, old.with_name(old.name + "-journal")):
            f.unlink(missing_ok=True)

    def close(self) -> None:
        with self._lock:
            self._db.close()
            if self._close_engine:
                self.engine.close()

    def __enter__(self) -> XMemoryStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- BaseStore ---------------------------------------------------------------------------------
    def put(
        self, namespace: tuple[str, ...], key: str, value: dict[str, Any], index: Any = None, **kw: Any
    ) -> None:
        """``BaseStore.put``, but a key must be a string: the base class turns any key into one (5 -> '5')."""
        if not isinstance(key, str):
            raise ValueError(f"key: expected a non-empty string, got {type(key).__name__}")
        super().put(namespace, key, value, index, **kw)

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        """Reads see the state before the batch's writes; of several puts to one key the last counts."""
        ops = list(ops)
        for op in ops:
            _check(op)
        with self._lock:
            results: list[Result] = []
            puts: dict[tuple[tuple[str, ...], str], PutOp] = {}
            for op in ops:
                if isinstance(op, GetOp):
                    results.append(self._get(op))
                elif isinstance(op, SearchOp):
                    results.append(self._search(op))
                elif isinstance(op, ListNamespacesOp):
                    results.append(self._list(op))
                else:
                    puts[(op.namespace, op.key)] = op
                    results.append(None)
            if puts:
                self._apply(list(puts.values()))
            return results

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        return await asyncio.to_thread(self.batch, list(ops))

    # -- reading -----------------------------------------------------------------------------------
    def _get(self, op: GetOp) -> Item | None:
        row = self._db.execute(
            f"SELECT value, created_at, updated_at FROM {SCOPED_ROWS} WHERE namespace = ? AND key = ?",
            (_ns(op.namespace), op.key),
        ).fetchone()
        if row is None:
            return None
        return Item(
            value=json.loads(row[0]),
            key=op.key,
            namespace=op.namespace,
            created_at=_time(row[1]),
            updated_at=_time(row[2]),
        )

    def _namespaces(self) -> list[tuple[str, ...]]:
        rows = self._db.execute(f"SELECT DISTINCT namespace FROM {SCOPED_ROWS}")
        return [tuple(json.loads(r[0])) for r in rows]

    def _search(self, op: SearchOp) -> list[SearchItem]:
        prefix = tuple(op.namespace_prefix)
        spaces = [ns for ns in self._namespaces() if ns[: len(prefix)] == prefix]
        rows = []
        for ns in spaces:
            for key, value, mid, created, updated in self._db.execute(
                f"SELECT key, value, message_id, created_at, updated_at FROM {SCOPED_ROWS} "
                "WHERE namespace = ?",
                (_ns(ns),),
            ):
                v = json.loads(value)
                if all(_matches(v.get(k), w) for k, w in (op.filter or {}).items()):
                    rows.append((ns, key, v, mid, created, updated))
        if not op.query:
            rows.sort(key=lambda r: (-r[5], r[0], r[1]))
            return [
                SearchItem(ns, key, v, _time(c), _time(u))
                for ns, key, v, _, c, u in rows[op.offset : op.offset + op.limit]
            ]
        by_mid = {r[3]: r for r in rows if r[3] is not None}
        scoped = sorted({r[0] for r in by_mid.values()})
        items = [
            {
                "query": op.query,
                **namespace_scope(ns),
                "strategy": self.strategy,
                "budget_tokens": self.budget_tokens,
                "threshold": 0.0,  # BaseStore.search ranks what matches the filter: no "nothing relevant" gate
            }
            for ns in scoped
        ]
        best: dict[str, float] = {}
        for res in self.engine.search_batch(items) if items else []:
            for unit in res[0].units:
                score = min(1.0, max(0.0, relevance(unit)))  # the front doors' score: the relevance in [0, 1]
                for mid in unit.message_ids:
                    if mid in by_mid and score > best.get(mid, -float("inf")):
                        best[mid] = score
        ranked = sorted(best, key=lambda m: -best[m])[op.offset : op.offset + op.limit]
        return [
            SearchItem(
                by_mid[m][0],
                by_mid[m][1],
                by_mid[m][2],
                _time(by_mid[m][4]),
                _time(by_mid[m][5]),
                score=best[m],
            )
            for m in ranked
        ]

    def _list(self, op: ListNamespacesOp) -> list[tuple[str, ...]]:
        spaces = [
            ns
            for ns in self._namespaces()
            if all(_matches_condition(c, ns) for c in op.match_conditions or ())
        ]
        if op.max_depth is not None:
            spaces = list({ns[: op.max_depth] for ns in spaces})
        return sorted(spaces)[op.offset : op.offset + op.limit]

    # -- writing -----------------------------------------------------------------------------------
    def _apply(self, puts: list[PutOp]) -> None:
        """Check every put, record what the engine may keep (the new messages, the old ones), add the
        new texts, switch the items over, then delete what no item names (``_settle``)."""
        now = time.time()
        rows, adds = [], {}
        for op in puts:
            where = f"put {op.namespace} {op.key!r:.80}"
            scope = namespace_scope(op.namespace)
            memory = scope_key(**scope)
            if op.value is None:
                rows.append((_ns(op.namespace), op.key, None, None, memory))
                continue
            if not isinstance(op.value, Mapping):
                raise ValueError(f"{where}: value: expected a dict, got {type(op.value).__name__}")
            value = dict(op.value)
            problem = json_problem(
                value
            )  # valid Unicode, JSON types, nested at most MAX_DEPTH deep: no recursion
            if problem is not None:
                raise ValueError(f"{where}: value: not JSON: {problem}")
            try:
                encoded = json.dumps(value, ensure_ascii=False, allow_nan=False)
            except (TypeError, ValueError) as exc:
                raise ValueError(f"{where}: value: not JSON ({exc})") from None
            text = _text(value, op.index)
            mid = None
            if text is not None:
                if len(text) > self.engine.limits.max_text_chars:
                    raise ValueError(
                        f"{where}: value: its text has {len(text)} characters, more than the limit of "
                        f"{self.engine.limits.max_text_chars}"
                    )
                mid = f"lg-{uuid.uuid4().hex}"
                adds.setdefault(_ns(op.namespace), (scope, []))[1].append(
                    {"id": mid, "speaker": SPEAKER, "content": text, "timestamp": now}
                )
            rows.append((_ns(op.namespace), op.key, encoded, mid, memory))
        old = [
            r
            for ns, key, *_ in rows
            for r in self._db.execute(
                f"SELECT namespace, message_id FROM {SCOPED_ROWS} WHERE namespace = ? AND key = ?",
                (ns, key),
            ).fetchall()
        ]
        with self._db:
            self._db.executemany(
                "INSERT OR IGNORE INTO langgraph_pending VALUES (?, ?)",
                [r for r in old if r[1] is not None]
                + [(ns, mid) for ns, _, _, mid, _ in rows if mid is not None],
            )
        try:
            for chunk in self._chunks(list(adds.values())):
                self.engine.add_batch(chunk)
            with self._db:
                for ns, key, encoded, mid, memory in rows:
                    if encoded is None:
                        self._db.execute(
                            f"DELETE FROM {SCOPED_ROWS} WHERE namespace = ? AND key = ?", (ns, key)
                        )
                    else:
                        self._db.execute(
                            f"INSERT INTO {SCOPED_ROWS} VALUES (?, ?, ?, ?, ?, ?, ?) "
                            "ON CONFLICT (namespace, key) DO UPDATE SET value = excluded.value, "
                            "message_id = excluded.message_id, updated_at = excluded.updated_at",
                            (ns, key, encoded, mid, now, now, memory),
                        )
        finally:
            self._settle()

    def _chunks(self, adds: list[tuple[dict, list[dict]]]) -> Iterable[list[dict]]:
        """``add_batch`` items within the engine's limits (items, messages per memory, messages per call)."""
        lim = self.engine.limits
        items = [
            {"messages": msgs[i : i + lim.max_messages], **scope}
            for scope, msgs in adds
            for i in range(0, len(msgs), lim.max_messages)
        ]
        chunk, n = [], 0
        for it in items:
            if chunk and (len(chunk) == lim.max_items or n + len(it["messages"]) > lim.max_batch_messages):
                yield chunk
                chunk, n = [], 0
            chunk.append(it)
            n += len(it["messages"])
        if chunk:
            yield chunk

    def _settle(self) -> None:
        """Delete from the engine every recorded message no item names (a replaced or deleted value's,
        or one a failed write added), then forget the record."""
        pending = self._db.execute("SELECT namespace, message_id FROM langgraph_pending").fetchall()
        for ns, mid in pending:
            named = self._db.execute(f"SELECT 1 FROM {SCOPED_ROWS} WHERE message_id = ?", (mid,)).fetchone()
            if named is None:
                try:
                    self.engine.delete(mid, **namespace_scope(tuple(json.loads(ns))))
                except KeyError:  # never added (the write failed first), or already gone
                    pass
            with self._db:
                self._db.execute(
                    "DELETE FROM langgraph_pending WHERE namespace = ? AND message_id = ?", (ns, mid)
                )


def _ns(namespace: tuple[str, ...]) -> str:
    return json.dumps(list(namespace), ensure_ascii=False)
