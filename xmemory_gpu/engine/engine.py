"""``MemoryEngine``: live memories over a store: add, search, delete and scope, batched across
users (DESIGN section 3b).

A memory is keyed by ``(user_id, agent_id, run_id)``; its store id is that key as a JSON array,
so ids with path or SQL characters are plain data (SQL is parameterised, file names are hashes).
Writes (``add``, ``add_batch``, ``delete``, ``delete_all``) are serialised and each is one atomic
store commit; the in-memory bank is updated under a write lock only after the commit succeeds, so
a search sees the state before or after a batch, never half of it. A second process that opens the
store for writing is refused (``write.lock``); ``read_only=True`` opens it for searching.

Deleting forgets: the memory is re-derived from its remaining messages (their stored embeddings;
statements re-extracted and re-embedded), so no episode, statement, theme summary or graph row
built from the deleted text survives; a deleted statement's hash is kept so re-derivation does not
bring it back; the database is written with ``secure_delete`` and vacuumed, and array files are
rewritten.
"""

from __future__ import annotations

import json
import math
import threading
import time
import uuid
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np

from ..config import XMemoryConfig, resolve_config
from ..construct.incremental import EngineState, empty_memory, grow, statement_hash
from ..construct.semantic import extract_statements
from ..embed import Embedder, embedder_for_store, load_embedder
from ..memory.bank import Bank
from ..memory.hierarchy import Memory, slice_from_memory
from ..memory.locks import ReadWriteLock, WriterLock
from ..memory.records import Conversation, Episode, Message
from ..memory.store import DB_NAME, Store
from ..ops._dispatch import encoder_device
from ..retrieve.result import RetrievalResult
from ..retrieve.retriever import Retriever, as_queries

MAX_ID_CHARS = 512


def scope_key(user_id: Any, agent_id: Any = None, run_id: Any = None) -> str:
    """The store id of a memory: its scope as a JSON array (an exact, unambiguous encoding)."""
    parts = []
    for name, v in (("user_id", user_id), ("agent_id", agent_id), ("run_id", run_id)):
        if v is None and name != "user_id":
            parts.append(None)
            continue
        if not isinstance(v, str) or not v or len(v) > MAX_ID_CHARS or "\x00" in v:
            raise ValueError(f"{name}: expected a non-empty string of at most {MAX_ID_CHARS} characters without NUL, got {v!r}")
        parts.append(v)
    return json.dumps(parts, ensure_ascii=False)


def scope_of(memory_id: str) -> dict[str, str | None]:
    user, agent, run = json.loads(memory_id)
    return {"user_id": user, "agent_id": agent, "run_id": run}


def _timestamp(v: Any, where: str) -> float | None:
    if v is None:
        return None
    if isinstance(v, bool):
        raise ValueError(f"{where}: timestamp: expected an ISO date-time or epoch seconds, got {v!r}")
    if isinstance(v, (int, float)):
        if not math.isfinite(v):
            raise ValueError(f"{where}: timestamp: expected finite epoch seconds, got {v!r}")
        return float(v)
    if isinstance(v, str):
        try:
            dt = datetime.fromisoformat(v.replace("Z", "+00:00"))
        except ValueError:
            raise ValueError(f"{where}: timestamp: expected an ISO date-time or epoch seconds, got {v!r}") from None
        if dt.tzinfo is None:
            from datetime import timezone

            dt = dt.replace(tzinfo=timezone.utc)
        return dt.timestamp()
    raise ValueError(f"{where}: timestamp: expected an ISO date-time or epoch seconds, got {type(v).__name__}")


def _text(d: dict, keys: tuple[str, ...], where: str) -> str:
    for k in keys:
        if k in d:
            v = d[k]
            if not isinstance(v, str):
                raise ValueError(f"{where}: {k}: expected a string, got {type(v).__name__}")
            try:
                v.encode("utf-8")
            except UnicodeEncodeError:
                raise ValueError(f"{where}: {k}: not valid Unicode text (lone surrogate)") from None
            return v
    raise ValueError(f"{where}: expected one of the fields {list(keys)}")


