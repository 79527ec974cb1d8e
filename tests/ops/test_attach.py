"""Theme attach (ops/attach): the C++ path edits the theme columns exactly as the NumPy reference does
(labels, sums to the bit, counts, ids, opened slots) on fresh random sessions with closed slots, zero
sums, every d modulo 8 and the thresholds near the cosines; the fixed dot order is what it says; ties
go to the earliest slot; bad columns are refused naming the argument."""

from __future__ import annotations

import math

import numpy as np
import pytest

from xmemory_gpu.ops import available_backends
from xmemory_gpu.ops.attach import attach_rows
from xmemory_gpu.ops.attach.reference import dot4

BACKENDS = [b for b in ("reference", "cpu") if available_backends()[b].available]
needs_cpu = pytest.mark.skipif("cpu" not in BACKENDS, reason="the C++ module is not built")


def _columns(rng: np.random.Generator, d: int, cap: int, n_open: int) -> dict[str, np.ndarray]:
    """Columns with ``n_open`` slots used, some closed, one with a zero sum."""
    cols = {
        "sums": np.zeros((cap, d)),
        "counts": np.zeros(cap, np.int64),
        "alive": np.zeros(cap, bool),
        "ids": np.full(cap, -1, np.int64),
    }
    for s in range(n_open):
        cols["sums"][s] = rng.standard_normal(d) * rng.uniform(0.5, 3)
        cols["counts"][s], cols["ids"][s], cols["alive"][s] = (
            int(rng.integers(1, 6)),
            10 + s,
            rng.random() > 0.25,
        )
    if n_open:
        cols["sums"][int(rng.integers(0, n_open))] = 0.0
    return cols


def _run(backend: str, x, rows, cols, label, n_open, cfg):
    c = {k: v.copy() for k, v in cols.items()}
    lab = label.copy()
    out = attach_rows(
        x,
        rows,
        c["sums"],
        c["counts"],
        c["alive"],
        c["ids"],
        lab,
        n_open,
        10 + n_open,
        backend=backend,
        **cfg,
    )
    return out, c, lab


@needs_cpu
@pytest.mark.parametrize("d", [1, 3, 7, 8, 9, 16, 23, 31, 32, 33, 40, 100, 384])
def test_cpu_edits_the_columns_as_the_reference(d):
    rng = np.random.default_rng(d)
    for _ in range(6):
        n = int(rng.integers(1, 60))
        centres = rng.standard_normal((int(rng.integers(1, 6)), d))
        x = (centres[rng.integers(0, len(centres), n)] + 0.6 * rng.standard_normal((n, d))).astype(np.float32)
        x /= np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)
        n_open = int(rng.integers(0, 5))
        cols = _columns(rng, d, n_open + n + 3, n_open)
        label = np.full(n, -1, np.int64)
        rows = rng.permutation(n)[: int(rng.integers(1, n + 1))]
        at = float(rng.uniform(0.2, 0.9))
        cfg = {
            "attach_threshold": at,
            "lenient_floor": at - float(rng.uniform(0, 0.3)),
            "size_cap": int(rng.integers(1, 8)),
        }
        want = _run("reference", x, rows, cols, label, n_open, cfg)
        got = _run("cpu", x, rows, cols, label, n_open, cfg)
        assert got[0] == want[0]
        np.testing.assert_array_equal(got[2], want[2])
        for k in cols:
            np.testing.assert_array_equal(got[1][k], want[1][k], err_msg=k)
        assert (want[2][rows] >= 0).all() and want[0][0] >= n_open


def test_dot4_is_its_stated_order():
    rng = np.random.default_rng(3)
    for d in (1, 5, 31, 32, 33, 64, 100, 385):
        a, b = rng.standard_normal((4, d)), rng.standard_normal(d).astype(np.float32)
        got = dot4(a, b)
        for r in range(4):
            p = [float(a[r, k]) * float(b[k]) for k in range(d)]
            acc = [[0.0] * 8 for _ in range(4)]
            q = d // 32
            for t in range(q):
                for u in range(4):
                    for lane in range(8):
                        acc[u][lane] += p[32 * t + 8 * u + lane]
            total = 0.0
            for k in range(32 * q, d):
                total += p[k]
            for lane in range(8):
                total += (acc[0][lane] + acc[1][lane]) + (acc[2][lane] + acc[3][lane])
            assert got[r] == total
            assert abs(got[r] - math.fsum(p)) <= 4 * d * np.finfo(float).eps * sum(abs(v) for v in p)


