"""benchmarks/gpu/run.sh --dry-run end to end on the CPU (Triton interpreter, tiny sizes, no CUDA
launch): the one-command GPU validation cannot rot between runs on a GPU."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]

pytest.importorskip("torch")
pytest.importorskip("triton")

# Triton 3.6's interpreter breaks with numpy 2.4 and later (pyproject.toml pins numpy below it); an
# image with a newer numpy (a GPU machine's) cannot run the dry runs, and its GPU runs need none
interpreter_numpy = pytest.mark.skipif(
    tuple(int(x) for x in np.__version__.split(".")[:2]) >= (2, 4),
    reason="Triton 3.6's interpreter needs numpy < 2.4",
)


@interpreter_numpy
def test_run_sh_dry_run(tmp_path):
    env = {**os.environ, "OUT": str(tmp_path), "PYTHON": sys.executable, "TRITON_INTERPRET": "1"}
    proc = subprocess.run(
        ["bash", str(ROOT / "benchmarks/gpu/run.sh"), "--dry-run"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=1800,
    )  # a hang guard only: minutes on a loaded machine
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    res = json.loads((tmp_path / "results.json").read_text())
    assert res["dry_run"] is True and res["validated"] == []  # a dry run validates nothing
    ops = {(c["op"], c["backend"]) for c in res["checks"]}
    assert {
        ("knn_graph", "triton"),
        ("partition_objective", "triton"),
        ("score_candidates", "triton"),
        ("token_entropy_logprob", "triton"),
    } <= ops
    assert all(c["passed"] for c in res["checks"]), res["checks"]
    assert all("median_ms" in b for b in res["benchmarks"]), res["benchmarks"]
    assert all(e["tests_passed"] is False for e in res["would_validate"])
    md = (tmp_path / "results.md").read_text()
    assert "DRY RUN" in md and "| op | backend |" in md and "of roofline" in md


@interpreter_numpy
def test_host_share_dry_run(tmp_path):
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    proc = subprocess.run(
        [
            sys.executable,
            str(ROOT / "benchmarks/gpu/host_share.py"),
            "--out",
            str(tmp_path),
            "--dry-run",
            "--reps",
            "1",
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=1800,
    )  # a hang guard only
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    rows = json.loads((tmp_path / "host_share.json").read_text())
    calls = {(r["op"], r["impl"]) for r in rows}
    assert {
        ("coverage_select", "input validation alone"),
        ("coverage_select", "cpu host inputs"),
        ("score_candidates", "cpu host state"),
    } <= calls
    assert all(r["wall_ms"] > 0 for r in rows)


def test_end_to_end_store_comparison():
    sys.path.insert(0, str(ROOT / "benchmarks/gpu"))
    from end_to_end import compare_stores

    stats = {"n_themes": 3, "lineage": {"4": [1, 2]}, "f_P": 1.25}
    a = {"m0": ("f0", stats), "m1": ("f1", stats), "m2": ("f2", stats)}
    b = {
        "m0": ("f0", stats),
        "m1": ("g1", {**stats, "f_P": 1.25 * (1 + 1e-12)}),
        "m2": ("g2", {**stats, "lineage": {"4": [1, 3]}, "f_P": 1.5}),
    }
    got = compare_stores(a, b)
    assert got["same_ids"] and got["same_bytes"] == 1 and got["same_structure"] == 2
    assert 0 < got["max_rel_fP_same_structure"] < 1e-11 and got["max_rel_fP_other"] == pytest.approx(
        0.25 / 1.5
    )
