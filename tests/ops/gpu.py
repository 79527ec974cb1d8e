"""Marks for the backend-specific tests of the per-op files: a CUDA GPU (the GPU paths are compiled
everywhere, run only there), the compiled CUDA module, torch + Triton; and a stand-in CUDA array for
checking the _cuda bindings' argument checks without a GPU."""

from __future__ import annotations

import importlib.util

import pytest


def has_cuda() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available()


def cuda_module():
    """The compiled ``xmemory_gpu._cuda`` module, or None where it was not built (no nvcc at build time)."""
    try:
        from xmemory_gpu import _cuda
    except ImportError:
        return None
    return _cuda


def has_triton() -> bool:
    """torch and triton both installed (the Triton backends take torch tensors)."""
    return all(importlib.util.find_spec(m) is not None for m in ("torch", "triton"))


requires_cuda = pytest.mark.skipif(not has_cuda(), reason="needs a CUDA GPU")
requires_cuda_module = pytest.mark.skipif(
    cuda_module() is None, reason="xmemory_gpu._cuda not built (no nvcc at build time)"
)
requires_triton = pytest.mark.skipif(not has_triton(), reason="needs torch and triton")


class FakeCuda:
    """An object with a ``__cuda_array_interface__`` (as torch CUDA tensors and CuPy arrays have)
    pointing at a fake device address: the bindings' C++ checks read only the interface, so a
    well-formed one passes them and the launch then fails (no GPU), a malformed one is refused."""

    def __init__(
        self,
        shape: tuple[int, ...],
        typestr: str,
        *,
        strides: tuple[int, ...] | None = None,
        ptr: int = 1 << 30,
    ):
        self.__cuda_array_interface__ = {
            "shape": tuple(shape),
            "typestr": typestr,
            "data": (ptr, False),
            "strides": strides,
            "version": 3,
        }
