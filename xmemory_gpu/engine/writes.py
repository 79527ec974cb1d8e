"""The writing half of ``MemoryEngine``: ``add`` / ``add_batch`` (request parsing, the user's name,
arrival stamps, one batched growth), ``delete`` / ``update`` (forgetting what the touched messages
gave, ``construct.forget``, then a growth), mem0's ``batch_update`` / ``batch_delete`` (every item
found first, each touched memory derived again once), ``delete_all`` and ``reset``; each write one
atomic store commit, then the bank under the write lock."""

from __future__ import annotations

import hashlib
import logging
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import replace

import numpy as np

from ..construct.forget import forget
from ..construct.incremental import (
    empty_slice,
    engine_state,
    forgotten_hashes,
    grow,
    speaker_pair,
    turns_before,
    valid_rows,
)
from ..construct.segment import MessageVectors, embed_messages
from ..construct.semantic import extract_statements, without_question
from ..construct.supersede import changes, denial, supersessions
from ..embed.cache import CachedEmbedder
from ..heap import release_after_write
from ..memory.bank import MemorySlice
from ..memory.engine_state import EngineState
from ..memory.hierarchy import Memory, messages_at, time_or_none
from ..memory.records import Conversation, Episode, Message
from . import ids as unit_ids
from . import inputs, people
from . import metadata as meta
from .inputs import MAX_ID_CHARS, scope_of
from .keys import (
    ADD_ITEM_FIELDS,
    MESSAGE_FIELDS,
    QuarantinedError,
)
from .reads import named, shown_name

log = logging.getLogger(__name__)
# per level, a column whose kept rows (``KeptRows``) mark where a growth's new rows start
_FIRST_NEW = (("msg", "text"), ("epi", "text"), ("sem", "text"), ("psg", "x"))
MAX_BATCH_UNITS = 1000  # items of one batch_update or batch_delete (mem0's limit)
BATCH_FIELDS = frozenset({"memory_id", "user_id", "agent_id", "run_id"})  # a batch item's, and "text"


