"""construct.pipeline.summary_picks: each theme's gist statements (nearest the members' float64 sum by
dot4, distinct texts) equal to the rule stated theme by theme, on fresh random inputs: ragged themes,
empty themes, repeated texts and rows (ties), NaN and zero rows, dims below and above dot4's 32-wide
blocks, small memories (the whole gram scored) and large ones (each member against its theme's sum)."""

from __future__ import annotations

import numpy as np
import pytest

from xmemory_gpu.construct import finalize, pipeline
from xmemory_gpu.ops.rows import dot4_gram


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


def _picks_theme_by_theme(texts, x, theme_of, n_themes):
    """The rule stated theme by theme: its members in row order added one by one, each scored by dot4
    against the sum, the first by (score descending, NaN last; row) whose text differs from those picked."""
    offsets, rows = [0], []
    for r in range(n_themes):
        mem = np.flatnonzero(theme_of == r)
        picked: list[int] = []
        if len(mem):
            s = np.zeros(x.shape[1])
            for i in mem:
                s = s + x[i]
            score = dot4_gram(x[mem], s[None, :])[:, 0]
            for i in np.lexsort((np.arange(len(mem)), -score)):
                if all(texts[int(mem[i])] != texts[j] for j in picked):
                    picked.append(int(mem[i]))
                if len(picked) == pipeline.SUMMARY_STATEMENTS:
                    break
        rows += sorted(picked)
        offsets.append(len(rows))
    return offsets, rows


@pytest.mark.parametrize("gram_max", [finalize._GRAM_MAX, 0])
@pytest.mark.parametrize("seed", range(6))
def test_picks_are_the_rule_theme_by_theme(seed, gram_max, monkeypatch):
    monkeypatch.setattr(finalize, "_GRAM_MAX", gram_max)
    rng = np.random.default_rng(seed)
    for _ in range(30):
        d = int(rng.choice([1, 2, 7, 31, 32, 33, 64, 384]))
        k = int(rng.integers(1, 12))
        n = int(rng.integers(0, 80))
        texts, x, theme_of = _case(rng, n, d, k)
        k_all = k + int(rng.integers(0, 3))  # themes past the last row's: empty
        off, rows = pipeline.summary_picks(texts, x, theme_of, k_all)
        assert off.dtype == rows.dtype == np.int64
        assert (off.tolist(), rows.tolist()) == _picks_theme_by_theme(texts, x, theme_of, k_all)


def test_one_theme_is_theme_summary():
    rng = np.random.default_rng(3)
    texts, x, _ = _case(rng, 40, 384, 1)
    off, rows = pipeline.summary_picks(texts, x, np.zeros(40, np.int32), 1)
    assert pipeline.gist([texts[i] for i in rows[off[0] : off[1]]]) == pipeline.theme_summary(texts, x)


def test_texts_compared_as_python_does():
    """Distinct means ``!=`` asked of the texts themselves, even when two are one object (a NaN is
    not equal to itself), and an error from it propagates."""
    x = np.random.default_rng(0).standard_normal((3, 8)).astype(np.float32)
    nan = float("nan")
    theme_of = np.zeros(3, np.int32)
    off, rows = pipeline.summary_picks([nan] * 3, x, theme_of, 1)
    assert (off.tolist(), rows.tolist()) == _picks_theme_by_theme([nan] * 3, x, theme_of, 1) and len(
        rows
    ) == 2

    class Refuses:
        def __ne__(self, other):
            raise RuntimeError("no comparing")

    r = Refuses()
    with pytest.raises(RuntimeError, match="no comparing"):
        pipeline.summary_picks([r, r, r], x, theme_of, 1)
