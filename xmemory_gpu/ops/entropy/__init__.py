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
from ..devices import as_caller, gpu_device, host, is_cuda_tensor, to_backend
from .contract import accepts_token_entropy_logprob, entropy_inputs

OP = "token_entropy_logprob"
register(
    OP,
    __name__,
    {"reference": "reference", "cpu": "_torch", "triton": "triton", "cuda": "_torch"},
    accepts=accepts_token_entropy_logprob,
)


def token_entropy_logprob(logits: Any, token_ids: Any, *, backend: str = "auto") -> tuple[Any, Any]:
    """logits [T, V], token_ids [T] -> (entropy [T], logprob [T]) in nats, in the kind of ``logits``.

    Bad shapes, dtypes or ids outside [0, V) raise
    ``ValueError`` before any backend runs."""
    name = resolve_backend(OP, backend, on_cuda=is_cuda_tensor(logits))
    logits, ids = entropy_inputs(logits, token_ids)
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
