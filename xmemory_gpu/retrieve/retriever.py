"""``Retriever.search``: every strategy behind one batched API (DESIGN section 6).

Strategies: ``xmemory`` (Stage I + Stage II), ``xmemory-stage1`` (Stage I only: the paper's
+RepSel), ``xmemory-stage2`` (similarity Stage I + Stage II: +UncSion), ``memory-only``,
``naive-rag``, ``tir`` (optionally pruned by the reader), ``higmem`` (event -> turn selection by
the reader). Stage II's uncertainty gate needs a reader with logits; with none configured,
episodes are admitted by Stage II priority up to the episode budget, HiGMem takes each event's
most similar turns, and each result's notes say so.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from ..config import XMemoryConfig
from ..embed import Embedder, embedder_for_store
from ..embed.tokens import TokenCounter, default_counter
from ..memory.bank import Bank
from ..memory.store import Store
from ..ops._arrays import csr_offsets
from .baselines import Chunks, memory_only, naive_rag, tir
from .context import assemble, context_pieces, episode_unit, messages_unit, semantic_unit, theme_unit
from .grouped import search_by_memory
from .llm_select import higmem, prune_sessions
from .result import RetrievalResult, RetrievedUnit
from .stage1 import Stage1Output, run_stage1
from .stage2 import EpisodePick, episode_pools, gate_episodes

STRATEGIES = ("xmemory", "xmemory-stage1", "xmemory-stage2", "memory-only", "naive-rag", "tir", "higmem")
HEADER_ALLOWANCE = 12  # tokens of the section headers and dates, before the exact check
NO_READER_NOTE = "no reader configured: Stage II admitted episodes by priority, without the uncertainty gate"
NO_READER_HIGMEM = "no reader configured: each event gave its most similar turns, the union was not filtered"


class Retriever:
    """Retrieval over a bank of built memories. ``backend`` picks the kernels' backend."""

    def __init__(
        self, bank: Bank, embedder: Embedder, config: XMemoryConfig | None = None, *, backend: str = "auto",
        tokens: TokenCounter | None = None, reader=None,
    ) -> None:
        if embedder.dim != bank.sem_x.shape[1]:
            raise ValueError(f"embedder {embedder.name!r} gives dim {embedder.dim}, the memories hold {bank.sem_x.shape[1]}")
        self.bank = bank
        self.embedder = embedder
        self.config = config or XMemoryConfig()
        self.backend = backend
        self.reader = reader  # a Reader (xmemory_gpu.llm): enables Stage II's uncertainty gate
        self.tokens = tokens or (reader if reader is not None else default_counter())
        self._chunks: Chunks | None = None
        self._tok_cache: dict[str, int] = {}

    @classmethod
    def from_store(cls, path: str | Path, memory_ids: Sequence[str] | None = None, **kw) -> Retriever:
        """Load the store's memories (all, or ``memory_ids``) and the embedder it was built with."""
        store = Store.open(path)
        try:
            bank = store.load_bank(list(memory_ids) if memory_ids is not None else None)
            config = kw.pop("config", None) or (XMemoryConfig.from_dict(store.config) if store.config else XMemoryConfig())
            embedder = kw.pop("embedder", None) or embedder_for_store(store.embedder)
        finally:
            store.close()
        return cls(bank, embedder, config, **kw)

    # -- strategies --------------------------------------------------------------------------------
    def _similarity_stage1(self, q_x: np.ndarray, mem_idx: np.ndarray) -> Stage1Output:
        """Stage I replaced by plain similarity: the top ``semantic_budget`` semantics (for +UncSion)."""
        k = self.config.stage1.semantic_budget
        top_i, top_s = search_by_memory(q_x, mem_idx, self.bank.sem_x, self.bank.sem_offsets, k, backend=self.backend)
        valid = top_i >= 0
        no_themes = np.zeros(len(mem_idx) + 1, np.int64)
        e = np.zeros(0)
        return Stage1Output(no_themes, e.astype(np.int64), e.astype(np.float32), e.astype(np.float32), csr_offsets(valid.sum(axis=1)),
                            top_i[valid].astype(np.int64), top_s[valid], top_s[valid], np.zeros(len(mem_idx), bool))

    def _xmemory(self, queries: list[str], q_x: np.ndarray, mem_idx: np.ndarray, stage2: bool, similarity: bool = False):
        t0 = time.perf_counter()
        if similarity:
            s1 = self._similarity_stage1(q_x, mem_idx)
        else:
            s1 = run_stage1(self.bank, q_x, mem_idx, self.config.stage1, backend=self.backend)
        times = {"stage1": time.perf_counter() - t0}
        out, costs, notes = [], [(0, 0)] * len(queries), []
        for q, b in enumerate(mem_idx):
            mem, t0_, s0 = self.bank.memories[b], int(self.bank.theme_offsets[b]), int(self.bank.sem_offsets[b])
            ts, te = s1.theme_offsets[q], s1.theme_offsets[q + 1]
            units = [theme_unit(mem, int(r) - t0_, float(v), float(rel)) for r, v, rel in zip(s1.themes[ts:te], s1.theme_value[ts:te], s1.theme_rel[ts:te])]
            ss, se = s1.sem_offsets[q], s1.sem_offsets[q + 1]
            units += [
                semantic_unit(mem, int(r) - s0, float(v), {"relevance": float(rel), "coverage_value": float(v)})
                for r, v, rel in zip(s1.semantics[ss:se], s1.sem_value[ss:se], s1.sem_rel[ss:se])
            ]
            out.append(units)
        if stage2:
            t1 = time.perf_counter()
            cfg = self.config.stage2
            pools = episode_pools(self.bank, q_x, mem_idx, s1, cfg, backend=self.backend)
            if self.reader is None:
                for q, b in enumerate(mem_idx):
                    mem = self.bank.memories[b]
                    out[q] += [episode_unit(mem, p.row, p.priority, _pick_scores(p)) for p in pools[q][: cfg.episode_budget]]
                notes.append(NO_READER_NOTE)
            else:
                coarse = [assemble(u) for u in out]
                texts = [[self.bank.memories[b].episodes[p.row].text for p in pools[q][: cfg.episode_budget]] for q, b in enumerate(mem_idx)]
                decisions, costs = gate_episodes(self.reader, list(queries), coarse, texts, pools, cfg)
                for q, b in enumerate(mem_idx):
                    mem = self.bank.memories[b]
                    for d in decisions[q]:
                        if d.admitted:
                            scores = {**_pick_scores(d.pick), "uncertainty_drop": d.drop, "expanded": float(d.expanded)}
                            out[q].append(episode_unit(mem, d.pick.row, d.drop, scores))
                            if d.expanded:
                                out[q] += _raw_messages(mem, d.pick.row, d.drop)
                notes.append(f"Stage II gate: {cfg.uncertainty} uncertainty from {self.reader.name}, {cfg.mode} probes")
            times["stage2"] = time.perf_counter() - t1
        return out, times, notes, costs

    def _run(self, strategy: str, queries: list[str], q_x: np.ndarray, mem_idx: np.ndarray):
        """(units per query, seconds per stage, notes, (llm calls, llm tokens) per query)."""
        cfg = self.config.baselines
        if strategy in ("xmemory", "xmemory-stage1", "xmemory-stage2"):
            return self._xmemory(queries, q_x, mem_idx, stage2=strategy != "xmemory-stage1", similarity=strategy == "xmemory-stage2")
        t0 = time.perf_counter()
        if strategy == "memory-only":
            units = memory_only(self.bank, q_x, mem_idx, cfg, self.backend)
        elif strategy == "naive-rag":
            if self._chunks is None:
                self._chunks = Chunks(self.bank, cfg.chunk_messages)
            units = naive_rag(self.bank, self._chunks, q_x, mem_idx, cfg, self.backend)
        elif strategy == "tir":
            units = tir(self.bank, q_x, mem_idx, cfg)
            if cfg.tir_prune:
                if self.reader is None:
                    raise ValueError("baselines.tir_prune needs a reader (the LLM prunes the sessions)")
                units, costs = prune_sessions(self.reader, queries, units, self.bank, mem_idx)
                return units, {"retrieve": time.perf_counter() - t0}, [f"TIR sessions pruned by {self.reader.name}"], costs
        elif strategy == "higmem":
            units, costs, used = higmem(self.bank, q_x, mem_idx, queries, self.reader, events=cfg.higmem_events, turns=cfg.higmem_turns,
                                        turns_per_event=cfg.higmem_turns_per_event, backend=self.backend)
            notes = [f"HiGMem turn selection by {self.reader.name}" if used else NO_READER_HIGMEM]
            return units, {"retrieve": time.perf_counter() - t0}, notes, costs
        else:
            raise ValueError(f"unknown strategy {strategy!r}; expected one of {', '.join(STRATEGIES)}")
        return units, {"retrieve": time.perf_counter() - t0}, [], [(0, 0)] * len(queries)

    def _count(self, texts: list[str]) -> list[int]:
        """Token counts through a cache: memories' texts recur across queries."""
        new = list({t: None for t in texts if t not in self._tok_cache})
        if new:
            self._tok_cache.update(zip(new, self.tokens.count(new)))
        return [self._tok_cache[t] for t in texts]

    def _fit(self, units: list[RetrievedUnit], budget: int | None) -> list[RetrievedUnit]:
        """Under a budget, take units in order, skipping those that do not fit (themes are free:
        they are not part of the answer context)."""
        kept, total = [], HEADER_ALLOWANCE
        for u in units:
            if u.type == "theme" or budget is None or total + u.tokens <= budget:
                kept.append(u)
                total += 0 if u.type == "theme" else u.tokens
        return kept

    def _trim(self, kept: list[RetrievedUnit], budget: int) -> tuple[list[RetrievedUnit], str, int]:
        """Drop units from the end until the assembled context (headers and dates included) fits."""
        while True:
            ctx = assemble(kept)
            n_tok = self.tokens.count([ctx])[0]
            if n_tok <= budget or not any(u.type != "theme" for u in kept):
                return kept, ctx, n_tok
            kept = [u for i, u in enumerate(kept) if i != max(j for j, v in enumerate(kept) if v.type != "theme")]

    # -- the API -----------------------------------------------------------------------------------
    def search(
        self, queries: Sequence[str], memory_ids: Sequence[str] | str, *, strategy: str = "xmemory",
        budget_tokens: int | None = None, query_x: np.ndarray | None = None,
    ) -> list[RetrievalResult]:
        """One result per query. ``memory_ids``: one id for all queries or one per query.
        ``budget_tokens`` caps the context (units taken in order, those that do not fit skipped).
        ``query_x`` [Q, d] reuses precomputed unit query embeddings."""
        queries = list(queries)
        mids = [memory_ids] * len(queries) if isinstance(memory_ids, str) else list(memory_ids)
        if len(mids) != len(queries):
            raise ValueError(f"search: {len(queries)} queries but {len(mids)} memory ids")
        mem_idx = np.array([self.bank.index_of(m) for m in mids], dtype=np.int64)
        n = max(len(queries), 1)
        t0 = time.perf_counter()
        q_x = self.embedder.encode(queries) if query_x is None else np.asarray(query_x, np.float32)
        t_embed = time.perf_counter() - t0
        if q_x.shape != (len(queries), self.bank.sem_x.shape[1]):
            raise ValueError(f"search: query embeddings must be [{len(queries)}, {self.bank.sem_x.shape[1]}], got {q_x.shape}")
        units, times, notes, costs = self._run(strategy, queries, q_x, mem_idx)
        t1 = time.perf_counter()
        flat = [u for us in units for u in us]
        for u, c in zip(flat, self._count([u.text for u in flat])):
            u.tokens = c
        kept = [self._fit(us, budget_tokens) for us in units]
        contexts = [assemble(k) for k in kept]
        if self.tokens.additive:  # exact: the sum over the context's whitespace-separated pieces
            pieces = [[p for _, p in context_pieces(k)] for k in kept]
            per = iter(self._count([p for ps in pieces for p in ps]))
            counts = [sum(next(per) for _ in ps) for ps in pieces]
        else:
            counts = self.tokens.count(contexts)  # one batched call; only over-budget contexts are re-counted
        results = []
        for q, (k, ctx, n_tok) in enumerate(zip(kept, contexts, counts)):
            if budget_tokens is not None and n_tok > budget_tokens:
                k, ctx, n_tok = self._trim(k, budget_tokens)
            results.append(RetrievalResult(queries[q], mids[q], strategy, k, ctx, n_tok, self.tokens.name,
                                           llm_calls=costs[q][0], llm_tokens=costs[q][1], notes=list(notes)))
        t_asm = time.perf_counter() - t1
        per_q = {"embed": t_embed / n, **{k: v / n for k, v in times.items()}, "assemble": t_asm / n}
        for r in results:
            r.timings = dict(per_q)
        return results


def _raw_messages(mem, row: int, drop: float) -> list[RetrievedUnit]:
    """An expanded episode's raw messages, when its text is not already them (LLM-written episodes)."""
    ep = mem.episodes[row]
    ids = set(ep.message_ids)
    rows = [i for i, m in enumerate(mem.messages) if m.id in ids]
    unit = messages_unit("message", f"episode-{ep.id}", mem, rows, drop, {"uncertainty_drop": drop})
    return [] if unit.text == ep.text else [unit]


def _pick_scores(p: EpisodePick) -> dict[str, float]:
    return {"priority": p.priority, "similarity": p.similarity, "parent_relevance": p.parent_relevance}
