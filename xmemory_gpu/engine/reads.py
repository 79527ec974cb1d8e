"""The reading half of ``MemoryEngine``: ``search`` / ``search_batch`` (scopes batched into one
retrieval call, filters, limits, the no-answer gate, superseded statements shown as such), ``get_all``,
``get``, ``history``, ``scopes``, ``stats``, and locating a unit id in its memory."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..construct.pipeline import theme_summary
from ..memory.bank import Bank
from ..memory.hierarchy import Memory, slice_from_memory, view
from ..memory.subset import restrict
from ..retrieve.context import semantic_unit
from ..retrieve.result import RetrievalResult, RetrievedUnit
from ..retrieve.retriever import Retriever
from . import ids as unit_ids
from . import inputs, people
from . import metadata as meta
from .inputs import scope_key, scope_of
from .keys import (
    SEARCH_ITEM_FIELDS,
    STAMPED,
    SUPERSEDED,
    USER_NAME,
)
from .results import (
    check_limit,
    check_threshold,
    gate_for,
    limit_units,
    mark_relevance,
    no_answer,
    show_current,
    show_name,
)


class Reads:
    """Mixin of :class:`~.engine.MemoryEngine`: every read."""

    def search(
        self,
        query_or_queries: str | Sequence[str],
        *,
        user_id: str,
        agent_id: str | None = None,
        run_id: str | None = None,
        strategy: str = "xmemory",
        budget_tokens: int | None = None,
        limit: int | None = None,
        threshold: float | None = None,
        filters: dict | None = None,
    ) -> list[RetrievalResult]:
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
        item = {
            "queries": queries,
            "user_id": user_id,
            "agent_id": agent_id,
            "run_id": run_id,
            "strategy": strategy,
            "budget_tokens": budget_tokens,
            "limit": limit,
            "threshold": threshold,
            "filters": filters,
        }
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
                raise ValueError(
                    f"{where}: unknown fields {sorted(unknown)}; expected some of {sorted(SEARCH_ITEM_FIELDS)}"
                )
            qs = inputs.queries(it["queries"] if "queries" in it else it.get("query"), f"{where}: queries")
            key = self._usable(scope_key(it.get("user_id"), it.get("agent_id"), it.get("run_id")))
            opts = (
                check_limit(it.get("limit"), f"{where}: limit"),
                check_threshold(it.get("threshold"), f"{where}: threshold"),
                meta.filters(it.get("filters"), f"{where}: filters"),
            )
            parsed.append(
                (
                    qs,
                    key,
                    it.get("strategy", "xmemory"),
                    inputs.budget_tokens(it.get("budget_tokens"), f"{where}: budget_tokens"),
                    opts,
                )
            )
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
                res = iter(
                    self.retriever.search(qs, mids, strategy=strategy, budget_tokens=budget) if qs else []
                )
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

    def _finish(
        self,
        r: RetrievalResult,
        limit: int | None,
        threshold: float | None,
        superseded: dict[str, tuple[str, float | None]],
        budget: int | None,
        successor=None,
    ) -> RetrievalResult:
        """Public ids, relevance marked, changed facts shown as such, then the caller's ``limit`` /
        ``threshold`` or, without a threshold, the configured no-answer gate (``live.no_answer_threshold``);
        last, "the user" read as the user's name where one is known."""
        mark_relevance(_public_ids(r))
        show_current(r, superseded, self.retriever.budget.count, budget, successor)
        if threshold is None:
            no_answer(r, gate_for(self.config.live.no_answer_threshold, self.embedder.name))
        limit_units(r, self.retriever.budget.count, limit, threshold)
        return show_name(r, self._subject_name(r.memory_id), self.retriever.budget.count, budget)

    def _about_subject(self, key: str, queries: list[str]) -> list[str]:
        """The queries with their first person, and the user's name, turned into the memory's subject
        (a role chat's "the user"; in a memory whose statements carry the user's name, that name);
        unchanged for a memory of named speakers."""
        b = self.bank.index.get(key)
        if b is None:
            return queries
        name, eng = self.bank.stats[b].get(USER_NAME), self.bank.engine[b]
        if eng is not None and people.NEUTRAL in eng.speakers:
            return [people.about_subject(people.neutral(q, name), people.NEUTRAL) for q in queries]
        return queries if not name else [people.about_subject(q, name) for q in queries]

    def _subject_name(self, key: str) -> str | None:
        """The user's name to show for "the user" in memory ``key`` (None: none known, or the memory
        does not speak of "the user")."""
        b = self.bank.index.get(key)
        return None if b is None else _shown_name(self.bank.stats[b], self.bank.engine[b])

    def _empty(self, query: str, key: str, strategy: str, note: str) -> RetrievalResult:
        return RetrievalResult(query, key, strategy, [], "", 0, self.retriever.budget.name, notes=[note])

    def _filtered(
        self, queries: list[str], key: str, strategy: str, budget: int | None, flt: dict
    ) -> list[RetrievalResult]:
        """The queries against the scope's memory restricted to the messages matching ``flt``."""
        mem = view(self.bank, self.bank.index[key])
        ok = meta.matching(mem, flt)
        if not ok:
            return [self._empty(q, key, strategy, "no message matches the filters") for q in queries]
        sub = restrict(mem, ok, theme_summary)
        retriever = Retriever(
            Bank.from_slices([slice_from_memory(sub)], self.bank.dim),
            self.embedder,
            self.config,
            backend=self.backend,
            tokens=self.retriever.budget.tokens,
            reader=self.retriever.reader,
        )
        return retriever.search(queries, key, strategy=strategy, budget_tokens=budget)

    def get_all(
        self,
        *,
        user_id: str,
        agent_id: str | None = None,
        run_id: str | None = None,
        filters: dict | None = None,
    ) -> list[dict]:
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
            units = units_of(mem)
            if flt is None:
                return units
            ok = meta.matching(mem, flt)
            theme_src: dict[str, set[str]] = {}
            for s, r in zip(mem.semantics, np.asarray(mem.theme_of).tolist()):
                theme_src.setdefault(f"theme:{mem.themes[r].id}", set()).update(s.message_ids)
            return [u for u in units if meta.matches_unit(u, ok, theme_src)]

    def get(
        self,
        unit_id: str,
        *,
        user_id: str | None = None,
        agent_id: str | None = None,
        run_id: str | None = None,
    ) -> dict:
        """One unit by the id ``get_all`` or a search result gives it."""
        self._check_open()
        with self._using(self._owner(unit_id, user_id, agent_id, run_id)), self._rw.read():
            key, kind, _ = self._locate(unit_id, user_id, agent_id, run_id)
            mem = view(self.bank, self.bank.index[key])
            return next(
                u
                for u in units_of(mem)
                if u["id"] == unit_id and (u["type"] == "message") == (kind == "message")
            )

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
                raise ValueError(
                    f"unit_id {unit_id!r}: episode, semantic and theme ids need user_id (and agent_id, run_id)"
                )
            if (
                self._residency is not None
            ):  # the catalogue's message-id index (most memories are not resident)
                keys = [m for m in self.store.find_message(unit_id) if m not in self.quarantined]
            else:
                rows = np.flatnonzero(self.bank.msg["id"][: self.bank.msg.seg.size] == unit_id)
                keys = [
                    self.bank.memory_ids[b]
                    for b in sorted({int(b) for b in self.bank.msg.seg.memory_of(rows) if b >= 0})
                ]
            if len(keys) != 1:
                raise KeyError(
                    f"unit {unit_id!r}: {'no such message' if not keys else 'ambiguous: give user_id'}"
                )
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
            raise KeyError(
                f"unit {unit_id!r}: ambiguous, it names a message and a derived unit id; "
                "delete_all the scope or re-add its messages under other ids"
            )
        kind, num = unit
        level = {"episode": self.bank.epi, "semantic": self.bank.sem, "theme": self.bank.theme}[kind]
        hit = np.flatnonzero(level["id"][level.seg.rows(b)] == num)
        if not len(hit):
            raise KeyError(f"unit {unit_id!r}: no {kind} {num} in this memory")
        return key, kind, int(hit[0])

    def stats(self) -> dict[str, Any]:
        with self._rw.read():
            out = {
                "memories": self.bank.n_memories,
                "messages": int(self.bank.msg.seg.lengths.sum()),
                "semantics": int(self.bank.sem.seg.lengths.sum()),
                "themes": int(self.bank.theme.seg.lengths.sum()),
                "quarantined": len(self.quarantined),
                "time": time.time(),
            }
        out |= {"resident_memories": out["memories"], "max_resident_bytes": None}  # every memory resident
        if self._residency is not None:  # the counts above are of the resident memories
            with self._res_lock:
                out |= {
                    "memories": len(self._loaded) - len(set(self.quarantined) & set(self._loaded)),
                    "resident_memories": out["memories"],
                    "resident_bytes": self._residency.resident_bytes,
                    "max_resident_bytes": self._residency.budget,
                }
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
            elif (
                len(u.message_ids) == 1
                and u.id != u.message_ids[0]
                and u.id.startswith(u.message_ids[0] + "#p")
            ):
                u.id = u.message_ids[0]
    return r


