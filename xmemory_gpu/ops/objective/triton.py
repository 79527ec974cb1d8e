"""Triton backend for f(P): batched ``partition_objective`` and incremental ``score_candidates``.

Same semantics and arithmetic as ``cuda.py`` / csrc/cuda/objective.cu (closed form from per-theme
sums, counts and the kept top-2, all in float64), ragged-first like ops/knn/triton.py. An *item* is
a candidate edit (the memory's kept themes minus the removed ones, plus new groups) or, for
``partition_objective``, a whole segment whose themes are all new groups. Item c owns the *slots*
``slot_off[c] .. slot_off[c+1]``: its memory's theme rows first, then its new groups. Three
launches:

1. ``_group_sums_kernel`` (one program per group): S_g = sum of the members' unit rows, |S_g|.
2. ``_slot_s_kernel`` (one program per ``BLOCK_T`` slots of one item, over a tile table, heaviest
   items first): s of each slot = max cosine to the item's other live themes. A kept theme starts
   from its kept top-2 (the first one not removed) and only compares against new groups, unless
   both of its top-2 were removed: then it compares against every live theme. New groups compare
   against every live theme. Column tiles of kept themes are skipped when no row of the tile needs
   them. A lone theme gets s = 0. Writes s, cohesion |S|/n and n per slot to global scratch
   (removed slots get n = 0).
3. ``_finish_kernel`` (one program per item): median and MAD of s by rank selection over tiles
   (value of rank r = the v_i with #{v < v_i} <= r < #{v <= v_i}: exact with ties, no sort, any
   slot count), then f = N^2 / (K sum n_k^2) + (1/K) sum cohesion_k g(s_k).

State: each program keeps a [BLOCK_T] row tile and a [BLOCK_T, BLOCK_T, BLOCK_D] product tile in
registers; per-slot values (3 float64 each) live in global scratch, so any number of themes per
memory works. Dots are float64 broadcast-multiply-and-sum (no ``tl.dot``: no fp64 tensor-core
assumption). Runtime sizes are kernel arguments; only block sizes and the mode specialise.

Not run on a GPU yet (interpreter-tested). Expected GPU bottleneck: the kept x new and new x new
cosines (3 * BLOCK_T**2 * d float64 FLOPs per column tile on the FP64 units; a split of a theme
among K kept themes costs ~K * parts * d multiply-adds), and for ``partition_objective`` the
quadratic all-pairs pass over a segment's themes.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np
import triton
import triton.language as tl

from ..checks import csr_offsets
from ..devices import gpu_device, host, is_torch, tile_table

_INTERPRET = os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")


def _config() -> tuple[int, int, int, int]:
    """(BLOCK_T, BLOCK_D, BLOCK_M, num_warps)."""
    if _INTERPRET:  # the interpreter pays per operation, not per element: large tiles
        return 32, 32, 32, 4
    # ptxas -v for sm_90a (offline compile, not run): 106 registers, no spills for the slot kernel at
    # (16, 16) with 8 warps; 4 warps spill (168 registers), BLOCK_T = 32 needs 184+
    return 16, 16, 32, 8


@triton.jit
def _group_sums_kernel(
    x_ptr, go_ptr, mb_ptr, gs_ptr, gn_ptr, d, BLOCK_M: tl.constexpr, BLOCK_D: tl.constexpr
):
    """gs[g, :] = sum of x[members[go[g]:go[g+1]], :] (unit rows), gn[g] = |gs[g, :]|."""
    g = tl.program_id(0).to(tl.int64)
    m0 = tl.load(go_ptr + g)
    m1 = tl.load(go_ptr + g + 1)
    offs_m = tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, BLOCK_D)
    sq = tl.zeros([BLOCK_D], dtype=tl.float64)
    for d0 in range(0, d, BLOCK_D):
        dd = d0 + offs_d
        dmask = dd < d
        acc = tl.zeros([BLOCK_D], dtype=tl.float64)
        for j in range(m0, m1, BLOCK_M):
            mm = j + offs_m
            mmask = mm < m1
            rows = tl.load(mb_ptr + mm, mask=mmask, other=0)
            v = tl.load(
                x_ptr + rows[:, None] * d + dd[None, :], mask=mmask[:, None] & dmask[None, :], other=0.0
            )
            acc += tl.sum(v, axis=0)
        tl.store(gs_ptr + g * d + dd, acc, mask=dmask)
        sq += acc * acc
    tl.store(gn_ptr + g, tl.sqrt(tl.sum(sq, axis=0)))


@triton.jit
def _slot_vectors(i, slot_ok, kb, t0, g0, ts_ptr, gs_ptr, dd, dmask, d):
    """Rows of the slots i [T] (kept theme rows, then new groups) for the d-chunk dd -> [T, BLOCK_D]."""
    kept = i < kb
    tr = tl.where(kept, t0 + i, 0)
    gr = tl.where(kept, 0, g0 + i - kb)
    a = tl.load(
        ts_ptr + tr[:, None] * d + dd[None, :], mask=(slot_ok & kept)[:, None] & dmask[None, :], other=0.0
    )
    b = tl.load(
        gs_ptr + gr[:, None] * d + dd[None, :], mask=(slot_ok & ~kept)[:, None] & dmask[None, :], other=0.0
    )
    return a + b


@triton.jit
def _slot_norms(i, slot_ok, kb, t0, g0, tn_ptr, gn_ptr):
    kept = i < kb
    a = tl.load(tn_ptr + tl.where(kept, t0 + i, 0), mask=slot_ok & kept, other=0.0)
    b = tl.load(gn_ptr + tl.where(kept, 0, g0 + i - kb), mask=slot_ok & ~kept, other=0.0)
    return a + b


@triton.jit
def _slot_s_kernel(
    tile_item_ptr,
    tile_i0_ptr,
    mem_ptr,
    to_ptr,
    ts_ptr,
    tn_ptr,
    tc_cnt_ptr,
    ti_ptr,
    tcos_ptr,
    ao_ptr,
    go_ptr,
    gs_ptr,
    gn_ptr,
    slot_off_ptr,
    removed_ptr,
    s_ptr,
    coh_ptr,
    cnt_ptr,
    d,
    CANDIDATES: tl.constexpr,
    BLOCK_T: tl.constexpr,
    BLOCK_D: tl.constexpr,
):
    pid = tl.program_id(0)
    c = tl.load(tile_item_ptr + pid).to(tl.int64)
    i0 = tl.load(tile_i0_ptr + pid)
    so = tl.load(slot_off_ptr + c)
    slots = tl.load(slot_off_ptr + c + 1) - so
    g0 = tl.load(ao_ptr + c)
    if CANDIDATES:
        b = tl.load(mem_ptr + c)
        t0 = tl.load(to_ptr + b)
        kb = tl.load(to_ptr + b + 1) - t0
    else:
        t0 = g0 * 0
        kb = g0 * 0
    NEG: tl.constexpr = float("-inf")
    offs_t = tl.arange(0, BLOCK_T).to(tl.int64)
    offs_d = tl.arange(0, BLOCK_D)
    i = i0 + offs_t
    in_i = i < slots
    rem_i = tl.load(removed_ptr + so + i, mask=in_i, other=1) != 0
    live_i = in_i & ~rem_i
    new_i = live_i & (i >= kb)
    base = tl.full([BLOCK_T], NEG, tl.float64)
    need = new_i
    if CANDIDATES:
        kept_i = live_i & (i < kb)
        u = tl.where(kept_i, t0 + i, 0)
        n1 = tl.load(ti_ptr + 2 * u, mask=kept_i, other=-1)
        n2 = tl.load(ti_ptr + 2 * u + 1, mask=kept_i, other=-1)
        r1 = tl.load(removed_ptr + so + tl.where(n1 >= 0, n1 - t0, 0), mask=kept_i & (n1 >= 0), other=1) != 0
        r2 = tl.load(removed_ptr + so + tl.where(n2 >= 0, n2 - t0, 0), mask=kept_i & (n2 >= 0), other=1) != 0
        c1 = tl.load(tcos_ptr + 2 * u, mask=kept_i, other=NEG)
        c2 = tl.load(tcos_ptr + 2 * u + 1, mask=kept_i, other=NEG)
        use1 = (n1 >= 0) & ~r1
        use2 = ~use1 & (n2 >= 0) & ~r2
        base = tl.where(kept_i & use1, c1, tl.where(kept_i & use2, c2, NEG))
        recompute = kept_i & ~use1 & ~use2 & (n1 >= 0)  # both kept neighbours removed
        need = need | recompute
    norm_i = _slot_norms(i, live_i, kb, t0, g0, tn_ptr, gn_ptr)
    need_kept_cols = tl.max(need.to(tl.int32), axis=0) > 0  # some row compares against every live theme
    kept_rows = (
        tl.max((live_i & ~new_i).to(tl.int32), axis=0) > 0
    )  # some kept row compares against new groups
    j_start = tl.where(need_kept_cols, 0, (kb // BLOCK_T) * BLOCK_T)
    if need_kept_cols | kept_rows:
        best = tl.full([BLOCK_T], NEG, tl.float64)
        for j0 in range(j_start, slots, BLOCK_T):
            j = j0 + offs_t
            in_j = j < slots
            live_j = in_j & (tl.load(removed_ptr + so + j, mask=in_j, other=1) == 0)
            new_j = live_j & (j >= kb)
            dot = tl.zeros([BLOCK_T, BLOCK_T], dtype=tl.float64)
            for d0 in range(0, d, BLOCK_D):
                dd = d0 + offs_d
                dmask = dd < d
                a = _slot_vectors(i, live_i, kb, t0, g0, ts_ptr, gs_ptr, dd, dmask, d)
                bv = _slot_vectors(j, live_j, kb, t0, g0, ts_ptr, gs_ptr, dd, dmask, d)
                dot += tl.sum(a[:, None, :] * bv[None, :, :], axis=2)
            norm_j = _slot_norms(j, live_j, kb, t0, g0, tn_ptr, gn_ptr)
            den = norm_i[:, None] * norm_j[None, :]
            cos = tl.where(den > 0.0, dot / tl.where(den > 0.0, den, 1.0), 0.0)
            pair = live_i[:, None] & live_j[None, :] & (i[:, None] != j[None, :])
            pair = pair & (need[:, None] | new_j[None, :])
            best = tl.maximum(best, tl.max(tl.where(pair, cos, NEG), axis=1))
        base = tl.maximum(base, best)
    s = tl.where(base == NEG, 0.0, base)  # a lone theme: s = 0
    kept = i < kb
    cnt_k = tl.load(tc_cnt_ptr + tl.where(kept, t0 + i, 0), mask=live_i & kept, other=0).to(tl.float64)
    gi = tl.where(kept, 0, g0 + i - kb)
    cnt_g = (
        tl.load(go_ptr + gi + 1, mask=live_i & ~kept, other=0)
        - tl.load(go_ptr + gi, mask=live_i & ~kept, other=0)
    ).to(tl.float64)
    cnt = tl.where(kept, cnt_k, cnt_g)
    cnt = tl.where(live_i, cnt, 0.0)
    coh = tl.where(live_i & (cnt > 0.0), norm_i / tl.where(cnt > 0.0, cnt, 1.0), 0.0)
    tl.store(s_ptr + so + i, s, mask=in_i)
    tl.store(coh_ptr + so + i, coh, mask=in_i)
    tl.store(cnt_ptr + so + i, cnt, mask=in_i)


@triton.jit
def _rank_values(v_ptr, cnt_ptr, so, slots, r_lo, r_hi, center, ABS: tl.constexpr, BLOCK_T: tl.constexpr):
    """Values of ranks r_lo and r_hi (0-based, ascending) among the live slots' v (|v - center| when ABS)."""
    NEG: tl.constexpr = float("-inf")
    offs = tl.arange(0, BLOCK_T).to(tl.int64)
    lo = tl.full([BLOCK_T], NEG, tl.float64)
    hi = tl.full([BLOCK_T], NEG, tl.float64)
    for i0 in range(0, slots, BLOCK_T):
        i = i0 + offs
        live_i = tl.load(cnt_ptr + so + i, mask=i < slots, other=0.0) > 0.0
        vi = tl.load(v_ptr + so + i, mask=live_i, other=0.0)
        if ABS:
            vi = tl.abs(vi - center)
        lt = tl.zeros([BLOCK_T], dtype=tl.int64)
        le = tl.zeros([BLOCK_T], dtype=tl.int64)
        for j0 in range(0, slots, BLOCK_T):
            j = j0 + offs
            live_j = tl.load(cnt_ptr + so + j, mask=j < slots, other=0.0) > 0.0
            vj = tl.load(v_ptr + so + j, mask=live_j, other=0.0)
            if ABS:
                vj = tl.abs(vj - center)
            lt += tl.sum((live_j[None, :] & (vj[None, :] < vi[:, None])).to(tl.int64), axis=1)
            le += tl.sum((live_j[None, :] & (vj[None, :] <= vi[:, None])).to(tl.int64), axis=1)
        lo = tl.maximum(lo, tl.where(live_i & (lt <= r_lo) & (r_lo < le), vi, NEG))
        hi = tl.maximum(hi, tl.where(live_i & (lt <= r_hi) & (r_hi < le), vi, NEG))
    return tl.max(lo, axis=0), tl.max(hi, axis=0)


