"""Forgetting as a construction step: a memory without some messages (a delete), with new text for
some (an update), or without some statements (a deleted ``semantic:N`` / ``theme:N``), at the cost of
what they touched, not of the memory's size.

``forget`` (on a memory's slice) takes out everything
derived from what changes:

- the dropped messages and their rows; a changed message keeps its row with its new text and vector;
- every closed episode holding a dropped or changed message is made again from the messages it has
  left (its text, title and vector as construction makes them; gone when none is left); the open
  episode is segmented again by the growth that follows, as it is after any add;
- every statement whose first source (the message its text was read from) is dropped or changed, or
  right after one where a reply is read with the question before it, or named in ``nodes``, leaves
  its theme; themes left empty go, the others that lost members lose their summary (summarised again);
- a statement touched only in its other sources (statements of later messages merged into it) keeps
  its text, row, theme and kNN lists and loses those sources, as a build without them keeps it: a
  merged statement decides nothing later (de-duplication compares the statements kept); its
  episodes are those of the sources it keeps. This holds where each statement is read from one
  message, its first source (``semantic.ONE_SOURCE``: the rule builders) and that is its earliest;
  elsewhere (a memory the LLM builder made: a fact from several messages; an earlier message
  restated into a later one's statement) every statement with a touched source leaves;
- the statements of the other sources of the statements that left (and of the changed messages and the
  turns right after the touched ones) are to be
  extracted again: ``grow(..., restate=...)`` does it with the rest of an add's work (the forgotten
  hashes filter them, de-duplication merges what is already there, the f(P) theme steps place the
  rest; the semantic kNN lists that held a removed statement are searched again, the others kept;
  so are the theme lists of the themes that lost a member or held one left empty).

So a delete or an update leaves no episode, statement, summary or graph row built from the old text,
and costs about what an add of the touched messages costs.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from ..memory.bank import MemorySlice, ragged_lengths, ragged_map, ragged_reduce
from ..memory.codec import theme_columns
from ..memory.hierarchy import messages_at
from ..memory.records import Conversation
from .incremental import _first_psg, _packed, _sorted_unique_rows, engine_state, valid_rows
from .segment import MessageVectors, episode_embeddings, make_episodes
from .semantic import ONE_SOURCE


def replace_rows(x: MessageVectors, rows: list[int], new: MessageVectors) -> MessageVectors:
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


def kept_lists(idx: np.ndarray, sim: np.ndarray, gone: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The semantic kNN lists (idx, sim [n, k], local rows) of the rows not ``gone`` [n] bool, their
    entries renumbered: a list that held a gone row is marked to be searched again (no entries,
    similarities NaN: ``theme_state.to_repair``); the others are the lists a build of what is left
    gives (removing rows outside a top-k leaves it as it was)."""
    kept = np.flatnonzero(~gone)
    new_row = np.full(len(gone) + 1, -1, np.int64)  # old row -> new row (index -1: padding)
    new_row[kept] = np.arange(len(kept))
    ki, ks = idx[kept].astype(np.int64), sim[kept].astype(np.float32)
    lost = np.where(ki >= 0, gone[np.maximum(ki, 0)], False).any(axis=1)
    ki = np.where(ki >= 0, new_row[ki], -1)
    ki[lost], ks[lost] = -1, np.nan
    return ki.astype(np.int32), ks


def kept_theme_lists(
    idx: np.ndarray, sim: np.ndarray, live: np.ndarray, t_row: np.ndarray, lost: list[int]
) -> tuple[np.ndarray, np.ndarray]:
    """The theme kNN lists (idx, sim [K, k], theme rows) of the ``live`` themes [L] (old rows,
    ascending; ``t_row`` [K + 1] old row -> new row, -1 for a theme left empty), renumbered; marked to
    be searched again (no entries, similarities NaN, as ``kept_lists`` marks them) where the theme
    lost members (``lost``: old rows; its centroid moved) or its list held a theme left empty. The
    others are lists of the themes whose centroids did not move: ``sync_graphs`` keeps them and
    offers them the marked ones (``ThemeState.restore``)."""
    ki = np.asarray(idx, np.int64)[live]
    ks = np.asarray(sim, np.float32)[live]
    closed = (ki >= 0) & (t_row[np.maximum(ki, 0)] < 0)
    redo = closed.any(axis=1) | np.isin(live, np.asarray(lost, np.int64))
    ki = np.where(ki >= 0, t_row[np.maximum(ki, 0)], -1)
    ki[redo], ks[redo] = -1, np.nan
    return ki.astype(np.int32), ks


def _valid_first(block: np.ndarray) -> np.ndarray:
    """Each row of ``block`` [k, c] with its entries >= 0 first, in their order, and -1 after."""
    big = np.iinfo(np.int64).max
    return np.take_along_axis(block, np.argsort(np.where(block >= 0, 0, big), axis=1, kind="stable"), 1)


