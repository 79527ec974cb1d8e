"""The writing half of ``MemoryEngine``: ``add`` / ``add_batch`` (request parsing, names for the
user role, arrival stamps, one batched growth), ``delete`` / ``update`` (re-derivation from the
remaining messages: forgetting), ``delete_all`` and ``reset``; each write one atomic store commit,
then the bank under the write lock."""

from __future__ import annotations

import hashlib
import time
import uuid
from collections.abc import Sequence

import numpy as np

from ..construct.incremental import empty_memory, engine_state, grow, statement_hash
from ..construct.segment import MessageVectors, embed_messages
from ..construct.semantic import extract_statements
from ..construct.supersede import supersessions
from ..memory.bank import MemorySlice
from ..memory.engine_state import EngineState
from ..memory.hierarchy import Memory, time_or_none, view
from ..memory.records import Conversation, Episode, Message
from . import ids as unit_ids
from . import inputs, people
from . import metadata as meta
from .inputs import MAX_ID_CHARS, scope_key
from .keys import (
    ADD_ITEM_FIELDS,
    MESSAGE_FIELDS,
    STAMPED,
    SUPERSEDED,
    USER_NAME,
)
from .reads import units_of


class Writes:
    """Mixin of :class:`~.engine.MemoryEngine`: every write."""

    def add(
        self,
        messages: Sequence[dict],
        *,
        user_id: str,
        agent_id: str | None = None,
        run_id: str | None = None,
        metadata: dict | None = None,
        user_name: str | None = None,
    ) -> list[str]:
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
                    raise ValueError(
                        f"{where}: messages: {len(msgs)} messages, more than the limit of {lim.max_messages} "
                        "per memory per call (add them in several calls)"
                    )
                total += len(msgs)
                if total > lim.max_batch_messages:
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
                if name is not None:
                    names[key] = name
                keys.append(key)
                batches.setdefault(key, [])
                ids_out.append(
                    self._parse(
                        key,
                        msgs,
                        batches[key],
                        where,
                        names.get(key) or self._user_name(key),
                        stamped,
                        now,
                        names,
                    )
                )
                if md is not None:
                    added.setdefault(key, {}).update(dict.fromkeys(ids_out[-1], md))
            if not batches:
                return ids_out
            mems = [self._current(k) for k in batches]
            grown = grow(mems, list(batches.values()), self.embedder, self.config, backend=self.backend)
            for old, new in zip(mems, grown):
                unit_ids.assign(old, new, set(), rederived=False)
                _carry(
                    old,
                    new,
                    set(),
                    added.get(old.memory_id, {}),
                    names.get(old.memory_id),
                    stamped.get(old.memory_id, []),
                    rederived=False,
                )
            self._commit(grown, [(m.memory_id, "add", [x.id for x in batches[m.memory_id]]) for m in grown])
            # a name learned now for a memory that called its user "the user": its earlier turns are
            # the named person's too (statements and questions then use one name); a second commit
            named = [
                (view(self.bank, self.bank.index[m.memory_id]), names[m.memory_id])
                for m, old in zip(grown, mems)
                if names.get(m.memory_id)
                and not old.stats.get(USER_NAME)
                and (m.cols["msg"]["speaker"] == people.NEUTRAL).any()
            ]
            for mem, name in named:
                self._rederive(
                    [mem],
                    [set()],
                    [list(engine_state(mem).forgotten)],
                    op=("name", []),
                    rename={people.NEUTRAL: name},
                )
            return ids_out

    def _user_name(self, key: str) -> str | None:
        b = self.bank.index.get(key)
        return None if b is None else self.bank.stats[b].get(USER_NAME)

    def _parse(
        self,
        key: str,
        msgs: Sequence[dict],
        out: list[Message],
        where: str,
        user_name: str | None,
        stamped: dict[str, list[str]],
        now: float,
        names: dict[str, str],
    ) -> list[str]:
        b = self.bank.index.get(key)
        taken = set(self.bank.msg["id"][self.bank.msg.seg.rows(b)].tolist()) if b is not None else set()
        taken |= {m.id for m in out}
        last_session = (
            int(self.bank.msg["session"][self.bank.msg.seg.rows(b)[-1]])
            if b is not None and self.bank.msg.seg.lengths[b]
            else 0
        )
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

    def _commit(
        self,
        slices: list[MemorySlice],
        log: list[tuple[str, str, list[str]]],
        delete: list[str] = (),
        redact: dict[str, set[str]] | None = None,
    ) -> None:
        """Store first (atomic), then the bank under the write lock: readers never see half a batch."""
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
            mem = view(self.bank, self.bank.index[key])
            drop: set[str] = set()
            forgotten = list(engine_state(mem).forgotten)
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
        eps = [
            Episode(eid, "", "", [m.id for m in src if by_id.get(m.id) == eid])
            for eid in sorted(set(by_id.values()))
        ]
        raw = extract_statements(
            Conversation(mem.memory_id, tuple((engine_state(mem).speakers + ("", ""))[:2]), src),
            eps,
            self.config.semantic,
        )
        hashes = {statement_hash(node.text)}
        if raw:
            x = self.embedder.encode([r.text for r in raw])
            sims = x @ mem.sem_x[row]
            hashes |= {
                statement_hash(r.text) for r, s in zip(raw, sims) if s > self.config.semantic.dedup_threshold
            }
        return sorted(hashes)

    def _rederive(
        self,
        mems: list[Memory],
        drops: list[set[str]],
        forgotten: list[list[str]],
        op: tuple[str, list[str]],
        texts: dict[str, str] | None = None,
        rename: dict[str, str] | None = None,
    ) -> None:
        """Re-derive each memory from its messages but the dropped ones; ``texts`` (message id ->
        text) replaces the text of messages and ``rename`` (speaker -> speaker) their speakers (both
        embedded again)."""
        empties, keep_msgs, keep_x = [], [], []
        texts, rename = texts or {}, rename or {}
        for mem, drop, fg in zip(mems, drops, forgotten):
            rows = [i for i, m in enumerate(mem.messages) if m.id not in drop]
            speakers = tuple(rename.get(sp, sp) for sp in engine_state(mem).speakers)
            empties.append(
                empty_memory(
                    mem.memory_id,
                    self.embedder.dim,
                    self.config.knn.k_semantics,
                    EngineState(speakers=speakers, forgotten=tuple(sorted(set(fg)))),
                )
            )
            msgs = [mem.messages[i] for i in rows]
            x = MessageVectors(mem.msg_x, mem.psg_x, mem.psg_msg).take(np.asarray(rows, np.int64))
            changed = [j for j, m in enumerate(msgs) if m.id in texts or m.speaker in rename]
            if changed:
                msgs = [
                    Message(
                        m.id,
                        rename.get(m.speaker, m.speaker),
                        texts.get(m.id, m.text),
                        m.session,
                        m.timestamp,
                    )
                    for m in msgs
                ]
                x = _replace_rows(
                    x,
                    changed,
                    embed_messages(
                        self.embedder, [msgs[j] for j in changed], self.config.semantic.passage_words
                    ),
                )
            keep_msgs.append(msgs)
            keep_x.append(x)
        grown = grow(empties, keep_msgs, self.embedder, self.config, new_x=keep_x, backend=self.backend)
        for old, new, drop in zip(mems, grown, drops):
            unit_ids.assign(old, new, drop, rederived=True)
            _carry(old, new, drop, {}, None, [], rederived=True)
        self._commit(
            grown,
            [(m.memory_id, op[0], op[1]) for m in grown],
            redact={m.memory_id: drop for m, drop in zip(mems, drops) if drop},
        )

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
            mem = view(self.bank, self.bank.index[key])
            self._rederive(
                [mem],
                [set()],
                [list(engine_state(mem).forgotten)],
                op=("update", [unit_id]),
                texts={unit_id: new},
            )
            unit = self._message_unit(key, unit_id)
        return unit

    def _message_unit(self, key: str, mid: str) -> dict:
        with self._rw.read():
            mem = view(self.bank, self.bank.index[key])
            return next(u for u in units_of(mem) if u["type"] == "message" and u["id"] == mid)

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


