"""``MemoryEngine``: live memories over a store: add, search, update, delete and scope, batched
across users, with mem0's names (``metadata`` / ``filters``: ``engine.metadata``; ``limit`` /
``threshold``: ``engine.results``; ``update``, ``reset``).

A memory is keyed by ``(user_id, agent_id, run_id)`` (at least one given); its store id is that key
as a JSON array, so ids with path or SQL characters are plain data (SQL is parameterised, file names
are hashes). Reads follow mem0's scope rules (``Reads.scope_keys``): a part left out matches any, so
``user_id`` alone reads the user's memories across its agents and runs, ``agent_id`` or ``run_id``
alone reads that agent's or run's; a memory a bulk build stored under a plain id (``conv-26``) is the
user of that id (listed by ``scopes``, read, written and deleted by ``user_id="conv-26"``).

mem0's shapes: ``add`` takes a string, one message or a list, and ``infer=False`` (messages kept,
nothing derived); ``events=True`` gives mem0's add answer ``{"ids", "results": [event, ...]}``
(``Writes.add_batch``; the default stays the list of ids). Units carry ``created_at`` /
``updated_at`` (from the operations log) and their scope; ``hits`` gives a search's units as mem0's
results (``score``: the relevance in [0, 1]). ``update`` returns the updated message as ``get`` does.
Writes (``add``, ``add_batch``, ``update``, ``delete``, mem0's ``batch_update`` / ``batch_delete``,
``delete_all``) are serialised and each is one atomic store commit (a batch: all its items or none); the in-memory bank is updated under a write lock only after the commit succeeds, so
a search sees the state before or after a batch, never half of it. A second process that opens the
store for writing is refused (``write.lock``); ``read_only=True`` opens it for searching.

Deleting forgets (``construct.forget``): every episode, statement, theme summary and graph row built
from the deleted text goes, the touched episodes are made again and the touched statements extracted
again from their other sources (only changed texts are embedded: ``embed.cache``); a deleted
statement's hash is kept so no later extraction brings it back; the memory's file is rewritten and the old one removed, and the catalogue is
written with ``secure_delete`` (compacted once a quarter of it is free: ``Store.maybe_compact``). A deleted message's id leaves the operations log (its deletion is logged with a digest
of the id); ``delete_all`` erases the scope's log but for one ``delete_all`` entry.

Unit ids: a message keeps the id it was added with (an id shaped like a derived unit's,
``episode:N`` / ``semantic:N`` / ``theme:N``, is refused); derived ids are stable across growth and
re-derivation (``engine.ids``), and every id ``get_all`` lists or a search result carries works with
``get`` and ``delete``. Input is bounded (``engine.inputs``: ``Limits``, timestamps within years
1-9999, sessions within int64). A memory that fails to load is quarantined, not fatal.

This module opens, refreshes and closes an engine; the class's other jobs have their own modules:
``writes`` (every write), ``reads`` (every read), ``scopes`` (which memories a scope names, where a
unit id lives), ``paging`` (the bank as a cache over the store
under ``max_resident_bytes``; ``residency`` its accounting), ``keys`` (field and stats names);
``aio.AsyncMemoryEngine`` offers its calls awaited. mem0's ``get_all(page=, page_size=)`` and
``search(top_k=)`` are ``Reads``'.
"""

from __future__ import annotations

import inspect
import os
import threading
from pathlib import Path

from ..config import XMemoryConfig, resolve_config
from ..construct.passages import store_passages
from ..construct.theme_memo import ThemeMemo
from ..embed import Embedder, embedder_for_store, load_embedder, warm_up
from ..llm import Reader, as_reader
from ..memory.backend import MemoryBackend
from ..memory.bank import Bank
from ..memory.locks import ReadWriteLock, WriterLock
from ..memory.store import DB_NAME, Store, StoreError
from ..ops.backends import BACKENDS, is_available, requested_backend
from ..ops.devices import encoder_device
from ..retrieve.retriever import Retriever
from .exits import gate_calls
from .inputs import MAX_ID_CHARS, Limits, flag, scope_key, scope_of
from .keys import (
    QuarantinedError,
)
from .paging import Paging
from .reads import Reads
from .residency import AUTO, Residency, resolve_budget
from .scopes import Scopes
from .writes import Writes

__all__ = ["MAX_ID_CHARS", "Limits", "MemoryEngine", "QuarantinedError", "scope_key", "scope_of"]


def _public_names(*mixins: type) -> None:
    """The mixins' public methods named as callers call them: an argument error says ``add()``,
    not ``Writes.add()``."""
    for cls in mixins:
        for name, fn in vars(cls).items():
            if not name.startswith("_") and inspect.isfunction(fn):
                fn.__code__ = fn.__code__.replace(co_qualname=name)
                fn.__qualname__ = name


_public_names(Paging, Writes, Reads)


