"""``feature_counts``' input contract, checked by its dispatcher before any backend (``csrc/cpu/hashing.cpp``
checks ``dim >= 2`` again): dim an integer in [2, 2**31), texts a sequence of str. As the check
(``ValueError`` for dim, ``TypeError`` for a text that is not a str) and the ``accepts`` predicate
(None in contract, else a one-line reason naming the argument)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np


def feature_inputs(texts: Sequence[str], dim: Any) -> list[str]:
    """The texts as a list, after the checks."""
    if isinstance(dim, bool) or not isinstance(dim, (int, np.integer)) or not 2 <= dim < 2**31:
        raise ValueError(f"dim: expected an integer >= 2 and below 2**31, got {dim!r}")
    if isinstance(texts, str):
        raise TypeError("texts: expected a sequence of str, got one str")
    texts = list(texts)
    for i, t in enumerate(texts):
        if not isinstance(t, str):
            raise TypeError(f"texts[{i}]: expected a str, got {type(t).__name__}")
    return texts


def accepts_feature_counts(texts: Any, dim: Any, *, backend: str = "auto") -> str | None:
    """texts a sequence of str (not one str), dim an integer in [2, 2**31)."""
    try:
        feature_inputs(texts, dim)
    except (TypeError, ValueError) as exc:
        return str(exc)
    return None


__all__ = ["accepts_feature_counts", "feature_inputs"]