def _item_keys(items: Sequence[dict]) -> list[str]:
    """The memory keys of ``add_batch`` items whose scope parses (the others fail in the full check)."""
    out = []
    for it in items:
        try:
            out.append(scope_key(it.get("user_id"), it.get("agent_id"), it.get("run_id")))
        except (AttributeError, TypeError, ValueError):
            continue
    return out


def _carry(
    old: Memory,
    new: MemorySlice,
    dropped: set[str],
    added: dict[str, dict],
    user_name: str | None,
    stamped: list[str],
    *,
    rederived: bool,
) -> None:
    """What the engine keeps beside the derived units, from ``old`` to ``new`` (in place): message
    metadata, the user's name, the ids of messages stamped at arrival; the dropped ids leave."""
    meta.carry(old, new, added, dropped)
    name = user_name or old.stats.get(USER_NAME)
    if name:
        new.stats[USER_NAME] = name
    msg, sem = new.cols["msg"], new.cols["sem"]
    alive = set(msg["id"].tolist())
    ids = [i for i in list(old.stats.get(STAMPED, ())) + stamped if i in alive and i not in dropped]
    if ids:
        new.stats[STAMPED] = ids
    else:
        new.stats.pop(STAMPED, None)
    sem_ids = sem["id"].tolist()
    # each statement's first source message (its row: rows are in conversation order)
    firsts = np.where(sem["msgs"] >= 0, sem["msgs"], np.iinfo(np.int32).max).min(
        axis=1, initial=np.iinfo(np.int32).max
    )
    # a growth keeps the earlier decisions and tries the statements it added; a re-derivation (a delete,
    # an update, a rename) decides again for all
    live = set(sem_ids)
    kept = (
        {}
        if rederived
        else {
            k: v for k, v in (old.stats.get(SUPERSEDED) or {}).items() if int(k) in live and int(v[0]) in live
        }
    )
    known = {s.id for s in old.semantics}
    fresh = None if rederived else np.array([r for r, i in enumerate(sem_ids) if i not in known], np.int64)
    sup = (
        supersessions(
            sem["text"].tolist(),
            sem["x"],
            firsts.astype(np.int64),
            msg["speaker"][firsts].tolist(),
            new=fresh,
        )
        if fresh is None or len(fresh)
        else {}
    )
    found = {str(sem_ids[i]): [sem_ids[j], time_or_none(sem["time"][j])] for i, j in sup.items()}
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
    return MessageVectors(
        msg_x, np.concatenate([x.psg_x[keep], new.psg_x])[order], owner[order].astype(np.int32)
    )
