"""Turning hierarchy rows into retrieved units, and units into the answer context (the paper's
format: semantic memories, then episodic memories, each with its date)."""

from __future__ import annotations

import numpy as np

from ..memory.hierarchy import Memory
from ..text import fmt_date, message_line
from .result import RetrievedUnit


def theme_unit(mem: Memory, row: int, score: float, rel: float) -> RetrievedUnit:
    """A selected theme: its summary; provenance is empty (its facts arrive through its semantics)."""
    t = mem.themes[row]
    return RetrievedUnit("theme", str(t.id), t.summary, 0, score, [], None, {"relevance": rel, "coverage_value": score})


def semantic_unit(mem: Memory, row: int, score: float, scores: dict[str, float]) -> RetrievedUnit:
    s = mem.semantics[row]
    return RetrievedUnit("semantic", str(s.id), s.text, 0, score, list(s.message_ids), s.timestamp, scores)


def episode_unit(mem: Memory, row: int, score: float, scores: dict[str, float]) -> RetrievedUnit:
    e = mem.episodes[row]
    return RetrievedUnit("episode", str(e.id), e.text, 0, score, list(e.message_ids), e.start, scores)


def messages_unit(kind: str, uid: str, mem: Memory, rows: np.ndarray | list[int], score: float, scores: dict[str, float]) -> RetrievedUnit:
    """A block of raw messages (a naive-RAG chunk or a whole TIR session)."""
    msgs = [mem.messages[int(r)] for r in rows]
    text = "\n".join(message_line(m) for m in msgs)
    return RetrievedUnit(kind, uid, text, 0, score, [m.id for m in msgs], msgs[0].timestamp if msgs else None, scores)


def context_pieces(units: list[RetrievedUnit]) -> list[tuple[str, str]]:
    """The answer context as (separator, piece) pairs: semantic memories (statements), then
    episodic memories (episodes, chunks, sessions, messages), each with its date. Separators are
    whitespace, so a tokenizer that pre-splits on whitespace counts the context as the sum of its
    pieces."""
    sem = [u for u in units if u.type == "semantic"]
    epi = [u for u in units if u.type not in ("semantic", "theme")]
    out: list[tuple[str, str]] = []
    if sem:
        out.append(("", "Semantic memories:"))
        for u in sem:
            out += [("\n", f"- ({fmt_date(u.timestamp)})"), (" ", u.text)]
    if epi:
        out.append(("\n\n" if sem else "", "Episodic memories:"))
        for i, u in enumerate(epi):
            out += [("\n" if i == 0 else "\n\n", f"[{fmt_date(u.timestamp)}]"), ("\n", u.text)]
    return out


def assemble(units: list[RetrievedUnit]) -> str:
    return "".join(sep + piece for sep, piece in context_pieces(units))
