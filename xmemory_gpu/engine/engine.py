"""``MemoryEngine``: live memories over a store: add, search, update, delete and scope, batched
across users, with mem0's names (``metadata`` / ``filters``: ``engine.metadata``; ``limit`` /
``threshold``: ``engine.results``; ``update``, ``reset``).

A memory is keyed by ``(user_id, agent_id, run_id)``; its store id is that key as a JSON array,
so ids with path or SQL characters are plain data (SQL is parameterised, file names are hashes).
Writes (``add``, ``add_batch``, ``delete``, ``delete_all``) are serialised and each is one atomic
store commit; the in-memory bank is updated under a write lock only after the commit succeeds, so
a search sees the state before or after a batch, never half of it. A second process that opens the
store for writing is refused (``write.lock``); ``read_only=True`` opens it for searching.

Deleting forgets: the memory is re-derived from its remaining messages (their stored embeddings;
statements re-extracted and re-embedded), so no episode, statement, theme summary or graph row
built from the deleted text survives; a deleted statement's hash is kept so re-derivation does not
bring it back; the memory's file is rewritten and the old one removed, and the catalogue is
written with ``secure_delete`` (compacted once a quarter of it is free: ``Store.maybe_compact``). A deleted message's id leaves the operations log (its deletion is logged with a digest
of the id); ``delete_all`` erases the scope's log but for one ``delete_all`` entry.

Unit ids: a message keeps the id it was added with (an id shaped like a derived unit's,
``episode:N`` / ``semantic:N`` / ``theme:N``, is refused); derived ids are stable across growth and
re-derivation (``engine.ids``), and every id ``get_all`` lists or a search result carries works with
``get`` and ``delete``. Input is bounded (``engine.inputs``: ``Limits``, timestamps within years
1-9999, sessions within int64). A memory that fails to load is quarantined, not fatal.
"""

from __future__ import annotations

import hashlib
import os
import threading
import time
import uuid
from collections.abc import Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from .. import ops
from ..config import XMemoryConfig, resolve_config
from ..construct.incremental import EngineState, empty_memory, grow, statement_hash
from ..construct.passages import store_passages
from ..construct.pipeline import theme_summary
from ..construct.segment import MessageVectors, embed_messages
from ..construct.semantic import extract_statements
from ..construct.supersede import supersessions
from ..embed import Embedder, embedder_for_store, load_embedder
from ..llm import Reader, load_reader
from ..memory.backend import MemoryBackend
from ..memory.bank import Bank
from ..memory.hierarchy import Memory, slice_from_memory, view
from ..memory.locks import ReadWriteLock, WriterLock
from ..memory.records import Conversation, Episode, Message
from ..memory.store import DB_NAME, Store, StoreError
from ..memory.subset import restrict
from ..ops.devices import encoder_device
from ..retrieve.context import semantic_unit
from ..retrieve.result import RetrievalResult, RetrievedUnit
from ..retrieve.retriever import Retriever
from . import ids as unit_ids
from . import inputs, people
from . import metadata as meta
from .inputs import MAX_ID_CHARS, Limits, scope_key, scope_of
from .residency import Residency, slice_bytes
from .results import (
    check_limit,
    check_threshold,
    gate_for,
    limit_units,
    mark_relevance,
    no_answer,
    show_current,
)

__all__ = ["MAX_ID_CHARS", "Limits", "MemoryEngine", "QuarantinedError", "scope_key", "scope_of"]


class QuarantinedError(RuntimeError):
    """A request for a memory that failed to load when the engine opened (damaged); names it."""


SEARCH_ITEM_FIELDS = frozenset({"queries", "query", "user_id", "agent_id", "run_id", "strategy", "budget_tokens", "limit",
                                "threshold", "filters"})
ADD_ITEM_FIELDS = frozenset({"messages", "user_id", "agent_id", "run_id", "metadata", "user_name"})
MESSAGE_FIELDS = frozenset({"speaker", "role", "name", "content", "text", "timestamp", "id", "session"})
USER_NAME = "user_name"  # stats key: the name role "user" messages are attributed to
STAMPED = "stamped"  # stats key: ids of the messages the engine stamped with their arrival time
SUPERSEDED = "superseded"  # stats key: semantic id -> [the semantic id that superseded it, its time]

