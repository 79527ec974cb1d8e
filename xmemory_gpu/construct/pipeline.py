"""The bulk build: conversations in, memory slices out (the bank's columns, what the store
writes), every stage batched across conversations.

Stages (timed): embed messages (one encoder call for all), episodes, statements (decouple +
embed in one call + de-duplicate), themes (session by session for all memories at once, with
batched f(P) scoring of splits and merges), graphs (one batched kNN launch for all memories'
semantic graphs), summaries (``construct.finalize``). ``build_store`` runs it over the plan's shards
(``construct.plan``) in this process or in worker processes (``construct.worker_pool``) and commits
each shard to the store whole and in order (``construct.commit``), so an interrupted build resumes
where it stopped.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ..config import XMemoryConfig
from ..memory.backend import MemoryBackend
from ..memory.bank import Bank, MemorySlice
from ..memory.codec import EncodedSlice, encode_slice
from ..memory.hierarchy import Memory, memory_from_slice
from ..memory.records import Conversation, SemanticNode
from ..ops.devices import host, to_backend
from ..ops.knn import knn_graph
from .commit import BuildReport, Finish, OrderedCommitter, ShardResult, build_target, build_with
from .finalize import SUMMARY_STATEMENTS as SUMMARY_STATEMENTS
from .finalize import SUMMARY_WORDS as SUMMARY_WORDS
from .finalize import finalize, record_objective
from .finalize import gist as gist
from .finalize import summary_picks as summary_picks
from .finalize import theme_summary as theme_summary
from .plan import Shard, balanced_shard_size, check_counts
from .plan import chunks as chunks
from .progress import Advance, ShardProgress, Timings
from .segment import MessageVectors, boundaries, embed_messages, episode_embeddings, make_episodes
from .semantic import ONE_SOURCE, extract_statements, merge_duplicates
from .themes import ThemeState, grow_themes, session_steps

if TYPE_CHECKING:  # the LLM stages (and pydantic) are imported by who builds with an LLM
    from ..embed import Embedder
    from .llm_stages import LLMBuilder


def _split(x: np.ndarray, sizes: list[int]) -> list[np.ndarray]:
    return np.split(x, np.cumsum(sizes)[:-1]) if sizes else []


def build_slices(
    conversations: list[Conversation],
    embedder,
    config: XMemoryConfig | None = None,
    *,
    timings: Timings | None = None,
    backend: str = "auto",
    llm: LLMBuilder | None = None,
    progress: Advance | None = None,
) -> list[MemorySlice]:
    """Build the hierarchy of each conversation as its memory's slice: LLM-free (deterministic
    for fixed inputs), or with ``llm`` choosing boundaries and writing episodes, facts and theme
    summaries, each stage one batch over all conversations, the LLM-free output as every unit's
    fallback. ``progress(k)``: called as stages finish conversations (``construct.progress``)."""
    cfg = config or XMemoryConfig()
    tm = timings or Timings()
    if not conversations:
        return []
    sp = ShardProgress(progress)
    counts = [llm.new_counts() for _ in conversations] if llm else []
    with tm.stage("embed_messages"):
        per_conv = _embed_in_groups(embedder, conversations, cfg.semantic.passage_words, sp)
        vectors = MessageVectors.concat(per_conv, embedder.dim)
        msg_x = [v.x for v in per_conv]
    with tm.stage("episodes"):
        spans = [boundaries(c, x, cfg.segment) for c, x in zip(conversations, msg_x)]
        if llm:
            spans = llm.boundaries(conversations, spans, counts)
        episodes = []
        for c, s in zip(conversations, spans):
            episodes.append(make_episodes(c, s))
            if not llm:
                sp.stage("episodes")
        if llm:
            episodes = llm.narrate(conversations, episodes, counts)
            texts = [f"{e.title}. {e.text}" for eps in episodes for e in eps]
            epi_x = _split(embedder.encode(texts), [len(e) for e in episodes])
            sp.stage("episodes", len(conversations))
        else:
            epi_x = [episode_embeddings(s, x) for s, x in zip(spans, msg_x)]
    with tm.stage("statements"):
        raw = [extract_statements(c, e, cfg.semantic) for c, e in zip(conversations, episodes)]
        if llm:
            raw = llm.facts(conversations, episodes, raw, counts)
        raw_x = _split(embedder.encode([n.text for nodes in raw for n in nodes]), [len(n) for n in raw])
        deduped = []
        for n, x in zip(raw, raw_x):
            deduped.append(merge_duplicates(n, x, cfg.semantic.dedup_threshold))
            sp.stage("statements")
        semantics = [d[0] for d in deduped]
        sem_x = [d[1] for d in deduped]
    with tm.stage("themes"):
        states = build_themes(conversations, semantics, sem_x, cfg, backend=backend)
        sp.stage("themes", len(conversations))
    with tm.stage("graphs"):
        sizes = [len(s) for s in semantics]
        offs = np.zeros(len(sizes) + 1, dtype=np.int64)
        np.cumsum(sizes, out=offs[1:])
        dim = vectors.x.shape[1]
        all_x = np.concatenate(sem_x) if offs[-1] else np.zeros((0, dim), np.float32)
        all_x = to_backend(all_x, backend)  # a GPU backend: uploaded once, for the graphs and f(P)
        k = cfg.knn.k_semantics
        idx, sim = knn_graph(all_x, offs, k, drop_nonpositive=cfg.knn.drop_nonpositive, backend=backend)
        idx, sim = host(idx), host(sim)
        sem_idx = [
            np.where(i >= 0, i - offs[b], -1).astype(np.int32) for b, i in enumerate(_split(idx, sizes))
        ]
        sem_sim = _split(sim, sizes)
    with tm.stage("summaries"):
        memories = []
        for b, conv in enumerate(conversations):
            memories.append(
                finalize(
                    conv,
                    episodes[b],
                    semantics[b],
                    per_conv[b],
                    epi_x[b],
                    sem_x[b],
                    sem_idx[b],
                    sem_sim[b],
                    states[b],
                    cfg,
                    len(raw[b]),
                )
            )
            if not llm:
                sp.stage("summaries")
        if llm:
            llm.summarize(memories, counts)
            for mem, c in zip(memories, counts):
                mem.stats["builder"] = f"llm ({llm.gen.name})"
                mem.stats[ONE_SOURCE] = False
                mem.stats["llm"] = {stage: sc.as_dict() for stage, sc in c.items()}
                mem.stats["llm_tokens"] = sum(sc.prompt_tokens + sc.output_tokens for sc in c.values())
            sp.stage("summaries", len(conversations))
    with tm.stage("objective"):
        record_objective(memories, all_x, offs, cfg, backend)
    return memories


def build_encoded(
    conversations: list[Conversation],
    embedder,
    config: XMemoryConfig,
    *,
    dim: int,
    timings: Timings,
    backend: str = "auto",
    llm: LLMBuilder | None = None,
    progress: Advance | None = None,
) -> list[EncodedSlice]:
    """``build_slices``' memories encoded as the store writes them (``memory.codec``, for a store
    of dimension ``dim``): what a worker process or a Ray actor sends back; encoding timed as
    ``encode``."""
    slices = build_slices(
        conversations, embedder, config, timings=timings, backend=backend, llm=llm, progress=progress
    )
    with timings.stage("encode"):
        return [encode_slice(sl, dim) for sl in slices]


EMBED_GROUP_MESSAGES = 1024  # messages (whole conversations) per encoder call of a shard


def _embed_in_groups(
    embedder, conversations: list[Conversation], passage_words: int, sp: ShardProgress
) -> list[MessageVectors]:
    """Each conversation's message vectors: one encoder call per run of consecutive conversations
    holding at least ``EMBED_GROUP_MESSAGES`` messages (the last run may hold fewer), so a shard of
    long conversations reports its progress as they are embedded. The grouping depends on the
    shard alone (not on whether progress is shown), so a build's rows are the same with or without
    a bar; an encoder whose rows do not depend on the rest of the call (``embed.base``) gives the
    rows one call would."""
    out: list[MessageVectors] = []
    group: list[Conversation] = []

    def flush() -> None:
        if group:
            vec = embed_messages(embedder, [m for c in group for m in c.messages], passage_words)
            out.extend(vec.split([len(c.messages) for c in group]))
            sp.stage("embed_messages", len(group))
            group.clear()

    size = 0
    for c in conversations:
        group.append(c)
        size += len(c.messages)
        if size >= EMBED_GROUP_MESSAGES:
            flush()
            size = 0
    flush()
    return out


def build_memories(
    conversations: list[Conversation],
    embedder,
    config: XMemoryConfig | None = None,
    *,
    timings: Timings | None = None,
    backend: str = "auto",
    llm: LLMBuilder | None = None,
) -> list[Memory]:
    """``build_slices``' memories as records plus arrays (read-only views, for reading and tests)."""
    return [
        memory_from_slice(sl)
        for sl in build_slices(conversations, embedder, config, timings=timings, backend=backend, llm=llm)
    ]


