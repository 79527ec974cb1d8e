"""``Retriever.search``: every strategy of the registry (``strategies.py``) behind one batched API
over the bank's columns.

Stage II's uncertainty gate needs a reader with logits; with none configured, episodes are
admitted by Stage II priority up to the episode budget, HiGMem takes each event's most similar
turns, and each result's notes say so.
"""

from __future__ import annotations

import os
import time
import weakref
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Generic, TypeVar

import numpy as np

from ..config import XMemoryConfig, resolve_config
from ..embed import Embedder, embedder_for_store, encode_queries
from ..memory.backend import MemoryBackend
from ..memory.bank import Bank
from ..memory.store import Store
from ..ops.backends import requested_backend
from ..ops.devices import encoder_device
from ..tokens import TokenCounter, default_counter
from .baselines import Chunks
from .chunk_rag import PassageCache
from .context import TokenBudget
from .gc_pause import MIN_QUERIES as GC_PAUSE_MIN_QUERIES
from .gc_pause import gc_paused
from .passages import Parts
from .result import RetrievalResult
from .strategies import get_strategy, strategy_names

STRATEGIES = strategy_names()
T = TypeVar("T")


def as_queries(queries: Sequence[str] | str, name: str = "queries") -> list[str]:
    """A single string is one query; anything else must be a sequence of strings."""
    if isinstance(queries, str):
        return [queries]
    out = list(queries)
    bad = [i for i, q in enumerate(out) if not isinstance(q, str)]
    if bad:
        raise ValueError(f"{name}: expected strings, item {bad[0]} is {type(out[bad[0]]).__name__}")
    return out


class PerBank(Generic[T]):
    """A value derived from a bank, kept while it is asked for the same bank object at the same
    ``Bank.version``: a write, a memory paged in or a replaced bank (an eviction) rebuilds it. Safe
    across threads (two searches may both build it; either value is current)."""

    def __init__(self, build: Callable[[Bank], T]) -> None:
        self._build = build
        self._entry: tuple[weakref.ref, int, T] | None = None  # (the bank, its version, the value)

    def get(self, bank: Bank) -> T:
        entry = self._entry
        if entry is not None and entry[0]() is bank and entry[1] == bank.version:
            return entry[2]
        version = bank.version  # read before the build: a write during it makes the next get rebuild
        value = self._build(bank)
        self._entry = (weakref.ref(bank), version, value)
        return value


# the text columns a search counts the tokens of (``Retriever.prime`` counts their words ahead)
PRIMED_TEXTS = (("sem", "text"), ("theme", "summary"), ("epi", "text"), ("msg", "text"))


