"""Batched cosine kNN: graph build within CSR segments, segment-restricted search, exact upkeep.

Public functions take NumPy arrays or torch tensors and return the same kind. Backends:
``reference`` (float64 NumPy), ``cpu``, ``triton`` and ``cuda`` (``implemented_backends("knn_graph")``).
Inputs are checked here, once, for every backend (the contracts: ``contract.py``); device backends
get device tensors.
"""

from __future__ import annotations

from typing import Any

from ..backends import GPU_BACKENDS, implementation, register, resolve_backend
from ..devices import as_caller, gpu_device, is_cuda_tensor, to_backend
from ._torch import search_wide_k
from .contract import (
    MAX_K_GPU,
    accepts_knn_graph,
    accepts_knn_search,
    accepts_offer_rows,
    accepts_topk_select,
    graph_inputs,
    search_inputs,
)

_ALL = {"reference": "reference", "cpu": "cpu", "triton": "triton", "cuda": "cuda"}  # backend -> module
register("knn_graph", __name__, _ALL, accepts=accepts_knn_graph)
register("knn_search", __name__, _ALL, accepts=accepts_knn_search)
_HOST = {"reference": "reference", "cpu": "cpu"}  # ``KnnGraph``'s upkeep steps (host only)
register("topk_select", __name__, _HOST, accepts=accepts_topk_select)
register("offer_rows", __name__, _HOST, accepts=accepts_offer_rows)

GPU = GPU_BACKENDS


def knn_graph(
    x: Any, offsets: Any, k: int, *, drop_nonpositive: bool = False, backend: str = "auto"
) -> tuple[Any, Any]:
    """Exact cosine top-k within each segment, self excluded.

    x [N, d] real, finite (NumPy or torch), offsets [B+1] int CSR, k an integer >= 1. Returns idx [N, k]
    int32 global row ids and sim [N, k] float32, sorted descending, ties to the lower row id, padded
    with -1 / -inf, in the kind of ``x``. Rows are normalised (cosine). Bad input raises ``ValueError``.
    """
    name = resolve_backend("knn_graph", backend, on_cuda=is_cuda_tensor(x))
    x, off, k = graph_inputs(x, offsets, k, gpu=name in GPU)
    idx, sim = implementation("knn_graph", name)(
        to_backend(x, name), off, k, drop_nonpositive=drop_nonpositive
    )
    return as_caller(idx, x), as_caller(sim, x)


def knn_search(
    q: Any,
    q_offsets: Any,
    x: Any,
    x_offsets: Any,
    k: int,
    *,
    drop_nonpositive: bool = False,
    backend: str = "auto",
) -> tuple[Any, Any]:
    """Queries of segment b against rows of segment b of x only.

    q [Q, d], q_offsets [B+1], x [N, d], x_offsets [B+1] -> idx [Q, k] int32 global rows of x,
    sim [Q, k] float32 (descending; -1 / -inf padding), in the kind of ``q``. On a GPU backend a k
    above the kernels' register top-k (``MAX_K_GPU``) is served by a per-segment matmul and sort
    on the device (``_torch.search_wide_k``).
    """
    on_cuda = is_cuda_tensor(x) or is_cuda_tensor(q)
    name = resolve_backend("knn_search", backend, on_cuda=on_cuda)
    q, qo, x, xo, k = search_inputs(q, q_offsets, x, x_offsets, k)
    impl = search_wide_k if name in GPU and k > MAX_K_GPU else implementation("knn_search", name)
    dev = gpu_device(name, x if is_cuda_tensor(x) else q) if name in GPU else None  # q and x on one device
    qb, xb = to_backend(q, name, device=dev), to_backend(x, name, device=dev)
    idx, sim = impl(qb, qo, xb, xo, k, drop_nonpositive=drop_nonpositive)
    return as_caller(idx, q), as_caller(sim, q)


from .graph import KnnGraph, offer_rows, topk_select  # noqa: E402

__all__ = ["MAX_K_GPU", "KnnGraph", "knn_graph", "knn_search", "offer_rows", "topk_select"]
