"""Per-step uncertainty from logits: entropy of the next-token distribution and the log-probability
of the chosen token. Backends: ``reference`` (float64 NumPy) and ``torch`` (float32 on the
logits' device; the path the in-process readers use). A fused Triton kernel is not built yet."""

from __future__ import annotations

from typing import Any

import numpy as np

from .._arrays import is_torch, to_numpy
from . import reference


def token_entropy_logprob(logits: Any, token_ids: Any, *, backend: str = "auto") -> tuple[Any, Any]:
    """logits [T, V], token_ids [T] -> (entropy [T], logprob [T]) in nats.

    ``auto`` uses torch for torch logits and the reference for NumPy; results are float64 NumPy
    for the reference and float32 tensors for torch."""
    if backend == "auto":
        backend = "torch" if is_torch(logits) else "reference"
    if backend == "reference":
        z = to_numpy(logits, np.float64)
        return reference.token_entropy(z), reference.token_logprob(z, to_numpy(token_ids))
    if backend == "torch":
        import torch

        z = logits if is_torch(logits) else torch.from_numpy(np.asarray(logits))
        lp = torch.log_softmax(z.float(), dim=-1)
        ent = -(lp.exp() * lp).sum(dim=-1)
        ids = token_ids if is_torch(token_ids) else torch.as_tensor(np.asarray(token_ids), device=z.device)
        return ent, lp.gather(-1, ids.long().unsqueeze(-1)).squeeze(-1)
    raise ValueError(f"token_entropy_logprob: unknown backend {backend!r}; expected auto, reference or torch")


__all__ = ["token_entropy_logprob"]
