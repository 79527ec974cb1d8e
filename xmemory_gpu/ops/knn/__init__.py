"""Batched cosine kNN: graph build within CSR segments, segment-restricted search, exact upkeep.

Public functions take NumPy arrays or torch tensors and return the same kind. Backends:
``reference`` (float64 NumPy) and the fast paths registered in ``_IMPLS``.
"""

from __future__ import annotations

from typing import Any

from .. import _dispatch as dp
from . import cpu, cuda, reference
from ._torch import search_wide_k


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

GPU = dp.GPU_BACKENDS
MAX_K_GPU = 64  # the GPU kernels keep a register top-k of at most 64 (ops/knn/triton.py MAX_K, kKnnMaxK)


def _check_k(k: Any, name: str) -> int:
    return dp.check_k("k", k, MAX_K_GPU if name in GPU else None)


def _prep(x: Any, name: str) -> Any:
    """Host NumPy for host backends; a torch tensor on the GPU for GPU backends (NumPy is uploaded;
    interpreted Triton runs on host tensors)."""
    return dp.to_backend(x, name)


def knn_graph(
    x: Any, offsets: Any, k: int, *, drop_nonpositive: bool = False, backend: str = "auto"
) -> tuple[Any, Any]:
    """Exact cosine top-k within each segment, self excluded.

    x [N, d] real, finite (NumPy or torch), offsets [B+1] int CSR, k an integer >= 1. Returns idx [N, k]
    int32 global row ids and sim [N, k] float32, sorted descending, ties to the lower row id, padded
    with -1 / -inf, in the kind of ``x``. Rows are normalised (cosine). Bad input raises ``ValueError``.
    """
    name = dp.resolve_backend("knn_graph", backend, tuple(_GRAPH_IMPLS), on_cuda=dp.is_cuda_tensor(x))
    k = _check_k(k, name)
    x = dp.check_float_matrix("x", x)
    off = dp.check_offsets("offsets", offsets, int(x.shape[0]))
    idx, sim = _GRAPH_IMPLS[name](_prep(x, name), off, k, drop_nonpositive=drop_nonpositive)
    return dp.as_caller(idx, x), dp.as_caller(sim, x)


def knn_search(
    q: Any, q_offsets: Any, x: Any, x_offsets: Any, k: int, *, drop_nonpositive: bool = False,
    backend: str = "auto",
) -> tuple[Any, Any]:
    """Queries of segment b against rows of segment b of x only.

    q [Q, d], q_offsets [B+1], x [N, d], x_offsets [B+1] -> idx [Q, k] int32 global rows of x,
    sim [Q, k] float32 (descending; -1 / -inf padding), in the kind of ``q``. On a GPU backend a k
    above the kernels' register top-k (``MAX_K_GPU``) is served by a per-segment matmul and sort
    on the device (``_torch.search_wide_k``).
    """
    on_cuda = dp.is_cuda_tensor(x) or dp.is_cuda_tensor(q)
    name = dp.resolve_backend("knn_search", backend, tuple(_SEARCH_IMPLS), on_cuda=on_cuda)
    k = dp.check_k("k", k)
    q, x = dp.check_float_matrix("q", q), dp.check_float_matrix("x", x)
    if q.shape[1] != x.shape[1]:
        raise ValueError(f"q, x: must agree on d, got q {tuple(q.shape)} and x {tuple(x.shape)}")
    qo = dp.check_offsets("q_offsets", q_offsets, int(q.shape[0]))
    xo = dp.check_offsets("x_offsets", x_offsets, int(x.shape[0]))
    dp.check_same_segments("q_offsets", qo, "x_offsets", xo)
    impl = search_wide_k if name in GPU and k > MAX_K_GPU else _SEARCH_IMPLS[name]
    idx, sim = impl(_prep(q, name), qo, _prep(x, name), xo, k, drop_nonpositive=drop_nonpositive)
    return dp.as_caller(idx, q), dp.as_caller(sim, q)


from .graph import KnnGraph  # noqa: E402

__all__ = ["KnnGraph", "knn_graph", "knn_search"]
