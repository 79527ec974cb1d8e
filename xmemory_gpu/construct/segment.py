"""LLM-free episode boundary detection: session changes, time gaps, embedding drift, a length cap.

A new episode starts at a session change, after a time gap of ``time_gap_s``, or when a message's
cosine to the running episode mean drops below ``drift_threshold`` (once the episode has
``min_messages``); runs longer than ``max_messages`` are then cut into balanced parts.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..config import SegmentConfig
from ..memory.records import Conversation, Episode, Message
from ..ops.rows import drift_runs
from ..text import PASSAGE_WORDS, STOPWORDS, embedding_text, fmt_date, keywords, passages  # noqa: F401 (re-exported)

EPISODE_KEYWORDS = 4  # content words in an episode's title


@dataclass
class MessageVectors:
    """Embeddings of a list of messages: one unit row per message, and the passages of its long
    messages (those cut by ``text.passages``), which the bank keeps as its ``psg`` level."""

    x: np.ndarray  # [n, d] float32, unit rows
    psg_x: np.ndarray  # [p, d] float32: each passage of a long message, in message order
    psg_msg: np.ndarray  # [p] int32: the passage's message (row of ``x``)

    def __len__(self) -> int:
        return int(self.x.shape[0])

    def split(self, sizes: list[int]) -> list[MessageVectors]:
        """Consecutive groups of ``sizes`` messages, each with its own passages (rows renumbered)."""
        bounds = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
        cut = np.searchsorted(self.psg_msg, bounds)
        return [
            MessageVectors(
                self.x[lo:hi],
                self.psg_x[cut[i] : cut[i + 1]],
                (self.psg_msg[cut[i] : cut[i + 1]] - lo).astype(np.int32),
            )
            for i, (lo, hi) in enumerate(zip(bounds[:-1], bounds[1:]))
        ]

    def take(self, rows: np.ndarray) -> MessageVectors:
        """The messages at increasing ``rows``, with their passages (rows renumbered)."""
        rows = np.asarray(rows, np.int64)
        new_of = np.full(len(self), -1, np.int64)
        new_of[rows] = np.arange(rows.size)
        keep = new_of[self.psg_msg] >= 0 if self.psg_msg.size else np.zeros(0, bool)
        return MessageVectors(self.x[rows], self.psg_x[keep], new_of[self.psg_msg[keep]].astype(np.int32))

    @classmethod
    def concat(cls, parts: list[MessageVectors], dim: int) -> MessageVectors:
        if not parts:
            return cls.empty(dim)
        offs = np.concatenate([[0], np.cumsum([len(p) for p in parts])])
        return cls(
            np.concatenate([p.x for p in parts]).astype(np.float32, copy=False),
            np.concatenate([p.psg_x for p in parts]).astype(np.float32, copy=False),
            np.concatenate([p.psg_msg + o for p, o in zip(parts, offs)]).astype(np.int32),
        )

    @classmethod
    def empty(cls, dim: int) -> MessageVectors:
        z = np.zeros((0, dim), np.float32)
        return cls(z, z, np.zeros(0, np.int32))


def embed_messages(embedder, messages: list[Message], max_words: int = PASSAGE_WORDS) -> MessageVectors:
    """One encoder call for ``messages``: each rendered by ``embedding_text``; a message longer than
    ``max_words`` words is embedded passage by passage (each with the speaker), its row is the
    normalised mean of its passages (so the whole text counts, not only the encoder's first 256
    word pieces) and its passages' rows are kept (``MessageVectors.psg_x``)."""
    texts: list[str] = []
    owner: list[int] = []
    for i, m in enumerate(messages):
        for p in passages(m.text, max_words):
            texts.append(embedding_text(m.speaker, p))
            owner.append(i)
    if not texts:
        return MessageVectors.empty(embedder.dim)
    x = np.asarray(embedder.encode(texts), np.float32)
    if len(texts) == len(messages):
        return MessageVectors(x, np.zeros((0, x.shape[1]), np.float32), np.zeros(0, np.int32))
    own = np.asarray(owner, np.int64)
    out = np.zeros((len(messages), x.shape[1]), np.float64)
    np.add.at(out, own, x.astype(np.float64))
    norms = np.linalg.norm(out, axis=1, keepdims=True)
    rows = np.divide(out, norms, out=np.zeros_like(out), where=norms > 0).astype(np.float32)
    long = np.bincount(own, minlength=len(messages))[own] > 1  # the passages of messages cut in several
    return MessageVectors(rows, x[long], own[long].astype(np.int32))


