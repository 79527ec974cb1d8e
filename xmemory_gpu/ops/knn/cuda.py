"""CUDA backend for the kNN family: thin torch wrappers over ``xmemory_gpu._cuda.knn_topk``.

Inputs are torch CUDA tensors (offsets may be NumPy int64 or torch tensors on any device); rows
are L2-normalised here in float32 (zero rows stay zero). The kernel runs on the current stream of
the input's device; outputs are torch CUDA tensors idx [*, k] int32 and sim [*, k] float32 with
the semantics of ``reference`` (ties to the lower row id, -1 / -inf padding).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ._torch import host_offsets, unit_rows_f32


def _topk(q, q_off: np.ndarray, x, x_off: np.ndarray, k: int, exclude_self: bool, drop_nonpositive: bool):
    """q [Q, d], x [N, d] unit float32 on one CUDA device; offsets [B+1] host int64 -> (idx, sim)."""
    import torch

    from ... import _cuda

    k = int(k)
    if not 1 <= k <= _cuda.KNN_MAX_K:
        raise ValueError(f"cuda knn: k must be in 1..{_cuda.KNN_MAX_K}, got {k}")
    if not (q.is_cuda and x.is_cuda and q.device == x.device):
        raise ValueError("cuda knn: q and x must be CUDA tensors on the same device")
    if q.ndim != 2 or x.ndim != 2 or q.shape[1] != x.shape[1]:
        raise ValueError(f"cuda knn: expected q [Q, d] and x [N, d], got {tuple(q.shape)} and {tuple(x.shape)}")
    nq, nx, d = q.shape[0], x.shape[0], q.shape[1]
    if len(q_off) != len(x_off) or q_off[0] != 0 or q_off[-1] != nq or x_off[0] != 0 or x_off[-1] != nx:
        raise ValueError("cuda knn: offsets must be [B+1] CSR over the rows of q and x")
    if np.any(np.diff(q_off) < 0) or np.any(np.diff(x_off) < 0):
        raise ValueError("cuda knn: offsets must be non-decreasing")
    if max(nq, nx) >= 2**31 - 1:
        raise ValueError("cuda knn: row ids must fit int32")
    idx = torch.empty((nq, k), dtype=torch.int32, device=q.device)
    sim = torch.empty((nq, k), dtype=torch.float32, device=q.device)
    if nq == 0:
        return idx, sim
    tile = int(_cuda.KNN_QUERY_TILE)
    tiles = (np.diff(q_off) + tile - 1) // tile
    tile_start = np.zeros(len(q_off), dtype=np.int64)
    np.cumsum(tiles, out=tile_start[1:])
    nseg = len(q_off) - 1
    # one upload: [q_off (B+1) | x_off (B+1) | tile_start (B+1)]
    meta = torch.from_numpy(np.concatenate([q_off, x_off, tile_start])).to(q.device)
    base, step = meta.data_ptr(), 8 * len(q_off)
    with torch.cuda.device(q.device):
        stream = torch.cuda.current_stream(q.device).cuda_stream
        _cuda.knn_topk(q.data_ptr(), base, x.data_ptr(), base + step, base + 2 * step, nseg, int(tile_start[-1]),
                       d, k, exclude_self, drop_nonpositive, idx.data_ptr(), sim.data_ptr(), stream)
    return idx, sim


def knn_graph(x, offsets: Any, k: int, *, drop_nonpositive: bool = False):
    """x [N, d] CUDA tensor, offsets [B+1] -> idx [N, k] int32 global rows, sim [N, k] float32 (self excluded)."""
    xn = unit_rows_f32(x)
    off = host_offsets(offsets)
    return _topk(xn, off, xn, off, k, True, drop_nonpositive)


def knn_search(q, q_offsets: Any, x, x_offsets: Any, k: int, *, drop_nonpositive: bool = False):
    """q [Q, d] vs x [N, d] CUDA tensors, segment b of q against segment b of x -> idx [Q, k] int32, sim [Q, k]."""
    return _topk(unit_rows_f32(q), host_offsets(q_offsets), unit_rows_f32(x), host_offsets(x_offsets), k, False, drop_nonpositive)


__all__ = ["knn_graph", "knn_search"]
