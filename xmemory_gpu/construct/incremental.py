"""Incremental construction: new messages grow existing memories with the bulk build's own
functions, batched across memories.

Per memory: the messages from ``open_from`` on form the open episode buffer; boundaries are
detected over it with ``segment.boundaries`` (the last span stays open unless ``flush``); new
messages yield statements (``semantic.extract_statements``), de-duplicated among themselves and
against the memory's existing nodes; new nodes attach to themes restored from the stored state
(``ThemeState.restore``), then every overfull theme of every memory of the batch is split and tiny
themes merged under f(P) (``grow_themes``, the bulk build's session steps, one batched scoring call
per round;
the theme graph restored with the memory is kept up to date, not rebuilt); the semantic kNN graphs
pay for the new nodes only (``semantic_graphs``: the new rows against the memory, the old lists
offered the new rows), all memories of the batch in one launch each; only themes whose members
changed are re-summarised. Embedding is one call for all new messages of the
batch and one for all new statements.

Inputs are the memories as read (``Memory`` views); outputs are their slices, each with its typed
engine state (open episode start, next theme id, speakers, forgotten statements: the slice's
``engine``, stored with it) so a stored memory reopens and grows.
"""

from __future__ import annotations

import functools
import hashlib
from dataclasses import replace

import numpy as np

from ..config import XMemoryConfig
from ..memory.bank import MemorySlice
from ..memory.engine_state import EngineState
from ..memory.hierarchy import Memory
from ..memory.records import Conversation, Episode, Message, SemanticNode
from ..ops.devices import host, to_backend
from ..ops.knn import knn_graph, knn_search
from .finalize import finalize, record_objective
from .segment import (
    MessageVectors,
    boundary_runs,
    cap_runs,
    embed_messages,
    episode_embeddings,
    make_episodes,
)
from .semantic import DEDUP_BLOCK, extract_statements, match_duplicates
from .theme_state import kept_graph_fits
from .themes import ThemeState, grow_themes


@functools.lru_cache(maxsize=1 << 16)  # a growing memory's ids are matched by these on every write
def statement_hash(text: str) -> str:
    """A statement's identity for forgetting (case and spacing folded); the text itself is not kept."""
    return hashlib.sha256(" ".join(text.lower().split()).encode()).hexdigest()[:32]


def engine_state(mem: Memory) -> EngineState:
    """A copy of the memory's engine state (a memory built in bulk: nothing open)."""
    return replace(mem.engine) if mem.engine is not None else EngineState.closed(len(mem.messages))


def empty_memory(memory_id: str, dim: int, k: int, state: EngineState | None = None) -> Memory:
    z = np.zeros((0, dim), np.float32)
    return Memory(
        memory_id,
        [],
        [],
        [],
        [],
        z,
        z,
        z,
        np.zeros(0, np.int32),
        np.full((0, k), -1, np.int32),
        np.full((0, k), -np.inf, np.float32),
        np.full((0, k), -1, np.int32),
        np.full((0, k), -np.inf, np.float32),
        engine=state if state is not None else EngineState(),
    )


def _speakers(old: tuple[str, ...], msgs: list[Message]) -> tuple[str, ...]:
    out = list(old)
    for m in msgs:
        if len(out) >= 2:
            break
        if m.speaker not in out:
            out.append(m.speaker)
    return tuple(out)


def _pair(speakers: tuple[str, ...]) -> tuple[str, str]:
    return (speakers + ("", ""))[:2]  # type: ignore[return-value]


def speaker_pair(messages: list[Message]) -> tuple[str, str]:
    """The two speakers a conversation of ``messages`` is read with, as growth takes them: the first two to speak."""
    return _pair(_speakers((), messages))


