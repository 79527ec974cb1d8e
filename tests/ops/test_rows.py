"""The construction's fixed-order products (ops/rows): ``dot4_gram`` and ``drift_runs`` from the
compiled module equal their NumPy steps to the bit on fresh random inputs (every d modulo 32, float32
and float64 rows, ragged hard cuts, thresholds at the cosines), and the drift rule is the per-message
rule it replaced wherever no cosine sits within rounding of the threshold."""

from __future__ import annotations

import numpy as np
import pytest

from xmemory_gpu.ops import available_backends
from xmemory_gpu.ops.rows import dot4, dot4_gram, drift_runs

needs_cpu = pytest.mark.skipif(
    not available_backends()["cpu"].available, reason="the C++ module is not built"
)


@needs_cpu
@pytest.mark.parametrize("d", [0, 1, 7, 31, 32, 33, 64, 100, 384])
def test_dot4_gram_is_the_numpy_order(rng, d):
    a = rng.standard_normal((int(rng.integers(0, 9)), d)).astype(np.float32)
    b = rng.standard_normal((int(rng.integers(0, 9)), d))
    got, want = dot4_gram(a, b), dot4_gram(a, b, backend="reference")
    assert got.shape == want.shape == (len(a), len(b)) and got.dtype == np.float64
    np.testing.assert_array_equal(got, want)
    if len(a) and len(b) and d:
        assert got[0, 0] == dot4(a[0].astype(np.float64), b[0])
        np.testing.assert_allclose(got, a.astype(np.float64) @ b.T, rtol=1e-12, atol=1e-12)


def _unit(rng, n, d):
    x = rng.standard_normal((n, d)) + 2.0 * rng.standard_normal(d)
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


@needs_cpu
@pytest.mark.parametrize("seed", range(12))
def test_drift_runs_in_cpp_are_the_numpy_loop(seed):
    rng = np.random.default_rng(seed)
    n, d = int(rng.integers(1, 60)), int(rng.choice([3, 32, 45, 384]))
    x = _unit(rng, n, d)
    hard = rng.random(n) < 0.1
    for min_messages in (0, 1, 3):
        for thr in (-1.0, 0.3, 0.6, 0.9, 1.1):
            got = drift_runs(x, hard, min_messages, thr)
            want = drift_runs(x, hard, min_messages, thr, backend="reference")
            assert got.dtype == np.int64 and np.array_equal(got, want), (seed, min_messages, thr)
            assert (
                got[0] == 0
                and np.all(np.diff(got) > 0)
                and set(np.flatnonzero(hard[1:]) + 1) <= set(got.tolist())
            )


@needs_cpu
def test_drift_runs_are_the_per_message_rule(rng):
    """The rule as the per-message loop wrote it (BLAS dots), where no cosine is near the threshold."""
    for _ in range(20):
        n = int(rng.integers(2, 80))
        x = _unit(rng, n, 64)
        hard = rng.random(n) < 0.05
        thr = float(rng.uniform(0.2, 0.9))
        starts, start, acc = [0], 0, x[0].astype(np.float64).copy()
        near = False
        for i in range(1, n):
            cut = bool(hard[i])
            if not cut and i - start >= 2:
                cos = float(x[i] @ acc) / np.sqrt(acc.dot(acc))
                near |= abs(cos - thr) < 1e-9
                cut = cos < thr
            if cut:
                starts.append(i)
                start, acc = i, x[i].astype(np.float64).copy()
            else:
                acc += x[i]
        if not near:
            assert drift_runs(x, hard, 2, thr).tolist() == starts


def test_bad_shapes_are_refused():
    with pytest.raises(ValueError, match="dot4_gram"):
        dot4_gram(np.zeros((2, 3)), np.zeros((2, 4)))
    with pytest.raises(ValueError, match="drift_runs"):
        drift_runs(np.zeros((0, 3), np.float32), np.zeros(0, bool), 1, 0.5)