def one_source_statements(stats: dict) -> bool:
    """Whether each statement of a memory with ``stats`` was read from one message (its first source;
    the others merged into it; ``semantic.ONE_SOURCE``): the rule builders' memories say so; the LLM
    builder reads a fact from several, and a memory that does not say is taken not to."""
    return bool(stats.get(ONE_SOURCE, False))


def _source_episodes(src: np.ndarray, e_msgs: np.ndarray, width: int) -> np.ndarray:
    """[k, width] int32: the distinct rows of the closed episodes (``e_msgs`` [e, v], their message
    rows) that hold each row's sources (``src`` [k, w] message rows, -1 padded), ascending, -1
    padded; a source in no closed episode (the open one, segmented again by the growth) adds none."""
    n = int(max(src.max(initial=-1), e_msgs.max(initial=-1))) + 1
    epi_of = np.full(n + 1, -1, np.int64)  # index -1: padding
    er, ek = np.nonzero(e_msgs >= 0)
    epi_of[e_msgs[er, ek]] = er
    part = _sorted_unique_rows(epi_of[src])
    out = np.full((len(src), width), -1, np.int32)
    out[:, : part.shape[1]] = part
    return out


def forget(
    sl: MemorySlice,
    drop: set[str],
    texts: dict[str, str],
    changed_x: MessageVectors | None,
    nodes: set[int] = frozenset(),
    forgotten: tuple[str, ...] = (),
    *,
    replies_read_with_questions: bool = False,
) -> tuple[MemorySlice, set[str]]:
    """``sl`` with messages ``drop`` removed, messages ``texts`` (id -> new text; ``changed_x`` their
    vectors, in message order) changed and statements ``nodes`` (local rows) removed, with everything
    derived from them (see the module's doc); ``forgotten`` replaces the engine state's forgotten
    hashes; ``replies_read_with_questions``: the memory reads a reply with the question before it
    (``SemanticConfig.read_replies_with_questions``), so the turn after a touched one is read again.
    Returns the reduced slice (its semantic lists that held a removed statement, and the theme lists
    of themes that lost a member or held an emptied one, marked to be searched again; its
    statements' episodes left to the growth that follows) and the ids of the messages whose statements are to
    be extracted again (``grow``'s ``restate``). The input is not modified."""
    st = engine_state(sl)
    mc, ec, sc, tc = (sl.cols[lv] for lv in ("msg", "epi", "sem", "theme"))
    ids = mc["id"].tolist()
    n_msg = len(ids)
    dropped = np.array([i in drop for i in ids], bool)
    touched = dropped | np.array([i in texts for i in ids], bool)
    # a reply is read with the question of the turn before it: the turn after a touched one is read again
    follows = np.zeros(n_msg, bool)
    if replies_read_with_questions:
        follows[1:] = touched[:-1]
        follows &= ~dropped
    keep_rows = np.flatnonzero(~dropped)
    new_row = np.full(n_msg + 1, -1, np.int64)  # old message row -> new row (index -1: padding)
    new_row[keep_rows] = np.arange(len(keep_rows))
    text = mc["text"][keep_rows]
    changed_rows = [j for j, i in enumerate(mc["id"][keep_rows].tolist()) if i in texts]
    for j in changed_rows:
        text[j] = texts[str(mc["id"][keep_rows[j]])]
    vectors = MessageVectors(mc["x"], sl.cols["psg"]["x"], sl.cols["psg"]["msg"]).take(keep_rows)
    if changed_rows:
        vectors = replace_rows(vectors, changed_rows, changed_x)
    msg = {
        "x": vectors.x,
        "id": mc["id"][keep_rows],
        "speaker": mc["speaker"][keep_rows],
        "text": text,
        "session": mc["session"][keep_rows],
        "time": mc["time"][keep_rows],
        "psg": _first_psg(vectors.psg_msg, len(keep_rows)),
    }
    reduced_msgs = MemorySlice(sl.memory_id, {"msg": msg})

    # closed episodes: those holding a touched message made again from what is left
    em = ec["msgs"]
    n_closed = int(np.argmax(em[:, 0] >= st.open_from)) if (em[:, 0] >= st.open_from).any() else len(em)
    hit = np.where(em[:n_closed] >= 0, touched[np.maximum(em[:n_closed], 0)], False).any(axis=1)
    rows, remade = [], {}
    for r in range(n_closed):
        if not hit[r]:
            rows.append(r)
            continue
        left = [int(new_row[m]) for m in valid_rows(em[r]) if not dropped[m]]
        if not left:
            continue
        conv = Conversation(sl.memory_id, ("", ""), messages_at(reduced_msgs, left))
        (ep,) = make_episodes(conv, [(0, len(left))])
        remade[len(rows)] = (ep, left, episode_embeddings([(0, len(left))], vectors.x[left])[0])
        rows.append(r)
    rows_at = np.asarray(rows, np.int64)
    e_msgs = np.where(em[rows_at] >= 0, new_row[em[rows_at]], -1)
    lengths = (e_msgs >= 0).sum(axis=1)
    for j, (_, left, _) in remade.items():
        lengths[j] = len(left)
    e_msgs = _packed(e_msgs, lengths, np.int32)
    epi = {name: ec[name][rows_at] for name in ("x", "id", "title", "text", "start", "end")}
    for j, (ep, left, x) in remade.items():
        epi["x"][j] = x
        epi["title"][j], epi["text"][j] = ep.title, ep.text
        epi["start"][j] = np.nan if ep.start is None else ep.start
        epi["end"][j] = np.nan if ep.end is None else ep.end
        e_msgs[j] = -1
        e_msgs[j, : len(left)] = left
    epi["msgs"] = e_msgs
    open_from = st.open_from - int(dropped[: st.open_from].sum())

    # statements read from a touched message (or named) leave; their other sources are restated
    sm = sc["msgs"]
    hits = touched | follows
    hit = ragged_reduce(sm, lambda b: np.where(b >= 0, hits[np.maximum(b, 0)], False).any(axis=1)).astype(
        bool
    )
    gone = hit.copy()
    if one_source_statements(sl.stats):
        # the first source untouched and the earliest (a message restated earlier that merged into it
        # would be its first in a build): the statement keeps its row
        first = sm[:, 0]
        cand = np.flatnonzero(hit & ~hits[np.maximum(first, 0)])
        b = sm[cand]
        earliest = np.where(b >= 0, b, np.iinfo(b.dtype).max).min(axis=1, initial=np.iinfo(b.dtype).max)
        gone[cand[earliest == first[cand]]] = False
    gone[sorted(nodes)] = True
    trimmed = np.flatnonzero(hit & ~gone)  # touched in merged sources only: they lose those sources
    restate = {ids[m] for r in np.flatnonzero(gone).tolist() for m in valid_rows(sm[r]) if not dropped[m]}
    restate |= set(texts) - drop
    restate |= {ids[m] for m in np.flatnonzero(follows).tolist()}  # read with their new turn before
    kept = np.flatnonzero(~gone)
    # the kept statements' sources renumbered (each row read to its length); the trimmed ones lose the touched
    s_msgs = ragged_map(sm, lambda b: new_row[b], kept, np.int32)  # new_row[-1] is -1
    epi_new = np.full(len(em) + 1, -1, np.int64)  # old episode row -> new row (index -1: padding)
    epi_new[rows_at] = np.arange(len(rows_at))
    s_epis = ragged_map(sc["epis"], lambda b: _valid_first(epi_new[b]), kept, np.int32)
    if len(trimmed):
        at = np.searchsorted(kept, trimmed)
        b = sm[trimmed]
        s_msgs[at] = _valid_first(np.where((b >= 0) & ~hits[np.maximum(b, 0)], new_row[b], -1))
        s_epis[at] = _source_episodes(s_msgs[at], e_msgs, s_epis.shape[1])
    theme_of = sc["theme"][kept]
    lost = set(sc["theme"][gone].tolist())
    live = np.unique(theme_of)
    t_row = np.full(len(tc["id"]) + 1, -1, np.int64)
    t_row[live] = np.arange(len(live))
    theme_of = t_row[theme_of].astype(np.int32)
    summary = tc["summary"][live]
    for j, r in enumerate(live.tolist()):
        if r in lost:
            summary[j] = ""
    sem_x = sc["x"][kept]
    s_knn_idx, s_knn_sim = kept_lists(sc["knn_idx"], sc["knn_sim"], gone)
    t_knn_idx, t_knn_sim = kept_theme_lists(tc["knn_idx"], tc["knn_sim"], live, t_row, sorted(lost))
    theme = theme_columns(sem_x, theme_of, len(live))
    cols = {
        "msg": msg,
        "epi": epi,
        "sem": {
            "x": sem_x,
            "id": sc["id"][kept],
            "text": sc["text"][kept],
            "time": sc["time"][kept],
            "epis": _packed(s_epis, ragged_lengths(s_epis), np.int32),
            "msgs": _packed(s_msgs, ragged_lengths(s_msgs), np.int32),
            "theme": theme_of,
            "knn_idx": s_knn_idx,
            "knn_sim": s_knn_sim,
        },
        "theme": {
            "id": tc["id"][live],
            "summary": summary,
            "parents": tc["parents"][live],
            "sum": theme["sum"],
            "count": theme["count"],
            "x": theme["x"],
            "knn_idx": t_knn_idx,
            "knn_sim": t_knn_sim,
        },
        "psg": {"x": vectors.psg_x, "msg": vectors.psg_msg},
    }
    state = replace(
        st, open_from=open_from, speakers=(), forgotten=tuple(sorted(set(forgotten or st.forgotten)))
    )
    stats = {k: v for k, v in sl.stats.items() if k != "f_P"}  # the growth after it scores the partition
    return MemorySlice(sl.memory_id, cols, stats, state), restate


__all__ = ["forget", "kept_lists", "one_source_statements", "replace_rows"]
