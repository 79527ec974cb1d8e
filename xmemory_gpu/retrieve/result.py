"""What a retrieval returns: ordered units with provenance, the assembled context, costs."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

UNIT_TYPES = ("theme", "semantic", "episode", "message", "chunk", "session")


@dataclass(slots=True)
class RetrievedUnit:
    """One unit of retrieved context. ``id`` is unique within its type and memory."""

    type: str  # one of UNIT_TYPES
    id: str
    text: str
    tokens: int  # in the result's named tokenizer
    score: float  # the strategy's ranking value (Stage I: the coverage gain; baselines: the cosine)
    message_ids: list[str]  # provenance (LoCoMo dia_ids)
    timestamp: float | None = None
    scores: dict[str, float] = field(
        default_factory=dict
    )  # named scores only (relevance, similarity, gain, ...)
    # where each source message's line ends in ``text`` (character offsets), for a block of raw messages
    # ("Speaker: text" lines); None for any other text. Used to credit a cut unit; not serialised.
    message_ends: list[int] | None = field(default=None, repr=False)
    # the query-unit cosine the ranking used (scores' "relevance" or "similarity"): comparable across
    # queries and memories, unlike ``score``; set on every unit a live search returns
    relevance: float | None = None
    # how budget assembly treats the unit (typed, not scores): ``part`` > 0: a part of the nearest unit
    # before it ``part`` levels up, used only where that unit did not fit; ``fill``: taken only under a
    # budget, while it fits; ``cut``: its text is the head of the unit's, cut to the budget's last room
    part: int = 0
    passage: int = 0  # k > 0: the unit is passage k (1-based) of a long message
    fill: bool = False
    cut: bool = False
    # an assistant's answer ranked after the user's statements (``Stage1Config.users_first``): a search
    # over several memories keeps it after theirs (``MemoryEngine._merged``). Not serialised.
    after_users: bool = field(default=False, repr=False)


@dataclass
class RetrievalResult:
    """The result of one query against one memory under one strategy."""

    query: str
    memory_id: str
    strategy: str
    units: list[RetrievedUnit]
    context: str  # the assembled answer context (semantic memories, then episodic, with timestamps)
    context_tokens: int
    tokenizer: str  # name of the tokenizer used for every token count here
    llm_calls: int = 0  # reader/LLM calls spent on retrieval
    llm_tokens: int = 0  # prompt + output tokens spent on retrieval
    timings: dict[str, float] = field(default_factory=dict)  # seconds per stage (batch time / batch size)
    notes: list[str] = field(
        default_factory=list
    )  # e.g. "no reader configured: episodes admitted by priority"
    top_relevance: float | None = (
        None  # the largest unit relevance (set by live searches; kept when units are withheld)
    )

    @property
    def message_ids(self) -> list[str]:
        """Union of the units' provenance, in context order."""
        seen: dict[str, None] = {}
        for u in self.units:
            for mid in u.message_ids:
                seen.setdefault(mid, None)
        return list(seen)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        for u in d["units"]:
            del u["message_ends"], u["after_users"]
        d["message_ids"] = self.message_ids
        return d