class Writes:
    """Mixin of :class:`~.engine.MemoryEngine`: every write."""

    def add(
        self,
        messages: str | dict | Sequence[dict],
        *,
        user_id: str | None = None,
        agent_id: str | None = None,
        run_id: str | None = None,
        metadata: dict | None = None,
        user_name: str | None = None,
        infer: bool = True,
        events: bool = False,
    ) -> list[str] | dict:
        """Add messages to one memory (at least one of ``user_id``, ``agent_id``, ``run_id``); returns
        their ids (given, or assigned), or with ``events=True`` mem0's answer ``{"ids": [...],
        "results": [event, ...]}`` (``add_batch``).

        ``messages``: a string (one message from the user), one message, or a list of them; a message
        is ``{"role" | "speaker", "content" | "text", "name"?, "timestamp"?, "id"?, "session"?}``.
        ``metadata``: a JSON object stored with each of these messages (``get_all`` returns it,
        ``filters`` select by it). ``infer=False``: the messages are kept and searched as messages,
        and no statement (nor theme) is derived from them, now or when they change. Who speaks: a
        message's ``name``, else its ``speaker``, else its role, where role ``user`` is the memory's
        user name when one was given (``user_name`` here or at an earlier add; it is remembered)."""
        item = {"messages": messages, "user_id": user_id, "agent_id": agent_id, "run_id": run_id}
        item |= {k: v for k, v in (("metadata", metadata), ("user_name", user_name)) if v is not None}
        if infer is not True:
            item["infer"] = infer
        with named("add", "add_batch: items[0]: "):
            return self.add_batch([item], events=events)[0]

    def add_batch(self, items: Sequence[dict], *, events: bool = False) -> list[list[str]] | list[dict]:
        """Add messages to many memories at once: one embedding call for all new messages, one for
        all new statements, one kernel launch per stage, one atomic commit. Items: ``{"messages",
        "user_id"?, "agent_id"?, "run_id"?, "metadata"?, "user_name"?, "infer"?}`` (``add``'s
        arguments; one memory's items of a call agree on ``infer``). Returns the ids per item; with
        ``events=True`` per item mem0's ``{"ids": [...], "results": [...]}``, the results being what
        changed as mem0's events: ``{"id", "memory", "event", "type", "user_id", "agent_id",
        "run_id"}`` with ``event`` ``ADD`` (a message; a new statement), ``UPDATE`` (a statement
        whose text changed, with ``previous_memory``; a statement superseded by a newer one, with
        ``superseded_by`` and ``memory`` the newer text), ``DELETE`` (a statement gone) or ``NONE``
        (a statement the new messages said again). A memory's statement events go with its last item
        of the call. Sizes are bounded by ``limits`` (checked before any work). The new texts are
        embedded before the write waits for the writer lock (``_prefetch``), so another write waits
        for this one's structure work and commit only, not for its encoder."""
        self._check_open(write=True)
        if isinstance(items, dict) or not isinstance(items, Sequence):
            raise ValueError("add_batch: items: expected a list of {'messages': [...], 'user_id': ...}")
        events = inputs.flag(events, "events")
        lim = self.limits
        if len(items) > lim.max_items:
            raise ValueError(f"add_batch: items: {len(items)} items, more than the limit of {lim.max_items}")
        self._prefetch(items)
        with self._writer, self._write_section(), self._using(self._item_keys(items)):
            keys, batches, ids_out = [], {}, []
            added: dict[str, dict[str, dict]] = {}  # memory -> message id -> metadata
            given: dict[str, str] = {}  # memory -> the user name the app gives now
            claims: dict[
                str, tuple[people.NameClaim, str]
            ] = {}  # memory -> the name the user gives now, its message
            stamped: dict[str, list[str]] = {}  # memory -> ids stamped with their arrival time
            inferred: dict[str, bool] = {}  # memory -> whether its new messages are inferred from
            per_memory: dict[str, int] = {}
            now = time.time()  # the arrival time of every message of the call
            for n, item in enumerate(items):
                where = f"add_batch: items[{n}]"
                key, msgs, md, name = self._item(item, where, per_memory)
                infer = inputs.flag(item.get("infer", True), f"{where}: infer")
                if inferred.setdefault(key, infer) != infer:
                    raise ValueError(
                        f"{where}: infer: one memory's items of a call are all inferred or all not "
                        "(add them in several calls)"
                    )
                if name is not None:
                    given[key] = name
                keys.append(key)
                batches.setdefault(key, [])
                b = self.bank.index.get(key)
                taken = (
                    set(self.bank.msg["id"][self.bank.msg.seg.rows(b)].tolist()) if b is not None else set()
                )
                last = (
                    int(self.bank.msg["session"][self.bank.msg.seg.rows(b)[-1]])
                    if b is not None and self.bank.msg.seg.lengths[b]
                    else 0
                )
                ids_out.append(
                    self._parse(
                        msgs, batches[key], where, taken, last, stamped.setdefault(key, []), now, claims, key
                    )
                )
                if md is not None:
                    added.setdefault(key, {}).update(dict.fromkeys(ids_out[-1], md))
            if not batches:
                return [{"ids": i, "results": []} for i in ids_out] if events else ids_out
            mems = [self._current(k) for k in batches]
            before = {m.memory_id: _statements(m) for m in mems} if events else {}
            grown = []
            for infer in (True, False):  # the messages kept as they are grow without statements
                part = [m for m in mems if inferred[m.memory_id] == infer]
                if part:
                    cfg = self.config if infer else _no_statements(self.config)
                    grown += grow(
                        part,
                        [batches[m.memory_id] for m in part],
                        self._embed_cache,
                        cfg,
                        backend=self.backend,
                        memo=self._theme_memo,
                    )
            by_key = {m.memory_id: m for m in mems}
            for new in grown:
                key = new.memory_id
                old = by_key[key]
                unit_ids.assign(old, new, set())
                carry_over(
                    old,
                    new,
                    set(),
                    added.get(key, {}),
                    name_after(old.engine, given.get(key), claims.get(key)),
                    stamped.get(key, []),
                    [] if inferred[key] else [x.id for x in batches[key]],
                    replies_read_with_questions=self.config.semantic.read_replies_with_questions,
                    encode=self._embed_cache.encode,
                )
            self._commit(
                grown,
                [(m.memory_id, "add", [x.id for x in batches[m.memory_id]]) for m in grown],
                previous=mems,
            )
            if not events:
                return ids_out
            return self._add_events(items, keys, ids_out, batches, before)

    def _add_events(
        self,
        items: Sequence[dict],
        keys: list[str],
        ids_out: list[list[str]],
        batches: dict[str, list[Message]],
        before: dict[str, dict],
    ) -> list[dict]:
        """``add_batch``'s answer with events, per item (see ``add_batch``)."""
        last = {k: n for n, k in enumerate(keys)}
        texts = {k: {m.id: m.text for m in msgs} for k, msgs in batches.items()}
        out = []
        with self._rw.read():
            for n, (key, ids) in enumerate(zip(keys, ids_out)):
                scope = scope_of(key)
                ev = [
                    {"id": i, "memory": texts[key][i], "event": "ADD", "type": "message"} | scope for i in ids
                ]
                if last[key] == n and key in self.bank.index:
                    after = _statements(self.bank.slice(self.bank.index[key]))
                    ev += [e | scope for e in _statement_events(before.get(key, {}), after)]
                out.append({"ids": ids, "results": ev})
        return out

    def _item_keys(self, items: Sequence[dict]) -> list[str]:
        """The memory keys of ``add_batch`` items whose scope parses (the others fail in the full check)."""
        out = []
        for it in items:
            try:
                out.append(self._exact(it.get("user_id"), it.get("agent_id"), it.get("run_id")))
            except (AttributeError, TypeError, ValueError):
                continue
        return out

    def _item(
        self, item, where: str, per_memory: dict[str, int]
    ) -> tuple[str, Sequence[dict], dict | None, str | None]:
        """An ``add_batch`` item checked: (memory key, messages, metadata, user name); ``per_memory``
        counts the messages per memory over the call (the per-memory limit holds across items)."""
        lim = self.limits
        if not isinstance(item, dict):
            raise ValueError(f"{where}: expected an object, got {type(item).__name__}")
        unknown = set(item) - ADD_ITEM_FIELDS
        if unknown:
            raise ValueError(f"{where}: unknown fields {sorted(unknown)}")
        key = self._usable(self._exact(item.get("user_id"), item.get("agent_id"), item.get("run_id")))
        msgs = inputs.messages_of(item.get("messages"), f"{where}: messages")
        per_memory[key] = per_memory.get(key, 0) + len(msgs)
        if per_memory[key] > lim.max_messages:
            raise ValueError(
                f"{where}: messages: {per_memory[key]} messages for one memory in this call, more than the limit "
                f"of {lim.max_messages} per memory per call (add them in several calls)"
            )
        if sum(per_memory.values()) > lim.max_batch_messages:
            raise ValueError(
                f"{where}: messages: more than {lim.max_batch_messages} messages in one add_batch "
                "(add them in several calls)"
            )
        md = meta.metadata(item.get("metadata"), f"{where}: metadata")
        name = (
            None
            if item.get("user_name") is None
            else inputs.check_id(item["user_name"], f"{where}: user_name")
        )
        return key, msgs, md, name

    @property
    def _embed_cache(self) -> CachedEmbedder:
        """The engine's embedder behind a text -> row cache (``embed.cache``): forgetting embeds
        only the texts that changed, and an add embeds its texts before it waits for the writer."""
        c = self.__dict__.get("_cached_embedder")
        if c is None or c.inner is not self.embedder:
            c = self.__dict__["_cached_embedder"] = CachedEmbedder(self.embedder)
        return c

    def _prefetch(self, items: Sequence[dict]) -> None:
        """Embed, outside the writer lock, what ``add_batch`` will embed under it: the new messages
        and the statements they give, parsed and extracted by the same functions (a guess: the open
        episode and the memory's speakers may change a statement; what differs is embedded under the
        lock). Bad input is left for the checked parse under the lock to refuse."""
        try:
            flat: list[Message] = []
            stmts: list[str] = []
            counts: dict[str, int] = {}  # the limits hold before anything is embedded
            for n, item in enumerate(items):
                key, msgs, _, _ = self._item(item, f"add_batch: items[{n}]", counts)
                out: list[Message] = []
                self._parse(msgs, out, "", set(), 0, [], time.time(), {}, key)
                flat += out
                if out and item.get("infer", True) is True:
                    conv = Conversation(key, speaker_pair(out), out)
                    stmts += [
                        r.text
                        for r in extract_statements(
                            conv, [Episode(0, "", "", [m.id for m in out])], self.config.semantic
                        )
                    ]
            if flat:
                embed_messages(self._embed_cache, flat, self.config.semantic.passage_words)
            if stmts:
                self._embed_cache.encode(stmts)
        except (ValueError, KeyError, TypeError, QuarantinedError):
            return

    def _parse(
        self,
        msgs: Sequence[dict],
        out: list[Message],
        where: str,
        taken: set[str],
        last_session: int,
        stamped: list[str],
        now: float,
        claims: dict[str, tuple[people.NameClaim, str]],
        key: str,
    ) -> list[str]:
        """``msgs`` checked and appended to ``out`` as ``Message`` s; returns their ids. Role ``user``
        speaks as the memory's subject (``people.NEUTRAL``); a name the user gives in a message is
        recorded in ``claims[key]`` as (claim, message id), the later replacing the earlier
        (``people.replaces``)."""
        taken = taken | {m.id for m in out}
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
            mid = uuid.uuid4().hex if d.get("id") is None else inputs.message_id(d["id"], w)
            if mid in taken:
                raise ValueError(f"{w}: id {mid!r} is already used in this memory")
            if d.get("name") is not None:
                speaker = inputs.check_id(d["name"], f"{w}: name")
            elif "speaker" not in d and speaker == "user":  # the memory's subject (engine.people)
                speaker = people.NEUTRAL
                claim = people.name_claim(text)
                if claim is not None and people.replaces(claim, claims.get(key, (None,))[0]):
                    claims[key] = (claim, mid)
            session = inputs.session(d.get("session", last_session), w)
            last_session = session
            taken.add(mid)
            ts = inputs.timestamp(d.get("timestamp"), w)
            if ts is None and self.stamp_arrival:
                ts = now
                stamped.append(mid)
            out.append(Message(mid, speaker, text, session, ts))
            ids.append(mid)
        return ids

    def _current(self, key: str) -> MemorySlice:
        """Memory ``key`` as the bank holds it: read-only views where they can be (``Bank.slice``),
        read by the growth and the commit before the bank's next write."""
        b = self.bank.index.get(key)
        if b is None:
            return empty_slice(key, self.embedder.dim, self.config.knn.k_semantics)
        return self.bank.slice(b, copy=False)

    def _commit(
        self,
        slices: list[MemorySlice],
        log: list[tuple[str, str, list[str]]],
        delete: list[str] = (),
        redact: dict[str, set[str]] | None = None,
        previous: Sequence[MemorySlice] = (),
    ) -> None:
        """Store first (atomic), then the bank under the write lock: readers never see half a batch.
        ``previous``: the slices the write started from (the bank's copies of the stored versions),
        which the store diffs against instead of keeping copies of its own."""
        held = {m.memory_id: (self._loaded[m.memory_id], m) for m in previous if m.memory_id in self._loaded}
        copies = {"previous": held} if _takes_previous(self.store) else {}  # a backend may not take it
        try:
            self.store.commit(slices, replace=True, delete=list(delete), log=log, redact=redact, **copies)
        except BaseException:
            self._theme_memo.discard()  # the themes of a write that was not stored
            raise
        self._theme_memo.publish([sl.memory_id for sl in slices])
        self._theme_memo.drop(delete)
        files = self.store.versions([sl.memory_id for sl in slices])
        # the rows changed against the bank's own (``held``), where the backend says them
        changed = getattr(self.store, "changed", {}) if copies else {}
        with self._res_lock, self._rw.write():
            for sl in slices:
                self.bank.put_slice(sl, changed=changed.get(sl.memory_id) if sl.memory_id in held else None)
                self._note_resident(sl)
            self._drop(set(delete))
            self._index_scopes(added=[m for m in files if m not in self._loaded], dropped=list(delete))
            for m in delete:
                self.quarantined.pop(m, None)
                self._loaded.pop(m, None)
            self._loaded.update(files)
            self._maybe_compact()
        self._prime_written(slices)
        # a write to a large memory frees temporaries of its size: their pages back to the system
        release_after_write(sum(a.nbytes for sl in slices for c in sl.cols.values() for a in c.values()))

    def _prime_written(self, slices: Sequence[MemorySlice]) -> None:
        """The rows each grown memory added (``KeptRows``: the rows past those it kept), their search
        caches filled now (``Retriever.prime``): the searches after a write then pay for their query,
        not for the rows just written. Rows a write renumbered (a delete) keep the values that depend
        on their text alone; the others are left to the searches. The write is stored already: a
        fill that fails is logged, not raised."""
        for sl in slices:
            kept = sl.kept.columns if sl.kept is not None else {}
            since = {lv: kept[f"{lv}.{col}"][0] for lv, col in _FIRST_NEW if f"{lv}.{col}" in kept}
            if len(since) == len(_FIRST_NEW) and sl.memory_id in self.bank.index:
                try:
                    with self._rw.read():  # as a search fills them
                        self.retriever.prime(sl.memory_id, since)
                except Exception:  # noqa: BLE001 - the write is stored: a cache left unfilled costs a search time
                    log.warning("filling the search caches of memory %s failed", sl.memory_id, exc_info=True)

    def delete(
        self,
        unit_id: str,
        *,
        user_id: str | None = None,
        agent_id: str | None = None,
        run_id: str | None = None,
    ) -> None:
        """Forget one unit: a message id, ``episode:N``, ``semantic:N`` or ``theme:N`` (its
        statements) with the scope (a message id unique in the store needs none). Derived
        episodes, statements, themes and graphs follow. The message ids it removes leave the
        operations log too; the log keeps the deletion with a digest of a deleted message's id."""
        self._check_open(write=True)
        with (
            self._writer,
            self._write_section(),
            self._using(self._owner(unit_id, user_id, agent_id, run_id)),
        ):
            key, kind, row = self._locate(unit_id, user_id, agent_id, run_id)
            mem = self._current(key)
            drop, nodes, hashes, logged = self._deletion(mem, kind, row, unit_id)
            forgotten = list(engine_state(mem).forgotten) + hashes
            self._forget(mem, drop, {}, nodes, forgotten, op=("delete", [logged]))

    def _deletion(
        self, mem: MemorySlice, kind: str, row: int, unit_id: str
    ) -> tuple[set[str], set[int], list[str], str]:
        """What deleting unit ``unit_id`` (``kind``, local ``row``) of ``mem`` forgets: (message ids,
        statement rows, statement hashes never to be extracted again, the id its log entry names)."""
        drop: set[str] = set()
        nodes: set[int] = set()
        hashes: list[str] = []
        if kind == "message":
            return (
                {unit_id},
                nodes,
                hashes,
                "message sha256:" + hashlib.sha256(unit_id.encode()).hexdigest()[:16],
            )
        if kind == "episode":
            drop = {str(mem.cols["msg"]["id"][r]) for r in valid_rows(mem.cols["epi"]["msgs"][row])}
        elif kind == "semantic":
            nodes = {row}
        else:
            nodes = set(np.flatnonzero(mem.cols["sem"]["theme"] == row).tolist())
        for r in sorted(nodes):
            hashes += self._statement_hashes(mem, r)
        return drop, nodes, hashes, unit_id

    def _statement_hashes(self, mem: MemorySlice, row: int) -> list[str]:
        """Hashes of every raw statement that became semantic node ``row``: its sources' statements
        closer to it than the de-duplication threshold (so extracting them again cannot bring it back)."""
        sc, ec = mem.cols["sem"], mem.cols["epi"]
        rows = sorted(valid_rows(sc["msgs"][row]))
        src = messages_at(mem, rows)
        by_id = {}  # each source's episode (the last that holds it)
        for m, r in zip(src, rows):
            holds = np.flatnonzero((ec["msgs"] == r).any(axis=1))
            if len(holds):
                by_id[m.id] = int(ec["id"][holds[-1]])
        eps = [
            Episode(eid, "", "", [m.id for m in src if by_id.get(m.id) == eid])
            for eid in sorted(set(by_id.values()))
        ]
        raw = extract_statements(
            Conversation(mem.memory_id, tuple((engine_state(mem).speakers + ("", ""))[:2]), src),
            eps,
            self.config.semantic,
            previous=turns_before(mem, rows) if self.config.semantic.read_replies_with_questions else None,
        )
        sem_cfg = self.config.semantic
        hashes = forgotten_hashes(str(sc["text"][row]), sem_cfg)
        if raw:
            x = self._embed_cache.encode([r.text for r in raw])
            sims = x @ sc["x"][row]
            for r, s in zip(raw, sims):
                if s > sem_cfg.dedup_threshold:
                    hashes |= forgotten_hashes(r.text, sem_cfg)
        return sorted(hashes)

    def _forget(
        self,
        mem: MemorySlice,
        drop: set[str],
        texts: dict[str, str],
        nodes: set[int],
        forgotten: list[str],
        op: tuple[str, list[str]],
    ) -> None:
        """Memory ``mem`` without messages ``drop`` and statements ``nodes`` (local rows), with new
        ``texts`` (message id -> text) for some messages, and without everything derived from them
        (``construct.forget``): the touched episodes made again, the touched statements extracted
        again from their other sources (a message added with ``infer=False`` is not), then an add's growth; ``forgotten`` statement hashes are never
        extracted again. The changed texts are embedded (through the cache: every other row is
        reused); the user's name is learned again when its message goes or changes. One commit."""
        grown = self._without(mem, drop, texts, nodes, forgotten)
        # a redaction, even of no message id: the store writes a fresh base, so no file it still names
        # holds what was forgotten (a statement deleted alone need not lower the statement count)
        self._commit(grown, [(mem.memory_id, op[0], op[1])], redact={mem.memory_id: drop}, previous=[mem])

    def _without(
        self, mem: MemorySlice, drop: set[str], texts: dict[str, str], nodes: set[int], forgotten: list[str]
    ) -> list[MemorySlice]:
        """``_forget``'s new memory, not committed (a batch commits several at once)."""
        cache = self._embed_cache
        ids = mem.cols["msg"]["id"].tolist()
        changed = messages_at(mem, [r for r, i in enumerate(ids) if i in texts and i not in drop])
        changed_x = (
            embed_messages(
                cache,
                [Message(m.id, m.speaker, texts[m.id], m.session, m.timestamp) for m in changed],
                self.config.semantic.passage_words,
            )
            if changed
            else None
        )
        reduced, restate = forget(
            mem,
            drop,
            texts,
            changed_x,
            nodes,
            tuple(forgotten),
            replies_read_with_questions=self.config.semantic.read_replies_with_questions,
        )
        raw = mem.engine.raw if mem.engine is not None else ()
        restate = set(restate) - set(raw)  # kept as given: nothing derived from them
        grown = grow(
            [reduced],
            [[]],
            cache,
            self.config,
            new_x=[MessageVectors.empty(int(mem.cols["msg"]["x"].shape[1]))],
            backend=self.backend,
            restate=[restate],
            memo=self._theme_memo,
        )
        for new in grown:
            unit_ids.assign(mem, new, drop)
            carry_over(
                mem,
                new,
                drop,
                {},
                _name_kept(mem.engine, reduced, drop | set(texts)),
                [],
                replies_read_with_questions=self.config.semantic.read_replies_with_questions,
                encode=self._embed_cache.encode,
            )
        return grown

    def delete_all(
        self, *, user_id: str | None = None, agent_id: str | None = None, run_id: str | None = None
    ) -> int:
        """Forget every memory of this scope, mem0's way (``scope_keys``: a part left out matches any,
        so ``user_id`` alone forgets the user's memories across its agents and runs), and their
        operations logs (one ``delete_all`` entry with no ids stays for each); returns the number of
        messages they held (0 if none). Quarantined memories in the scope are removed too. One commit."""
        self._check_open(write=True)
        with self._writer, self._write_section():
            keys = self.scope_keys(user_id, agent_id, run_id, quarantined=True)
            stored = [k for k in keys if k in self._loaded or k in self.quarantined]
            bare = [k for k in keys if k not in stored]
            if bare:
                _forget_scoped_rows(self.store, bare)  # an integration's rows of a scope with no memory
            if not stored:
                return 0
            n = 0
            for key in stored:
                b = self.bank.index.get(key)
                n += int(self.bank.msg.seg.lengths[b]) if b is not None else self.store.counts(key)["msg"]
            self._commit([], [(k, "delete_all", []) for k in stored], delete=stored)
            self.store.maybe_compact()
            return n

    def update(
        self,
        unit_id: str,
        text: str,
        *,
        user_id: str | None = None,
        agent_id: str | None = None,
        run_id: str | None = None,
    ) -> dict:
        """Give a message new text (mem0's ``update``): what was derived from the old text is derived
        again, as after a delete, and the old text leaves the store. Derived units (``semantic:N``,
        ...) are not edited: update the message they came from. Returns the updated message."""
        self._check_open(write=True)
        new = inputs.text({"text": text}, ("text",), "update", self.limits.max_text_chars)
        with (
            self._writer,
            self._write_section(),
            self._using(self._owner(unit_id, user_id, agent_id, run_id)),
        ):
            key, kind, _ = self._locate(unit_id, user_id, agent_id, run_id)
            if kind != "message":
                raise ValueError(
                    f"update: {unit_id!r} is a derived {kind}; update the messages it came from "
                    "(its message_ids) or delete it"
                )
            mem = self._current(key)
            self._forget(
                mem, set(), {unit_id: new}, set(), list(engine_state(mem).forgotten), op=("update", [unit_id])
            )
            unit = self._message_unit(key, unit_id)
        return unit

    def batch_update(self, memories: Sequence[dict]) -> list[dict]:
        """mem0's ``batch_update``: ``memories`` a list of ``{"memory_id", "text", "user_id"?,
        "agent_id"?, "run_id"?}`` (at most ``MAX_BATCH_UNITS``; each a message, as ``update`` takes
        it, named once). Every item is checked and found before anything changes; then each touched
        memory is derived again once, and the whole batch is one atomic commit: every update or none.
        Returns the updated messages, in the items' order."""
        self._check_open(write=True)
        items = _batch_items(memories, "batch_update", self.limits.max_text_chars)
        with self._writer, self._write_section(), self._using(self._batch_owners(items)):
            found = self._locate_batch(items, "batch_update")
            texts: dict[str, dict[str, str]] = {}
            for (where, mid, _, text), (key, kind, _) in zip(items, found):
                if kind != "message":
                    raise ValueError(
                        f"{where}: memory_id: {mid!r} is a derived {kind}; update the messages it came "
                        "from (its message_ids) or delete it"
                    )
                texts.setdefault(key, {})[mid] = text
            grown, log, mems = [], [], []
            for key, new in texts.items():
                mem = self._current(key)
                grown += self._without(mem, set(), new, set(), list(engine_state(mem).forgotten))
                log.append((key, "update", list(new)))
                mems.append(mem)
            self._commit(grown, log, previous=mems)
            with self._rw.read():
                return [self._unit_of(key, mid, True) for (_, mid, _, _), (key, _, _) in zip(items, found)]

    def batch_delete(self, memories: Sequence[dict]) -> list[str]:
        """mem0's ``batch_delete``: ``memories`` a list of ``{"memory_id", "user_id"?, "agent_id"?,
        "run_id"?}`` (at most ``MAX_BATCH_UNITS``; any unit ``delete`` takes, named once). Every item is
        checked and found before anything changes; then each touched memory forgets its units at
        once (``delete``'s rules), and the whole batch is one atomic commit: every delete or none.
        Returns the ids deleted, in the items' order."""
        self._check_open(write=True)
        items = _batch_items(memories, "batch_delete", None)
        with self._writer, self._write_section(), self._using(self._batch_owners(items)):
            found = self._locate_batch(items, "batch_delete")
            plans: dict[str, tuple[MemorySlice, set[str], set[int], list[str], list[str]]] = {}
            for (_, mid, _, _), (key, kind, row) in zip(items, found):
                if key not in plans:
                    mem = self._current(key)
                    plans[key] = (mem, set(), set(), list(engine_state(mem).forgotten), [])
                mem, drop, nodes, forgotten, logged = plans[key]
                d, n, h, shown = self._deletion(mem, kind, row, mid)
                drop |= d
                nodes |= n
                forgotten += h
                logged.append(shown)
            grown, log, redact = [], [], {}
            for key, (mem, drop, nodes, forgotten, logged) in plans.items():
                grown += self._without(mem, drop, {}, nodes, forgotten)
                log.append((key, "delete", logged))
                redact[key] = drop  # a fresh base whatever was deleted (see _forget)
            self._commit(grown, log, redact=redact, previous=[p[0] for p in plans.values()])
            return [mid for _, mid, _, _ in items]

    def _batch_owners(self, items: list[tuple[str, str, dict, str | None]]) -> list[str]:
        """The memories a batch's items may name, to make resident before ``_locate_batch``."""
        return [k for _, mid, scope, _ in items for k in self._owner(mid, **scope)]

    def _locate_batch(
        self, items: list[tuple[str, str, dict, str | None]], call: str
    ) -> list[tuple[str, str, int]]:
        """Each checked batch item's (memory key, kind, local row) (``_locate``); a refusal names the
        item, and a unit named twice is refused."""
        out, seen = [], {}
        for where, mid, scope, _ in items:
            try:
                at = self._locate(mid, scope["user_id"], scope["agent_id"], scope["run_id"])
            except KeyError as exc:
                raise KeyError(f"{where}: memory_id: {exc.args[0] if exc.args else exc}") from None
            except ValueError as exc:
                raise ValueError(f"{where}: memory_id: {exc}") from None
            if (at[0], at[1], mid) in seen:
                raise ValueError(
                    f"{where}: memory_id: {mid!r} is named twice in this {call} "
                    f"(first at {seen[at[0], at[1], mid]})"
                )
            seen[at[0], at[1], mid] = where.rpartition(": ")[2]
            out.append(at)
        return out

    def _message_unit(self, key: str, mid: str) -> dict:
        with self._rw.read():
            return self._unit_of(key, mid, True)

    def reset(self) -> int:
        """Forget every memory of the store (mem0's ``reset``), each as ``delete_all`` would; returns
        the number of memories removed."""
        self._check_open(write=True)
        with self._writer, self._write_section():
            keys = sorted(set(self._loaded) | set(self.quarantined))
            if not keys:
                _forget_scoped_rows(self.store, None)
                return 0
            self._commit([], [(k, "reset", []) for k in keys], delete=keys)
            self.store.maybe_compact()
            return len(keys)


