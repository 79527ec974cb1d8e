"""Ragged columns (valid entries first, ``-1`` after; one long row sets the width of all) read row by
row to about each row's length: the same answers as the whole width gives (the bank's
``ragged_reduce`` and ``ragged_map``; a statement's episodes put in the order of their ids)."""

from __future__ import annotations

import numpy as np

from xmemory_gpu.engine.ids import _in_id_order
from xmemory_gpu.memory.bank import ragged_map, ragged_reduce


def _ragged(rng: np.random.Generator, n: int, w: int, hi: int) -> np.ndarray:
    """[n, w] int32, each row's entries first (lengths mostly short, a few up to w), -1 after."""
    lens = np.minimum(rng.geometric(0.3 if rng.random() < 0.5 else 0.05, n), w)
    a = np.full((n, w), -1, np.int32)
    for i, k in enumerate(lens):
        a[i, :k] = rng.integers(0, hi, k)
    return a


def test_ragged_reduce_and_map_match_the_whole_width():
    rng = np.random.default_rng(2)
    for _ in range(1000):
        n, w, hi = int(rng.integers(0, 50)), int(rng.integers(1, 300)), int(rng.integers(1, 40))
        a = _ragged(rng, n, w, hi)
        assert ragged_reduce(a, lambda b: (b >= 0).sum(axis=1)).tolist() == (a >= 0).sum(axis=1).tolist()
        assert ragged_reduce(a, lambda b: b.max(axis=1)).tolist() == a.max(axis=1, initial=-1).tolist()
        mark = rng.random(hi) < 0.2
        got = ragged_reduce(a, lambda b, m=mark: np.where(b >= 0, m[np.maximum(b, 0)], False).any(axis=1))
        assert (
            got.astype(bool).tolist() == np.where(a >= 0, mark[np.maximum(a, 0)], False).any(axis=1).tolist()
        )
        remap = np.concatenate([rng.permutation(hi), [-1]])  # index -1: padding stays padding
        rows = np.flatnonzero(rng.random(n) < 0.7)
        got = ragged_map(a, lambda b, r=remap: r[b], rows, np.int64)
        assert got.dtype == np.int64 and got.tolist() == np.where(a[rows] >= 0, remap[a[rows]], -1).tolist()


def _whole_width(epis: np.ndarray, epi_id: np.ndarray) -> np.ndarray:
    if not epis.size:
        return epis
    key = np.where(epis >= 0, epi_id[np.maximum(epis, 0)], np.iinfo(np.int64).max)
    todo = np.flatnonzero((key[:, 1:] < key[:, :-1]).any(axis=1))
    out = epis.copy()
    out[todo] = np.take_along_axis(epis[todo], np.argsort(key[todo], axis=1, kind="stable"), axis=1)
    return out


def test_rows_sorted_to_their_length_match_a_sort_over_the_width():
    rng = np.random.default_rng(1)
    for _ in range(2000):
        n, w, n_epi = int(rng.integers(0, 40)), int(rng.integers(1, 90)), int(rng.integers(1, 30))
        lens = np.minimum(rng.geometric(0.3 if rng.random() < 0.5 else 0.05, n), w)
        epis = np.full((n, w), -1, np.int32)
        for i, k in enumerate(lens):
            epis[i, :k] = rng.integers(0, n_epi, k)
        ids = rng.permutation(10 * n_epi)[:n_epi].astype(np.int64)
        got = _in_id_order(epis, ids)
        assert got.tobytes() == _whole_width(epis, ids).tobytes() and got.shape == epis.shape


def test_rows_in_order_are_not_copied():
    epis = np.array([[0, 1, -1], [2, -1, -1]], np.int32)
    assert _in_id_order(epis, np.arange(3, dtype=np.int64)) is epis
    got = _in_id_order(epis, np.array([5, 4, 3], np.int64))
    assert got.tolist() == [[1, 0, -1], [2, -1, -1]] and epis.tolist() == [[0, 1, -1], [2, -1, -1]]
