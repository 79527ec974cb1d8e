"""construct.pipeline.summary_picks from the compiled module (csrc/cpu/rows.cpp): each theme's gist
statements (nearest the members' float64 sum by dot4, distinct texts) equal to the per-theme
reference on fresh random inputs: ragged themes, empty themes, repeated texts and rows (ties), NaN
and zero rows, dims below and above dot4's 32-wide blocks; and the built memories' summaries."""

from __future__ import annotations

import numpy as np
import pytest

from xmemory_gpu.construct import pipeline
from xmemory_gpu.ops import available_backends

pytestmark = pytest.mark.skipif(
    not available_backends()["cpu"].available, reason="the C++ module is not built"
)


def _case(rng: np.random.Generator, n: int, d: int, k: int):
    x = rng.standard_normal((n, d)).astype(np.float32)
    if n and rng.random() < 0.5:  # repeated rows: exact ties
        x[rng.integers(0, n, n // 3)] = x[rng.integers(0, n)]
    if n and rng.random() < 0.2:
        x[rng.integers(0, n)] = np.nan
    if n and rng.random() < 0.2:
        x[rng.integers(0, n)] = 0.0
    theme_of = rng.integers(0, k, n).astype(np.int32) if k else np.zeros(0, np.int32)
    vocab = [f"statement {i}" for i in range(max(1, n // 4))]
    texts = [str(rng.choice(vocab)) for _ in range(n)]  # repeated texts: the distinct rule
    return texts, x, theme_of


@pytest.mark.parametrize("seed", range(10))
def test_native_picks_are_the_reference(seed):
    rng = np.random.default_rng(seed)
    for _ in range(30):
        d = int(rng.choice([1, 2, 7, 31, 32, 33, 64, 384]))
        k = int(rng.integers(1, 12))
        n = int(rng.integers(0, 80)) if k else 0
        texts, x, theme_of = _case(rng, n, d, k)
        k_all = k + int(rng.integers(0, 3))  # themes past the last row's: empty
        want = pipeline.summary_picks_reference(texts, x, theme_of, k_all)
        got = pipeline.summary_picks(texts, x, theme_of, k_all)
        np.testing.assert_array_equal(got[0], want[0])
        np.testing.assert_array_equal(got[1], want[1])


def test_one_theme_is_theme_summary():
    rng = np.random.default_rng(3)
    texts, x, _ = _case(rng, 40, 384, 1)
    off, rows = pipeline.summary_picks(texts, x, np.zeros(40, np.int32), 1)
    assert pipeline.gist([texts[i] for i in rows[off[0] : off[1]]]) == pipeline.theme_summary(texts, x)


def test_bad_input_is_refused():
    from xmemory_gpu import _C

    x = np.zeros((3, 4), np.float32)
    with pytest.raises(ValueError, match="theme row outside"):
        _C.summary_picks(x, np.array([0, 1, 5], np.int32), 2, ["a", "b", "c"], 2)
    with pytest.raises(ValueError, match="texts"):
        _C.summary_picks(x, np.zeros(3, np.int32), 1, ["a"], 2)
    with pytest.raises(
        ValueError, match="d >= 2"
    ):  # NumPy sums one column pairwise: the wrapper keeps it on the reference
        _C.summary_picks(np.zeros((3, 1), np.float32), np.zeros(3, np.int32), 1, ["a", "b", "c"], 2)


def test_texts_compared_as_python_does():
    """Distinct means ``!=`` asked of the texts themselves, even when two are one object (a NaN is
    not equal to itself), and an error from it propagates."""
    x = np.random.default_rng(0).standard_normal((3, 8)).astype(np.float32)
    nan = float("nan")
    theme_of = np.zeros(3, np.int32)
    assert [a.tolist() for a in pipeline.summary_picks([nan] * 3, x, theme_of, 1)] == [
        a.tolist() for a in pipeline.summary_picks_reference([nan] * 3, x, theme_of, 1)
    ]

    class Refuses:
        def __ne__(self, other):
            raise RuntimeError("no comparing")

    r = Refuses()
    with pytest.raises(RuntimeError, match="no comparing"):
        pipeline.summary_picks([r, r, r], x, theme_of, 1)


def test_built_summaries_are_the_reference(monkeypatch):
    """A small bulk build: every theme's summary the same with the C++ picks and with the reference."""
    from pathlib import Path

    from xmemory_gpu.construct.pipeline import build_slices
    from xmemory_gpu.datasets.locomo import conversations_of
    from xmemory_gpu.datasets.synthetic import generate_conversations
    from xmemory_gpu.embed import load_embedder

    convs = list(conversations_of(Path("synthetic.json"), generate_conversations(6, seed=2)))
    emb = load_embedder("hashing:384")
    fast = [m.cols["theme"]["summary"].tolist() for m in build_slices(convs, emb)]
    monkeypatch.setattr(pipeline, "summary_picks", pipeline.summary_picks_reference)
    ref = [m.cols["theme"]["summary"].tolist() for m in build_slices(convs, emb)]
    assert fast == ref and sum(len(s) for s in fast) > 20
