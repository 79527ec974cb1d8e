"""CUDA-event timing shared by the GPU benchmark scripts (imported from this folder)."""

from __future__ import annotations

import statistics
from collections.abc import Callable

import torch


def cuda_ms(fn: Callable[[], object], reps: int = 30, warmup: int = 3) -> float:
    """Median milliseconds of fn() over ``reps`` runs, each timed with CUDA events after ``warmup`` runs."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        torch.cuda.synchronize()
        times.append(a.elapsed_time(b))
    return statistics.median(times)
