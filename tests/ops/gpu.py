"""Marks for tests that need a CUDA GPU (the GPU paths are compiled everywhere, run only there)."""

from __future__ import annotations

import pytest


def has_cuda() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available()


requires_cuda = pytest.mark.skipif(not has_cuda(), reason="needs a CUDA GPU")
