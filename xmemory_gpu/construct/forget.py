"""Forgetting as a construction step: a memory without some messages (a delete), with new text for
some (an update), or without some statements (a deleted ``semantic:N`` / ``theme:N``), at the cost of
what they touched, not of the memory's size.

``without`` takes out everything derived from what changes:

- the dropped messages and their rows; a changed message keeps its row with its new text and vector;
- every closed episode holding a dropped or changed message is made again from the messages it has
  left (its text, title and vector as construction makes them; gone when none is left); the open
  episode is segmented again by the growth that follows, as it is after any add;
- every statement with a dropped or changed source, or named in ``nodes``, leaves its theme;
  themes left empty go, the others that lost members lose their summary (summarised again);
- the statements of the touched statements' other sources (and of the changed messages) are to be
  extracted again: ``grow(..., restate=...)`` does it with the rest of an add's work (the forgotten
  hashes filter them, de-duplication merges what is already there, the f(P) theme steps place the
  rest, the semantic kNN graph is computed again in one launch).

So a delete or an update leaves no episode, statement, summary or graph row built from the old text,
and costs about what an add of the touched messages costs.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from ..memory.hierarchy import Memory
from ..memory.records import Conversation, Message, Theme
from .incremental import engine_state
from .segment import MessageVectors, episode_embeddings, make_episodes


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


def without(
    mem: Memory,
    drop: set[str],
    texts: dict[str, str],
    changed_x: MessageVectors | None,
    nodes: set[int] = frozenset(),
    forgotten: tuple[str, ...] = (),
) -> tuple[Memory, set[str]]:
    """``mem`` with messages ``drop`` removed, messages ``texts`` (id -> new text; ``changed_x`` their
    vectors, in message order) changed and statements ``nodes`` (local rows) removed, with everything
    derived from them; ``forgotten`` replaces the engine state's forgotten hashes. Returns the reduced
    memory and the ids of the messages whose statements are to be extracted again (``grow``'s
    ``restate``)."""
    st = engine_state(mem)
    keep_rows = [i for i, m in enumerate(mem.messages) if m.id not in drop]
    messages = [
        m if m.id not in texts else Message(m.id, m.speaker, texts[m.id], m.session, m.timestamp)
        for m in (mem.messages[i] for i in keep_rows)
    ]
    vectors = MessageVectors(mem.msg_x, mem.psg_x, mem.psg_msg).take(np.asarray(keep_rows, np.int64))
    changed_rows = [j for j, m in enumerate(messages) if m.id in texts]
    if changed_rows:
        vectors = replace_rows(vectors, changed_rows, changed_x)
    touched = drop | set(texts)
    row_of = {m.id: j for j, m in enumerate(messages)}

    # closed episodes: those holding a touched message made again from what is left
    first_row = {m.id: i for i, m in enumerate(mem.messages)}
    episodes, epi_rows = [], []
    for e, x in zip(mem.episodes, mem.epi_x):
        if first_row[e.message_ids[0]] >= st.open_from:
            break  # the open episode: segmented again by the growth
        if not touched.intersection(e.message_ids):
            episodes.append(e)
            epi_rows.append(x)
            continue
        left = [m for m in e.message_ids if m not in drop]
        if not left:
            continue
        rows = [row_of[m] for m in left]
        conv = Conversation(mem.memory_id, ("", ""), [messages[r] for r in rows])
        (ep,) = make_episodes(conv, [(0, len(rows))])
        episodes.append(replace(ep, id=e.id))
        epi_rows.append(episode_embeddings([(0, len(rows))], vectors.x[rows])[0])
    epi_x = np.asarray(epi_rows, np.float32).reshape(len(epi_rows), mem.epi_x.shape[1])
    open_from = st.open_from - sum(1 for m in mem.messages[: st.open_from] if m.id in drop)

    # statements derived from a touched message (or named) leave; their other sources are restated
    gone = {r for r, s in enumerate(mem.semantics) if r in nodes or touched.intersection(s.message_ids)}
    restate = {mid for r in gone for mid in mem.semantics[r].message_ids if mid not in drop} | (
        set(texts) - drop
    )
    kept = np.array([r for r in range(len(mem.semantics)) if r not in gone], np.int64)
    semantics = [mem.semantics[r] for r in kept.tolist()]
    theme_of = np.asarray(mem.theme_of)[kept] if len(kept) else np.zeros(0, np.int32)
    lost = set(np.asarray(mem.theme_of)[sorted(gone)].tolist()) if gone else set()
    live = sorted(set(theme_of.tolist()))
    new_row = {old: new for new, old in enumerate(live)}
    themes = [
        Theme(t.id, "" if r in lost else t.summary, list(t.parents))
        for r, t in enumerate(mem.themes)
        if r in new_row
    ]
    theme_of = np.array([new_row[t] for t in theme_of.tolist()], np.int32)
    k_sem, k_theme = mem.sem_knn_idx.shape[1], mem.theme_knn_idx.shape[1]
    state = replace(
        st, open_from=open_from, speakers=(), forgotten=tuple(sorted(set(forgotten or st.forgotten)))
    )
    reduced = replace(
        mem,
        messages=messages,
        episodes=episodes,
        semantics=semantics,
        themes=themes,
        msg_x=vectors.x,
        epi_x=epi_x,
        sem_x=mem.sem_x[kept],
        theme_of=theme_of,
        sem_knn_idx=np.full((len(kept), k_sem), -1, np.int32),
        sem_knn_sim=np.full((len(kept), k_sem), -np.inf, np.float32),
        theme_knn_idx=np.full((len(themes), k_theme), -1, np.int32),
        theme_knn_sim=np.full((len(themes), k_theme), -np.inf, np.float32),
        psg_x=vectors.psg_x,
        psg_msg=vectors.psg_msg,
        stats=dict(mem.stats),
        engine=state,
    )
    return reduced, restate


__all__ = ["replace_rows", "without"]
