"""Past one process, on Ray (imported only when asked for): the bulk build on Ray Data
(``xmemory build --ray``: :mod:`.ray_build`) and the sharded HTTP service on Ray Serve
(``xmemory serve DIR --ray``: :mod:`.ray_serve`, over the store set of :mod:`.shards`).

``import xmemory_gpu.distributed`` never imports Ray; :func:`build_store_ray` does, and raises
:class:`RayNotInstalled` (a ``RuntimeError`` with a one-line message) when it is missing;
:mod:`.ray_serve` imports Ray Serve when it is imported.
"""

from __future__ import annotations

from .ray_build import RayBuildReport, RayNotInstalled, build_store_ray

__all__ = ["RayBuildReport", "RayNotInstalled", "build_store_ray"]
