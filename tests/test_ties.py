"""Exact ties rank the same on every backend: identical texts (and the hashing embedder's exact
cosine ties between different texts) give the same units, scores and contexts whether the kernels run
as the float64 reference, the C++ path (any ISA) or a GPU path (Triton, interpreted without a GPU;
CUDA where built). Kernels sum dot products in different orders, so tied scores differ between them
in the last bit; retrieval re-ranks their candidates by one host computation (``exact_rerank``)."""

from __future__ import annotations

import numpy as np
import pytest

from xmemory_gpu.config import XMemoryConfig
from xmemory_gpu.construct.pipeline import build_memories
from xmemory_gpu.datasets.locomo import load_locomo
from xmemory_gpu.datasets.synthetic import generate_conversations, write_json
from xmemory_gpu.embed.hashing import HashingEmbedder
from xmemory_gpu.memory.bank import Bank
from xmemory_gpu.memory.hierarchy import bank_of
from xmemory_gpu.ops import available_backends
from xmemory_gpu.retrieve import Retriever
from xmemory_gpu.retrieve.grouped import exact_rerank
from xmemory_gpu.retrieve.strategies import strategy_names

BACKENDS = [b for b in ("reference", "cpu", "triton", "cuda") if available_backends()[b].available]
QUESTIONS = [
    "Totally agree with you.",
    "How have you been?",
    "What did she paint last week?",
    "Who adopted a dog?",
    "Where did they travel?",
    "That's great to hear.",
]
ECHO = ["Totally agree with you.", "That's great to hear.", "Hey! Good to hear from you, how have you been?"]


@pytest.fixture(scope="module")
def tied_bank(tmp_path_factory):
    """Two synthetic conversations: their small talk repeats the same lines, so many messages (and the
    chunks and episodes built from them) have identical text; the hashing embedder adds exact ties
    between different texts."""
    data = write_json(generate_conversations(2, seed=12), tmp_path_factory.mktemp("ties") / "synth.json")
    emb = HashingEmbedder(64)
    mems = build_memories(load_locomo(data), emb, XMemoryConfig(), backend="cpu")
    return bank_of(mems), emb


def _texts(bank: Bank) -> list[str]:
    return [str(t) for t in bank.msg["text"]]


def test_the_fixture_has_exact_ties(tied_bank):
    bank, _ = tied_bank
    texts = _texts(bank)
    assert any(texts.count(t) >= 3 for t in ECHO)


@pytest.mark.parametrize("strategy", strategy_names())
@pytest.mark.parametrize("budget", [None, 150, 300])
def test_every_backend_returns_the_same_units(tied_bank, strategy, budget):
    bank, emb = tied_bank
    mids = [bank.memory_ids[q % bank.n_memories] for q in range(len(QUESTIONS))]
    runs = {
        b: Retriever(bank, emb, backend=b).search(QUESTIONS, mids, strategy=strategy, budget_tokens=budget)
        for b in BACKENDS
    }
    base = runs[BACKENDS[0]]
    for b, rs in runs.items():
        for q, (r0, r) in enumerate(zip(base, rs)):
            assert [(u.type, u.id) for u in r.units] == [(u.type, u.id) for u in r0.units], (strategy, b, q)
            assert [u.score for u in r.units] == [u.score for u in r0.units], (strategy, b, q)
            assert r.context == r0.context, (strategy, b, q)


def test_exact_rerank_ignores_kernel_noise_and_candidate_order():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((40, 16)).astype(np.float32)
    x[10:20] = x[0]  # ten identical rows: exact ties
    q = np.stack(
        [x[0] + 0.01 * rng.standard_normal(16).astype(np.float32), rng.standard_normal(16).astype(np.float32)]
    )
    tie = [19, 0, 15, 18, 17, 11, 12, 13, 14, 16, 10]
    rest = [r for r in rng.permutation(40) if r not in tie][:19]
    cand = np.stack([tie + rest, rng.permutation(40)[:30]]).astype(
        np.int32
    )  # distinct rows, as a kernel gives
    cand[1, -3:] = -1
    i1, s1 = exact_rerank(q, x, cand, 12)
    i2, s2 = exact_rerank(q, x, cand[:, ::-1].copy(), 12)  # any order in, the same out
    assert np.array_equal(i1, i2) and np.array_equal(s1, s2)
    tied = i1[0][np.isin(i1[0], [0, *range(10, 20)])]
    assert list(tied) == sorted(tied) and len(tied) == 11  # the tie group in row-id order
    xn = x / np.linalg.norm(x, axis=1, keepdims=True)
    qn = q / np.linalg.norm(q, axis=1, keepdims=True)
    ref = np.einsum("qkd,qd->qk", xn[np.maximum(i1, 0)].astype(np.float64), qn.astype(np.float64))
    assert np.allclose(s1, ref, atol=1e-6)
    assert np.all(np.diff(s1, axis=1) <= 0)
    i3, s3 = exact_rerank(q, x, cand, 40)  # fewer candidates than k: padded
    assert np.all(i3[:, 30:] == -1) and np.all(np.isneginf(s3[:, 30:]))
    assert np.all(i3[1, 27:] == -1)


