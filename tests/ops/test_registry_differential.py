"""One differential harness for the ops registry: every registered op that implements both ``reference``
and ``cpu`` runs on small generated inputs on each, and the two agree: integer, boolean, byte and string
outputs exactly, floating outputs within the op's stated tolerance (``TOLERANCE``; exact when not
listed); ops with effects compare them (``write_durable``: the files written and the error raised).
Each op needs an input generator in ``GENERATORS`` (a new op without one fails the test).

The input contracts: every registered op registers an ``accepts`` predicate, and has cases in
``contract_cases.py`` (a new op without them fails); the in-contract case satisfies ``accepts`` and runs
on both backends, and each out-of-contract case gets a reason from ``accepts`` and the same refusal
(``ValueError`` unless the op documents another) from reference and cpu."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from xmemory_gpu.ops import available_backends, columns
from xmemory_gpu.ops.backends import HOST_BACKENDS, implemented_backends, registered_ops

from .coverage_cases import random_problem
from .kmeans_cases import clustered_themes, split_draws
from .knn_cases import ragged
from .linear_cases import activations, layer
from .objective_cases import random_candidates, random_partition
from .test_attach import _columns, _theme_graph
from .test_columns import _arrays
from .test_columns import _texts as _column_texts
from .test_features import _texts as _feature_texts

Run = Callable[[str], Any]  # backend -> the op's output on the generated input

# (rtol, atol) for floating outputs where the two backends round differently (float32 C++ against the
# float64 reference); any op not listed must agree to the bit
TOLERANCE: dict[str, tuple[float, float]] = {
    "knn_graph": (1e-5, 1e-6),  # float32 dot products
    "knn_search": (1e-5, 1e-6),
    "partition_objective": (1e-9, 1e-12),  # float64 in another order
    "score_candidates": (1e-9, 1e-12),
    "coverage_select": (1e-5, 1e-6),
    "token_entropy_logprob": (1e-5, 1e-5),  # torch float32
    "rowwise_linear": (1e-5, 1e-5),  # float32 FMA chains against float64
}


def _unit(rng: np.random.Generator, n: int, d: int, dtype: Any = np.float32) -> np.ndarray:
    x = rng.standard_normal((n, d))
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(dtype)


# ---- input generators, one per op: rng -> run(backend) -------------------------------------------


def _knn_graph(rng: np.random.Generator) -> Run:
    from xmemory_gpu.ops import knn_graph

    x, off = ragged(rng, [7, 1, 12, 0, 9], 16)
    return lambda b: knn_graph(x, off, 4, backend=b)


def _knn_search(rng: np.random.Generator) -> Run:
    from xmemory_gpu.ops import knn_search

    x, x_off = ragged(rng, [7, 1, 12, 9], 16)
    q, q_off = ragged(rng, [3, 2, 0, 4], 16)
    return lambda b: knn_search(q, q_off, x, x_off, 3, backend=b)


def _partition_objective(rng: np.random.Generator) -> Run:
    from xmemory_gpu.ops import partition_objective

    x, lab, off = random_partition(rng, [20, 2, 31, 1], [4, 2, 6, 1], 9)
    return lambda b: partition_objective(x, lab, off, backend=b)


def _score_candidates(rng: np.random.Generator) -> Run:
    from xmemory_gpu.ops import PartitionState, score_candidates

    x, lab, off = random_partition(rng, [20, 2, 31, 9], [4, 2, 6, 3], 9)
    state = PartitionState.from_labels(x, lab, off)
    cands = random_candidates(rng, state, 4)
    return lambda b: score_candidates(state, cands, backend=b)


def _coverage_select(rng: np.random.Generator) -> Run:
    from xmemory_gpu.ops import coverage_select

    off, idx, w, rel = random_problem(rng, [9, 1, 0, 14], 4)
    return lambda b: coverage_select(off, idx, w, rel, budget=3, backend=b)


def _token_entropy_logprob(rng: np.random.Generator) -> Run:
    pytest.importorskip("torch")
    from xmemory_gpu.ops import token_entropy_logprob

    logits = (rng.standard_normal((6, 50)) * 3).astype(np.float32)
    ids = rng.integers(0, 50, 6)
    return lambda b: token_entropy_logprob(logits, ids, backend=b)


def _spherical_kmeans(rng: np.random.Generator) -> Run:
    from xmemory_gpu.ops import spherical_kmeans

    x, off = clustered_themes(rng, [12, 3, 20, 6, 9], 8)
    x = x / np.linalg.norm(x, axis=1, keepdims=True)
    seg, kk, first, u = split_draws(x, off, (2, 3), 2, 5)
    return lambda b: spherical_kmeans(x, off, seg, kk, first, u, backend=b)


def _rowwise_linear(rng: np.random.Generator) -> Run:
    from xmemory_gpu.ops import pack_linear, rowwise_linear

    w, bias = layer(rng, 40, 70)
    x = activations(rng, 5, 40)
    return lambda b: rowwise_linear(x, pack_linear(w, bias, backend=b), backend=b)


def _feature_counts(rng: np.random.Generator) -> Run:
    from xmemory_gpu.ops import feature_counts

    texts = _feature_texts(rng, 12)
    return lambda b: feature_counts(texts, 64, backend=b)


def _attach_case(rng: np.random.Generator) -> tuple:
    d, n, n_open = 12, 15, 3
    x = _unit(rng, n, d)
    cols = _columns(rng, d, n_open + n + 2, n_open)
    rows = rng.permutation(n)[:10]
    return x, rows, cols, n_open


_ATTACH_CFG = {"attach_threshold": 0.5, "lenient_floor": 0.3, "size_cap": 4}


def _attach_rows(rng: np.random.Generator) -> Run:
    from xmemory_gpu.ops import attach_rows

    x, rows, cols, n_open = _attach_case(rng)

    def run(b: str) -> tuple:
        c = {k: v.copy() for k, v in cols.items()}
        label = np.full(x.shape[0], -1, np.int64)
        out = attach_rows(
            x,
            rows,
            c["sums"],
            c["counts"],
            c["alive"],
            c["ids"],
            label,
            n_open,
            10 + n_open,
            backend=b,
            **_ATTACH_CFG,
        )
        return out, c, label

    return run


def _attach_rows_batch(rng: np.random.Generator) -> Run:
    from xmemory_gpu.ops.attach import attach_rows_batch

    cases = [_attach_case(rng) for _ in range(3)]

    def run(b: str) -> tuple:
        items, edited = [], []
        for x, rows, cols, n_open in cases:
            c = {k: v.copy() for k, v in cols.items()}
            label = np.full(x.shape[0], -1, np.int64)
            items.append((x, rows, c["sums"], c["counts"], c["alive"], c["ids"], label, n_open, 10 + n_open))
            edited.append((c, label))
        return attach_rows_batch(items, backend=b, **_ATTACH_CFG), edited

    return run


_MERGE_CFG = {"tiny_size": 2, "merge_candidates": 1, "size_cap": 8, "pair_threshold": 0.8}


def _merge_pairs(rng: np.random.Generator) -> Run:
    from xmemory_gpu.ops.attach import merge_pairs

    live, idx, sim, counts = _theme_graph(rng, 25, 4)
    return lambda b: merge_pairs(live, idx, sim, counts, 25, k=4, backend=b, **_MERGE_CFG)


def _merge_pairs_batch(rng: np.random.Generator) -> Run:
    from xmemory_gpu.ops.attach import merge_pairs_batch

    items = []
    for n_slots in (25, 0, 12):
        live, idx, sim, counts = _theme_graph(rng, n_slots, 3)
        items.append((live, idx, sim, counts, rng.permutation(1000)[:n_slots].astype(np.int64), n_slots, 3))
    return lambda b: merge_pairs_batch(items, backend=b, **_MERGE_CFG)


def _pack_arrays(rng: np.random.Generator) -> Run:
    names, arrays = _arrays(rng)
    return lambda b: columns.pack_arrays(names, arrays, backend=b)


def _join_utf8(rng: np.random.Generator) -> Run:
    texts = _column_texts(rng)
    return lambda b: columns.join_utf8(texts, backend=b)


def _split_utf8(rng: np.random.Generator) -> Run:
    raw, off = columns.join_utf8(_column_texts(rng), backend="reference")
    return lambda b: columns.split_utf8(raw, off, backend=b)


def _container_views(rng: np.random.Generator) -> Run:
    from .test_columns import _views

    names, arrays = _arrays(rng)
    data = columns.pack_arrays(names, arrays, backend="reference")
    return lambda b: _views(data, b)


def _values_ok(rng: np.random.Generator) -> Run:
    """A slice whose checks fail (an id out of range): the reference never gives the fast yes (its
    caller's own checks then run), so the two can only be compared where the answer is no."""
    refs = [(rng.integers(0, 5, 8).astype(np.int64), 0, 4)]
    psg_msg = np.sort(rng.integers(0, 3, 6)).astype(np.int32)
    msg_psg = np.zeros(3, np.int32)
    finite = [rng.standard_normal(5).astype(np.float32)]
    times = [np.array([1.0, np.nan, 2.0])]
    return lambda b: columns.values_ok(refs, psg_msg, msg_psg, finite, times, 0.0, 10.0, [], backend=b)


def _add_rows_in_order(rng: np.random.Generator) -> Run:
    from xmemory_gpu.ops.rows import add_rows_in_order

    sums = rng.standard_normal((6, 9))
    x = rng.standard_normal((20, 9)).astype(np.float32)
    group, rows = rng.integers(0, 6, 30), rng.integers(0, 20, 30)

    def run(b: str) -> np.ndarray:
        out = sums.copy()
        add_rows_in_order(out, group, x, rows, backend=b)
        return out

    return run


def _live_rows(rng: np.random.Generator) -> Run:
    from xmemory_gpu.ops.rows import live_rows

    items = [
        (rng.random(cap) < 0.6, rng.standard_normal((cap, 5)), int(rng.integers(0, cap + 1)))
        for cap in (0, 7, 12)
    ]
    return lambda b: live_rows(items, 5, backend=b)


def _take_rows2(rng: np.random.Generator) -> Run:
    from xmemory_gpu.ops.rows import take_rows2

    a, c = rng.standard_normal((6, 4)), rng.standard_normal((3, 4))
    take = rng.integers(0, 9, 11)
    return lambda b: take_rows2(a, c, take, backend=b)


def _row_norms(rng: np.random.Generator) -> Run:
    from xmemory_gpu.ops.rows import row_norms

    x = rng.standard_normal((9, 300))
    return lambda b: row_norms(x, backend=b)


def _segment_sums(rng: np.random.Generator) -> Run:
    from xmemory_gpu.ops.rows import segment_sums

    off = np.array([0, 0, 1, 9, 200, 330], np.int64)
    v = rng.standard_normal(330)
    return lambda b: segment_sums(v, off, backend=b)


def _unit_rows(rng: np.random.Generator) -> Run:
    from xmemory_gpu.ops.rows import unit_rows

    x = rng.standard_normal((9, 137))
    x[3] = 0.0
    return lambda b: (unit_rows(x, backend=b), unit_rows(x, dtype=np.float32, backend=b))


def _dot4_gram(rng: np.random.Generator) -> Run:
    from xmemory_gpu.ops.rows import dot4_gram

    a, c = rng.standard_normal((5, 77)), rng.standard_normal((4, 77)).astype(np.float32)
    return lambda b: dot4_gram(a, c, backend=b)


def _drift_runs(rng: np.random.Generator) -> Run:
    from xmemory_gpu.ops.rows import drift_runs

    x = _unit(rng, 30, 40)
    hard = rng.random(30) < 0.1
    return lambda b: drift_runs(x, hard, 2, 0.2, backend=b)


def _blocks_case(rng: np.random.Generator) -> tuple:
    sizes = [0, 1, 14, 9]
    row_off = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    m, d = int(row_off[-1]), 10
    x = rng.standard_normal((m + 3, d))
    rows = rng.permutation(m + 3)[:m].astype(np.int64)
    labels = rng.choice(np.arange(6) * 3, m).astype(np.int64)
    return x, rows, labels, row_off


def _theme_sums(rng: np.random.Generator) -> Run:
    from xmemory_gpu.ops.objective.state import theme_sums

    x, rows, labels, row_off = _blocks_case(rng)
    return lambda b: theme_sums(x, rows, labels, row_off, backend=b)


def _top2_blocks(rng: np.random.Generator) -> Run:
    from xmemory_gpu.ops.objective.state import top2_blocks
    from xmemory_gpu.ops.rows import unit_rows

    off = np.array([0, 1, 5, 5, 13], np.int64)
    unit = unit_rows(rng.standard_normal((13, 8)), backend="reference")
    return lambda b: top2_blocks(unit, off, backend=b)


def _top2_update(rng: np.random.Generator) -> Run:
    from xmemory_gpu.ops.objective.state import top2_blocks, top2_update
    from xmemory_gpu.ops.rows import unit_rows

    off = np.array([0, 1, 5, 5, 19], np.int64)
    pool = rng.standard_normal((6, 8))  # repeated directions: tied cosines
    unit = unit_rows(pool[rng.integers(0, 6, 19)], backend="reference")
    fresh = rng.random(19) < 0.25
    prev_idx, prev_cos = top2_blocks(unit, off, backend="reference")  # some kept pairs stale below
    stale = rng.random(19) < 0.2
    prev_idx[stale] = np.roll(prev_idx[stale], 1, axis=1)
    return lambda b: top2_update(unit, off, fresh, prev_idx, prev_cos, backend=b)


def _f_blocks(rng: np.random.Generator) -> Run:
    from xmemory_gpu.ops.objective.state import f_blocks

    off = np.array([0, 1, 5, 5, 13], np.int64)
    counts = rng.integers(1, 9, 13).astype(np.int64)
    norms = counts * rng.uniform(0.2, 1.0, 13)
    s = rng.uniform(-1, 1, 13)
    n = np.array([int(counts[a:e].sum()) for a, e in zip(off[:-1], off[1:])], np.int64)
    return lambda b: f_blocks(norms, counts, s, off, n, 1e-8, backend=b)


def _topk_select(rng: np.random.Generator) -> Run:
    from xmemory_gpu.ops.knn.graph import _select

    sims = rng.integers(-3, 4, (6, 9)).astype(np.float32) / 4  # coarse: ties to the lower id
    shared = np.arange(9, dtype=np.int64) * 2
    per_row = np.stack([rng.permutation(20)[:9] for _ in range(6)]).astype(np.int64)  # distinct ids per row,
    empty = rng.random((6, 9)) < 0.2  # an empty entry: id -1, sim -inf
    per_row[empty] = -1
    sims_rows = np.where(empty, -np.inf, sims).astype(np.float32)
    return lambda b: (_select(sims, shared, 4, False, b), _select(sims_rows, per_row, 4, True, b))


def _offer_rows(rng: np.random.Generator) -> Run:
    from xmemory_gpu.ops.knn import KnnGraph

    x = rng.integers(-2, 3, (14, 6)).astype(np.float32)  # a coarse grid: equal similarities are common
    new = rng.integers(-2, 3, (5, 6)).astype(np.float32)

    def run(b: str) -> tuple:
        g = KnnGraph(x, 4, drop_nonpositive=True, backend=b)
        g.insert(new)
        return g.idx, g.sim

    return run


def _dedup_block(rng: np.random.Generator) -> Run:
    """Planted copies, near copies and identical candidates in one block, earlier blocks' bests for
    some rows, a zero and a NaN row; the decisions at three thresholds."""
    from xmemory_gpu.ops.dedup import dedup_block

    d, m = int(rng.choice([3, 16, 37])), 60
    base = _unit(rng, 20, d)
    src = rng.integers(0, 20, m)
    rows = base[src] + (rng.random((m, 1)) < 0.5) * rng.choice([0.0, 0.01, 0.1], (m, 1)) * _unit(rng, m, d)
    rows = (rows / np.linalg.norm(rows, axis=1, keepdims=True)).astype(np.float32)
    rows[[7, 30]] = rows[3]  # identical candidates
    rows[11], rows[41] = 0.0, np.nan
    has = rng.random(m) < 0.3
    best = np.where(has, rng.uniform(0.5, 1.0, m), -np.inf)
    arg = np.where(has, rng.integers(0, 25, m), -1).astype(np.int64)

    def run(b: str) -> list[np.ndarray]:
        with np.errstate(invalid="ignore"):
            return [dedup_block(rows @ rows.T, rows, best, arg, t, 25, backend=b) for t in (0.5, 0.92, 0.99)]

    return run


def _write_durable(rng: np.random.Generator) -> Run:
    """Two calls: 20 files in one folder (one sync of the file system on ``cpu``), one of them renamed
    onto a non-empty folder; then files in two folders, one missing. The files that land (name and
    bytes), what is left in the folders, and each call's error (type, errno, path)."""
    import tempfile
    from pathlib import Path

    from xmemory_gpu.ops.files import write_durable

    data = [rng.bytes(int(n)) for n in rng.integers(0, 5000, 24)]

    def run(b: str) -> tuple:
        errors = []
        with tempfile.TemporaryDirectory() as tmp:
            root = Path(tmp)
            for sub in ("a", "b", "a/f3"):
                (root / sub).mkdir()
            (root / "a/f3/x").write_bytes(b"")
            calls = [
                [(root / f"a/.f{i}.tmp", root / f"a/f{i}", data[i]) for i in range(20)],
                [
                    (root / f"{sub}/.g{i}.tmp", root / f"{sub}/g{i}", data[20 + i])
                    for i, sub in enumerate(("a", "b", "missing", "b"))
                ],
            ]
            for files in calls:
                try:
                    write_durable(files, threads=3, backend=b)
                except OSError as exc:
                    errors.append((type(exc).__name__, exc.errno, str(Path(exc.filename).relative_to(root))))
            tree = {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}
        return errors, tree

    return run


GENERATORS: dict[str, Callable[[np.random.Generator], Run]] = {
    "knn_graph": _knn_graph,
    "knn_search": _knn_search,
    "partition_objective": _partition_objective,
    "score_candidates": _score_candidates,
    "coverage_select": _coverage_select,
    "token_entropy_logprob": _token_entropy_logprob,
    "spherical_kmeans": _spherical_kmeans,
    "rowwise_linear": _rowwise_linear,
    "feature_counts": _feature_counts,
    "attach_rows": _attach_rows,
    "attach_rows_batch": _attach_rows_batch,
    "merge_pairs": _merge_pairs,
    "merge_pairs_batch": _merge_pairs_batch,
    "pack_arrays": _pack_arrays,
    "join_utf8": _join_utf8,
    "split_utf8": _split_utf8,
    "container_views": _container_views,
    "values_ok": _values_ok,
    "add_rows_in_order": _add_rows_in_order,
    "live_rows": _live_rows,
    "take_rows2": _take_rows2,
    "row_norms": _row_norms,
    "segment_sums": _segment_sums,
    "unit_rows": _unit_rows,
    "dot4_gram": _dot4_gram,
    "drift_runs": _drift_runs,
    "theme_sums": _theme_sums,
    "top2_blocks": _top2_blocks,
    "top2_update": _top2_update,
    "f_blocks": _f_blocks,
    "topk_select": _topk_select,
    "offer_rows": _offer_rows,
    "dedup_block": _dedup_block,
    "write_durable": _write_durable,
}


# ---- comparison ------------------------------------------------------------------------------------


def _leaves(out: Any, path: str = "out") -> list[tuple[str, Any]]:
    """The output's arrays and scalars with where each sits (tuples, lists and dicts walked; torch
    tensors as NumPy)."""
    if isinstance(out, dict):
        return [leaf for k, v in out.items() for leaf in _leaves(v, f"{path}[{k!r}]")]
    if isinstance(out, (tuple, list)) and not (out and isinstance(out[0], str)):
        return [leaf for i, v in enumerate(out) for leaf in _leaves(v, f"{path}[{i}]")]
    if type(out).__module__.startswith("torch"):
        out = out.detach().cpu().numpy()
    return [(path, out)]


def _assert_agree(op: str, got: Any, want: Any) -> None:
    a, b = _leaves(got), _leaves(want)
    assert [p for p, _ in a] == [p for p, _ in b], f"{op}: outputs of different structure"
    rtol, atol = TOLERANCE.get(op, (0.0, 0.0))
    for (path, g), (_, w) in zip(a, b):
        if isinstance(w, np.ndarray) or isinstance(g, np.ndarray):
            g, w = np.asarray(g), np.asarray(w)
            assert g.shape == w.shape, f"{op} {path}: shape {g.shape} != {w.shape}"
            if w.dtype.kind == "f" and (rtol or atol):
                np.testing.assert_allclose(g, w, rtol=rtol, atol=atol, equal_nan=True, err_msg=f"{op} {path}")
            else:
                assert g.dtype == w.dtype, f"{op} {path}: dtype {g.dtype} != {w.dtype}"
                if w.dtype.kind == "f":
                    assert g.tobytes() == w.tobytes(), f"{op} {path}: not the same bits"
                else:
                    np.testing.assert_array_equal(g, w, err_msg=f"{op} {path}")
        elif isinstance(w, float) and (rtol or atol):
            assert abs(g - w) <= atol + rtol * abs(w), f"{op} {path}: {g} != {w}"
        else:
            assert type(g) is type(w) and g == w, f"{op} {path}: {g!r} != {w!r}"


HOST_PAIRS = [op for op in registered_ops() if {"reference", "cpu"} <= set(implemented_backends(op))]


def test_every_op_with_reference_and_cpu_has_a_generator():
    missing = sorted(set(HOST_PAIRS) - set(GENERATORS))
    assert not missing, f"add an input generator to GENERATORS in {__name__} for: {', '.join(missing)}"
    assert not set(GENERATORS) - set(HOST_PAIRS), "a generator for an op without both reference and cpu"


@pytest.mark.skipif(not available_backends()["cpu"].available, reason="the C++ module is not built")
@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("op", HOST_PAIRS)
def test_reference_and_cpu_agree(op, seed):
    if op not in GENERATORS:
        pytest.fail(f"{op}: no input generator; add one to GENERATORS in {__name__}")
    run = GENERATORS[op](np.random.default_rng([seed, len(op)]))
    _assert_agree(op, run("cpu"), run("reference"))


# ---- the input contracts: ``accepts`` against both backends ----------------------------------------


def test_every_op_registers_accepts_and_cases():
    from xmemory_gpu.ops.backends import contract

    from .contract_cases import CASES, entries

    missing = sorted(op for op in registered_ops() if contract(op) is None)
    assert not missing, f"register(..., accepts=...) for: {', '.join(missing)}"
    no_cases = sorted(set(HOST_PAIRS) - set(CASES))
    assert not no_cases, (
        f"add in- and out-of-contract cases to tests/ops/contract_cases.py for: {', '.join(no_cases)}"
    )
    assert set(CASES) <= set(entries()), "a case generator without the op's public function"


def _run(fn: Callable[..., Any], call: Any, backend: str) -> tuple[Any, BaseException | None]:
    import copy

    args, kwargs = copy.deepcopy((call.args, call.kwargs))  # in-place ops edit their own copies
    try:
        return fn(*args, backend=backend, **kwargs), None
    except Exception as exc:  # noqa: BLE001 -- compared below
        return None, exc


@pytest.mark.skipif(not available_backends()["cpu"].available, reason="the C++ module is not built")
@pytest.mark.parametrize("op", HOST_PAIRS)
def test_out_of_contract_inputs_are_refused_alike(op):
    """The in-contract call satisfies ``accepts`` and runs on both; each out-of-contract call gets a
    reason from ``accepts`` and the same refusal (a ``ValueError`` unless documented) from reference
    and cpu."""
    from xmemory_gpu.ops.backends import contract

    from .contract_cases import CASES, entries

    if op == "token_entropy_logprob":
        pytest.importorskip("torch")
    accepts, fn = contract(op), entries()[op]
    ok, bad = CASES[op](np.random.default_rng(len(op)))
    assert accepts(*ok.args, **ok.kwargs) is None, f"{op}: accepts refuses the in-contract call"
    for b in HOST_BACKENDS:
        _, exc = _run(fn, ok, b)
        assert exc is None, f"{op} on {b}: the in-contract call raised {exc!r}"
    for label, call in bad.items():
        why = accepts(*call.args, **call.kwargs)
        assert isinstance(why, str) and why and "\n" not in why, f"{op} ({label}): accepts gave {why!r}"
        raised = {b: _run(fn, call, b)[1] for b in HOST_BACKENDS}
        for b, exc in raised.items():
            assert isinstance(exc, call.raises), (
                f"{op} ({label}) on {b}: expected {call.raises.__name__}, got {exc!r}"
            )
        assert type(raised["reference"]) is type(raised["cpu"]), f"{op} ({label}): {raised}"