@pytest.mark.parametrize("backend", BACKENDS)
def test_ties_go_to_the_earliest_slot_and_thresholds_hold_exactly(backend):
    x = np.array([[1, 0], [0, 1], [0.6, 0.8], [1, 0]], np.float32)
    cols = {
        "sums": np.zeros((8, 2)),
        "counts": np.zeros(8, np.int64),
        "alive": np.zeros(8, bool),
        "ids": np.full(8, -1, np.int64),
    }
    cols["sums"][:3] = [[2, 0], [0, -5], [3, 0]]  # slots 0 and 2: the same direction
    cols["counts"][:3], cols["alive"][:3], cols["ids"][:3] = [1, 1, 1], True, [4, 5, 6]
    label = np.full(4, -1, np.int64)
    on = float(np.float32(0.6))  # node 2's cosine to slots 0 and 2: exactly the threshold
    n, nxt, joined = attach_rows(
        x,
        np.array([0, 2]),
        cols["sums"],
        cols["counts"],
        cols["alive"],
        cols["ids"],
        label,
        3,
        7,
        attach_threshold=on,
        lenient_floor=on,
        size_cap=9,
        backend=backend,
    )
    assert (n, nxt, joined) == (3, 7, True) and label[0] == 4 and label[2] == 4
    cols["alive"][0] = False  # a closed slot is never joined: node 3 goes to slot 2
    attach_rows(
        x,
        np.array([3]),
        cols["sums"],
        cols["counts"],
        cols["alive"],
        cols["ids"],
        label,
        3,
        7,
        attach_threshold=0.99,
        lenient_floor=0.99,
        size_cap=9,
        backend=backend,
    )
    assert label[3] == 6
    n, nxt, joined = attach_rows(
        x,
        np.array([1]),
        cols["sums"],
        cols["counts"],
        cols["alive"],
        cols["ids"],
        label,
        3,
        7,
        attach_threshold=1.5,
        lenient_floor=1.5,
        size_cap=9,
        backend=backend,
    )
    assert (n, nxt, joined) == (4, 8, False) and label[1] == 7 and cols["ids"][3] == 7 and cols["alive"][3]
    np.testing.assert_array_equal(cols["sums"][3], [0.0, 1.0])


@pytest.mark.parametrize("backend", BACKENDS)
def test_bad_columns_are_refused(backend):
    x = np.eye(3, dtype=np.float32)
    cols = {
        "sums": np.zeros((2, 3)),
        "counts": np.zeros(2, np.int64),
        "alive": np.zeros(2, bool),
        "ids": np.zeros(2, np.int64),
    }
    label = np.full(3, -1, np.int64)
    with pytest.raises(ValueError, match="sums: 2 slots cannot take 3"):
        attach_rows(
            x,
            np.arange(3),
            *cols.values(),
            label,
            0,
            0,
            attach_threshold=0.5,
            lenient_floor=0.5,
            size_cap=4,
            backend=backend,
        )
    with pytest.raises(ValueError, match="rows"):
        attach_rows(
            x,
            np.array([3]),
            *cols.values(),
            label,
            0,
            0,
            attach_threshold=0.5,
            lenient_floor=0.5,
            size_cap=4,
            backend=backend,
        )
    with pytest.raises(ValueError, match="x: expected"):
        attach_rows(
            x.astype(np.float64),
            np.array([0]),
            *cols.values(),
            label,
            0,
            0,
            attach_threshold=0.5,
            lenient_floor=0.5,
            size_cap=4,
            backend=backend,
        )
    # columns every backend refuses before editing anything: another dtype, a list (its copy's edits
    # would be lost), read-only, a view with gaps, a short label
    read_only = cols["alive"].copy()
    read_only.flags.writeable = False
    for name, bad in [
        ("counts", cols["counts"].astype(np.int32)),
        ("counts", [0, 0]),
        ("alive", read_only),
        ("ids", np.zeros(4, np.int64)[::2]),
        ("sums", cols["sums"].astype(np.float32)),
        ("label", np.full(2, -1, np.int64)),
    ]:
        args = {**cols, "label": label, name: bad}
        with pytest.raises(ValueError, match=name):
            attach_rows(
                x,
                np.array([0]),
                args["sums"],
                args["counts"],
                args["alive"],
                args["ids"],
                args["label"],
                0,
                0,
                attach_threshold=0.5,
                lenient_floor=0.5,
                size_cap=4,
                backend=backend,
            )
        assert (label == -1).all() and not cols["alive"].any()


