"""Incremental de-duplication in blocks (``construct.incremental.match_duplicates``): the same
decisions as the dense rule it replaced (one ``new x new`` and one ``new x old`` matrix per call), with
memory bounded by the block size."""

from __future__ import annotations

import tracemalloc
from types import SimpleNamespace

import numpy as np
import pytest

from xmemory_gpu.construct import incremental
from xmemory_gpu.construct.incremental import _dedup_into, match_duplicates
from xmemory_gpu.memory.records import SemanticNode
from xmemory_gpu.ops import available_backends

NATIVE = available_backends()["cpu"].available


def _dense_dedup(mem, raw, raw_x, threshold):
    """The rule as it was before blocking (dense similarity matrices), kept as the reference; its
    cosines are exact (float64 products summed left to right), so identical rows tie exactly on any CPU."""
    semantics = [
        SemanticNode(s.id, s.text, list(s.episode_ids), list(s.message_ids), s.timestamp)
        for s in mem.semantics
    ]
    new_rows: list[int] = []
    old_sims, new_sims = _exact(raw_x, mem.sem_x), _exact(raw_x, raw_x)
    for i, node in enumerate(raw):
        cand = np.concatenate([old_sims[i], new_sims[i, new_rows]]) if new_rows else old_sims[i]
        if cand.size:
            j = int(np.argmax(cand))
            if cand[j] > threshold:
                target = semantics[j]
                target.message_ids = list(dict.fromkeys(target.message_ids + node.message_ids))
                continue
        new_rows.append(i)
        semantics.append(
            SemanticNode(
                len(semantics), node.text, list(node.episode_ids), list(node.message_ids), node.timestamp
            )
        )
    sem_x = np.concatenate([mem.sem_x, raw_x[new_rows]]) if new_rows else mem.sem_x
    return semantics, sem_x.astype(np.float32), len(new_rows)


