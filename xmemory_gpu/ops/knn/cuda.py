"""CUDA backend for the kNN family: thin torch wrappers over ``xmemory_gpu._cuda.knn_topk``.

Inputs are torch CUDA tensors and host int64 offsets, checked once by the dispatcher
(``ops/knn/__init__.py``: k in 1..64, finite rows, offsets); rows are L2-normalised here in float32 (zero rows stay zero). The binding
takes the tensors themselves (``__cuda_array_interface__``) and checks device, dtype, shape and
contiguity in C++ before the launch (csrc/cuda/knn_bind.cpp). The kernel runs on the current
stream of the input's device; outputs are torch CUDA tensors idx [*, k] int32 and sim [*, k]
float32 with the semantics of ``reference`` (ties to the lower row id, -1 / -inf padding).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..devices import host, tile_table
from ._torch import unit_rows_f32


def _topk(q, q_off: np.ndarray, x, x_off: np.ndarray, k: int, exclude_self: bool, drop_nonpositive: bool):
    """q [Q, d], x [N, d] unit float32 on one CUDA device; offsets [B+1] host int64 -> (idx, sim)."""
    import torch

    from ... import _cuda

    k = int(k)
    nq = q.shape[0]
    idx = torch.empty((nq, k), dtype=torch.int32, device=q.device)
    sim = torch.empty((nq, k), dtype=torch.float32, device=q.device)
    if nq == 0:
        return idx, sim
    tiles = tile_table(q_off, int(_cuda.KNN_QUERY_TILE))
    # one upload: [q_off (B+1) | x_off (B+1) | tile_start (B+1)], passed as three views
    meta = torch.from_numpy(np.concatenate([q_off, x_off, tiles.start])).to(q.device)
    qo, xo, ts = meta.view(3, -1).unbind(0)
    with torch.cuda.device(q.device):
        stream = torch.cuda.current_stream(q.device).cuda_stream
        _cuda.knn_topk(
            q, qo, x, xo, ts, int(tiles.start[-1]), exclude_self, drop_nonpositive, idx, sim, stream
        )
    return idx, sim


def knn_graph(x, offsets: Any, k: int, *, drop_nonpositive: bool = False):
    """x [N, d] CUDA tensor, offsets [B+1] -> idx [N, k] int32 global rows, sim [N, k] float32 (self excluded)."""
    xn = unit_rows_f32(x)
    off = host(offsets, np.int64)
    return _topk(xn, off, xn, off, k, True, drop_nonpositive)


def knn_search(q, q_offsets: Any, x, x_offsets: Any, k: int, *, drop_nonpositive: bool = False):
    """q [Q, d] vs x [N, d] CUDA tensors, segment b of q against segment b of x -> idx [Q, k] int32, sim [Q, k]."""
    return _topk(
        unit_rows_f32(q),
        host(q_offsets, np.int64),
        unit_rows_f32(x),
        host(x_offsets, np.int64),
        k,
        False,
        drop_nonpositive,
    )


__all__ = ["knn_graph", "knn_search"]
