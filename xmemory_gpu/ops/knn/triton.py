"""Triton backend for the kNN family: batched exact cosine top-k within CSR segments.

One launch covers every segment. The host builds a tile table (program id -> segment, first query
row); each program takes a ``BLOCK_M`` query tile of its segment, walks the segment's key rows in
``BLOCK_N`` tiles, accumulates ``tl.dot`` over ``d`` in ``BLOCK_D`` chunks (masked, so any ``d``), and
keeps a running top-``KP`` per query row (``KP`` = k rounded up to a power of two, k <= 64).

Ranking key. A (similarity, row id) pair is packed into one int64: the high 32 bits are the float32
similarity mapped to an order-preserving int32, the low 32 bits are ``2**31 - 1 - id``. A larger key
is a larger similarity, or an equal similarity with a lower row id, so "ties to the lower row id" is
plain integer order and the running list is merged with Triton's bitonic ``tl.topk`` /
``tl.bitonic_merge``. Invalid pairs (outside the segment, self in graph mode, ``sim <= 0`` with
``drop_nonpositive``) get the key ``INT64_MIN`` and become -1 / -inf padding on output.

Per key tile: ``top = tl.topk(keys, KP)`` (descending), the running list is kept ascending, so
``max(best_asc, top_desc)`` is a bitonic sequence holding exactly the top ``KP`` of the union and one
``tl.bitonic_merge`` re-sorts it. The merge is skipped when no key of the tile beats any row's current
k-th best (the common case once the list has filled on large segments).

Runtime sizes (rows, d, number of tiles, k) are kernel arguments, not ``tl.constexpr``: only the
block sizes, ``KP`` and the flags specialise the kernel.

Expected GPU bottleneck (not measured: interpreter-tested, not run on a GPU): with the default
``input_precision="ieee"`` the float32 dot runs on CUDA cores and dominates for d >= 384 and small
k; with ``"tf32"`` (tensor cores, ~3e-4 relative error) the int64 bitonic top-k of each
[BLOCK_M, BLOCK_N] key tile (about log2(BLOCK_N)**2 / 2 compare-swap passes, plus register
pressure of the int64 keys) becomes the bottleneck, most of all for k = 64 and for small segments
where the early skip rarely fires.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np
import triton
import triton.language as tl

MAX_K = 64
_IDMAX = 2**31 - 1
_INTERPRET = os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")


@triton.jit
def _knn_topk_kernel(
    q_ptr, x_ptr, q_off_ptr, x_off_ptr, tile_seg_ptr, tile_q0_ptr, idx_ptr, sim_ptr,
    d, k,
    EXCLUDE_SELF: tl.constexpr, DROP_NONPOS: tl.constexpr, KP: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr, PRECISION: tl.constexpr,
):
    pid = tl.program_id(0)
    seg = tl.load(tile_seg_ptr + pid).to(tl.int64)
    q0 = tl.load(tile_q0_ptr + pid).to(tl.int64)
    qe = tl.load(q_off_ptr + seg + 1)
    xs = tl.load(x_off_ptr + seg)
    xe = tl.load(x_off_ptr + seg + 1)

    SENT: tl.constexpr = -9223372036854775808  # INT64_MIN: padding / invalid pair
    rows = q0 + tl.arange(0, BLOCK_M).to(tl.int64)  # global query rows
    rmask = rows < qe
    offs_d = tl.arange(0, BLOCK_D)
    offs_n = tl.arange(0, BLOCK_N).to(tl.int64)
    slot = tl.arange(0, KP)

    best = tl.full([BLOCK_M, KP], SENT, tl.int64)  # ascending: slot KP-1 holds the best
    thresh = tl.full([BLOCK_M], SENT, tl.int64)  # current k-th best key per row

    for n0 in range(xs, xe, BLOCK_N):
        cols = n0 + offs_n  # global key rows
        cmask = cols < xe
        acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
        for d0 in range(0, d, BLOCK_D):
            dd = d0 + offs_d
            dmask = dd < d
            a = tl.load(q_ptr + rows[:, None] * d + dd[None, :], mask=rmask[:, None] & dmask[None, :], other=0.0)
            b = tl.load(x_ptr + cols[None, :] * d + dd[:, None], mask=dmask[:, None] & cmask[None, :], other=0.0)
            acc = tl.dot(a, b, acc, input_precision=PRECISION)
        s = tl.where(acc == 0.0, 0.0, acc)  # -0.0 -> +0.0 so equal sims tie on the id
        valid = rmask[:, None] & cmask[None, :]
        if EXCLUDE_SELF:
            valid = valid & (cols[None, :] != rows[:, None])
        if DROP_NONPOS:
            valid = valid & (s > 0.0)
        bits = s.to(tl.int32, bitcast=True)
        k32 = bits ^ ((bits >> 31) & 0x7FFFFFFF)  # float order == signed int order
        key = (k32.to(tl.int64) << 32) | (_IDMAX - cols[None, :])
        key = tl.where(valid, key, SENT)
        better = tl.sum((key > thresh[:, None]).to(tl.int32), axis=1)
        if tl.max(better, axis=0) > 0:
            top = tl.topk(key, KP, dim=1)  # descending
            best = tl.bitonic_merge(tl.maximum(best, top), dim=1, descending=False)
            thresh = tl.min(tl.where(slot[None, :] >= KP - k, best, 9223372036854775807), axis=1)

    # decode and store: output column c = KP - 1 - slot
    hi = (best >> 32).to(tl.int32)
    sbits = hi ^ ((hi >> 31) & 0x7FFFFFFF)
    sim = sbits.to(tl.float32, bitcast=True)
    ids = _IDMAX - best.to(tl.int32)  # low 32 bits (in [0, 2**31))
    ok = best != SENT
    sim = tl.where(ok, sim, float("-inf"))
    ids = tl.where(ok, ids, -1)
    oc = (KP - 1 - slot).to(tl.int64)
    omask = rmask[:, None] & (oc[None, :] < k)
    optr = rows[:, None] * k + oc[None, :]
    tl.store(idx_ptr + optr, ids, mask=omask)
    tl.store(sim_ptr + optr, sim, mask=omask)


def _offsets(off: Any) -> np.ndarray:
    """Host int64 copy of CSR offsets [B+1] (NumPy, list or torch on any device)."""
    if type(off).__module__.startswith("torch"):
        off = off.detach().cpu().numpy()
    off = np.asarray(off, dtype=np.int64).reshape(-1)
    if off.size < 1:
        raise ValueError("offsets must have at least one entry (B+1)")
    return off


def _normalize(x):
    """x [n, d] any float dtype -> float32 contiguous unit rows (zero rows stay zero)."""
    import torch

    x = x.detach().to(torch.float32)
    n = torch.linalg.vector_norm(x, dim=1, keepdim=True)
    return (x / torch.where(n > 0, n, torch.ones_like(n))).contiguous()


def _next_pow2(v: int) -> int:
    return 1 << max(0, int(v) - 1).bit_length()


def _config(kp: int, d: int) -> tuple[int, int, int, int]:
    """(BLOCK_M, BLOCK_N, BLOCK_D, num_warps). BLOCK_N >= KP (tl.topk), all >= 16 (tl.dot)."""
    if _INTERPRET:  # the interpreter's bitonic passes cost per element of the key tile: small BLOCK_M
        return 16, 64, max(16, min(128, _next_pow2(d))), 4
    if kp <= 16:
        return 64, 64, 32, 4
    return 32, 64, 32, 8  # int64 [32, 64] keys + [32, KP] list per program


def _topk(q, q_off: np.ndarray, x, x_off: np.ndarray, k: int, exclude_self: bool, drop_nonpositive: bool,
          input_precision: str):
    import torch

    k = int(k)
    if not 1 <= k <= MAX_K:
        raise ValueError(f"triton knn: k must be in 1..{MAX_K}, got {k}")
    if q.device != x.device:
        raise ValueError("triton knn: q and x must be on the same device")
    if q.ndim != 2 or x.ndim != 2 or q.shape[1] != x.shape[1]:
        raise ValueError(f"triton knn: expected q [Q, d] and x [N, d], got {tuple(q.shape)} and {tuple(x.shape)}")
    nq, nx, d = q.shape[0], x.shape[0], q.shape[1]
    if len(q_off) != len(x_off) or q_off[0] != 0 or q_off[-1] != nq or x_off[0] != 0 or x_off[-1] != nx:
        raise ValueError("triton knn: offsets must be [B+1] CSR over the rows of q and x")
    if np.any(np.diff(q_off) < 0) or np.any(np.diff(x_off) < 0):
        raise ValueError("triton knn: offsets must be non-decreasing")
    if max(nq, nx) >= _IDMAX:
        raise ValueError("triton knn: row ids must fit int32")
    dev = q.device
    idx = torch.full((nq, k), -1, dtype=torch.int32, device=dev)
    sim = torch.full((nq, k), float("-inf"), dtype=torch.float32, device=dev)
    qn_seg, xn_seg = np.diff(q_off), np.diff(x_off)
    live = np.nonzero((qn_seg > 0) & (xn_seg > 0))[0]  # segments with no keys stay padding
    if nq == 0 or live.size == 0 or d == 0:
        if d == 0 and live.size:  # every similarity is 0: same as zero rows
            return _topk(torch.zeros((nq, 1), device=dev), q_off, torch.zeros((nx, 1), device=dev), x_off, k,
                         exclude_self, drop_nonpositive, input_precision)
        return idx, sim
    kp = max(2, _next_pow2(k))
    block_m, block_n, block_d, warps = _config(kp, d)
    # tile table, heaviest segments first (load balance across SMs)
    live = live[np.argsort(-xn_seg[live], kind="stable")]
    per = (qn_seg[live] + block_m - 1) // block_m
    tile_seg = np.repeat(live, per).astype(np.int32)
    first = np.repeat(np.cumsum(per) - per, per)
    tile_q0 = (q_off[tile_seg] + (np.arange(tile_seg.size) - first) * block_m).astype(np.int64)
    t = lambda a: torch.from_numpy(np.ascontiguousarray(a)).to(dev)  # noqa: E731
    grid = (int(tile_seg.size),)
    _knn_topk_kernel[grid](
        q, x, t(q_off), t(x_off), t(tile_seg), t(tile_q0), idx, sim,
        d, k,
        EXCLUDE_SELF=bool(exclude_self), DROP_NONPOS=bool(drop_nonpositive), KP=kp,
        BLOCK_M=block_m, BLOCK_N=block_n, BLOCK_D=block_d, PRECISION=input_precision,
        num_warps=warps,
    )
    return idx, sim


def knn_graph(x, offsets: Any, k: int, *, drop_nonpositive: bool = False, input_precision: str = "ieee"):
    """x [N, d] torch tensor, offsets [B+1] -> idx [N, k] int32 global rows, sim [N, k] float32 (self excluded).

    ``input_precision`` is passed to ``tl.dot``: "ieee" (exact float32, default) or "tf32" (faster on
    tensor cores, ~3e-4 relative error in the similarities).
    """
    xn = _normalize(x)
    off = _offsets(offsets)
    return _topk(xn, off, xn, off, k, True, drop_nonpositive, input_precision)


def knn_search(q, q_offsets: Any, x, x_offsets: Any, k: int, *, drop_nonpositive: bool = False,
               input_precision: str = "ieee"):
    """Queries of segment b against rows of segment b of x -> idx [Q, k] int32 global rows of x, sim [Q, k]."""
    return _topk(_normalize(q), _offsets(q_offsets), _normalize(x), _offsets(x_offsets), k, False, drop_nonpositive,
                 input_precision)