def build_bank(
    conversations: list[Conversation],
    embedder,
    config: XMemoryConfig | None = None,
    *,
    timings: Timings | None = None,
    backend: str = "auto",
    llm: LLMBuilder | None = None,
) -> Bank:
    """The bank of one shard of conversations (``build_slices`` concatenated)."""
    return Bank.from_slices(
        build_slices(conversations, embedder, config, timings=timings, backend=backend, llm=llm), embedder.dim
    )


def _node_sessions(conv: Conversation, nodes: list[SemanticNode]) -> np.ndarray:
    session_of = {m.id: m.session for m in conv.messages}
    return np.array([session_of[n.message_ids[0]] for n in nodes], dtype=np.int64)


def build_themes(
    conversations: list[Conversation],
    semantics: list[list[SemanticNode]],
    sem_x: list[np.ndarray],
    cfg: XMemoryConfig,
    *,
    backend: str = "auto",
) -> list[ThemeState]:
    """Attach nodes session by session; after each step split and merge across all memories at once."""
    states = [ThemeState(x, cfg.knn.k_themes, cfg.knn.drop_nonpositive) for x in sem_x]
    steps = []
    for conv, nodes in zip(conversations, semantics):
        steps.append(session_steps(_node_sessions(conv, nodes)))
    grow_themes(states, steps, cfg.theme, backend=backend)
    return states


