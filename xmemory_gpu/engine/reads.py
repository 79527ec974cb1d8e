"""The reading half of ``MemoryEngine``: ``search`` / ``search_batch`` (scopes batched into one
retrieval call, filters, limits, the no-answer gate, superseded statements shown as such), ``get_all``,
``get``, ``hits``, ``history`` and ``stats``. Which memories a scope names, and where a unit id
lives: ``scopes``."""

from __future__ import annotations

import time
from collections.abc import Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, fields
from datetime import datetime, timezone
from typing import Any

import numpy as np

from ..construct.pipeline import theme_summary
from ..memory.bank import Bank
from ..memory.engine_state import EngineState
from ..memory.hierarchy import Memory, slice_from_memory, view
from ..memory.subset import restrict
from ..retrieve.context import assemble, semantic_unit
from ..retrieve.result import RetrievalResult, RetrievedUnit
from ..retrieve.retriever import Retriever
from . import ids as unit_ids
from . import inputs, people
from . import metadata as meta
from .inputs import scope_key, scope_of
from .keys import SEARCH_ITEM_FIELDS
from .results import (
    check_limit,
    check_threshold,
    gate_for,
    limit_units,
    mark_relevance,
    no_answer,
    relevance,
    render,
    show_current,
)
from .rules import integer

PAGE_SIZE = 100  # get_all's units per page when only ``page`` is given (mem0's default)
MAX_PAGE_SIZE = 1000  # get_all's most units per page
MAX_PAGE = 10**9  # get_all's last page number


