"""Problem sizes of the benchmark suites, scaled by ``XMEM_BENCH_SCALE`` (default 1: the sizes the
docstrings state and RESULTS reports). ``scripts/bench.sh`` runs every suite at a small scale so
that all of them print their tables within minutes on a laptop; its figures are for a first look,
not for comparison with RESULTS."""

from __future__ import annotations

import os

SCALE = float(os.environ.get("XMEM_BENCH_SCALE", "1"))


def scaled(n: int, lo: int = 1) -> int:
    """``n`` times the scale, rounded, at least ``lo``."""
    return max(lo, round(n * SCALE))


def label(n: int) -> str:
    """``n`` as the tables print it (``10,000``)."""
    return f"{n:,}"


__all__ = ["SCALE", "label", "scaled"]
