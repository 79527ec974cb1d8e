"""``XMemoryStore``: LangGraph's long-term memory (``BaseStore``) over a ``MemoryEngine`` (the
``langgraph`` extra). Every ``BaseStore`` call works, sync and async (``abatch`` runs ``batch`` in a
worker thread); ``search`` with a ``query`` runs xMemory retrieval.

Namespaces -> scopes: a namespace is one engine memory, ``(a,)`` -> ``user_id=a``; ``(a, b)`` ->
``user_id=a, agent_id=b``; ``(a, b, c)`` -> ``run_id=c``; deeper ones (or a third label starting
with ``[``) -> ``run_id`` = the JSON array of the labels after the second. So ``("alice",)`` is the
memory ``xmemory search STORE --user alice`` and the MCP server's ``user_id="alice"`` read, and two
namespaces never share a memory. A namespace prefix spans the memories of every namespace under it.

Values: each item's value (a JSON object) is kept, with its key and times, in ``langgraph.sqlite``
inside the store (``get`` returns the value exactly); its text is added to the namespace's memory
as one message (speaker ``user``): the value's ``text``, ``content`` or ``memory`` field when it
is a string, else the value as JSON; ``index=[paths]`` picks the fields, ``index=False`` adds none.
A put to an existing key adds the new text first, then deletes the old message (the engine derives
the memory again, so no statement or theme of the old text stays), as does a delete. Each write
records the messages it may leave behind before touching the engine, so a crash in between is
finished (those messages deleted) when the store is opened again.

``search`` with a ``query`` returns the items whose messages the retrieved units came from, each
with the best score of those units, best first (``filter`` applies to the values); without a
query, the items under the prefix that match ``filter``, most recently updated first. TTLs are not
supported (``supports_ttl = False``).
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

DB_FILE = "langgraph.sqlite"
SPEAKER = "user"  # statements read "user likes ..."
TEXT_FIELDS = ("text", "content", "memory")
_SCHEMA = """
CREATE TABLE IF NOT EXISTS items (namespace TEXT NOT NULL, key TEXT NOT NULL, value TEXT NOT NULL,
                                  message_id TEXT, created_at REAL NOT NULL, updated_at REAL NOT NULL,
                                  PRIMARY KEY (namespace, key));
CREATE INDEX IF NOT EXISTS items_message ON items (message_id);
CREATE TABLE IF NOT EXISTS pending (namespace TEXT NOT NULL, message_id TEXT NOT NULL,
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


def _check(op: Op) -> None:
    """The namespace rules of ``BaseStore`` for an op given to ``batch`` directly."""
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
    elif isinstance(op, SearchOp):
        _check_labels(op.namespace_prefix, "namespace_prefix")
    elif isinstance(op, ListNamespacesOp):
        for cond in op.match_conditions or ():
            _check_labels(tuple(p for p in cond.path if p != "*"), f"{cond.match_type}")
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
    return "\n".join(t for path in index for t in get_text_at_path(value, path)) or None


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
        self._db = sqlite3.connect(Path(engine.store.path) / DB_FILE, check_same_thread=False)
        self._db.execute(
            "PRAGMA secure_delete = ON"
        )  # a replaced or deleted value's bytes are zeroed in the file
        with self._db:
            self._db.executescript(_SCHEMA)
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
            "SELECT value, created_at, updated_at FROM items WHERE namespace = ? AND key = ?",
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
        return [tuple(json.loads(r[0])) for r in self._db.execute("SELECT DISTINCT namespace FROM items")]

    def _search(self, op: SearchOp) -> list[SearchItem]:
        prefix = tuple(op.namespace_prefix)
        spaces = [ns for ns in self._namespaces() if ns[: len(prefix)] == prefix]
        rows = []
        for ns in spaces:
            for key, value, mid, created, updated in self._db.execute(
                "SELECT key, value, message_id, created_at, updated_at FROM items WHERE namespace = ?",
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
                for mid in unit.message_ids:
                    if mid in by_mid and float(unit.score) > best.get(mid, -float("inf")):
                        best[mid] = float(unit.score)
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
            if op.value is None:
                rows.append((_ns(op.namespace), op.key, None, None))
                continue
            if not isinstance(op.value, Mapping):
                raise ValueError(f"{where}: value: expected a dict, got {type(op.value).__name__}")
            value = dict(op.value)
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
            rows.append((_ns(op.namespace), op.key, encoded, mid))
        old = [
            r
            for ns, key, _, _ in rows
            for r in self._db.execute(
                "SELECT namespace, message_id FROM items WHERE namespace = ? AND key = ?", (ns, key)
            )
        ]
        with self._db:
            self._db.executemany(
                "INSERT OR IGNORE INTO pending VALUES (?, ?)",
                [r for r in old if r[1] is not None]
                + [(ns, mid) for ns, _, _, mid in rows if mid is not None],
            )
        try:
            for chunk in self._chunks(list(adds.values())):
                self.engine.add_batch(chunk)
            with self._db:
                for ns, key, encoded, mid in rows:
                    if encoded is None:
                        self._db.execute("DELETE FROM items WHERE namespace = ? AND key = ?", (ns, key))
                    else:
                        self._db.execute(
                            "INSERT INTO items VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (namespace, key) "
                            "DO UPDATE SET value = excluded.value, message_id = excluded.message_id, "
                            "updated_at = excluded.updated_at",
                            (ns, key, encoded, mid, now, now),
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
        pending = self._db.execute("SELECT namespace, message_id FROM pending").fetchall()
        for ns, mid in pending:
            if self._db.execute("SELECT 1 FROM items WHERE message_id = ?", (mid,)).fetchone() is None:
                try:
                    self.engine.delete(mid, **namespace_scope(tuple(json.loads(ns))))
                except KeyError:  # never added (the write failed first), or already gone
                    pass
            with self._db:
                self._db.execute("DELETE FROM pending WHERE namespace = ? AND message_id = ?", (ns, mid))


def _ns(namespace: tuple[str, ...]) -> str:
    return json.dumps(list(namespace), ensure_ascii=False)
