"""Peers' LLM steps inside retrieval, batched over all queries: HiGMem's event -> turn selection
and union filter, and Nano-Memory TIR's optional pruning of the returned sessions. The reader's
answers are JSON validated like the LLM builder's (repaired, retried, then a similarity fallback).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from pydantic import BaseModel, ConfigDict

from ..llm.json_output import StageCounts, in_range, run_json_stage
from ..memory.bank import Bank
from ..text import numbered
from .context import message_line_at, messages_unit
from .grouped import search_by_memory
from .result import RetrievedUnit

PICK_TURNS = """Question: {question}

Turns of one part of a conversation:
{turns}

Which turns are worth reading to answer the question? Give their numbers (an empty list if none).
Answer with JSON only, like {{"turns": [2, 5]}}."""

FILTER_TURNS = """Question: {question}

Candidate turns retrieved from a conversation:
{turns}

Keep only the turns that help answer the question. Give their numbers.
Answer with JSON only, like {{"keep": [1, 3]}}."""


class TurnPick(BaseModel):
    model_config = ConfigDict(json_schema_extra={"example": {"turns": [2, 5]}})
    turns: list[int]


class TurnKeep(BaseModel):
    model_config = ConfigDict(json_schema_extra={"example": {"keep": [1, 3]}})
    keep: list[int]


def _numbered(bank: Bank, rows) -> str:
    return numbered([message_line_at(bank, int(r)) for r in rows])


@dataclass
class SelectCost:
    """Reader work of one query's retrieval (calls and tokens; retries and fallbacks counted)."""

    counts: StageCounts

    @property
    def pair(self) -> tuple[int, int]:
        return self.counts.calls, self.counts.prompt_tokens + self.counts.output_tokens


def pick_turns(
    reader,
    questions: list[str],
    groups: list[list[tuple[int, np.ndarray]]],
    bank: Bank,
    mem_idx: np.ndarray,
    fallback: list[list[np.ndarray]],
    counts: list[StageCounts],
    *,
    max_retries: int = 1,
    purpose: str = "retrieval pick turns",
) -> list[list[np.ndarray]]:
    """For each query and each of its groups ``(memory, message rows)``, the rows the reader picks
    (one batch for all); a group whose answer fails keeps ``fallback[q][g]``."""
    jobs, users, checks = [], [], []
    for q, gs in enumerate(groups):
        for g, (_, rows) in enumerate(gs):
            jobs.append((q, g))
            users.append(PICK_TURNS.format(question=questions[q], turns=_numbered(bank, rows)))
            checks.append(in_range("turns", len(rows)))
    answers = (
        run_json_stage(
            reader,
            users,
            TurnPick,
            checks=checks,
            max_tokens=32,
            max_retries=max_retries,
            purpose=purpose,
            counts=[counts[q] for q, _ in jobs],
        )
        if jobs
        else []
    )
    out = [list(fb) for fb in fallback]
    for (q, g), ans in zip(jobs, answers):
        if ans is not None:
            rows = groups[q][g][1]
            out[q][g] = rows[sorted({i - 1 for i in ans.turns})]
    return out


def filter_turns(
    reader,
    questions: list[str],
    rows: list[np.ndarray],
    bank: Bank,
    mem_idx: np.ndarray,
    counts: list[StageCounts],
    *,
    max_retries: int = 1,
) -> list[np.ndarray]:
    """HiGMem's last step: the reader keeps the useful turns of each query's union (all kept on failure)."""
    jobs = [q for q in range(len(questions)) if len(rows[q])]
    users = [FILTER_TURNS.format(question=questions[q], turns=_numbered(bank, rows[q])) for q in jobs]
    answers = (
        run_json_stage(
            reader,
            users,
            TurnKeep,
            checks=[in_range("keep", len(rows[q])) for q in jobs],
            max_tokens=48,
            max_retries=max_retries,
            purpose="retrieval filter turns",
            counts=[counts[q] for q in jobs],
        )
        if jobs
        else []
    )
    out = list(rows)
    for q, ans in zip(jobs, answers):
        if ans is not None:
            out[q] = rows[q][sorted({i - 1 for i in ans.keep})]
    return out