def grow(
    memories: list[Memory],
    new_messages: list[list[Message]],
    embedder,
    config: XMemoryConfig | None = None,
    *,
    flush: bool = False,
    new_x: list[MessageVectors] | None = None,
    backend: str = "auto",
    restate: list[set[str]] | None = None,
) -> list[MemorySlice]:
    """``memories[b]`` grown by ``new_messages[b]`` (in order), all memories in one batch.

    ``new_x``: the new messages' embeddings and passages when already known; otherwise one
    ``embedder.encode`` call embeds every new message of the batch (and the passages of the long
    ones). ``restate[b]``: ids of messages already in memory ``b`` whose statements are extracted
    again with the new ones' (after ``forget.without`` took out what was derived from them).
    ``flush`` closes every open episode. Returns the grown memories' slices (the inputs are not
    modified)."""
    cfg = config or XMemoryConfig()
    if new_x is None:
        flat = [m for msgs in new_messages for m in msgs]  # embedded exactly as the bulk build does
        new_x = embed_messages(embedder, flat, cfg.semantic.passage_words).split(
            [len(m) for m in new_messages]
        )
    states = [engine_state(m) for m in memories]
    grown: list[dict] = []
    restate = restate or [set() for _ in memories]
    for mem, msgs, vec, st, again_ids in zip(memories, new_messages, new_x, states, restate):
        messages = mem.messages + list(msgs)
        own = MessageVectors(mem.msg_x, mem.psg_x, mem.psg_msg)
        vectors = MessageVectors.concat([own, vec], mem.dim)
        msg_x = vectors.x
        speakers = _speakers(st.speakers, messages)
        conv = Conversation(mem.memory_id, _pair(speakers), messages)
        tail = Conversation(mem.memory_id, _pair(speakers), messages[st.open_from :])
        runs = boundary_runs(tail, msg_x[st.open_from :], cfg.segment)
        spans = cap_runs(runs, cfg.segment)
        first_msg = {m.id: i for i, m in enumerate(messages)}
        # the closed episodes, numbered by position as construction numbers (the engine gives stable ids after)
        keep = [
            Episode(j, e.title, e.text, list(e.message_ids), e.start, e.end)
            for j, e in enumerate(e for e in mem.episodes if first_msg[e.message_ids[0]] < st.open_from)
        ]
        fresh = make_episodes(tail, spans)
        for j, e in enumerate(fresh):
            e.id = len(keep) + j
        episodes = keep + fresh
        epi_x = (
            np.concatenate([mem.epi_x[: len(keep)], episode_embeddings(spans, msg_x[st.open_from :])])
            if spans
            else mem.epi_x[: len(keep)]
        )
        # the last run stays open (its length cap and drift are decided again as it grows), as in the bulk build
        open_from = len(messages) if (flush or not runs) else st.open_from + runs[-1][0]
        again = [m for m in mem.messages if m.id in again_ids] if again_ids else []
        src = again + list(msgs)
        raw = (
            extract_statements(
                Conversation(mem.memory_id, _pair(speakers), src), episodes if again else fresh, cfg.semantic
            )
            if src
            else []
        )
        if st.forgotten:
            gone = set(st.forgotten)
            raw = [r for r in raw if statement_hash(r.text) not in gone]
        grown.append(
            {
                "conv": conv,
                "messages": messages,
                "vectors": vectors,
                "episodes": episodes,
                "epi_x": epi_x,
                "raw": raw,
                "state": EngineState(open_from, st.next_theme_id, speakers, st.forgotten),
            }
        )
    raw_x_all = (
        embedder.encode([r.text for g in grown for r in g["raw"]]) if any(g["raw"] for g in grown) else None
    )
    raw_x = (
        np.split(raw_x_all, np.cumsum([len(g["raw"]) for g in grown])[:-1])
        if raw_x_all is not None
        else [np.zeros((0, mem.dim), np.float32) for mem in memories]
    )
    theme_states: list[ThemeState] = []
    steps: list[list[np.ndarray]] = []
    for mem, g, rx in zip(memories, grown, raw_x):
        semantics, sem_x, n_new = _dedup_into(mem, g["raw"], rx, cfg.semantic.dedup_threshold)
        ep_of = {mid: e.id for e in g["episodes"] for mid in e.message_ids}
        for s in semantics:
            s.episode_ids = sorted({ep_of[mid] for mid in s.message_ids})
        g.update(semantics=semantics, sem_x=sem_x)
        rows_of = {t.id: r for r, t in enumerate(mem.themes)}
        ts = ThemeState.restore(
            sem_x,
            len(mem.semantics),
            [t.id for t in mem.themes],
            mem.theme_of,
            {t.id: t.parents for t in mem.themes},
            g["state"].next_theme_id,
            cfg.knn.k_themes,
            cfg.knn.drop_nonpositive,
            graph=(mem.theme_knn_idx, mem.theme_knn_sim),
        )
        g["previous"] = {
            t.id: (frozenset(np.flatnonzero(mem.theme_of == rows_of[t.id]).tolist()), t.summary)
            for t in mem.themes
        }
        theme_states.append(ts)
        session_of = {m.id: m.session for m in g["messages"]}
        new_rows = np.arange(len(mem.semantics), len(semantics))
        sess = np.array([session_of[semantics[i].message_ids[0]] for i in new_rows], np.int64)
        steps.append([new_rows[sess == s] for s in dict.fromkeys(sess.tolist())])
        g["n_new"] = n_new
    grow_themes(theme_states, steps, cfg.theme, backend=backend)
    # semantic kNN graphs of every memory of the batch, one launch
    sizes = [len(g["semantics"]) for g in grown]
    offs = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    d = memories[0].dim if memories else embedder.dim
    all_sem = np.concatenate([g["sem_x"] for g in grown]) if offs[-1] else np.zeros((0, d), np.float32)
    all_sem = to_backend(all_sem, backend, dtype=np.float32)  # one upload for the graphs and f(P)
    k = cfg.knn.k_semantics
    idx, sim = semantic_graphs(memories, all_sem, offs, k, cfg.knn.drop_nonpositive, backend)
    out = []
    for b, (mem, g, ts) in enumerate(zip(memories, grown, theme_states)):
        lo, hi = int(offs[b]), int(offs[b + 1])
        sem_idx = np.where(idx[lo:hi] >= 0, idx[lo:hi] - lo, -1).astype(np.int32)
        st = g["state"]
        st.next_theme_id = ts.next_id
        m = finalize(
            g["conv"],
            g["episodes"],
            g["semantics"],
            g["vectors"],
            g["epi_x"],
            g["sem_x"],
            sem_idx,
            sim[lo:hi],
            ts,
            cfg,
            int(mem.stats.get("n_statements", 0)) + len(g["raw"]),
            previous=g["previous"],
            engine=st,
        )
        m.stats["n_splits"] += int(mem.stats.get("n_splits", 0))
        m.stats["n_merges"] += int(mem.stats.get("n_merges", 0))
        m.stats["builder"] = "llm-free (incremental)"
        out.append(m)
    record_objective(out, all_sem, offs, cfg, backend)
    return out


