"""Triton backend for per-step uncertainty: one fused pass over the logits.

logits z [T, V] (fp32, bf16, fp16 or fp64; any strides), token_ids [T] -> entropy [T] and
logprob [T] in nats, float32, on the logits' device. One program per row streams the row once in
``BLOCK_V`` chunks, upcast to float32, keeping per lane (not per chunk: no cross-lane reduction
inside the loop) an online-softmax state

    m = running max,   s = sum exp(z - m),   t = sum exp(z - m) * (z - m)  (t <= 0).

When a lane's max moves from m to m' both sums are rescaled by a = exp(m - m'): s' = a s and
t' = a (t + s (m - m')). Each element costs one exp: either the element is below the max
(a = 1, weight exp(z - m)) or it is the new max (weight 1, a = exp(m - z)). At the end the lanes
are merged the same way into (M, S, T), and

    logZ = M + log S,   entropy = log S - T / S,   logprob = (z[token] - M) - log S,

where both entropy terms are >= 0 (no cancellation) and z[token] is one scalar load. Differences
z - m are floored at -1e20 (exp is 0 below -104 anyway), so finite logits up to the float32 limits
(differences overflowing to -inf) give finite results.

Edge cases: masked tail elements load as -inf and are skipped without forming inf - inf; -inf
logits (banned tokens) have probability 0 and add nothing (the float64 reference gives NaN there);
a NaN logit makes its row NaN; a row of -inf only gives NaN. T = 0 returns empty tensors without a
launch. Runtime sizes are kernel arguments: only ``BLOCK_V`` specialises the kernel.

Not run on a GPU yet (interpreter-tested; compiled offline for sm_90a): the block size and warp
count in ``_config`` are untuned guesses for a memory-bound stream (4096 x 151,936 bf16 logits are
1.2 GB: about 0.4 ms at 3 TB/s). Whole chunks are loaded unmasked (16-byte vector loads for any V
when the row start is 16-byte aligned), the ragged tail masked. Rows are not split over programs,
so a handful of very long rows use few SMs.
"""

from __future__ import annotations

import os
from typing import Any

import triton
import triton.language as tl

_INTERPRET = os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")
_INT32_MAX = 2**31 - 1


_FLOOR = tl.constexpr(-1.0e20)


@triton.jit
def _update(m, s, t, z):
    """Fold one float32 chunk z [BLOCK_V] into the per-lane state (m, s, t)."""
    valid = z > float("-inf")  # false for the masked tail, -inf logits and NaN
    up = z > m  # this element is the lane's new max
    m_new = tl.maximum(m, z)
    m_fin = tl.where(m_new > float("-inf"), m_new, 0.0)  # no -inf - -inf (interpreter warnings)
    # <= 0, floored at _FLOOR (exp underflows to 0 either way; s * _FLOOR stays finite): no
    # -inf * 0 when a difference of huge logits overflows; 0 when invalid / the lane is empty
    dz = tl.maximum(tl.where(valid, z - m_fin, 0.0), _FLOOR)
    dm = tl.maximum(tl.where(m > float("-inf"), m - m_fin, 0.0), _FLOOR)
    ev = tl.exp(dz + dm)  # one of dz, dm is 0: the only exp per element
    alpha = tl.where(up, ev, 1.0)
    e = tl.where(valid, tl.where(up, 1.0, ev), tl.where(z == z, 0.0, z))  # NaN z poisons s
    t = alpha * (t + s * dm) + e * dz
    s = s * alpha + e
    return m_new, s, t


@triton.jit
def _entropy_logprob_kernel(z_ptr, ids_ptr, ent_ptr, lp_ptr, V, stride_t, stride_v, BLOCK_V: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    base = z_ptr + row * stride_t
    offs = tl.arange(0, BLOCK_V)
    m = tl.full([BLOCK_V], float("-inf"), tl.float32)
    s = tl.zeros([BLOCK_V], tl.float32)
    t = tl.zeros([BLOCK_V], tl.float32)
    v_full = V - V % BLOCK_V
    for v0 in range(0, v_full, BLOCK_V):  # whole chunks: unmasked (vector) loads for any V
        z = tl.load(base + (v0 + offs) * stride_v).to(tl.float32)
        m, s, t = _update(m, s, t, z)
    if v_full < V:  # the ragged tail, masked to -inf
        cols = v_full + offs
        z = tl.load(base + cols * stride_v, mask=cols < V, other=float("-inf")).to(tl.float32)
        m, s, t = _update(m, s, t, z)
    big = tl.max(m, axis=0)
    live = m > float("-inf")
    dml = tl.maximum(tl.where(live, m - tl.where(big > float("-inf"), big, 0.0), 0.0), _FLOOR)
    al = tl.where(live, tl.exp(dml), 0.0)
    ssum = tl.sum(al * s, axis=0)  # >= 1 (the lane holding the max contributes exp(0))
    tsum = tl.sum(al * (t + s * dml), axis=0)  # <= 0
    log_s = tl.log(ssum)
    tok = tl.load(ids_ptr + row)
    zt = tl.load(base + tok * stride_v).to(tl.float32)
    tl.store(ent_ptr + row, log_s - tsum / ssum)
    tl.store(lp_ptr + row, (zt - big) - log_s)


def _next_pow2(v: int) -> int:
    return 1 << max(0, int(v) - 1).bit_length()


def _config(v: int, itemsize: int) -> tuple[int, int]:
    """(BLOCK_V, num_warps) for rows of v logits of itemsize bytes."""
    if _INTERPRET:  # the interpreter costs per op, not per element: few wide chunks
        return min(1024, max(16, _next_pow2(v))), 4
    # Untuned (no GPU run yet). ptxas -v, sm_90a, offline compile: 2048 lanes are 16 bf16/fp16
    # per thread at 4 warps (87 registers, 5 CTAs per SM) or 8 fp32 per thread at 8 warps (55
    # registers, 4 CTAs per SM); whole chunks load as 16-byte vectors, no spills.
    block = min(2048, max(32, _next_pow2(v)))
    per_thread = max(4, 16 // max(1, itemsize))
    return block, max(1, min(8, block // (32 * per_thread)))


_FLOATS = ("float32", "bfloat16", "float16", "float64")


def token_entropy_logprob(logits: Any, token_ids: Any) -> tuple[Any, Any]:
    """logits [T, V >= 1] torch tensor (float32/bfloat16/float16/float64, any strides), token_ids [T]
    integers in [0, V) (a tensor, array or list), as the dispatcher hands them (checked there) ->
    (entropy [T], logprob [T]) float32 nats on logits.device."""
    import torch

    if str(logits.dtype).removeprefix("torch.") not in _FLOATS:  # what the kernel loads, not an input check
        raise ValueError(f"triton entropy: logits dtype must be one of {_FLOATS}, got {logits.dtype}")
    n, v = logits.shape
    ids = token_ids if isinstance(token_ids, torch.Tensor) else torch.as_tensor(token_ids)
    dev = logits.device
    ent = torch.empty(n, dtype=torch.float32, device=dev)
    lp = torch.empty(n, dtype=torch.float32, device=dev)
    if n == 0:
        return ent, lp
    ids = ids.to(device=dev, dtype=torch.int64)
    z = logits.detach()
    if (v - 1) * z.stride(1) > _INT32_MAX:  # column offsets are int32 in the kernel
        z = z.contiguous()
    block, warps = _config(v, z.element_size())
    _entropy_logprob_kernel[(n,)](
        z, ids.contiguous(), ent, lp, v, z.stride(0), z.stride(1), BLOCK_V=block, num_warps=warps
    )
    return ent, lp