class MemoryEngine:
    """Live memories: ``add`` / ``add_batch`` / ``search`` / ``get_all`` / ``get`` / ``delete`` /
    ``delete_all`` / ``history``, scoped by ``(user_id, agent_id, run_id)``.

    A memory that fails to load when the engine opens (a damaged arrays file) is quarantined: the
    others load and serve, ``quarantined`` names it and why, and every request for it raises
    ``QuarantinedError`` (``delete_all`` removes it). ``limits`` bounds the size of a write."""

    def __init__(self, store: MemoryBackend, embedder: Embedder, config: XMemoryConfig, *, backend: str = "auto",
                 read_only: bool = False, lock: WriterLock | None = None, limits: Limits | None = None,
                 stamp_arrival: bool = True, reader: Reader | None = None, max_resident_bytes: int | None = None) -> None:
        self.store = store
        self.stamp_arrival = stamp_arrival
        self.embedder = embedder
        self.config = config
        self.backend = backend
        self.read_only = read_only
        self.limits = limits or Limits()
        self._lock = lock
        self._rw = ReadWriteLock()  # readers vs the (short) in-memory apply of a committed batch
        self._writer = threading.RLock()  # one write at a time; its heavy work runs outside the rw lock
        self._residency = None if max_resident_bytes is None else Residency(max_resident_bytes)
        self._res_lock = threading.RLock()  # loads, pins and evictions (taken after _writer, before _rw)
        self._res_cond = threading.Condition(self._res_lock)  # a write section ended
        self._write_owner: int | None = None  # the thread inside a write section (residency only)
        if self._residency is None:
            self.bank = store.load_bank(quarantine=True)
            self.quarantined: dict[str, str] = dict(store.quarantined)
        else:  # the catalogue only: memories load on first touch
            self.bank = Bank.from_slices([], store.dim)
            self.quarantined = {}
        self._loaded = store.versions()
        self.retriever = Retriever(self.bank, embedder, config, backend=backend, reader=reader)
        self._closed = False
        self._warm_up()

    def _warm_up(self) -> None:
        """What the first add or search would otherwise set up lazily (kernel backends probed, the
        embedder's first call), so the first request costs what the next ones do."""
        ops.available_backends()
        self.embedder.encode(["warm up"])

    # -- opening and closing -----------------------------------------------------------------------
    @classmethod
    def open(cls, path: str | Path | MemoryBackend, *, embedder: Embedder | str | None = None, config: XMemoryConfig | None = None,
             backend: str = "auto", read_only: bool = False, limits: Limits | None = None,
             stamp_arrival: bool = True, reader: Reader | str | None = None,
             max_resident_bytes: int | None = None) -> MemoryEngine:
        """Create or reopen the store at ``path`` (a folder; or a ``MemoryBackend`` such as
        ``InMemoryBackend``, used as it is: no writer lock, no upgrade). ``embedder``: an Embedder or
        a spec (default: the store's, or all-MiniLM-L6-v2 for a new store). ``read_only``: searching only; ``refresh()``
        loads what writers committed since. ``stamp_arrival``: a message added without a timestamp
        gets the time it arrived (UTC), and ``get_all`` says so (``"timestamp_source": "arrival"``).
        ``reader``: a ``Reader`` or a spec (``hf:PATH``, ``vllm:MODEL``, ``openai:URL#MODEL``,
        ``smollm2``; ``llm.load_reader``): live searches run Stage II's uncertainty gate with it (its
        probes batched across the queries of a ``search_batch``); without one, episodes are admitted
        by priority and results say so. ``max_resident_bytes``: keep at most about this many bytes of
        memories in RAM (``engine/residency.py``): opening reads the catalogue only, a memory loads
        on first touch and the least recently used go when the budget is passed (default: every
        memory resident, loaded at open)."""
        if isinstance(reader, str):
            reader = load_reader(reader)
        if not isinstance(path, (str, os.PathLike)):
            cfg = config or resolve_config(path.config)
            emb = _embedder_for(path, embedder, cfg, backend)
            return cls(path, emb, cfg, backend=backend, read_only=read_only, limits=limits, stamp_arrival=stamp_arrival,
                       reader=reader, max_resident_bytes=max_resident_bytes)
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
                emb = _embedder_for(store, embedder, cfg, backend)
                if not read_only:
                    store.upgrade()  # a store of an earlier schema is upgraded by its first writable open
                    store_passages(store, emb, cfg.semantic.passage_words)  # format 3 memories get their passages
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
        try:
            return cls(store, emb, cfg, backend=backend, read_only=read_only, lock=lock, limits=limits,
                       stamp_arrival=stamp_arrival, reader=reader, max_resident_bytes=max_resident_bytes)
        except BaseException:
            store.close()
            if lock is not None:
                lock.release()
            raise

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

    def refresh(self) -> list[str]:
        """Load what other processes committed since this engine opened or last refreshed (a
        ``read_only`` engine sees no later write without it): memories added, changed or deleted.
        Returns the memory ids that changed."""
        self._check_open()
        with self._writer, self._res_lock:
            now = self.store.versions()
            changed = [m for m, f in now.items() if self._loaded.get(m) != f]
            gone = [m for m in self._loaded if m not in now]
            if not changed and not gone:
                return []
            slices, quarantined = [], {m: r for m, r in self.quarantined.items() if m in now and m not in changed}
            for m in changed:
                if self._residency is not None and m not in self.bank.index:
                    continue  # not resident: its next load reads the new version
                try:
                    slices.append(self.store.get_slice(m))
                except (StoreError, KeyError) as exc:
                    quarantined[m] = str(exc.args[0] if isinstance(exc, KeyError) else exc)
            with self._rw.write():
                for sl in slices:
                    self.bank.put_slice(sl)
                    self._note_resident(sl)
                self._drop(set(gone) | (set(quarantined) & set(self.bank.index)))
                self.retriever._chunks = None
                self.quarantined = quarantined
                self._loaded = now
            return sorted(set(changed) | set(gone))

    # -- residency (``max_resident_bytes``) ---------------------------------------------------------
    def _note_resident(self, sl) -> None:
        if self._residency is not None:
            self._residency.note(sl.memory_id, slice_bytes(sl))

    def _drop(self, keys: set[str]) -> None:
        """Take ``keys`` out of the bank (caller holds the rw write lock)."""
        gone = keys & set(self.bank.index)
        if gone:
            self.bank = self.bank.without(gone)
            self.retriever.bank = self.bank
            self.retriever._chunks = None
        if self._residency is not None:
            self._residency.forget(keys)

    def _evict(self) -> None:
        """Drop least recently used unpinned memories while over the budget (caller holds _res_lock).
        Not while another thread's write section runs: the writer reads the bank's memory numbers
        outside the rw lock, and an eviction renumbers them (its section's end evicts)."""
        if self._write_owner not in (None, threading.get_ident()):
            return
        victims = self._residency.victims() if self._residency is not None else []
        if victims:
            with self._rw.write():
                self._drop(set(victims))

    def _load(self, key: str):
        """Memory ``key``'s slice from the store; read again once if it fails, as a writer in another
        process may have replaced its file between the catalogue read and the file read."""
        try:
            return self.store.get_slice(key)
        except (StoreError, KeyError):
            return self.store.get_slice(key)

    @contextmanager
    def _write_section(self):
        """A write's span under a residency budget: no other thread loads or evicts a memory until it
        ends (the write reads the bank's memory numbers outside the rw lock); then it evicts."""
        if self._residency is None:
            yield
            return
        with self._res_lock:
            self._write_owner = threading.get_ident()
        try:
            yield
        finally:
            with self._res_lock:
                self._write_owner = None
                self._res_cond.notify_all()
                self._evict()

    @contextmanager
    def _using(self, keys: Sequence[str]):
        """Memories ``keys`` resident (loaded from the store if need be) and pinned for the block; a
        memory that fails to load is quarantined. Without a budget every memory is resident already."""
        if self._residency is None:
            yield
            return
        keys = list(dict.fromkeys(keys))
        with self._res_lock:
            self._residency.pin(keys)
            try:
                def missing() -> list[str]:
                    return [k for k in keys if k not in self.bank.index and k in self._loaded and k not in self.quarantined]

                # a load changes the bank a writer reads outside the rw lock: it waits for the write section
                while missing() and self._write_owner not in (None, threading.get_ident()):
                    self._res_cond.wait()
                slices = []
                for k in missing():
                    try:
                        slices.append(self._load(k))
                    except (StoreError, KeyError) as exc:
                        self.quarantined[k] = str(exc.args[0] if isinstance(exc, KeyError) else exc)
                if slices:
                    with self._rw.write():
                        for sl in slices:
                            self.bank.put_slice(sl)
                            self._note_resident(sl)
                self._residency.touch(keys)
                self._evict()
            except BaseException:
                self._residency.unpin(keys)
                raise
        try:
            yield
        finally:
            with self._res_lock:
                self._residency.unpin(keys)
                self._evict()

    def _usable(self, key: str) -> str:
        """``key``, unless its memory is quarantined."""
        if key in self.quarantined:
            raise QuarantinedError(f"memory {key}: quarantined, it failed to load "
                                   f"({self.quarantined[key]}); the other memories are served; delete_all removes it")
        return key

    # -- writing -----------------------------------------------------------------------------------
    def add(self, messages: Sequence[dict], *, user_id: str, agent_id: str | None = None, run_id: str | None = None,
            metadata: dict | None = None, user_name: str | None = None) -> list[str]:
        """Add messages to one memory; returns their ids (given, or assigned).

        A message is ``{"role" | "speaker", "content" | "text", "name"?, "timestamp"?, "id"?,
        "session"?}``. ``metadata``: a JSON object stored with each of these messages (``get_all``
        returns it, ``filters`` select by it). Who speaks: a message's ``name``, else its
        ``speaker``, else its role, where role ``user`` is the memory's user name when one was
        given (``user_name`` here or at an earlier add; it is remembered)."""
        item = {"messages": messages, "user_id": user_id, "agent_id": agent_id, "run_id": run_id}
        item |= {k: v for k, v in (("metadata", metadata), ("user_name", user_name)) if v is not None}
        return self.add_batch([item])[0]

    def add_batch(self, items: Sequence[dict]) -> list[list[str]]:
        """Add messages to many memories at once: one embedding call for all new messages, one for
        all new statements, one kernel launch per stage, one atomic commit. Returns the ids per item.
        Sizes are bounded by ``limits`` (checked before any work)."""
        self._check_open(write=True)
        if isinstance(items, dict) or not isinstance(items, Sequence):
            raise ValueError("add_batch: items: expected a list of {'messages': [...], 'user_id': ...}")
        lim = self.limits
        if len(items) > lim.max_items:
            raise ValueError(f"add_batch: items: {len(items)} items, more than the limit of {lim.max_items}")
        with self._writer, self._write_section(), self._using(_item_keys(items)):
            keys, batches, ids_out, total = [], {}, [], 0
            added: dict[str, dict[str, dict]] = {}  # memory -> message id -> metadata
            names: dict[str, str] = {}  # memory -> user name given now
            stamped: dict[str, list[str]] = {}  # memory -> ids stamped with their arrival time
            now = time.time()  # the arrival time of every message of the call
            for n, item in enumerate(items):
                where = f"add_batch: items[{n}]"
                if not isinstance(item, dict):
                    raise ValueError(f"{where}: expected an object, got {type(item).__name__}")
                unknown = set(item) - ADD_ITEM_FIELDS
                if unknown:
                    raise ValueError(f"{where}: unknown fields {sorted(unknown)}")
                key = self._usable(scope_key(item.get("user_id"), item.get("agent_id"), item.get("run_id")))
                msgs = item.get("messages")
                if isinstance(msgs, dict) or not isinstance(msgs, Sequence) or isinstance(msgs, str):
                    raise ValueError(f"{where}: messages: expected a list of message objects")
                if len(msgs) > lim.max_messages:
                    raise ValueError(f"{where}: messages: {len(msgs)} messages, more than the limit of {lim.max_messages} "
                                     "per memory per call (add them in several calls)")
                total += len(msgs)
                if total > lim.max_batch_messages:
                    raise ValueError(f"{where}: messages: more than {lim.max_batch_messages} messages in one add_batch "
                                     "(add them in several calls)")
                md = meta.metadata(item.get("metadata"), f"{where}: metadata")
                name = None if item.get("user_name") is None else inputs.check_id(item["user_name"], f"{where}: user_name")
                if name is not None:
                    names[key] = name
                keys.append(key)
                batches.setdefault(key, [])
                ids_out.append(self._parse(key, msgs, batches[key], where, names.get(key) or self._user_name(key), stamped, now,
                                           names))
                if md is not None:
                    added.setdefault(key, {}).update(dict.fromkeys(ids_out[-1], md))
            if not batches:
                return ids_out
            mems = [self._current(k) for k in batches]
            grown = grow(mems, list(batches.values()), self.embedder, self.config, backend=self.backend)
            for old, new in zip(mems, grown):
                unit_ids.assign(old, new, set(), rederived=False)
                _carry(old, new, set(), added.get(old.memory_id, {}), names.get(old.memory_id),
                       stamped.get(old.memory_id, []), rederived=False)
            self._commit(grown, [(m.memory_id, "add", [x.id for x in batches[m.memory_id]]) for m in grown])
            # a name learned now for a memory that called its user "the user": its earlier turns are
            # the named person's too (statements and questions then use one name); a second commit
            named = [(view(self.bank, self.bank.index[m.memory_id]), names[m.memory_id]) for m, old in zip(grown, mems)
                     if names.get(m.memory_id) and not old.stats.get(USER_NAME)
                     and any(x.speaker == people.NEUTRAL for x in m.messages)]
            for mem, name in named:
                self._rederive([mem], [set()], [list(EngineState.of(mem).forgotten)], op=("name", []),
                               rename={people.NEUTRAL: name})
            return ids_out

    def _user_name(self, key: str) -> str | None:
        b = self.bank.index.get(key)
        return None if b is None else self.bank.stats[b].get(USER_NAME)

    def _parse(self, key: str, msgs: Sequence[dict], out: list[Message], where: str, user_name: str | None,
               stamped: dict[str, list[str]], now: float, names: dict[str, str]) -> list[str]:
        b = self.bank.index.get(key)
        taken = set(self.bank.msg["id"][self.bank.msg.seg.rows(b)].tolist()) if b is not None else set()
        taken |= {m.id for m in out}
        last_session = int(self.bank.msg["session"][self.bank.msg.seg.rows(b)[-1]]) if b is not None and self.bank.msg.seg.lengths[b] else 0
        ids = []
        for j, d in enumerate(msgs):
            w = f"{where}: messages[{j}]"
            if not isinstance(d, dict):
                raise ValueError(f"{w}: expected an object, got {type(d).__name__}")
            unknown = set(d) - MESSAGE_FIELDS
            if unknown:
                raise ValueError(f"{w}: unknown fields {sorted(unknown)}")
            speaker = inputs.text(d, ("speaker", "role"), w, MAX_ID_CHARS)
            if "speaker" not in d:  # other frameworks' names of the two chat roles (LangChain, Gemini)
                speaker = people.ROLE_ALIASES.get(speaker.lower(), speaker)
            text = inputs.text(d, ("content", "text"), w, self.limits.max_text_chars)
            if d.get("name") is not None:
                speaker = inputs.check_id(d["name"], f"{w}: name")
            elif "speaker" not in d and speaker == "user":  # the memory's subject (engine.people)
                user_name = user_name or people.introduced_name(text)
                if user_name and not names.get(key):
                    names[key] = user_name
                speaker = user_name or people.NEUTRAL
            mid = uuid.uuid4().hex if d.get("id") is None else inputs.message_id(d["id"], w)
            if mid in taken:
                raise ValueError(f"{w}: id {mid!r} is already used in this memory")
            session = inputs.session(d.get("session", last_session), w)
            last_session = session
            taken.add(mid)
            ts = inputs.timestamp(d.get("timestamp"), w)
            if ts is None and self.stamp_arrival:
                ts = now
                stamped.setdefault(key, []).append(mid)
            out.append(Message(mid, speaker, text, session, ts))
            ids.append(mid)
        return ids

    def _current(self, key: str) -> Memory:
        b = self.bank.index.get(key)
        if b is None:
            return empty_memory(key, self.embedder.dim, self.config.knn.k_semantics)
        return view(self.bank, b)

    def _commit(self, memories: list[Memory], log: list[tuple[str, str, list[str]]], delete: list[str] = (),
                redact: dict[str, set[str]] | None = None) -> None:
        """Store first (atomic), then the bank under the write lock: readers never see half a batch."""
        slices = [slice_from_memory(m) for m in memories]
        self.store.commit(slices, replace=True, delete=list(delete), log=log, redact=redact)
        files = self.store.versions([sl.memory_id for sl in slices])
        with self._res_lock, self._rw.write():
            for sl in slices:
                self.bank.put_slice(sl)
                self._note_resident(sl)
            self._drop(set(delete))
            for m in delete:
                self.quarantined.pop(m, None)
                self._loaded.pop(m, None)
            self.retriever._chunks = None  # naive-RAG chunks follow the messages
            self._loaded.update(files)

    def delete(self, unit_id: str, *, user_id: str | None = None, agent_id: str | None = None, run_id: str | None = None) -> None:
        """Forget one unit: a message id, ``episode:N``, ``semantic:N`` or ``theme:N`` (its
        statements) with the scope (a message id unique in the store needs none). Derived
        episodes, statements, themes and graphs follow. The message ids it removes leave the
        operations log too; the log keeps the deletion with a digest of a deleted message's id."""
        self._check_open(write=True)
        with self._writer, self._write_section(), self._using(self._owner(unit_id, user_id, agent_id, run_id)):
            key, kind, row = self._locate(unit_id, user_id, agent_id, run_id)
            mem = view(self.bank, self.bank.index[key])
            drop: set[str] = set()
            forgotten = list(EngineState.of(mem).forgotten)
            if kind == "message":
                drop = {unit_id}
                logged = "message sha256:" + hashlib.sha256(unit_id.encode()).hexdigest()[:16]
            else:
                logged = unit_id
                if kind == "episode":
                    drop = set(mem.episodes[row].message_ids)
                elif kind == "semantic":
                    forgotten += self._statement_hashes(mem, row)
                else:
                    for r in np.flatnonzero(mem.theme_of == row).tolist():
                        forgotten += self._statement_hashes(mem, r)
            self._rederive([mem], [drop], [forgotten], op=("delete", [logged]))

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

    def _rederive(self, mems: list[Memory], drops: list[set[str]], forgotten: list[list[str]], op: tuple[str, list[str]],
                  texts: dict[str, str] | None = None, rename: dict[str, str] | None = None) -> None:
        """Re-derive each memory from its messages but the dropped ones; ``texts`` (message id ->
        text) replaces the text of messages and ``rename`` (speaker -> speaker) their speakers (both
        embedded again)."""
        empties, keep_msgs, keep_x = [], [], []
        texts, rename = texts or {}, rename or {}
        for mem, drop, fg in zip(mems, drops, forgotten):
            rows = [i for i, m in enumerate(mem.messages) if m.id not in drop]
            st = EngineState.of(mem)
            e = empty_memory(mem.memory_id, self.embedder.dim, self.config.knn.k_semantics)
            e.stats["engine"]["forgotten"] = sorted(set(fg))
            e.stats["engine"]["speakers"] = [rename.get(sp, sp) for sp in st.speakers]
            empties.append(e)
            msgs = [mem.messages[i] for i in rows]
            x = MessageVectors(mem.msg_x, mem.psg_x, mem.psg_msg).take(np.asarray(rows, np.int64))
            changed = [j for j, m in enumerate(msgs) if m.id in texts or m.speaker in rename]
            if changed:
                msgs = [Message(m.id, rename.get(m.speaker, m.speaker), texts.get(m.id, m.text), m.session, m.timestamp)
                        for m in msgs]
                x = _replace_rows(x, changed, embed_messages(self.embedder, [msgs[j] for j in changed],
                                                             self.config.semantic.passage_words))
            keep_msgs.append(msgs)
            keep_x.append(x)
        grown = grow(empties, keep_msgs, self.embedder, self.config, new_x=keep_x, backend=self.backend)
        for old, new, drop in zip(mems, grown, drops):
            unit_ids.assign(old, new, drop, rederived=True)
            _carry(old, new, drop, {}, None, [], rederived=True)
        self._commit(grown, [(m.memory_id, op[0], op[1]) for m in grown],
                     redact={m.memory_id: drop for m, drop in zip(mems, drops) if drop})

    def delete_all(self, *, user_id: str, agent_id: str | None = None, run_id: str | None = None) -> int:
        """Forget a whole memory and its operations log (one ``delete_all`` entry with no ids
        stays); returns the number of messages it held (0 if none). A quarantined memory is
        removed too."""
        self._check_open(write=True)
        key = scope_key(user_id, agent_id, run_id)
        with self._writer, self._write_section():
            b = self.bank.index.get(key)
            if key not in self._loaded and key not in self.quarantined:
                return 0
            n = int(self.bank.msg.seg.lengths[b]) if b is not None else self.store.counts(key)["msg"]
            self._commit([], [(key, "delete_all", [])], delete=[key])
            self.store.maybe_compact()
            return n

    def update(self, unit_id: str, text: str, *, user_id: str | None = None, agent_id: str | None = None,
               run_id: str | None = None) -> dict:
        """Give a message new text (mem0's ``update``): what was derived from the old text is derived
        again, as after a delete, and the old text leaves the store. Derived units (``semantic:N``,
        ...) are not edited: update the message they came from. Returns the updated message."""
        self._check_open(write=True)
        new = inputs.text({"text": text}, ("text",), "update", self.limits.max_text_chars)
        with self._writer, self._write_section(), self._using(self._owner(unit_id, user_id, agent_id, run_id)):
            key, kind, _ = self._locate(unit_id, user_id, agent_id, run_id)
            if kind != "message":
                raise ValueError(f"update: {unit_id!r} is a derived {kind}; update the messages it came from "
                                 "(its message_ids) or delete it")
            mem = view(self.bank, self.bank.index[key])
            self._rederive([mem], [set()], [list(EngineState.of(mem).forgotten)], op=("update", [unit_id]),
                           texts={unit_id: new})
            unit = self._message_unit(key, unit_id)
        return unit

    def _message_unit(self, key: str, mid: str) -> dict:
        with self._rw.read():
            mem = view(self.bank, self.bank.index[key])
            return next(u for u in _units(mem) if u["type"] == "message" and u["id"] == mid)

    def reset(self) -> int:
        """Forget every memory of the store (mem0's ``reset``), each as ``delete_all`` would; returns
        the number of memories removed."""
        self._check_open(write=True)
        with self._writer, self._write_section():
            keys = sorted(set(self._loaded) | set(self.quarantined))
            if not keys:
                return 0
            self._commit([], [(k, "reset", []) for k in keys], delete=keys)
            self.store.maybe_compact()
            return len(keys)

    # -- reading -----------------------------------------------------------------------------------
    def search(self, query_or_queries: str | Sequence[str], *, user_id: str, agent_id: str | None = None,
               run_id: str | None = None, strategy: str = "xmemory", budget_tokens: int | None = None,
               limit: int | None = None, threshold: float | None = None, filters: dict | None = None) -> list[RetrievalResult]:
        """One ``RetrievalResult`` per query against this scope's memory (empty results when the
        scope holds nothing). Every unit id a result carries works with ``get`` and ``delete``
        (``semantic:N``, ``episode:N``, ``theme:N``, a message id), except naive-RAG chunks and
        TIR sessions, which are views over the messages their ``message_ids`` name.

        mem0's options: ``filters`` (metadata equality, ``engine.metadata``) restricts the memory
        before retrieval: only units all of whose source messages match are candidates;
        ``threshold`` leaves out units less relevant than it (a cosine), ``limit`` keeps the
        ``limit`` most relevant (``engine.results``); the context shows the kept units only."""
        self._check_open()
        queries = inputs.queries(query_or_queries, "query_or_queries")
        item = {"queries": queries, "user_id": user_id, "agent_id": agent_id, "run_id": run_id, "strategy": strategy,
                "budget_tokens": budget_tokens, "limit": limit, "threshold": threshold, "filters": filters}
        return self.search_batch([item])[0]

    def search_batch(self, items: Sequence[dict]) -> list[list[RetrievalResult]]:
        """Many searches at once (the server's coalescing): items ``{"queries": [...] | "query": str,
        "user_id", "agent_id"?, "run_id"?, "strategy"?, "budget_tokens"?, "limit"?, "threshold"?,
        "filters"?}``. Queries of every unfiltered item with the same strategy and budget go to one
        batched ``Retriever.search`` (one embedding call, one launch per stage), each query against
        its own scope; a filtered item searches its scope restricted to the matching messages.
        Returns results per item."""
        self._check_open()
        parsed = []
        for n, it in enumerate(items):
            where = f"search_batch: items[{n}]"
            if not isinstance(it, dict):
                raise ValueError(f"{where}: expected an object")
            unknown = set(it) - SEARCH_ITEM_FIELDS
            if unknown:
                raise ValueError(f"{where}: unknown fields {sorted(unknown)}; expected some of {sorted(SEARCH_ITEM_FIELDS)}")
            qs = inputs.queries(it["queries"] if "queries" in it else it.get("query"), f"{where}: queries")
            key = self._usable(scope_key(it.get("user_id"), it.get("agent_id"), it.get("run_id")))
            opts = (check_limit(it.get("limit"), f"{where}: limit"), check_threshold(it.get("threshold"), f"{where}: threshold"),
                    meta.filters(it.get("filters"), f"{where}: filters"))
            parsed.append((qs, key, it.get("strategy", "xmemory"), it.get("budget_tokens"), opts))
        out: list[list[RetrievalResult] | None] = [None] * len(parsed)
        with self._using([p[1] for p in parsed]), self._rw.read():
            for p in parsed:
                self._usable(p[1])  # a memory that failed to load just now
            groups: dict[tuple, list[int]] = {}
            for n, (_, _, strategy, budget, _) in enumerate(parsed):
                groups.setdefault((strategy, budget), []).append(n)
            for (strategy, budget), members in groups.items():
                self.retriever.search([], [], strategy=strategy, budget_tokens=budget)  # validates both
                live = [n for n in members if parsed[n][1] in self.bank.index and parsed[n][4][2] is None]
                qs = [q for n in live for q in self._about_subject(parsed[n][1], parsed[n][0])]
                mids = [parsed[n][1] for n in live for _ in parsed[n][0]]
                res = iter(self.retriever.search(qs, mids, strategy=strategy, budget_tokens=budget) if qs else [])
                for n in members:
                    queries, key, _, _, (limit, threshold, flt) = parsed[n]
                    if n in live:
                        got = [next(res) for _ in queries]
                    elif key in self.bank.index:
                        got = self._filtered(self._about_subject(key, queries), key, strategy, budget, flt)
                    else:
                        got = [self._empty(q, key, strategy, "no memory for this scope") for q in queries]
                    sup = self._superseded(key)
                    successor = self._statement_unit(key) if flt is None else None  # a filter may exclude it
                    for r, q in zip(got, queries):
                        r.query = q  # the caller's words (the search may have asked about the subject)
                    out[n] = [self._finish(r, limit, threshold, sup, budget, successor) for r in got]
        return out  # type: ignore[return-value]

    def _superseded(self, key: str) -> dict[str, tuple[str, float | None]]:
        b = self.bank.index.get(key)
        sup = (self.bank.stats[b].get(SUPERSEDED) or {}) if b is not None else {}
        return {f"semantic:{i}": (f"semantic:{j}", t) for i, (j, t) in sup.items()}

    def _statement_unit(self, key: str):
        """``semantic:N`` of memory ``key`` -> its unit (None when absent), for ``show_current``."""
        b = self.bank.index.get(key)

        def make(unit_id: str) -> RetrievedUnit | None:
            if b is None:
                return None
            rows = self.bank.sem.seg.rows(b)
            hit = rows[self.bank.sem["id"][rows] == int(unit_id.partition(":")[2])]
            if not len(hit):
                return None
            u = semantic_unit(self.bank, int(hit[0]), 0.0, {})
            u.id = unit_id
            return u

        return make

    def _finish(self, r: RetrievalResult, limit: int | None, threshold: float | None,
                superseded: dict[str, tuple[str, float | None]], budget: int | None, successor=None) -> RetrievalResult:
        """Public ids, relevance marked, changed facts shown as such, then the caller's ``limit`` /
        ``threshold`` or, without a threshold, the configured no-answer gate (``live.no_answer_threshold``)."""
        mark_relevance(_public_ids(r))
        show_current(r, superseded, self.retriever.budget.count, budget, successor)
        if threshold is None:
            no_answer(r, gate_for(self.config.live.no_answer_threshold, self.embedder.name))
        return limit_units(r, self.retriever.budget.count, limit, threshold)

    def _about_subject(self, key: str, queries: list[str]) -> list[str]:
        """The queries with their first person turned into the memory's subject (a role chat's user:
        its name, or "the user"); unchanged for a memory of named speakers."""
        b = self.bank.index.get(key)
        st = self.bank.stats[b] if b is not None else {}
        subject = st.get(USER_NAME) or (people.NEUTRAL if people.NEUTRAL in (st.get("engine") or {}).get("speakers", ()) else None)
        return queries if subject is None else [people.about_subject(q, subject) for q in queries]

    def _empty(self, query: str, key: str, strategy: str, note: str) -> RetrievalResult:
        return RetrievalResult(query, key, strategy, [], "", 0, self.retriever.budget.name, notes=[note])

    def _filtered(self, queries: list[str], key: str, strategy: str, budget: int | None, flt: dict) -> list[RetrievalResult]:
        """The queries against the scope's memory restricted to the messages matching ``flt``."""
        mem = view(self.bank, self.bank.index[key])
        ok = meta.matching(mem, flt)
        if not ok:
            return [self._empty(q, key, strategy, "no message matches the filters") for q in queries]
        sub = restrict(mem, ok, theme_summary)
        retriever = Retriever(Bank.from_slices([slice_from_memory(sub)], self.bank.dim), self.embedder, self.config,
                              backend=self.backend, tokens=self.retriever.budget.tokens, reader=self.retriever.reader)
        return retriever.search(queries, key, strategy=strategy, budget_tokens=budget)

    def get_all(self, *, user_id: str, agent_id: str | None = None, run_id: str | None = None,
                filters: dict | None = None) -> list[dict]:
        """Every unit of the scope's memory: messages, episodes, semantic statements, themes;
        ``filters``: only the units all of whose source messages match (``engine.metadata``)."""
        self._check_open()
        key = self._usable(scope_key(user_id, agent_id, run_id))
        flt = meta.filters(filters, "filters")
        with self._using([key]), self._rw.read():
            b = self.bank.index.get(self._usable(key))
            if b is None:
                return []
            mem = view(self.bank, b)
            units = _units(mem)
            if flt is None:
                return units
            ok = meta.matching(mem, flt)
            theme_src: dict[str, set[str]] = {}
            for s, r in zip(mem.semantics, np.asarray(mem.theme_of).tolist()):
                theme_src.setdefault(f"theme:{mem.themes[r].id}", set()).update(s.message_ids)
            return [u for u in units if meta.matches_unit(u, ok, theme_src)]

    def get(self, unit_id: str, *, user_id: str | None = None, agent_id: str | None = None, run_id: str | None = None) -> dict:
        """One unit by the id ``get_all`` or a search result gives it."""
        self._check_open()
        with self._using(self._owner(unit_id, user_id, agent_id, run_id)), self._rw.read():
            key, kind, _ = self._locate(unit_id, user_id, agent_id, run_id)
            mem = view(self.bank, self.bank.index[key])
            return next(u for u in _units(mem) if u["id"] == unit_id and (u["type"] == "message") == (kind == "message"))

    def history(self, *, user_id: str, agent_id: str | None = None, run_id: str | None = None) -> list[dict]:
        """The scope's operations log, oldest first: ``{"op", "ids", "time"}``. A deleted message's
        id leaves every entry (its deletion is logged with a digest of the id); ``delete_all``
        leaves one entry with no ids."""
        self._check_open()
        key = scope_key(user_id, agent_id, run_id)
        with self._rw.read():
            return self.store.history(key)

    def scopes(self) -> list[dict[str, str | None]]:
        if self._residency is not None:  # the catalogue: every stored memory, resident or not
            return [scope_of(m) for m in self.store.memory_ids() if m not in self.quarantined]
        with self._rw.read():
            return [scope_of(m) for m in self.bank.memory_ids]

    def _owner(self, unit_id: str, user_id, agent_id, run_id) -> list[str]:
        """The memory key a unit id names, to make resident before ``_locate`` (none when it does
        not parse: ``_locate`` says why)."""
        if self._residency is None:
            return []
        try:
            if user_id is not None:
                return [scope_key(user_id, agent_id, run_id)]
            return self.store.find_message(unit_id) if isinstance(unit_id, str) and unit_id else []
        except (TypeError, ValueError):
            return []

    def _locate(self, unit_id: str, user_id, agent_id, run_id) -> tuple[str, str, int]:
        """(memory key, kind, local row; -1 for a message): ``episode:N`` / ``semantic:N`` /
        ``theme:N`` need the scope; a message id without a scope must name exactly one message of the
        store."""
        if not isinstance(unit_id, str) or not unit_id:
            raise ValueError(f"unit_id: expected a non-empty string, got {unit_id!r:.80}")
        inputs.check_id(unit_id, "unit_id")
        unit = unit_ids.parse_unit_id(unit_id)
        if user_id is None:
            if unit is not None:
                raise ValueError(f"unit_id {unit_id!r}: episode, semantic and theme ids need user_id (and agent_id, run_id)")
            if self._residency is not None:  # the catalogue's message-id index (most memories are not resident)
                keys = [m for m in self.store.find_message(unit_id) if m not in self.quarantined]
            else:
                rows = np.flatnonzero(self.bank.msg["id"][: self.bank.msg.seg.size] == unit_id)
                keys = [self.bank.memory_ids[b] for b in sorted({int(b) for b in self.bank.msg.seg.memory_of(rows) if b >= 0})]
            if len(keys) != 1:
                raise KeyError(f"unit {unit_id!r}: {'no such message' if not keys else 'ambiguous: give user_id'}")
            return keys[0], "message", -1
        key = self._usable(scope_key(user_id, agent_id, run_id))
        b = self.bank.index.get(key)
        if b is None:
            raise KeyError(f"unit {unit_id!r}: no memory for this scope")
        is_message = unit_id in set(self.bank.msg["id"][self.bank.msg.seg.rows(b)].tolist())
        if unit is None:
            if not is_message:
                raise KeyError(f"unit {unit_id!r}: no such message in this memory")
            return key, "message", -1
        if is_message:  # a message id of this form was accepted before such ids were refused
            raise KeyError(f"unit {unit_id!r}: ambiguous, it names a message and a derived unit id; "
                           "delete_all the scope or re-add its messages under other ids")
        kind, num = unit
        level = {"episode": self.bank.epi, "semantic": self.bank.sem, "theme": self.bank.theme}[kind]
        hit = np.flatnonzero(level["id"][level.seg.rows(b)] == num)
        if not len(hit):
            raise KeyError(f"unit {unit_id!r}: no {kind} {num} in this memory")
        return key, kind, int(hit[0])

    def stats(self) -> dict[str, Any]:
        with self._rw.read():
            out = {"memories": self.bank.n_memories, "messages": int(self.bank.msg.seg.lengths.sum()),
                   "semantics": int(self.bank.sem.seg.lengths.sum()), "themes": int(self.bank.theme.seg.lengths.sum()),
                   "quarantined": len(self.quarantined), "time": time.time()}
        if self._residency is not None:  # the counts above are of the resident memories
            with self._res_lock:
                out |= {"memories": len(self._loaded) - len(set(self.quarantined) & set(self._loaded)),
                        "resident_memories": out["memories"], "resident_bytes": self._residency.resident_bytes,
                        "max_resident_bytes": self._residency.budget}
        return out


