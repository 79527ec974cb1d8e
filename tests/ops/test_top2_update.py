"""``top2_update`` (the partition state's top-2 kept across edits) against ``top2_blocks`` (every pair
again): bit for bit, on random blocks with tied centroids and on random sequences of splits, merges,
moves and appended nodes applied to a ``PartitionState``."""

from __future__ import annotations

import numpy as np
import pytest

from xmemory_gpu.ops import available_backends
from xmemory_gpu.ops.objective import PartitionState
from xmemory_gpu.ops.objective.state import top2_blocks, top2_update
from xmemory_gpu.ops.rows import dot4_gram, unit_rows

BACKENDS = ["reference"] + (["cpu"] if available_backends()["cpu"].available else [])


def _tied_rows(rng: np.random.Generator, n: int, d: int) -> np.ndarray:
    """n rows drawn from a few distinct directions (exact ties between centroids), some zero."""
    pool = rng.standard_normal((max(2, n // 3), d))
    x = pool[rng.integers(0, len(pool), n)]
    x[rng.random(n) < 0.05] = 0.0
    return x


def _same(a: tuple[np.ndarray, np.ndarray], b: tuple[np.ndarray, np.ndarray]) -> None:
    np.testing.assert_array_equal(a[0], b[0])
    assert np.asarray(a[1]).tobytes() == np.asarray(b[1]).tobytes()


def _kept_pairs(unit: np.ndarray, off: np.ndarray, fresh: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each kept row's top-2 among the kept rows of its block (local rows of the whole block)."""
    prev_idx = np.full((len(unit), 2), -1, np.int64)
    prev_cos = np.full((len(unit), 2), -np.inf)
    for b in range(len(off) - 1):
        keep = np.flatnonzero(~fresh[off[b] : off[b + 1]])
        ti, tc = top2_blocks(unit[off[b] + keep], np.array([0, len(keep)]), backend="reference")
        prev_idx[off[b] + keep] = np.where(ti >= 0, keep[np.maximum(ti, 0)], -1)
        prev_cos[off[b] + keep] = tc
    return prev_idx, prev_cos


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("seed", range(6))
def test_update_from_kept_pairs_is_the_whole_recomputation(backend, seed):
    rng = np.random.default_rng(seed)
    sizes = rng.integers(0, 24, 7)
    off = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    unit = unit_rows(_tied_rows(rng, int(off[-1]), 9), backend="reference")
    want = top2_blocks(unit, off, backend="reference")
    for share in (0.0, 0.1, 0.3, 0.6, 1.0):
        fresh = rng.random(len(unit)) < share
        prev_idx, prev_cos = _kept_pairs(unit, off, fresh)
        _same(top2_update(unit, off, fresh, prev_idx, prev_cos, backend=backend), want)


@pytest.mark.parametrize("seed", range(3))
def test_update_backends_agree_on_any_kept_pairs(seed):
    """Kept pairs that are not the top-2 (the caller's promise broken) still give one answer."""
    if "cpu" not in BACKENDS:
        pytest.skip("the C++ module is not built")
    rng = np.random.default_rng(seed)
    off = np.array([0, 2, 9, 9, 30], np.int64)
    unit = unit_rows(_tied_rows(rng, 30, 5), backend="reference")
    fresh = rng.random(30) < 0.2
    k = np.repeat(np.diff(off), np.diff(off))
    prev_idx = np.minimum(rng.integers(-1, 30, (30, 2)), k[:, None] - 1)
    prev_cos = rng.uniform(-1, 1, (30, 2))
    prev_cos[rng.random((30, 2)) < 0.05] = np.nan
    _same(
        top2_update(unit, off, fresh, prev_idx, prev_cos, backend="cpu"),
        top2_update(unit, off, fresh, prev_idx, prev_cos, backend="reference"),
    )


def _full_top2(st: PartitionState) -> tuple[np.ndarray, np.ndarray]:
    """The state's top-2 recomputed from its sums, as global theme rows."""
    ti, tc = top2_blocks(unit_rows(st.theme_sum), st.theme_offsets, backend="reference")
    start = np.repeat(st.theme_offsets[:-1], np.diff(st.theme_offsets))[:, None]
    return np.where(ti >= 0, ti + start, -1), tc


def _random_edit(rng: np.random.Generator, st: PartitionState, fresh_label: list[int]):
    """One split, merge or move of a random memory with themes (None when there is none to edit)."""
    live = np.flatnonzero(np.diff(st.theme_offsets) > 0)
    if not live.size:
        return None
    b = int(rng.choice(live))
    t0, t1 = int(st.theme_offsets[b]), int(st.theme_offsets[b + 1])
    kind = rng.integers(0, 3)
    if kind == 0 or t1 - t0 < 2:  # split one theme in two (or relabel it whole)
        r = int(rng.integers(t0, t1))
        m = st.members_of(r)
        cut = rng.random(len(m)) < 0.5
        groups = [g for g in (m[cut], m[~cut]) if g.size] or [m]
        remove = [int(st.theme_label[r])]
    else:
        r1, r2 = (int(v) for v in rng.choice(np.arange(t0, t1), 2, replace=False))
        m = np.concatenate([st.members_of(r1), st.members_of(r2)])
        remove = [int(st.theme_label[r1]), int(st.theme_label[r2])]
        if kind == 1:  # merge
            groups = [m]
        else:  # move: the two themes' members dealt again into two
            cut = rng.random(len(m)) < 0.5
            groups = [g for g in (m[cut], m[~cut]) if g.size]
    new = []
    for _ in groups:
        fresh_label[0] += 1
        new.append(fresh_label[0])
    return b, remove, groups, new


@pytest.mark.parametrize("n_mem", [1, 4])
@pytest.mark.parametrize("seed", range(8))
def test_edit_sequences_keep_the_whole_recomputation(seed, n_mem):
    """Random rounds of edits (one per memory and call, several memories) and appended nodes (one
    memory: into ``extend``'s buffer): the kept top-2 is the recomputed one bit for bit, and the state
    is ``from_labels``'."""
    rng = np.random.default_rng(seed)
    d = 6
    sizes = rng.integers(0, 40, n_mem)
    x = _tied_rows(rng, int(sizes.sum()), d)
    raw = np.split(x, np.cumsum(sizes)[:-1])  # each memory's rows as given (from_labels normalises them)
    labels = np.concatenate([rng.integers(0, max(1, s // 3 + 1), s) for s in sizes]).astype(np.int64)
    st = PartitionState.from_labels(x, labels, np.concatenate([[0], np.cumsum(sizes)]))
    fresh_label = [1000]
    for _ in range(12):
        if rng.random() < 0.3:
            nodes = {}
            for b in rng.choice(n_mem, int(rng.integers(1, n_mem + 1)), replace=False).tolist():
                m = int(rng.integers(1, 6))
                ts, te = int(st.theme_offsets[b]), int(st.theme_offsets[b + 1])
                have = st.theme_label[ts:te]
                pick = np.concatenate([have, [fresh_label[0] + 1]])
                fresh_label[0] += 1
                nodes[b] = (_tied_rows(rng, m, d), rng.choice(pick, m).astype(np.int64))
                raw[b] = np.concatenate([raw[b], nodes[b][0]])
            st.extend(nodes)
        else:
            edits: dict[int, tuple] = {}  # one edit per memory and call (rows cut from the state before it)
            for _ in range(int(rng.integers(1, 4))):
                e = _random_edit(rng, st, fresh_label)
                if e is not None:
                    edits.setdefault(e[0], e)
            st.apply(list(edits.values()))
        _same((st.top_idx, st.top_cos), _full_top2(st))
        ref = PartitionState.from_labels(np.concatenate(raw), st.labels, st.offsets)
        _same((st.top_idx, st.top_cos), (ref.top_idx, ref.top_cos))
        assert st.f.tobytes() == ref.f.tobytes()


def test_shallow_copies_extend_apart():
    """Two shallow copies of one state appending different rows each keep their own rows."""
    import copy

    rng = np.random.default_rng(0)
    x = _tied_rows(rng, 20, 4)
    st = PartitionState.from_labels(x, rng.integers(0, 4, 20), np.array([0, 20]))
    other = copy.copy(st)
    xa, xb = rng.standard_normal((3, 4)), rng.standard_normal((5, 4))
    st.extend({0: (xa, np.array([0, 1, 9]))})
    other.extend({0: (xb, np.array([2, 2, 3, 8, 8]))})
    st.extend({0: (xb[:2], np.array([1, 1]))})
    for s, rows, lab in ((st, [xa, xb[:2]], [0, 1, 9, 1, 1]), (other, [xb], [2, 2, 3, 8, 8])):
        ref = PartitionState.from_labels(
            np.concatenate([x, *rows]), np.concatenate([st.labels[:20], lab]), [0, len(s.x)]
        )
        assert s.x.tobytes() == ref.x.tobytes()
        _same((s.top_idx, s.top_cos), (ref.top_idx, ref.top_cos))
        assert s.theme_sum.tobytes() == ref.theme_sum.tobytes()


def _one_nan(x):
    """``x`` with every NaN made one NaN: which NaN an add keeps (its sign, its payload) follows the
    order the hardware meets them, which an ISA's copy may change; every number must be the same."""
    if isinstance(x, tuple):
        return tuple(_one_nan(a) for a in x)
    x = np.array(x)
    if x.dtype.kind == "f":
        x[np.isnan(x)] = np.nan
    return x


@pytest.mark.parametrize("d", [3, 32, 37, 384])
def test_top2_blocks_tiled_equals_the_reference_on_every_isa(monkeypatch, d):
    """The C++ top-2 (pairs in tiles of rows, each row's two best kept as the pairs come) and
    ``dot4_gram`` (tiles of rows) against the reference's argmax per row and its products, bit for
    bit (a NaN's sign aside), on every ISA this CPU runs: blocks past a tile's and a run's rows, one
    large enough to share its runs between threads, tied and zero centroids, a NaN and an infinite
    entry."""
    if "cpu" not in BACKENDS:
        pytest.skip("the C++ module is not built")
    from xmemory_gpu import _C

    rng = np.random.default_rng(d)
    sizes = [0, 1, 2, 3, 5, 97, 190, 7] + ([450] if d == 384 else [])  # 450 x 450 / 2 x 384: threads
    off = np.cumsum([0] + sizes).astype(np.int64)
    unit = unit_rows(_tied_rows(rng, int(off[-1]), d))
    unit[off[6] + 4, 0] = np.nan  # one row's cosines NaN
    unit[off[6] + 9, : min(d, 2)] = [np.inf, -np.inf][: min(d, 2)]
    want = top2_blocks(unit, off, backend="reference")
    seen = 0
    for isa in ("scalar", "avx2", "avx512"):
        monkeypatch.setenv("XMEM_CPU_ISA", isa)
        if _C.cpu_isa() != isa:
            continue
        seen += 1
        _same(_one_nan(top2_blocks(unit, off, backend="cpu")), _one_nan(want))
        a, b = unit[off[5] : off[5] + 40], unit[off[6] :]
        a, b = np.ascontiguousarray(a), np.ascontiguousarray(b)
        ref = dot4_gram(a, b, backend="reference")
        assert _one_nan(dot4_gram(a, b, backend="cpu")).tobytes() == _one_nan(ref).tobytes()
    assert seen >= 1