class Reads:
    """Mixin of :class:`~.engine.MemoryEngine`: every read."""

    def search(
        self,
        query_or_queries: str | Sequence[str],
        *,
        user_id: str | None = None,
        agent_id: str | None = None,
        run_id: str | None = None,
        strategy: str = "xmemory",
        budget_tokens: int | None = None,
        limit: int | None = None,
        threshold: float | None = None,
        filters: dict | None = None,
        top_k: int | None = None,
    ) -> list[RetrievalResult]:
        """One ``RetrievalResult`` per query (a ``ScopedResult``) against this scope's memories: at
        least one of ``user_id``, ``agent_id``, ``run_id``; a part left out matches any
        (``scope_keys``: ``user_id`` alone searches the user's memories across agents and runs, their
        units merged by relevance); empty results when the scope holds nothing. ``hits`` gives the
        units as mem0's results (``score``, ``created_at``, the scope). Every unit id a result carries works with ``get`` and ``delete``
        (``semantic:N``, ``episode:N``, ``theme:N``, a message id), except naive-RAG chunks and
        TIR sessions, which are views over the messages their ``message_ids`` name.

        mem0's options: ``filters`` (``engine.metadata``: metadata, times and scope with mem0's
        operators) restricts the memory before retrieval: only units all of whose source messages
        match are candidates;
        ``threshold`` leaves out units less relevant than it (a cosine), ``limit`` keeps the
        ``limit`` most relevant (``engine.results``); the context shows the kept units only.
        ``top_k`` is mem0's name of ``limit`` (both given: they must agree)."""
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
        if top_k is not None:
            item["top_k"] = top_k
        with named("search", "search_batch: items[0]: "):
            return self.search_batch([item])[0]

    def search_batch(self, items: Sequence[dict]) -> list[list[RetrievalResult]]:
        """Many searches at once (the server's coalescing): items ``{"queries": [...] | "query": str,
        "user_id"?, "agent_id"?, "run_id"?, "strategy"?, "budget_tokens"?, "limit" | "top_k"?,
        "threshold"?, "filters"?}`` (at least one scope part; ``top_k``: mem0's name of ``limit``).
        Queries of every unfiltered item with the same strategy and budget go to one batched ``Retriever.search`` (one embedding call, one launch
        per stage), each query against its own memory; a filtered item searches its memory restricted
        to the matching messages. A scope with a part left out covers every memory within it
        (``scope_keys``); their results are merged by relevance (``_merged``). Returns results per
        item (``ScopedResult``: each unit's scope beside it)."""
        self._check_open()
        parsed = []
        for n, it in enumerate(items):
            where = f"search_batch: items[{n}]"
            if not isinstance(it, dict):
                raise ValueError(f"{where}: expected an object")
            unknown = set(it) - SEARCH_ITEM_FIELDS
            if unknown:
                raise ValueError(
                    f"{where}: unknown fields {sorted(unknown)}; expected some of "
                    f"{sorted(SEARCH_ITEM_FIELDS | {'top_k'})}"
                )
            if "queries" in it and "query" in it:
                raise ValueError(f"{where}: give exactly one of query and queries")
            if isinstance(it.get("queries"), str):
                raise ValueError(f"{where}: queries: expected a list of strings (query takes one)")
            qs = inputs.queries(it["queries"] if "queries" in it else it.get("query"), f"{where}: queries")
            keys = self.scope_keys(it.get("user_id"), it.get("agent_id"), it.get("run_id"))
            exact = scope_key(it.get("user_id"), it.get("agent_id"), it.get("run_id"))
            opts = (
                top_k_limit(it.get("limit"), it.get("top_k"), where),
                check_threshold(it.get("threshold"), f"{where}: threshold"),
                meta.filters(it.get("filters"), f"{where}: filters"),
            )
            parsed.append(
                (
                    qs,
                    keys,
                    exact,
                    it.get("strategy", "xmemory"),
                    inputs.budget_tokens(it.get("budget_tokens"), f"{where}: budget_tokens"),
                    opts,
                )
            )
        subs = [(qs, k, st, bt, op) for qs, keys, _, st, bt, op in parsed for k in keys]
        got = self._search_each(subs)
        out: list[list[RetrievalResult]] = []
        at = 0
        for qs, keys, exact, _, budget, (limit, _, _) in parsed:
            per_key, at = got[at : at + len(keys)], at + len(keys)
            if len(keys) == 1:
                out.append([ScopedResult.of(r, [scope_of(keys[0])] * len(r.units)) for r in per_key[0]])
            else:
                out.append(
                    [
                        self._merged([rs[q] for rs in per_key], keys, limit, budget, exact)
                        for q in range(len(qs))
                    ]
                )
        return out

    def _search_each(self, parsed: list[tuple]) -> list[list[RetrievalResult]]:
        """``search_batch``'s items, one memory each: (queries, key, strategy, budget, (limit,
        threshold, filters)) -> results per item."""
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

    def _merged(
        self,
        results: list[RetrievalResult],
        keys: list[str],
        limit: int | None,
        budget: int | None,
        memory_id: str,
    ) -> ScopedResult:
        """One query's results over several memories as one: the units by relevance, most relevant
        first (ties: the earlier memory), an assistant's answers that a memory ranked after the user's
        statements (``RetrievedUnit.after_users``) after every other unit, at most ``limit``; the
        context assembled again and cut from its last non-theme unit to ``budget`` (None: the largest
        of the memories' contexts)."""
        pairs = sorted(
            ((u, scope_of(k)) for r, k in zip(results, keys) for u in r.units),
            key=lambda p: (
                p[0].after_users,
                -(p[0].relevance if p[0].relevance is not None else relevance(p[0])),
            ),
        )
        if limit is not None:
            pairs = pairs[:limit]
        count = self.retriever.budget.count
        cap = budget if budget is not None else max((r.context_tokens for r in results), default=0)
        context = assemble([u for u, _ in pairs])
        tokens = int(count([context])[0]) if context else 0
        while tokens > cap and any(u.type != "theme" for u, _ in pairs):
            last = max(k for k, (u, _) in enumerate(pairs) if u.type != "theme")
            pairs.pop(last)
            context = assemble([u for u, _ in pairs])
            tokens = int(count([context])[0]) if context else 0
        first = results[0]
        return ScopedResult(
            first.query,
            memory_id,
            first.strategy,
            [u for u, _ in pairs],
            context,
            tokens,
            first.tokenizer,
            llm_calls=sum(r.llm_calls for r in results),
            llm_tokens=sum(r.llm_tokens for r in results),
            timings=dict(first.timings),
            notes=list(dict.fromkeys(n for r in results for n in r.notes)),
            top_relevance=max((r.top_relevance or 0.0 for r in results), default=0.0),
            scopes=[sc for _, sc in pairs],
        )

    def _superseded(self, key: str) -> dict[str, tuple[str, float | None]]:
        b = self.bank.index.get(key)
        eng = self.bank.engine[b] if b is not None else None
        sup = eng.superseded if eng is not None else {}
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
        ``threshold`` or, without a threshold, the configured no-answer gate (``live.no_answer_threshold``),
        all on the units; last the context rendered once (``render``: "the user" read as the user's
        name where one is known, cut to ``budget``)."""
        count = self.retriever.budget.count
        mark_relevance(_public_ids(r))
        show_current(r, superseded, count, successor)
        if threshold is None:
            no_answer(r, gate_for(self.config.live.no_answer_threshold, self.embedder.name))
        limit_units(r, limit, threshold)
        return render(r, count, budget, self._subject_name(r.memory_id))

    def _about_subject(self, key: str, queries: list[str]) -> list[str]:
        """The queries with their first person, and the user's name, turned into the memory's subject
        (a role chat's "the user"; in a memory whose statements carry the user's name, that name);
        unchanged for a memory of named speakers."""
        b = self.bank.index.get(key)
        if b is None:
            return queries
        eng = self.bank.engine[b]
        name = eng.user_name if eng is not None else None
        if eng is not None and people.NEUTRAL in eng.speakers:
            return [people.about_subject(people.neutral(q, name), people.NEUTRAL) for q in queries]
        return queries if not name else [people.about_subject(q, name) for q in queries]

    def _subject_name(self, key: str) -> str | None:
        """The user's name to show for "the user" in memory ``key`` (None: none known, or the memory
        does not speak of "the user")."""
        b = self.bank.index.get(key)
        return None if b is None else shown_name(self.bank.engine[b])

    def _empty(self, query: str, key: str, strategy: str, note: str) -> RetrievalResult:
        return RetrievalResult(query, key, strategy, [], "", 0, self.retriever.budget.name, notes=[note])

    def _filtered(
        self, queries: list[str], key: str, strategy: str, budget: int | None, flt: dict
    ) -> list[RetrievalResult]:
        """The queries against the scope's memory restricted to the messages matching ``flt``."""
        mem = view(self.bank, self.bank.index[key])
        ok = meta.matching(mem, flt, self._message_times(key), scope_of(key))
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
        user_id: str | None = None,
        agent_id: str | None = None,
        run_id: str | None = None,
        filters: dict | None = None,
        page: int | None = None,
        page_size: int | None = None,
    ) -> list[dict]:
        """Every unit of the scope's memories (``scope_keys``: a part left out matches any), memory by
        memory: messages, episodes, semantic statements, themes, each with its memory's scope and
        ``created_at`` / ``updated_at``; ``filters``: only the units all of whose source messages
        pass (``engine.metadata``). mem0's paging: ``page`` (1-based, default 1) of ``page_size``
        units (1 to ``MAX_PAGE_SIZE``, default ``PAGE_SIZE``) of that same list, in the same order;
        a page past the end is empty. Without either, the whole list."""
        self._check_open()
        window = paging(page, page_size, "get_all")
        keys = self.scope_keys(user_id, agent_id, run_id)
        flt = meta.filters(filters, "filters")
        out: list[dict] = []
        with self._using(keys), self._rw.read():
            for key in keys:
                b = self.bank.index.get(self._usable(key))
                if b is None:
                    continue
                mem = view(self.bank, b)
                times = self._message_times(key)
                units = units_of(mem, times, scope_of(key))
                if flt is not None:
                    ok = meta.matching(mem, flt, times, scope_of(key))
                    theme_src: dict[str, set[str]] = {}
                    for s, r in zip(mem.semantics, np.asarray(mem.theme_of).tolist()):
                        theme_src.setdefault(f"theme:{mem.themes[r].id}", set()).update(s.message_ids)
                    units = [u for u in units if meta.matches_unit(u, ok, theme_src)]
                out += units
                if window is not None and len(out) >= window.stop:
                    break  # the page is complete: later memories come after it
        return out if window is None else out[window]

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
            return self._unit_of(key, unit_id, kind == "message")

    def _unit_of(self, key: str, unit_id: str, message: bool) -> dict:
        """Unit ``unit_id`` of memory ``key`` as ``get_all`` lists it (the caller holds the read lock)."""
        mem = view(self.bank, self.bank.index[key])
        return next(
            u
            for u in units_of(mem, self._message_times(key), scope_of(key))
            if u["id"] == unit_id and (u["type"] == "message") == message
        )

    def _message_times(self, key: str) -> dict[str, tuple[float | None, float | None]]:
        """Message id -> (created_at, updated_at) in epoch seconds, from the memory's operations log:
        the add that brought it, the last update of its text (none: the add's). Cached per committed
        version of the memory."""
        cache = self.__dict__.setdefault("_times_cache", {})
        version = self._loaded.get(key)
        hit = cache.get(key)
        if hit is not None and hit[0] == version:
            return hit[1]
        times: dict[str, tuple[float | None, float | None]] = {}
        for entry in self.store.history(key):
            if entry["op"] == "add":
                for mid in entry["ids"]:
                    times.setdefault(mid, (entry["time"], entry["time"]))
            elif entry["op"] == "update":
                for mid in entry["ids"]:
                    if mid in times:
                        times[mid] = (times[mid][0], entry["time"])
        if len(cache) >= 256:  # bounded: emptied when it holds 256 memories
            cache.clear()
        cache[key] = (version, times)
        return times

    def hits(self, result: RetrievalResult) -> list[dict]:
        """A live search result's units as mem0 gives search results: each unit's fields (``to_dict``)
        with ``memory`` (its text), ``score`` (its relevance, the query-unit cosine, clipped to [0, 1]),
        ``rank_score`` (the strategy's ranking value, a coverage gain under xmemory), ``created_at`` /
        ``updated_at`` (ISO 8601, UTC; from its source messages), its memory's ``user_id`` /
        ``agent_id`` / ``run_id``, and a message's ``metadata``."""
        scopes = getattr(result, "scopes", None) or [scope_of(result.memory_id)] * len(result.units)
        d = result.to_dict()["units"]
        out = []
        seen: dict[str, tuple[dict, dict]] = {}  # memory key -> (message times, message metadata)
        with self._rw.read():
            for u, raw, scope in zip(d, result.units, scopes):
                key = self._exact(scope["user_id"], scope["agent_id"], scope["run_id"])
                if key not in seen:
                    b = self.bank.index.get(key)
                    seen[key] = (
                        self._message_times(key) if key in self._loaded else {},
                        self.bank.stats[b].get(meta.STATS_KEY) or {} if b is not None else {},
                    )
                times, md = seen[key]
                made, changed = _dates(u["message_ids"], times, raw.timestamp)
                rel = raw.relevance if raw.relevance is not None else relevance(raw)
                out.append(
                    u
                    | {
                        "memory": u["text"],
                        "score": min(1.0, max(0.0, float(rel))),
                        "rank_score": u["score"],
                        "created_at": made,
                        "updated_at": changed,
                    }
                    | scope
                    | ({"metadata": md[u["id"]]} if u["type"] == "message" and u["id"] in md else {})
                )
        return out

    def history(
        self, *, user_id: str | None = None, agent_id: str | None = None, run_id: str | None = None
    ) -> list[dict]:
        """The scope's operations log, oldest first: ``{"op", "ids", "time"}``. A deleted message's
        id leaves every entry (its deletion is logged with a digest of the id); ``delete_all``
        leaves one entry with no ids."""
        self._check_open()
        key = self._exact(user_id, agent_id, run_id)
        with self._rw.read():
            return self.store.history(key)

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