@needs_cpu
def test_compiled_attach_refuses_what_it_cannot_edit_in_place():
    """The compiled functions themselves (without the Python checks): a list column is refused, not
    copied and edited unseen, and a slot count near 2**63 does not overflow the room check."""
    from xmemory_gpu import _C

    x = np.eye(3, dtype=np.float32)
    sums, counts, alive, ids, label = (
        np.zeros((4, 3)),
        [0, 0, 0, 0],
        np.zeros(4, bool),
        np.full(4, -1),
        np.full(3, -1),
    )
    with pytest.raises(ValueError, match="counts: expected a NumPy array"):
        _C.attach_rows_batch([(x, np.array([0, 1]), sums, counts, alive, ids, label, 0, 0)], 0.5, 0.5, 4)
    with pytest.raises(ValueError, match="counts: expected a NumPy array"):
        _C.attach_rows(x, np.array([0, 1]), sums, counts, alive, ids, label, 0, 0, 0.5, 0.5, 4)
    assert not alive.any() and (label == -1).all()
    with pytest.raises(ValueError, match="room"):
        _C.attach_rows_batch(
            [(x, np.array([0]), sums, np.zeros(4, np.int64), alive, ids, label, 2**63 - 1, 0)], 0.5, 0.5, 4
        )


def test_a_nan_cosine_is_never_the_nearest_on_either_backend():
    """A theme whose sum holds a NaN: the C++ loop's comparison (a later slot wins only when strictly
    more similar) and the reference pick alike."""
    for first_nan in (False, True):
        got = []
        for backend in BACKENDS:
            x = np.array([[1, 0]], np.float32)
            sums = (
                np.array([[np.nan, 1], [1, 0], [0, 0]], float)
                if first_nan
                else np.array([[1, 0], [np.nan, 1], [0, 0]], float)
            )
            cols = [
                sums,
                np.ones(3, np.int64),
                np.array([True, True, False]),
                np.array([7, 8, -1]),
                np.full(1, -1),
            ]
            got.append(
                (
                    attach_rows(
                        x,
                        np.array([0]),
                        *cols,
                        2,
                        9,
                        attach_threshold=0.5,
                        lenient_floor=0.5,
                        size_cap=4,
                        backend=backend,
                    ),
                    cols[4].tolist(),
                    cols[1].tolist(),
                )
            )
        assert all(g == got[0] for g in got), got


def _theme_graph(rng: np.random.Generator, n_slots: int, cols: int):
    """A memory's theme columns and synced graph: live slots (ascending, or shuffled), each row's
    neighbours distinct other live positions (the rest -1, some -2), cosines descending float32 with
    ties, NaN and values at the thresholds; counts from -1 up, some zero."""
    live = np.flatnonzero(rng.random(n_slots) < 0.7).astype(np.int64)
    if rng.random() < 0.3:
        live = rng.permutation(live)
    L = live.size
    counts = rng.integers(-1, 9, n_slots).astype(np.int64)
    idx = np.full((L, cols), -1, np.int32)
    sim = np.full((L, cols), -np.inf, np.float32)
    for r in range(L):
        others = rng.permutation([p for p in range(L) if p != r])[: int(rng.integers(0, cols + 1))]
        idx[r, : len(others)] = others
        vals = rng.choice(np.float32([0.9, 0.8, 0.8, 0.75, 0.5, 0.3, 0.1, np.nan]), len(others))
        sim[r, : len(others)] = np.sort(vals)[::-1]
        idx[r, len(others) :][rng.random(cols - len(others)) < 0.2] = -2
    return live, idx, sim, counts


@needs_cpu
@pytest.mark.parametrize("seed", range(40))
def test_merge_pairs_cpu_is_the_numpy_rule(seed):
    from xmemory_gpu.ops.attach import merge_pairs

    rng = np.random.default_rng(seed)
    n_slots, cols = int(rng.integers(0, 40)), int(rng.integers(1, 7))
    live, idx, sim, counts = _theme_graph(rng, n_slots, cols)
    for k in (cols, max(cols - 2, 0), cols + 1):  # a graph row may hold more or fewer columns than k
        for tiny_size, cands, cap, thr in [
            (2, 1, 8, 0.8),
            (0, 0, 12, 0.75),
            (4, 3, 6, 0.5),
            (8, 2, 100, 0.95),
        ]:
            kw = dict(k=k, tiny_size=tiny_size, merge_candidates=cands, size_cap=cap, pair_threshold=thr)
            got = merge_pairs(live, idx, sim, counts, n_slots, **kw)
            want = merge_pairs(live, idx, sim, counts, n_slots, backend="reference", **kw)
            for g, w in zip(got, want):
                assert g.dtype == np.int64 and np.array_equal(g, w), (seed, kw)