def first_sessions(conv: Conversation, n: int) -> Conversation:
    """The conversation cut to its first ``n`` sessions (their questions whose evidence all lies there)."""
    keep = sorted({m.session for m in conv.messages})[:n]
    msgs = [m for m in conv.messages if m.session in keep]
    ids = {m.id for m in msgs}
    qa = [q for q in conv.qa if q.evidence and all(e in ids for e in q.evidence)]
    return Conversation(conv.sample_id, conv.speakers, msgs, qa, conv.source)


def load_conversations(
    inputs: list[str | Path] | str | Path, *, limit: int | None = None, max_sessions: int | None = None
) -> list[Conversation]:
    """Conversations as a build loads them: every file (or folder), duplicate sample ids refused,
    the first ``limit`` conversations, each cut to its first ``max_sessions`` sessions. Files are
    read one at a time; every item is checked, also those past ``limit``."""
    from ..datasets.locomo import locomo_files, read_locomo_file

    if _given(inputs):
        return list(_checked([(None, list(inputs))], limit, max_sessions))
    files = ((f, read_locomo_file(f)) for p in _paths(inputs) for f in locomo_files(p))
    return list(_checked(files, limit, max_sessions))


def read_conversations(
    inputs: list[str | Path] | str | Path, *, limit: int | None = None, max_sessions: int | None = None
) -> tuple[int, Iterator[Conversation]]:
    """:func:`load_conversations` as (how many, a lazy sequence of them): every file is read and
    parsed now (a file that cannot be read or is not a JSON list raises here, before any item is
    checked), each item is checked when the sequence reaches it, so the first conversations can
    be used while the rest are checked; a file's parsed items are let go once checked. The
    sequence checks every item, also those past ``limit``, before it ends."""
    from ..datasets.locomo import locomo_files, read_locomo_file

    if _given(inputs):
        convs = list(inputs)
        n = len(convs) if limit is None else min(limit, len(convs))
        return n, _checked([(None, convs)], limit, max_sessions)
    parsed = [[f, read_locomo_file(f)] for p in _paths(inputs) for f in locomo_files(p)]
    total = sum(len(items) for _, items in parsed)

    def release() -> Iterator[tuple[Path, list]]:
        for entry in parsed:
            f, items = entry
            entry[1] = None
            yield f, items

    return (total if limit is None else min(limit, total)), _checked(release(), limit, max_sessions)


