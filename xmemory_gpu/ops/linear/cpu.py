"""C++ CPU path of ``rowwise_linear`` (``xmemory_gpu._C``: the 6 x 32 FMA-chain micro-kernel of every
ISA and a 12 x 32 AVX-512 one with the same chains, OpenMP across row blocks and 32-column panels)."""

from __future__ import annotations

import numpy as np

_NO_BIAS = np.zeros(0, np.float32)


def kernel_built() -> bool:
    """True when the built module has the dense-layer kernel."""
    from ... import _C

    return hasattr(_C, "rowwise_linear")


def pack_panels(w: np.ndarray) -> np.ndarray:
    """W [N, K] float32 as the kernel's [ceil(N / 32), K, 32] zero-padded column panels."""
    from ... import _C

    return _C.pack_linear_weight(w)


def rowwise_linear(x: np.ndarray, layer) -> np.ndarray:
    """See ``ops.linear.rowwise_linear`` (checked inputs, packed panels)."""
    from ... import _C

    n = layer.shape[0]
    return _C.rowwise_linear(x, layer.panels, n, _NO_BIAS if layer.bias is None else layer.bias)
