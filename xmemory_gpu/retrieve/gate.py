"""Stage II's uncertainty gate: probes of the reader over a query's
episodes, in the authors' independent mode or sequentially, and the admission walk as a pure
function (replayable offline)."""

from __future__ import annotations

from dataclasses import dataclass

from ..config import Stage2Config
from .answer import answer_prompt
from .pool import EpisodePick


@dataclass
class GateDecision:
    pick: EpisodePick
    drop: float  # uncertainty without the episode minus with it (nats; > 0: the episode helps)
    admitted: bool
    expanded: bool  # drop passed the expansion threshold (raw messages added)


def _probe(reader, question: str, coarse: str, episodes: list[str]) -> str:
    return answer_prompt(reader, question, coarse + "\n\nEpisodic memories:\n" + "\n\n".join(episodes))


def _cost(us) -> tuple[int, int]:
    return len(us), sum(u.prompt_tokens + len(u.token_ids) for u in us)


def gate_episodes(
    reader,
    questions: list[str],
    coarse: list[str],
    episode_texts: list[list[str]],
    pools: list[list[EpisodePick]],
    cfg: Stage2Config,
) -> tuple[list[list[GateDecision]], list[tuple[int, int]]]:
    """The uncertainty gate over each query's first ``episode_budget`` episodes (by priority).

    ``independent`` (the authors' code): the uncertainty of the answer given the coarse context,
    and given the coarse context plus each episode, all prompts of all queries in one
    ``reader.uncertainty`` batch (a query's probes share its prefix). ``sequential``: each probe
    adds one episode to the context admitted so far and is compared with that context's
    uncertainty; one batch per round, across queries.
    Walking in priority order, an episode is admitted when its drop exceeds ``include_threshold``
    and expanded to its raw messages when it exceeds ``expand_threshold``; a low-gain probe among
    the first ``early_stop_first`` stops the walk, as does the second low-gain probe.
    Returns the decisions per query and (calls, tokens) spent per query."""
    if cfg.mode == "independent":
        return _independent(reader, questions, coarse, episode_texts, pools, cfg)
    if cfg.mode == "sequential":
        return _sequential(reader, questions, coarse, episode_texts, pools, cfg)
    raise ValueError(f"stage2.mode must be 'independent' or 'sequential', got {cfg.mode!r}")


def _uncertainty(reader, prompts: list[str], cfg: Stage2Config):
    return (
        reader.uncertainty(prompts, n_tokens=cfg.probe_tokens, kind=cfg.uncertainty, purpose="stage2 probes")
        if prompts
        else []
    )


def walk_independent(drops: list[float], cfg: Stage2Config) -> list[tuple[float, bool, bool]]:
    """The admission walk over independent probes' drops (nats, in priority order): (drop,
    admitted, expanded) for each probe walked, stopping by the early-stop rule."""
    out, low = [], 0
    for j, drop in enumerate(drops):
        ok = drop > cfg.include_threshold
        out.append((drop, ok, ok and drop > cfg.expand_threshold))
        if not ok:
            low += 1
            if j < cfg.early_stop_first or low >= 2:
                break
    return out


def _independent(reader, questions, coarse, episode_texts, pools, cfg):
    prompts, spans = [], []
    for q, question in enumerate(questions):
        start = len(prompts)
        if episode_texts[q][: cfg.episode_budget]:  # no episode to probe: no call
            prompts.append(answer_prompt(reader, question, coarse[q]))
            prompts += [
                _probe(reader, question, coarse[q], [text]) for text in episode_texts[q][: cfg.episode_budget]
            ]
        spans.append((start, len(prompts)))
    unc = _uncertainty(reader, prompts, cfg)
    decisions, costs = [], []
    for q, (s, e) in enumerate(spans):
        if s == e:
            decisions.append([])
            costs.append((0, 0))
            continue
        walk = walk_independent([unc[s].value - u.value for u in unc[s + 1 : e]], cfg)
        decisions.append([GateDecision(pools[q][j], drop, ok, ex) for j, (drop, ok, ex) in enumerate(walk)])
        costs.append(_cost(unc[s:e]))
    return decisions, costs


def _sequential(reader, questions, coarse, episode_texts, pools, cfg):
    n = len(questions)
    active = [q for q in range(n) if episode_texts[q][: cfg.episode_budget]]  # no episode to probe: no call
    base_u = _uncertainty(reader, [answer_prompt(reader, questions[q], coarse[q]) for q in active], cfg)
    base, costs = [0.0] * n, [(0, 0)] * n
    for q, u in zip(active, base_u):
        base[q], costs[q] = u.value, _cost([u])
    admitted: list[list[str]] = [[] for _ in range(n)]
    decisions: list[list[GateDecision]] = [[] for _ in range(n)]
    low = [0] * n
    j = 0
    while active:
        us = _uncertainty(
            reader,
            [_probe(reader, questions[q], coarse[q], admitted[q] + [episode_texts[q][j]]) for q in active],
            cfg,
        )
        still = []
        for q, u in zip(active, us):
            c = _cost([u])
            costs[q] = (costs[q][0] + c[0], costs[q][1] + c[1])
            drop = base[q] - u.value
            ok = drop > cfg.include_threshold
            decisions[q].append(GateDecision(pools[q][j], drop, ok, ok and drop > cfg.expand_threshold))
            if ok:
                admitted[q].append(episode_texts[q][j])
                base[q] = u.value
            else:
                low[q] += 1
                if j < cfg.early_stop_first or low[q] >= 2:
                    continue
            if j + 1 < min(cfg.episode_budget, len(episode_texts[q])):
                still.append(q)
        active, j = still, j + 1
    return decisions, costs
