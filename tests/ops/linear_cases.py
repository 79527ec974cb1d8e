"""Inputs shared by tests/ops/test_linear.py and benchmarks/bench_linear.py: the sentence encoder's
dense-layer shapes (all-MiniLM-L6-v2: K, N in {384, 1536}) and activations of its scale."""

from __future__ import annotations

import numpy as np

# (K inputs, N outputs) of all-MiniLM-L6-v2's dense layers: attention q/k/v/out, FFN up, FFN down
ENCODER_LAYERS = ((384, 384), (384, 1536), (1536, 384))


def layer(
    rng: np.random.Generator, k: int, n: int, bias: bool = True
) -> tuple[np.ndarray, np.ndarray | None]:
    """(weight [n, k], bias [n] or None) float32 at a trained layer's scale (std ~ 1 / sqrt(k))."""
    w = (rng.standard_normal((n, k)) / np.sqrt(k)).astype(np.float32)
    return w, (rng.standard_normal(n).astype(np.float32) * 0.1 if bias else None)


def activations(rng: np.random.Generator, m: int, k: int) -> np.ndarray:
    """[m, k] float32 rows like an encoder's hidden states (unit-variance, a few large features)."""
    x = rng.standard_normal((m, k)).astype(np.float32)
    if k:
        x[:, rng.integers(0, k, size=max(1, k // 64))] *= 8
    return x