def _shown_name(stats: dict, engine) -> str | None:
    """The name shown for "the user" in a memory with these stats and engine state (see ``_subject_name``)."""
    return stats.get(USER_NAME) if engine is not None and people.NEUTRAL in engine.speakers else None


def units_of(mem: Memory) -> list[dict]:
    """Every unit of a memory as ``get_all`` lists it (messages with metadata and timestamp source,
    episodes, statements with what superseded them, themes), "the user" read as the user's name where
    one is known."""
    md, stamped = meta.of_memory(mem), set(mem.stats.get(STAMPED, ()))
    name = _shown_name(mem.stats, mem.engine)

    def shown(text: str) -> str:
        return people.named(text, name)

    out = [
        {
            "id": m.id,
            "type": "message",
            "speaker": shown(m.speaker),
            "text": m.text,
            "timestamp": m.timestamp,
            "timestamp_source": None if m.timestamp is None else "arrival" if m.id in stamped else "given",
        }
        | ({"metadata": md[m.id]} if m.id in md else {})
        for m in mem.messages
    ]
    out += [
        {
            "id": f"episode:{e.id}",
            "type": "episode",
            "title": shown(e.title),
            "text": shown(e.text),
            "message_ids": e.message_ids,
            "timestamp": e.start,
        }
        for e in mem.episodes
    ]
    sup = mem.stats.get(SUPERSEDED) or {}
    out += [
        {
            "id": f"semantic:{s.id}",
            "type": "semantic",
            "text": shown(s.text),
            "message_ids": s.message_ids,
            "timestamp": s.timestamp,
        }
        | (
            {"superseded_by": f"semantic:{sup[str(s.id)][0]}", "valid_until": sup[str(s.id)][1]}
            if str(s.id) in sup
            else {}
        )
        for s in mem.semantics
    ]
    out += [{"id": f"theme:{t.id}", "type": "theme", "text": shown(t.summary)} for t in mem.themes]
    return out