def _given(inputs: object) -> bool:
    """Whether ``inputs`` are conversations already read (a role chat reader's), not paths."""
    return isinstance(inputs, (list, tuple)) and bool(inputs) and isinstance(inputs[0], Conversation)


def _paths(inputs: list[str | Path] | str | Path) -> list[str | Path]:
    return [inputs] if isinstance(inputs, (str, Path)) else list(inputs)


def _checked(
    files: Iterable[tuple[Path, list]], limit: int | None, max_sessions: int | None
) -> Iterator[Conversation]:
    """The conversations of ``files`` (file, parsed items; file None: items that are conversations
    already): each item checked, sample ids unique across files, the first ``limit`` yielded (cut
    to ``max_sessions`` sessions), the rest checked."""
    from ..datasets.locomo import conversations_of

    seen: dict[str, str] = {}
    n = 0
    for f, items in files:
        for c in items if f is None else conversations_of(f, items):
            if c.sample_id in seen:
                raise ValueError(f"{c.source}: sample_id {c.sample_id!r} also appears in {seen[c.sample_id]}")
            seen[c.sample_id] = c.source
            if limit is None or n < limit:
                yield c if max_sessions is None else first_sessions(c, max_sessions)
            n += 1


def build_store(
    inputs: list[str | Path] | str | Path,
    store_path: str | Path | MemoryBackend,
    *,
    config: XMemoryConfig | None = None,
    embedder=None,
    limit: int | None = None,
    shard_size: int = 64,
    progress: bool = True,
    backend: str = "auto",
    llm: LLMBuilder | None = None,
    max_sessions: int | None = None,
    workers: int = 1,
    finish: Finish | None = None,
) -> BuildReport:
    """Build (or resume building) a store from LoCoMo-format JSON files or folders, or from
    conversations already read (a list of ``Conversation``: role chats, ``datasets.role_chats``).

    Conversations already in the store are skipped; each shard of new ones is committed whole (one
    transaction; a crash loses at most the shard being committed).
    ``store_path``: a folder, or a ``MemoryBackend`` (``memory/backend.py``) to build into.
    ``max_sessions``: keep only each conversation's first N sessions.
    ``workers``: shards built in this many worker processes (``construct/worker_pool.py``; the same
    store), 1 (default) builds in this process. With workers and no ``embedder`` this process loads
    none: the workers load ``config.embed.model``.
    ``finish(slices)``: called on each shard's memories, in this process, before they are committed
    (the live engine's bookkeeping of a memory it writes, given by a caller above construction).
    ``progress``: a bar of conversations done, their rate and the time left (``construct.progress``).
    """
    from ..embed import load_embedder

    check_counts(
        "build_store", limit=limit, shard_size=shard_size, max_sessions=max_sessions, workers=workers
    )
    if workers > 1 and llm is not None:
        raise ValueError(
            "build_store: workers > 1 builds LLM-free only (an LLM builder batches its prompts in one process)"
        )
    cfg = config or XMemoryConfig()
    t0 = time.perf_counter()
    tm = Timings()
    if workers > 1:
        return _build_with_workers(
            inputs,
            store_path,
            embedder,
            cfg,
            tm,
            t0,
            limit=limit,
            max_sessions=max_sessions,
            workers=workers,
            shard_size=shard_size,
            progress=progress,
            backend=backend,
            finish=finish,
        )
    with tm.stage("load"):
        convs = load_conversations(inputs, limit=limit, max_sessions=max_sessions)
    emb = embedder if embedder is not None else load_embedder(cfg.embed.model)
    with build_target(store_path, emb, cfg) as store:
        # each shard's files are written while the next one builds
        return build_with(
            InProcess(emb, cfg, backend, llm),
            store,
            convs,
            len(convs),
            shard_size,
            tm,
            t0,
            progress=progress,
            finish=finish,
            overlap=True,
        )


