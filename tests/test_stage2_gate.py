"""Stage II's uncertainty gate (``retrieve.gate.gate_episodes``) on a scripted reader whose
uncertainty is a known function of the episodes in the prompt: admission, expansion and the early
stop rule in both modes, one batch for the independent probes, and batched == one-by-one."""

from __future__ import annotations

import re
from dataclasses import replace

import pytest

from xmemory_gpu.config import Stage2Config
from xmemory_gpu.llm.base import Uncertainty, Usage
from xmemory_gpu.retrieve.gate import gate_episodes
from xmemory_gpu.retrieve.pool import EpisodePick

_EP = re.compile(r"EP(\d+)_(\d+)")
CFG = Stage2Config(include_threshold=0.05, expand_threshold=0.25, early_stop_first=3, episode_budget=10)


class GainReader:
    """Uncertainty = 1 - combine(gains of the episodes named in the prompt); 1 for the coarse prompt.

    Episode j of query q is the text ``EPq_j``; ``combine`` is ``sum`` (independent evidence) or
    ``max`` (redundant evidence: a second episode adds nothing over the best one)."""

    name = "gains"

    def __init__(self, gains: dict[int, list[float]], combine=sum):
        self.gains, self.combine, self.usage, self.batches = gains, combine, Usage(), []

    def chat(self, user: str) -> str:
        return user

    def uncertainty(self, prompts, n_tokens=20, kind="mean_nll", purpose=""):
        self.batches.append(len(prompts))
        out = []
        for p in prompts:
            g = [self.gains[int(q)][int(j)] for q, j in _EP.findall(p)]
            out.append(
                Uncertainty(1.0 - (self.combine(g) if g else 0.0), kind, [], [], [7] * 3, 40 + 5 * len(g))
            )
        return out


def _run(reader, gains: dict[int, list[float]], cfg=CFG, queries=None):
    qs = sorted(gains) if queries is None else queries
    texts = [[f"EP{q}_{j} happened." for j in range(len(gains[q]))] for q in qs]
    pools = [[EpisodePick(j, 1.0 - j / 100, 0.5, 0.0) for j in range(len(gains[q]))] for q in qs]
    return gate_episodes(
        reader, [f"question {q}?" for q in qs], ["Semantic memories:\n- a fact"] * len(qs), texts, pools, cfg
    )


def _summary(decisions):
    return [(d.pick.row, round(d.drop, 9), d.admitted, d.expanded) for d in decisions]


GAINS = [0.5, 0.3, 0.6, 0.02, 0.4, 0.01, 0.9]


def test_independent_rules():
    reader = GainReader({0: GAINS})
    (dec,), (cost,) = _run(reader, {0: GAINS})
    # 0.02 is the first low-gain probe but not among the first 3: go on; 0.01 is the second: stop
    assert _summary(dec) == [
        (0, 0.5, True, True),
        (1, 0.3, True, True),
        (2, 0.6, True, True),
        (3, 0.02, False, False),
        (4, 0.4, True, True),
        (5, 0.01, False, False),
    ]
    assert reader.batches == [8]  # coarse + every probe, one batch (the walk stops after they return)
    assert cost == (8, 8 * 3 + 40 + 7 * 45)


def test_independent_early_low_gain_stops_and_thresholds_are_parameters():
    gains = [0.3, 0.01, 0.9]
    (dec,), _ = _run(GainReader({0: gains}), {0: gains})
    assert _summary(dec) == [
        (0, 0.3, True, True),
        (1, 0.01, False, False),
    ]  # low gain among the first 3: stop
    cfg = replace(CFG, include_threshold=-1.0, expand_threshold=0.5)
    (dec,), _ = _run(GainReader({0: gains}), {0: gains}, cfg)
    assert [(d.admitted, d.expanded) for d in dec] == [(True, False), (True, False), (True, True)]
    cfg = replace(CFG, episode_budget=2, include_threshold=-1.0)
    (dec,), (cost,) = _run(GainReader({0: gains}), {0: gains}, cfg)
    assert len(dec) == 2 and cost[0] == 3


def test_sequential_compares_with_the_context_admitted_so_far():
    # redundant evidence: after the 0.5 episode, the 0.3 one lowers nothing (max) -> low gain early -> stop
    reader = GainReader({0: GAINS}, combine=max)
    (dec,), (cost,) = _run(reader, {0: GAINS}, replace(CFG, mode="sequential"))
    assert _summary(dec) == [(0, 0.5, True, True), (1, 0.0, False, False)]
    assert reader.batches == [1, 1, 1] and cost[0] == 3
    # ... while the independent probes admit it (each is compared with the coarse context only)
    (ind,), _ = _run(GainReader({0: GAINS}, combine=max), {0: GAINS})
    assert _summary(ind)[1] == (1, 0.3, True, True)
    # additive evidence: sequential drops equal the independent ones, so the decisions agree
    (seq,), _ = _run(GainReader({0: GAINS}), {0: GAINS}, replace(CFG, mode="sequential"))
    assert [(r, a, e) for r, _, a, e in _summary(seq)] == [
        (r, a, e) for r, _, a, e in _summary(_run(GainReader({0: GAINS}), {0: GAINS})[0][0])
    ]
    assert [d.drop for d in seq] == pytest.approx(GAINS[:6])


@pytest.mark.parametrize("mode", ["independent", "sequential"])
def test_batched_equals_one_by_one(mode):
    gains = {
        0: GAINS,
        1: [0.01, 0.5],
        2: [],
        3: [0.4, 0.35, 0.3, 0.2, 0.1, 0.28, 0.27, 0.26, 0.25, 0.24, 0.9, 0.9],
        4: [-0.3],
    }
    cfg = replace(CFG, mode=mode)
    reader = GainReader(gains, combine=max if mode == "sequential" else sum)
    decisions, costs = _run(reader, gains, cfg)
    if mode == "independent":
        assert reader.batches == [1 + 7 + 1 + 2 + 1 + 10 + 1 + 1]  # query 2 has no episode: no prompt at all
    else:  # one batch of coarse prompts, then one batch per round across the queries still walking
        assert reader.batches[0] == 4 and len(reader.batches) == 1 + max(len(d) for d in decisions)
    for q in gains:
        (one,), (cost,) = _run(GainReader(gains, combine=reader.combine), gains, cfg, queries=[q])
        assert _summary(decisions[q]) == _summary(one) and costs[q] == cost
    assert decisions[2] == [] and costs[2] == (0, 0)


def test_unknown_mode_is_an_error():
    with pytest.raises(ValueError, match="stage2.mode"):
        _run(GainReader({0: GAINS}), {0: GAINS}, replace(CFG, mode="parallel"))
