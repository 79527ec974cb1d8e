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

Inputs are the memories' slices (a bank's ``bank.slice(b)``, or :func:`empty_slice`), read from
their columns: only the open episode's messages and the messages restated become records; the
closed episodes, the statements and their sources are carried over as columns. Outputs are the
grown slices, each with its typed engine state (open episode start, next theme id, speakers,
forgotten statements: the slice's ``engine``, stored with it) so a stored memory reopens and grows.
A ``Memory`` record given is read as its slice.
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Iterable, Sequence
from dataclasses import replace

import numpy as np

from ..config import SemanticConfig, XMemoryConfig
from ..memory.bank import KeptRows, MemorySlice, ragged_lengths, ragged_reduce
from ..memory.codec import theme_columns_from
from ..memory.engine_state import EngineState
from ..memory.hierarchy import (
    Memory,
    _graph,
    _obj,
    _ragged,
    _ts,
    messages_at,
    slice_from_memory,
)
from ..memory.records import Conversation, Episode, Message, SemanticNode
from ..ops.checks import csr_offsets
from ..ops.devices import host, to_backend
from ..ops.knn import knn_graph, knn_search
from .finalize import PreviousThemes, partition_stats, record_objective, theme_summaries
from .segment import (
    MessageVectors,
    boundary_runs,
    cap_runs,
    embed_messages,
    episode_embeddings,
    make_episodes,
)
from .semantic import DEDUP_BLOCK, ONE_SOURCE, extract_statements, match_duplicates, without_question
from .theme_memo import ThemeMemo
from .theme_state import kept_graph_fits, to_repair
from .themes import ThemeState, grow_themes, session_steps


@functools.lru_cache(maxsize=1 << 16)  # a growing memory's ids are matched by these on every write
def statement_hash(text: str) -> str:
    """A statement's identity for forgetting (case and spacing folded); the text itself is not kept."""
    return hashlib.sha256(" ".join(text.lower().split()).encode()).hexdigest()[:32]


def forgotten_hashes(text: str, cfg: SemanticConfig) -> set[str]:
    """The hashes a statement is forgotten by: its text's and, where a reply is read with its question
    (``SemanticConfig.read_replies_with_questions``), its text's without the question, so a change to
    the turn before it (a delete, an update) does not bring it back with another question or none."""
    out = {statement_hash(text)}
    if cfg.read_replies_with_questions:
        out.add(statement_hash(without_question(text)))
    return out


def engine_state(mem: MemorySlice | Memory) -> EngineState:
    """A copy of the memory's engine state (a memory built in bulk: nothing open)."""
    if mem.engine is not None:
        return replace(mem.engine)
    return EngineState.closed(mem.n("msg") if isinstance(mem, MemorySlice) else len(mem.messages))


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


def empty_slice(memory_id: str, dim: int, k: int, state: EngineState | None = None) -> MemorySlice:
    """A memory with nothing in it, as a slice (``grow``'s input for a new memory)."""
    return slice_from_memory(empty_memory(memory_id, dim, k, state))


def valid_rows(row: np.ndarray) -> list[int]:
    """A ragged column's row without its ``-1`` padding."""
    return row[row >= 0].tolist()


def _first_speakers(old: tuple[str, ...], speakers: Iterable[str]) -> tuple[str, ...]:
    out = list(old)
    for sp in speakers:
        if len(out) >= 2:
            break
        if sp not in out:
            out.append(str(sp))
    return tuple(out)


def _speakers(old: tuple[str, ...], msgs: list[Message]) -> tuple[str, ...]:
    return _first_speakers(old, (m.speaker for m in msgs))


def _pair(speakers: tuple[str, ...]) -> tuple[str, str]:
    return (speakers + ("", ""))[:2]  # type: ignore[return-value]


def speaker_pair(messages: list[Message]) -> tuple[str, str]:
    """The two speakers a conversation of ``messages`` is read with, as growth takes them: the first two to speak."""
    return _pair(_speakers((), messages))


def stored_themes(
    sl: MemorySlice, cfg: XMemoryConfig, x: np.ndarray | None = None, next_id: int | None = None
) -> ThemeState:
    """The themes stored with memory ``sl`` as a ``ThemeState`` (``ThemeState.restore``), its graph
    kept: what a growth attaches its new statements to. ``x`` [n, d]: the statement rows, the
    stored ones first (default: the stored ones); ``next_id``: the next theme id (default: the
    engine state's)."""
    sc, tc = sl.cols["sem"], sl.cols["theme"]
    ids = tc["id"].tolist()
    return ThemeState.restore(
        sc["x"] if x is None else x,
        sl.n("sem"),
        ids,
        sc["theme"],
        {t: [v for v in row if v >= 0] for t, row in zip(ids, np.asarray(tc["parents"]).tolist())},
        engine_state(sl).next_theme_id if next_id is None else next_id,
        cfg.knn.k_themes,
        cfg.knn.drop_nonpositive,
        graph=(tc["knn_idx"], tc["knn_sim"]),
    )


def grow(
    memories: Sequence[MemorySlice | Memory],
    new_messages: list[list[Message]],
    embedder,
    config: XMemoryConfig | None = None,
    *,
    flush: bool = False,
    new_x: list[MessageVectors] | None = None,
    backend: str = "auto",
    restate: list[set[str]] | None = None,
    memo: ThemeMemo | None = None,
) -> list[MemorySlice]:
    """``memories[b]`` (its slice) grown by ``new_messages[b]`` (in order), all memories in one batch.

    ``new_x``: the new messages' embeddings and passages when already known; otherwise one
    ``embedder.encode`` call embeds every new message of the batch (and the passages of the long
    ones). ``restate[b]``: ids of messages already in memory ``b`` whose statements are extracted
    again with the new ones' (after ``forget.forget`` took out what was derived from them).
    ``flush`` closes every open episode. Returns the grown memories' slices (the inputs are not
    modified).  A ``Memory`` record given is read as its slice. ``memo``: the themes each memory's
    last growth left (read as hints, then given this growth's)."""
    slices = [slice_from_memory(m) if isinstance(m, Memory) else m for m in memories]
    cfg = config or XMemoryConfig()
    if new_x is None:
        flat = [m for msgs in new_messages for m in msgs]  # embedded exactly as the bulk build does
        new_x = embed_messages(embedder, flat, cfg.semantic.passage_words).split(
            [len(m) for m in new_messages]
        )
    restate = restate or [set() for _ in slices]
    grown = [
        _grow_messages(sl, list(msgs), vec, again, cfg, flush)
        for sl, msgs, vec, again in zip(slices, new_messages, new_x, restate)
    ]
    raw_x_all = (
        embedder.encode([r.text for g in grown for r in g["raw"]]) if any(g["raw"] for g in grown) else None
    )
    raw_x = (
        np.split(raw_x_all, np.cumsum([len(g["raw"]) for g in grown])[:-1])
        if raw_x_all is not None
        else [np.zeros((0, _dim(sl)), np.float32) for sl in slices]
    )
    theme_states: list[ThemeState] = []
    steps: list[list[np.ndarray]] = []
    for sl, g, rx in zip(slices, grown, raw_x):
        sc, tc = sl.cols["sem"], sl.cols["theme"]
        n_old = sl.n("sem")
        _dedup_columns(g, sc, rx, cfg.semantic.dedup_threshold)
        ts = stored_themes(sl, cfg, g["sem_x"], g["state"].next_theme_id)
        of = np.asarray(sc["theme"], np.int64)
        g["previous"] = PreviousThemes(
            np.where(of >= 0, np.asarray(tc["id"], np.int64)[np.maximum(of, 0)], -1) if len(tc["id"]) else of,
            tc["id"].tolist(),
            # a theme ``forget`` left without its summary is summarised again
            {t: str(sm) for t, sm in zip(tc["id"].tolist(), tc["summary"].tolist()) if str(sm)},
        )
        theme_states.append(ts)
        steps.append(session_steps(g["new_sessions"], n_old))
    hints = None if memo is None else [memo.get(sl.memory_id) for sl in slices]
    # a memory the memo keeps the state of keeps it through a growth with no theme step (a delete's)
    keep = memo is not None and len(slices) == 1 and memo.keeps_state(theme_states[0].n_attached)
    f_held = grow_themes(theme_states, steps, cfg.theme, backend=backend, hints=hints, keep_state=keep)
    if memo is not None:
        for sl, h in zip(slices, hints):
            memo.put(sl.memory_id, h)
    sizes = [len(g["sem_x"]) for g in grown]
    offs = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    d = _dim(slices[0]) if slices else embedder.dim
    all_sem = np.concatenate([g["sem_x"] for g in grown]) if offs[-1] else np.zeros((0, d), np.float32)
    all_sem = to_backend(all_sem, backend, dtype=np.float32)  # one upload for the graphs and f(P)
    idx, sim = semantic_graphs(slices, all_sem, offs, cfg.knn.k_semantics, cfg.knn.drop_nonpositive, backend)
    out = []
    for b, (sl, g, ts) in enumerate(zip(slices, grown, theme_states)):
        lo, hi = int(offs[b]), int(offs[b + 1])
        sem_idx = np.where(idx[lo:hi] >= 0, idx[lo:hi] - lo, -1).astype(np.int32)
        g["state"].next_theme_id = ts.next_id
        m = _grown_slice(sl, g, sem_idx, sim[lo:hi], ts, cfg)
        m.stats["n_splits"] += int(sl.stats.get("n_splits", 0))
        m.stats["n_merges"] += int(sl.stats.get("n_merges", 0))
        m.stats["builder"] = "llm-free (incremental)"
        # statements read from one message each: from the start, or as long as the memory had them
        m.stats[ONE_SOURCE] = bool(sl.stats.get(ONE_SOURCE, False)) or sl.n("msg") == 0
        out.append(m)
    if f_held is not None:
        for m, f in zip(out, f_held.tolist()):  # the theme stage's own f(P): no pass over every statement
            m.stats["f_P"] = f
    elif all(_same_partition(sl, m) for sl, m in zip(slices, out)):
        for sl, m in zip(slices, out):  # no statement joined or moved: f(P) is the one recorded
            m.stats["f_P"] = sl.stats["f_P"]
    else:
        record_objective(out, all_sem, offs, cfg, backend)
    return out


def _same_partition(old: MemorySlice, new: MemorySlice) -> bool:
    """Whether ``new`` holds ``old``'s statements (vectors never change in a growth: only rows are
    added) in the same themes, and ``old`` records its f(P) (``forget`` drops it)."""
    return (
        "f_P" in old.stats
        and new.n("sem") == old.n("sem")
        and np.array_equal(new.cols["sem"]["theme"], old.cols["sem"]["theme"])
    )


def _dim(sl: MemorySlice) -> int:
    return int(sl.cols["sem"]["x"].shape[1])


def turns_before(sl: MemorySlice, rows: list[int], new: list[Message] = ()) -> dict[str, Message | None]:
    """The turn before each message of ``sl`` at ``rows`` and each of the ``new`` ones that follow its
    last (message id -> that turn, None for the first): what a reply is read with."""
    n, ids = sl.n("msg"), sl.cols["msg"]["id"]
    before = sorted({r - 1 for r in rows if r > 0} | ({n - 1} if new and n else set()))
    at = dict(zip(before, messages_at(sl, before)))
    out: dict[str, Message | None] = {str(ids[r]): at.get(r - 1) for r in rows}
    last = at.get(n - 1)
    for m in new:
        out[m.id], last = last, m
    return out


def _grow_messages(
    sl: MemorySlice,
    msgs: list[Message],
    vec: MessageVectors,
    again_ids: set[str],
    cfg: XMemoryConfig,
    flush: bool,
) -> dict:
    """One memory's messages grown: its vectors, episodes (the closed ones kept as rows, the open
    buffer segmented again), new engine state and the raw statements of the new (and restated)
    messages."""
    st = engine_state(sl)
    mc, ec = sl.cols["msg"], sl.cols["epi"]
    n_msg = sl.n("msg")
    own = MessageVectors(mc["x"], sl.cols["psg"]["x"], sl.cols["psg"]["msg"])
    vectors = MessageVectors.concat([own, vec], _dim(sl))
    speakers = _first_speakers(st.speakers, iter(mc["speaker"])) if len(st.speakers) < 2 else st.speakers
    speakers = _speakers(speakers, msgs)
    tail = Conversation(sl.memory_id, _pair(speakers), messages_at(sl, range(st.open_from, n_msg)) + msgs)
    runs = boundary_runs(tail, vectors.x[st.open_from :], cfg.segment)
    spans = cap_runs(runs, cfg.segment)
    # the closed episodes (a prefix of the rows), numbered by position as construction numbers them
    n_keep = int((ec["msgs"][:, 0] < st.open_from).sum()) if sl.n("epi") else 0
    fresh = make_episodes(tail, spans)
    for j, e in enumerate(fresh):
        e.id = n_keep + j
    epi_x = (
        np.concatenate([ec["x"][:n_keep], episode_embeddings(spans, vectors.x[st.open_from :])])
        if spans
        else ec["x"][:n_keep]
    )
    # the last run stays open (its length cap and drift are decided again as it grows), as in the bulk build
    n_all = n_msg + len(msgs)
    open_from = n_all if (flush or not runs) else st.open_from + runs[-1][0]
    row_of = {m.id: st.open_from + j for j, m in enumerate(tail.messages)}
    again_rows = [r for r, i in enumerate(mc["id"].tolist()) if i in again_ids] if again_ids else []
    again = messages_at(sl, again_rows)
    row_of.update(zip((m.id for m in again), again_rows))
    for m, r in zip(msgs, range(n_msg, n_all)):
        row_of[m.id] = r
    # each message's episode row: the kept episodes' from their rows, the fresh ones' from their ids
    epi_of = np.full(n_all, -1, np.int64)
    kept_msgs = ec["msgs"][:n_keep]
    er, ek = np.nonzero(kept_msgs >= 0)
    epi_of[kept_msgs[er, ek]] = er
    for e in fresh:
        epi_of[[row_of[i] for i in e.message_ids]] = e.id
    src = again + msgs
    # extraction reads each source's episode id only: the restated ones' kept episodes, the fresh ones
    by_epi = [Episode(int(epi_of[r]), "", "", [m.id]) for m, r in zip(again, again_rows) if r < st.open_from]
    raw = (
        extract_statements(
            Conversation(sl.memory_id, _pair(speakers), src),
            by_epi + fresh,
            cfg.semantic,
            previous=turns_before(sl, again_rows, msgs) if cfg.semantic.read_replies_with_questions else None,
        )
        if src
        else []
    )
    if st.forgotten:
        gone = set(st.forgotten)
        raw = [r for r in raw if gone.isdisjoint(forgotten_hashes(r.text, cfg.semantic))]
    return {
        "n_msg": n_all,
        "open_before": st.open_from,
        "new_msgs": msgs,
        "vectors": vectors,
        "n_keep": n_keep,
        "fresh": [(e, [row_of[i] for i in e.message_ids]) for e in fresh],
        "epi_x": epi_x,
        "epi_of": epi_of,
        "raw": raw,
        "raw_rows": row_of,
        "session_of": {m.id: m.session for m in src},
        "n_stmts": len(raw),
        "state": EngineState(open_from, st.next_theme_id, speakers, st.forgotten),
    }


def _dedup_columns(g: dict, sc: dict[str, np.ndarray], raw_x: np.ndarray, threshold: float) -> None:
    """The memory's statements plus the new ones, de-duplicated as :func:`_dedup_into` does (each
    new statement merged into its most similar earlier kept one above ``threshold``, keeping every
    source; else kept), on columns: ``g`` gains the merged sources of old rows (``merged``: row ->
    message rows), the new rows' texts, times and sources, ``sem_x`` and each new row's session."""
    raw, row_of = g["raw"], g["raw_rows"]
    n_old = int(sc["x"].shape[0])
    target = (
        match_duplicates(sc["x"], raw_x, threshold, block=DEDUP_BLOCK) if len(raw) else np.zeros(0, np.int64)
    )
    merged: dict[int, list[int]] = {}
    texts, times, sources, kept = [], [], [], []
    sessions = []
    for i, node in enumerate(raw):
        rows = [row_of[m] for m in node.message_ids]
        t = int(target[i])
        if t >= n_old:
            sources[t - n_old] = list(dict.fromkeys(sources[t - n_old] + rows))
        elif t >= 0:
            before = merged[t] if t in merged else valid_rows(sc["msgs"][t])
            merged[t] = list(dict.fromkeys(before + rows))
        else:
            kept.append(i)
            texts.append(node.text)
            times.append(node.timestamp)
            sources.append(rows)
            sessions.append(g["session_of"][node.message_ids[0]])
    # a fresh array either way (never the slice's own column), copied once
    sem_x = (
        np.concatenate([sc["x"], raw_x[kept]]).astype(np.float32, copy=False)
        if kept
        else sc["x"].astype(np.float32)
    )
    g.update(
        merged=merged,
        new_texts=texts,
        new_times=times,
        new_sources=sources,
        new_sessions=sessions,
        sem_x=sem_x,
    )


def _padded(old: np.ndarray, n: int, w: int, dtype) -> np.ndarray:
    """[n, w] ``dtype``: ``old``'s rows (a ragged column, valid entries first) cut or padded with -1 to
    width ``w``, then rows of -1; each byte written once (a long memory's source column is tens of MB)."""
    out = np.empty((n, w), dtype)
    m, c = old.shape[0], min(w, old.shape[1])
    out[:m, :c] = old[:, :c]
    out[:m, c:] = -1
    out[m:] = -1
    return out


def _packed(rows: np.ndarray, lengths: np.ndarray, dtype) -> np.ndarray:
    """A ragged column [n, w] (valid entries first) cut or padded to its longest row (at least 1)."""
    return _padded(rows, rows.shape[0], max(int(lengths.max(initial=0)), 1), dtype)


def _ragged_rows(
    old: np.ndarray, extra: list[list[int]], replace_at: dict[int, list[int]], dtype
) -> np.ndarray:
    """``old``'s rows (``replace_at``: rows given anew) then ``extra``'s, as one ragged column."""
    n_old = old.shape[0]
    lengths = np.concatenate([ragged_lengths(old), np.array([len(x) for x in extra], np.int64)]).astype(
        np.int64
    )
    for r, x in replace_at.items():
        lengths[r] = len(x)
    out = _padded(old, n_old + len(extra), max(int(lengths.max(initial=0)), 1), dtype)  # one copy of old
    for r, x in [*replace_at.items(), *((n_old + j, x) for j, x in enumerate(extra))]:
        out[r] = -1
        out[r, : len(x)] = x
    return out


def _sorted_unique_rows(a: np.ndarray) -> np.ndarray:
    """Each row's distinct values >= 0, ascending, as a ragged column (-1 padded, width >= 1)."""
    big = np.iinfo(np.int64).max
    s = np.sort(np.where(a >= 0, a, big), axis=1)
    if s.shape[1] > 1:
        dup = np.zeros(s.shape, bool)
        dup[:, 1:] = s[:, 1:] == s[:, :-1]
        s = np.sort(np.where(dup, big, s), axis=1)
    n = (s != big).sum(axis=1)
    return _packed(np.where(s == big, -1, s), n, np.int32)


def _statement_episodes(
    memory_id: str,
    sem_msgs: np.ndarray,
    epi_of: np.ndarray,
    old_epis: np.ndarray,
    kept_below: int,
    merged: dict[int, list[int]],
) -> np.ndarray:
    """``sem.epis`` of the grown memory: each statement's distinct episode rows, ascending, -1 padded
    to the longest row (width >= 1). ``sem_msgs`` [n, w] the statements' message rows, ``epi_of``
    [messages] each message's episode row, ``old_epis`` [n_old, v] the column before the growth. A
    message row below ``kept_below`` is in an episode kept as it was (same row), so an old statement
    whose sources are all there keeps its row of ``old_epis``; the others (``merged`` rows, new rows,
    sources in the episodes segmented again) are computed from their sources."""
    n, n_old = sem_msgs.shape[0], old_epis.shape[0]
    again = np.zeros(n, bool)
    again[n_old:] = True
    again[list(merged)] = True
    if n_old:  # a source in an episode segmented again (its largest message row: a maximum)
        again[:n_old] |= ragged_reduce(sem_msgs[:n_old], lambda b: b.max(axis=1)) >= kept_below
    rows = np.flatnonzero(again)
    src = sem_msgs[rows]
    if (epi_of[src[src >= 0]] < 0).any():
        raise ValueError(f"memory {memory_id}: a statement's source is in no episode")
    part = _sorted_unique_rows(np.where(src >= 0, epi_of[np.maximum(src, 0)], -1))
    lengths = np.zeros(n, np.int64)
    lengths[:n_old] = ragged_lengths(old_epis[:n_old])
    lengths[rows] = (part >= 0).sum(axis=1)
    out = _padded(old_epis[:n_old], n, max(int(lengths.max(initial=0)), 1), np.int32)  # the kept rows
    out[rows] = -1  # then the ones computed again
    c = min(out.shape[1], part.shape[1])
    out[rows, :c] = part[:, :c]
    return out


def _first_psg(psg_msg: np.ndarray, n_msg: int) -> np.ndarray:
    """Each message's first passage row (-1: none); ``psg_msg`` [p] the passages' message rows, in order."""
    out = np.full(n_msg, -1, np.int32)
    if psg_msg.size:
        first = np.concatenate([[True], psg_msg[1:] != psg_msg[:-1]])
        out[psg_msg[first]] = np.flatnonzero(first)
    return out


def _grown_slice(
    sl: MemorySlice, g: dict, sem_idx: np.ndarray, sem_sim: np.ndarray, ts: ThemeState, cfg: XMemoryConfig
) -> MemorySlice:
    """The grown memory's slice, its columns the old ones with what changed (``construct.finalize``
    on columns: a theme whose members are unchanged keeps its summary, the others are summarised)."""
    mc, ec, sc = sl.cols["msg"], sl.cols["epi"], sl.cols["sem"]
    d = _dim(sl)
    msgs, fresh, n_keep = g["new_msgs"], g["fresh"], g["n_keep"]
    vectors: MessageVectors = g["vectors"]
    sem_x = g["sem_x"]
    theme_ids, parents, theme_of, t_idx, t_sim = ts.final()
    texts = sc["text"].tolist() + g["new_texts"]
    summaries = theme_summaries(texts, sem_x, theme_of, theme_ids, g["previous"])
    n_th, n_sem, n_epi = len(theme_ids), len(texts), n_keep + len(fresh)
    stats = {
        "builder": "llm-free",
        "n_messages": g["n_msg"],
        "n_episodes": n_epi,
        "n_statements": int(sl.stats.get("n_statements", 0)) + g["n_stmts"],
        "n_semantics": n_sem,
        **partition_stats(ts, theme_of, n_th, cfg),
    }
    sem_msgs = _ragged_rows(sc["msgs"], g["new_sources"], g["merged"], np.int32)
    sem_epis = _statement_episodes(
        sl.memory_id, sem_msgs, g["epi_of"], sc["epis"], g["open_before"], g["merged"]
    )
    psg_x = np.asarray(vectors.psg_x, np.float32).reshape(-1, d)
    psg_msg = np.asarray(vectors.psg_msg, np.int32).reshape(-1)
    theme_of = np.asarray(theme_of, np.int32).reshape(-1)
    unchanged = g["previous"].unchanged(np.asarray(theme_ids, np.int64)[theme_of])
    old_row = {t: r for r, t in enumerate(g["previous"].ids) if t in unchanged}
    # a theme whose members are the same keeps its columns (a function of its members' rows)
    theme = theme_columns_from(
        sl.cols["theme"], np.array([old_row.get(t, -1) for t in theme_ids], np.int64), sem_x, theme_of, n_th
    )
    cols = {
        "msg": {
            "x": np.asarray(vectors.x, np.float32).reshape(-1, d),
            "id": np.concatenate([mc["id"], _obj([m.id for m in msgs])]),
            "speaker": np.concatenate([mc["speaker"], _obj([m.speaker for m in msgs])]),
            "text": np.concatenate([mc["text"], _obj([m.text for m in msgs])]),
            "session": np.concatenate([mc["session"], np.array([m.session for m in msgs], np.int64)]),
            "time": np.concatenate([mc["time"], np.array([_ts(m.timestamp) for m in msgs], np.float64)]),
            "psg": _first_psg(psg_msg, g["n_msg"]),
        },
        "epi": {
            "x": np.asarray(g["epi_x"], np.float32).reshape(-1, d),
            "id": np.arange(n_epi, dtype=np.int64),
            "title": np.concatenate([ec["title"][:n_keep], _obj([e.title for e, _ in fresh])]),
            "text": np.concatenate([ec["text"][:n_keep], _obj([e.text for e, _ in fresh])]),
            "start": np.concatenate(
                [ec["start"][:n_keep], np.array([_ts(e.start) for e, _ in fresh], np.float64)]
            ),
            "end": np.concatenate([ec["end"][:n_keep], np.array([_ts(e.end) for e, _ in fresh], np.float64)]),
            "msgs": _ragged_rows(ec["msgs"][:n_keep], [rows for _, rows in fresh], {}, np.int32),
        },
        "sem": {
            "x": sem_x,
            "id": np.concatenate([sc["id"], np.arange(sl.n("sem"), n_sem, dtype=np.int64)]),
            "text": _obj(texts),
            "time": np.concatenate([sc["time"], np.array([_ts(t) for t in g["new_times"]], np.float64)]),
            "epis": sem_epis,
            "msgs": sem_msgs,
            "theme": theme_of,
            "knn_idx": _graph(sem_idx, n_sem, -1, np.int32),
            "knn_sim": _graph(sem_sim, n_sem, -np.inf, np.float32),
        },
        "theme": {
            "id": np.array(theme_ids, np.int64),
            "summary": _obj(summaries),
            "parents": _ragged(parents, np.int64),
            "sum": theme["sum"],
            "count": theme["count"],
            "x": theme["x"],
            "knn_idx": _graph(t_idx, n_th, -1, np.int32),
            "knn_sim": _graph(t_sim, n_th, -np.inf, np.float32),
        },
        "psg": {"x": psg_x, "msg": psg_msg},
    }
    n_old, none = sl.n("sem"), np.zeros(0, np.int64)
    merged = np.array(sorted(g["merged"]), np.int64)
    # not msg.psg nor sem.epis: computed again from their sources (a stored row in another form changes)
    kept = {f"msg.{k}": (sl.n("msg"), none) for k in ("x", "id", "speaker", "text", "session", "time")}
    kept |= {f"psg.{k}": (sl.n("psg"), none) for k in ("x", "msg")}
    kept |= {f"epi.{k}": (n_keep, none) for k in ("x", "title", "text", "start", "end", "msgs")}
    kept |= {f"sem.{k}": (n_old, none) for k in ("x", "text", "time")}
    kept["sem.msgs"] = (n_old, merged)
    return MemorySlice(sl.memory_id, cols, stats, g["state"], kept=KeptRows(sl, kept))


def _old_graph(mem: MemorySlice | Memory) -> tuple[np.ndarray, np.ndarray, int]:
    """The memory's semantic kNN lists (idx, sim) and its number of statements."""
    if isinstance(mem, MemorySlice):
        sc = mem.cols["sem"]
        return sc["knn_idx"], sc["knn_sim"], mem.n("sem")
    return mem.sem_knn_idx, mem.sem_knn_sim, len(mem.semantics)


def _graph_kept(mem: MemorySlice | Memory, k: int, drop: bool) -> bool:
    """Whether ``mem``'s semantic kNN lists are its graph under this k and edge rule (the lists
    marked to be searched again aside)."""
    idx, sim, n = _old_graph(mem)
    return kept_graph_fits(idx, sim, n, k, drop, repair=to_repair(sim) if sim.shape == (n, k) else None)


def semantic_graphs(
    memories: Sequence[MemorySlice | Memory],
    all_sem,
    offs: np.ndarray,
    k: int,
    drop_nonpositive: bool,
    backend: str,
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
    n_old = np.array([_old_graph(m)[2] if ok else 0 for m, ok in zip(memories, kept)], np.int64)
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
    graphs = [_old_graph(memories[b]) for b in inc]
    again = [to_repair(g[1]) for g in graphs]  # per memory: its old lists to be searched again
    new = [np.arange(offs[b] + n_old[b], offs[b + 1]) for b in inc]
    # queries searched against every row of their memory: the marked old rows, then the new rows
    ask = [np.concatenate([offs[b] + np.flatnonzero(r), nw]) for b, r, nw in zip(inc, again, new)]
    asked = np.concatenate(ask)
    q_off = csr_offsets([len(a) for a in ask])
    mem_rows = np.concatenate([np.arange(offs[b], offs[b + 1]) for b in inc])
    x_off = np.concatenate([[0], np.cumsum([offs[b + 1] - offs[b] for b in inc])]).astype(np.int64)
    if len(asked):  # self dropped
        ni, ns = knn_search(
            x[asked],
            q_off,
            _rows_of(x, mem_rows),
            x_off,
            k + 1,
            drop_nonpositive=drop_nonpositive,
            backend=backend,
        )
        ni, ns = host(ni), host(ns)
        glob = np.where(ni >= 0, mem_rows[np.maximum(ni, 0)], -1)
        not_self = glob != asked[:, None]
        order = np.argsort(~not_self, axis=1, kind="stable")[:, :k]  # the first k that are not self
        take_i, take_s = np.take_along_axis(glob, order, 1), np.take_along_axis(ns, order, 1)
        gone = ~np.take_along_axis(not_self, order, 1)
        idx[asked] = np.where(gone, -1, take_i)
        sim[asked] = np.where(gone, -np.inf, take_s)
    keep = [np.flatnonzero(~r) for r in again]  # per memory: its old lists kept
    old = np.concatenate([offs[b] + kp for b, kp in zip(inc, keep)])
    kept_i = np.concatenate([g[0][kp] for g, kp in zip(graphs, keep)]).astype(np.int64)
    base = np.repeat(offs[inc], [len(kp) for kp in keep])  # each kept row's memory's first global row
    kept_i = np.where(kept_i >= 0, kept_i + base[:, None], -1)
    kept_s = np.concatenate([g[1][kp] for g, kp in zip(graphs, keep)]).astype(np.float32)
    new_rows = np.concatenate(new)
    if len(old) and len(new_rows):  # the kept lists against the new rows, merged
        o_off = csr_offsets([len(kp) for kp in keep])
        n_off = csr_offsets([len(nw) for nw in new])
        ci, cs = knn_search(
            _rows_of(x, old), o_off, x[new_rows], n_off, k, drop_nonpositive=drop_nonpositive, backend=backend
        )
        ci, cs = host(ci), host(cs)
        ci = np.where(ci >= 0, new_rows[np.maximum(ci, 0)], -1)
        ids, sims = np.concatenate([kept_i, ci], 1), np.concatenate([kept_s, cs], 1)
        order = np.argsort(-sims, axis=1, kind="stable")[:, :k]  # kept ids are lower: ties keep them first
        idx[old] = np.take_along_axis(ids, order, 1)
        sim[old] = np.take_along_axis(sims, order, 1)
    elif len(old):
        idx[old] = kept_i
        sim[old] = kept_s
    return idx, sim


def _rows_of(x: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """``x[rows]``: a view where ``rows`` (int, ascending) is one run of consecutive rows (a memory's
    rows, most of a grown memory's old rows), else a copy."""
    if rows.size and int(rows[-1]) - int(rows[0]) + 1 == rows.size:
        return x[int(rows[0]) : int(rows[-1]) + 1]
    return x[rows]


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