@triton.jit
def _finish_kernel(
    mem_ptr,
    node_off_ptr,
    slot_off_ptr,
    s_ptr,
    coh_ptr,
    cnt_ptr,
    eps_ptr,
    out_ptr,
    CANDIDATES: tl.constexpr,
    BLOCK_T: tl.constexpr,
):
    c = tl.program_id(0).to(tl.int64)
    if CANDIDATES:
        b = tl.load(mem_ptr + c)
    else:
        b = c
    n_nodes = (tl.load(node_off_ptr + b + 1) - tl.load(node_off_ptr + b)).to(tl.float64)
    so = tl.load(slot_off_ptr + c)
    slots = tl.load(slot_off_ptr + c + 1) - so
    eps = tl.load(eps_ptr)
    offs = tl.arange(0, BLOCK_T).to(tl.int64)
    nv_acc = tl.zeros([BLOCK_T], dtype=tl.int64)
    sq_acc = tl.zeros([BLOCK_T], dtype=tl.float64)
    for i0 in range(0, slots, BLOCK_T):
        i = i0 + offs
        cnt = tl.load(cnt_ptr + so + i, mask=i < slots, other=0.0)
        nv_acc += (cnt > 0.0).to(tl.int64)
        sq_acc += cnt * cnt
    nv = tl.sum(nv_acc, axis=0)
    sq = tl.sum(sq_acc, axis=0)
    res = n_nodes * 0.0  # float64, as in the branch below
    if (nv > 0) & (n_nodes > 0.0):
        r_lo = (nv - 1) // 2
        r_hi = nv // 2
        a, bb = _rank_values(s_ptr, cnt_ptr, so, slots, r_lo, r_hi, 0.0, False, BLOCK_T)
        m = 0.5 * (a + bb)
        a2, b2 = _rank_values(s_ptr, cnt_ptr, so, slots, r_lo, r_hi, m, True, BLOCK_T)
        sigma = 0.5 * (a2 + b2) + eps
        sem_acc = tl.zeros([BLOCK_T], dtype=tl.float64)
        for i0 in range(0, slots, BLOCK_T):
            i = i0 + offs
            live = tl.load(cnt_ptr + so + i, mask=i < slots, other=0.0) > 0.0
            s = tl.load(s_ptr + so + i, mask=live, other=0.0)
            coh = tl.load(coh_ptr + so + i, mask=live, other=0.0)
            z = s - m
            sem_acc += tl.where(live, coh * tl.exp(-(z * z) / (2.0 * sigma * sigma)), 0.0)
        k = nv.to(tl.float64)
        res = n_nodes * n_nodes / (k * sq) + tl.sum(sem_acc, axis=0) / k
    tl.store(out_ptr + c, res)


