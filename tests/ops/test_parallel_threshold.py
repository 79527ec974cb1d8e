"""The CPU kernels' thread count follows ``XMEM_PARALLEL_WORK`` (multiply-adds below which a call stays
on one thread), and nothing they return depends on it: lists, centroids and the built memories are the
same with every call threaded and with none."""

from __future__ import annotations

import numpy as np
import pytest

from xmemory_gpu.ops.kmeans import spherical_kmeans
from xmemory_gpu.ops.knn import knn_graph, knn_search
from xmemory_gpu.ops.linear import runs_compiled

from .kmeans_cases import clustered_themes, split_draws

pytestmark = pytest.mark.skipif(not runs_compiled(), reason="the C++ module is not built")

ALWAYS, NEVER = "0", "1e18"


def _unit(rng: np.random.Generator, n: int, d: int = 64) -> np.ndarray:
    x = rng.standard_normal((n, d)).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def _both(monkeypatch, fn):
    out = []
    for work in (ALWAYS, NEVER):
        monkeypatch.setenv("XMEM_PARALLEL_WORK", work)
        out.append(fn())
    return out


def test_knn_lists_do_not_depend_on_the_thread_count(monkeypatch):
    rng = np.random.default_rng(1)
    x, q = _unit(rng, 300), _unit(rng, 120)
    a, b = _both(monkeypatch, lambda: knn_graph(x, [0, 100, 300], 8, backend="cpu"))
    assert np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1])
    a, b = _both(monkeypatch, lambda: knn_search(q, [0, 50, 120], x, [0, 100, 300], 8, backend="cpu"))
    assert np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1])


def test_kmeans_does_not_depend_on_the_thread_count(monkeypatch):
    rng = np.random.default_rng(2)
    x, off = clustered_themes(rng, [120, 30, 200, 60, 90], 64)
    x = x / np.linalg.norm(x, axis=1, keepdims=True)
    seg, kk, first, u = split_draws(x, off, (2, 3), 2, 5)
    a, b = _both(monkeypatch, lambda: spherical_kmeans(x, off, seg, kk, first, u, backend="cpu"))
    for p, q in zip(a, b):
        assert np.array_equal(np.asarray(p), np.asarray(q))
