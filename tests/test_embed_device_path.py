"""The default encoder's GPU path, checked on the CPU: ``MiniLM`` with torch's dense layers
(``rowwise=False``, what a GPU runs) against the row-wise CPU path and an unrouted
``SentenceTransformer``, and the token budget that sizes a GPU's batches."""

from __future__ import annotations

import numpy as np
import pytest

from xmemory_gpu.embed.base import same_length_batches
from xmemory_gpu.embed.minilm import MiniLM
from xmemory_gpu.embed.rowwise import kernel_built
from xmemory_gpu.embed.sentence_transformers import default_model_path

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


def test_rowwise_layers_run_on_the_cpu_only():
    with pytest.raises(ValueError, match="on the CPU only"):
        MiniLM(default_model_path(), device="meta", rowwise=True)


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


def _has_cuda() -> bool:
    import torch

    return torch.cuda.is_available()


@pytest.mark.gpu
@pytest.mark.skipif(not _has_cuda(), reason="needs a CUDA GPU")
def test_default_encoder_on_a_gpu_matches_the_cpu(torch_dense):
    """On a GPU: ``MiniLM(device="cuda")`` and the embedder that loads it (token-budget batches, the
    shared load) give the CPU's vectors within 1e-4, repeats and empty texts included."""
    from xmemory_gpu.embed.sentence_transformers import SentenceTransformerEmbedder

    gpu = MiniLM(default_model_path(), device="cuda")
    assert not gpu.rowwise and gpu.device.type == "cuda"
    ref = _encode(torch_dense, TEXTS)
    np.testing.assert_allclose(_encode(gpu, TEXTS), ref, atol=1e-4)
    emb = SentenceTransformerEmbedder(device="cuda")
    texts = TEXTS * 3 + [f"message number {i} about the trip" for i in range(500)]
    got = emb.encode(texts)
    np.testing.assert_allclose(got[: len(TEXTS)], ref, atol=1e-4)
    np.testing.assert_allclose(emb.encode_queries(TEXTS), ref, atol=1e-4)
    assert isinstance(emb.model, MiniLM)  # the default model on a GPU: no sentence-transformers forward


def test_slim_model_texts_and_unpack(tmp_path):
    """``benchmarks/gpu/slim_model.py``: the texts it keeps rows for are what the encoder is given
    (recorded: "User: ..." statements no data string holds), the data's strings and the long-memory
    queries; ``unpack`` restores an xz file in place and names a folder without one."""
    import lzma
    import sys
    from pathlib import Path

    bench = Path(__file__).resolve().parents[1] / "benchmarks"
    sys.path[:0] = [str(bench / "gpu"), str(bench)]
    from slim_model import WEIGHTS, benchmark_texts, unpack

    texts = benchmark_texts(synthetic=2, long_tokens=(20_000,), stream_tokens=0)
    assert {"What is my job?", "Which trip am I planning?"} <= texts
    assert any(t.startswith("User: ") for t in texts)  # recorded from the encoder's calls
    model = tmp_path / "pkg" / "model"
    model.mkdir(parents=True)
    with lzma.open(model / f"{WEIGHTS}.xz", "wb") as f:
        f.write(b"weights")
    unpack(tmp_path)
    assert (model / WEIGHTS).read_bytes() == b"weights" and not (model / f"{WEIGHTS}.xz").exists()
    with pytest.raises(SystemExit, match="no \\*/model/"):
        unpack(tmp_path)
