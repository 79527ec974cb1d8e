"""Batched cosine kNN: graph build within CSR segments, segment-restricted search, exact upkeep.

Public functions take NumPy arrays or torch tensors and return the same kind. Backends:
``reference`` (float64 NumPy) and the fast paths registered in ``_IMPLS``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .._arrays import check_offsets, is_torch, like, to_numpy
from .._backend import is_cuda_tensor, resolve_backend
from . import cpu, cuda, reference


def _triton_graph(*args: Any, **kw: Any):
    from . import triton as impl  # imported on first use: importing triton is slow and optional

    return impl.knn_graph(*args, **kw)


def _triton_search(*args: Any, **kw: Any):
    from . import triton as impl

    return impl.knn_search(*args, **kw)


_GRAPH_IMPLS: dict[str, Any] = {"reference": reference.knn_graph, "cpu": cpu.knn_graph, "cuda": cuda.knn_graph, "triton": _triton_graph}
_SEARCH_IMPLS: dict[str, Any] = {
    "reference": reference.knn_search, "cpu": cpu.knn_search, "cuda": cuda.knn_search, "triton": _triton_search,
}


GPU = ("cuda", "triton")


def _prep(x: Any, name: str) -> Any:
    """Host NumPy for host backends; a CUDA tensor for GPU backends (NumPy input is uploaded)."""
    if name not in GPU:
        return to_numpy(x)
    if is_torch(x):
        return x
    import torch

    dev = "cuda" if name == "cuda" or torch.cuda.is_available() else "cpu"  # interpreted triton runs on host tensors
    return torch.from_numpy(np.ascontiguousarray(x)).to(dev)


def _out(r: Any, ref: Any) -> Any:
    """Results in the caller's kind: torch stays torch (on its device), NumPy callers get NumPy."""
    if is_torch(r):
        return r if is_torch(ref) else r.cpu().numpy()
    return like(r, ref)


def _check_k(k: int) -> int:
    if int(k) < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    return int(k)


def knn_graph(
    x: Any, offsets: Any, k: int, *, normalize: bool = True, drop_nonpositive: bool = False, backend: str = "auto"
) -> tuple[Any, Any]:
    """Exact cosine top-k within each segment, self excluded.

    x [N, d] float (NumPy or torch), offsets [B+1] int64 CSR. Returns idx [N, k] int32 global row
    ids and sim [N, k] float32, sorted descending, padded with -1 / -inf. Inputs are normalised
    (``normalize`` is accepted for API symmetry: cosine needs unit rows, so it is always done).
    """
    k = _check_k(k)
    name = resolve_backend("knn_graph", backend, tuple(_GRAPH_IMPLS), on_cuda=is_cuda_tensor(x))
    xs = _prep(x, name)
    if xs.ndim != 2:
        raise ValueError(f"knn_graph: x must be [N, d], got shape {tuple(xs.shape)}")
    off = check_offsets(to_numpy(offsets), xs.shape[0])
    idx, sim = _GRAPH_IMPLS[name](xs, off, k, drop_nonpositive=drop_nonpositive)
    return _out(idx, x), _out(sim, x)


def knn_search(
    q: Any, q_offsets: Any, x: Any, x_offsets: Any, k: int, *, normalize: bool = True, drop_nonpositive: bool = False,
    backend: str = "auto",
) -> tuple[Any, Any]:
    """Queries of segment b against rows of segment b of x only.

    q [Q, d], q_offsets [B+1], x [N, d], x_offsets [B+1] -> idx [Q, k] int32 global rows of x,
    sim [Q, k] float32 (descending; -1 / -inf padding).
    """
    k = _check_k(k)
    name = resolve_backend("knn_search", backend, tuple(_SEARCH_IMPLS), on_cuda=is_cuda_tensor(x))
    qs, xs = _prep(q, name), _prep(x, name)
    if qs.ndim != 2 or xs.ndim != 2 or qs.shape[1] != xs.shape[1]:
        raise ValueError(f"knn_search: q [Q, d] and x [N, d] must agree on d, got {tuple(qs.shape)} and {tuple(xs.shape)}")
    qo = check_offsets(to_numpy(q_offsets), qs.shape[0], "q_offsets")
    xo = check_offsets(to_numpy(x_offsets), xs.shape[0], "x_offsets")
    if len(qo) != len(xo):
        raise ValueError(f"knn_search: q_offsets and x_offsets must have the same length, got {len(qo)} and {len(xo)}")
    idx, sim = _SEARCH_IMPLS[name](qs, qo, xs, xo, k, drop_nonpositive=drop_nonpositive)
    return _out(idx, q), _out(sim, q)


from .graph import KnnGraph  # noqa: E402

__all__ = ["KnnGraph", "knn_graph", "knn_search"]
