"""The default encoder without sentence-transformers (``embed.minilm``): the same token ids as the
transformers tokenizer, the same vector bits as ``SentenceTransformer`` with its dense layers routed to
``ops.linear``, and a process that embeds with it never imports sentence-transformers."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
import torch

from xmemory_gpu.embed import load_embedder, normalize_rows
from xmemory_gpu.embed.minilm import MAX_SEQ_LENGTH, MiniLM
from xmemory_gpu.embed.rowwise import kernel_built, route_dense_layers
from xmemory_gpu.embed.sentence_transformers import default_model_path

pytestmark = pytest.mark.skipif(not kernel_built(), reason="the C++ module is not built")

WORDS = (
    "the a I we moved job nurse Google Lisbon Boston painting sister dog marathon allergic peanuts".split()
)


def _texts() -> list[str]:
    rng = np.random.default_rng(7)
    texts = [
        "hi",
        "Melanie paints sunsets.",
        "I moved to Lisbon last week, and my sister's café is nearby!",
        "Zürich naïve façade 東京 😀 résumé",
        "word " * 400,  # truncated to MAX_SEQ_LENGTH tokens
        "   ",
        "",
    ]
    texts += [" ".join(rng.choice(WORDS, size=int(rng.integers(1, 60)))) for _ in range(24)]
    return texts


@pytest.fixture(scope="module")
def light() -> MiniLM:
    return MiniLM(default_model_path())


@pytest.fixture(scope="module")
def routed():
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(str(default_model_path()), device="cpu").eval()
    assert route_dense_layers(model) > 0
    return model


def test_token_ids_match_the_transformers_tokenizer(light, routed):
    texts = _texts()
    ours = light.tokenizer(texts, truncation=True, max_length=MAX_SEQ_LENGTH)
    theirs = routed.tokenizer(texts, truncation=True, max_length=MAX_SEQ_LENGTH)
    assert ours["input_ids"] == theirs["input_ids"]
    assert max(len(i) for i in ours["input_ids"]) == MAX_SEQ_LENGTH
    assert light.tokenizer.batch_decode(ours["input_ids"][:2]) == ["hi", "melanie paints sunsets."]


@pytest.mark.parametrize("copies", [1, 3])
def test_vectors_have_the_routed_sentence_transformer_bits(light, routed, copies):
    tokens = routed.tokenizer(_texts(), truncation=True, max_length=MAX_SEQ_LENGTH)
    for i, ids in enumerate(tokens["input_ids"]):
        feats = {k: torch.tensor([v[i]] * copies) for k, v in tokens.items()}
        with torch.inference_mode():
            want = routed(feats)["sentence_embedding"].float().numpy()
        assert np.array_equal(light.encode_ids([ids] * copies), want), f"text {i} ({len(ids)} tokens)"


def test_encode_batches_by_length_and_gives_each_text_its_own_row(light):
    texts = _texts()[:10]
    together = light.encode(texts, batch_size=4)
    alone = np.concatenate([light.encode([t]) for t in texts])
    assert together.shape == (10, 384) and np.array_equal(together, alone)
    np.testing.assert_allclose(np.linalg.norm(together, axis=1), 1.0, rtol=1e-5)


def test_a_padded_batch_is_refused(light):
    ids = torch.tensor([[101, 2000, 102], [101, 102, 0]])
    mask = torch.tensor([[1, 1, 1], [1, 1, 0]])
    with pytest.raises(ValueError, match="attention_mask"):
        light({"input_ids": ids, "attention_mask": mask})


def test_the_default_embedder_runs_it_and_never_imports_sentence_transformers():
    code = (
        "import sys\n"
        "from xmemory_gpu.embed import load_embedder\n"
        "from xmemory_gpu.embed.minilm import MiniLM\n"
        "e = load_embedder('all-MiniLM-L6-v2')\n"
        "x = e.encode(['I moved to Lisbon.'])\n"
        "q = e.encode_queries(['Where do I live?'])\n"
        "assert isinstance(e.model, MiniLM) and x.shape == (1, 384) and q.shape == (1, 384)\n"
        "print(sorted(m for m in ('sentence_transformers', 'transformers') if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out.stdout + out.stderr


def test_the_embedder_and_the_light_model_agree(light):
    e = load_embedder("all-MiniLM-L6-v2")
    texts = _texts()[:8]
    assert np.array_equal(e.encode(texts), normalize_rows(light.encode(texts)))  # the embedder's unit rows