@dataclass
class InProcess:
    """The executor in this process: shard after shard, one construction call each
    (``build_slices``), once the whole plan is read (every input checked before a shard is built)."""

    embedder: Any
    config: XMemoryConfig
    backend: str = "auto"
    llm: LLMBuilder | None = None

    def map(self, shards: Iterable[Shard], track: OrderedCommitter) -> Iterator[ShardResult]:
        for shard in list(shards):
            tm = Timings()
            slices = build_slices(
                shard.conversations,
                self.embedder,
                self.config,
                timings=tm,
                backend=self.backend,
                llm=self.llm,
                progress=track.advance,
            )
            yield ShardResult(shard.index, slices, dict(tm.seconds))


def _build_with_workers(
    inputs: list[str | Path] | str | Path,
    store_path: str | Path | MemoryBackend,
    embedder: Embedder | None,
    cfg: XMemoryConfig,
    tm: Timings,
    t0: float,
    *,
    limit: int | None,
    max_sessions: int | None,
    workers: int,
    shard_size: int,
    progress: bool,
    backend: str,
    finish: Finish | None,
) -> BuildReport:
    """The workers start first (they import and load the embedder while this process reads the
    inputs; this process loads none unless given one: the store takes the embedder the workers
    report); the conversations are checked while the first shards are built, and none is committed
    before all are checked."""
    from ..embed import check_embedder_spec
    from .worker_pool import WorkerPool, worker_settings

    if embedder is None:  # a malformed spec is reported here, as one process would, not by a worker
        check_embedder_spec(cfg.embed.model)
    with WorkerPool(workers, worker_settings(embedder, cfg, backend)) as pool:
        early: list[Conversation] = []  # checked while the workers still load
        with tm.stage("load"):
            count, convs = read_conversations(inputs, limit=limit, max_sessions=max_sessions)
            while pool.loaded(wait=False) is None and (c := next(convs, None)) is not None:
                early.append(c)
        name, dim = pool.loaded()
        emb = _Encoder(name, dim) if embedder is None else embedder
        size = shard_size
        if pool.device == "cpu":  # the CPU's encoder is batch-invariant: any shard size gives the same store
            size = balanced_shard_size(count, workers, size)
        with build_target(store_path, emb, cfg) as store:
            todo = _timed(itertools.chain(early, convs), tm, "load")
            return build_with(pool, store, todo, count, size, tm, t0, progress=progress, finish=finish)


@dataclass(frozen=True)
class _Encoder:
    """The embedder the workers loaded, as the store records it (the builder itself embeds nothing)."""

    name: str
    dim: int


def _timed(items: Iterable, tm: Timings, stage: str) -> Iterator:
    """``items``, the seconds spent producing each added to ``stage``."""
    it, end = iter(items), object()
    while True:
        with tm.stage(stage):
            item = next(it, end)
        if item is end:
            return
        yield item
