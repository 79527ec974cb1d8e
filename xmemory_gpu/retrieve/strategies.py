"""The strategy registry: every retrieval strategy by name, behind one signature, so the peers run
in the same harness as xMemory and the eval's default list derives from here.

A strategy takes the retriever, the queries, their unit embeddings [Q, d] and bank memory numbers
[Q], and returns units per query (in context order), seconds per stage, notes per query and
(reader calls, reader tokens) per query.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from .addressee import asks_what_assistant_said
from .baselines import memory_only, naive_rag, tir
from .chunk_rag import DEFAULT_WORDS, NAME, candidates, width_of
from .context import (
    answer_context,
    as_fill,
    assistant_said,
    episode_rows,
    episode_unit,
    messages_unit,
    semantic_rows,
    semantic_unit,
    theme_unit,
)
from .gate import gate_episodes
from .grouped import search_by_memory
from .llm_select import higmem, prune_sessions
from .passages import Parts
from .pool import EpisodePick, episode_pools
from .result import RetrievedUnit
from .stage1 import Stage1Output, run_stage1

NO_READER_NOTE = "no reader configured: Stage II admitted episodes by priority, without the uncertainty gate"
NO_READER_HIGMEM = "no reader configured: each event gave its most similar turns, the union was not filtered"
STAGE1_FALLBACK = "Stage I selected no theme: semantics were chosen from the whole pool"


@dataclass
class StrategyOutput:
    units: list[list[RetrievedUnit]]
    times: dict[str, float]
    notes: list[list[str]]
    costs: list[tuple[int, int]] = field(default_factory=list)
    greedy: bool = (
        False  # under a budget: units taken whole, in order, while they fit (``TokenBudget.greedy``)
    )


Strategy = Callable[..., StrategyOutput]
_REGISTRY: dict[str, tuple[Strategy, str]] = {}


def register(name: str, description: str) -> Callable[[Strategy], Strategy]:
    def deco(fn: Strategy) -> Strategy:
        _REGISTRY[name] = (fn, description)
        return fn

    return deco


def get_strategy(name: str) -> Strategy:
    """The strategy registered as ``name``; ``chunk-rag:N`` is ``chunk-rag`` at N words."""
    width = width_of(name) if isinstance(name, str) else None
    if width is not None:
        return functools.partial(chunk_rag_strategy, width=width)
    try:
        return _REGISTRY[name][0]
    except (KeyError, TypeError):
        raise ValueError(
            f"unknown strategy {name!r}; expected one of {', '.join(_REGISTRY)} (or chunk-rag:N)"
        ) from None


class StrategyNames(tuple):
    """The registered names, in registration order; ``in`` also holds a parametrised name
    (``chunk-rag:N``), so a check by membership (argparse's ``choices``) takes what ``get_strategy`` takes."""

    def __contains__(self, name: object) -> bool:
        if isinstance(name, str) and name.startswith(f"{NAME}:"):
            try:
                return width_of(name) is not None
            except ValueError:
                return False
        return tuple.__contains__(self, name)


def strategy_names() -> StrategyNames:
    return StrategyNames(_REGISTRY)


def _same(n: int, notes: list[str]) -> list[list[str]]:
    return [list(notes) for _ in range(n)]


def _similarity_stage1(r, q_x: np.ndarray, mem_idx: np.ndarray) -> Stage1Output:
    """Stage I replaced by plain similarity: the top ``semantic_budget`` semantics (for +UncSion)."""
    k = r.config.stage1.semantic_budget
    top_i, top_s = search_by_memory(q_x, mem_idx, r.bank.sem, k, backend=r.backend)
    valid = top_i >= 0
    no_themes = np.zeros(len(mem_idx) + 1, np.int64)
    e = np.zeros(0)
    sem_off = np.concatenate([[0], np.cumsum(valid.sum(axis=1))]).astype(np.int64)
    return Stage1Output(
        no_themes,
        e.astype(np.int64),
        e.astype(np.float32),
        e.astype(np.float32),
        sem_off,
        top_i[valid].astype(np.int64),
        top_s[valid],
        top_s[valid],
        np.zeros(len(mem_idx), bool),
    )


def _topup(s1: Stage1Output, sim: Stage1Output, bank, q_x: np.ndarray, message_weight: float) -> Stage1Output:
    """Stage I's semantic picks joined by the similarity top semantics it did not pick, per query,
    ordered by cos(q, statement) + ``message_weight`` * cos(q, the statement's first source message)
    (stable: Stage I's picks first among equals). Themes are unchanged."""
    offs, rows, vals, rels = [0], [], [], []
    for q in range(len(s1.sem_offsets) - 1):
        a, b = (
            slice(s1.sem_offsets[q], s1.sem_offsets[q + 1]),
            slice(sim.sem_offsets[q], sim.sem_offsets[q + 1]),
        )
        r_, v_, l_ = list(s1.semantics[a]), list(s1.sem_value[a]), list(s1.sem_rel[a])
        seen = {int(x) for x in r_}
        for x, rel in zip(sim.semantics[b], sim.sem_rel[b]):
            if int(x) not in seen:
                r_.append(x), v_.append(0.0), l_.append(rel)
                seen.add(int(x))
        key = np.asarray(l_, np.float64)
        if message_weight and r_:
            src = bank.sem["msgs"][np.asarray(r_, np.int64), 0]
            key = key + message_weight * (bank.msg["x"][src].astype(np.float64) @ q_x[q].astype(np.float64))
        order = np.argsort(-key, kind="stable")
        rows += [r_[i] for i in order]
        vals += [v_[i] for i in order]
        rels += [l_[i] for i in order]
        offs.append(len(rows))
    return Stage1Output(
        s1.theme_offsets,
        s1.themes,
        s1.theme_value,
        s1.theme_rel,
        np.asarray(offs, np.int64),
        np.asarray(rows, np.int64),
        np.asarray(vals, np.float32),
        np.asarray(rels, np.float32),
        s1.fallback,
    )


def _pick_scores(p: EpisodePick) -> dict[str, float]:
    return {"priority": p.priority, "similarity": p.similarity, "parent_relevance": p.parent_relevance}


def _raw_messages(r, row: int, drop: float) -> list[RetrievedUnit]:
    """An expanded episode's raw messages, when its text is not already them (LLM-written episodes)."""
    bank = r.bank
    rows = bank.epi["msgs"][row]
    unit = messages_unit(
        "message",
        f"episode-{int(bank.epi['id'][row])}",
        bank,
        rows[rows >= 0],
        drop,
        {"uncertainty_drop": drop},
    )
    return [] if unit.text == bank.epi["text"][row] else [unit]


def _episode_block(u: RetrievedUnit) -> str:
    """An episode as it appears in the answer context (date header, dates resolved)."""
    return answer_context([u]).removeprefix("Episodic memories:\n")


def _xmemory(
    r, queries: list[str], q_x: np.ndarray, mem_idx: np.ndarray, *, stage2: bool, similarity: bool
) -> StrategyOutput:
    bank, n = r.bank, len(queries)
    t0 = time.perf_counter()
    s1 = (
        _similarity_stage1(r, q_x, mem_idx)
        if similarity
        else run_stage1(
            bank,
            q_x,
            mem_idx,
            r.config.stage1,
            backend=r.backend,
            theme_vectors=r.theme_vectors if r.config.stage1.theme_relevance == "summary" else None,
        )
    )
    if stage2 and not similarity and r.config.stage1.topup:
        s1 = _topup(s1, _similarity_stage1(r, q_x, mem_idx), bank, q_x, r.config.stage1.message_weight)
    times = {"stage1": time.perf_counter() - t0}
    notes = [[STAGE1_FALLBACK] if (not similarity and s1.fallback[q]) else [] for q in range(n)]
    out, costs = [], [(0, 0)] * n
    sem_rows = semantic_rows(bank)
    said = assistant_said(bank) if r.config.stage1.users_first else None
    for q in range(n):
        ts, te = s1.theme_offsets[q], s1.theme_offsets[q + 1]
        units = [
            theme_unit(bank, int(t), float(v), float(rel))
            for t, v, rel in zip(s1.themes[ts:te], s1.theme_value[ts:te], s1.theme_rel[ts:te])
        ]
        ss, se = s1.sem_offsets[q], s1.sem_offsets[q + 1]
        picks = list(zip(s1.semantics[ss:se].tolist(), s1.sem_value[ss:se], s1.sem_rel[ss:se]))
        after = said is not None and not asks_what_assistant_said(queries[q])
        if after:  # the user's statements first, each group in its order (a stable sort)
            picks.sort(key=lambda p: said[p[0]])
        for s, v, rel in picks:
            u = semantic_unit(
                bank, s, float(v), {"relevance": float(rel), "coverage_value": float(v)}, sem_rows
            )
            u.after_users = after and said[s]
            units.append(u)
        out.append(units)
    if stage2:
        t1 = time.perf_counter()
        cfg = r.config.stage2
        pools = episode_pools(bank, q_x, mem_idx, s1, cfg, backend=r.backend)
        if r.reader is None:
            parts = Parts(bank, r.embedder, r.config.semantic.passage_words) if cfg.fill else None
            epi_rows = episode_rows(bank)
            for q in range(n):
                for j, p in enumerate(pools[q]):
                    if j >= cfg.episode_budget and not cfg.fill:
                        break
                    u = episode_unit(bank, p.row, p.priority, _pick_scores(p), epi_rows)
                    out[q].append(u if j < cfg.episode_budget else as_fill(u))
                    if parts is not None:
                        out[q] += parts.episode_parts(
                            p.row, q_x[q], q
                        )  # built by the fit only where the episode does not fit
                notes[q].append(NO_READER_NOTE)
        else:
            coarse = [answer_context(u) for u in out]
            blocks = [
                [_episode_block(episode_unit(bank, p.row, 0.0, {})) for p in pools[q][: cfg.episode_budget]]
                for q in range(n)
            ]
            decisions, costs = gate_episodes(r.reader, list(queries), coarse, blocks, pools, cfg)
            for q in range(n):
                for d in decisions[q]:
                    if d.admitted:
                        scores = {
                            **_pick_scores(d.pick),
                            "uncertainty_drop": d.drop,
                            "expanded": float(d.expanded),
                        }
                        out[q].append(episode_unit(bank, d.pick.row, d.drop, scores))
                        if d.expanded:
                            out[q] += _raw_messages(r, d.pick.row, d.drop)
                notes[q].append(
                    f"Stage II gate: {cfg.uncertainty} uncertainty from {r.reader.name}, {cfg.mode} probes"
                )
        times["stage2"] = time.perf_counter() - t1
    return StrategyOutput(out, times, notes, costs)


def xmemory(r, queries, q_x, mem_idx) -> StrategyOutput:
    return _xmemory(r, queries, q_x, mem_idx, stage2=True, similarity=False)


def xmemory_stage1(r, queries, q_x, mem_idx) -> StrategyOutput:
    return _xmemory(r, queries, q_x, mem_idx, stage2=False, similarity=False)


def xmemory_stage2(r, queries, q_x, mem_idx) -> StrategyOutput:
    return _xmemory(r, queries, q_x, mem_idx, stage2=True, similarity=True)


def _timed(fn, *args) -> tuple[list[list[RetrievedUnit]], dict[str, float]]:
    t0 = time.perf_counter()
    units = fn(*args)
    return units, {"retrieve": time.perf_counter() - t0}


def memory_only_strategy(r, queries, q_x, mem_idx) -> StrategyOutput:
    units, times = _timed(memory_only, r.bank, q_x, mem_idx, r.config.baselines, r.backend)
    return StrategyOutput(units, times, _same(len(queries), []), [(0, 0)] * len(queries))


def naive_rag_strategy(r, queries, q_x, mem_idx) -> StrategyOutput:
    parts = Parts(r.bank, r.embedder, r.config.semantic.passage_words)
    units, times = _timed(naive_rag, r.bank, r.chunks(), q_x, mem_idx, r.config.baselines, r.backend, parts)
    return StrategyOutput(units, times, _same(len(queries), []), [(0, 0)] * len(queries))


def chunk_rag_strategy(r, queries, q_x, mem_idx, width: int = DEFAULT_WORDS) -> StrategyOutput:
    """Passages of at most ``width`` words by cosine: the top ``naive_rag_k`` without a budget; under
    one, down to rank ``chunk_rag.candidates`` while they fit, whole (``StrategyOutput.greedy``)."""
    cfg = r.config.baselines
    t0 = time.perf_counter()
    lv = r._passages.level(r.bank, r.embedder, width, r.config.semantic.passage_words)
    t1 = time.perf_counter()
    pi, ps = search_by_memory(
        q_x, mem_idx, lv.level, candidates(width, cfg.naive_rag_k, cfg.naive_rag_fill), backend=r.backend
    )
    units = []
    for q in range(len(queries)):
        mine = [lv.unit(r.bank, int(p), float(s)) for p, s in zip(pi[q], ps[q]) if p >= 0]
        units.append([u if j < cfg.naive_rag_k else as_fill(u) for j, u in enumerate(mine)])
    times = {"passages": t1 - t0, "retrieve": time.perf_counter() - t1}
    return StrategyOutput(units, times, _same(len(queries), []), [(0, 0)] * len(queries), greedy=True)


def tir_strategy(r, queries, q_x, mem_idx) -> StrategyOutput:
    cfg = r.config.baselines
    t0 = time.perf_counter()
    units = tir(r.bank, q_x, mem_idx, cfg)
    if cfg.tir_prune:
        if r.reader is None:
            raise ValueError("baselines.tir_prune needs a reader (the LLM prunes the sessions)")
        units, costs = prune_sessions(r.reader, queries, units, r.bank, mem_idx)
        return StrategyOutput(
            units,
            {"retrieve": time.perf_counter() - t0},
            _same(len(queries), [f"TIR sessions pruned by {r.reader.name}"]),
            costs,
        )
    return StrategyOutput(
        units, {"retrieve": time.perf_counter() - t0}, _same(len(queries), []), [(0, 0)] * len(queries)
    )


def higmem_strategy(r, queries, q_x, mem_idx) -> StrategyOutput:
    cfg = r.config.baselines
    t0 = time.perf_counter()
    units, costs, used = higmem(
        r.bank,
        q_x,
        mem_idx,
        list(queries),
        r.reader,
        events=cfg.higmem_events,
        turns=cfg.higmem_turns,
        turns_per_event=cfg.higmem_turns_per_event,
        backend=r.backend,
    )
    note = f"HiGMem turn selection by {r.reader.name}" if used else NO_READER_HIGMEM
    return StrategyOutput(units, {"retrieve": time.perf_counter() - t0}, _same(len(queries), [note]), costs)


# registration order = the eval's default order (peers first, then the paper's xMemory rows)
register("naive-rag", "top-k chunks of raw messages")(naive_rag_strategy)
register(
    NAME,
    f"messages cut into passages of at most {DEFAULT_WORDS} words (chunk-rag:N: N words), speaker-prefixed, "
    "ranked by cosine, taken whole while they fit",
)(chunk_rag_strategy)
register(
    "tir",
    "Nano-Memory turn isolation: sessions by their best turn, returned whole (pruned by the reader with tir_prune)",
)(tir_strategy)
register("higmem", "HiGMem event -> turn selection (by the reader; most similar turns without one)")(
    higmem_strategy
)
register("memory-only", "similarity top-k semantics and episodes over the hierarchy")(memory_only_strategy)
register("xmemory-stage1", "Stage I only (the paper's +RepSel)")(xmemory_stage1)
register("xmemory-stage2", "similarity top semantics + Stage II (the paper's +UncSion)")(xmemory_stage2)
register(
    "xmemory", "Stage I (Eq. 4 themes, then semantics) + Stage II (episodes; uncertainty gate with a reader)"
)(xmemory)
