"""Embedders: repeats embedded once (same rows), unit rows, a row independent of the rest of the call
(batch invariance), clear errors for bad specs."""

from __future__ import annotations

import numpy as np
import pytest
from sentence_transformers import SentenceTransformer

from xmemory_gpu.embed import load_embedder
from xmemory_gpu.embed.base import normalize_rows
from xmemory_gpu.embed.sentence_transformers import default_model_path


def test_repeated_texts_are_embedded_once_and_share_their_row():
    e = load_embedder("all-MiniLM-L6-v2")
    calls = []
    real = e.forward_tokens
    e.forward_tokens = lambda tokens: (
        calls.append(e.model.tokenizer.batch_decode(tokens["input_ids"], skip_special_tokens=True))
        or real(tokens)
    )
    texts = [
        "Melanie paints sunsets.",
        "hi",
        "Melanie paints sunsets.",
        "Caroline went to a support group.",
        "hi",
    ]
    x = e.encode(texts)
    distinct = [t for call in calls for t in dict.fromkeys(call)]  # a call may repeat its last text as filler
    assert x.shape == (5, e.dim) and sorted(distinct) == sorted(
        t.lower() for t in set(texts)
    )  # each distinct text once
    np.testing.assert_array_equal(x[0], x[2])
    np.testing.assert_allclose(np.linalg.norm(x, axis=1), 1.0, rtol=1e-5)
    np.testing.assert_allclose(x[3], e.encode(["Caroline went to a support group."])[0], atol=1e-6)


def _chat_texts(rng: np.random.Generator, n: int) -> list[str]:
    words = (
        "I went to the park with my dog yesterday and it rained a lot so we came back early "
        "Caroline said her support group meets on Tuesdays at the library near the station"
    ).split()
    return [
        f"{rng.choice(['Caroline', 'Melanie'])}: " + " ".join(rng.choice(words, int(rng.integers(1, 60))))
        for _ in range(n)
    ]


def test_rows_do_not_depend_on_the_rest_of_the_call():
    """Streaming embeds a text alone or among a few; the bulk build among thousands: the rows must
    be bit-identical (CPU matmul kernels round differently with padding and with small batches)."""
    e = load_embedder("all-MiniLM-L6-v2")
    rng = np.random.default_rng(7)
    texts = _chat_texts(rng, 120)
    bulk = e.encode(texts)
    i = 0
    while i < 40:
        n = int(rng.integers(1, 8))
        np.testing.assert_array_equal(
            e.encode(texts[i : i + n]), bulk[i : i + n], err_msg=f"rows {i}..{i + n}"
        )
        i += n
    np.testing.assert_array_equal(e.encode(texts[::-1]), bulk[::-1])


def test_a_lone_text_costs_one_forward_of_its_own_tokens():
    """On the CPU the dense layers run on ops.linear (one FMA chain per output): a text embedded alone
    is the only text of its forward (no filler copies), its row is the row it gets among many, and
    the vectors are the model's own (within float32 rounding of the BLAS path)."""
    e = load_embedder("all-MiniLM-L6-v2")
    if not e.rowwise:
        pytest.skip("the C++ module is not built: the embedder fills small batches instead")
    texts = [
        "I moved to Lisbon in May.",
        "Call me Sam.",
        "ok",
        "My sister Emma visits on October 12th, remind me?",
    ]
    calls = []
    real = e.forward_tokens
    e.forward_tokens = lambda tokens: calls.append(len(tokens["input_ids"])) or real(tokens)
    alone = np.concatenate([e.encode([t]) for t in texts])
    assert calls == [1] * len(texts)
    np.testing.assert_array_equal(e.encode(texts * 3)[:4], alone)
    np.testing.assert_array_equal(
        normalize_rows(e.model.encode(texts[:1])), alone[:1]
    )  # the model's own path
    plain = SentenceTransformer(str(default_model_path()), device="cpu")  # BLAS dense layers
    x = plain.encode(texts, convert_to_numpy=True, normalize_embeddings=True)
    assert np.abs(x - alone).max() < 1e-5


def test_rows_do_not_depend_on_the_thread_count():
    """The dense layers' chains and torch's own per-row ops give a text the same bits on one thread."""
    import torch

    e = load_embedder("all-MiniLM-L6-v2")
    if not e.rowwise:
        pytest.skip("the C++ module is not built: BLAS dense layers make no thread-count promise")
    texts = _chat_texts(np.random.default_rng(3), 30)
    many = e.encode(texts)
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        one = e.encode(texts)
    finally:
        torch.set_num_threads(before)
    np.testing.assert_array_equal(one, many)