# ---- host glue (torch on the kernels' device) ----------------------------------------------------


def _i64(t, a) -> Any:
    torch = _torch()
    if is_torch(a):
        return a.to(device=t, dtype=torch.int64).contiguous()
    return torch.from_numpy(np.ascontiguousarray(np.asarray(a, dtype=np.int64))).to(t)


def _f64(t, a) -> Any:
    torch = _torch()
    if is_torch(a):
        return a.to(device=t, dtype=torch.float64).contiguous()
    return torch.from_numpy(np.ascontiguousarray(np.asarray(a, dtype=np.float64))).to(t)


def _torch():
    import torch

    return torch


def _unit_rows(x):
    torch = _torch()
    n = torch.linalg.vector_norm(x, dim=1, keepdim=True)
    return torch.where(n > 0, x / torch.where(n > 0, n, torch.ones_like(n)), torch.zeros_like(x)).contiguous()


def _group_sums(xu, group_offsets, members, n_groups: int):
    """gsum [G, d], gnorm [G] float64 of the unit rows ``xu`` over CSR groups."""
    torch = _torch()
    d = int(xu.shape[1])
    gs = torch.zeros((n_groups, d), dtype=torch.float64, device=xu.device)
    gn = torch.zeros(n_groups, dtype=torch.float64, device=xu.device)
    if n_groups:
        _, block_d, block_m, warps = _config()
        _group_sums_kernel[(n_groups,)](
            xu, group_offsets, members, gs, gn, d, BLOCK_M=block_m, BLOCK_D=block_d, num_warps=warps
        )
    return gs, gn