def higmem(
    bank: Bank,
    q_x: np.ndarray,
    mem_idx: np.ndarray,
    questions: list[str],
    reader,
    *,
    events: int,
    turns: int,
    turns_per_event: int,
    backend: str = "auto",
) -> tuple[list[list[RetrievedUnit]], list[tuple[int, int]], bool]:
    """HiGMem-style event -> turn retrieval. Events (episodes) and turns (messages) are retrieved by
    similarity; the reader picks the turns worth reading inside each event, then filters the union
    with the similarity-retrieved turns. Without a reader, each event contributes its
    ``turns_per_event`` most similar turns and the union is not filtered.
    Returns units (messages, most similar first), (calls, tokens) per query, and whether the reader ran."""
    ei, _ = search_by_memory(q_x, mem_idx, bank.epi, events, backend=backend)
    if turns > 0:
        ti, _ = search_by_memory(q_x, mem_idx, bank.msg, turns, backend=backend)
    else:  # events only
        ti = np.full((len(mem_idx), 0), -1, np.int64)
    groups, fallback = [], []
    for q in range(len(mem_idx)):
        gs, fb = [], []
        for r in ei[q][ei[q] >= 0]:
            rows = bank.epi["msgs"][int(r)]
            rows = rows[rows >= 0].astype(np.int64)
            sims = bank.msg["x"][rows].astype(np.float64) @ q_x[q].astype(np.float64)
            gs.append((int(r), rows))
            fb.append(np.sort(rows[np.lexsort((rows, -sims))[:turns_per_event]]))
        groups.append(gs)
        fallback.append(fb)
    counts = [StageCounts() for _ in range(len(mem_idx))]
    picked = (
        pick_turns(reader, questions, groups, bank, mem_idx, fallback, counts)
        if reader is not None
        else fallback
    )
    union = [
        np.unique(np.concatenate([*picked[q], ti[q][ti[q] >= 0]]).astype(np.int64))
        for q in range(len(mem_idx))
    ]
    if reader is not None:
        union = filter_turns(reader, questions, union, bank, mem_idx, counts)
    units = []
    for q in range(len(mem_idx)):
        sims = (
            bank.msg["x"][union[q]].astype(np.float64) @ q_x[q].astype(np.float64)
            if len(union[q])
            else np.zeros(0)
        )
        order = np.lexsort(
            (union[q], -sims)
        )  # most similar first (a budget keeps the best), ties by conversation order
        units.append(
            [
                messages_unit(
                    "message",
                    bank.msg["id"][int(union[q][i])],
                    bank,
                    [int(union[q][i])],
                    float(sims[i]),
                    {"similarity": float(sims[i])},
                )
                for i in order
            ]
        )
    return units, [SelectCost(c).pair for c in counts], reader is not None


def prune_sessions(
    reader, questions: list[str], units: list[list[RetrievedUnit]], bank: Bank, mem_idx: np.ndarray
) -> tuple[list[list[RetrievedUnit]], list[tuple[int, int]]]:
    """TIR's optional pruning: the reader keeps the turns of each returned session that bear on the
    query (a session whose answer fails is kept whole; a session left with no turn is dropped)."""
    row_of = {
        int(b): dict(zip(bank.msg["id"][bank.msg.seg.rows(int(b))], bank.msg.seg.rows(int(b)).tolist()))
        for b in np.unique(mem_idx)
    }  # message id -> global row, once per memory queried
    groups, fallback = [], []
    for q, b in enumerate(mem_idx):
        gs = [(0, np.array([row_of[int(b)][mid] for mid in u.message_ids], np.int64)) for u in units[q]]
        groups.append(gs)
        fallback.append([rows for _, rows in gs])
    counts = [StageCounts() for _ in range(len(mem_idx))]
    picked = pick_turns(
        reader, questions, groups, bank, mem_idx, fallback, counts, purpose="retrieval prune sessions"
    )
    out = []
    for q in range(len(mem_idx)):
        out.append(
            [
                messages_unit(
                    "session", u.id, bank, rows, u.score, {**u.scores, "kept_turns": float(len(rows))}
                )
                for u, rows in zip(units[q], picked[q])
                if len(rows)
            ]
        )
    return out, [SelectCost(c).pair for c in counts]