def _batch_items(
    memories: object, call: str, max_text: int | None
) -> list[tuple[str, str, dict, str | None]]:
    """A batch update's (``max_text``: a text's limit) or delete's (None: no text) items checked:
    (where, memory id, scope, new text or None) each; at most ``MAX_BATCH_UNITS``."""
    name = f"{call}: memories"
    if isinstance(memories, (str, bytes, dict)) or not isinstance(memories, Sequence):
        raise ValueError(
            f"{name}: expected a list of {{'memory_id': ...}} objects, got {type(memories).__name__}"
        )
    if len(memories) > MAX_BATCH_UNITS:
        raise ValueError(f"{name}: {len(memories)} items, more than the limit of {MAX_BATCH_UNITS}")
    fields = BATCH_FIELDS | ({"text"} if max_text is not None else set())
    out = []
    for n, item in enumerate(memories):
        where = f"{name}[{n}]"
        if not isinstance(item, dict):
            raise ValueError(f"{where}: expected an object, got {type(item).__name__}")
        unknown = set(item) - fields
        if unknown:
            raise ValueError(f"{where}: unknown fields {sorted(unknown)}; expected some of {sorted(fields)}")
        if "memory_id" not in item:
            raise ValueError(f"{where}: memory_id: required")
        mid = inputs.check_id(item["memory_id"], f"{where}: memory_id")
        scope = {
            k: None if item.get(k) is None else inputs.check_id(item[k], f"{where}: {k}")
            for k in ("user_id", "agent_id", "run_id")
        }
        text = None if max_text is None else inputs.text(item, ("text",), where, max_text)
        out.append((where, mid, scope, text))
    return out


