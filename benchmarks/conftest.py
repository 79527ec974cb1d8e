"""Benchmarks import their inputs and baselines from the tests (tests/ops/*_cases.py), so the
speed figures are measured on the same problems the correctness tests check.

Run: ``python -m pytest benchmarks/bench_knn.py --benchmark-columns=median,mean,stddev,rounds``
(one file at a time; each case states its shapes). Nothing here runs in CI.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
os.environ.setdefault("HF_HUB_OFFLINE", "1")


@pytest.fixture
def rng():
    import numpy as np

    return np.random.default_rng(int(os.environ.get("XMEM_BENCH_SEED", "0")))


def pytest_benchmark_update_json(config, benchmarks, output_json) -> None:
    """``--benchmark-json`` files name the CPU, not the host or the checkout."""
    output_json.get("machine_info", {}).pop("node", None)
    output_json.pop("commit_info", None)
