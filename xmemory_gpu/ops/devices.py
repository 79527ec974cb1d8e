"""Where arrays live and how they move: host NumPy for the host backends (``reference``, ``cpu``),
torch tensors on the GPU for the device backends (``triton``, ``cuda``), results back in the
caller's kind; and the (program -> segment, first row) tile table the GPU launches share.

- ``host(x)``: the one "to host" helper (NumPy, list, scalar or a torch tensor on any device).
- ``to_backend(x, backend)``: ``x`` in the form ``backend`` takes (uploads NumPy for device backends).
- ``as_caller(result, ref)``: ``result`` in the kind of ``ref`` (NumPy, or torch on ref's device).
- ``backend_device`` / ``gpu_device`` / ``encoder_device``: the torch device a backend runs on.
- ``is_torch`` / ``is_cuda_tensor``: the one check of each kind.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from .backends import GPU_BACKENDS, interpreting_triton, requested_backend


def is_torch(x: Any) -> bool:
    """True for a torch tensor (without importing torch)."""
    return type(x).__module__.startswith("torch")


def is_cuda_tensor(x: Any) -> bool:
    return getattr(x, "is_cuda", False) is True


def _torch():
    import torch

    return torch


def host(x: Any, dtype: Any = None) -> np.ndarray:
    """A host NumPy view/copy of ``x`` (NumPy array, list, scalar or torch tensor on any device);
    ``dtype`` converts. Torch floats other than float32 / float64 (bfloat16, float16) become float32."""
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
    backend = requested_backend(backend)
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


def tile_table(
    offsets: np.ndarray, block: int, *, weight: np.ndarray | None = None, skip: np.ndarray | None = None
) -> TileTable:
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


__all__ = [
    "TileTable",
    "array",
    "as_caller",
    "backend_device",
    "encoder_device",
    "gpu_device",
    "host",
    "is_cuda_tensor",
    "is_torch",
    "tile_table",
    "to_backend",
]