def test_other_models_keep_blas_layers_and_filled_batches():
    """An ``st:`` model (here the default model's own folder) is not routed: BLAS dense layers, each
    small batch filled with copies up to 256 tokens, and still batch-invariant."""
    e = load_embedder(f"st:{default_model_path()}")
    assert not e.rowwise and not any(type(m.forward).__name__ == "RowwiseForward" for m in e.model.modules())
    sizes = []
    real = e.forward_tokens
    e.forward_tokens = lambda tokens: sizes.append(len(tokens["input_ids"])) or real(tokens)
    texts = _chat_texts(np.random.default_rng(5), 24)
    bulk = e.encode(texts)
    sizes.clear()
    np.testing.assert_array_equal(e.encode(texts[3:4]), bulk[3:4])
    n_tokens = len(e.model.tokenizer(texts[3])["input_ids"])
    assert sizes == [min(64, -(-256 // n_tokens))]  # one forward, filled with copies
    for s in (0, 5, 11):
        np.testing.assert_array_equal(e.encode(texts[s : s + 3]), bulk[s : s + 3])


def test_a_default_prompt_is_applied_as_sentence_transformers_applies_it(tmp_path):
    """A model saved with a default prompt: ``encode`` goes through ``SentenceTransformer.encode`` (which
    adds the prompt), so stored rows and queries are embedded alike."""
    base = SentenceTransformer(str(default_model_path()), device="cpu")
    base.prompts = {"doc": "passage: "}
    base.default_prompt_name = "doc"
    base.save(str(tmp_path / "prompted"))
    e = load_embedder(f"st:{tmp_path / 'prompted'}")
    assert not e.direct
    texts = ["I moved to Lisbon in May.", "Call me Sam."]
    got = e.encode(texts[:1])
    np.testing.assert_array_equal(e.encode(texts)[:1], got)  # batch-invariant (filled batches)
    np.testing.assert_allclose(
        got, normalize_rows(e.model.encode(texts[:1])), atol=1e-6
    )  # prompted, as encode does
    assert not np.allclose(
        got, normalize_rows(base.encode(texts[:1], prompt="")), atol=1e-3
    )  # the prompt matters


@pytest.mark.parametrize(
    "spec, message",
    [
        ("hashing:x", "integer >= 1"),
        ("hashing:0", "integer >= 1"),
        ("st:/no/such/model", "no model folder"),
        ("nope", "unknown embedder spec"),
    ],
)
def test_bad_embedder_specs_are_one_line_errors(spec, message):
    with pytest.raises(ValueError, match=message):
        load_embedder(spec)


def test_queries_take_the_plain_path(monkeypatch):
    """Queries skip the batch-invariance filler (one forward of their own tokens) and still give
    unit rows within float32 noise of the stored path's."""
    from xmemory_gpu.embed import encode_queries

    e = load_embedder("all-MiniLM-L6-v2")
    calls = []
    real = e.model.encode
    # the model is the process's shared one: patched for this test only
    monkeypatch.setattr(e.model, "encode", lambda texts, **kw: calls.append(list(texts)) or real(texts, **kw))
    q = encode_queries(e, ["When did Caroline go to the support group?"])
    assert calls == [["When did Caroline go to the support group?"]]
    np.testing.assert_allclose(q, e.encode(["When did Caroline go to the support group?"]), atol=1e-5)
    hashing = load_embedder("hashing:32")
    np.testing.assert_array_equal(encode_queries(hashing, ["a b"]), hashing.encode(["a b"]))


def test_hashing_embedder_counts_as_the_per_feature_loop():
    """The one-pass counting (remembered buckets, one bincount) gives the bits of adding each
    feature's signed bucket in turn, on fresh random texts, repeats, empty and one-word texts."""
    import hashlib

    from xmemory_gpu.embed.base import normalize_rows
    from xmemory_gpu.embed.hashing import HashingEmbedder
    from xmemory_gpu.text import words

    rng = np.random.default_rng(11)
    texts = _chat_texts(rng, 300) + ["", "   ", "dog", "the the the", "dog dog"] + _chat_texts(rng, 5) * 2
    for dim in (2, 37, 384):
        e = HashingEmbedder(dim)
        loop = np.zeros((len(texts), dim), np.float32)
        for r, text in enumerate(texts):
            w = words(text)
            for f in w + [a + " " + b for a, b in zip(w, w[1:])]:
                h = int.from_bytes(hashlib.blake2b(f.encode(), digest_size=8).digest(), "little")
                loop[r, h % dim] += 1.0 if (h >> 63) & 1 else -1.0
        want = normalize_rows(loop)
        for _ in range(2):  # buckets computed, then remembered
            got = e.encode(texts)
            assert got.dtype == np.float32 and got.shape == want.shape
            np.testing.assert_array_equal(got.view(np.int32), want.view(np.int32))
    assert HashingEmbedder(8).encode([]).shape == (0, 8)