def _forget_scoped_rows(store: object, keys: list[str] | None) -> None:
    """What a commit deleting memories does to the store's integration rows (``Store.SCOPED_ROWS``),
    where there is no memory to delete: the rows of ``keys`` (None: all) go."""
    forget = getattr(store, "forget_scoped_rows", None)
    if forget is not None:
        forget(keys)


UserName = tuple[str | None, dict | None]  # the user's name and the message that gave it (None: the app's)


def carry_over(
    old: MemorySlice | Memory,
    new: MemorySlice,
    dropped: set[str],
    added: dict[str, dict],
    name: UserName,
    stamped: list[str],
    raw: list[str] = (),
    *,
    replies_read_with_questions: bool = False,
    encode: Callable[[list[str]], np.ndarray] | None = None,
) -> None:
    """What the engine keeps beside the derived units, from ``old`` to ``new`` (in place): message
    metadata (stats), and in ``new``'s engine state the user's name (``name``: ``name_after`` /
    ``_name_kept``), the ids of messages stamped at arrival and of those kept without inference
    (``raw``: new ones), supersessions (of what each statement says, without the question a reply
    was read with where ``replies_read_with_questions``; ``encode``, the statements' encoder, lets a
    long change statement be compared by the part that says what changed); the dropped ids leave."""
    meta.carry(old, new, added, dropped)
    if new.engine is None:
        new.engine = EngineState.closed(new.n("msg"))
    was = old.engine if old.engine is not None else EngineState()
    state = new.engine
    state.user_name, state.user_name_from = name if name[0] else (None, None)
    msg, sem = new.cols["msg"], new.cols["sem"]
    alive = set(msg["id"].tolist())

    def kept(before: tuple[str, ...], more: list[str]) -> tuple[str, ...]:
        return tuple(i for i in list(before) + list(more) if i in alive and i not in dropped)

    state.stamped, state.raw = kept(was.stamped, stamped), kept(was.raw, raw)
    sem_ids = sem["id"].tolist()
    # the earlier decisions between statements still there stand; the statements new to this write are tried
    live = set(sem_ids)
    stand = {k: list(v) for k, v in was.superseded.items() if int(k) in live and int(v[0]) in live}
    known = old.cols["sem"]["id"] if isinstance(old, MemorySlice) else [s.id for s in old.semantics]
    fresh = np.flatnonzero(~np.isin(np.asarray(sem["id"], np.int64), np.asarray(known, np.int64)))
    # only a new statement that says something changed, or denies something, can supersede: the others cost
    # no pass over the memory
    # a reply read with its question (read_replies_with_questions) changes what it says, not what was asked
    new_firsts = _first_sources(sem["msgs"][fresh])
    said = without_question if replies_read_with_questions else str
    new_texts = [said(t) for t in sem["text"][fresh].tolist()]
    new_speakers = msg["speaker"][new_firsts].tolist()
    if any(changes(t, sp) or denial(t, sp) for t, sp in zip(new_texts, new_speakers)):
        firsts = _first_sources(sem["msgs"])
        texts = [said(t) for t in sem["text"].tolist()]
        sup = supersessions(
            texts, sem["x"], firsts, msg["speaker"][firsts].tolist(), new=fresh, encode=encode
        )
    else:
        sup = {}
    found = {str(sem_ids[i]): [sem_ids[j], time_or_none(sem["time"][j])] for i, j in sup.items()}
    state.superseded = {**found, **stand}  # an earlier decision stands (the first change superseded it)


