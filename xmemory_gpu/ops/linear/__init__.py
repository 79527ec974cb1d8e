"""Batch-invariant dense layer, y = x W^T + b, for the sentence encoder on the CPU.

A BLAS picks its kernel and depth split by the row count, so a text's encoder rows computed alone
round differently from the same rows inside a large batch (tests/test_embed.py). ``cpu`` computes
every output as one sequential fused-multiply-add chain over the K inputs, then adds the bias: a
row's output is bit-identical whatever the other rows, their number, the thread count or the ISA.
``reference`` is float64 NumPy (for tolerance checks; it makes no invariance promise). Host only."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..backends import host_backend, implementation, register, resolve_backend
from ..checks import check_float_matrix
from ..devices import host
from .contract import accepts_rowwise_linear, linear_inputs
from .packed import PackedLinear

_ALL = {"reference": "reference", "cpu": "cpu"}
register("rowwise_linear", __name__, _ALL, accepts=accepts_rowwise_linear)


def pack_linear(weight: Any, bias: Any = None, *, backend: str = "auto") -> PackedLinear:
    """A ``PackedLinear`` from weight [N, K] (torch's ``nn.Linear.weight`` layout) and bias [N] or None,
    packed for ``backend``'s kernel. Bad input raises ``ValueError`` naming the argument."""
    w = np.array(host(check_float_matrix("weight", weight)), dtype=np.float32, order="C", copy=True)
    b = None
    if bias is not None:
        b = np.array(host(check_float_matrix("bias", bias, ndim=1)), dtype=np.float32, copy=True)
        if b.shape[0] != w.shape[0]:
            raise ValueError(f"bias: expected {w.shape[0]} values (one per output), got {b.shape[0]}")
    return PackedLinear(w, b, _pack(_host_backend(backend), w))


def runs_compiled(backend: str = "auto") -> bool:
    """True when ``rowwise_linear`` with ``backend`` runs the C++ kernel here: ``cpu`` is usable, has
    the dense-layer kernel, and ``backend`` (``auto``: ``XMEMORY_BACKEND``) resolves to it."""
    try:
        name = _host_backend(backend)
    except ValueError:
        return False
    if name != "cpu":
        return False
    from .cpu import kernel_built

    return kernel_built()


def _host_backend(backend: str) -> str:
    """The backend a call runs on: ``auto`` (``XMEMORY_BACKEND`` naming a GPU path included: the op is
    host only) picks the host's best; an explicit GPU backend raises."""
    return resolve_backend(
        "rowwise_linear", host_backend(backend) if backend == "auto" else backend, on_cuda=False
    )


def _pack(name: str, w: np.ndarray) -> np.ndarray | None:
    """The cpu kernel's panels of w, or None for another backend."""
    if name != "cpu":
        return None
    from .cpu import pack_panels

    return pack_panels(w)


def rowwise_linear(x: Any, layer: PackedLinear, *, backend: str = "auto") -> np.ndarray:
    """y [M, N] float32 = x [M, K] W^T + b for ``layer`` (``pack_linear``). On ``cpu`` every entry is
    one FMA chain over k = 0..K-1 from zero, plus the bias: row i of y depends on row i of x alone.
    x need not be finite (an encoder's activations are passed through as they are). Bad input raises
    ``ValueError`` naming the argument."""
    name = _host_backend(backend)
    a = linear_inputs(x, layer)
    if name == "cpu" and layer.panels is None:
        layer = PackedLinear(layer.weight, layer.bias, _pack("cpu", layer.weight))
    return implementation("rowwise_linear", name)(a, layer)
