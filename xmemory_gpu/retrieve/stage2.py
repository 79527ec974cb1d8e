"""Stage II episode pool and priority (DESIGN sections 6 and 9), batched over queries.

The pool of a query is the source episodes of its selected semantics plus its top
``episode_sim_topk`` episodes by cosine; priority = minmax over the pool of cos(q, e) +
``parent_weight`` * the max relevance of the episode's selected parent semantics (0 if none).
With no reader configured, episodes are admitted by priority up to ``episode_budget`` (the
uncertainty gate needs the reader's logits: the LLM layer).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..config import Stage2Config
from ..memory.bank import Bank
from .grouped import search_by_memory
from .stage1 import Stage1Output


@dataclass
class EpisodePick:
    row: int  # local episode row in its memory
    priority: float
    similarity: float  # cos(query, episode)
    parent_relevance: float  # max relevance of its selected parent semantics (0 if none)


def episode_pools(bank: Bank, q_x: np.ndarray, mem_idx: np.ndarray, s1: Stage1Output, cfg: Stage2Config, *, backend: str = "auto") -> list[list[EpisodePick]]:
    """Per query, the episode pool sorted by descending priority (ties to the lower row)."""
    n_q = q_x.shape[0]
    top, _ = search_by_memory(q_x, mem_idx, bank.epi_x, bank.epi_offsets, cfg.episode_sim_topk, backend=backend)
    out: list[list[EpisodePick]] = []
    for q in range(n_q):
        b = int(mem_idx[q])
        mem = bank.memories[b]
        e0, s0 = int(bank.epi_offsets[b]), int(bank.sem_offsets[b])
        parent: dict[int, float] = {}
        for row, rel in zip(s1.semantics[s1.sem_offsets[q] : s1.sem_offsets[q + 1]], s1.sem_rel[s1.sem_offsets[q] : s1.sem_offsets[q + 1]]):
            for e in mem.semantics[int(row) - s0].episode_ids:
                parent[e] = max(parent.get(e, 0.0), float(rel))
        rows = sorted(set(parent) | {int(r) - e0 for r in top[q] if r >= 0})
        if not rows:
            out.append([])
            continue
        sim = mem.epi_x[rows].astype(np.float64) @ q_x[q].astype(np.float64)
        lo, hi = float(sim.min()), float(sim.max())
        norm = np.full_like(sim, 0.5) if hi == lo else (sim - lo) / (hi - lo)
        picks = [
            EpisodePick(r, float(norm[i] + cfg.parent_weight * parent.get(r, 0.0)), float(sim[i]), parent.get(r, 0.0))
            for i, r in enumerate(rows)
        ]
        picks.sort(key=lambda p: (-p.priority, p.row))
        out.append(picks)
    return out


ANSWER_PROMPT = (
    "You are answering a question about a long conversation, using memories retrieved from it. "
    "Answer in a few words; resolve relative dates against the memories' dates.\n\n{context}\n\n"
    "Question: {question}\nAnswer:"
)


def answer_prompt(reader, question: str, context: str) -> str:
    return reader.chat(ANSWER_PROMPT.format(context=context or "(no memories)", question=question))


@dataclass
class GateDecision:
    pick: EpisodePick
    drop: float  # uncertainty without the episode minus with it (nats; > 0: the episode helps)
    admitted: bool
    expanded: bool  # drop passed the expansion threshold (raw messages added)


def gate_episodes(reader, questions: list[str], coarse: list[str], episode_texts: list[list[str]], pools: list[list[EpisodePick]],
                  cfg: Stage2Config) -> tuple[list[list[GateDecision]], list[tuple[int, int]]]:
    """The authors' independent probes: per query, the uncertainty of the answer given the coarse
    context, and given the coarse context plus each of the first ``episode_budget`` episodes (by
    priority), all prompts of all queries in one ``reader.uncertainty`` batch. Walking the probes
    in priority order, an episode is admitted when its drop exceeds ``include_threshold`` and
    expanded when it exceeds ``expand_threshold``; a non-admitted (low-gain) probe among the first
    ``early_stop_first`` stops the walk, as does the second low-gain probe.
    Returns the decisions per query and (calls, tokens) spent per query."""
    if cfg.mode != "independent":
        raise ValueError(f"stage2.mode {cfg.mode!r}: only the authors' independent probes are built")
    prompts, spans = [], []
    for q, question in enumerate(questions):
        start = len(prompts)
        prompts.append(answer_prompt(reader, question, coarse[q]))
        for text in episode_texts[q][: cfg.episode_budget]:
            prompts.append(answer_prompt(reader, question, coarse[q] + "\n\nEpisodic memories:\n" + text))
        spans.append((start, len(prompts)))
    unc = reader.uncertainty(prompts, n_tokens=cfg.probe_tokens, kind=cfg.uncertainty, purpose="stage2 probes") if prompts else []
    decisions, costs = [], []
    for q, (s, e) in enumerate(spans):
        base = unc[s].value
        out, low = [], 0
        for j, u in enumerate(unc[s + 1 : e]):
            drop = base - u.value
            ok = drop > cfg.include_threshold
            out.append(GateDecision(pools[q][j], drop, ok, ok and drop > cfg.expand_threshold))
            if not ok:
                low += 1
                if j < cfg.early_stop_first or low >= 2:
                    break
        decisions.append(out)
        costs.append((e - s, sum(unc[i].prompt_tokens + len(unc[i].token_ids) for i in range(s, e))))
    return decisions, costs
