"""Float64 NumPy reference of ``rowwise_linear`` (tolerance checks; no batch-invariance promise)."""

from __future__ import annotations

import numpy as np


def rowwise_linear(x: np.ndarray, layer) -> np.ndarray:
    """See ``ops.linear.rowwise_linear`` (checked inputs): x @ W^T + b in float64, rounded to float32."""
    y = x.astype(np.float64) @ layer.weight.T.astype(np.float64)
    if layer.bias is not None:
        y += layer.bias
    return y.astype(np.float32)
