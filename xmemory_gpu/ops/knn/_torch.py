"""Torch helpers shared by the GPU backends of the kNN family (cuda, triton): unit rows, and the
search for k above the kernels' register top-k."""

from __future__ import annotations

import numpy as np


def unit_rows_f32(x):
    """x [n, d] torch, any float dtype -> float32 contiguous unit rows (zero rows stay zero)."""
    import torch

    x = x.detach().to(torch.float32)
    n = torch.linalg.vector_norm(x, dim=1, keepdim=True)
    return (x / torch.where(n > 0, n, torch.ones_like(n))).contiguous()


def search_wide_k(q, q_off: np.ndarray, x, x_off: np.ndarray, k: int, *, drop_nonpositive: bool = False):
    """``knn_search`` for k above the GPU kernels' register top-k (``MAX_K_GPU``): per segment that
    holds a query, one ``q @ x.T`` on the device and a stable descending sort (ties to the lower
    row, as every backend). q [Q, d], x [N, d] torch on one device -> idx [Q, k] int32 global rows,
    sim [Q, k] float32, padded with -1 / -inf."""
    import torch

    dev = q.device
    qn, xn = unit_rows_f32(q), unit_rows_f32(x)
    idx = torch.full((q.shape[0], k), -1, dtype=torch.int32, device=dev)
    sim = torch.full((q.shape[0], k), float("-inf"), dtype=torch.float32, device=dev)
    for b in np.flatnonzero((np.diff(q_off) > 0) & (np.diff(x_off) > 0)):
        qs, qe, xs, xe = int(q_off[b]), int(q_off[b + 1]), int(x_off[b]), int(x_off[b + 1])
        s, order = torch.sort(qn[qs:qe] @ xn[xs:xe].T, dim=1, descending=True, stable=True)
        m = min(k, xe - xs)
        s, order = s[:, :m], order[:, :m]
        keep = s > 0 if drop_nonpositive else torch.ones_like(s, dtype=torch.bool)
        idx[qs:qe, :m] = torch.where(keep, order + xs, -1).to(torch.int32)
        sim[qs:qe, :m] = torch.where(keep, s, float("-inf"))
    return idx, sim