@needs_cpu
def test_merge_pairs_of_other_types_are_the_numpy_rule():
    """Inputs the C++ does not take as they are (a float64 cosine, an int64 graph, a float count, a
    non-int parameter) get the NumPy steps' answer, never a cast one."""
    from xmemory_gpu.ops.attach import merge_pairs

    base = dict(
        live=np.array([0, 1]),
        idx=np.array([[1], [0]], np.int32),
        sim=np.float32([[0.7], [0.1]]),
        counts=np.array([1, 1]),
        n_slots=2,
    )
    kw = dict(k=1, tiny_size=0, merge_candidates=1, size_cap=10, pair_threshold=0.7)
    cases = [
        ({"sim": np.array([[0.70000000001], [0.1]])}, {}),
        ({"idx": np.array([[1], [0]], np.int64)}, {}),
        ({"counts": np.array([0.5, 0.5])}, {"size_cap": 0, "tiny_size": -1}),
        ({}, {"tiny_size": -0.5}),
        ({"live": np.array([0, 1], np.int32)}, {}),
    ]
    for over, kover in cases:
        args, kws = {**base, **over}, {**kw, **kover}
        want = merge_pairs(*args.values(), backend="reference", **kws)
        got = merge_pairs(*args.values(), **kws)
        assert all(np.array_equal(g, w) and g.dtype == w.dtype for g, w in zip(got, want)), (over, kover)


@needs_cpu
def test_merge_pairs_refuses_a_neighbour_outside_the_graph():
    from xmemory_gpu.ops.attach import merge_pairs

    live, idx, sim, counts = (
        np.array([0, 1]),
        np.array([[1], [2]], np.int32),
        np.ones((2, 1), np.float32),
        np.ones(2, np.int64),
    )
    with pytest.raises(ValueError, match="neighbour outside"):
        merge_pairs(
            live, idx, sim, counts, 2, k=1, tiny_size=1, merge_candidates=1, size_cap=4, pair_threshold=0.5
        )


@pytest.mark.parametrize("backend", BACKENDS)
def test_attach_rows_batch_is_each_memory_alone(backend):
    """Many memories in one call take each one's own decisions: the columns as ``attach_rows`` (the
    reference) leaves them memory by memory, on fresh random memories (some with no rows)."""
    from xmemory_gpu.ops.attach import attach_rows_batch

    rng = np.random.default_rng(11)
    for _ in range(4):
        d = int(rng.choice([3, 16, 33]))
        cfg = {"attach_threshold": 0.6, "lenient_floor": 0.4, "size_cap": 3}
        mems = []
        for _ in range(int(rng.integers(1, 7))):
            n = int(rng.integers(1, 30))
            x = rng.standard_normal((n, d)).astype(np.float32)
            x /= np.linalg.norm(x, axis=1, keepdims=True)
            n_open = int(rng.integers(0, 4))
            rows = rng.permutation(n)[: int(rng.integers(0, n + 1))]
            mems.append((x, rows, _columns(rng, d, n_open + n + 2, n_open), np.full(n, -1, np.int64), n_open))
        want = [_run("reference", x, rows, cols, label, n_open, cfg) for x, rows, cols, label, n_open in mems]
        held = [({k: v.copy() for k, v in cols.items()}, label.copy()) for _, _, cols, label, _ in mems]
        items = [
            (x, rows, c["sums"], c["counts"], c["alive"], c["ids"], lab, n_open, 10 + n_open)
            for (x, rows, _, _, n_open), (c, lab) in zip(mems, held)
        ]
        got = attach_rows_batch(items, backend=backend, **cfg)
        for (w_out, w_cols, w_lab), g_out, (g_cols, g_lab) in zip(want, got, held):
            assert g_out == w_out
            np.testing.assert_array_equal(g_lab, w_lab)
            for k in w_cols:
                np.testing.assert_array_equal(g_cols[k], w_cols[k], err_msg=k)