def test_boundary_runs_are_the_per_message_rule():
    """``segment.boundary_runs`` on synthetic chats (some times missing: no gap there) against the
    per-message loop it replaced: session changes, time gaps and drift cut at the same messages."""
    import dataclasses

    from xmemory_gpu.config import SegmentConfig
    from xmemory_gpu.construct.segment import boundary_runs, embed_messages
    from xmemory_gpu.datasets.locomo import conversations_of
    from xmemory_gpu.datasets.synthetic import generate_conversations
    from xmemory_gpu.embed.hashing import HashingEmbedder

    cfg, emb = SegmentConfig(time_gap_s=600.0), HashingEmbedder(dim=64)
    for i, conv in enumerate(conversations_of("synthetic", generate_conversations(12, seed=2))):
        msgs = [
            dataclasses.replace(m, timestamp=None) if (i + j) % 7 == 0 else m
            for j, m in enumerate(conv.messages)
        ]
        conv = dataclasses.replace(conv, messages=msgs)
        x = embed_messages(emb, conv.messages).x
        runs, start, acc = [], 0, x[0].astype(np.float64).copy()
        for k in range(1, len(msgs)):
            prev, cur = msgs[k - 1], msgs[k]
            cut = cur.session != prev.session
            if not cut and cur.timestamp is not None and prev.timestamp is not None:
                cut = cur.timestamp - prev.timestamp > cfg.time_gap_s
            if not cut and k - start >= cfg.min_messages:
                norm = np.sqrt(acc.dot(acc))
                cut = norm > 0 and float(x[k] @ acc) / norm < cfg.drift_threshold
            if cut:
                runs.append((start, k))
                start, acc = k, x[k].astype(np.float64).copy()
            else:
                acc += x[k]
        runs.append((start, len(msgs)))
        assert boundary_runs(conv, x, cfg) == runs, conv.sample_id


@needs_cpu
def test_drift_runs_of_float64_rows_are_not_cast(rng, monkeypatch):
    """float64 rows take the NumPy loop as they are (a cast to float32 could move a cut); float32 rows
    the C++ pass."""
    from xmemory_gpu import _C

    calls = []
    native = _C.drift_runs
    monkeypatch.setattr(_C, "drift_runs", lambda *a: calls.append(a[0].dtype) or native(*a))
    x = _unit(rng, 30, 16)
    hard = np.zeros(30, bool)
    want = drift_runs(x.astype(np.float64), hard, 1, 0.5, backend="reference")
    assert np.array_equal(drift_runs(x.astype(np.float64), hard, 1, 0.5), want) and calls == []
    assert np.array_equal(drift_runs(x, hard, 1, 0.5), want) and calls == [np.float32]


@needs_cpu
@pytest.mark.parametrize("d", [5, 32, 77, 384])
def test_drift_cuts_at_the_dot4_cosine_exactly(rng, d):
    """A threshold equal to a step's cosine in dot4's order does not cut there (the rule is
    ``cos < threshold``); the next float above it does: the order of the sums is the rule's."""
    x = _unit(rng, 6, d)
    hard = np.zeros(6, bool)
    acc = x[0].astype(np.float64) + x[1] + x[2]  # the run's sum as the rule adds it
    cos = float(dot4(x[3].astype(np.float64), acc)) / float(np.sqrt(dot4(acc, acc)))
    for backend in ("cpu", "reference"):
        starts = drift_runs(x[:4], hard[:4], 3, cos, backend=backend).tolist()
        assert starts == [0], (backend, starts)
        assert drift_runs(x[:4], hard[:4], 3, float(np.nextafter(cos, 2.0)), backend=backend).tolist() == [
            0,
            3,
        ], backend


def test_construction_decides_on_dot4_products(monkeypatch):
    """Each construction site that compares a cosine to a threshold or a rival reads ``dot4_gram`` /
    ``drift_runs`` (a BLAS product there made stores depend on the CPU's kernel)."""
    import sys

    from xmemory_gpu.config import SegmentConfig
    from xmemory_gpu.construct import pipeline, segment, supersede, theme_split
    from xmemory_gpu.memory.records import Conversation, Message

    seen = []

    def spy(name, fn):
        return lambda *a, **k: seen.append(name) or fn(*a, **k)

    summary = sys.modules[pipeline.theme_summary.__module__]  # wherever the pipeline's theme_summary lives
    for mod in (summary, supersede, theme_split):
        monkeypatch.setattr(mod, "dot4_gram", spy(mod.__name__, mod.dot4_gram))
    monkeypatch.setattr(segment, "drift_runs", spy("segment", segment.drift_runs))
    x = np.eye(4, 8, dtype=np.float32)
    pipeline.theme_summary(["a b", "c d", "e f", "g h"], x)
    theme_split.connected_components(x.astype(np.float64), 0.5)
    supersede.supersessions(
        ["Alice lives in Paris.", "Alice moved to Rome now."], x[:2], [0, 1], ["Alice", "Alice"]
    )
    conv = Conversation("c", ("a", "b"), [Message(f"m{i}", "a", "hi there", 1, float(i)) for i in range(4)])
    segment.boundary_runs(conv, x, SegmentConfig())
    assert seen == [
        summary.__name__,
        "xmemory_gpu.construct.theme_split",
        "xmemory_gpu.construct.supersede",
        "segment",
    ]