def test_exact_rerank_chunks_give_the_same_result():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((50, 8)).astype(np.float32)
    x[5] = 0  # a zero row: similarity 0, as the reference
    q = rng.standard_normal((9, 8)).astype(np.float32)
    cand = np.tile(np.arange(50, dtype=np.int32), (9, 1))
    a = exact_rerank(q, x, cand, 7)
    b = exact_rerank(q, x, cand, 7, chunk_bytes=1)  # one query per chunk
    assert np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1])
    z = exact_rerank(q, x, np.full((9, 1), 5, np.int32), 1)
    assert np.all(z[0] == 5) and np.all(z[1] == 0)
    e = exact_rerank(q, x[:0], np.full((9, 2), -1, np.int32), 2)  # a level with no rows (no statements yet)
    assert np.all(e[0] == -1) and np.all(np.isneginf(e[1]))


@pytest.mark.parametrize("seed", range(6))
def test_a_search_of_few_queries_ranks_as_the_kernels(seed, monkeypatch):
    """Up to ``FEW_QUERIES`` host queries take their candidates from BLAS (``_few_queries``) instead
    of the kernel; the result is the kernels' (C++ and reference) on ragged segments with empty ones,
    exact ties (a group of repeated rows larger than the candidates), a zero row and queries of any memory order."""
    from xmemory_gpu.memory.bank import Level
    from xmemory_gpu.memory.segments import Segments
    from xmemory_gpu.retrieve import grouped

    rng = np.random.default_rng(seed)
    lengths = rng.integers(20, 80, size=5)
    lengths[seed % 5] = 0  # an empty memory
    n, d = int(lengths.sum()), 24
    x = rng.standard_normal((n, d)).astype(np.float32)
    x[5:40] = x[3]  # a tie group larger than the candidates fetched: which rows come in decides the result
    x[0] = 0
    level = Level({"x": x}, Segments.from_lengths(lengths.tolist()))
    mems = np.flatnonzero(lengths)
    n_q = int(rng.integers(1, grouped.FEW_QUERIES + 1))
    mem_idx = rng.choice(mems, size=n_q)
    q = rng.standard_normal((n_q, d)).astype(np.float32)
    q[0] = x[3]
    k = int(rng.integers(1, 12))
    few = grouped.search_by_memory(q, mem_idx, level, k, backend="cpu")
    ref = grouped.search_by_memory(q, mem_idx, level, k, backend="reference")
    monkeypatch.setattr(grouped, "FEW_QUERIES", 0)  # the C++ kernel's candidates
    cpu = grouped.search_by_memory(q, mem_idx, level, k, backend="cpu")
    for other in (ref, cpu):
        assert np.array_equal(few[0], other[0]) and np.array_equal(few[1], other[1])


def test_a_search_of_few_queries_refuses_non_finite_queries():
    from xmemory_gpu.memory.bank import Level
    from xmemory_gpu.memory.segments import Segments
    from xmemory_gpu.retrieve.grouped import search_by_memory

    x = np.random.default_rng(0).standard_normal((10, 8)).astype(np.float32)
    level = Level({"x": x}, Segments.from_lengths([10]))
    for bad in (np.nan, np.inf):
        q = np.ones((1, 8), np.float32)
        q[0, 3] = bad
        with pytest.raises(ValueError, match="q: NaN or inf"):
            search_by_memory(q, np.zeros(1, np.int64), level, 3, backend="cpu")


@pytest.mark.parametrize("seed", range(3))
def test_the_top_of_a_few_queries_search_is_a_stable_sorts_top(seed):
    from xmemory_gpu.retrieve.grouped import _top_stable

    rng = np.random.default_rng(seed)
    for trial in range(120):
        q, n = int(rng.integers(1, 4)), int(rng.integers(1, 300))
        s = rng.standard_normal((q, n)).astype(np.float32)
        if trial % 3 == 0:
            s = np.round(s, 1)  # many exact ties
        if trial % 7 == 0:
            s[:, ::5], s[:, 1::9] = 0.0, -0.0
        if trial % 11 == 0:
            s[0, 0] = np.nan
        k = int(rng.integers(0, n + 3))
        want = np.argsort(-s, axis=1, kind="stable")[:, :k]
        got = _top_stable(s, k)
        assert got.shape == want.shape and np.array_equal(got, want), (trial, k, n)
