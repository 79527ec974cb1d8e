"""C++ CPU path of ``spherical_kmeans`` (``xmemory_gpu._C``, OpenMP across runs)."""

from __future__ import annotations

import numpy as np


def spherical_kmeans(
    x, offsets, segment, k, first, uniforms, *, iters: int = 12
) -> tuple[np.ndarray, np.ndarray]:
    """See ``ops.kmeans.spherical_kmeans`` (checked inputs)."""
    from ... import _C

    return _C.spherical_kmeans(x, offsets, segment, k, first, uniforms, iters)