def top_k_limit(limit: Any, top_k: Any, where: str) -> int | None:
    """A search's ``limit`` from ``limit`` and mem0's ``top_k`` (each checked as a limit); both given
    and different: refused."""
    lim = check_limit(limit, f"{where}: limit")
    top = check_limit(top_k, f"{where}: top_k")
    if lim is not None and top is not None and lim != top:
        raise ValueError(
            f"{where}: top_k: {top} differs from limit {lim} (top_k is mem0's name of limit: give one)"
        )
    return lim if lim is not None else top


def paging(page: Any, page_size: Any, call: str) -> slice | None:
    """``get_all``'s window over its units: ``page`` (1-based) of ``page_size`` units; None when
    neither is given. A refusal names the field."""
    if page is None and page_size is None:
        return None
    try:
        n = 1 if page is None else integer(page, 1, MAX_PAGE)
    except ValueError as exc:
        raise ValueError(f"{call}: page: {exc}") from None
    try:
        size = PAGE_SIZE if page_size is None else integer(page_size, 1, MAX_PAGE_SIZE)
    except ValueError as exc:
        raise ValueError(f"{call}: page_size: {exc}") from None
    return slice((n - 1) * size, n * size)


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


def shown_name(engine: EngineState | None) -> str | None:
    """The name shown for "the user" in a memory with this engine state (see ``_subject_name``)."""
    return engine.user_name if engine is not None and people.NEUTRAL in engine.speakers else None