def _first_sources(msgs: np.ndarray) -> np.ndarray:
    """Each statement's first source message row [n] int64 (rows are in conversation order), of its
    ``sem.msgs`` rows [n, w] (-1 padded)."""
    big = np.iinfo(np.int32).max
    return np.where(msgs >= 0, msgs, big).min(axis=1, initial=big).astype(np.int64)


def name_after(
    state: EngineState | None, given: str | None, claim: tuple[people.NameClaim, str] | None
) -> UserName:
    """The user's name after an add to a memory with engine ``state``: the app's ``given`` one; else
    a name the user gave now (``claim``: the claim and its message id) where it replaces the one
    learned before (``people.replaces``; the app's stays); else the one before."""
    name, source = (state.user_name, state.user_name_from) if state is not None else (None, None)
    if given:
        return given, None
    if claim is not None and (
        not name
        or (
            source is not None and people.replaces(claim[0], people.NameClaim(name, bool(source["explicit"])))
        )
    ):
        return claim[0].name, {"id": claim[1], "explicit": claim[0].explicit}
    return (name, source) if name else (None, None)


def _name_kept(state: EngineState | None, remains: MemorySlice, touched: set[str]) -> UserName:
    """The user's name after a delete or an update: unchanged unless the message that gave it is
    among ``touched`` (deleted or given new text); then learned again from the messages of
    ``remains`` (what is left, in order), or none: a name is forgotten with its source."""
    name, source = (state.user_name, state.user_name_from) if state is not None else (None, None)
    if source is None or source.get("id") not in touched:
        return (name, source) if name else (None, None)
    best: tuple[people.NameClaim, str] | None = None
    mc = remains.cols["msg"]
    for mid, speaker, text in zip(mc["id"].tolist(), mc["speaker"].tolist(), mc["text"].tolist()):
        if (
            speaker == people.NEUTRAL
            and (c := people.name_claim(text)) is not None
            and people.replaces(c, best and best[0])
        ):
            best = (c, mid)
    return name_after(None, None, best)


