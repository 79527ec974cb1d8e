"""Backend registry: which fast paths are usable here, and which one an op runs on.

Backends: ``reference`` (float64 NumPy, always), ``cpu`` (the C++ module ``xmemory_gpu._C``),
``triton`` (GPU, or the CPU under ``TRITON_INTERPRET=1``) and ``cuda`` (``xmemory_gpu._cuda``
on a CUDA device). ``XMEMORY_BACKEND`` overrides ``backend="auto"``.
"""

from __future__ import annotations

import functools
import importlib
import os
from dataclasses import dataclass
from typing import Any

BACKENDS = ("reference", "cpu", "triton", "cuda")


@dataclass(frozen=True)
class BackendStatus:
    """Whether a backend can run here; ``reason`` says why not (or how it runs)."""

    available: bool
    reason: str


def _probe_cpu() -> BackendStatus:
    try:
        mod = importlib.import_module("xmemory_gpu._C")
    except ImportError as exc:
        return BackendStatus(False, f"compiled module xmemory_gpu._C not importable: {exc}")
    omp = "with OpenMP" if getattr(mod, "openmp", False) else "without OpenMP"
    return BackendStatus(True, f"C++ module built {omp}")


def _torch_cuda() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


def _probe_cuda() -> BackendStatus:
    try:
        mod = importlib.import_module("xmemory_gpu._cuda")
    except ImportError as exc:
        return BackendStatus(False, f"CUDA module xmemory_gpu._cuda not built or not importable: {exc}")
    if not _torch_cuda():
        return BackendStatus(False, "xmemory_gpu._cuda is built but torch sees no CUDA device")
    return BackendStatus(True, f"CUDA module built; {mod.device_count()} device(s)")


def _probe_triton() -> BackendStatus:
    try:
        import triton  # noqa: F401
    except ImportError as exc:
        return BackendStatus(False, f"triton not installed: {exc}")
    if interpreting_triton():
        return BackendStatus(True, "TRITON_INTERPRET=1: kernels run in the CPU interpreter (slow; tests only)")
    if not _torch_cuda():
        return BackendStatus(False, "no CUDA device (set TRITON_INTERPRET=1 before importing triton to interpret)")
    return BackendStatus(True, "triton on a CUDA device")


def interpreting_triton() -> bool:
    """True when Triton kernels run in the CPU interpreter."""
    return os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")


@functools.lru_cache(maxsize=1)
def _statuses() -> dict[str, BackendStatus]:
    return {
        "reference": BackendStatus(True, "float64 NumPy reference"),
        "cpu": _probe_cpu(),
        "triton": _probe_triton(),
        "cuda": _probe_cuda(),
    }


def available_backends() -> dict[str, BackendStatus]:
    """Every backend with whether it is usable here and why (not)."""
    return dict(_statuses())


def is_available(name: str) -> bool:
    return _statuses()[name].available


def is_cuda_tensor(x: Any) -> bool:
    return getattr(x, "is_cuda", False) is True


def resolve_backend(
    op: str,
    backend: str,
    implemented: tuple[str, ...],
    *,
    on_cuda: bool,
    gpu_order: tuple[str, ...] = ("cuda", "triton"),
) -> str:
    """Pick the backend an op runs on.

    ``implemented`` lists the backends the op has. ``backend="auto"`` (or ``XMEMORY_BACKEND``)
    picks, for CUDA inputs, the first usable of ``gpu_order`` (the benchmarks decide the order
    per op); for host inputs ``cpu`` when built, else ``reference``. An explicit backend that
    the op lacks or that is not usable here raises ``ValueError`` with the reason.
    """
    if backend == "auto":
        backend = os.environ.get("XMEMORY_BACKEND", "auto") or "auto"
    if backend == "auto":
        order = gpu_order if on_cuda else ("cpu", "reference")
        for name in order:
            if name in implemented and is_available(name):
                return name
        if on_cuda:
            raise ValueError(
                f"{op}: inputs are CUDA tensors but none of {gpu_order} is usable: "
                + "; ".join(f"{n}: {_statuses()[n].reason}" for n in gpu_order)
            )
        return "reference"
    if backend not in BACKENDS:
        raise ValueError(f"{op}: unknown backend {backend!r}; expected 'auto' or one of {BACKENDS}")
    if backend not in implemented:
        raise ValueError(f"{op}: backend {backend!r} is not implemented; implemented: {implemented}")
    status = _statuses()[backend]
    if not status.available:
        raise ValueError(f"{op}: backend {backend!r} is not usable here: {status.reason}")
    return backend