def _item_keys(items: Sequence[dict]) -> list[str]:
    """The memory keys of ``add_batch`` items whose scope parses (the others fail in the full check)."""
    out = []
    for it in items:
        try:
            out.append(scope_key(it.get("user_id"), it.get("agent_id"), it.get("run_id")))
        except (AttributeError, TypeError, ValueError):
            continue
    return out


def _public_ids(r: RetrievalResult) -> RetrievalResult:
    """The result with unit ids ``get`` and ``delete`` take: ``semantic:N``, ``episode:N``,
    ``theme:N``; an expanded episode's messages (``episode-N``) as ``episode:N``; a passage of a
    message (``ID#pK``) as its message id."""
    for u in r.units:
        if u.type in unit_ids.UNIT_KINDS:
            u.id = f"{u.type}:{u.id}"
        elif u.type == "message":
            head, _, num = u.id.partition("-")
            if head == "episode" and num.isascii() and num.isdigit() and u.id not in u.message_ids:
                u.id = f"episode:{num}"
            elif len(u.message_ids) == 1 and u.id != u.message_ids[0] and u.id.startswith(u.message_ids[0] + "#p"):
                u.id = u.message_ids[0]
    return r


def _embedder_for(store: MemoryBackend, embedder: Embedder | str | None, cfg: XMemoryConfig, backend: str) -> Embedder:
    """The embedder asked for (default: the one the store was built with); it must be the store's."""
    device = encoder_device(backend, cfg.embed.device)
    if embedder is None:
        emb = embedder_for_store(store.embedder, device=device)
    elif isinstance(embedder, str):
        emb = load_embedder(embedder, device=device)
    else:
        emb = embedder
    if emb.dim != store.dim or emb.name != store.embedder:
        raise ValueError(f"{store.path or 'store'}: embedder: the store was built with {store.embedder!r} ({store.dim}), "
                         f"not {emb.name!r} ({emb.dim})")
    return emb


