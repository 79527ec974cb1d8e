"""Which backends exist, which can run here, which each op implements, and which one a call runs on.

Backends: ``reference`` (float64 NumPy, always), ``cpu`` (the C++ module ``xmemory_gpu._C``),
``triton`` (a CUDA device, or the CPU under ``TRITON_INTERPRET=1``) and ``cuda``
(``xmemory_gpu._cuda`` on a CUDA device). ``XMEMORY_BACKEND`` overrides ``backend="auto"``.

``backend="auto"`` picks, for host inputs, ``cpu`` when built, else ``reference``; for CUDA tensors,
the GPU path recorded as validated on a GPU for that op (``ops/validated.json``, see
``validated.py``), otherwise ``triton``, otherwise ``cuda``.

Every op family registers its backends here (``register``), with its input contract: ``accepts``, a
predicate over the op's arguments (those of its public function, ``backend`` aside) that returns None
for inputs in contract and else a one-line reason naming the argument; the op raises
``ValueError(reason)`` for those on every backend (``contract(op)`` gives the predicate; each family
keeps its own in its package). ``implemented_backends(op)`` lists the backends and
``implementation(op, backend)`` imports the backend's module on first use (importing triton is slow
and optional). Host/device transfer lives in ``devices.py``, input checks in ``checks.py``.
"""

from __future__ import annotations

import functools
import importlib
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

BACKENDS = ("reference", "cpu", "triton", "cuda")
GPU_BACKENDS = ("cuda", "triton")
HOST_BACKENDS = ("reference", "cpu")


# ---- availability --------------------------------------------------------------------------------


@dataclass(frozen=True)
class BackendStatus:
    """Whether a backend can run here; ``reason`` says why not (or how it runs)."""

    available: bool
    reason: str


def interpreting_triton() -> bool:
    """True when Triton kernels run in the CPU interpreter."""
    return os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")


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
    except Exception as exc:  # ImportError, or a broken install failing at import time
        return BackendStatus(False, f"triton not importable: {exc}")
    if interpreting_triton():
        return BackendStatus(
            True, "TRITON_INTERPRET=1: kernels run in the CPU interpreter (slow; tests only)"
        )
    if not _torch_cuda():
        return BackendStatus(
            False, "no CUDA device (set TRITON_INTERPRET=1 before importing triton to interpret)"
        )
    return BackendStatus(True, "triton on a CUDA device")


_PROBES: dict[str, Callable[[], BackendStatus]] = {
    "reference": lambda: BackendStatus(True, "float64 NumPy reference"),
    "cpu": _probe_cpu,
    "triton": _probe_triton,
    "cuda": _probe_cuda,
}


@functools.cache
def _status(name: str) -> BackendStatus:
    """One backend's status, probed on first ask: host inputs under ``auto`` probe ``cpu`` only, so
    a CPU process never imports torch and triton for them (1.7 s of a build's theme stage)."""
    return _PROBES[name]()


def _statuses() -> dict[str, BackendStatus]:
    return {name: _status(name) for name in BACKENDS}


def available_backends() -> dict[str, BackendStatus]:
    """Every backend with whether it is usable here and why (not)."""
    return _statuses()


def is_available(name: str) -> bool:
    return _status(name).available


# ---- what each op implements ---------------------------------------------------------------------


Accepts = Callable[..., str | None]  # the op's arguments -> None in contract, else the reason


@dataclass(frozen=True)
class _Op:
    package: str  # the family's package, e.g. "xmemory_gpu.ops.knn"
    function: str  # the function each backend module defines
    modules: dict[str, str]  # backend -> module inside the package
    accepts: Accepts | None  # the op's input contract


_OPS: dict[str, _Op] = {}


def register(
    op: str,
    package: str,
    modules: Mapping[str, str],
    *,
    accepts: Accepts | None = None,
    function: str | None = None,
) -> dict[str, str]:
    """Record that ``op`` runs on the backends in ``modules`` (backend -> module of ``package`` that
    defines ``function``, default ``op``), its inputs in contract when ``accepts(*args, **kwargs)``
    (the op's public arguments) returns None. Returns ``modules`` as a dict."""
    unknown = set(modules) - set(BACKENDS)
    if unknown:
        raise ValueError(f"{op}: unknown backends {sorted(unknown)}; expected some of {BACKENDS}")
    table = dict(modules)
    _OPS[op] = _Op(package, function or op, table, accepts)
    return table


def contract(op: str) -> Accepts | None:
    """``op``'s ``accepts`` predicate (None when the op registered none)."""
    return _op(op).accepts


def _op(op: str) -> _Op:
    try:
        return _OPS[op]
    except KeyError:
        raise ValueError(f"unknown op {op!r}; expected one of {sorted(_OPS)}") from None


def implemented_backends(op: str) -> tuple[str, ...]:
    """The backends ``op`` implements (in ``BACKENDS`` order), whether or not they can run here:
    ``implemented_backends("coverage_select")`` -> ``("reference", "cpu", "triton", "cuda")``.
    Combine with ``available_backends()`` for what can run on this machine."""
    modules = _op(op).modules
    return tuple(b for b in BACKENDS if b in modules)


