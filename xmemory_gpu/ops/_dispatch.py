"""One dispatch and I/O contract for every op family (knn, objective, coverage, entropy).

Backends: ``reference`` (float64 NumPy, always), ``cpu`` (the C++ module ``xmemory_gpu._C``),
``triton`` (a CUDA device, or the CPU under ``TRITON_INTERPRET=1``) and ``cuda``
(``xmemory_gpu._cuda`` on a CUDA device). ``XMEMORY_BACKEND`` overrides ``backend="auto"``.

``backend="auto"`` picks, for host inputs, ``cpu`` when built, else ``reference``; for CUDA tensors,
the GPU path recorded as validated on a GPU for that op (``ops/validated.json``, see
``validated.py``), otherwise ``triton``, otherwise ``cuda``.

Inputs are validated here, once, for every backend (the ``check_*`` helpers below raise one-line
``ValueError``s that name the argument); ``to_backend`` hands device backends device tensors and
host backends host arrays; ``as_caller`` returns results in the caller's kind. ``tile_table`` is
the (program -> segment, first row) table shared by the GPU paths.
"""

from __future__ import annotations

import functools
import importlib
import numbers
import os
from dataclasses import dataclass
from typing import Any

import numpy as np

BACKENDS = ("reference", "cpu", "triton", "cuda")
GPU_BACKENDS = ("cuda", "triton")
HOST_BACKENDS = ("reference", "cpu")
LABEL_BOUND = 2**31  # labels / ids above this cannot be narrowed to int32 and could exhaust memory


# ---- availability --------------------------------------------------------------------------------


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
    except Exception as exc:  # ImportError, or a broken install failing at import time
        return BackendStatus(False, f"triton not importable: {exc}")
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


def is_torch(x: Any) -> bool:
    return type(x).__module__.startswith("torch")


def is_cuda_tensor(x: Any) -> bool:
    return getattr(x, "is_cuda", False) is True


# ---- selection -----------------------------------------------------------------------------------


def gpu_preference(op: str, implemented: tuple[str, ...]) -> tuple[str, ...]:
    """GPU backends of ``op`` in the order ``auto`` tries them: validated first, then triton, then cuda."""
    from .validated import validated_backend

    order: list[str] = []
    entry = validated_backend(op)
    if entry is not None:
        order.append(entry.backend)
    order += [b for b in ("triton", "cuda") if b not in order]
    return tuple(b for b in order if b in implemented)


def resolve_backend(
    op: str,
    backend: str,
    implemented: tuple[str, ...],
    *,
    on_cuda: bool,
    gpu_order: tuple[str, ...] | None = None,
) -> str:
    """Pick the backend ``op`` runs on.

    ``implemented`` lists the op's backends. ``backend="auto"`` (or ``XMEMORY_BACKEND``) picks, for
    CUDA inputs, the first usable of ``gpu_order`` (default ``gpu_preference(op, implemented)``:
    the backend validated on a GPU, then triton, then cuda); for host inputs ``cpu`` when built,
    else ``reference``. An explicit backend that the op lacks or that is not usable here raises
    ``ValueError`` with the reason.
    """
    if backend == "auto":
        backend = os.environ.get("XMEMORY_BACKEND", "auto") or "auto"
    if backend == "auto":
        if on_cuda:
            order = gpu_order if gpu_order is not None else gpu_preference(op, implemented)
            for name in order:
                if name in implemented and is_available(name):
                    return name
            raise ValueError(
                f"{op}: inputs are CUDA tensors but none of {order} is usable: "
                + "; ".join(f"{n}: {_statuses()[n].reason}" for n in order)
            )
        for name in ("cpu", "reference"):
            if name in implemented and is_available(name):
                return name
        return "reference"
    if backend not in BACKENDS:
        raise ValueError(f"{op}: unknown backend {backend!r}; expected 'auto' or one of {BACKENDS}")
    if backend not in implemented:
        raise ValueError(f"{op}: backend {backend!r} is not implemented; implemented: {implemented}")
    status = _statuses()[backend]
    if not status.available:
        raise ValueError(f"{op}: backend {backend!r} is not usable here: {status.reason}")
    return backend


