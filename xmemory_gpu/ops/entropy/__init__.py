"""Per-step uncertainty from logits: entropy of the next-token distribution and the log-probability
of the chosen token.

Backends: ``reference`` (float64 NumPy), ``torch`` (float32 ``log_softmax`` + entropy + gather on
the logits' device) and ``triton`` (one fused pass that reads each row of logits once; float32
accumulation of fp32/bf16/fp16 input; CUDA tensors, or host tensors under ``TRITON_INTERPRET=1``).
``auto``: triton for CUDA tensors when triton imports (the resolver of ``ops/_dispatch.py`` would
prefer a validated path, and triton is the family's only one), torch for other torch tensors, the
reference for NumPy. Triton is imported on first use only. Inputs are checked once here for every
backend (real dtype, [T, V] shape, integer ids in [0, V)); -inf logits (banned tokens) are allowed.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from .. import _dispatch as dp
from .._dispatch import interpreting_triton, is_cuda_tensor, is_torch
from . import reference

to_numpy = dp.host

BACKENDS = ("auto", "reference", "torch", "triton")


@functools.lru_cache(maxsize=1)
def _triton_importable() -> bool:
    try:
        import triton  # noqa: F401
    except Exception:  # ImportError, or a broken install failing at import time
        return False
    return True


def _resolve(backend: str, logits: Any) -> str:
    """The backend ``token_entropy_logprob`` runs on for these logits."""
    if backend not in BACKENDS:
        raise ValueError(f"token_entropy_logprob: unknown backend {backend!r}; expected one of {BACKENDS}")
    if backend != "auto":
        return backend
    if is_cuda_tensor(logits) and "triton" in dp.gpu_preference("token_entropy_logprob", ("triton",)) \
            and _triton_importable():
        return "triton"
    return "torch" if is_torch(logits) else "reference"


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
    """logits [T, V], token_ids [T] -> (entropy [T], logprob [T]) in nats.

    Results are float64 NumPy for ``reference`` and float32 tensors for ``torch`` / ``triton``
    (on the logits' device; NumPy logits go to CUDA for triton when a GPU is present). Bad shapes
    or ids outside [0, V) raise ``ValueError``."""
    name = _resolve(backend, logits)
    dp.check_real("logits", logits, integers=False)
    if name == "reference":
        z, ids = to_numpy(logits, np.float64), to_numpy(token_ids)
        _check(z.shape, ids)
        return reference.token_entropy(z), reference.token_logprob(z, ids)
    import torch

    if name == "triton":
        if not _triton_importable():
            raise ValueError("token_entropy_logprob: backend 'triton' needs the triton package")
        from . import triton as impl  # imported on first use: importing triton is slow and optional

        if not is_torch(logits) and not torch.cuda.is_available() and not interpreting_triton():
            raise ValueError("token_entropy_logprob: backend 'triton' needs CUDA tensors (or TRITON_INTERPRET=1)")
        z = logits if is_torch(logits) else dp.to_backend(logits, "triton")
        if not z.is_cuda and not interpreting_triton():
            raise ValueError("token_entropy_logprob: backend 'triton' needs CUDA tensors (or TRITON_INTERPRET=1)")
        return impl.token_entropy_logprob(z, token_ids)
    z = logits if is_torch(logits) else torch.from_numpy(np.asarray(logits))
    ids = token_ids if is_torch(token_ids) else torch.as_tensor(np.asarray(token_ids), device=z.device)
    _check(tuple(z.shape), to_numpy(ids))
    lp = torch.log_softmax(z.float(), dim=-1)
    ent = -(lp.exp() * lp).sum(dim=-1)
    return ent, lp.gather(-1, ids.to(z.device).long().unsqueeze(-1)).squeeze(-1)


__all__ = ["BACKENDS", "token_entropy_logprob"]