def _graph_kept(mem: Memory, k: int, drop: bool) -> bool:
    """Whether ``mem``'s semantic kNN lists are its graph under this k and edge rule."""
    return kept_graph_fits(mem.sem_knn_idx, mem.sem_knn_sim, len(mem.semantics), k, drop)


def semantic_graphs(
    memories: list[Memory], all_sem, offs: np.ndarray, k: int, drop_nonpositive: bool, backend: str
) -> tuple[np.ndarray, np.ndarray]:
    """The grown memories' semantic kNN graphs: idx [N, k] int32 global rows, sim [N, k] float32, for
    all_sem [N, d] (memory b's rows at ``offs[b]:offs[b+1]``, its old rows first, unchanged). A memory
    whose old graph is kept pays for its new rows only: the new rows searched against all its rows,
    the old rows against the new ones, each old list merged with what beats it (ties to the lower
    row, as ``knn_graph``). On the host backends the lists and their float bits are the ones
    ``knn_graph`` gives for the whole memory (the same kernel computes every product); the others
    (a forgotten row, a changed k) are built whole in one launch."""
    n = int(offs[-1])
    idx, sim = np.full((n, k), -1, np.int32), np.full((n, k), -np.inf, np.float32)
    if not n:
        return idx, sim
    kept = [_graph_kept(m, k, drop_nonpositive) for m in memories]
    n_old = np.array([len(m.semantics) if ok else 0 for m, ok in zip(memories, kept)], np.int64)
    whole = [b for b, ok in enumerate(kept) if not ok]
    if whole:
        rows = np.concatenate([np.arange(offs[b], offs[b + 1]) for b in whole])
        sub = np.concatenate([[0], np.cumsum([offs[b + 1] - offs[b] for b in whole])]).astype(np.int64)
        gi, gs = knn_graph(
            host(all_sem)[rows] if len(whole) < len(memories) else all_sem,
            sub,
            k,
            drop_nonpositive=drop_nonpositive,
            backend=backend,
        )
        gi, gs = host(gi), host(gs)
        idx[rows] = np.where(gi >= 0, rows[np.maximum(gi, 0)], -1)
        sim[rows] = gs
    inc = [b for b, ok in enumerate(kept) if ok and offs[b + 1] - offs[b] > 0]
    if not inc:
        return idx, sim
    x = host(all_sem)
    new = np.concatenate([np.arange(offs[b] + n_old[b], offs[b + 1]) for b in inc])
    q_off = np.concatenate([[0], np.cumsum([offs[b + 1] - offs[b] - n_old[b] for b in inc])]).astype(np.int64)
    mem_rows = np.concatenate([np.arange(offs[b], offs[b + 1]) for b in inc])
    x_off = np.concatenate([[0], np.cumsum([offs[b + 1] - offs[b] for b in inc])]).astype(np.int64)
    if len(new):  # the new rows against every row of their memory, self dropped
        ni, ns = knn_search(
            x[new], q_off, x[mem_rows], x_off, k + 1, drop_nonpositive=drop_nonpositive, backend=backend
        )
        ni, ns = host(ni), host(ns)
        glob = np.where(ni >= 0, mem_rows[np.maximum(ni, 0)], -1)
        not_self = glob != new[:, None]
        order = np.argsort(~not_self, axis=1, kind="stable")[:, :k]  # the first k that are not self
        take_i, take_s = np.take_along_axis(glob, order, 1), np.take_along_axis(ns, order, 1)
        gone = ~np.take_along_axis(not_self, order, 1)
        idx[new] = np.where(gone, -1, take_i)
        sim[new] = np.where(gone, -np.inf, take_s)
    old = np.concatenate([np.arange(offs[b], offs[b] + n_old[b]) for b in inc])
    if len(old) and len(new):  # the old rows against the new ones, merged into their kept lists
        o_off = np.concatenate([[0], np.cumsum(n_old[inc])]).astype(np.int64)
        ci, cs = knn_search(
            x[old], o_off, x[new], q_off, k, drop_nonpositive=drop_nonpositive, backend=backend
        )
        ci, cs = host(ci), host(cs)
        ci = np.where(ci >= 0, new[np.maximum(ci, 0)], -1)
        base = np.repeat(offs[inc], n_old[inc])  # each old row's memory's first global row
        kept_i = np.concatenate([memories[b].sem_knn_idx for b in inc]).astype(np.int64)
        kept_i = np.where(kept_i >= 0, kept_i + base[:, None], -1)
        kept_s = np.concatenate([memories[b].sem_knn_sim for b in inc]).astype(np.float32)
        ids, sims = np.concatenate([kept_i, ci], 1), np.concatenate([kept_s, cs], 1)
        order = np.argsort(-sims, axis=1, kind="stable")[:, :k]  # kept ids are lower: ties keep them first
        idx[old] = np.take_along_axis(ids, order, 1)
        sim[old] = np.take_along_axis(sims, order, 1)
    elif len(old):
        base = np.repeat(offs[inc], n_old[inc])
        kept_i = np.concatenate([memories[b].sem_knn_idx for b in inc]).astype(np.int64)
        idx[old] = np.where(kept_i >= 0, kept_i + base[:, None], -1)
        sim[old] = np.concatenate([memories[b].sem_knn_sim for b in inc])
    return idx, sim