def test_a_gap_of_exactly_the_limit_does_not_cut():
    from xmemory_gpu.config import SegmentConfig
    from xmemory_gpu.construct.segment import boundary_runs
    from xmemory_gpu.memory.records import Conversation, Message

    cfg = SegmentConfig(time_gap_s=600.0, min_messages=100)  # no drift cut
    ts = [0.0, 600.0, 1200.5, None, 5000.0]
    conv = Conversation("c", ("a", "b"), [Message(f"m{i}", "a", "hi", 1, t) for i, t in enumerate(ts)])
    x = np.ones((5, 4), np.float32) / 2
    assert boundary_runs(conv, x, cfg) == [
        (0, 2),
        (2, 5),
    ]  # 600 s apart: no cut; 600.5 s: a cut; no time: none


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.int64, np.int32, np.bool_])
@pytest.mark.parametrize("shape", [(), (3,), (2, 5)])
def test_take_rows2_is_a_concatenation_then_a_gather(dtype, shape):
    """``take_rows2`` (the f(P) state's re-pack) gives ``np.concatenate([a, b])[take]``: every dtype
    and row shape, empty sides, repeated and unordered indices; the C++ call refuses an index out of
    range and a dtype it cannot copy bytewise (the wrapper hands those to NumPy)."""
    from xmemory_gpu.ops.rows import take_rows2

    rng = np.random.default_rng(7)
    for na, nb in ((0, 0), (0, 4), (5, 0), (6, 3)):
        a = (rng.standard_normal((na, *shape)) * 9).astype(dtype)
        b = (rng.standard_normal((nb, *shape)) * 9).astype(dtype)
        take = rng.integers(0, max(na + nb, 1), 11 if na + nb else 0)
        want = np.concatenate([a, b])[take]
        for backend in ("auto", "reference"):
            got = take_rows2(a, b, take, backend=backend)
            assert got.dtype == want.dtype and got.shape == want.shape and got.tobytes() == want.tobytes()
    if available_backends()["cpu"].available:
        from xmemory_gpu._C import take_rows2 as fn

        with pytest.raises(ValueError, match="outside"):
            fn(np.zeros(2), np.zeros(1), np.array([3]))
        with pytest.raises(ValueError, match="dtype"):
            fn(np.array(["x"], object), np.array(["y"], object), np.array([0]))
        objs = take_rows2(np.array(["x"], object), np.array(["y"], object), np.array([1, 0]))
        assert objs.tolist() == ["y", "x"]