@contextmanager
def named(call: str, inner: str):
    """A refusal of the batch call a single call made, told as the single call's (``search: ...``)."""
    try:
        yield
    except ValueError as exc:
        msg = str(exc)
        if not msg.startswith(inner):
            raise
        raise ValueError(f"{call}: {msg.removeprefix(inner)}") from None


def iso(t: float | None) -> str | None:
    """Epoch seconds as an ISO 8601 date-time in UTC (None stays None)."""
    return None if t is None else datetime.fromtimestamp(t, tz=timezone.utc).isoformat()


def _dates(
    message_ids: Sequence[str], times: dict[str, tuple[float | None, float | None]], fallback: float | None
) -> tuple[str | None, str | None]:
    """(created_at, updated_at) of a unit from its source messages' times: the earliest add and the
    latest change; a source the log does not date counts at ``fallback`` (the unit's timestamp)."""
    made = [times[m][0] if m in times else fallback for m in message_ids]
    changed = [times[m][1] if m in times else fallback for m in message_ids]
    made = [t for t in made if t is not None]
    changed = [t for t in changed if t is not None]
    return iso(min(made) if made else fallback), iso(max(changed) if changed else fallback)


@dataclass
class ScopedResult(RetrievalResult):
    """A live search's result: ``scopes[i]`` is the scope (``{"user_id", "agent_id", "run_id"}``) of
    the memory that ``units[i]`` came from (a search may cover several memories). ``to_dict`` is the
    plain result's; ``Reads.hits`` gives each unit with its scope."""

    scopes: list[dict[str, str | None]] = field(default_factory=list)

    @classmethod
    def of(cls, r: RetrievalResult, scopes: list[dict[str, str | None]]) -> ScopedResult:
        return cls(**{f.name: getattr(r, f.name) for f in fields(RetrievalResult)}, scopes=scopes)

    def to_dict(self) -> dict[str, Any]:
        d = super().to_dict()
        d.pop("scopes", None)
        return d


