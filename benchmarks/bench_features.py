"""The hashing embedder's word-feature counts (``ops.features.feature_counts``): ours in C++ against
the Python reference (the rule as first written, buckets remembered) and scikit-learn's
``HashingVectorizer`` (unigrams and bigrams, signed MurmurHash3 buckets, a sparse matrix: the library
that does this job, though not our hash, so not our counts), on 3,435 chat messages (the LoCoMo dev
split's when ``XMEM_LOCOMO`` names its file, else synthetic
chats of the same count). Buckets are remembered after the first call in every implementation.
Run: ``python -m pytest benchmarks/bench_features.py --benchmark-columns=min,median,rounds``; repeat
the run to interleave; compare medians."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from xmemory_gpu.ops import available_backends
from xmemory_gpu.ops.features import feature_counts

DIM = 384
N_TEXTS = 3435


@pytest.fixture(scope="module")
def texts() -> list[str]:
    path = Path(os.environ.get("XMEM_LOCOMO", ""))
    if os.environ.get("XMEM_LOCOMO") and path.exists():
        from xmemory_gpu.datasets.locomo import load_locomo

        out = [m.text for c in load_locomo(path) for m in c.messages]
    else:
        from xmemory_gpu.datasets.synthetic import generate_conversations

        out = [
            t["text"]
            for c in generate_conversations(200, seed=0)
            for k, v in c["conversation"].items()
            if k.startswith("session_") and isinstance(v, list)
            for t in v
        ]
    print(
        f"\n{len(out[:N_TEXTS])} texts, {sum(map(len, out[:N_TEXTS])) / max(len(out[:N_TEXTS]), 1):.0f} characters each"
    )
    return out[:N_TEXTS]


@pytest.mark.parametrize("impl", ["ours", "reference", "sklearn"])
def test_feature_counts(benchmark, texts, impl):
    if impl == "ours":
        if not available_backends()["cpu"].available:
            pytest.skip("the C++ module is not built")
        run = lambda: feature_counts(texts, DIM, backend="cpu")  # noqa: E731
    elif impl == "reference":
        run = lambda: feature_counts(texts, DIM, backend="reference")  # noqa: E731
    else:
        text = pytest.importorskip("sklearn.feature_extraction.text")
        vec = text.HashingVectorizer(
            n_features=DIM,
            ngram_range=(1, 2),
            alternate_sign=True,
            norm=None,
            token_pattern=r"[A-Za-z0-9][A-Za-z0-9'\-]*",
        )
        run = lambda: vec.transform(texts)  # noqa: E731
    run()  # buckets remembered, as in a build
    benchmark(run)
    benchmark.extra_info["us_per_text"] = round(benchmark.stats["median"] / len(texts) * 1e6, 2)
