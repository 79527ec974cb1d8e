"""Marks for tests that need a CUDA GPU (the GPU paths are compiled everywhere, run only there), and a
stand-in CUDA array for checking the _cuda bindings' argument checks without a GPU."""

from __future__ import annotations

import pytest


def has_cuda() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available()


requires_cuda = pytest.mark.skipif(not has_cuda(), reason="needs a CUDA GPU")


class FakeCuda:
    """An object with a ``__cuda_array_interface__`` (as torch CUDA tensors and CuPy arrays have)
    pointing at a fake device address: the bindings' C++ checks read only the interface, so a
    well-formed one passes them and the launch then fails (no GPU), a malformed one is refused."""

    def __init__(self, shape: tuple[int, ...], typestr: str, *, strides: tuple[int, ...] | None = None,
                 ptr: int = 1 << 30):
        self.__cuda_array_interface__ = {"shape": tuple(shape), "typestr": typestr, "data": (ptr, False),
                                         "strides": strides, "version": 3}
