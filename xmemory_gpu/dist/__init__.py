"""Bulk construction past one machine, on Ray Data (imported only when asked for: ``xmemory build --ray``).

``import xmemory_gpu.dist`` never imports Ray; :func:`build_store_ray` does, and raises
:class:`RayNotInstalled` (a ``RuntimeError`` with a one-line message) when it is missing.
"""

from __future__ import annotations

from .ray_build import RayBuildReport, RayNotInstalled, build_store_ray

__all__ = ["RayBuildReport", "RayNotInstalled", "build_store_ray"]
