"""Triton backend for Eq. 4 greedy coverage selection: one program per query (semantics:
``reference.py``; picks, values and stop decisions equal the reference's).

The host builds a tile table (``devices.tile_table``: one program per query with something to
pick, the largest queries first) and clips each budget to the query's candidate count
(``cap_offsets``: where each query writes its picks). Each program:

1. setup, over ``BLOCK_N`` tiles of its candidates: removes repeated, out-of-range and (from the
   self entry's position) self neighbours, keeping each neighbour's largest weight at its first
   position (``idx2`` / ``w2`` scratch), flags candidates that list themselves, and takes the
   min / max relevance; then ``rel~`` and ``Z``, the latter summed sequentially in the reference's
   order (candidate by candidate, entries in order), so it is bit-equal;
2. per greedy step, over the tiles: each candidate's gain summed over its entries in entry order
   (adding 0.0 for covered ones leaves a float sum unchanged, so it is the reference's sum bit for
   bit), ``v = alpha * (gain / Z) + (1 - alpha) * rel~`` in float64, the tile's best (ties to the
   lowest position) merged into the running best; then the pick is recorded, its entries marked
   covered, and the stop rule (``count`` or ``weight``) applied.

State (covered / chosen flags, ``rel~``) lives in global scratch, one row per query, read by the
gather of each step (L1/L2-resident at these sizes: ~40 candidates per query in Stage I); a
register-resident variant for queries that fit one tile is not written. FMA contraction is turned
off on a GPU (``enable_fp_fusion=False``) so the float64 arithmetic rounds as the reference's.
Interpreter-tested (``TRITON_INTERPRET=1``), not run on a GPU.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import triton
import triton.language as tl

from ..backends import interpreting_triton
from ..devices import gpu_device, is_torch, tile_table


@triton.jit
def _coverage_kernel(
    prog_q_ptr,
    off_ptr,
    cap_ptr,
    idx_ptr,
    w_ptr,
    rel_ptr,
    idx2_ptr,
    w2_ptr,
    selfl_ptr,
    reln_ptr,
    cov_ptr,
    chosen_ptr,
    sel_ptr,
    val_ptr,
    cnt_ptr,
    par_ptr,
    COUNT_STOP: tl.constexpr,
    K: tl.constexpr,
    BLOCK_N: tl.constexpr,
):
    q = tl.load(prog_q_ptr + tl.program_id(0)).to(tl.int64)
    s = tl.load(off_ptr + q)
    n = (tl.load(off_ptr + q + 1) - s).to(tl.int32)
    cs = tl.load(cap_ptr + q)
    cap = (tl.load(cap_ptr + q + 1) - cs).to(tl.int32)
    alpha = tl.load(par_ptr)  # float64 (a Python float argument would be float32)
    target = tl.load(par_ptr + 1)
    ar = tl.arange(0, BLOCK_N)

    # 1. setup: dedup with the largest weight, self flag, flags cleared, min / max relevance
    lo = tl.full([BLOCK_N], float("inf"), tl.float64)
    hi = tl.full([BLOCK_N], float("-inf"), tl.float64)
    for t in range(0, n, BLOCK_N):
        rows = t + ar
        live = rows < n
        g = s + rows
        selfl = tl.zeros([BLOCK_N], tl.int8)
        for j in tl.static_range(K):
            u = tl.load(idx_ptr + g * K + j, mask=live, other=-1)
            wj = tl.load(w_ptr + g * K + j, mask=live, other=0.0)
            ok = live & (u >= 0) & (u < n)
            first = ok
            wmax = wj
            for jj in tl.static_range(K):
                uu = tl.load(idx_ptr + g * K + jj, mask=live, other=-1)
                ww = tl.load(w_ptr + g * K + jj, mask=live, other=0.0)
                same = ok & (uu == u)
                if jj < j:
                    first = first & (uu != u)
                wmax = tl.where(same, tl.maximum(wmax, ww), wmax)
            tl.store(idx2_ptr + g * K + j, tl.where(first, u, -1), mask=live)
            tl.store(w2_ptr + g * K + j, wmax, mask=live)
            selfl = tl.where(ok & (u == rows), 1, selfl).to(tl.int8)
        tl.store(selfl_ptr + g, selfl, mask=live)
        tl.store(cov_ptr + g, tl.zeros([BLOCK_N], tl.int8), mask=live)
        tl.store(chosen_ptr + g, tl.zeros([BLOCK_N], tl.int8), mask=live)
        r = tl.load(rel_ptr + g, mask=live, other=0.0)
        lo = tl.where(live, tl.minimum(lo, r), lo)
        hi = tl.where(live, tl.maximum(hi, r), hi)
    rlo = tl.min(lo, axis=0)
    rhi = tl.max(hi, axis=0)
    tl.debug_barrier()
    for t in range(0, n, BLOCK_N):
        rows = t + ar
        live = rows < n
        r = tl.load(rel_ptr + s + rows, mask=live, other=0.0)
        rn = tl.where(rhi > rlo, (r - rlo) / tl.where(rhi > rlo, rhi - rlo, 1.0), 0.5)
        tl.store(reln_ptr + s + rows, rn, mask=live)
    tl.debug_barrier()
    # Z, sequentially in the reference's order (scalar loop: setup only)
    z = tl.zeros([], tl.float64)
    for i in range(0, n):
        gi = s + i
        for j in tl.static_range(K):
            u = tl.load(idx2_ptr + gi * K + j)
            wj = tl.load(w2_ptr + gi * K + j).to(tl.float64)
            z = tl.where((u >= 0) & (wj > 0), z + wj, z)
        z = tl.where(tl.load(selfl_ptr + gi) == 0, z + 1.0, z)
    z = tl.where(z > 0, z, 1.0)
    beta = 1.0 - alpha

    # 2. greedy steps
    npicks = tl.zeros([], tl.int32)
    ncov = tl.zeros([], tl.int32)
    credited = tl.zeros([], tl.float64)
    done = cap <= 0
    while not done:
        best_v = tl.full([], float("-inf"), tl.float64)
        best_p = tl.full([], -1, tl.int32)
        best_g = tl.zeros([], tl.float64)
        for t in range(0, n, BLOCK_N):
            rows = t + ar
            live = rows < n
            g = s + rows
            gain = tl.zeros([BLOCK_N], tl.float64)
            for j in tl.static_range(K):
                u = tl.load(idx2_ptr + g * K + j, mask=live, other=-1)
                wj = tl.load(w2_ptr + g * K + j, mask=live, other=0.0).to(tl.float64)
                cu = tl.load(cov_ptr + s + u, mask=live & (u >= 0), other=1)
                gain = gain + tl.where((u >= 0) & (cu == 0), wj, 0.0)
            own = tl.load(cov_ptr + g, mask=live, other=1)
            sl = tl.load(selfl_ptr + g, mask=live, other=1)
            gain = gain + tl.where((sl == 0) & (own == 0), 1.0, 0.0)
            rn = tl.load(reln_ptr + g, mask=live, other=0.0)
            ch = tl.load(chosen_ptr + g, mask=live, other=1)
            v = alpha * (gain / z) + beta * rn
            v = tl.where(live & (ch == 0), v, float("-inf"))
            tv = tl.max(v, axis=0)
            tp = tl.min(tl.where((v == tv) & live & (ch == 0), rows, 2147483647), axis=0)
            tg = tl.sum(tl.where(rows == tp, gain, 0.0), axis=0)
            better = (tp < 2147483647) & (tv > best_v)
            best_v = tl.where(better, tv, best_v)
            best_p = tl.where(better, tp, best_p)
            best_g = tl.where(better, tg, best_g)
        nopick = (best_p < 0) | (best_v <= 0.0)
        if nopick:
            done = nopick
        else:
            tl.store(sel_ptr + cs + npicks, best_p)
            tl.store(val_ptr + cs + npicks, best_v)
            tl.store(chosen_ptr + s + best_p, 1)
            gp = s + best_p
            newly = tl.where(tl.load(cov_ptr + gp) == 0, 1, 0)
            tl.debug_barrier()
            tl.store(cov_ptr + gp, 1)
            for j in tl.static_range(K):
                u = tl.load(idx2_ptr + gp * K + j)
                if u >= 0:
                    if u != best_p:
                        cu = tl.load(cov_ptr + s + u)
                        newly += tl.where(cu == 0, 1, 0)
                        tl.store(cov_ptr + s + u, 1)
            tl.debug_barrier()
            ncov += newly
            credited += best_g
            npicks += 1
            if COUNT_STOP:
                done = (ncov == n) | ((target < 1.0) & (ncov.to(tl.float64) / n.to(tl.float64) >= target))
            else:
                done = credited / z >= target
            done = done | (npicks >= cap)
    tl.store(cnt_ptr + q, npicks)


def _next_pow2(v: int) -> int:
    return 1 << max(int(v) - 1, 0).bit_length()


def coverage_select(
    cand_offsets: np.ndarray,
    nbr_idx: Any,
    nbr_w: Any,
    relevance: Any,
    alpha: float,
    budgets: np.ndarray,
    target: float,
    stop: str = "count",
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Inputs as the dispatcher hands them, checked there (offsets and budgets on the host; nbr_idx int32,
    nbr_w float32 [M, k] and relevance float64 [M] torch tensors on the device, or host arrays) ->
    (sel_offsets [Q+1] int64, selected [S] int32, values [S] float64) as host arrays."""
    import torch

    off = np.asarray(cand_offsets, np.int64)
    q = off.size - 1
    sizes = np.diff(off)
    cap = np.minimum(np.maximum(np.asarray(budgets, np.int64), 0), sizes)
    cap_off = np.zeros(q + 1, np.int64)
    np.cumsum(cap, out=cap_off[1:])
    if cap_off[-1] == 0:
        return np.zeros(q + 1, np.int64), np.zeros(0, np.int32), np.zeros(0, np.float64)
    dev = relevance.device if is_torch(relevance) else gpu_device("triton")
    m = int(off[-1])

    def dev_t(a: Any, dt: torch.dtype) -> torch.Tensor:
        t = a if isinstance(a, torch.Tensor) else torch.from_numpy(np.ascontiguousarray(a))
        return t.to(device=dev, dtype=dt).contiguous()

    idx = dev_t(nbr_idx, torch.int32).reshape(m, -1)
    w = dev_t(nbr_w, torch.float32).reshape(m, -1)
    k = int(idx.shape[1])
    rel = dev_t(relevance, torch.float64).reshape(m)
    table = tile_table(off, max(int(sizes.max()), 1), weight=sizes, skip=cap == 0)
    prog_q = dev_t(table.seg, torch.int32)
    off_t, cap_t = dev_t(off, torch.int64), dev_t(cap_off, torch.int64)
    idx2 = torch.empty((m, k), dtype=torch.int32, device=dev)
    w2 = torch.empty((m, k), dtype=torch.float32, device=dev)
    selfl = torch.empty(m, dtype=torch.int8, device=dev)
    reln = torch.empty(m, dtype=torch.float64, device=dev)
    cov = torch.empty(m, dtype=torch.int8, device=dev)
    chosen = torch.empty(m, dtype=torch.int8, device=dev)
    total = int(cap_off[-1])
    sel = torch.empty(total, dtype=torch.int32, device=dev)
    val = torch.empty(total, dtype=torch.float64, device=dev)
    cnt = torch.zeros(q, dtype=torch.int32, device=dev)
    block = min(max(_next_pow2(int(sizes.max())), 16), 256)
    extra = {} if interpreting_triton() else {"enable_fp_fusion": False}
    _coverage_kernel[(table.n,)](
        prog_q,
        off_t,
        cap_t,
        idx,
        w,
        rel,
        idx2,
        w2,
        selfl,
        reln,
        cov,
        chosen,
        sel,
        val,
        cnt,
        dev_t(np.array([alpha, target], np.float64), torch.float64),
        COUNT_STOP=stop == "count",
        K=k,
        BLOCK_N=block,
        **extra,
    )
    counts = cnt.cpu().numpy().astype(np.int64)
    sel_h, val_h = sel.cpu().numpy(), val.cpu().numpy()
    sel_off = np.zeros(q + 1, np.int64)
    np.cumsum(counts, out=sel_off[1:])
    gather = np.repeat(cap_off[:-1] - sel_off[:-1], counts) + np.arange(sel_off[-1], dtype=np.int64)
    return sel_off, sel_h[gather].astype(np.int32), val_h[gather].astype(np.float64)


__all__ = ["coverage_select"]