def _score_items(
    *,
    candidates: bool,
    n_items: int,
    slots: np.ndarray,
    mem,
    node_off,
    to,
    ts,
    tn,
    tcnt,
    ti,
    tcos,
    ao,
    go,
    gs,
    gn,
    removed,
    eps: float,
    d: int,
    dev,
):
    """Launch the slot and finish kernels over ``n_items`` items with ``slots`` [C] slots each -> f [C]."""
    torch = _torch()
    out = torch.zeros(n_items, dtype=torch.float64, device=dev)
    if n_items == 0:
        return out
    block_t, block_d, _, warps = _config()
    slot_off = csr_offsets(slots)
    total = int(slot_off[-1])
    s = torch.empty(max(total, 1), dtype=torch.float64, device=dev)
    coh = torch.empty_like(s)
    cnt = torch.zeros_like(s)
    so_t = _i64(dev, slot_off)
    tiles = tile_table(slot_off, block_t, weight=slots, skip=slots == 0)
    if tiles.n:
        _slot_s_kernel[(tiles.n,)](
            _i64(dev, tiles.seg),
            _i64(dev, tiles.row0 - slot_off[tiles.seg]),
            mem,
            to,
            ts,
            tn,
            tcnt,
            ti,
            tcos,
            ao,
            go,
            gs,
            gn,
            so_t,
            removed,
            s,
            coh,
            cnt,
            d,
            CANDIDATES=candidates,
            BLOCK_T=block_t,
            BLOCK_D=block_d,
            num_warps=warps,
        )
    eps_t = torch.tensor([float(eps)], dtype=torch.float64, device=dev)
    _finish_kernel[(n_items,)](
        mem, node_off, so_t, s, coh, cnt, eps_t, out, CANDIDATES=candidates, BLOCK_T=block_t, num_warps=warps
    )
    return out