def _dedup_into(
    mem: Memory, raw: list[SemanticNode], raw_x: np.ndarray, threshold: float
) -> tuple[list[SemanticNode], np.ndarray, int]:
    """The memory's nodes plus the new statements, de-duplicated exactly as the bulk build does
    (``semantic.merge_duplicates``; :func:`match_duplicates`): in order, each new statement merges
    into its most similar earlier kept node (the memory's nodes, then the new ones kept so far) when
    the cosine exceeds ``threshold``, keeping every source; otherwise it is kept. Returns nodes,
    their rows of x, and how many are new."""
    semantics = [
        SemanticNode(s.id, s.text, list(s.episode_ids), list(s.message_ids), s.timestamp)
        for s in mem.semantics
    ]
    target = (
        match_duplicates(mem.sem_x, raw_x, threshold, block=DEDUP_BLOCK)
        if len(raw)
        else np.zeros(0, np.int64)
    )
    new_rows: list[int] = []  # rows of raw kept as new nodes
    for i, node in enumerate(raw):
        t = int(target[i])
        if t >= 0:
            into = semantics[t]  # the existing nodes, then the new kept ones, in order
            into.message_ids = list(dict.fromkeys(into.message_ids + node.message_ids))
            continue
        new_rows.append(i)
        semantics.append(
            SemanticNode(
                len(semantics), node.text, list(node.episode_ids), list(node.message_ids), node.timestamp
            )
        )
    sem_x = np.concatenate([mem.sem_x, raw_x[new_rows]]) if new_rows else mem.sem_x
    return semantics, sem_x.astype(np.float32), len(new_rows)