def _carry(old: Memory, new: Memory, dropped: set[str], added: dict[str, dict], user_name: str | None,
           stamped: list[str], *, rederived: bool) -> None:
    """What the engine keeps beside the derived units, from ``old`` to ``new`` (in place): message
    metadata, the user's name, the ids of messages stamped at arrival; the dropped ids leave."""
    meta.carry(old, new, added, dropped)
    name = user_name or old.stats.get(USER_NAME)
    if name:
        new.stats[USER_NAME] = name
    alive = {m.id for m in new.messages}
    ids = [i for i in list(old.stats.get(STAMPED, ())) + stamped if i in alive and i not in dropped]
    if ids:
        new.stats[STAMPED] = ids
    else:
        new.stats.pop(STAMPED, None)
    pos = {m.id: n for n, m in enumerate(new.messages)}
    speaker = {m.id: m.speaker for m in new.messages}
    firsts = [min(s.message_ids, key=pos.__getitem__) for s in new.semantics]
    # a growth keeps the earlier decisions and tries the statements it added; a re-derivation (a delete,
    # an update, a rename) decides again for all
    alive = {s.id: s for s in new.semantics}
    kept = {} if rederived else {k: v for k, v in (old.stats.get(SUPERSEDED) or {}).items()
                                 if int(k) in alive and int(v[0]) in alive}
    known = {s.id for s in old.semantics}
    fresh = None if rederived else np.array([r for r, s in enumerate(new.semantics) if s.id not in known], np.int64)
    sup = supersessions([s.text for s in new.semantics], new.sem_x, np.array([pos[m] for m in firsts], np.int64),
                        [speaker[m] for m in firsts], new=fresh) if fresh is None or len(fresh) else {}
    found = {str(new.semantics[i].id): [new.semantics[j].id, new.semantics[j].timestamp] for i, j in sup.items()}
    merged = {**found, **kept}  # an earlier decision stands (the first change superseded it)
    if merged:
        new.stats[SUPERSEDED] = merged
    else:
        new.stats.pop(SUPERSEDED, None)


