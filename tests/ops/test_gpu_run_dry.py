"""benchmarks/gpu/run.sh --dry-run end to end on the CPU (Triton interpreter, tiny sizes, no CUDA
launch): the one-command GPU validation cannot rot between GPU sessions."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytest.importorskip("torch")
pytest.importorskip("triton")


def test_run_sh_dry_run(tmp_path):
    env = {**os.environ, "OUT": str(tmp_path), "PYTHON": sys.executable, "TRITON_INTERPRET": "1"}
    proc = subprocess.run(["bash", str(ROOT / "benchmarks/gpu/run.sh"), "--dry-run"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    res = json.loads((tmp_path / "results.json").read_text())
    assert res["dry_run"] is True and res["validated"] == []  # a dry run validates nothing
    ops = {(c["op"], c["backend"]) for c in res["checks"]}
    assert {("knn_graph", "triton"), ("partition_objective", "triton"), ("score_candidates", "triton"),
            ("token_entropy_logprob", "triton")} <= ops
    assert all(c["passed"] for c in res["checks"]), res["checks"]
    assert all("median_ms" in b for b in res["benchmarks"]), res["benchmarks"]
    assert all(e["tests_passed"] is False for e in res["would_validate"])
    md = (tmp_path / "results.md").read_text()
    assert "DRY RUN" in md and "| op | backend |" in md and "of roofline" in md
