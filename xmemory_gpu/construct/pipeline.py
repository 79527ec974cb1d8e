"""The bulk build: conversations in, memory slices out (the bank's columns, what the store
writes), every stage batched across conversations.

Stages (timed): embed messages (one encoder call for all), episodes, statements (decouple +
embed in one call + de-duplicate), themes (session by session for all memories at once, with
batched f(P) scoring of splits and merges), graphs (one batched kNN launch for all memories'
semantic graphs), summaries. ``build_store`` runs it over shards of conversations and commits
each conversation to the store whole, so an interrupted build resumes where it stopped.
"""

from __future__ import annotations

import itertools
import os
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from ..config import XMemoryConfig
from ..memory.backend import CommitHandle, MemoryBackend, start_commit_on
from ..memory.bank import Bank, MemorySlice
from ..memory.codec import EncodedSlice, encode_slice, slice_from_bytes
from ..memory.engine_state import EngineState
from ..memory.hierarchy import Memory, memory_from_slice, slice_of_records
from ..memory.locks import WriterLock
from ..memory.records import Conversation, Episode, SemanticNode, Theme
from ..ops.devices import host, to_backend
from ..ops.knn import knn_graph
from ..ops.objective import partition_objective
from ..ops.rows import add_rows_in_order, dot4, dot4_gram
from .progress import Advance, BuildProgress, ShardProgress
from .segment import MessageVectors, boundaries, embed_messages, episode_embeddings, make_episodes
from .semantic import extract_statements, merge_duplicates
from .themes import ThemeState, grow_themes

if TYPE_CHECKING:  # the LLM stages (and pydantic) are imported by who builds with an LLM
    from ..embed import Embedder
    from .llm_stages import LLMBuilder
    from .worker_pool import WorkerPool


