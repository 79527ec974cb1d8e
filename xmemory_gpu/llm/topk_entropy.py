"""Entropy of a next-token distribution estimated from its top-K log-probabilities only.

Backends that do not expose full logits (HTTP servers, vLLM) give the K most likely tokens'
logprobs per step. With ``p_1..p_K`` known exactly and the remaining mass ``r = 1 - sum p_k``
spread over the other ``V - K`` tokens in an unknown way, the entropy is

    H = -sum_k p_k log p_k + H_tail,   with   -r log r  <=  H_tail  <=  -r log(r / (V - K)).

The left bound (all of ``r`` on one token, "lump") holds because every tail probability is at most
``r``; the right bound (``r`` spread uniformly) is the largest entropy any split of ``r`` over
``V - K`` tokens can have. :func:`entropy_from_topk` returns the uniform value (an upper bound)
when ``vocab_size`` is given and the lump value (a lower bound) when it is not. Both are exact
when ``r`` is 0, and the gap shrinks with ``r``: raise K where the server allows it.
"""

from __future__ import annotations

import math
from collections.abc import Iterable


def entropy_from_topk(top_logprobs: Iterable[float], vocab_size: int | None) -> float:
    """Estimated entropy (nats) from the logprobs of distinct tokens (the top K, in any order).

    ``vocab_size`` given: the remaining mass spread uniformly over the other ``V - K`` tokens
    (an upper bound on the true entropy); ``None``: the remaining mass as one lump (a lower
    bound). Terms with probability 0 (logprob ``-inf``) contribute nothing."""
    lps = [float(v) for v in top_logprobs]
    if any(math.isnan(v) for v in lps):
        raise ValueError("entropy_from_topk: NaN logprob")
    known = 0.0
    mass = 0.0
    for lp in lps:
        if lp == -math.inf:
            continue
        p = math.exp(min(lp, 0.0))
        mass += p
        known -= p * min(lp, 0.0)
    r = 1.0 - mass
    if r <= 1e-12:  # the top K hold all the mass (up to rounding)
        return known
    rest = None if vocab_size is None else vocab_size - len(lps)
    if rest is not None and rest > 0:
        return known - r * math.log(r / rest)
    return known - r * math.log(r)