def partition_objective(x, labels: Any, offsets: Any, *, eps: float = 1e-8):
    """f [B] float64 (torch, on x's device) of each CSR segment's partition.

    x [N, d] torch (any float dtype; normalised here in float64), labels [N] non-negative ints local
    to each segment, offsets [B+1] host int64 (validated by the dispatcher).
    """
    torch = _torch()
    dev = x.device
    off = np.asarray(host(offsets), dtype=np.int64)
    nseg = off.size - 1
    n = int(x.shape[0])
    if nseg <= 0 or n == 0:
        return torch.zeros(max(nseg, 0), dtype=torch.float64, device=dev)
    xu = _unit_rows(x.detach().to(torch.float64))
    lab = _i64(dev, labels).reshape(-1)
    off_t = _i64(dev, off)
    # dense theme ids ordered by (segment, label), members in row order (as the CPU and CUDA paths)
    seg = torch.repeat_interleave(torch.arange(nseg, device=dev), off_t[1:] - off_t[:-1])
    uniq, linv = torch.unique(lab, return_inverse=True)
    nl = int(uniq.numel())
    tkey, tinv = torch.unique(seg * nl + linv, return_inverse=True)
    k = int(tkey.numel())
    theme_off = torch.searchsorted(tkey // nl, torch.arange(nseg + 1, device=dev))
    member_off = torch.zeros(k + 1, dtype=torch.int64, device=dev)
    member_off[1:] = torch.cumsum(torch.bincount(tinv, minlength=k), 0)
    members = torch.argsort(tinv, stable=True)
    gs, gn = _group_sums(xu, member_off, members, k)
    slots = np.diff(theme_off.cpu().numpy())
    zi = torch.zeros(1, dtype=torch.int64, device=dev)
    zf = torch.zeros(1, dtype=torch.float64, device=dev)
    removed = torch.zeros(max(k, 1), dtype=torch.int8, device=dev)
    return _score_items(
        candidates=False,
        n_items=nseg,
        slots=slots,
        mem=zi,
        node_off=off_t,
        to=zi,
        ts=zf,
        tn=zf,
        tcnt=zi,
        ti=zi,
        tcos=zf,
        ao=theme_off.contiguous(),
        go=member_off,
        gs=gs,
        gn=gn,
        removed=removed,
        eps=eps,
        d=int(x.shape[1]),
        dev=dev,
    )


def score_candidates(state, cands, *, device: Any = None):
    """f after each candidate edit [C] float64 (torch, on ``device``; default ``gpu_device``).

    ``state`` / ``cands``: PartitionState / Candidates of objective/state.py (host arrays, uploaded).
    """
    torch = _torch()
    dev = device if device is not None else gpu_device("triton", state.x)
    c_n = cands.n
    if c_n == 0:
        return torch.zeros(0, dtype=torch.float64, device=dev)
    t_off = np.asarray(host(state.theme_offsets), dtype=np.int64)
    a_off = np.asarray(host(cands.add_offsets), dtype=np.int64)
    memory = np.asarray(host(cands.memory), dtype=np.int64)
    rem_off = np.asarray(host(cands.rem_offsets), dtype=np.int64)
    rem_rows = np.asarray(host(cands.rem_rows), dtype=np.int64)
    kb = np.diff(t_off)[memory]
    slots = kb + np.diff(a_off)
    slot_off = csr_offsets(slots)
    # removed flag per slot: slot (rem_row - t0) of the removing candidate
    owner = np.repeat(np.arange(c_n), np.diff(rem_off))
    flags = np.zeros(max(int(slot_off[-1]), 1), dtype=np.int8)
    flags[slot_off[owner] + rem_rows - t_off[memory[owner]]] = 1
    x = state.device_x(dev)  # unit rows already; kept on the device until the state's rows change
    ts = _f64(dev, state.theme_sum)
    tn = (
        torch.linalg.vector_norm(ts, dim=1).contiguous()
        if ts.numel()
        else torch.zeros(1, dtype=torch.float64, device=dev)
    )
    go = _i64(dev, cands.group_offsets)
    gs, gn = _group_sums(x, go, _i64(dev, cands.members), int(a_off[-1]))
    return _score_items(
        candidates=True,
        n_items=c_n,
        slots=slots,
        mem=_i64(dev, memory),
        node_off=_i64(dev, state.offsets),
        to=_i64(dev, t_off),
        ts=ts if ts.numel() else torch.zeros(1, dtype=torch.float64, device=dev),
        tn=tn,
        tcnt=_i64(dev, state.theme_count),
        ti=_i64(dev, state.top_idx),
        tcos=_f64(dev, state.top_cos),
        ao=_i64(dev, a_off),
        go=go,
        gs=gs,
        gn=gn,
        removed=_i64(dev, flags).to(torch.int8),
        eps=float(state.eps),
        d=int(x.shape[1]),
        dev=dev,
    )


__all__ = ["partition_objective", "score_candidates"]