# ---- I/O contract --------------------------------------------------------------------------------


def _torch():
    import torch

    return torch


def host(x: Any, dtype: Any = None) -> np.ndarray:
    """A host NumPy view/copy of ``x`` (NumPy array, list, scalar or torch tensor on any device)."""
    if is_torch(x):
        x = x.detach()
        torch = _torch()
        if x.dtype.is_floating_point and x.dtype not in (torch.float32, torch.float64):
            x = x.float()
        x = x.cpu().numpy()
    arr = np.asarray(x)
    if dtype is not None and arr.dtype != dtype:
        arr = arr.astype(dtype)
    return arr


def array(x: Any) -> Any:
    """``x`` itself when it is a torch tensor or NumPy array, else ``np.asarray(x)`` (lists, scalars)."""
    return x if is_torch(x) or isinstance(x, np.ndarray) else np.asarray(x)


def gpu_device(backend: str, ref: Any = None) -> Any:
    """The torch device a GPU backend runs on: ``ref``'s CUDA device, the current CUDA device, or the
    CPU when Triton is interpreted and no GPU is present."""
    torch = _torch()
    if is_cuda_tensor(ref):
        return ref.device
    if torch.cuda.is_available():
        return torch.device("cuda", torch.cuda.current_device())
    if backend == "triton" and interpreting_triton():
        return torch.device("cpu")
    raise ValueError(f"backend {backend!r} needs a CUDA device (torch sees none)")


def backend_device(backend: str) -> Any:
    """The torch device a backend's arrays live on: ``None`` for the host backends (and ``auto``
    on host arrays), the GPU for ``cuda`` / ``triton`` (the CPU when Triton is interpreted and no
    GPU is present). ``XMEMORY_BACKEND`` overrides ``auto`` as in ``resolve_backend``."""
    if backend == "auto":
        backend = os.environ.get("XMEMORY_BACKEND", "auto") or "auto"
    return gpu_device(backend) if backend in GPU_BACKENDS else None


def encoder_device(backend: str, configured: str = "cpu") -> str:
    """Where an encoder feeding the kernels runs: on the GPU of a GPU backend (``cuda`` / ``triton``
    with a CUDA device), so embeddings are made next to the kernels that read them; otherwise
    ``configured`` (``embed.device``)."""
    dev = backend_device(backend)
    return str(dev) if dev is not None and dev.type == "cuda" else configured


def to_backend(x: Any, backend: str, *, dtype: Any = None, device: Any = None) -> Any:
    """``x`` in the form ``backend`` takes: a host NumPy array for ``reference`` / ``cpu``, a torch
    tensor on the GPU (``device``, default ``gpu_device``) for ``triton`` / ``cuda``. ``dtype`` is a
    NumPy dtype (mapped to torch's for device backends); ``None`` keeps the input's."""
    if backend not in GPU_BACKENDS:
        return host(x, dtype)
    torch = _torch()
    dev = device if device is not None else gpu_device(backend, x)
    if not is_torch(x):
        a = np.ascontiguousarray(np.asarray(x) if dtype is None else np.asarray(x, dtype=dtype))
        return torch.from_numpy(a if a.flags.writeable else a.copy()).to(dev)
    t = x.detach()
    if dtype is not None:
        t = t.to(getattr(torch, np.dtype(dtype).name))
    return t.to(dev)


def as_caller(result: Any, ref: Any) -> Any:
    """``result`` (NumPy or torch) in the kind of ``ref``: a torch tensor on ref's device when ref is
    a tensor, else a NumPy array."""
    if is_torch(ref):
        torch = _torch()
        if is_torch(result):
            return result.to(ref.device)
        return torch.from_numpy(np.ascontiguousarray(result)).to(ref.device)
    if is_torch(result):
        return result.detach().cpu().numpy()
    return result


# ---- validation (one-line ValueErrors naming the argument) --------------------------------------


def _dtype_kind(x: Any) -> str:
    """NumPy dtype kind of x ('f', 'c', 'i', 'u', 'b', 'O', ...), for NumPy and torch alike."""
    if is_torch(x):
        if x.dtype.is_complex:
            return "c"
        if x.dtype.is_floating_point:
            return "f"
        if x.dtype == _torch().bool:
            return "b"
        return "i"
    return np.asarray(x).dtype.kind


