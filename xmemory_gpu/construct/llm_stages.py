"""The LLM builder's stages (``xmemory build --builder llm``), each run for all conversations of a
shard as one batch of prompts: boundaries over windows of messages, an episodic note per
episode, semantic facts per episode, a summary per theme.

Every unit has an LLM-free fallback, so a malformed answer never loses a message: episode spans
always cover every message (the LLM only chooses cut points inside a session window), and an
episode whose facts cannot be parsed takes the LLM-free statements of its messages.
"""

from __future__ import annotations

from collections import defaultdict

import numpy as np

from ..config import SegmentConfig
from ..llm.json_output import Generator, StageCounts, in_range, run_json_stage
from ..memory.bank import MemorySlice
from ..memory.records import Conversation, Episode, SemanticNode, session_windows
from ..text import fmt_date, message_line, numbered
from .llm_prompts import (
    BOUNDARY,
    EPISODE,
    FACTS,
    THEME,
    Boundaries,
    EpisodeNote,
    Facts,
    ThemeSummary,
)

STAGES = ("boundaries", "episodes", "facts", "summaries")


def _cap(spans: list[tuple[int, int]], max_messages: int) -> list[tuple[int, int]]:
    """Cut spans longer than ``max_messages`` into balanced parts."""
    out = []
    for s, e in spans:
        parts = -(-(e - s) // max_messages)
        cuts = np.linspace(s, e, parts + 1).round().astype(int)
        out.extend((int(a), int(b)) for a, b in zip(cuts[:-1], cuts[1:]))
    return out


class LLMBuilder:
    """``gen``: a reader (``xmemory_gpu.llm.load_reader``) or anything with ``generate``."""

    def __init__(
        self, gen: Generator, *, max_retries: int = 2, window: int = 24, segment: SegmentConfig | None = None
    ) -> None:
        self.gen = gen
        self.max_retries = max_retries
        self.window = window
        self.segment = segment or SegmentConfig()

    def new_counts(self) -> dict[str, StageCounts]:
        return {s: StageCounts() for s in STAGES}

    # -- episodes --------------------------------------------------------------------------------
    def boundaries(
        self,
        convs: list[Conversation],
        fallback: list[list[tuple[int, int]]],
        counts: list[dict[str, StageCounts]],
    ) -> list[list[tuple[int, int]]]:
        """Episode spans per conversation; a window whose answer fails keeps the fallback's cuts."""
        jobs, users, checks = [], [], []
        for b, conv in enumerate(convs):
            for s, e in session_windows(conv.messages, self.window):
                jobs.append((b, s, e))
                users.append(
                    BOUNDARY.format(
                        date=fmt_date(conv.messages[s].timestamp),
                        messages=numbered([message_line(m) for m in conv.messages[s:e]]),
                    )
                )
                checks.append(in_range("starts", e - s))
                counts[b]["boundaries"].units += 1
        answers = run_json_stage(
            self.gen,
            users,
            Boundaries,
            checks=checks,
            max_tokens=48,
            max_retries=self.max_retries,
            purpose="build boundaries",
            counts=[counts[b]["boundaries"] for b, _, _ in jobs],
        )
        starts: list[set[int]] = [set() for _ in convs]
        for (b, s, e), ans in zip(jobs, answers):
            starts[b].add(s)
            if ans is None:
                starts[b].update(a for a, _ in fallback[b] if s < a < e)
            else:
                starts[b].update(s + i - 1 for i in ans.starts)
        out = []
        for b, conv in enumerate(convs):
            cuts = sorted(starts[b]) + [len(conv.messages)]
            out.append(_cap(list(zip(cuts[:-1], cuts[1:])), self.segment.max_messages))
        return out

    def narrate(
        self, convs: list[Conversation], episodes: list[list[Episode]], counts: list[dict[str, StageCounts]]
    ) -> list[list[Episode]]:
        """Replace each episode's title and text by the LLM's note; failures keep the LLM-free episode."""
        jobs, users = [], []
        for b, (conv, eps) in enumerate(zip(convs, episodes)):
            by_id = {m.id: m for m in conv.messages}
            speakers = " and ".join(conv.speakers)
            for k, ep in enumerate(eps):
                msgs = [by_id[i] for i in ep.message_ids]
                jobs.append((b, k))
                users.append(
                    EPISODE.format(
                        speakers=speakers,
                        date=fmt_date(ep.start),
                        messages=numbered([message_line(m) for m in msgs]),
                    )
                )
                counts[b]["episodes"].units += 1
        answers = run_json_stage(
            self.gen,
            users,
            EpisodeNote,
            max_tokens=192,
            max_retries=self.max_retries,
            purpose="build episodes",
            counts=[counts[b]["episodes"] for b, _ in jobs],
        )
        out = [list(eps) for eps in episodes]
        for (b, k), ans in zip(jobs, answers):
            if ans is not None:
                ep = out[b][k]
                out[b][k] = Episode(
                    ep.id,
                    f"{fmt_date(ep.start)}: {ans.title.strip()}",
                    ans.content.strip(),
                    ep.message_ids,
                    ep.start,
                    ep.end,
                )
        return out

    # -- semantic facts --------------------------------------------------------------------------
    def facts(
        self,
        convs: list[Conversation],
        episodes: list[list[Episode]],
        fallback: list[list[SemanticNode]],
        counts: list[dict[str, StageCounts]],
    ) -> list[list[SemanticNode]]:
        """Facts per conversation (ids in order); an episode whose answer fails takes its fallback statements."""
        jobs, users, checks = [], [], []
        for b, (conv, eps) in enumerate(zip(convs, episodes)):
            by_id = {m.id: m for m in conv.messages}
            speakers = " and ".join(conv.speakers)
            for k, ep in enumerate(eps):
                n = len(ep.message_ids)
                jobs.append((b, k))
                users.append(
                    FACTS.format(
                        speakers=speakers,
                        date=fmt_date(ep.start),
                        messages=numbered([message_line(by_id[i]) for i in ep.message_ids]),
                    )
                )

                def check(obj: Facts, n: int = n) -> None:
                    bad = sorted({s for f in obj.facts for s in f.sources if not 1 <= s <= n})
                    if bad:
                        raise ValueError(f"sources {bad} outside 1..{n}")

                checks.append(check)
                counts[b]["facts"].units += 1
        answers = run_json_stage(
            self.gen,
            users,
            Facts,
            checks=checks,
            max_tokens=256,
            max_retries=self.max_retries,
            purpose="build facts",
            counts=[counts[b]["facts"] for b, _ in jobs],
        )
        fb_of: list[dict[int, list[SemanticNode]]] = []
        for nodes in fallback:
            d: dict[int, list[SemanticNode]] = defaultdict(list)
            for nd in nodes:
                d[nd.episode_ids[0]].append(nd)
            fb_of.append(d)
        out: list[list[SemanticNode]] = [[] for _ in convs]
        ts_of = [{m.id: m.timestamp for m in c.messages} for c in convs]
        for (b, k), ans in zip(jobs, answers):
            ep = episodes[b][k]
            if ans is None:
                items = [(nd.text, nd.message_ids) for nd in fb_of[b].get(ep.id, [])]
            else:
                items = [
                    (f.text.strip(), list(dict.fromkeys(ep.message_ids[s - 1] for s in f.sources)))
                    for f in ans.facts
                ]
            for text, mids in items:
                out[b].append(
                    SemanticNode(
                        id=len(out[b]),
                        text=text,
                        episode_ids=[ep.id],
                        message_ids=mids,
                        timestamp=ts_of[b][mids[0]],
                    )
                )
        return out

    # -- theme summaries -------------------------------------------------------------------------
    def summarize(self, memories: list[MemorySlice], counts: list[dict[str, StageCounts]]) -> None:
        """Replace extractive theme summaries in place; failures keep the extractive one."""
        jobs, users = [], []
        for b, mem in enumerate(memories):
            speakers = " and ".join(dict.fromkeys(mem.cols["msg"]["speaker"].tolist()))
            texts, theme_of = mem.cols["sem"]["text"], mem.cols["sem"]["theme"]
            for r in range(mem.n("theme")):
                members = np.flatnonzero(theme_of == r)[:12]
                jobs.append((b, r))
                users.append(
                    THEME.format(speakers=speakers, statements="\n".join(f"- {texts[i]}" for i in members))
                )
                counts[b]["summaries"].units += 1
        answers = run_json_stage(
            self.gen,
            users,
            ThemeSummary,
            max_tokens=48,
            max_retries=self.max_retries,
            purpose="build summaries",
            counts=[counts[b]["summaries"] for b, _ in jobs],
        )
        for (b, r), ans in zip(jobs, answers):
            if ans is not None:
                memories[b].cols["theme"]["summary"][r] = ans.summary.strip()
