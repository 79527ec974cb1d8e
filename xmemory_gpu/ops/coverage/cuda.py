"""CUDA backend for Eq. 4 greedy coverage selection: a thin torch wrapper over
``xmemory_gpu._cuda.coverage_select`` (one thread block per query; picks equal the reference's).

Takes the inputs the dispatcher hands it (``ops/coverage/__init__.py``, where they are checked
once: offsets and budgets on the host; nbr_idx int32, nbr_w float32 [M, k] and relevance float64
[M] as torch tensors on the device, or host arrays, uploaded here), runs on their CUDA device (or the
current one) and stream, and returns host arrays (sel_offsets int64, selected int32, values
float64). The binding checks every tensor's device, dtype, shape and contiguity in C++ before the
launch (``csrc/include/xmemory/checks.h``).
"""

from __future__ import annotations

import numpy as np

from ..devices import host, is_torch


def coverage_select(cand_offsets, nbr_idx, nbr_w, relevance, alpha, budgets, target, stop="count"):
    """cand_offsets [Q+1] int64, nbr_idx / nbr_w [M, k] int32 / float32, relevance [M] float64,
    budgets [Q] int64 -> (sel_offsets [Q+1] int64, selected [S] int32, values [S] float64)."""
    off = host(cand_offsets, np.int64).reshape(-1)
    q = off.shape[0] - 1
    m = int(off[-1])
    bud = np.broadcast_to(host(budgets, np.int64), (q,))
    if m >= 2**31 - 1:  # a limit of the kernel's int32 positions, not an input check
        raise ValueError("cuda coverage_select: more than 2^31 - 2 candidates")
    sizes = np.diff(off)
    cap = np.minimum(np.maximum(bud, 0), sizes)  # picks a query can make
    cap_off = np.zeros(q + 1, dtype=np.int64)
    np.cumsum(cap, out=cap_off[1:])
    if cap_off[-1] == 0:  # nothing to pick: no device work
        return np.zeros(q + 1, dtype=np.int64), np.zeros(0, dtype=np.int32), np.zeros(0, dtype=np.float64)

    import torch

    from ... import _cuda

    on_gpu = is_torch(relevance) and relevance.is_cuda
    dev = relevance.device if on_gpu else torch.device("cuda", torch.cuda.current_device())

    def dev_t(a, dt):  # device tensors stay where they are; host arrays are uploaded
        t = a if is_torch(a) else torch.from_numpy(np.ascontiguousarray(a))
        return t.to(device=dev, dtype=dt).contiguous()

    idx_t, w_t = dev_t(nbr_idx, torch.int32), dev_t(nbr_w, torch.float32)
    if idx_t.ndim != 2:  # [M] -> [M, 1] (a [M, 0] input must already be 2-D)
        idx_t, w_t = idx_t.reshape(m, -1), w_t.reshape(m, -1)
    rel_t = dev_t(relevance, torch.float64).reshape(m)
    k = int(idx_t.shape[1])
    max_n = int(sizes.max())
    meta = torch.from_numpy(np.concatenate([off, cap_off])).to(dev)  # [cand_offsets | cap_offsets]
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
    _cuda.coverage_select(
        meta[: q + 1],
        idx_t,
        w_t,
        rel_t,
        meta[q + 1 :],
        idx2,
        w2,
        state,
        sel,
        val,
        counts,
        float(alpha),
        float(target),
        stop,
        max_n,
        stream,
    )
    cnt = counts.cpu().numpy().astype(np.int64)
    sel_h, val_h = sel.cpu().numpy(), val.cpu().numpy()
    sel_off = np.zeros(q + 1, dtype=np.int64)
    np.cumsum(cnt, out=sel_off[1:])
    # compact: query i's picks sit at cap_off[i] .. cap_off[i] + cnt[i]
    gather = np.repeat(cap_off[:-1] - sel_off[:-1], cnt) + np.arange(sel_off[-1], dtype=np.int64)
    return sel_off, sel_h[gather].astype(np.int32), val_h[gather].astype(np.float64)


__all__ = ["coverage_select"]