@pytest.mark.parametrize("seed", range(6))
def test_row_norms_and_unit_rows_are_the_dot4_rule(seed):
    """``row_norms`` / ``unit_rows`` are ``sqrt(dot4(x_i, x_i))`` and the division into zeros where the
    norm is not positive, float32 rounded from float64, on both backends to the bit: widths around
    every switch of dot4's lanes (below 32, whole blocks of 32, tails), many rows, zero, inf and NaN
    rows, tiny and huge scales; other dtypes and strided views are read as float64."""
    from xmemory_gpu.ops.rows import row_norms, unit_rows

    if not available_backends()["cpu"].available:
        pytest.skip("the compiled module is not built")
    rng = np.random.default_rng(seed)
    for d in (0, 1, 3, 7, 8, 31, 32, 33, 63, 64, 65, 127, 128, 129, 384, 385, 1031):
        for m in (0, 1, 5, 300):
            x = rng.standard_normal((m, d)) * rng.choice([1e-160, 1e-3, 1.0, 1e3, 1e160])
            if m > 2 and d:
                x[0], x[1, 0], x[2, -1] = 0.0, np.inf, np.nan
            with np.errstate(all="ignore"):
                want = np.sqrt(dot4(x, x)).reshape(m)
                unit = np.divide(x, want[:, None], out=np.zeros_like(x), where=want[:, None] > 0)
                for backend in ("cpu", "reference"):
                    assert row_norms(x, backend=backend).tobytes() == want.tobytes(), (d, m, backend)
                    assert row_norms(x, keepdims=True, backend=backend).shape == (m, 1)
                    assert unit_rows(x, backend=backend).tobytes() == unit.tobytes(), (d, m, backend)
                    f32 = unit_rows(x, dtype=np.float32, backend=backend)
                    assert f32.tobytes() == unit.astype(np.float32).tobytes(), (d, m, backend)
                if m and d:
                    np.testing.assert_allclose(want[3:], np.linalg.norm(x[3:], axis=1), rtol=1e-14)
                    assert (
                        row_norms(x.astype(np.float32)).tobytes()
                        == row_norms(x.astype(np.float32).astype(np.float64)).tobytes()
                    )
                    view = np.asfortranarray(x)
                    assert row_norms(view).tobytes() == want.tobytes()
    with pytest.raises(ValueError, match="row_norms"):
        row_norms(np.zeros(3))
    with pytest.raises(ValueError, match="dtype"):
        unit_rows(np.zeros((2, 3)), dtype=np.float16)


@pytest.mark.parametrize("seed", range(4))
def test_segment_sums_are_sum4_of_each_slice(seed):
    """``segment_sums`` (the f(P) state's per-memory mean, every block at once) is ``sum4`` of each
    slice to the bit on both backends: empty segments, lengths around dot4's lane switches, large ones;
    sum4 is dot4 with ones."""
    from xmemory_gpu.ops.rows import segment_sums, sum4

    rng = np.random.default_rng(seed)
    sizes = np.array([0, 1, 7, 31, 32, 33, 64, 129, 300, 1031, 0, 5])[rng.permutation(12)]
    off = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    v = rng.standard_normal(int(off[-1])) * 10.0 ** rng.integers(-5, 6, int(off[-1]))
    want = np.array([float(sum4(v[a:b])) for a, b in zip(off[:-1], off[1:])])
    assert (
        want.tobytes()
        == np.array([float(dot4(v[a:b], np.ones(b - a))) for a, b in zip(off[:-1], off[1:])]).tobytes()
    )
    np.testing.assert_allclose(want, [v[a:b].sum() for a, b in zip(off[:-1], off[1:])], rtol=1e-9, atol=1e-3)
    for backend in [b for b in ("cpu", "reference") if available_backends()[b].available]:
        assert segment_sums(v, off, backend=backend).tobytes() == want.tobytes()
    assert segment_sums(v, off[:1]).shape == (0,)


@needs_cpu
@pytest.mark.parametrize("seed", range(6))
def test_live_rows_in_cpp_are_the_numpy_gather(seed):
    """Many column sets' live slots and sums in one pass: the NumPy gather's bits, item by item
    (closed slots, slots past n_slots, empty and all-closed sets, no sets)."""
    from xmemory_gpu.ops.rows import live_rows

    rng = np.random.default_rng(seed)
    d = int(rng.integers(1, 40))
    items = []
    for _ in range(int(rng.integers(0, 9))):
        cap = int(rng.integers(0, 20))
        alive = rng.random(cap) < rng.choice([0.0, 0.5, 1.0])
        items.append((alive, rng.standard_normal((cap, d)), int(rng.integers(0, cap + 1))))
    got, want = live_rows(items, d), live_rows(items, d, backend="reference")
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.shape == w.shape
        np.testing.assert_array_equal(g, w)
    slots, off, rows = got
    for b, (alive, sums, n) in enumerate(items):
        np.testing.assert_array_equal(slots[off[b] : off[b + 1]], np.flatnonzero(alive[:n]))
        np.testing.assert_array_equal(rows[off[b] : off[b + 1]], sums[np.flatnonzero(alive[:n])])
