"""Kernel families (knn, objective, coverage, entropy), each with a float64 NumPy reference, a C++
CPU path and GPU paths (Triton, CUDA C++), and four host-only ops: the theme stage's attach loop
(attach) and seeded k-means of the theme splits (kmeans), the sentence encoder's batch-invariant dense
layer (linear) and the hashing embedder's word-feature counts (features), each a reference and C++,
plus the store's file format (columns: a memory's arrays as one container, text columns as UTF-8),
the construction's exact-bit row helpers (``rows``; the partition state's blocks in
``objective.state``; the theme merge pairs in ``attach``), the statements' de-duplication block
(dedup) and the store's durable file writes (files), each a reference and C++ equal to the bit
(files: file for file), behind one contract in three modules:

- ``backends``: which backends exist and can run here (``available_backends``), which each op
  implements (``implemented_backends(op)``) and which one a call runs on (``resolve_backend``,
  ``XMEMORY_BACKEND``);
- ``devices``: host/device transfer (``host``, ``to_backend``, ``as_caller``, ``backend_device``,
  ``encoder_device``) and the tile tables of the GPU launches;
- ``checks``: the input checks every op runs once before any backend, and ``csr_offsets``;
  each op's contract, registered with it (``backends.contract(op)``), is an ``accepts`` predicate
  over its arguments kept in its family's package (``<family>/contract.py``): None in contract,
  else the one-line reason the op raises as ``ValueError`` on every backend.

Flat surface::

    from xmemory_gpu.ops import knn_graph, knn_search, KnnGraph, partition_objective, score_candidates
    from xmemory_gpu.ops import coverage_select, token_entropy_logprob, csr_offsets, available_backends
    from xmemory_gpu.ops import implemented_backends, spherical_kmeans, pack_linear, rowwise_linear
    from xmemory_gpu.ops import feature_counts, attach_rows, dedup_block, write_durable

``available_backends()`` reports which backends are usable here; ``implemented_backends(op)`` which
backends an op has; ``validated_backends()`` the GPU paths validated on a real GPU
(``validated.json``), which ``backend="auto"`` prefers on CUDA tensors.
"""

from . import columns
from .attach import attach_rows
from .backends import BACKENDS, BackendStatus, available_backends, implemented_backends
from .checks import csr_offsets
from .coverage import coverage_select
from .dedup import dedup_block
from .entropy import token_entropy_logprob
from .features import feature_counts
from .files import write_durable
from .kmeans import spherical_kmeans
from .knn import KnnGraph, knn_graph, knn_search
from .linear import PackedLinear, pack_linear, rowwise_linear
from .objective import Candidates, PartitionState, candidate_gains, partition_objective, score_candidates
from .validated import rows as validated_backends

__all__ = [
    "BACKENDS",
    "BackendStatus",
    "Candidates",
    "attach_rows",
    "columns",
    "KnnGraph",
    "PackedLinear",
    "PartitionState",
    "available_backends",
    "candidate_gains",
    "coverage_select",
    "csr_offsets",
    "dedup_block",
    "feature_counts",
    "implemented_backends",
    "knn_graph",
    "knn_search",
    "pack_linear",
    "partition_objective",
    "rowwise_linear",
    "score_candidates",
    "spherical_kmeans",
    "token_entropy_logprob",
    "validated_backends",
    "write_durable",
]
