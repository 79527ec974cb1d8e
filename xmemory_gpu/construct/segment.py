"""LLM-free episode boundary detection: session changes, time gaps, embedding drift, a length cap.

A new episode starts at a session change, after a time gap of ``time_gap_s``, or when a message's
cosine to the running episode mean drops below ``drift_threshold`` (once the episode has
``min_messages``); runs longer than ``max_messages`` are then cut into balanced parts.
"""

from __future__ import annotations

import numpy as np

from ..config import SegmentConfig
from ..memory.records import Conversation, Episode, Message
from ..text import PASSAGE_WORDS, embedding_text, fmt_date, keywords, passages  # noqa: F401 (re-exported)


def embed_messages(embedder, messages: list[Message], max_words: int = PASSAGE_WORDS) -> np.ndarray:
    """[n, d] float32 unit rows, one per message, in one encoder call: each message rendered by
    ``embedding_text``; a message longer than ``max_words`` words is embedded passage by passage
    (each with the speaker) and its row is the normalised mean of its passages, so the whole text
    counts, not only the encoder's first 256 word pieces."""
    texts: list[str] = []
    owner: list[int] = []
    for i, m in enumerate(messages):
        for p in passages(m.text, max_words):
            texts.append(embedding_text(m.speaker, p))
            owner.append(i)
    if not texts:
        return np.zeros((0, embedder.dim), np.float32)
    x = np.asarray(embedder.encode(texts), np.float32)
    if len(texts) == len(messages):
        return x
    out = np.zeros((len(messages), x.shape[1]), np.float64)
    np.add.at(out, np.asarray(owner), x.astype(np.float64))
    norms = np.linalg.norm(out, axis=1, keepdims=True)
    return np.divide(out, norms, out=np.zeros_like(out), where=norms > 0).astype(np.float32)


def boundary_runs(conv: Conversation, msg_x: np.ndarray, cfg: SegmentConfig) -> list[tuple[int, int]]:
    """Runs ``[(start, end), ...]`` between detected boundaries (before the length cap), in order."""
    n = len(conv.messages)
    if n == 0:
        return []
    runs: list[tuple[int, int]] = []
    start = 0
    acc = msg_x[0].astype(np.float64).copy()
    for i in range(1, n):
        prev, cur = conv.messages[i - 1], conv.messages[i]
        cut = cur.session != prev.session
        if not cut and cur.timestamp is not None and prev.timestamp is not None:
            cut = cur.timestamp - prev.timestamp > cfg.time_gap_s
        if not cut and i - start >= cfg.min_messages:
            norm = np.linalg.norm(acc)
            cut = norm > 0 and float(msg_x[i] @ acc) / norm < cfg.drift_threshold
        if cut:
            runs.append((start, i))
            start, acc = i, msg_x[i].astype(np.float64).copy()
        else:
            acc += msg_x[i]
    runs.append((start, n))
    return runs


def cap_runs(runs: list[tuple[int, int]], cfg: SegmentConfig) -> list[tuple[int, int]]:
    """Runs longer than ``max_messages`` cut into balanced parts: the episode spans."""
    spans: list[tuple[int, int]] = []
    for s, e in runs:
        parts = -(-(e - s) // cfg.max_messages)
        cuts = np.linspace(s, e, parts + 1).round().astype(int)
        spans.extend((int(a), int(b)) for a, b in zip(cuts[:-1], cuts[1:]))
    return spans


def boundaries(conv: Conversation, msg_x: np.ndarray, cfg: SegmentConfig) -> list[tuple[int, int]]:
    """Episode spans ``[(start, end), ...]`` over message positions, covering all messages in order."""
    return cap_runs(boundary_runs(conv, msg_x, cfg), cfg)


def make_episodes(conv: Conversation, spans: list[tuple[int, int]]) -> list[Episode]:
    """Episodes whose text keeps the messages intact ("Speaker: text" lines) with an extractive title."""
    episodes = []
    for eid, (s, e) in enumerate(spans):
        msgs = conv.messages[s:e]
        lines = [f"{m.speaker}: {m.text}" for m in msgs]
        kw = keywords([m.text for m in msgs], 4)
        speakers = " and ".join(dict.fromkeys(m.speaker for m in msgs))
        title = f"{fmt_date(msgs[0].timestamp)}: {speakers} talk about {', '.join(kw) if kw else 'small talk'}"
        episodes.append(
            Episode(
                id=eid,
                title=title,
                text="\n".join(lines),
                message_ids=[m.id for m in msgs],
                start=msgs[0].timestamp,
                end=msgs[-1].timestamp,
            )
        )
    return episodes


def episode_embeddings(spans: list[tuple[int, int]], msg_x: np.ndarray) -> np.ndarray:
    """[n_epi, d] float32: the normalised mean of each episode's message embeddings."""
    d = msg_x.shape[1]
    out = np.zeros((len(spans), d), dtype=np.float64)
    for i, (s, e) in enumerate(spans):
        out[i] = msg_x[s:e].sum(axis=0)
    norms = np.linalg.norm(out, axis=1, keepdims=True)
    return np.divide(out, norms, out=np.zeros_like(out), where=norms > 0).astype(np.float32)

