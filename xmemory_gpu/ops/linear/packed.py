"""``PackedLinear``: a dense layer's parameters as ``rowwise_linear`` takes them."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class PackedLinear:
    """A dense layer's parameters ready for ``rowwise_linear`` (copies: later edits of the source arrays
    do not reach it): ``weight`` [N, K] float32, ``bias`` [N] float32 or None, ``panels``
    [ceil(N / 32), K, 32] float32, the cpu kernel's layout (None when packed for ``reference``; a cpu
    call then packs it for that call)."""

    weight: np.ndarray
    bias: np.ndarray | None
    panels: np.ndarray | None

    @property
    def shape(self) -> tuple[int, int]:
        """(N outputs, K inputs)."""
        return int(self.weight.shape[0]), int(self.weight.shape[1])


__all__ = ["PackedLinear"]