@gate_calls  # the interpreter's exit waits for the calls in flight (engine/exits.py)
class MemoryEngine(Paging, Writes, Reads, Scopes):
    """Live memories: ``add`` / ``add_batch`` / ``search`` / ``get_all`` / ``get`` / ``delete`` /
    ``delete_all`` / ``history``, scoped by ``(user_id, agent_id, run_id)``.

    A memory that fails to load when the engine opens (a damaged arrays file) is quarantined: the
    others load and serve, ``quarantined`` names it and why, and every request for it raises
    ``QuarantinedError`` (``delete_all`` removes it). ``limits`` bounds the size of a write."""

    def __init__(
        self,
        store: MemoryBackend,
        embedder: Embedder,
        config: XMemoryConfig,
        *,
        backend: str = "auto",
        read_only: bool = False,
        lock: WriterLock | None = None,
        limits: Limits | None = None,
        stamp_arrival: bool = True,
        reader: Reader | None = None,
        max_resident_bytes: int | str | None = AUTO,
    ) -> None:
        self.store = store
        self.stamp_arrival = flag(stamp_arrival, "stamp_arrival")
        self.embedder = embedder
        self.config = config
        self.backend = backend
        self.read_only = read_only
        self.limits = limits or Limits()
        self._lock = lock
        self._rw = ReadWriteLock()  # readers vs the (short) in-memory apply of a committed batch
        self._writer = threading.RLock()  # one write at a time; its heavy work runs outside the rw lock
        self._theme_memo = ThemeMemo()  # each large memory's themes as its last write left them
        self._warmed: dict[
            str, tuple[int, int]
        ] = {}  # memory -> (its bank, the bank's version) at its warm-up
        budget = resolve_budget(max_resident_bytes)
        self._residency = None if budget is None else Residency(budget)
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
        """What the first add or search would otherwise set up lazily (the kernel backend this engine
        runs on probed: ``cpu`` under ``auto``, whose inputs are host arrays; the embedder's
        ``warm_up``), so the first request costs what the next ones do. A CPU engine imports no GPU stack."""
        wanted = requested_backend(self.backend)
        wanted = "cpu" if wanted == "auto" else wanted
        if wanted in BACKENDS:  # an unknown name fails at the first op, with the ops' own message
            is_available(wanted)
        warm_up(self.embedder)  # its warm_up (a model may load in the background), else one encode

    # -- opening and closing -----------------------------------------------------------------------
    @classmethod
    def open(
        cls,
        path: str | Path | MemoryBackend,
        *,
        embedder: Embedder | str | None = None,
        config: XMemoryConfig | None = None,
        backend: str = "auto",
        read_only: bool = False,
        limits: Limits | None = None,
        stamp_arrival: bool = True,
        reader: Reader | str | None = None,
        max_resident_bytes: int | str | None = AUTO,
    ) -> MemoryEngine:
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
        on first touch and the least recently used go when the budget is passed (default ``"auto"``:
        half of the machine's physical memory; ``None`` or ``"all"``: every memory resident,
        loaded at open)."""
        flag(stamp_arrival, "stamp_arrival")
        reader = as_reader(reader)  # a spec loaded; anything but a Reader, a spec or None refused
        if not isinstance(path, (str, os.PathLike)):
            cfg = config or resolve_config(path.config)
            emb = _embedder_for(path, embedder, cfg, backend)
            return cls(
                path,
                emb,
                cfg,
                backend=backend,
                read_only=read_only,
                limits=limits,
                stamp_arrival=stamp_arrival,
                reader=reader,
                max_resident_bytes=max_resident_bytes,
            )
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
                    store_passages(
                        store, emb, cfg.semantic.passage_words
                    )  # format 3 memories get their passages
                    store.collect_garbage()
            else:
                cfg = config or XMemoryConfig()
                device = encoder_device(backend, cfg.embed.device)
                emb = (
                    load_embedder(embedder or cfg.embed.model, device=device)
                    if embedder is None or isinstance(embedder, str)
                    else embedder
                )
                store = Store.create(root, dim=emb.dim, embedder=emb.name, config=cfg.to_dict())
        except BaseException:
            if lock is not None:
                lock.release()
            raise
        try:
            return cls(
                store,
                emb,
                cfg,
                backend=backend,
                read_only=read_only,
                lock=lock,
                limits=limits,
                stamp_arrival=stamp_arrival,
                reader=reader,
                max_resident_bytes=max_resident_bytes,
            )
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
            slices, quarantined = (
                [],
                {m: r for m, r in self.quarantined.items() if m in now and m not in changed},
            )
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
                self._maybe_compact()
                self.quarantined = quarantined
                self._loaded = now
                self.__dict__.pop("_scope_idx", None)  # the scopes' index (Reads.scope_keys)
            return sorted(set(changed) | set(gone))


def _embedder_for(
    store: MemoryBackend, embedder: Embedder | str | None, cfg: XMemoryConfig, backend: str
) -> Embedder:
    """The embedder asked for (default: the one the store was built with); it must be the store's."""
    device = encoder_device(backend, cfg.embed.device)
    if embedder is None:
        emb = embedder_for_store(store.embedder, device=device, dim=store.dim)
    elif isinstance(embedder, str):
        emb = load_embedder(embedder, device=device)
    else:
        emb = embedder
    if emb.dim != store.dim or emb.name != store.embedder:
        raise ValueError(
            f"{store.path or 'store'}: embedder: the store was built with {store.embedder!r} ({store.dim}), "
            f"not {emb.name!r} ({emb.dim})"
        )
    return emb
