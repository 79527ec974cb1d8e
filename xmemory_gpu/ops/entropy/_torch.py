"""The ``cpu`` and ``cuda`` backends of ``token_entropy_logprob``: torch's compiled ``log_softmax``,
entropy and gather in float32 on the logits' device (the host for ``cpu``, the GPU for ``cuda``)."""

from __future__ import annotations

from typing import Any

import numpy as np


def token_entropy_logprob(logits: Any, token_ids: Any) -> tuple[Any, Any]:
    """logits [T, V] (torch tensor or host NumPy), token_ids [T] integers in [0, V), checked by the
    dispatcher -> (entropy [T], logprob [T]) float32 torch tensors on the logits' device."""
    import torch

    if isinstance(logits, torch.Tensor):
        z = logits.detach()
    else:
        a = np.ascontiguousarray(logits)
        z = torch.from_numpy(a if a.flags.writeable else a.copy())
    ids = torch.as_tensor(token_ids, device=z.device)
    lp = torch.log_softmax(z.float(), dim=-1)
    ent = -(lp.exp() * lp).sum(dim=-1)
    return ent, lp.gather(-1, ids.long().unsqueeze(-1)).squeeze(-1)
