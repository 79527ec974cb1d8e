"""float64 NumPy reference for per-step uncertainty from logits.

For logits z [T, V] of T decoding steps: log p = z - logsumexp(z); entropy_t = -sum_v p log p
(nats); logprob_t = log p[t, token_t].
"""

from __future__ import annotations

import numpy as np


def log_softmax(logits: np.ndarray) -> np.ndarray:
    z = np.asarray(logits, dtype=np.float64)
    m = z.max(axis=-1, keepdims=True)
    return z - m - np.log(np.exp(z - m).sum(axis=-1, keepdims=True))


def token_entropy(logits: np.ndarray) -> np.ndarray:
    lp = log_softmax(logits)
    return -(np.exp(lp) * lp).sum(axis=-1)


def token_logprob(logits: np.ndarray, token_ids: np.ndarray) -> np.ndarray:
    lp = log_softmax(logits)
    return np.take_along_axis(lp, np.asarray(token_ids, np.int64)[..., None], axis=-1)[..., 0]


def token_entropy_logprob(logits: np.ndarray, token_ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(entropy [T], logprob [T]) float64 of float64 logits [T, V] and token ids [T] in [0, V)."""
    return token_entropy(logits), token_logprob(logits, token_ids)
