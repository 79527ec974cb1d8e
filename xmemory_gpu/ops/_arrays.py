"""Old import path of ``csr_offsets`` / ``check_offsets`` / ``to_numpy``: use ``xmemory_gpu.ops.checks``
(``csr_offsets``, ``check_offsets(name, offsets, n)``) and ``xmemory_gpu.ops.devices.host``.
"""

# transitional: retrieve/ and engine/ move to the public names next

from __future__ import annotations

from typing import Any

import numpy as np

from . import checks
from .checks import csr_offsets  # noqa: F401
from .devices import host as to_numpy  # noqa: F401


def check_offsets(offsets: Any, n_rows: int, name: str = "offsets") -> np.ndarray:
    """The old argument order of ``checks.check_offsets(name, offsets, n_rows)`` (construct/theme_split.py)."""
    return checks.check_offsets(name, offsets, n_rows)