def check_real(name: str, x: Any, *, integers: bool = True) -> Any:
    """Refuse complex, boolean, object and string arrays (and integers unless ``integers``)."""
    kind = _dtype_kind(x)
    ok = "f" + ("iu" if integers else "")
    if kind not in ok:
        what = {"c": "complex", "b": "boolean", "O": "object", "U": "string", "S": "bytes"}.get(kind, f"kind {kind!r}")
        dt = getattr(x, "dtype", None)
        raise ValueError(f"{name}: expected a real floating array, got {what} dtype {dt}")
    return x


def check_finite(name: str, x: Any, *, max_report: int = 5) -> Any:
    """Refuse NaN / inf, naming the first bad rows (axis 0) of ``x`` [N, ...] (NumPy or torch)."""
    if _dtype_kind(x) not in "fc":
        return x
    # a finite sum means every entry is finite (NaN and inf propagate): one cheap pass; only an
    # overflowing or non-finite sum pays for the row-by-row search
    if is_torch(x):
        torch = _torch()
        t = x.detach()
        if t.numel() and bool(torch.isfinite(t.sum())):
            return x
        bad = ~torch.isfinite(t)
        if t.ndim > 1:
            bad = bad.reshape(t.shape[0], -1).any(dim=1) if t.numel() else bad.reshape(-1)[:0]
        if not bool(bad.any()):
            return x
        rows = torch.nonzero(bad.reshape(-1)).reshape(-1)
        n_bad, first = int(rows.numel()), rows[:max_report].cpu().tolist()
    else:
        a = np.asarray(x)
        with np.errstate(over="ignore", invalid="ignore"):
            if a.size and np.isfinite(a.sum()):
                return x
        bad = ~np.isfinite(a)
        if a.ndim > 1:
            bad = bad.reshape(a.shape[0], -1).any(axis=1) if a.size else np.zeros(a.shape[0], bool)
        if not bad.any():
            return x
        rows = np.flatnonzero(bad)
        n_bad, first = int(rows.size), rows[:max_report].tolist()
    where = "rows" if getattr(x, "ndim", 1) > 1 else "entries"
    more = f" (first {len(first)} of {n_bad})" if n_bad > len(first) else ""
    raise ValueError(f"{name}: NaN or inf in {where} {first}{more}; inputs must be finite")


def check_float_matrix(name: str, x: Any, *, ndim: int = 2, finite: bool = True) -> Any:
    """Real (int or float) and finite, with ``ndim`` dimensions: the check for embedding inputs.
    Returns ``array(x)`` (lists become NumPy). ``finite=False`` leaves finiteness to a kernel whose own
    pass over ``x`` counts non-finite rows (its caller then calls ``check_finite`` to name them)."""
    x = array(x)
    if x.ndim != ndim:
        raise ValueError(f"{name}: expected a {ndim}-D array, got shape {tuple(x.shape)}")
    check_real(name, x)
    return check_finite(name, x) if finite else x


def check_int(name: str, v: Any, *, lo: int | None = None, hi: int | None = None) -> int:
    """An integer scalar (Python or NumPy int, a 0-d integer array; not bool, not 2.0) in [lo, hi]."""
    if is_torch(v) or isinstance(v, np.ndarray):
        if getattr(v, "ndim", 0) != 0 or _dtype_kind(v) not in "iu":
            raise ValueError(f"{name}: expected an integer, got {v!r}")
        v = int(v.item())
    if isinstance(v, bool) or not isinstance(v, numbers.Integral):
        raise ValueError(f"{name}: expected an integer, got {v!r} ({type(v).__name__})")
    v = int(v)
    if lo is not None and v < lo:
        raise ValueError(f"{name} must be >= {lo}, got {v}")
    if hi is not None and v > hi:
        raise ValueError(f"{name} must be <= {hi}, got {v}")
    return v


def check_k(name: str, k: Any, max_k: int | None = None) -> int:
    """An integer k >= 1 (and <= max_k when given)."""
    return check_int(name, k, lo=1, hi=max_k)


