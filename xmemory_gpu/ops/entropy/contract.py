"""``token_entropy_logprob``'s input contract (checked once by its dispatcher for every backend; the
backends, torch and NumPy, check nothing): logits a real floating [T, V >= 1] array (-inf allowed:
banned tokens), token_ids [T] integers in [0, V). As the check and the ``accepts`` predicate (None in
contract, else a one-line reason naming the argument)."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..checks import check_real, reason
from ..devices import array, host


def check_shapes(shape: tuple[int, ...], ids: np.ndarray) -> None:
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


def entropy_inputs(logits: Any, token_ids: Any) -> tuple[Any, np.ndarray]:
    """(logits as an array of a real floating dtype [T, V], token ids [T] int64 on the host)."""
    logits = array(logits)
    check_real("logits", logits, integers=False)
    ids = host(token_ids)
    check_shapes(tuple(logits.shape), ids)
    return logits, ids.astype(np.int64, copy=False)


def accepts_token_entropy_logprob(logits: Any, token_ids: Any, *, backend: str = "auto") -> str | None:
    """logits [T, V >= 1] of a real floating dtype, token_ids [T] integers in [0, V)."""
    return reason(entropy_inputs, logits, token_ids)


__all__ = ["accepts_token_entropy_logprob", "check_shapes", "entropy_inputs"]
