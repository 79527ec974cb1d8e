"""CUDA backend for Eq. 4 greedy coverage selection: a thin torch wrapper over
``xmemory_gpu._cuda.coverage_select`` (one thread block per query; picks equal the reference's).

Takes the validated arrays the dispatcher passes (``ops/coverage/__init__.py``; offsets and budgets
on the host, the others host or device), runs on the current CUDA device and stream, and returns
host arrays (sel_offsets int64, selected int32, values float64). The binding checks every tensor's
device, dtype, shape and contiguity in C++ before the launch (``csrc/include/xmemory/checks.h``).
"""

from __future__ import annotations

from typing import Any

import numpy as np


def _host(a: Any, dtype) -> np.ndarray:
    if type(a).__module__.startswith("torch"):
        a = a.detach().cpu().numpy()
    a = np.ascontiguousarray(np.asarray(a, dtype=dtype))
    return a if a.flags.writeable else a.copy()  # torch.from_numpy warns on read-only arrays


def coverage_select(cand_offsets, nbr_idx, nbr_w, relevance, alpha, budgets, target, stop="count"):
    """cand_offsets [Q+1] int64, nbr_idx / nbr_w [M, k] int32 / float32, relevance [M] float64,
    budgets [Q] int64 -> (sel_offsets [Q+1] int64, selected [S] int32, values [S] float64)."""
    off = _host(cand_offsets, np.int64).reshape(-1)
    rel = _host(relevance, np.float64).reshape(-1)
    m, q = rel.shape[0], off.shape[0] - 1
    idx, w = _host(nbr_idx, np.int32), _host(nbr_w, np.float32)
    if idx.ndim != 2:  # [M] -> [M, 1] (a [M, 0] input must already be 2-D)
        idx, w = idx.reshape(m, -1), w.reshape(m, -1)
    bud = np.broadcast_to(_host(budgets, np.int64), (q,))
    if q < 0 or off[0] != 0 or off[-1] != m or np.any(np.diff(off) < 0) or idx.shape != w.shape:
        raise ValueError("cuda coverage_select: bad cand_offsets or neighbour shapes")
    if m >= 2**31 - 1:
        raise ValueError("cuda coverage_select: more than 2^31 - 2 candidates")
    sizes = np.diff(off)
    cap = np.minimum(np.maximum(bud, 0), sizes)  # picks a query can make
    cap_off = np.zeros(q + 1, dtype=np.int64)
    np.cumsum(cap, out=cap_off[1:])
    if cap_off[-1] == 0:  # nothing to pick: no device work
        return np.zeros(q + 1, dtype=np.int64), np.zeros(0, dtype=np.int32), np.zeros(0, dtype=np.float64)

    import torch

    from ... import _cuda

    dev = torch.device("cuda", torch.cuda.current_device())
    k = idx.shape[1]
    max_n = int(sizes.max())
    meta = torch.from_numpy(np.concatenate([off, cap_off])).to(dev)  # [cand_offsets | cap_offsets]
    idx_t = torch.from_numpy(idx).to(dev)
    w_t = torch.from_numpy(w).to(dev)
    rel_t = torch.from_numpy(rel).to(dev)
    idx2 = torch.empty((m, k), dtype=torch.int32, device=dev)  # deduplicated neighbour ids
    w2 = torch.empty((m, k), dtype=torch.float32, device=dev)  # their largest weights
    state = None
    if max_n > _cuda.COVERAGE_SHARED_MAX_N:  # per-query state in global memory instead of shared
        state = torch.empty(m * int(_cuda.COVERAGE_STATE_BYTES), dtype=torch.uint8, device=dev)
    total = int(cap_off[-1])
    sel = torch.empty(total, dtype=torch.int32, device=dev)
    val = torch.empty(total, dtype=torch.float64, device=dev)
    counts = torch.empty(q, dtype=torch.int32, device=dev)
    stream = torch.cuda.current_stream(dev).cuda_stream
    _cuda.coverage_select(meta[: q + 1], idx_t, w_t, rel_t, meta[q + 1 :], idx2, w2, state, sel, val, counts,
                          float(alpha), float(target), stop, max_n, stream)
    cnt = counts.cpu().numpy().astype(np.int64)
    sel_h, val_h = sel.cpu().numpy(), val.cpu().numpy()
    sel_off = np.zeros(q + 1, dtype=np.int64)
    np.cumsum(cnt, out=sel_off[1:])
    # compact: query i's picks sit at cap_off[i] .. cap_off[i] + cnt[i]
    gather = np.repeat(cap_off[:-1] - sel_off[:-1], cnt) + np.arange(sel_off[-1], dtype=np.int64)
    return sel_off, sel_h[gather].astype(np.int32), val_h[gather].astype(np.float64)


__all__ = ["coverage_select"]