def _exact(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """[len(a), len(b)] dot products, each a left-to-right float64 sum of exact products."""
    if not len(a) or not len(b):
        return np.zeros((len(a), len(b)))
    return np.cumsum(a[:, None, :].astype(np.float64) * b[None, :, :].astype(np.float64), axis=2)[..., -1]


def _unit(x: np.ndarray) -> np.ndarray:
    return (x / np.linalg.norm(x, axis=-1, keepdims=True)).astype(np.float32)


def _nodes(n: int, prefix: str) -> list[SemanticNode]:
    return [SemanticNode(i, f"{prefix}{i}", [0], [f"{prefix}m{i}"], None) for i in range(n)]


def _planted(
    rng: np.random.Generator, d: int = 16, n_old: int = 40, n_new: int = 90
) -> tuple[np.ndarray, np.ndarray]:
    """Old rows (with exact copies among them) and new rows that repeat old and earlier new rows
    exactly (ties between identical candidates), nearly (cosine just above or below 0.92), or not."""
    old = _unit(rng.standard_normal((n_old, d)))
    old[5] = old[2]  # identical old nodes: a new copy of them ties, and the first must win
    old[30] = old[2]
    new = _unit(rng.standard_normal((n_new, d)))
    for i in range(n_new):
        kind = rng.integers(6)
        src = old if kind < 3 or i == 0 else new[:i]
        j = int(rng.integers(len(src)))
        if kind in (0, 3):
            new[i] = src[j]
        elif kind in (1, 4):
            noise = _unit(rng.standard_normal(d))
            new[i] = _unit(src[j] + rng.uniform(0.2, 0.6) * noise)  # cosine spread around the threshold
    new[[10, 50, 89]] = old[2]
    return old, new


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("block", [1, 3, 7, 64])
def test_blocked_dedup_decides_as_the_dense_rule(seed, block, monkeypatch):
    rng = np.random.default_rng(seed)
    old, new = _planted(rng)
    mem = SimpleNamespace(semantics=_nodes(len(old), "o"), sem_x=old)
    raw = _nodes(len(new), "n")
    want = _dense_dedup(mem, raw, new, 0.92)
    monkeypatch.setattr(incremental, "DEDUP_BLOCK", block)
    target = match_duplicates(old, new, 0.92, block=block)
    assert 0 < (target >= 0).sum() < len(new)  # the planted data has both merges and new nodes
    copies = [i for i in range(len(new)) if (new[i] == old[2]).all()]
    assert copies and (target[copies] == 2).all()  # three identical old nodes: the first wins
    got = _dedup_into(mem, raw, new, 0.92)
    assert [(s.id, s.text, s.message_ids) for s in got[0]] == [(s.id, s.text, s.message_ids) for s in want[0]]
    assert got[1].tobytes() == want[1].tobytes() and got[2] == want[2]


@pytest.mark.parametrize("block", [1, 2, 3, 512])
def test_exact_ties_go_to_the_first_candidate_across_blocks(block):
    e = np.eye(4, dtype=np.float32)
    mid = _unit(np.array([[1, 1, 0, 0], [0, 0, 1, 1], [1, 0, 1, 0]], np.float32))
    # old: e0, e1; new: e2, e3 (kept), then rows halfway between two candidates (cosine 0.707 to each)
    old, new = e[:2], np.concatenate([e[2:], mid])
    target = match_duplicates(old, new, 0.5, block=block)
    assert target.tolist() == [
        -1,
        -1,
        0,
        2,
        0,
    ]  # old e0 before old e1; new e2 before new e3; old e0 before new e2
    mem = SimpleNamespace(semantics=_nodes(2, "o"), sem_x=old)
    raw = _nodes(len(new), "n")
    want, got = _dense_dedup(mem, raw, new, 0.5), _dedup_into(mem, raw, new, 0.5)
    assert [s.message_ids for s in got[0]] == [s.message_ids for s in want[0]]


def test_no_old_nodes_and_no_new_statements():
    x = _unit(np.random.default_rng(0).standard_normal((5, 8)))
    assert match_duplicates(x[:0], x, 0.92, block=2).tolist() == [-1] * 5
    assert match_duplicates(x, x[:0], 0.92).tolist() == []
    mem = SimpleNamespace(semantics=_nodes(5, "o"), sem_x=x)
    nodes, sem_x, n_new = _dedup_into(mem, [], np.zeros((0, 8), np.float32), 0.92)
    assert len(nodes) == 5 and n_new == 0 and sem_x.shape == (5, 8)


def test_memory_stays_bounded_by_the_block(monkeypatch):
    """4,000 new against 2,000 old statements: the dense rule's matrices alone were 96 MB; the
    blocked rule's peak (the nodes and their rows included) stays far below."""
    rng = np.random.default_rng(1)
    d, n_old, n_new = 32, 2000, 4000
    old = _unit(rng.standard_normal((n_old, d)))
    new = _unit(rng.standard_normal((n_new, d)))
    new[1::50] = old[: len(new[1::50])]  # some duplicates of old nodes
    new[7::50] = new[3::50][: len(new[7::50])]  # and of earlier new statements
    mem = SimpleNamespace(semantics=_nodes(n_old, "o"), sem_x=old)
    raw = _nodes(n_new, "n")
    monkeypatch.setattr(incremental, "DEDUP_BLOCK", 256)
    tracemalloc.start()
    try:
        nodes, sem_x, n_kept = _dedup_into(mem, raw, new, 0.92)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert n_kept == n_new - len(new[1::50]) - len(new[7::50]) and len(nodes) == len(sem_x) == n_old + n_kept
    assert nodes[0].message_ids == ["om0", "nm1"] and nodes[n_old + 2].message_ids == ["nm3", "nm7"]
    assert peak < 8 * 2**20 < 4 * n_new * (n_new + n_old) // 8, peak


@pytest.mark.parametrize("n, d", [(37, 16), (130, 384), (515, 64)])
def test_identical_columns_tie_exactly_wherever_they_sit(n, d):
    """A BLAS product may score two identical columns a bit apart (its edge tiles add in another
    order, as on AMD's AVX2 kernels); the rule re-scores the best candidates exactly, so the first
    identical column wins at any position and size."""
    from xmemory_gpu.ops.dedup import exact_cosines, first_best

    rng = np.random.default_rng(n)
    cols = _unit(rng.standard_normal((n, d)))
    pos = sorted(rng.choice(n, 6, replace=False).tolist())
    cols[pos] = cols[pos[0]]
    rows = _unit(np.concatenate([cols[pos[:1]], cols[pos[:1]] + 0.01 * rng.standard_normal((4, d))]))
    best, arg = first_best(rows @ cols.T, rows, cols)
    assert (arg == pos[0]).all()
    assert len(set(exact_cosines(np.repeat(rows[:1], 6, 0), cols[pos]).tolist())) == 1
    assert best[0] == exact_cosines(rows[:1], cols[pos[:1]])[0]


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("block", [3, 64, 512])
@pytest.mark.parametrize("threshold", [0.5, 0.92, 0.99])
def test_the_native_block_rule_decides_as_the_python_loop(seed, block, threshold):
    """``csrc/cpu/dedup.cpp`` against ``ops.dedup``'s reference (the loop it replaces) on planted
    copies, near copies around the threshold and identical candidates, old rows or none."""
    if not NATIVE:
        pytest.skip("the compiled module is not built")
    rng = np.random.default_rng(seed)
    old, new = _planted(
        rng, d=int(rng.choice([3, 16, 37])), n_old=int(rng.integers(31, 60)), n_new=int(rng.integers(90, 160))
    )
    for prior in (old, old[:0]):
        want = match_duplicates(prior, new, threshold, block=block, backend="reference")
        got = match_duplicates(prior, new, threshold, block=block, backend="cpu")
        assert got.tolist() == want.tolist()


@pytest.mark.parametrize("backend", ["cpu", "reference"])
def test_a_cosine_exactly_at_the_threshold_does_not_merge(backend):
    """Merging takes a cosine above the threshold: at the exact cosine of a pair, no merge; one float
    below it, a merge (both paths; the exact cosine is the left-to-right sum of exact products)."""
    if backend == "cpu" and not NATIVE:
        pytest.skip("the compiled module is not built")
    rng = np.random.default_rng(3)
    u = _unit(rng.standard_normal((1, 24)))
    v = _unit(u + 0.05 * _unit(rng.standard_normal((1, 24))))
    x = np.concatenate([u, v])
    c = float(_exact(v, u)[0, 0])
    assert match_duplicates(x[:0], x, c, backend=backend).tolist() == [-1, -1]
    assert match_duplicates(x[:0], x, float(np.nextafter(c, -np.inf)), backend=backend).tolist() == [-1, 0]


@pytest.mark.parametrize("seed", range(6))
def test_the_native_block_rule_keeps_the_loops_nan_and_float32_semantics(seed):
    """Rows the rule does not expect still decide as the Python loop: NaN rows (NumPy's max is NaN:
    no screen), rows far from unit norm (the screen meets a threshold that is a Python float in
    float32, NEP 50, and the float64 best in float64), infinities, zero rows, odd thresholds."""
    if not NATIVE:
        pytest.skip("the compiled module is not built")
    rng = np.random.default_rng(seed)
    old, new = _planted(rng, d=int(rng.choice([2, 8, 33])), n_new=120)
    x = np.concatenate([old, new])
    x[rng.integers(0, len(x), 3)] = np.nan
    x[rng.integers(0, len(x), 2)] = 0.0
    x[rng.integers(0, len(x)), 0] = np.inf
    x *= rng.choice([1.0, 40.0], size=(len(x), 1)).astype(np.float32)
    old, new = x[: len(old)], x[len(old) :]
    with np.errstate(all="ignore"):
        for threshold in (0.92, 1.0, 0.5, 1500.0, -np.inf, np.nan):
            for block in (3, 64):
                for prior in (old, old[:0]):
                    want = match_duplicates(prior, new, threshold, block=block, backend="reference")
                    assert match_duplicates(prior, new, threshold, block=block).tolist() == want.tolist()