def check_positive(name: str, v: Any) -> float:
    """A finite real scalar > 0 (e.g. ``eps``)."""
    if isinstance(v, bool) or not isinstance(v, numbers.Real):
        raise ValueError(f"{name}: expected a positive number, got {v!r} ({type(v).__name__})")
    f = float(v)
    if not np.isfinite(f) or f <= 0:
        raise ValueError(f"{name}: must be finite and > 0, got {v!r}")
    return f


def check_finite_scalar(name: str, v: Any) -> float:
    """A finite real scalar (e.g. ``alpha``, ``target``)."""
    if isinstance(v, bool) or not isinstance(v, numbers.Real) or not np.isfinite(float(v)):
        raise ValueError(f"{name}: expected a finite number, got {v!r}")
    return float(v)


def check_offsets(name: str, offsets: Any, n: int) -> np.ndarray:
    """CSR offsets [B+1] (integers, 0 .. n, non-decreasing) -> host int64 array."""
    off = host(offsets)
    if off.ndim != 1 or off.size < 1:
        raise ValueError(f"{name}: expected a 1-D array of B+1 offsets, got shape {off.shape}")
    if not np.issubdtype(off.dtype, np.integer):
        raise ValueError(f"{name}: expected integer offsets, got dtype {off.dtype}")
    off = off.astype(np.int64, copy=False)
    if off[0] != 0 or off[-1] != n:
        raise ValueError(f"{name}: must start at 0 and end at the row count {n}, got {off[0]}..{off[-1]}")
    step = np.diff(off)
    if np.any(step < 0):
        raise ValueError(f"{name}: must be non-decreasing (first decrease after entry {int(np.argmax(step < 0))})")
    return off


def check_same_segments(name_a: str, a: np.ndarray, name_b: str, b: np.ndarray) -> None:
    """Two CSR offset arrays must describe the same number of segments."""
    if len(a) != len(b):
        raise ValueError(f"{name_a} and {name_b}: must have the same length (B+1), got {len(a)} and {len(b)}")


def check_labels(name: str, labels: Any, n: int, *, bound: int = LABEL_BOUND) -> np.ndarray:
    """Labels [n]: integers in [0, bound) -> host int64 (a bound that cannot exhaust memory)."""
    lab = host(labels)
    if lab.shape != (n,):
        raise ValueError(f"{name}: expected shape ({n},), got {lab.shape}")
    if lab.size and not np.issubdtype(lab.dtype, np.integer):
        if lab.dtype.kind != "f" or not np.all(np.isfinite(lab)) or np.any(lab != np.round(lab)):
            raise ValueError(f"{name}: expected integers, got dtype {lab.dtype}")
    lab = lab.astype(np.int64, copy=False)
    if lab.size:
        lo, hi = int(lab.min()), int(lab.max())
        if lo < 0:
            raise ValueError(f"{name}: must be >= 0, got {lo} at entry {int(np.argmin(lab))}")
        if hi >= bound:
            raise ValueError(f"{name}: must be < {bound}, got {hi} at entry {int(np.argmax(lab))}")
    return lab


def check_index(name: str, idx: Any, hi: Any, *, allow_missing: bool = True) -> np.ndarray:
    """Integer ids in [0, hi) (``-1`` = none when ``allow_missing``); ``hi`` a scalar or, per row
    of ``idx`` [M, ...], an [M] array of bounds (e.g. the row's segment size for local ids). A scalar
    comes back as a 1-element array."""
    a = np.atleast_1d(host(idx))
    if a.size and not np.issubdtype(a.dtype, np.integer):
        raise ValueError(f"{name}: expected integer ids, got dtype {a.dtype}")
    if a.size == 0:
        return a.astype(np.int64)
    a64 = a.astype(np.int64, copy=False)
    bound = np.asarray(hi, dtype=np.int64)
    if bound.ndim == 1:
        bound = bound.reshape((-1,) + (1,) * (a64.ndim - 1))
    ok = (a64 >= 0) & (a64 < bound)
    if allow_missing:
        ok |= a64 == -1
    bad = ~ok
    if bad.any():
        pos = np.argwhere(bad)[0]
        row = int(pos[0])
        lim = int(bound.reshape(-1)[row]) if bound.ndim else int(bound)
        raise ValueError(
            f"{name}: id {int(a64[tuple(pos)])} at {tuple(int(p) for p in pos)} outside [0, {lim})"
            + (" (-1 marks none)" if allow_missing else "")
        )
    return a64


