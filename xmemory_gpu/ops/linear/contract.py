"""``rowwise_linear``'s input contract: the checks its dispatcher runs before any backend (and that
``csrc/cpu/linear.cpp`` makes again: x [M, K] with the packed weight's K), as the check and the
``accepts`` predicate (None in contract, else a one-line reason naming the argument). x need not be
finite (an encoder's activations pass through as they are)."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..checks import check_float_matrix, reason
from ..devices import host
from .packed import PackedLinear


def linear_inputs(x: Any, layer: Any) -> np.ndarray:
    """x [M, K] real as C-contiguous float32, ``layer`` a ``PackedLinear`` of K inputs."""
    if not isinstance(layer, PackedLinear):
        raise ValueError(
            f"layer: expected a PackedLinear (ops.linear.pack_linear), got {type(layer).__name__}"
        )
    a = np.ascontiguousarray(host(check_float_matrix("x", x, finite=False)), dtype=np.float32)
    k = layer.shape[1]
    if a.shape[1] != k:
        raise ValueError(f"x: expected rows of {k} inputs (the layer's K), got {a.shape[1]}")
    return a


def accepts_rowwise_linear(x: Any, layer: Any, *, backend: str = "auto") -> str | None:
    """x [M, K] real (any values), layer a PackedLinear of K inputs."""
    return reason(linear_inputs, x, layer)


__all__ = ["accepts_rowwise_linear", "linear_inputs"]