class Retriever:
    """Retrieval over a bank of built memories. ``backend`` picks the kernels' backend; with
    ``cuda`` or ``triton`` the levels' embeddings are read from device-resident copies
    (``Level.on_device``), uploaded once and kept in sync as the bank changes."""

    def __init__(
        self,
        bank: Bank,
        embedder: Embedder,
        config: XMemoryConfig | None = None,
        *,
        backend: str = "auto",
        tokens: TokenCounter | None = None,
        reader=None,
    ) -> None:
        if embedder.dim != bank.dim:
            raise ValueError(
                f"embedder {embedder.name!r} gives dim {embedder.dim}, the memories hold {bank.dim}"
            )
        self.bank = bank
        self.embedder = embedder
        self.quarantined: dict[str, str] = {}  # memory id -> why it did not load (from_store)
        self.config = config or XMemoryConfig()
        self.backend = backend
        self.reader = reader  # a Reader (xmemory_gpu.llm): enables Stage II's uncertainty gate
        self.budget = TokenBudget(tokens or (reader if reader is not None else default_counter()))
        self._naive_chunks = PerBank(lambda bank: Chunks(bank, self.config.baselines.chunk_messages))
        self._passages = PassageCache()  # chunk-rag's passages per width (each follows the bank)
        self._summary_x: dict[
            str, np.ndarray
        ] = {}  # theme summary text -> its embedding (theme_relevance = "summary")

    def theme_vectors(self, rows: np.ndarray) -> np.ndarray | None:
        """[n, d] the vectors theme relevance is measured against for global theme ``rows``: None
        for the centroids (the default); with ``stage1.theme_relevance = "summary"`` the embeddings
        of the themes' summaries, embedded once per distinct summary text (so a theme re-summarised
        by the engine is embedded again, never served stale)."""
        if self.config.stage1.theme_relevance != "summary":
            return None
        texts = [str(t) for t in self.bank.theme["summary"][np.asarray(rows, np.int64)]]
        missing = list(dict.fromkeys(t for t in texts if t not in self._summary_x))
        if missing:
            self._summary_x.update(zip(missing, self.embedder.encode(missing)))
        return (
            np.stack([self._summary_x[t] for t in texts])
            if texts
            else np.zeros((0, self.bank.dim), np.float32)
        )

    def prime(self, memory_id: str, since: dict[str, int] | None = None) -> int:
        """Fill ahead the caches a search of memory ``memory_id`` fills on first use, so its first
        searches cost what the later ones do: its rows' norms (host searches only), its messages'
        passages and word floors and its episodes' parts (``Parts.prime``), which the bank keeps
        until it rewrites those rows or is replaced (an eviction, a compaction); and the token counts
        of its texts' words (``TokenBudget.prime``). ``since``: level -> its first local row to fill
        (the rows a write added; a level left out: none); default: every row. Returns the words
        counted. The caller keeps the bank from changing meanwhile (the engine: its read lock)."""
        bank = self.bank
        b = bank.index.get(memory_id)
        if b is None:
            return 0
        rows = {}
        for name, level in bank.levels.items():
            r = level.seg.rows(b)
            rows[name] = r if since is None else r[since[name] :] if name in since else r[:0]
        if requested_backend(self.backend) in ("auto", "cpu"):  # what a host search reads
            for name in ("sem", "epi", "msg", "psg"):
                if len(rows.get(name, ())) and bank.levels[name]["x"].dtype == np.float32:
                    bank.levels[name].row_norms("x", rows[name])
        Parts(bank, self.embedder, self.config.semantic.passage_words).prime(rows["msg"], rows["epi"])
        texts = (str(t) for lv, col in PRIMED_TEXTS for t in bank.levels[lv][col][rows[lv]].tolist())
        return self.budget.prime(texts)

    def chunks(self) -> Chunks:
        """Naive-RAG's chunks of the bank as it is now (built on first use, rebuilt when it changes)."""
        return self._naive_chunks.get(self.bank)

    @property
    def tokens(self) -> TokenCounter:
        return self.budget.tokens

    @classmethod
    def from_store(
        cls, path: str | Path | MemoryBackend, memory_ids: Sequence[str] | None = None, **kw
    ) -> Retriever:
        """Load the store's memories (``path``: a store folder, opened and closed here, or an open
        ``MemoryBackend``, left open) (all, or ``memory_ids``) and the embedder it was built with. Loading
        all of them, a memory that fails its checks is left out and listed in ``quarantined`` (a search
        of it names it and why), so one damaged memory never keeps the others from being searched;
        named ``memory_ids`` must all load."""
        own = isinstance(path, (str, os.PathLike))
        store = Store.open(path) if own else path
        try:
            bank = store.load_bank(
                list(memory_ids) if memory_ids is not None else None, quarantine=memory_ids is None
            )
            quarantined = dict(store.quarantined)
            config = kw.pop("config", None) or resolve_config(store.config)
            device = encoder_device(kw.get("backend", "auto"), config.embed.device)
            embedder = kw.pop("embedder", None) or embedder_for_store(
                store.embedder, device=device, dim=store.dim
            )
        finally:
            if own:
                store.close()
        out = cls(bank, embedder, config, **kw)
        out.quarantined = quarantined
        return out

    def search(
        self,
        queries: Sequence[str] | str,
        memory_ids: Sequence[str] | str,
        *,
        strategy: str = "xmemory",
        budget_tokens: int | None = None,
        query_x: np.ndarray | None = None,
    ) -> list[RetrievalResult]:
        """One result per query. ``queries``: a string (one query) or a sequence. ``memory_ids``: one
        id for all queries or one per query (an empty or unknown id is an error). ``budget_tokens``
        caps the context (units taken in order, those that do not fit skipped). ``query_x`` [Q, d]
        reuses precomputed unit query embeddings."""
        queries = as_queries(queries)
        mids = [memory_ids] * len(queries) if isinstance(memory_ids, str) else list(memory_ids)
        if len(mids) != len(queries):
            raise ValueError(f"search: {len(queries)} queries but {len(mids)} memory ids")
        if budget_tokens is not None and (
            isinstance(budget_tokens, bool)
            or not isinstance(budget_tokens, (int, np.integer))
            or budget_tokens < 0
        ):
            raise ValueError(f"search: budget_tokens must be an integer >= 0, got {budget_tokens!r}")
        for m in mids:
            if not isinstance(m, str) or not m:
                raise ValueError(f"search: memory id must be a non-empty string, got {m!r}")
        fn = get_strategy(strategy)
        if not queries:
            return []
        for m in mids:
            if m in self.quarantined:
                raise ValueError(f"search: memory {m!r} is damaged and was not loaded: {self.quarantined[m]}")
        mem_idx = np.array([self.bank.index_of(m) for m in mids], dtype=np.int64)
        n = max(len(queries), 1)
        t0 = time.perf_counter()
        q_x = encode_queries(self.embedder, queries) if query_x is None else np.asarray(query_x, np.float32)
        t_embed = time.perf_counter() - t0
        if q_x.shape != (len(queries), self.bank.dim):
            raise ValueError(
                f"search: query embeddings must be [{len(queries)}, {self.bank.dim}], got {q_x.shape}"
            )
        # gc_pause.py: large batches only; a reader's gate calls a model: no pause then
        with gc_paused(self.reader is None and len(queries) >= GC_PAUSE_MIN_QUERIES):
            out = fn(self, queries, q_x, mem_idx)
            t1 = time.perf_counter()
            fitted = self.budget.contexts(out.units, budget_tokens, greedy=out.greedy)
            results = [
                RetrievalResult(
                    queries[q],
                    mids[q],
                    strategy,
                    k,
                    ctx,
                    n_tok,
                    self.budget.name,
                    llm_calls=out.costs[q][0],
                    llm_tokens=out.costs[q][1],
                    notes=list(out.notes[q]),
                )
                for q, (k, ctx, n_tok) in enumerate(fitted)
            ]
            t_asm = time.perf_counter() - t1
        per_q = {"embed": t_embed / n, **{k: v / n for k, v in out.times.items()}, "assemble": t_asm / n}
        for r in results:
            r.timings = dict(per_q)
        return results