def _replace_rows(x: MessageVectors, rows: list[int], new: MessageVectors) -> MessageVectors:
    """``x`` with messages ``rows`` (increasing) embedded again as ``new`` (their passages too)."""
    at = np.asarray(rows, np.int64)
    msg_x = x.x.copy()
    msg_x[at] = new.x
    keep = ~np.isin(x.psg_msg, at)
    owner = np.concatenate([x.psg_msg[keep], at[new.psg_msg]])
    order = np.argsort(owner, kind="stable")  # each message's passages come from one side, in order
    return MessageVectors(msg_x, np.concatenate([x.psg_x[keep], new.psg_x])[order], owner[order].astype(np.int32))


def _units(mem: Memory) -> list[dict]:
    md, stamped = meta.of_memory(mem), set(mem.stats.get(STAMPED, ()))
    out = [{"id": m.id, "type": "message", "speaker": m.speaker, "text": m.text, "timestamp": m.timestamp,
            "timestamp_source": None if m.timestamp is None else "arrival" if m.id in stamped else "given"}
           | ({"metadata": md[m.id]} if m.id in md else {}) for m in mem.messages]
    out += [{"id": f"episode:{e.id}", "type": "episode", "title": e.title, "text": e.text, "message_ids": e.message_ids,
             "timestamp": e.start} for e in mem.episodes]
    sup = mem.stats.get(SUPERSEDED) or {}
    out += [{"id": f"semantic:{s.id}", "type": "semantic", "text": s.text, "message_ids": s.message_ids, "timestamp": s.timestamp}
            | ({"superseded_by": f"semantic:{sup[str(s.id)][0]}", "valid_until": sup[str(s.id)][1]} if str(s.id) in sup else {})
            for s in mem.semantics]
    out += [{"id": f"theme:{t.id}", "type": "theme", "text": t.summary} for t in mem.themes]
    return out