def boundary_runs(conv: Conversation, msg_x: np.ndarray, cfg: SegmentConfig) -> list[tuple[int, int]]:
    """Runs ``[(start, end), ...]`` between detected boundaries (before the length cap), in order: a
    session change or a time gap cuts; so does drift, in one pass (``ops.rows.drift_runs``: cosines in
    ``dot4``'s fixed order, the same cuts on every CPU)."""
    n = len(conv.messages)
    if n == 0:
        return []
    msgs = conv.messages
    hard = np.array(
        [False]
        + [
            cur.session != prev.session
            or (
                cur.timestamp is not None
                and prev.timestamp is not None
                and cur.timestamp - prev.timestamp > cfg.time_gap_s
            )
            for prev, cur in zip(msgs, msgs[1:])
        ],
        bool,
    )
    starts = drift_runs(msg_x, hard, cfg.min_messages, cfg.drift_threshold).tolist()
    return list(zip(starts, starts[1:] + [n]))


def cap_runs(runs: list[tuple[int, int]], cfg: SegmentConfig) -> list[tuple[int, int]]:
    """Runs longer than ``max_messages`` cut into balanced parts: the episode spans."""
    spans: list[tuple[int, int]] = []
    for s, e in runs:
        parts = -(-(e - s) // cfg.max_messages)
        if parts == 1:  # most runs: no cut (what linspace would give, without its cost)
            spans.append((s, e))
            continue
        cuts = np.linspace(s, e, parts + 1).round().astype(int)
        spans.extend((int(a), int(b)) for a, b in zip(cuts[:-1], cuts[1:]))
    return spans


def boundaries(conv: Conversation, msg_x: np.ndarray, cfg: SegmentConfig) -> list[tuple[int, int]]:
    """Episode spans ``[(start, end), ...]`` over message positions, covering all messages in order."""
    return cap_runs(boundary_runs(conv, msg_x, cfg), cfg)


def make_episodes(conv: Conversation, spans: list[tuple[int, int]]) -> list[Episode]:
    """Episodes whose text keeps the messages intact ("Speaker: text" lines) with an extractive title."""
    msgs = conv.messages
    episodes = []
    for eid, ((s, e), (text, kw, speakers, ids)) in enumerate(
        zip(spans, episode_parts(msgs, spans), strict=True)
    ):
        title = (
            f"{fmt_date(msgs[s].timestamp)}: {speakers} talk about {', '.join(kw) if kw else 'small talk'}"
        )
        episodes.append(
            Episode(
                id=eid,
                title=title,
                text=text,
                message_ids=ids,
                start=msgs[s].timestamp,
                end=msgs[e - 1].timestamp,
            )
        )
    return episodes


def episode_parts(
    messages: list[Message], spans: list[tuple[int, int]]
) -> list[tuple[str, list[str], str, list[str]]]:
    """Per span [s, e) of ``messages``: (its "speaker: text" lines joined by newlines, ``keywords`` of
    its texts (4), its distinct speakers in order joined by " and ", its message ids); each message's
    fields read once."""
    out = []
    for s, e in spans:
        msgs = messages[s:e]
        speakers, texts = [m.speaker for m in msgs], [m.text for m in msgs]
        out.append(
            (
                "\n".join(map("{}: {}".format, speakers, texts)),
                keywords(texts, EPISODE_KEYWORDS),
                " and ".join(dict.fromkeys(speakers)),
                [m.id for m in msgs],
            )
        )
    return out


def episode_embeddings(spans: list[tuple[int, int]], msg_x: np.ndarray) -> np.ndarray:
    """[n_epi, d] float32: the normalised mean of each episode's message embeddings."""
    d = msg_x.shape[1]
    out = np.zeros((len(spans), d), dtype=np.float64)
    for i, (s, e) in enumerate(spans):
        out[i] = msg_x[s:e].sum(axis=0)
    norms = np.linalg.norm(out, axis=1, keepdims=True)
    return np.divide(out, norms, out=np.zeros_like(out), where=norms > 0).astype(np.float32)
