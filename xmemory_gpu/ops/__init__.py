"""Kernel families (knn, objective, coverage, entropy), each with a float64 NumPy reference,
a C++ CPU path and GPU paths; ``available_backends()`` reports which are usable here."""

from ._backend import BackendStatus, available_backends

__all__ = ["BackendStatus", "available_backends"]
