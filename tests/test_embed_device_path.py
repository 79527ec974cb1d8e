"""The default encoder's GPU path, checked on the CPU: ``MiniLM`` with torch's dense layers
(``rowwise=False``, what a GPU runs) against the row-wise CPU path and an unrouted
``SentenceTransformer``; bfloat16 / float16 under autocast within their stated tolerance; the
``embed.dtype`` setting (checked, a GPU's only, float32 wherever the encoder is on the CPU); and the
token budget that sizes a GPU's batches."""

from __future__ import annotations

import numpy as np
import pytest

from xmemory_gpu.config import EMBED_DTYPES, XMemoryConfig
from xmemory_gpu.embed import encoder_dtype, load_embedder
from xmemory_gpu.embed.base import same_length_batches
from xmemory_gpu.embed.minilm import MiniLM
from xmemory_gpu.embed.rowwise import kernel_built
from xmemory_gpu.embed.sentence_transformers import check_dtype, default_model_path

TEXTS = [
    "hi",
    "Melanie paints sunsets.",
    "I moved to Lisbon last week, and my sister's café is nearby!",
    "The marathon is in April; I have been running 40 km a week since January.",
    "word " * 300,  # truncated to the model's 256 tokens
    "",
]


def _encode(model: MiniLM, texts: list[str]) -> np.ndarray:
    out = model.encode(texts)
    assert out.dtype == np.float32 and out.shape == (len(texts), 384)
    return out


@pytest.fixture(scope="module")
def torch_dense() -> MiniLM:
    return MiniLM(default_model_path(), rowwise=False)


@pytest.mark.skipif(not kernel_built(), reason="the C++ module is not built")
def test_torch_dense_layers_match_the_rowwise_path(torch_dense):
    rowwise = MiniLM(default_model_path())
    assert rowwise.rowwise and not torch_dense.rowwise
    a, b = _encode(rowwise, TEXTS), _encode(torch_dense, TEXTS)
    np.testing.assert_allclose(a, b, atol=2e-5)


def test_torch_dense_layers_match_sentence_transformers(torch_dense):
    from sentence_transformers import SentenceTransformer

    st = SentenceTransformer(str(default_model_path()), device="cpu").eval()  # BLAS layers, not routed
    ref = st.encode(TEXTS, batch_size=1, convert_to_numpy=True, normalize_embeddings=True)
    np.testing.assert_allclose(_encode(torch_dense, TEXTS), ref, atol=2e-5)


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_half_precision_stays_near_float32(torch_dense, dtype):
    """Autocast (products in ``dtype``, norms and pooling in float32), on the CPU as a GPU runs it:
    every vector within cosine 0.995 of float32's, unit length, finite."""
    half = MiniLM(default_model_path(), rowwise=False, dtype=dtype)
    a, b = _encode(torch_dense, TEXTS), _encode(half, TEXTS)
    assert np.isfinite(b).all()
    np.testing.assert_allclose(np.linalg.norm(b, axis=1), 1.0, atol=1e-5)
    assert (a * b).sum(axis=1).min() > 0.995


def test_rowwise_layers_are_float32_on_the_cpu_only():
    with pytest.raises(ValueError, match="float32 on the CPU only"):
        MiniLM(default_model_path(), rowwise=True, dtype="bfloat16")
    with pytest.raises(ValueError, match="embed.dtype: expected one of"):
        MiniLM(default_model_path(), rowwise=False, dtype="float64")


def test_dtype_setting_is_checked_and_a_gpus_only():
    assert EMBED_DTYPES == ("float32", "bfloat16", "float16")
    check_dtype("bfloat16", "cuda")
    check_dtype("float32", "cpu")
    with pytest.raises(ValueError, match="embed.dtype: bfloat16 runs on a GPU only"):
        load_embedder(dtype="bfloat16")  # the default device is the CPU
    with pytest.raises(ValueError, match="embed.dtype: expected one of"):
        load_embedder(dtype="int8", device="cuda")
    with pytest.raises(ValueError, match="embed.dtype"):
        XMemoryConfig.from_dict({"embed": {"dtype": "half"}})
    assert XMemoryConfig.from_dict({"embed": {"dtype": "bfloat16"}}).embed.dtype == "bfloat16"
    # a store built on a GPU in bfloat16 opens on a CPU: the CPU's encoder is float32 whatever it says
    assert encoder_dtype("bfloat16", "cpu") == "float32"
    assert encoder_dtype("bfloat16", "cuda:0") == "bfloat16"


def test_worker_settings_carry_the_encoders_dtype():
    from xmemory_gpu.construct.worker_pool import worker_settings

    cfg = XMemoryConfig.from_dict({"embed": {"dtype": "float16"}})
    assert worker_settings(None, cfg, "cpu")["dtype"] == "float32"  # the encoder is on the CPU


def test_token_budget_sizes_batches_by_length():
    lengths = np.array([10] * 5000 + [200] * 700 + [7] * 3)
    plain = same_length_batches(lengths, 64)
    assert max(len(r) for _, r in plain) == 64
    budget = same_length_batches(lengths, 64, max_tokens=65_536)
    sizes = {n: [len(r) for t, r in budget if t == n] for n in (10, 200, 7)}
    assert sizes[10] == [5000]  # 6,553 rows of 10 tokens fit
    assert sizes[200] == [327, 327, 46]  # 65,536 // 200
    assert sizes[7] == [3]
    for batches in (plain, budget):  # every row once, one token count per batch, longest first
        rows = np.concatenate([r for _, r in batches])
        assert sorted(rows.tolist()) == list(range(len(lengths)))
        assert all((lengths[r] == t).all() for t, r in batches)
        assert [t for t, _ in batches] == sorted((t for t, _ in batches), reverse=True)
    assert (
        same_length_batches(lengths, 8000, max_tokens=65_536)[0][1].size == 700
    )  # batch_size wins if larger