def _no_statements(config):
    """``config`` under which growth derives no statement (every sentence is too short)."""
    return replace(config, semantic=replace(config.semantic, min_words=2**62))


def _statements(mem: MemorySlice) -> dict[str, tuple[str, int, str | None]]:
    """``semantic:N`` -> (its text as shown, its number of source messages, the id of the statement
    that superseded it or None)."""
    name = shown_name(mem.engine)
    sup = mem.engine.superseded if mem.engine is not None else {}
    sc = mem.cols["sem"]
    return {
        f"semantic:{i}": (
            people.named(text, name),
            n,
            f"semantic:{sup[str(i)][0]}" if str(i) in sup else None,
        )
        for i, text, n in zip(sc["id"].tolist(), sc["text"].tolist(), (sc["msgs"] >= 0).sum(axis=1).tolist())
    }


def _statement_events(before: dict, after: dict) -> list[dict]:
    """mem0's events for the statements of a memory from ``before`` to ``after`` (``_statements``)."""
    out = []
    for sid, (text, n, sup) in after.items():
        was = before.get(sid)
        if was is None:
            out.append({"id": sid, "memory": text, "event": "ADD"})
        elif was[0] != text:
            out.append({"id": sid, "memory": text, "event": "UPDATE", "previous_memory": was[0]})
        elif sup is not None and was[2] is None:
            newer = after.get(sup, (text,))[0]
            out.append(
                {"id": sid, "memory": newer, "event": "UPDATE", "previous_memory": text, "superseded_by": sup}
            )
        elif n > was[1]:
            out.append({"id": sid, "memory": text, "event": "NONE"})
    out += [
        {"id": sid, "memory": was[0], "event": "DELETE"} for sid, was in before.items() if sid not in after
    ]
    return [e | {"type": "semantic"} for e in out]


def _takes_previous(backend: object) -> bool:
    """Whether ``backend.commit`` takes the caller's copies (``Store.commit(previous=)``): the
    backend says so (``takes_previous``)."""
    return getattr(backend, "takes_previous", False) is True
