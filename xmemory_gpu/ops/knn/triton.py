"""Triton backend for the kNN family: batched exact cosine top-k within CSR segments.

One launch covers every segment. The host builds a tile table (program id -> segment, first query
row); each program takes a ``BLOCK_M`` query tile of its segment, walks the segment's key rows in
``BLOCK_N`` tiles, accumulates ``tl.dot`` over ``d`` in ``BLOCK_D`` chunks (masked, so any ``d``), and
keeps a running top-``KP`` per query row (``KP`` = k rounded up to a power of two, k <= 64).

Ranking key. A (similarity, row id) pair is packed into one int64: the high 32 bits are the float32
similarity mapped to an order-preserving int32, the low 32 bits are ``2**31 - 1 - id``. A larger key
is a larger similarity, or an equal similarity with a lower row id, so "ties to the lower row id" is
plain integer order and the running list is merged with bitonic networks (``_topk_desc`` /
``_merge_asc`` below: ``tl.topk`` / ``tl.bitonic_merge`` with min/max compare-and-swap). Invalid pairs (outside the segment, self in graph mode, ``sim <= 0`` with
``drop_nonpositive``) get the key ``INT64_MIN`` and become -1 / -inf padding on output.

Per key tile: ``top = _topk_desc(keys)`` (top KP, descending), the running list is kept ascending,
so ``max(best_asc, top_desc)`` is a bitonic sequence holding exactly the top ``KP`` of the union and
one bitonic merge re-sorts it. The merge is skipped when no key of the tile beats any row's current
k-th best (the common case once the list has filled on large segments).

Runtime sizes (rows, d, number of tiles, k) are kernel arguments, not ``tl.constexpr``: only the
block sizes, ``KP`` and the flags specialise the kernel.

Expected GPU bottleneck (not measured: interpreter-tested, not run on a GPU): with the default
``input_precision="ieee"`` the float32 dot runs on CUDA cores and dominates for d >= 384 and small
k; with ``"tf32"`` (tensor cores, ~3e-4 relative error) the int64 bitonic top-k of each
[BLOCK_M, BLOCK_N] key tile (about log2(BLOCK_N)**2 / 2 compare-swap passes, plus register
pressure of the int64 keys) becomes the bottleneck, most of all for k = 64 and for small segments
where the early skip rarely fires. Register pressure is high (~200 per thread at 8 warps: the fp32
accumulator, the int64 key tile and the hypercube views), so occupancy is one CTA per SM.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np
import triton
import triton.language as tl

from ..devices import host, tile_table
from ._torch import unit_rows_f32

MAX_K = 64
_IDMAX = tl.constexpr(2**31 - 1)  # ids are stored as _IDMAX - id in the key's low 32 bits
_INTERPRET = os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")


# Bitonic top-k / merge over the last axis, as triton.language.standard's sort_impl / bitonic_merge,
# but each compare-and-swap is a min and a max over a size-2 axis of the hypercube view instead of
# an xor_sum partner fetch plus a select: the same warp-shuffle reductions on a GPU, and built-in
# (vectorised) reductions in the interpreter, where xor_sum runs a Python combine per element.
@triton.jit
def _indicator(n_dims: tl.constexpr, j: tl.constexpr):
    ar = tl.arange(0, 2)
    return tl.reshape(ar, [1] * (n_dims - j - 1) + [2] + [1] * j)


@triton.jit
def _cas(h, flip, i: tl.constexpr, n_dims: tl.constexpr):
    """Compare-and-swap along the i-th innermost hypercube axis: min to the left unless flipped."""
    ax: tl.constexpr = n_dims - 1 - i
    mx = tl.max(h, axis=ax, keep_dims=True)
    mn = tl.min(h, axis=ax, keep_dims=True)
    return tl.where((flip ^ _indicator(n_dims, i)) != 0, mx, mn)


@triton.jit
def _merge_hc(h, stage: tl.constexpr, order: tl.constexpr, n_dims: tl.constexpr):
    """order 0 ascending, 1 descending, 2 alternating (sort stages)."""
    if order == 2:
        flip = _indicator(n_dims, stage)
    else:
        flip = order
    for i in tl.static_range(stage):
        h = _cas(h, flip, stage - 1 - i, n_dims)
    return h


@triton.jit
def _topk_desc(x, ROWS: tl.constexpr, LOG_N: tl.constexpr, LOG_K: tl.constexpr, LOG_ROWS: tl.constexpr):
    """x [ROWS, 2**LOG_N] -> the 2**LOG_K largest per row, sorted descending."""
    n_dims: tl.constexpr = LOG_ROWS + LOG_N
    h = tl.reshape(x, [2] * n_dims)
    for i in tl.static_range(1, LOG_K + 1):
        h = _merge_hc(h, i, 2 if i < LOG_N else 1, n_dims)
    for i in tl.static_range(LOG_K + 1, LOG_N + 1):  # bitonic top-k: halve, keep the larger half
        # the hypercube has n_dims - (i - LOG_K - 1) axes here; the halving axis sits above the k block
        h = tl.max(h, axis=n_dims - i)
        h = _merge_hc(h, LOG_K, 2 if i < LOG_N else 1, n_dims - i + LOG_K)
    return tl.reshape(h, [ROWS, 2**LOG_K])


@triton.jit
def _merge_asc(x, ROWS: tl.constexpr, LOG_K: tl.constexpr, LOG_ROWS: tl.constexpr):
    """Sort each bitonic row of x [ROWS, 2**LOG_K] ascending."""
    n_dims: tl.constexpr = LOG_ROWS + LOG_K
    h = _merge_hc(tl.reshape(x, [2] * n_dims), LOG_K, 0, n_dims)
    return tl.reshape(h, [ROWS, 2**LOG_K])


@triton.jit
def _knn_topk_kernel(
    q_ptr,
    x_ptr,
    q_off_ptr,
    x_off_ptr,
    tile_seg_ptr,
    tile_q0_ptr,
    idx_ptr,
    sim_ptr,
    d,
    k,
    EXCLUDE_SELF: tl.constexpr,
    DROP_NONPOS: tl.constexpr,
    KP: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_D: tl.constexpr,
    PRECISION: tl.constexpr,
    LOG_M: tl.constexpr,
    LOG_N: tl.constexpr,
    LOG_KP: tl.constexpr,
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
            a = tl.load(
                q_ptr + rows[:, None] * d + dd[None, :], mask=rmask[:, None] & dmask[None, :], other=0.0
            )
            b = tl.load(
                x_ptr + cols[None, :] * d + dd[:, None], mask=dmask[:, None] & cmask[None, :], other=0.0
            )
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
            top = _topk_desc(key, BLOCK_M, LOG_N, LOG_KP, LOG_M)  # descending
            best = _merge_asc(tl.maximum(best, top), BLOCK_M, LOG_KP, LOG_M)
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


def _next_pow2(v: int) -> int:
    return 1 << max(0, int(v) - 1).bit_length()


def _config(kp: int, d: int) -> tuple[int, int, int, int]:
    """(BLOCK_M, BLOCK_N, BLOCK_D, num_warps). BLOCK_N >= KP (tl.topk), all >= 16 (tl.dot)."""
    if _INTERPRET:  # the interpreter's bitonic passes cost per element of the key tile: small BLOCK_M
        return 16, 64, max(16, min(128, _next_pow2(d))), 4
    # ptxas -v for sm_90a (offline compile, not run): 194-212 registers and no spills with 8 warps for
    # KP 2..64 at (64, 64, 32) and (32, 64, 32); 4 warps at BLOCK_M >= 32 spill. One CTA per SM either way.
    return 64, 64, 32, 8


def _topk(
    q,
    q_off: np.ndarray,
    x,
    x_off: np.ndarray,
    k: int,
    exclude_self: bool,
    drop_nonpositive: bool,
    input_precision: str,
):
    import torch

    # q, x on one device, k in 1..MAX_K, offsets: checked once by the dispatcher (ops/knn/__init__.py)
    k = int(k)
    nq, nx, d = q.shape[0], x.shape[0], q.shape[1]
    if max(nq, nx) >= int(_IDMAX):  # a limit of the kernel's int32 ids, not an input check
        raise ValueError("triton knn: row ids must fit int32")
    dev = q.device
    idx = torch.full((nq, k), -1, dtype=torch.int32, device=dev)
    sim = torch.full((nq, k), float("-inf"), dtype=torch.float32, device=dev)
    qn_seg, xn_seg = np.diff(q_off), np.diff(x_off)
    live = np.nonzero((qn_seg > 0) & (xn_seg > 0))[0]  # segments with no keys stay padding
    if nq == 0 or live.size == 0 or d == 0:
        if d == 0 and live.size:  # every similarity is 0: same as zero rows
            return _topk(
                torch.zeros((nq, 1), device=dev),
                q_off,
                torch.zeros((nx, 1), device=dev),
                x_off,
                k,
                exclude_self,
                drop_nonpositive,
                input_precision,
            )
        return idx, sim
    kp = max(2, _next_pow2(k))
    block_m, block_n, block_d, warps = _config(kp, d)
    # tile table, heaviest segments first (load balance across SMs); segments with no keys stay padding
    tiles = tile_table(q_off, block_m, weight=xn_seg, skip=~((qn_seg > 0) & (xn_seg > 0)))
    tile_seg, tile_q0 = tiles.seg, tiles.row0
    t = lambda a: torch.from_numpy(np.ascontiguousarray(a)).to(dev)  # noqa: E731
    grid = (int(tile_seg.size),)
    _knn_topk_kernel[grid](
        q,
        x,
        t(q_off),
        t(x_off),
        t(tile_seg),
        t(tile_q0),
        idx,
        sim,
        d,
        k,
        EXCLUDE_SELF=bool(exclude_self),
        DROP_NONPOS=bool(drop_nonpositive),
        KP=kp,
        BLOCK_M=block_m,
        BLOCK_N=block_n,
        BLOCK_D=block_d,
        PRECISION=input_precision,
        LOG_M=block_m.bit_length() - 1,
        LOG_N=block_n.bit_length() - 1,
        LOG_KP=kp.bit_length() - 1,
        num_warps=warps,
    )
    return idx, sim


def knn_graph(x, offsets: Any, k: int, *, drop_nonpositive: bool = False, input_precision: str = "ieee"):
    """x [N, d] torch tensor, offsets [B+1] -> idx [N, k] int32 global rows, sim [N, k] float32 (self excluded).
    Inputs as the dispatcher hands them (checked there: k in 1..64, offsets CSR over the rows).

    ``input_precision`` is passed to ``tl.dot``: "ieee" (exact float32, default) or "tf32" (faster on
    tensor cores, ~3e-4 relative error in the similarities).
    """
    xn = unit_rows_f32(x)
    off = host(offsets, np.int64)
    return _topk(xn, off, xn, off, k, True, drop_nonpositive, input_precision)


def knn_search(
    q,
    q_offsets: Any,
    x,
    x_offsets: Any,
    k: int,
    *,
    drop_nonpositive: bool = False,
    input_precision: str = "ieee",
):
    """Queries of segment b against rows of segment b of x -> idx [Q, k] int32 global rows of x, sim [Q, k]."""
    return _topk(
        unit_rows_f32(q),
        host(q_offsets, np.int64),
        unit_rows_f32(x),
        host(x_offsets, np.int64),
        k,
        False,
        drop_nonpositive,
        input_precision,
    )
