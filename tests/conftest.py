"""Test setup. TRITON_INTERPRET must be set before anything imports triton (sentence-transformers
does), so Triton kernels run in the CPU interpreter on machines with no NVIDIA GPU."""

from __future__ import annotations

import os
from pathlib import Path

if "TRITON_INTERPRET" not in os.environ and not Path("/dev/nvidia0").exists():
    os.environ["TRITON_INTERPRET"] = "1"
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import numpy as np  # noqa: E402
import pytest  # noqa: E402

SHARED = Path(__file__).resolve().parents[1].parent / "shared"
LOCOMO_DEV = Path(os.environ.get("XMEM_LOCOMO", SHARED / "data" / "locomo" / "locomo_dev.json"))


def pytest_report_header(config) -> list[str]:
    return [
        f"xmemory test seed: {_SEED} (set XMEM_TEST_SEED to repeat)",
        f"TRITON_INTERPRET={os.environ.get('TRITON_INTERPRET', '')}",
    ]


_SEED = int(os.environ.get("XMEM_TEST_SEED", np.random.SeedSequence().entropy % (2**31)))


@pytest.fixture
def rng(request) -> np.random.Generator:
    """A fresh generator per test, seeded from the run's seed and the test's name (reported in the header)."""
    return np.random.default_rng([_SEED, abs(hash(request.node.nodeid)) % (2**31)])


@pytest.fixture(scope="session")
def locomo_path() -> Path:
    if not LOCOMO_DEV.exists():
        pytest.skip(f"LoCoMo dev split not found at {LOCOMO_DEV} (set XMEM_LOCOMO)")
    return LOCOMO_DEV


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory) -> Path:
    """A tiny randomly initialised Llama (``tests/tiny_llm.py``) saved once per test session."""
    from tiny_llm import make_tiny_llama

    return make_tiny_llama(tmp_path_factory.mktemp("tiny-llama"))


@pytest.fixture(autouse=True)
def _check_kept_rows(monkeypatch):
    """Every store diff a growth's kept rows shorten is compared with the diff of every row."""
    from xmemory_gpu.memory import deltas

    monkeypatch.setattr(deltas, "CHECK_KEPT", True)