@pytest.mark.parametrize("backend", BACKENDS)
def test_attach_rows_batch_checks_every_item_before_editing_any(backend):
    from xmemory_gpu.ops.attach import attach_rows_batch

    x = np.eye(3, dtype=np.float32)

    def item(rows):
        cols = {
            "sums": np.zeros((4, 3)),
            "counts": np.zeros(4, np.int64),
            "alive": np.zeros(4, bool),
            "ids": np.full(4, -1, np.int64),
        }
        return (x, np.array(rows), *cols.values(), np.full(3, -1, np.int64), 0, 0)

    good, bad = item([0, 1]), item([3])
    cfg = {"attach_threshold": 0.5, "lenient_floor": 0.5, "size_cap": 4}
    with pytest.raises(ValueError, match="rows"):
        attach_rows_batch([good, bad], backend=backend, **cfg)
    assert not good[4].any() and (good[6] == -1).all()  # the first memory was not touched
    with pytest.raises(ValueError, match="share a column"):
        attach_rows_batch([good, good], backend=backend, **cfg)
    assert attach_rows_batch([], backend=backend, **cfg) == []
    assert attach_rows_batch([good], backend=backend, **cfg) == [(2, 2, False)]


@needs_cpu
@pytest.mark.parametrize("seed", range(12))
def test_merge_pairs_batch_is_merge_pairs_memory_by_memory(seed):
    """Many memories' graphs in one C++ call: each memory's pairs, in its rule's order, as theme ids,
    memory after memory; the same with the NumPy rule; an item of another type takes the NumPy rule."""
    from xmemory_gpu.ops.attach import merge_pairs, merge_pairs_batch

    rng = np.random.default_rng(seed)
    kw = dict(tiny_size=2, merge_candidates=1, size_cap=8, pair_threshold=0.8)
    items = []
    for _ in range(int(rng.integers(0, 6))):
        n_slots, cols = int(rng.integers(0, 30)), int(rng.integers(1, 6))
        live, idx, sim, counts = _theme_graph(rng, n_slots, cols)
        ids = rng.permutation(1000)[:n_slots].astype(np.int64)
        items.append((live, idx, sim, counts, ids, n_slots, int(rng.integers(max(cols - 1, 1), cols + 2))))
    got = merge_pairs_batch(items, **kw)
    owner, t_ids, j_ids = [], [], []
    for b, (live, idx, sim, counts, ids, n_slots, k) in enumerate(items):
        t, j = merge_pairs(live, idx, sim, counts, n_slots, k=k, backend="reference", **kw)
        owner += [b] * len(t)
        t_ids += ids[t].tolist()
        j_ids += ids[j].tolist()
    for g, w in zip(got, (owner, t_ids, j_ids)):
        assert g.dtype == np.int64
        np.testing.assert_array_equal(g, np.array(w, np.int64))
    for g, w in zip(merge_pairs_batch(items, backend="reference", **kw), got):
        np.testing.assert_array_equal(g, w)
    if items:  # a float64 cosine: not cast to float32, the NumPy rule for every item
        live, idx, sim, counts, ids, n_slots, k = items[0]
        mixed = [(live, idx, sim.astype(np.float64) + 1e-9, counts, ids, n_slots, k), *items[1:]]
        for g, w in zip(merge_pairs_batch(mixed, **kw), merge_pairs_batch(mixed, backend="reference", **kw)):
            np.testing.assert_array_equal(g, w)


@pytest.mark.parametrize("backend", BACKENDS)
def test_merge_pairs_refuse_counts_and_slots_past_2_31(backend):
    """Pair sizes and pair keys are exact in int64: counts at +-2**31 or more, or n_slots at 2**31 or
    more, are refused at the op with ``ValueError`` naming the field, on every backend and batched."""
    from xmemory_gpu.ops.attach import merge_pairs, merge_pairs_batch

    live, idx, sim = np.array([0, 1]), np.array([[1], [0]], np.int32), np.ones((2, 1), np.float32)
    kw = dict(k=1, tiny_size=0, merge_candidates=1, size_cap=2**40, pair_threshold=0.5)
    ok = merge_pairs(live, idx, sim, np.array([2**31 - 1, -(2**31) + 1]), 2, backend=backend, **kw)
    assert [v.tolist() for v in ok] == [[0], [1]]
    for counts, n_slots, field in [
        (np.array([2**31, 1]), 2, "counts"),
        (np.array([1, -(2**31)]), 2, "counts"),
        (np.array([1, np.iinfo(np.int64).min]), 2, "counts"),
        (np.array([1, 1]), 2**31, "n_slots"),
    ]:
        with pytest.raises(ValueError, match=field):
            merge_pairs(live, idx, sim, counts, n_slots, backend=backend, **kw)
        batch = [(live, idx, sim, counts, np.array([5, 6]), n_slots, 1)]
        with pytest.raises(ValueError, match=f"item 0: {field}"):
            merge_pairs_batch(batch, backend=backend, **{k: v for k, v in kw.items() if k != "k"})
