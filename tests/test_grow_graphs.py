"""A grown memory's semantic kNN graph costs its new rows only (``incremental.semantic_graphs``): the
old lists merged with the new rows that beat them give, list for list and bit for bit, the graph
``knn_graph`` builds for the whole memory; after a forget (``forget.kept_lists``) only the lists that
held a removed row are searched again, with the same result; a memory whose lists were all emptied is
built whole."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from xmemory_gpu.construct.forget import kept_lists
from xmemory_gpu.construct.incremental import semantic_graphs, to_repair
from xmemory_gpu.ops.knn import knn_graph


def _memory(x_old: np.ndarray, k: int, drop: bool, backend: str, emptied: bool = False):
    n = len(x_old)
    if emptied:
        idx, sim = np.full((n, k), -1, np.int32), np.full((n, k), -np.inf, np.float32)
    else:
        idx, sim = knn_graph(x_old, np.array([0, n]), k, drop_nonpositive=drop, backend=backend)
    return SimpleNamespace(semantics=[None] * n, sem_knn_idx=idx, sem_knn_sim=sim)


@pytest.mark.parametrize("backend", ["cpu", "reference"])
@pytest.mark.parametrize("seed", range(12))
def test_grown_graphs_equal_whole_graphs(backend, seed):
    rng = np.random.default_rng(seed)
    k, d, drop = int(rng.integers(1, 11)), int(rng.choice([8, 64])), bool(seed % 2)
    mems, parts = [], []
    for b in range(int(rng.integers(1, 5))):
        n_old, n_new = int(rng.integers(0, 40)), int(rng.integers(0, 6))
        x = rng.standard_normal((n_old + n_new, d)).astype(np.float32)
        if seed % 3 == 0 and n_old > 2 and n_new:  # copies of old rows: ties to the lower row
            x[n_old:] = x[rng.integers(0, n_old, n_new)]
        mems.append(_memory(x[:n_old], k, drop, backend, emptied=(b == 1 and n_old > 1)))
        parts.append(x)
    offs = np.concatenate([[0], np.cumsum([len(p) for p in parts])]).astype(np.int64)
    all_x = np.concatenate(parts) if offs[-1] else np.zeros((0, d), np.float32)
    idx, sim = semantic_graphs(mems, all_x, offs, k, drop, backend)
    if offs[-1]:
        want_i, want_s = knn_graph(all_x, offs, k, drop_nonpositive=drop, backend=backend)
    else:
        want_i, want_s = np.zeros((0, k), np.int32), np.zeros((0, k), np.float32)
    np.testing.assert_array_equal(idx, want_i)
    np.testing.assert_array_equal(sim.view(np.int32), want_s.view(np.int32))


@pytest.mark.parametrize("backend", ["cpu", "reference"])
@pytest.mark.parametrize("seed", range(12))
def test_after_a_forget_the_lists_that_held_a_removed_row_are_searched_again(backend, seed):
    rng = np.random.default_rng(100 + seed)
    k, d, drop = int(rng.integers(1, 9)), int(rng.choice([8, 64])), bool(seed % 2)
    mems, parts, marked = [], [], 0
    for _ in range(int(rng.integers(1, 4))):
        n, n_new = int(rng.integers(2, 40)), int(rng.integers(0, 5))
        x = rng.standard_normal((n + n_new, d)).astype(np.float32)
        if seed % 3 == 0:  # copies: ties to the lower row
            x[n // 2 : n] = x[: n - n // 2]
        idx, sim = knn_graph(x[:n], np.array([0, n]), k, drop_nonpositive=drop, backend=backend)
        gone = rng.random(n) < 0.2
        ki, ks = kept_lists(idx, sim, gone)
        marked += int(to_repair(ks).sum())
        mems.append(SimpleNamespace(semantics=[None] * int((~gone).sum()), sem_knn_idx=ki, sem_knn_sim=ks))
        parts.append(np.concatenate([x[:n][~gone], x[n:]]))
    offs = np.concatenate([[0], np.cumsum([len(p) for p in parts])]).astype(np.int64)
    all_x = np.concatenate(parts)
    idx, sim = semantic_graphs(mems, all_x, offs, k, drop, backend)
    want_i, want_s = knn_graph(all_x, offs, k, drop_nonpositive=drop, backend=backend)
    np.testing.assert_array_equal(idx, want_i)
    np.testing.assert_array_equal(sim.view(np.int32), want_s.view(np.int32))


def test_kept_lists_renumber_and_mark_the_lists_that_held_a_gone_row():
    idx = np.array([[1, 2], [0, 2], [0, 1], [2, -1]], np.int32)
    sim = np.array([[0.9, 0.5], [0.9, 0.4], [0.5, 0.4], [0.3, -np.inf]], np.float32)
    ki, ks = kept_lists(idx, sim, np.array([False, True, False, False]))
    np.testing.assert_array_equal(ki, [[-1, -1], [-1, -1], [1, -1]])
    assert to_repair(ks).tolist() == [True, True, False]
    np.testing.assert_array_equal(ks[2], np.array([0.3, -np.inf], np.float32))


@pytest.mark.parametrize("share", [0.25, 1.0])
@pytest.mark.parametrize("drop", [False, True])
@pytest.mark.parametrize("seed", range(10))
def test_theme_graph_upkeep_equals_whole_build(seed, drop, share, monkeypatch):
    """The theme graph kept up to date across attaches, splits and merges (``sync_graphs`` on a synced
    state) is, list for list and bit for bit, the graph built whole from the same centroids (share
    1.0: upkeep however much changed)."""
    import copy

    from xmemory_gpu.config import ThemeConfig
    from xmemory_gpu.construct import theme_state
    from xmemory_gpu.construct.theme_state import ThemeState, sync_graphs

    monkeypatch.setattr(theme_state, "UPKEEP_SHARE", share)
    monkeypatch.setattr(theme_state, "UPKEEP_MIN", 0)  # these memories are small: upkeep them anyway

    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((12, 16))
    x = (centres[rng.integers(0, 12, 400)] + 0.6 * rng.standard_normal((400, 16))).astype(np.float32)
    if seed % 3 == 0:
        x[200:260] = x[rng.integers(0, 200, 60)]  # copies: equal centroids, ties to the earlier opened
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    st = ThemeState(x, int(rng.integers(1, 8)), drop)
    cfg = ThemeConfig()
    at = 0
    while at < len(x):
        n = int(rng.integers(1, 30))
        st.attach(np.arange(at, min(at + n, len(x))), cfg)
        at += n
        live = st.live_ids()
        if rng.random() < 0.4 and live:
            t = live[int(rng.integers(0, len(live)))]
            m = st.members(t)
            if len(m) >= 2:
                st.split(t, [m[: len(m) // 2], m[len(m) // 2 :]])
        live = st.live_ids()
        if rng.random() < 0.4 and len(live) >= 2:
            a, b = rng.choice(len(live), 2, replace=False)
            st.merge(live[int(a)], live[int(b)])
        sync_graphs([st])
        whole = copy.copy(st)
        whole.graph_x, whole.graph_stale = None, True
        sync_graphs([whole])
        np.testing.assert_array_equal(st.graph_slots, whole.graph_slots)
        np.testing.assert_array_equal(st.graph_idx, whole.graph_idx)
        np.testing.assert_array_equal(st.graph_sim.view(np.int32), whole.graph_sim.view(np.int32))


def test_restored_theme_graph_is_the_whole_graph_of_the_restored_centroids():
    """A grown memory's stored theme graph is the graph of the centroids ``ThemeState.restore`` gives
    it back (members summed in ascending order, as construction sums them): so growth may keep it."""
    import copy

    from xmemory_gpu.config import XMemoryConfig
    from xmemory_gpu.construct.incremental import empty_memory, grow
    from xmemory_gpu.construct.theme_state import ThemeState, sync_graphs
    from xmemory_gpu.datasets.synthetic import generate_conversations
    from xmemory_gpu.embed import load_embedder
    from xmemory_gpu.memory.hierarchy import memory_from_slice
    from xmemory_gpu.memory.records import Message

    emb, cfg = load_embedder("hashing:384"), XMemoryConfig()
    conv = generate_conversations(1, seed=5, sessions=(8, 10))[0]
    msgs = [
        Message(str(i), t["speaker"], t["text"], int(k.split("_")[1]), None)
        for i, (k, t) in enumerate(
            (k, t)
            for k in sorted(
                (k for k in conv["conversation"] if k.startswith("session_") and not k.endswith("date_time")),
                key=lambda s: int(s.split("_")[1]),
            )
            for t in conv["conversation"][k]
        )
    ]
    mem = empty_memory("m", emb.dim, cfg.knn.k_semantics)
    for a in range(0, len(msgs), 9):
        mem = memory_from_slice(grow([mem], [msgs[a : a + 9]], emb, cfg)[0])
        st = ThemeState.restore(
            mem.sem_x,
            len(mem.semantics),
            [t.id for t in mem.themes],
            mem.theme_of,
            {},
            0,
            cfg.knn.k_themes,
            cfg.knn.drop_nonpositive,
        )
        whole = copy.copy(st)
        sync_graphs([whole])
        np.testing.assert_array_equal(whole.graph_idx, mem.theme_knn_idx)
        np.testing.assert_array_equal(whole.graph_sim.view(np.int32), mem.theme_knn_sim.view(np.int32))
    assert len(mem.themes) >= 3 and any(t.parents for t in mem.themes)
