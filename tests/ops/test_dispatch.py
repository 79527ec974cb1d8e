"""The one ops contract (xmemory_gpu/ops/backends.py, devices.py, checks.py): the flat public surface,
what each op implements, backend resolution (validated GPU path first, then Triton), the
validated-backends table, host/device transfer, and input validation done once at each op's
dispatcher for every backend (one-line ValueErrors naming the argument)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from xmemory_gpu.ops import backends as bk
from xmemory_gpu.ops import checks as ck
from xmemory_gpu.ops import devices as dv
from xmemory_gpu.ops import validated as vt

HOST = [b for b in ("reference", "cpu", "triton") if bk.available_backends()[b].available]


def test_flat_surface():
    from xmemory_gpu.ops import (  # noqa: F401
        KnnGraph,
        available_backends,
        coverage_select,
        csr_offsets,
        knn_graph,
        knn_search,
        partition_objective,
        score_candidates,
        token_entropy_logprob,
    )

    assert csr_offsets([2, 0, 3]).tolist() == [0, 2, 2, 5]
    assert set(available_backends()) == set(bk.BACKENDS) == {"reference", "cpu", "triton", "cuda"}


def test_no_compatibility_shims():
    from pathlib import Path

    import xmemory_gpu.ops

    ops_dir = Path(xmemory_gpu.ops.__file__).parent
    for gone in ("_backend.py", "_dispatch.py", "_arrays.py"):
        assert not (ops_dir / gone).exists(), gone
    from xmemory_gpu.ops import coverage, knn, objective

    for mod, table in (
        (knn, "_GRAPH_IMPLS"),
        (knn, "_SEARCH_IMPLS"),
        (objective, "_OBJECTIVE"),
        (objective, "_SCORE"),
        (coverage, "_IMPLS"),
    ):
        assert not hasattr(mod, table), table
    from xmemory_gpu.ops import token_entropy_logprob

    with pytest.raises(ValueError, match="unknown backend 'torch'"):  # torch is an input kind, not a backend
        token_entropy_logprob(np.zeros((1, 2), np.float32), [0], backend="torch")


# ---- what each op implements ---------------------------------------------------------------------


def test_implemented_backends():
    from xmemory_gpu.ops import implemented_backends

    ops = (
        "knn_graph",
        "knn_search",
        "partition_objective",
        "score_candidates",
        "coverage_select",
        "token_entropy_logprob",
    )
    columns = ("pack_arrays", "join_utf8", "split_utf8", "container_views", "values_ok")
    rows = (
        "add_rows_in_order",
        "live_rows",
        "take_rows2",
        "row_norms",
        "segment_sums",
        "unit_rows",
        "dot4_gram",
        "drift_runs",
    )
    blocks = (
        "theme_sums",
        "top2_blocks",
        "top2_update",
        "f_blocks",
        "topk_select",
        "offer_rows",
    )  # the partition state's
    host_only = (
        "spherical_kmeans",
        "rowwise_linear",
        "feature_counts",
        "attach_rows",
        "attach_rows_batch",
        "merge_pairs",
        "merge_pairs_batch",
        "dedup_block",
        "write_durable",
        *columns,
        *rows,
        *blocks,
    )
    assert set(bk.registered_ops()) == set(ops) | set(host_only)  # blocks, the kNN graph's upkeep
    for op in ops:  # every family has all four (entropy's cpu / cuda are torch's compiled kernels)
        assert implemented_backends(op) == ("reference", "cpu", "triton", "cuda"), op
    assert implemented_backends("spherical_kmeans") == (
        "reference",
        "cpu",
    )  # host only: a theme is tens of rows
    assert implemented_backends("rowwise_linear") == (
        "reference",
        "cpu",
    )  # host only: the CPU encoder's layers
    assert implemented_backends("feature_counts") == ("reference", "cpu")  # host only: the hashing embedder
    assert implemented_backends("attach_rows") == ("reference", "cpu")  # host only: one memory's attach loop
    assert implemented_backends("attach_rows_batch") == (
        "reference",
        "cpu",
    )  # many memories' attach loops in one call
    for op in (*columns, *rows, *blocks, "merge_pairs", "merge_pairs_batch", "dedup_block", "write_durable"):
        assert implemented_backends(op) == ("reference", "cpu"), op  # host only: the store's files, the rows
    with pytest.raises(ValueError, match="unknown op 'knn'"):
        implemented_backends("knn")
    with pytest.raises(ValueError, match="unknown backends"):
        bk.register("bogus_op", "xmemory_gpu.ops.knn", {"torch": "torch"})
    assert "bogus_op" not in bk.registered_ops()
    assert callable(bk.implementation("knn_graph", "reference"))
    assert bk.gpu_preference("coverage_select") == bk.gpu_preference("coverage_select", ("triton", "cuda"))


# ---- resolution ----------------------------------------------------------------------------------


def _entry(op, backend, ms=1.0, passed=True):
    return vt.Validated(
        op=op,
        backend=backend,
        device="NVIDIA H100 80GB HBM3",
        date="2026-11-23",
        commit="abc",
        tests_passed=passed,
        median_ms=ms,
    )


def test_resolve_prefers_validated_then_triton(monkeypatch):
    monkeypatch.setattr(bk, "is_available", lambda name: True)
    monkeypatch.delenv("XMEMORY_BACKEND", raising=False)
    impl = ("reference", "cpu", "triton", "cuda")
    monkeypatch.setattr(vt, "table", lambda: ())
    assert bk.resolve_backend("knn_graph", "auto", impl, on_cuda=True) == "triton"  # nothing validated yet
    assert bk.resolve_backend("knn_graph", "auto", impl, on_cuda=False) == "cpu"
    monkeypatch.setattr(
        vt, "table", lambda: (_entry("knn_graph", "cuda"), _entry("score_candidates", "cuda", passed=False))
    )
    assert bk.resolve_backend("knn_graph", "auto", impl, on_cuda=True) == "cuda"
    assert bk.resolve_backend("knn_search", "auto", impl, on_cuda=True) == "triton"  # per op
    assert (
        bk.resolve_backend("score_candidates", "auto", impl, on_cuda=True) == "triton"
    )  # failed: not preferred
    monkeypatch.setattr(
        vt, "table", lambda: (_entry("knn_graph", "cuda", 2.0), _entry("knn_graph", "triton", 1.0))
    )
    assert (
        bk.resolve_backend("knn_graph", "auto", impl, on_cuda=True) == "triton"
    )  # both validated: the faster
    assert bk.resolve_backend("coverage_select", "auto", ("reference", "cpu", "cuda"), on_cuda=True) == "cuda"
    monkeypatch.setenv("XMEMORY_BACKEND", "reference")
    assert bk.resolve_backend("knn_graph", "auto", impl, on_cuda=True) == "reference"


def test_resolve_refuses_unknown_and_unusable(monkeypatch):
    with pytest.raises(ValueError, match="unknown backend"):
        bk.resolve_backend("knn_graph", "gpu", ("reference",), on_cuda=False)
    with pytest.raises(ValueError, match="not implemented"):
        bk.resolve_backend("knn_graph", "cuda", ("reference",), on_cuda=False)
    monkeypatch.setattr(bk, "is_available", lambda name: name == "reference")
    with pytest.raises(ValueError, match="inputs are CUDA tensors"):
        bk.resolve_backend("knn_graph", "auto", ("reference", "triton"), on_cuda=True)


# ---- the validated table -------------------------------------------------------------------------


def test_validated_table_ships_empty_and_merges(tmp_path):
    assert vt.load() == [] or all(e.tests_passed in (True, False) for e in vt.load())
    table = tmp_path / "validated.json"
    table.write_text(json.dumps({"schema": 1, "entries": []}))
    run = tmp_path / "results.json"
    entry = {
        "op": "knn_graph",
        "backend": "triton",
        "device": "NVIDIA H100",
        "date": "2026-11-23",
        "commit": "abc",
        "tests_passed": True,
        "median_ms": 1.5,
        "note": "",
    }
    run.write_text(json.dumps({"dry_run": False, "validated": [entry]}))
    out = vt.merge(run, table)
    assert [(e.op, e.backend) for e in out] == [("knn_graph", "triton")]
    assert vt.validated_backend("knn_graph", tuple(vt.load(table))).backend == "triton"
    run.write_text(json.dumps({"dry_run": True, "validated": [entry]}))
    with pytest.raises(ValueError, match="dry-run"):
        vt.merge(run, table)
    with pytest.raises(ValueError, match="missing"):
        vt.Validated.from_dict({"op": "knn_graph"})


def test_backends_cli_shows_the_table(capsys):
    import argparse

    from xmemory_gpu.cli import backends

    assert backends.run(argparse.Namespace(json=False)) == 0
    text = capsys.readouterr().out
    assert "validated on a GPU" in text and "score_candidates" in text and "auto on CUDA tensors" in text
    assert backends.run(argparse.Namespace(json=True)) == 0
    data = json.loads(capsys.readouterr().out)
    assert {"backends", "validated", "auto_gpu_order"} <= set(data)


# ---- validation helpers --------------------------------------------------------------------------


def test_check_helpers():
    with pytest.raises(ValueError, match=r"^x: NaN or inf in rows \[1, 3\]"):
        ck.check_finite("x", np.array([[0.0, 1], [np.nan, 0], [1, 1], [0, np.inf]]))
    with pytest.raises(ValueError, match=r"relevance: NaN or inf in entries \[0\]"):
        ck.check_finite("relevance", np.array([np.inf, 0.0]))
    with pytest.raises(ValueError, match="complex"):
        ck.check_real("x", np.ones(2, np.complex64))
    with pytest.raises(ValueError, match="k must be >= 1"):
        ck.check_k("k", 0)
    for bad in (2.7, 3.0, True, "3", None):
        with pytest.raises(ValueError, match="expected an integer"):
            ck.check_k("k", bad)
    assert ck.check_k("k", np.int64(3)) == 3 and ck.check_k("k", np.array(4)) == 4
    for bad in (0, -1e-3, float("nan"), float("inf"), "1e-8"):
        with pytest.raises(ValueError, match="eps"):
            ck.check_positive("eps", bad)
    with pytest.raises(ValueError, match="non-decreasing"):
        ck.check_offsets("offsets", [0, 3, 2, 4], 4)
    with pytest.raises(ValueError, match="end at the row count 5"):
        ck.check_offsets("offsets", [0, 3], 5)
    with pytest.raises(ValueError, match="integer offsets"):
        ck.check_offsets("offsets", [0.0, 3.0], 3)
    with pytest.raises(ValueError, match="labels: must be < 2147483648"):
        ck.check_labels("labels", np.array([0, 10**12]), 2)
    with pytest.raises(ValueError, match="labels: must be >= 0"):
        ck.check_labels("labels", np.array([0, -1]), 2)
    with pytest.raises(ValueError, match=r"nbr_idx: id 7 at \(1, 0\) outside \[0, 4\)"):
        ck.check_index("nbr_idx", np.array([[0, -1], [7, 1]]), np.array([4, 4]))
    with pytest.raises(ValueError, match="outside"):
        ck.check_index("nbr_idx", np.array([2**31 + 5]), 10)
    for dt in (
        np.int8,
        np.int32,
        np.int64,
        np.uint16,
        np.uint64,
    ):  # compared in their own dtype (unsigned widened)
        ids = np.array([[0, 3], [1, 2]], dtype=dt)
        assert ck.check_index("ids", ids, np.array([4, 3]), dtype=np.int32).dtype == np.int32
        with pytest.raises(ValueError, match=r"ids: id 3 at \(1, 0\) outside \[0, 3\)"):
            ck.check_index("ids", np.array([[0, 3], [3, 2]], dtype=dt), np.array([4, 3]))
    with pytest.raises(ValueError, match=r"id -2 at \(1,\) outside"):
        ck.check_index("ids", np.array([-1, -2], np.int32), 5)
    with pytest.raises(ValueError, match=r"id -1 at \(0,\) outside \[0, 5\)$"):
        ck.check_index("ids", np.array([-1], np.int32), 5, allow_missing=False)
    assert ck.check_index("ids", np.array([-1, 4], np.int16), 5).tolist() == [-1, 4]
    with pytest.raises(ValueError, match="budget: must be >= 0"):
        ck.check_budgets("budget", [-1, 2], 2)
    assert ck.check_budgets("budget", 3, 2).tolist() == [3, 3]


def test_check_helpers_on_torch_tensors():
    torch = pytest.importorskip("torch")
    x = torch.zeros(4, 3)
    x[2, 1] = float("nan")
    with pytest.raises(ValueError, match=r"x: NaN or inf in rows \[2\]"):
        ck.check_finite("x", x)
    with pytest.raises(ValueError, match="complex"):
        ck.check_real("x", torch.zeros(2, dtype=torch.complex64))
    assert ck.check_offsets("offsets", torch.tensor([0, 2, 4]), 4).dtype == np.int64


def test_tile_table():
    t = dv.tile_table(
        np.array([0, 5, 5, 40]), 16, weight=np.array([5, 0, 35]), skip=np.array([False, True, False])
    )
    assert (
        t.seg.tolist() == [2, 2, 2, 0]
        and t.row0.tolist() == [5, 21, 37, 0]
        and t.start.tolist() == [0, 1, 1, 4]
    )
    assert dv.tile_table(np.zeros(1, np.int64), 8).n == 0


def test_io_contract_kinds():
    torch = pytest.importorskip("torch")
    assert isinstance(dv.as_caller(torch.ones(2), np.zeros(1)), np.ndarray)
    assert isinstance(dv.as_caller(np.ones(2), torch.zeros(1)), torch.Tensor)
    assert isinstance(dv.to_backend(torch.ones(2), "cpu"), np.ndarray)
    if bk.available_backends()["triton"].available:
        assert isinstance(dv.to_backend(np.ones(2), "triton"), torch.Tensor)


# ---- every public op validates once, for every backend -------------------------------------------


@pytest.mark.parametrize("backend", HOST)
def test_knn_refuses_bad_input(rng, backend):
    from xmemory_gpu.ops import knn_graph, knn_search

    x = rng.standard_normal((8, 4)).astype(np.float32)
    off = np.array([0, 3, 8])
    bad = x.copy()
    bad[5, 2] = np.nan
    cases = [
        (lambda: knn_graph(bad, off, 2, backend=backend), r"x: NaN or inf in rows \[5\]"),
        (lambda: knn_graph(x.astype(np.complex64), off, 2, backend=backend), "x: .*complex"),
        (lambda: knn_graph(x, off, 2.7, backend=backend), "k: expected an integer"),
        (lambda: knn_graph(x, off, 0, backend=backend), "k must be >= 1"),
        (lambda: knn_graph(x, np.array([0, 9, 8]), 2, backend=backend), "offsets"),
        (lambda: knn_graph(x[0], off, 2, backend=backend), "x: expected a 2-D array"),
        (lambda: knn_search(x, off, bad, off, 2, backend=backend), r"x: NaN or inf in rows \[5\]"),
        (lambda: knn_search(x, np.array([0, 8]), x, off, 2, backend=backend), "same length"),
    ]
    for fn, msg in cases:
        with pytest.raises(ValueError, match=msg):
            fn()
    idx, _ = knn_graph(x, off, np.int64(2), backend=backend)  # a NumPy integer k is fine
    assert idx.shape == (8, 2)


@pytest.mark.parametrize("backend", HOST)
def test_objective_refuses_bad_input(rng, backend):
    from xmemory_gpu.ops import Candidates, PartitionState, partition_objective, score_candidates

    x = rng.standard_normal((6, 3))
    lab = np.array([0, 0, 1, 0, 2, 2])
    off = np.array([0, 3, 6])
    bad = x.copy()
    bad[4, 0] = np.inf
    cases = [
        (lambda: partition_objective(bad, lab, off, backend=backend), r"x: NaN or inf in rows \[4\]"),
        (lambda: partition_objective(x + 1j, lab, off, backend=backend), "complex"),
        (
            lambda: partition_objective(x, np.array([0, 0, 1, 0, 2, 10**12]), off, backend=backend),
            "labels: must be <",
        ),
        (lambda: partition_objective(x, -lab - 1, off, backend=backend), "labels: must be >= 0"),
        (lambda: partition_objective(x, lab[:5], off, backend=backend), "labels: expected shape"),
        (lambda: partition_objective(x, lab, off, eps=0.0, backend=backend), "eps"),
        (lambda: partition_objective(x, lab, off, eps=-1e-8, backend=backend), "eps"),
        (lambda: partition_objective(x, lab, np.array([0, 7, 6]), backend=backend), "offsets"),
    ]
    for fn, msg in cases:
        with pytest.raises(ValueError, match=msg):
            fn()
    state = PartitionState.from_labels(x, lab, off)
    good = Candidates.from_lists(state, [(1, [2], [np.array([4]), np.array([5])])])
    score_candidates(state, good, backend=backend)
    crafted = Candidates(
        memory=np.array([1]),
        rem_offsets=np.array([0, 1]),
        rem_rows=np.array([0]),
        add_offsets=np.array([0, 1]),
        group_offsets=np.array([0, 1]),
        members=np.array([4]),
    )
    with pytest.raises(ValueError, match="rem_rows: theme row 0 .* not a theme of its candidate's memory"):
        score_candidates(state, crafted, backend=backend)
    crafted.rem_rows, crafted.members = np.array([3]), np.array([99])
    with pytest.raises(ValueError, match="candidates.members: id 99"):
        score_candidates(state, crafted, backend=backend)
    crafted.memory = np.array([5])
    with pytest.raises(ValueError, match="candidates.memory: id 5"):
        score_candidates(state, crafted, backend=backend)


def test_entropy_refuses_complex_and_bad_ids():
    from xmemory_gpu.ops import token_entropy_logprob

    with pytest.raises(ValueError, match="logits: .*complex"):
        token_entropy_logprob(np.ones((2, 3), np.complex128), [0, 1])
    with pytest.raises(ValueError, match="token_ids"):
        token_entropy_logprob(np.ones((2, 3)), [0, 3])


def test_host_work_probes_no_gpu_stack(tmp_path):
    """A CPU build and search under ``auto`` probe the C++ backend only: torch and triton are not
    imported (their probe cost a hashing-encoder build 1.7 s of its theme stage)."""
    import subprocess
    import sys

    code = (
        "import sys\n"
        "from pathlib import Path\n"
        "from xmemory_gpu.construct.pipeline import build_store\n"
        "from xmemory_gpu.datasets.synthetic import generate_conversations, write_json\n"
        "from xmemory_gpu.embed import load_embedder\n"
        "from xmemory_gpu.retrieve.retriever import Retriever\n"
        "tmp = Path(sys.argv[1])\n"
        "data = write_json(generate_conversations(3, seed=1), tmp / 's.json')\n"
        "emb = load_embedder('hashing:64')\n"
        "build_store(data, tmp / 'store', embedder=emb, progress=False)\n"
        "r = Retriever.from_store(tmp / 'store', embedder=emb)\n"
        "mid = r.bank.memory_ids[0]\n"
        "for s in ('xmemory', 'naive-rag'):\n"
        "    assert r.search(['what happened?'], mid, strategy=s, budget_tokens=200)[0].units\n"
        "print(sorted(m for m in ('torch', 'triton') if m in sys.modules))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "[]", out.stdout + out.stderr
    assert bk.is_available("reference") and set(bk.available_backends()) == set(bk.BACKENDS)