def check_budgets(name: str, budget: Any, q: int) -> np.ndarray:
    """A budget scalar or [q] of integers >= 0 -> host int64 [q]."""
    b = host(budget)
    if b.size and not np.issubdtype(b.dtype, np.integer):
        if b.dtype.kind != "f" or not np.all(np.isfinite(b)) or np.any(b != np.round(b)):
            raise ValueError(f"{name}: expected integers, got {b.dtype} {b.reshape(-1)[:3].tolist()}")
    if b.ndim > 1 or (b.ndim == 1 and b.shape[0] != q):
        raise ValueError(f"{name}: expected a scalar or shape ({q},), got {b.shape}")
    b = np.broadcast_to(b.astype(np.int64), (q,)).copy()
    if b.size and b.min() < 0:
        raise ValueError(f"{name}: must be >= 0, got {int(b.min())} at entry {int(np.argmin(b))}")
    return b


# ---- tile table shared by the GPU paths ----------------------------------------------------------


@dataclass(frozen=True)
class TileTable:
    """Program -> (segment, first row) for a ragged launch: ``seg`` [T] int32, ``row0`` [T] int64
    (global first row of the tile), ``start`` [B+1] int64 (first tile of each segment, in segment
    order: the prefix sum of ceil(rows_b / block)); ``seg`` / ``row0`` follow ``order``."""

    seg: np.ndarray
    row0: np.ndarray
    start: np.ndarray

    @property
    def n(self) -> int:
        return int(self.seg.size)


def tile_table(offsets: np.ndarray, block: int, *, weight: np.ndarray | None = None,
               skip: np.ndarray | None = None) -> TileTable:
    """Tiles of ``block`` rows over the CSR segments ``offsets`` [B+1].

    ``weight`` [B] orders the tiles heaviest segment first (load balance across SMs; stable);
    ``skip`` [B] bool drops segments from ``seg`` / ``row0`` (they keep their ``start`` entries).
    """
    off = np.asarray(offsets, dtype=np.int64)
    per = (np.diff(off) + block - 1) // block
    start = np.zeros(off.size, dtype=np.int64)
    np.cumsum(per, out=start[1:])
    segs = np.arange(off.size - 1)
    if skip is not None:
        segs = segs[~np.asarray(skip, dtype=bool)]
    if weight is not None:
        segs = segs[np.argsort(-np.asarray(weight)[segs], kind="stable")]
    cnt = per[segs]
    seg = np.repeat(segs, cnt).astype(np.int32)
    first = np.repeat(np.cumsum(cnt) - cnt, cnt)
    row0 = (off[seg] + (np.arange(seg.size) - first) * block).astype(np.int64)
    return TileTable(seg=seg, row0=row0, start=start)


def csr_offsets(counts: Any) -> np.ndarray:
    """CSR offsets [len(counts)+1] int64 from per-segment counts."""
    counts = np.asarray(counts, dtype=np.int64).reshape(-1)
    off = np.zeros(counts.size + 1, dtype=np.int64)
    np.cumsum(counts, out=off[1:])
    return off


__all__ = [
    "BACKENDS", "BackendStatus", "GPU_BACKENDS", "HOST_BACKENDS", "LABEL_BOUND", "TileTable", "array", "as_caller",
    "available_backends", "backend_device", "check_budgets", "check_finite", "check_finite_scalar", "check_float_matrix", "check_index",
    "check_int", "check_k", "check_labels", "check_offsets", "check_positive", "check_real", "check_same_segments",
    "csr_offsets", "encoder_device", "gpu_device", "gpu_preference", "host", "interpreting_triton", "is_available", "is_cuda_tensor",
    "is_torch", "resolve_backend", "tile_table", "to_backend",
]
