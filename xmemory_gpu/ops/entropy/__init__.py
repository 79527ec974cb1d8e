"""Per-step uncertainty from logits: entropy of the next-token distribution and the log-probability
of the chosen token.

Backends, resolved like every other family (``resolve_backend``: ``XMEMORY_BACKEND`` honoured):
``reference`` (float64 NumPy), ``cpu`` and ``cuda`` (torch's compiled ``log_softmax`` + entropy +
gather in float32, on the host / on the GPU: ``_torch.py``) and ``triton`` (one fused pass that
reads each row of logits once; float32 accumulation of fp32/bf16/fp16 input). ``auto``: ``cpu`` for
host input (``reference`` where the C++ module is not built); for CUDA tensors the GPU path validated
on a GPU, else triton, else cuda. Triton is imported on first use only. Inputs are checked once here
for every backend (real dtype, [T, V >= 1] shape, integer ids in [0, V)); -inf logits (banned
tokens) are allowed. Results come back in the caller's kind (NumPy, or torch on the logits' device):
float64 from ``reference``, float32 from the others.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..backends import GPU_BACKENDS, implementation, register, resolve_backend
from ..checks import check_real
from ..devices import array, as_caller, gpu_device, host, is_cuda_tensor, to_backend

OP = "token_entropy_logprob"
register(OP, __name__, {"reference": "reference", "cpu": "_torch", "triton": "triton", "cuda": "_torch"})


def _check(shape: tuple[int, ...], ids: np.ndarray) -> None:
    """ValueError unless logits are [T, V >= 1] and ids are T integers in [0, V)."""
    if len(shape) != 2:
        raise ValueError(f"token_entropy_logprob: logits must be [T, V], got shape {tuple(shape)}")
    n, v = shape
    if v < 1:
        raise ValueError("token_entropy_logprob: logits need V >= 1 columns")
    if ids.ndim != 1 or ids.shape[0] != n:
        raise ValueError(f"token_entropy_logprob: token_ids must be [T] with T = {n}, got shape {ids.shape}")
    if ids.size and not np.issubdtype(ids.dtype, np.integer):
        raise ValueError(f"token_entropy_logprob: token_ids must be integers, got {ids.dtype}")
    if ids.size and (ids.min() < 0 or ids.max() >= v):
        raise ValueError(f"token_entropy_logprob: token_ids must be in [0, V = {v})")


def token_entropy_logprob(logits: Any, token_ids: Any, *, backend: str = "auto") -> tuple[Any, Any]:
    """logits [T, V], token_ids [T] -> (entropy [T], logprob [T]) in nats, in the kind of ``logits``.

    Bad shapes, dtypes or ids outside [0, V) raise
    ``ValueError`` before any backend runs."""
    name = resolve_backend(OP, backend, on_cuda=is_cuda_tensor(logits))
    logits = array(logits)
    check_real("logits", logits, integers=False)
    ids = host(token_ids)
    _check(tuple(logits.shape), ids)
    ids = ids.astype(np.int64, copy=False)
    impl = implementation(OP, name)
    if name == "reference":
        ent, lp = impl(host(logits, np.float64), ids)
    elif name in GPU_BACKENDS:  # device backends get device tensors
        dev = gpu_device(name, logits)
        ent, lp = impl(to_backend(logits, name, device=dev), to_backend(ids, name, device=dev))
    else:  # cpu: torch on the host
        ent, lp = impl(host(logits), ids)
    return as_caller(ent, logits), as_caller(lp, logits)


__all__ = ["token_entropy_logprob"]