@dataclass
class Timings:
    """Seconds per stage, accumulated over calls."""

    seconds: dict[str, float] = field(default_factory=lambda: defaultdict(float))

    @contextmanager
    def stage(self, name: str) -> Iterator[None]:
        t0 = time.perf_counter()
        try:
            yield
        finally:
            self.seconds[name] += time.perf_counter() - t0

    def as_dict(self) -> dict[str, float]:
        return {k: round(v, 4) for k, v in self.seconds.items()}


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
                _finalize(
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
                mem.stats["llm"] = {stage: sc.as_dict() for stage, sc in c.items()}
                mem.stats["llm_tokens"] = sum(sc.prompt_tokens + sc.output_tokens for sc in c.values())
            sp.stage("summaries", len(conversations))
    with tm.stage("objective"):
        _record_objective(memories, all_x, offs, cfg, backend)
    return memories


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
        sess = _node_sessions(conv, nodes)
        steps.append([np.flatnonzero(sess == s) for s in dict.fromkeys(sess.tolist())])
    grow_themes(states, steps, cfg.theme, backend=backend)
    return states


SUMMARY_STATEMENTS = 2  # statements in a theme's gist
SUMMARY_WORDS = 24  # words kept of each


def theme_summary(texts: list[str], x: np.ndarray) -> str:
    """Extractive gist that reads as a sentence: the ``SUMMARY_STATEMENTS`` member statements
    closest to the theme's centroid (distinct texts, in member order, each cut to ``SUMMARY_WORDS``
    words) joined by "; ". texts [n], x [n, d] their unit rows."""
    picked = summary_picks(texts, x, np.zeros(len(texts), np.int32), 1)[1] if texts else []
    return gist([texts[i] for i in picked])


def gist(picked: list[str]) -> str:
    """The picked statements (in member order) as one sentence: each cut to ``SUMMARY_WORDS`` words,
    joined by "; ", a full stop unless it ends in "..." ("" for none)."""
    if not picked:
        return ""
    parts = []
    for t in picked:
        ws = t.split()
        parts.append(" ".join(ws[:SUMMARY_WORDS]) + " ..." if len(ws) > SUMMARY_WORDS else t.rstrip(" .;"))
    out = "; ".join(parts)
    return out if out.endswith("...") else out + "."


_GRAM_MAX = 1 << 12  # members x themes up to which summary_picks scores the whole gram


def summary_picks(
    texts: list[str], x: np.ndarray, theme_of: np.ndarray, n_themes: int
) -> tuple[np.ndarray, np.ndarray]:
    """Per theme r (rows ``theme_of == r``), the ``SUMMARY_STATEMENTS`` members nearest its float64
    sum (its members added in row order) by ``dot4`` (ties: the earlier; a NaN score last) whose
    texts differ (``!=``) from those picked before, ascending: (offsets [n_themes + 1], rows).
    texts [n], x [n, d] float32 or float64, theme_of [n] in [0, n_themes). Every theme's sum and
    scores in one pass; the texts compared theme by theme."""
    theme_of = np.asarray(theme_of, np.int64)
    order = np.argsort(theme_of, kind="stable")  # each theme's members, ascending
    group = theme_of[order]
    sums = np.zeros((n_themes, x.shape[1]))
    add_rows_in_order(sums, group, x, order)
    xs = x[order]
    if len(xs) * n_themes <= _GRAM_MAX:  # a small memory: every member against every sum, one C++ call
        score = dot4_gram(xs, sums)[np.arange(len(xs)), group]
    else:
        score = dot4(xs, sums[group])  # dot4's bits either way: the same pick on every CPU
    ranked = order[np.lexsort((-score, group))].tolist()  # theme by theme, the nearest first (a stable sort)
    bounds = np.searchsorted(group, np.arange(n_themes + 1)).tolist()
    offsets, rows = [0], []
    for r in range(n_themes):
        picked: list[int] = []
        for i in ranked[bounds[r] : bounds[r + 1]]:
            if all(texts[i] != texts[j] for j in picked):
                picked.append(i)
            if len(picked) == SUMMARY_STATEMENTS:
                break
        rows += sorted(picked)
        offsets.append(len(rows))
    return np.asarray(offsets, np.int64), np.asarray(rows, np.int64)


def _finalize(
    conv: Conversation,
    episodes: list[Episode],
    semantics: list[SemanticNode],
    msg: MessageVectors,
    epi_x: np.ndarray,
    sem_x: np.ndarray,
    sem_idx: np.ndarray,
    sem_sim: np.ndarray,
    st: ThemeState,
    cfg: XMemoryConfig,
    n_raw: int,
    previous: dict[int, tuple[frozenset[int], str]] | None = None,
    engine: EngineState | None = None,
) -> MemorySlice:
    """The memory's slice from its construction state. ``previous``: theme id -> (member rows,
    summary) of a memory being grown; a theme whose members are unchanged keeps its summary (only
    changed themes are re-summarised). ``engine``: the live engine's state of a grown memory."""
    theme_ids, parents, theme_of, t_idx, t_sim = st.final()
    texts = [n.text for n in semantics]
    p_off, p_rows = summary_picks(texts, sem_x, theme_of, len(theme_ids))
    p_off, p_rows = p_off.tolist(), p_rows.tolist()
    if previous:  # each theme's members, ascending (a stable sort by theme row)
        order = np.argsort(theme_of, kind="stable")
        m_off = np.searchsorted(theme_of[order], np.arange(len(theme_ids) + 1)).tolist()
    themes = []
    for r, (t, par) in enumerate(zip(theme_ids, parents)):
        old = (previous or {}).get(t)
        if old is not None and old[0] == frozenset(order[m_off[r] : m_off[r + 1]].tolist()):
            summary = old[1]
        else:
            summary = gist([texts[i] for i in p_rows[p_off[r] : p_off[r + 1]]])
        themes.append(Theme(id=t, summary=summary, parents=par))
    sizes = np.bincount(theme_of, minlength=len(themes)) if len(themes) else np.zeros(0, int)
    stats = {
        "builder": "llm-free",
        "n_messages": len(conv.messages),
        "n_episodes": len(episodes),
        "n_statements": n_raw,
        "n_semantics": len(semantics),
        "n_themes": len(themes),
        "mean_theme_size": float(sizes.mean()) if len(sizes) else 0.0,
        "max_theme_size": int(sizes.max()) if len(sizes) else 0,
        "reassignment_ratio": float(st.reassigned.mean()) if len(st.reassigned) else 0.0,
        "n_splits": st.n_splits,
        "n_merges": st.n_merges,
        "split": cfg.theme.split,
        "merge": cfg.theme.merge,
        "lineage": st.lineage(),
    }
    arrays = {
        "msg_x": msg.x,
        "epi_x": epi_x,
        "sem_x": sem_x,
        "theme_of": theme_of,
        "sem_knn_idx": sem_idx,
        "sem_knn_sim": sem_sim,
        "theme_knn_idx": t_idx,
        "theme_knn_sim": t_sim,
        "psg_x": msg.psg_x,
        "psg_msg": msg.psg_msg,
    }
    return slice_of_records(conv.sample_id, conv.messages, episodes, semantics, themes, arrays, stats, engine)


def _record_objective(
    memories: list[MemorySlice], x, offs: np.ndarray, cfg: XMemoryConfig, backend: str
) -> None:
    """f(P) of every memory's final partition, in one batched call; x [N, d] the memories'
    semantic rows in order (CSR ``offs``), on the host or, for a GPU backend, already on the device."""
    if not memories:
        return
    labels = np.concatenate([m.cols["sem"]["theme"] for m in memories]).astype(np.int64)
    f = host(partition_objective(x, labels, offs, eps=cfg.theme.eps, backend=backend))
    for m, fb in zip(memories, f):
        m.stats["f_P"] = float(fb)


def first_sessions(conv: Conversation, n: int) -> Conversation:
    """The conversation cut to its first ``n`` sessions (their questions whose evidence all lies there)."""
    keep = sorted({m.session for m in conv.messages})[:n]
    msgs = [m for m in conv.messages if m.session in keep]
    ids = {m.id for m in msgs}
    qa = [q for q in conv.qa if q.evidence and all(e in ids for e in q.evidence)]
    return Conversation(conv.sample_id, conv.speakers, msgs, qa, conv.source)


def balanced_shard_size(count: int, workers: int, most: int) -> int:
    """A shard size of at most ``most`` that cuts ``count`` conversations into as few rounds of
    ``workers`` shards as ``most`` allows, the shards of near-equal size (no worker idles at the end
    while another builds a short last shard alone). The count is the inputs': a resumed build's
    shards are sized as if every conversation were still to build."""
    rounds = max(1, -(-count // (workers * most)))
    return max(1, -(-count // (workers * rounds)))


def chunks(items: Iterable, size: int) -> Iterator[list]:
    """``items`` in lists of ``size`` (the last may be shorter), read as they are needed."""
    it = iter(items)
    while chunk := list(itertools.islice(it, size)):
        yield chunk


Finish = Callable[[list[MemorySlice]], None]  # a shard's memories made ready to commit, in place


def finished(encoded: list[EncodedSlice], finish: Finish | None, dim: int) -> list[EncodedSlice]:
    """Memories a worker or an actor encoded, with ``finish`` applied (decoded, finished, encoded
    again); as they are without one."""
    if finish is None:
        return encoded
    slices = [slice_from_bytes(e.memory_id, e.data, e.stats) for e in encoded]
    finish(slices)
    return [encode_slice(sl, dim) for sl in slices]


@dataclass
class BuildReport:
    built: list[str]
    skipped: list[str]
    timings: dict[str, float]
    wall_s: float


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

    for name, value in (
        ("limit", limit),
        ("shard_size", shard_size),
        ("max_sessions", max_sessions),
        ("workers", workers),
    ):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
            raise ValueError(f"build_store: {name}: expected an integer >= 1, got {value!r}")
    if workers > 1 and llm is not None:
        raise ValueError(
            "build_store: workers > 1 builds LLM-free only (an LLM builder batches its prompts in one process)"
        )
    cfg = config or XMemoryConfig()
    t0 = time.perf_counter()
    tm = Timings()
    job = _Job(inputs, limit, max_sessions, workers, shard_size, progress, backend, llm, finish)
    if workers > 1:
        return _build_with_workers(store_path, embedder, cfg, tm, t0, job)
    with tm.stage("load"):
        convs = load_conversations(inputs, limit=limit, max_sessions=max_sessions)
    emb = embedder if embedder is not None else load_embedder(cfg.embed.model)
    return _build_store(store_path, emb, cfg, tm, t0, job, convs, len(convs))


def _build_with_workers(
    store_path: str | Path | MemoryBackend,
    embedder: Embedder | None,
    cfg: XMemoryConfig,
    tm: Timings,
    t0: float,
    job: _Job,
) -> BuildReport:
    """The workers start first (they import and load the embedder while this process reads the
    inputs; this process loads none unless given one: the store takes the embedder the workers
    report); the conversations are checked while the first shards are built, and none is committed
    before all are checked."""
    from ..embed import check_embedder_spec
    from .worker_pool import WorkerPool

    if embedder is None:  # a malformed spec is reported here, as one process would, not by a worker
        check_embedder_spec(cfg.embed.model)
    with WorkerPool(job.workers, job.worker_settings(embedder, cfg)) as job.pool:
        early: list[Conversation] = []  # checked while the workers still load
        with tm.stage("load"):
            count, convs = read_conversations(job.inputs, limit=job.limit, max_sessions=job.max_sessions)
            while job.pool.loaded(wait=False) is None and (c := next(convs, None)) is not None:
                early.append(c)
        name, dim = job.pool.loaded()
        emb = _Encoder(name, dim) if embedder is None else embedder
        return _build_store(
            store_path, emb, cfg, tm, t0, job, _timed(itertools.chain(early, convs), tm, "load"), count
        )


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


def _build_store(
    store_path: str | Path | MemoryBackend,
    emb,
    cfg: XMemoryConfig,
    tm: Timings,
    t0: float,
    job: _Job,
    convs: Iterable[Conversation],
    count: int,
) -> BuildReport:
    if not isinstance(store_path, (str, os.PathLike)):
        if (store_path.dim, store_path.embedder) != (emb.dim, emb.name):
            raise ValueError(
                f"build_store: the backend holds {store_path.embedder!r} ({store_path.dim}), "
                f"not {emb.name!r} ({emb.dim})"
            )
        return _build_into(store_path, convs, count, emb, cfg, tm, t0, job)
    root = Path(store_path)
    if root.exists() and not root.is_dir():
        raise ValueError(f"--out {root}: is a file; expected a folder for the store")
    root.mkdir(parents=True, exist_ok=True)
    with WriterLock(root):  # one writing process per store: a second build is refused, nothing half-created
        from ..memory.store import DB_NAME, remove_if_empty

        fresh = not (root / DB_NAME).exists()
        try:
            return _build_locked(convs, count, root, emb, cfg, tm, t0, job)
        except BaseException:
            if fresh:  # stopped before its first commit (bad input met by workers, Ctrl-C): no store is left
                remove_if_empty(root)
            raise


@dataclass
class _Job:
    """How ``build_store`` was asked to build."""

    inputs: list[str | Path] | str | Path
    limit: int | None
    max_sessions: int | None
    workers: int
    shard_size: int
    progress: bool
    backend: str
    llm: LLMBuilder | None
    finish: Finish | None = None
    pool: WorkerPool | None = None  # the worker processes of a build with workers > 1

    def worker_settings(self, emb: Embedder | None, cfg: XMemoryConfig) -> dict:
        """What the workers load: ``emb`` by its store name, or (``emb`` None) ``cfg``'s embedder spec."""
        from ..ops.devices import encoder_device

        which = {"spec": cfg.embed.model} if emb is None else {"name": emb.name, "dim": emb.dim}
        return {
            **which,
            "device": encoder_device(self.backend, cfg.embed.device),
            "config": cfg.to_dict(),
            "backend": self.backend,
        }


def _build_locked(
    convs: Iterable[Conversation],
    count: int,
    root: Path,
    emb,
    cfg: XMemoryConfig,
    tm: Timings,
    t0: float,
    job: _Job,
) -> BuildReport:
    from ..memory.store import Store

    store = Store.open_or_create(root, dim=emb.dim, embedder=emb.name, config=cfg.to_dict())
    try:
        return _build_into(store, convs, count, emb, cfg, tm, t0, job)
    finally:
        store.close()


def _build_into(
    store: MemoryBackend,
    convs: Iterable[Conversation],
    count: int,
    emb,
    cfg: XMemoryConfig,
    tm: Timings,
    t0: float,
    job: _Job,
) -> BuildReport:
    """Build ``convs`` (``count`` of them) into ``store``: those it holds intact are skipped, a
    damaged one is rebuilt (replaced)."""
    built: list[str] = []
    skipped: list[str] = []
    damaged: set[str] = set()
    bar = BuildProgress(count, enabled=job.progress)

    def todo() -> Iterator[Conversation]:
        for c in convs:
            if not store.has(c.sample_id):
                yield c
            elif not store.has(c.sample_id, intact=True):
                damaged.add(c.sample_id)
                yield c
            else:
                skipped.append(c.sample_id)
                bar.skip(1)

    with bar:
        if job.pool is not None:

            def committed(ids: list[str], seconds: dict[str, float]) -> None:
                for stage, sec in seconds.items():
                    tm.seconds[stage] += sec
                built.extend(ids)
                bar.commit(len(ids))

            size = job.shard_size
            if (
                job.pool.device == "cpu"
            ):  # the CPU's encoder is batch-invariant: any shard size gives the same store
                size = balanced_shard_size(count, job.workers, size)
            job.pool.build(
                store,
                chunks(todo(), size),
                damaged,
                on_commit=committed,
                on_progress=bar.advance,
                prepare=None if job.finish is None else lambda e: finished(e, job.finish, emb.dim),
            )
        else:
            # each shard in one commit (one transaction, its memories all or none), its files written
            # while the next shard builds: the commit of shard i is finished before shard i+1's starts,
            # and a failure while building a shard still finishes the commit of the one before
            pending: tuple[CommitHandle, list[str]] | None = None

            def finish() -> None:
                nonlocal pending
                if pending is not None:
                    handle, ids = pending
                    pending = None
                    handle.finish()
                    built.extend(ids)
                    bar.commit(len(ids))

            try:
                for shard in chunks(list(todo()), job.shard_size):
                    slices = build_slices(
                        shard, emb, cfg, timings=tm, backend=job.backend, llm=job.llm, progress=bar.advance
                    )
                    if job.finish is not None:
                        with tm.stage("finish"):
                            job.finish(slices)
                    ids = [sl.memory_id for sl in slices]
                    with tm.stage("commit"):
                        finish()
                        pending = (start_commit_on(store, slices, replace=bool(damaged & set(ids))), ids)
                with tm.stage("commit"):
                    finish()
            finally:
                finish()
    return BuildReport(built=built, skipped=skipped, timings=tm.as_dict(), wall_s=time.perf_counter() - t0)
