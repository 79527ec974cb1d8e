"""The hf reader through its real loading code, on a tiny randomly initialised Llama saved to a
temporary folder (no network): uncertainty equals an independent recomputation from the logits,
batched equals one-by-one, and token counts are right."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from xmemory_gpu.llm import load_reader
from xmemory_gpu.ops.entropy import token_entropy_logprob
from xmemory_gpu.ops.entropy.reference import token_entropy, token_logprob

PROMPTS = [
    "alice moved to lisbon last week",
    "where does alice live now",
    "bob",
    "the cat sat on the mat and then it slept",
]


@pytest.fixture(scope="module")
def reader(tiny_model):
    return load_reader(f"hf:{tiny_model}", device="cpu", batch_size=3)


def test_entropy_backends_agree(rng):
    z = rng.standard_normal((7, 50)) * 3
    ids = rng.integers(0, 50, 7)
    e_ref, l_ref = token_entropy_logprob(z, ids, backend="reference")
    e_t, l_t = token_entropy_logprob(torch.from_numpy(z).float(), torch.from_numpy(ids))
    np.testing.assert_allclose(e_t.numpy(), e_ref, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(l_t.numpy(), l_ref, rtol=1e-5, atol=1e-5)
    p = np.exp(z[0] - z[0].max()) / np.exp(z[0] - z[0].max()).sum()
    assert e_ref[0] == pytest.approx(-(p * np.log(p)).sum())


@pytest.mark.parametrize("kind", ["mean_nll", "entropy"])
def test_uncertainty_equals_independent_recomputation(reader, kind):
    res = reader.uncertainty(PROMPTS, n_tokens=6, kind=kind)
    for prompt, u in zip(PROMPTS, res):
        ids = reader.tokenizer(prompt, add_special_tokens=False)["input_ids"]
        assert u.prompt_tokens == len(ids) and 1 <= len(u.token_ids) <= 6
        full = torch.tensor([ids + u.token_ids])
        with torch.no_grad():
            logits = (
                reader.model(full).logits[0, len(ids) - 1 : len(ids) - 1 + len(u.token_ids)].double().numpy()
            )
        assert u.token_ids == logits.argmax(axis=1).tolist()  # greedy
        np.testing.assert_allclose(u.token_entropy, token_entropy(logits), rtol=1e-4, atol=1e-4)
        np.testing.assert_allclose(u.token_logprob, token_logprob(logits, u.token_ids), rtol=1e-4, atol=1e-4)
        per = token_entropy(logits) if kind == "entropy" else -token_logprob(logits, u.token_ids)
        assert u.value == pytest.approx(per.mean(), rel=1e-4, abs=1e-4)


def test_batched_equals_one_by_one_and_usage(reader):
    before = reader.usage.calls
    batched = reader.uncertainty(PROMPTS, n_tokens=5)
    single = [reader.uncertainty([p], n_tokens=5)[0] for p in PROMPTS]
    for a, b in zip(batched, single):
        assert a.token_ids == b.token_ids
        np.testing.assert_allclose(a.token_logprob, b.token_logprob, rtol=1e-4, atol=1e-4)
    assert reader.usage.calls == before + 2 * len(PROMPTS)
    gen = reader.generate(PROMPTS, max_tokens=4)
    assert len(gen.texts) == len(PROMPTS) and all(1 <= n <= 4 for n in gen.output_tokens)
    assert gen.prompt_tokens == reader.count(PROMPTS)


def test_bad_specs():
    with pytest.raises(ValueError, match="unknown reader spec"):
        load_reader("gpt:nothing")
    with pytest.raises(ValueError, match="uncertainty kind"):
        from xmemory_gpu.llm.hf import HFReader

        HFReader.uncertainty(None, ["x"], kind="variance")  # type: ignore[arg-type]


SHARED = (
    "memories : alice moved to lisbon in may and adopted a dog named rex . bob paints landscapes on weekends . "
    * 3
)
PROBES = [
    SHARED + "question : where does alice live",
    SHARED + "episode : alice and bob went hiking . question : where does alice live",
    SHARED + "episode : rex is a puppy . question : what is the dog called",
    "unrelated short prompt",
    SHARED + "q",
    SHARED + "question : who paints",
]


def test_prefix_groups():
    from xmemory_gpu.llm.hf import _prefix_groups

    ids = [[1, 2, 3, 4, 5], [1, 2, 3, 4, 6, 7], [1, 2, 3, 9], [8, 8], [1, 2, 3, 4]]
    assert _prefix_groups(ids, 3) == [(0, 3, 3), (3, 4, 0), (4, 5, 0)]
    assert _prefix_groups(ids, 4) == [(0, 2, 4), (2, 3, 0), (3, 4, 0), (4, 5, 0)]
    assert _prefix_groups([[1, 2], [1, 2]], 1) == [(0, 2, 1)]  # the prefix stops one token short
    assert _prefix_groups(ids, 0) == [(i, i + 1, 0) for i in range(5)]
    assert _prefix_groups([], 3) == []
    # two queries' probes behind one shared instruction: each query keeps its own longer prefix
    q = [[7, 7, 7, a, a, a, a, t] for a in (1, 2) for t in (5, 6)]
    assert _prefix_groups(q, 2) == [(0, 2, 7), (2, 4, 7)]


@pytest.mark.parametrize("kind", ["mean_nll", "entropy"])
def test_shared_prefix_equals_full_recomputation(tiny_model, reader, kind):
    plain = load_reader(f"hf:{tiny_model}", device="cpu", batch_size=2, min_prefix=0)
    shared = load_reader(f"hf:{tiny_model}", device="cpu", batch_size=2, min_prefix=16)
    a = plain.uncertainty(PROBES, n_tokens=6, kind=kind)
    b = shared.uncertainty(PROBES, n_tokens=6, kind=kind)
    assert shared.usage.cached_prompt_tokens > 0 and plain.usage.cached_prompt_tokens == 0
    assert shared.usage.prompt_tokens == plain.usage.prompt_tokens == sum(reader.count(PROBES))
    for x, y in zip(a, b):
        assert x.token_ids == y.token_ids and x.prompt_tokens == y.prompt_tokens
        np.testing.assert_allclose(x.token_logprob, y.token_logprob, rtol=1e-4, atol=1e-4)
        np.testing.assert_allclose(x.token_entropy, y.token_entropy, rtol=1e-4, atol=1e-4)
        assert x.value == pytest.approx(y.value, rel=1e-4, abs=1e-4)
    assert plain.generate(PROBES, max_tokens=5).texts == shared.generate(PROBES, max_tokens=5).texts