def implementation(op: str, backend: str) -> Callable[..., Any]:
    """The function running ``op`` on ``backend`` (its module imported on first use)."""
    entry = _op(op)
    if backend not in entry.modules:
        raise ValueError(
            f"{op}: backend {backend!r} is not implemented; implemented: {implemented_backends(op)}"
        )
    return getattr(importlib.import_module(f"{entry.package}.{entry.modules[backend]}"), entry.function)


def registered_ops() -> tuple[str, ...]:
    """Every op that registered its backends."""
    return tuple(_OPS)


# ---- selection -----------------------------------------------------------------------------------


def requested_backend(backend: str) -> str:
    """``backend``, or under ``"auto"`` the ``XMEMORY_BACKEND`` override when it is set."""
    if backend == "auto":
        return os.environ.get("XMEMORY_BACKEND", "auto") or "auto"
    return backend


def gpu_preference(op: str, implemented: tuple[str, ...] | None = None) -> tuple[str, ...]:
    """GPU backends of ``op`` in the order ``auto`` tries them: validated first, then triton, then cuda.
    ``implemented`` defaults to ``implemented_backends(op)``."""
    from .validated import validated_backend

    if implemented is None:
        implemented = implemented_backends(op)
    order: list[str] = []
    entry = validated_backend(op)
    if entry is not None:
        order.append(entry.backend)
    order += [b for b in ("triton", "cuda") if b not in order]
    return tuple(b for b in order if b in implemented)


def host_backend(backend: str) -> str:
    """The backend a host-only op (``spherical_kmeans``, ``attach_rows``, ``rowwise_linear``,
    ``feature_counts``) runs on for a caller with ``backend`` (or ``XMEMORY_BACKEND`` under ``auto``):
    itself on the host; for a GPU backend the host's best (a construction on the GPU keeps its k-means
    and attach on the host)."""
    name = requested_backend(backend)
    if name in GPU_BACKENDS:
        return "cpu" if is_available("cpu") else "reference"
    return name


_HOST_IMPLS: dict[tuple[str, str, str | None], Callable[..., Any]] = {}


def host_implementation(op: str, backend: str = "auto") -> Callable[..., Any]:
    """The function running host-only ``op`` for a caller's ``backend`` (``auto``: ``XMEMORY_BACKEND``,
    a GPU name the host's best; see ``host_backend``), resolved once per (op, backend, override): the
    row helpers run per theme block, where resolving each call would cost more than the arithmetic."""
    key = (op, backend, os.environ.get("XMEMORY_BACKEND") if backend == "auto" else None)
    fn = _HOST_IMPLS.get(key)
    if fn is None:
        name = resolve_backend(op, host_backend(backend) if backend == "auto" else backend, on_cuda=False)
        fn = _HOST_IMPLS[key] = implementation(op, name)
    return fn


def resolve_backend(
    op: str,
    backend: str,
    implemented: tuple[str, ...] | None = None,
    *,
    on_cuda: bool,
    gpu_order: tuple[str, ...] | None = None,
) -> str:
    """Pick the backend ``op`` runs on.

    ``implemented`` lists the op's backends (default ``implemented_backends(op)``).
    ``backend="auto"`` (or ``XMEMORY_BACKEND``) picks, for CUDA inputs, the first usable of
    ``gpu_order`` (default ``gpu_preference(op, implemented)``: the backend validated on a GPU, then
    triton, then cuda); for host inputs ``cpu`` when built, else ``reference``. An explicit backend
    that the op lacks or that is not usable here raises ``ValueError`` with the reason.
    """
    if implemented is None:
        implemented = implemented_backends(op)
    backend = requested_backend(backend)
    if backend == "auto":
        if on_cuda:
            order = gpu_order if gpu_order is not None else gpu_preference(op, implemented)
            for name in order:
                if name in implemented and is_available(name):
                    return name
            raise ValueError(
                f"{op}: inputs are CUDA tensors but none of {order} is usable: "
                + "; ".join(f"{n}: {_status(n).reason}" for n in order)
            )
        for name in ("cpu", "reference"):
            if name in implemented and is_available(name):
                return name
        return "reference"
    if backend not in BACKENDS:
        raise ValueError(f"{op}: unknown backend {backend!r}; expected 'auto' or one of {BACKENDS}")
    if backend not in implemented:
        raise ValueError(f"{op}: backend {backend!r} is not implemented; implemented: {implemented}")
    if not is_available(backend):
        raise ValueError(f"{op}: backend {backend!r} is not usable here: {_status(backend).reason}")
    return backend


__all__ = [
    "BACKENDS",
    "BackendStatus",
    "GPU_BACKENDS",
    "HOST_BACKENDS",
    "available_backends",
    "contract",
    "gpu_preference",
    "host_implementation",
    "implementation",
    "implemented_backends",
    "interpreting_triton",
    "is_available",
    "register",
    "registered_ops",
    "requested_backend",
    "resolve_backend",
]