def units_of(
    mem: Memory,
    times: dict[str, tuple[float | None, float | None]] | None = None,
    scope: dict[str, str | None] | None = None,
) -> list[dict]:
    """Every unit of a memory as ``get_all`` lists it (messages with metadata and timestamp source,
    episodes, statements with what superseded them, themes), "the user" read as the user's name where
    one is known; each with ``created_at`` / ``updated_at`` (``times``: message id -> (created,
    updated) epoch seconds, ``Reads._message_times``; a message the log does not date: its
    timestamp) and the memory's ``scope`` fields when given."""
    times = times or {}
    extra = dict(scope) if scope is not None else {}
    out = _units(mem)
    by_theme: dict[str, list[str]] = {}
    for s, r in zip(mem.semantics, np.asarray(mem.theme_of).tolist()):
        by_theme.setdefault(f"theme:{mem.themes[r].id}", []).extend(s.message_ids)
    for u in out:
        src = [u["id"]] if u["type"] == "message" else u.get("message_ids") or by_theme.get(u["id"], [])
        made, changed = _dates(src, times, u.get("timestamp"))
        u.update(created_at=made, updated_at=changed, **extra)
    return out


def _units(mem: Memory) -> list[dict]:
    """Every unit of a memory as ``get_all`` lists it (messages with metadata and timestamp source,
    episodes, statements with what superseded them, themes), "the user" read as the user's name where
    one is known."""
    md = meta.of_memory(mem)
    stamped = set(mem.engine.stamped) if mem.engine is not None else set()
    name = shown_name(mem.engine)

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
    sup = mem.engine.superseded if mem.engine is not None else {}
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
