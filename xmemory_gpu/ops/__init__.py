"""Kernel families (knn, objective, coverage, entropy), each with a float64 NumPy reference, a C++
CPU path and GPU paths (Triton, CUDA C++), behind one dispatcher (``_dispatch.py``).

Flat surface::

    from xmemory_gpu.ops import knn_graph, knn_search, KnnGraph, partition_objective, score_candidates
    from xmemory_gpu.ops import coverage_select, token_entropy_logprob, csr_offsets, available_backends

``available_backends()`` reports which backends are usable here; ``validated_backends()`` the GPU
paths validated on a real GPU (``validated.json``), which ``backend="auto"`` prefers on CUDA tensors.
"""

from ._dispatch import BackendStatus, available_backends, csr_offsets
from .coverage import coverage_select
from .entropy import token_entropy_logprob
from .knn import KnnGraph, knn_graph, knn_search
from .objective import Candidates, PartitionState, candidate_gains, partition_objective, score_candidates
from .validated import rows as validated_backends

__all__ = [
    "BackendStatus", "Candidates", "KnnGraph", "PartitionState", "available_backends", "candidate_gains",
    "coverage_select", "csr_offsets", "knn_graph", "knn_search", "partition_objective", "score_candidates",
    "token_entropy_logprob", "validated_backends",
]