class MemoryEngine:
    """Live memories: ``add`` / ``add_batch`` / ``search`` / ``get_all`` / ``get`` / ``delete`` /
    ``delete_all`` / ``history``, scoped by ``(user_id, agent_id, run_id)``."""

    def __init__(self, store: Store, embedder: Embedder, config: XMemoryConfig, *, backend: str = "auto",
                 read_only: bool = False, lock: WriterLock | None = None) -> None:
        self.store = store
        self.embedder = embedder
        self.config = config
        self.backend = backend
        self.read_only = read_only
        self._lock = lock
        self._rw = ReadWriteLock()  # readers vs the (short) in-memory apply of a committed batch
        self._writer = threading.RLock()  # one write at a time; its heavy work runs outside the rw lock
        self.bank = store.load_bank()
        self.retriever = Retriever(self.bank, embedder, config, backend=backend)
        self._closed = False

    # -- opening and closing -----------------------------------------------------------------------
    @classmethod
    def open(cls, path: str | Path, *, embedder: Embedder | str | None = None, config: XMemoryConfig | None = None,
             backend: str = "auto", read_only: bool = False) -> MemoryEngine:
        """Create or reopen the store at ``path``. ``embedder``: an Embedder or a spec (default: the
        store's, or all-MiniLM-L6-v2 for a new store)."""
        root = Path(path)
        exists = (root / DB_NAME).exists()
        if read_only and not exists:
            raise FileNotFoundError(f"{root}: no store to open read-only")
        lock = None
        if not read_only:
            root.mkdir(parents=True, exist_ok=True)
            lock = WriterLock(root)
            lock.acquire()
        try:
            if exists:
                store = Store.open(root)
                cfg = config or resolve_config(store.config)
                device = encoder_device(backend, cfg.embed.device)
                if embedder is None:
                    emb = embedder_for_store(store.embedder, device=device)
                elif isinstance(embedder, str):
                    emb = load_embedder(embedder, device=device)
                else:
                    emb = embedder
                if emb.dim != store.dim or emb.name != store.embedder:
                    raise ValueError(f"{root}: embedder: the store was built with {store.embedder!r} ({store.dim}), "
                                     f"not {emb.name!r} ({emb.dim})")
                if not read_only:
                    store.collect_garbage()
            else:
                cfg = config or XMemoryConfig()
                device = encoder_device(backend, cfg.embed.device)
                emb = load_embedder(embedder or cfg.embed.model, device=device) if embedder is None or isinstance(embedder, str) else embedder
                store = Store.create(root, dim=emb.dim, embedder=emb.name, config=cfg.to_dict())
        except BaseException:
            if lock is not None:
                lock.release()
            raise
        return cls(store, emb, cfg, backend=backend, read_only=read_only, lock=lock)

    def close(self) -> None:
        if self._closed:
            return
        with self._rw.write():
            self.store.close()
            if self._lock is not None:
                self._lock.release()
            self._closed = True

    def flush(self) -> None:
        """Every write is committed when it returns; nothing is buffered (kept for mem0's API)."""
        self._check_open()

    def __enter__(self) -> MemoryEngine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _check_open(self, write: bool = False) -> None:
        if self._closed:
            raise RuntimeError("MemoryEngine: the engine is closed")
        if write and self.read_only:
            raise RuntimeError("MemoryEngine: opened read_only; open without read_only=True to write")

    # -- writing -----------------------------------------------------------------------------------
    def add(self, messages: Sequence[dict], *, user_id: str, agent_id: str | None = None, run_id: str | None = None) -> list[str]:
        """Add messages to one memory; returns their ids (given, or assigned)."""
        return self.add_batch([{"messages": messages, "user_id": user_id, "agent_id": agent_id, "run_id": run_id}])[0]

    def add_batch(self, items: Sequence[dict]) -> list[list[str]]:
        """Add messages to many memories at once: one embedding call for all new messages, one for
        all new statements, one kernel launch per stage, one atomic commit. Returns the ids per item."""
        self._check_open(write=True)
        if isinstance(items, dict) or not isinstance(items, Sequence):
            raise ValueError("add_batch: items: expected a list of {'messages': [...], 'user_id': ...}")
        with self._writer:
            keys, batches, ids_out = [], {}, []
            for n, item in enumerate(items):
                where = f"add_batch: items[{n}]"
                if not isinstance(item, dict):
                    raise ValueError(f"{where}: expected an object, got {type(item).__name__}")
                unknown = set(item) - {"messages", "user_id", "agent_id", "run_id"}
                if unknown:
                    raise ValueError(f"{where}: unknown fields {sorted(unknown)}")
                key = scope_key(item.get("user_id"), item.get("agent_id"), item.get("run_id"))
                msgs = item.get("messages")
                if isinstance(msgs, dict) or not isinstance(msgs, Sequence) or isinstance(msgs, str):
                    raise ValueError(f"{where}: messages: expected a list of message objects")
                keys.append(key)
                batches.setdefault(key, [])
                ids_out.append(self._parse(key, msgs, batches[key], where))
            if not batches:
                return ids_out
            mems = [self._current(k) for k in batches]
            grown = grow(mems, list(batches.values()), self.embedder, self.config, backend=self.backend)
            self._commit(grown, [(m.memory_id, "add", [x.id for x in batches[m.memory_id]]) for m in grown])
            return ids_out

    def _parse(self, key: str, msgs: Sequence[dict], out: list[Message], where: str) -> list[str]:
        b = self.bank.index.get(key)
        taken = set(self.bank.msg["id"][self.bank.msg.seg.rows(b)].tolist()) if b is not None else set()
        taken |= {m.id for m in out}
        last_session = int(self.bank.msg["session"][self.bank.msg.seg.rows(b)[-1]]) if b is not None and self.bank.msg.seg.lengths[b] else 0
        ids = []
        for j, d in enumerate(msgs):
            w = f"{where}: messages[{j}]"
            if not isinstance(d, dict):
                raise ValueError(f"{w}: expected an object, got {type(d).__name__}")
            unknown = set(d) - {"speaker", "role", "content", "text", "timestamp", "id", "session"}
            if unknown:
                raise ValueError(f"{w}: unknown fields {sorted(unknown)}")
            speaker = _text(d, ("speaker", "role"), w)
            text = _text(d, ("content", "text"), w)
            mid = d.get("id")
            if mid is None:
                mid = uuid.uuid4().hex
            elif not isinstance(mid, str) or not mid or len(mid) > MAX_ID_CHARS:
                raise ValueError(f"{w}: id: expected a non-empty string of at most {MAX_ID_CHARS} characters, got {mid!r}")
            if mid in taken:
                raise ValueError(f"{w}: id {mid!r} is already used in this memory")
            session = d.get("session", last_session)
            if isinstance(session, bool) or not isinstance(session, int) or session < 0:
                raise ValueError(f"{w}: session: expected an integer >= 0, got {session!r}")
            last_session = session
            taken.add(mid)
            out.append(Message(mid, speaker, text, session, _timestamp(d.get("timestamp"), w)))
            ids.append(mid)
        return ids

    def _current(self, key: str) -> Memory:
        b = self.bank.index.get(key)
        if b is None:
            return empty_memory(key, self.embedder.dim, self.config.knn.k_semantics)
        return self.bank.view(b)

    def _commit(self, memories: list[Memory], log: list[tuple[str, str, list[str]]], delete: list[str] = ()) -> None:
        """Store first (atomic), then the bank under the write lock: readers never see half a batch."""
        self.store.commit(memories, replace=True, delete=list(delete), log=log)
        slices = [slice_from_memory(m) for m in memories]
        with self._rw.write():
            for sl in slices:
                self.bank.put_slice(sl)
            if delete:
                keep = [b for b, m in enumerate(self.bank.memory_ids) if m not in set(delete)]
                self.bank = Bank.from_slices([self.bank.slice(b) for b in keep], self.bank.dim)
                self.retriever.bank = self.bank
            self.retriever._chunks = None  # naive-RAG chunks follow the messages

    def delete(self, unit_id: str, *, user_id: str | None = None, agent_id: str | None = None, run_id: str | None = None) -> None:
        """Forget one unit: a message id, ``episode:N`` or ``semantic:N`` (with the scope; a message id
        unique in the store needs none). Derived episodes, statements, themes and graphs follow."""
        self._check_open(write=True)
        with self._writer:
            key, kind, local = self._locate(unit_id, user_id, agent_id, run_id)
            mem = self.bank.view(self.bank.index[key])
            if kind == "message":
                drop = {local}
            elif kind == "episode":
                drop = set(mem.episodes[local].message_ids)
            else:
                drop = set()
            forgotten = list(EngineState.of(mem).forgotten)
            if kind == "semantic":
                forgotten += self._statement_hashes(mem, local)
            self._rederive([mem], [drop], [forgotten], op=("delete", [unit_id]))

    def _statement_hashes(self, mem: Memory, row: int) -> list[str]:
        """Hashes of every raw statement that became semantic node ``row``: its sources' statements
        closer to it than the de-duplication threshold (so re-derivation cannot bring it back)."""
        node = mem.semantics[row]
        src = [m for m in mem.messages if m.id in set(node.message_ids)]
        by_id = {m.id: e.id for e in mem.episodes for m in src if m.id in e.message_ids}
        eps = [Episode(eid, "", "", [m.id for m in src if by_id.get(m.id) == eid]) for eid in sorted(set(by_id.values()))]
        raw = extract_statements(Conversation(mem.memory_id, tuple((EngineState.of(mem).speakers + ("", ""))[:2]), src), eps,
                                 self.config.semantic)
        hashes = {statement_hash(node.text)}
        if raw:
            x = self.embedder.encode([r.text for r in raw])
            sims = x @ mem.sem_x[row]
            hashes |= {statement_hash(r.text) for r, s in zip(raw, sims) if s > self.config.semantic.dedup_threshold}
        return sorted(hashes)

    def _rederive(self, mems: list[Memory], drops: list[set[str]], forgotten: list[list[str]], op: tuple[str, list[str]]) -> None:
        empties, keep_msgs, keep_x = [], [], []
        for mem, drop, fg in zip(mems, drops, forgotten):
            rows = [i for i, m in enumerate(mem.messages) if m.id not in drop]
            st = EngineState.of(mem)
            e = empty_memory(mem.memory_id, self.embedder.dim, self.config.knn.k_semantics)
            e.stats["engine"]["forgotten"] = sorted(set(fg))
            e.stats["engine"]["speakers"] = list(st.speakers)
            empties.append(e)
            keep_msgs.append([mem.messages[i] for i in rows])
            keep_x.append(mem.msg_x[rows])
        grown = grow(empties, keep_msgs, self.embedder, self.config, new_x=keep_x, backend=self.backend)
        self._commit(grown, [(m.memory_id, op[0], op[1]) for m in grown])
        self.store.vacuum()

    def delete_all(self, *, user_id: str, agent_id: str | None = None, run_id: str | None = None) -> int:
        """Forget a whole memory; returns the number of messages it held (0 if none)."""
        self._check_open(write=True)
        key = scope_key(user_id, agent_id, run_id)
        with self._writer:
            b = self.bank.index.get(key)
            if b is None:
                return 0
            n = int(self.bank.msg.seg.lengths[b])
            self._commit([], [(key, "delete_all", [])], delete=[key])
            self.store.vacuum()
            return n

    # -- reading -----------------------------------------------------------------------------------
    def search(self, query_or_queries: str | Sequence[str], *, user_id: str, agent_id: str | None = None,
               run_id: str | None = None, strategy: str = "xmemory", budget_tokens: int | None = None) -> list[RetrievalResult]:
        """One ``RetrievalResult`` per query against this scope's memory (empty results when the
        scope holds nothing)."""
        self._check_open()
        queries = as_queries(query_or_queries, "query_or_queries")
        key = scope_key(user_id, agent_id, run_id)
        with self._rw.read():
            if key not in self.bank.index:
                self.retriever.search([], [], strategy=strategy, budget_tokens=budget_tokens)  # validates the arguments
                return [RetrievalResult(q, key, strategy, [], "", 0, self.retriever.budget.name, notes=["no memory for this scope"])
                        for q in queries]
            return self.retriever.search(queries, key, strategy=strategy, budget_tokens=budget_tokens)

    def search_batch(self, items: Sequence[dict]) -> list[list[RetrievalResult]]:
        """Many searches at once (the server's coalescing): items ``{"queries": [...] | "query": str,
        "user_id", "agent_id"?, "run_id"?, "strategy"?, "budget_tokens"?}``. Queries of every item
        with the same strategy and budget go to one batched ``Retriever.search`` (one embedding call,
        one launch per stage), each query against its own scope. Returns results per item."""
        self._check_open()
        parsed = []
        for n, it in enumerate(items):
            where = f"search_batch: items[{n}]"
            if not isinstance(it, dict):
                raise ValueError(f"{where}: expected an object")
            qs = as_queries(it["queries"] if "queries" in it else it.get("query", ""), f"{where}: queries")
            key = scope_key(it.get("user_id"), it.get("agent_id"), it.get("run_id"))
            parsed.append((qs, key, it.get("strategy", "xmemory"), it.get("budget_tokens")))
        out: list[list[RetrievalResult] | None] = [None] * len(parsed)
        with self._rw.read():
            groups: dict[tuple, list[int]] = {}
            for n, (_, _, strategy, budget) in enumerate(parsed):
                groups.setdefault((strategy, budget), []).append(n)
            for (strategy, budget), members in groups.items():
                self.retriever.search([], [], strategy=strategy, budget_tokens=budget)  # validates both
                live = [n for n in members if parsed[n][1] in self.bank.index]
                qs = [q for n in live for q in parsed[n][0]]
                mids = [parsed[n][1] for n in live for _ in parsed[n][0]]
                res = iter(self.retriever.search(qs, mids, strategy=strategy, budget_tokens=budget) if qs else [])
                for n in members:
                    if n in live:
                        out[n] = [next(res) for _ in parsed[n][0]]
                    else:
                        out[n] = [RetrievalResult(q, parsed[n][1], strategy, [], "", 0, self.retriever.budget.name,
                                                  notes=["no memory for this scope"]) for q in parsed[n][0]]
        return out  # type: ignore[return-value]

    def get_all(self, *, user_id: str, agent_id: str | None = None, run_id: str | None = None) -> list[dict]:
        """Every unit of the scope's memory: messages, episodes, semantic statements, themes."""
        self._check_open()
        key = scope_key(user_id, agent_id, run_id)
        with self._rw.read():
            b = self.bank.index.get(key)
            return [] if b is None else _units(self.bank.view(b))

    def get(self, unit_id: str, *, user_id: str | None = None, agent_id: str | None = None, run_id: str | None = None) -> dict:
        self._check_open()
        with self._rw.read():
            key, kind, local = self._locate(unit_id, user_id, agent_id, run_id)
            mem = self.bank.view(self.bank.index[key])
            ref = local if kind == "message" else f"{kind}:{local}"
            return next(u for u in _units(mem) if u["id"] == ref)

    def history(self, *, user_id: str, agent_id: str | None = None, run_id: str | None = None) -> list[dict]:
        self._check_open()
        with self._rw.read():
            return self.store.history(scope_key(user_id, agent_id, run_id))

    def scopes(self) -> list[dict[str, str | None]]:
        with self._rw.read():
            return [scope_of(m) for m in self.bank.memory_ids]

    def _locate(self, unit_id: str, user_id, agent_id, run_id) -> tuple[str, str, Any]:
        """(memory key, kind, local id): ``episode:N`` / ``semantic:N`` need the scope; a message id
        without a scope must name exactly one message of the store."""
        if not isinstance(unit_id, str) or not unit_id:
            raise ValueError(f"unit_id: expected a non-empty string, got {unit_id!r}")
        kind, _, num = unit_id.partition(":")
        if user_id is None:
            if kind in ("episode", "semantic") and num.isdigit():
                raise ValueError(f"unit_id {unit_id!r}: episode and semantic ids need user_id (and agent_id, run_id)")
            rows = np.flatnonzero(self.bank.msg["id"][: self.bank.msg.seg.size] == unit_id)
            owners = sorted({int(b) for b in self.bank.msg.seg.memory_of(rows) if b >= 0})
            if len(owners) != 1:
                raise KeyError(f"unit {unit_id!r}: {'no such message' if not owners else 'ambiguous: give user_id'}")
            return self.bank.memory_ids[owners[0]], "message", unit_id
        key = scope_key(user_id, agent_id, run_id)
        b = self.bank.index.get(key)
        if b is None:
            raise KeyError(f"unit {unit_id!r}: no memory for this scope")
        mem_view_sizes = {"episode": int(self.bank.epi.seg.lengths[b]), "semantic": int(self.bank.sem.seg.lengths[b])}
        if kind in mem_view_sizes and num.isdigit():
            if int(num) >= mem_view_sizes[kind]:
                raise KeyError(f"unit {unit_id!r}: this memory has {mem_view_sizes[kind]} {kind} units")
            return key, kind, int(num)
        if unit_id not in set(self.bank.msg["id"][self.bank.msg.seg.rows(b)].tolist()):
            raise KeyError(f"unit {unit_id!r}: no such message in this memory")
        return key, "message", unit_id

    def stats(self) -> dict[str, Any]:
        with self._rw.read():
            return {"memories": self.bank.n_memories, "messages": int(self.bank.msg.seg.lengths.sum()),
                    "semantics": int(self.bank.sem.seg.lengths.sum()), "themes": int(self.bank.theme.seg.lengths.sum()),
                    "time": time.time()}


def _units(mem: Memory) -> list[dict]:
    out = [{"id": m.id, "type": "message", "speaker": m.speaker, "text": m.text, "timestamp": m.timestamp} for m in mem.messages]
    out += [{"id": f"episode:{e.id}", "type": "episode", "title": e.title, "text": e.text, "message_ids": e.message_ids,
             "timestamp": e.start} for e in mem.episodes]
    out += [{"id": f"semantic:{s.id}", "type": "semantic", "text": s.text, "message_ids": s.message_ids, "timestamp": s.timestamp}
            for s in mem.semantics]
    out += [{"id": f"theme:{t.id}", "type": "theme", "text": t.summary} for t in mem.themes]
    return out
