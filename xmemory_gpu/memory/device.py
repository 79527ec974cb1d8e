"""Device-resident copies of a bank level's columns, for the GPU backends (``cuda``, ``triton``).

A column is uploaded once per device; after that only the rows the bank wrote since (its
:class:`WriteLog`: ``Bank.put_slice`` notes each memory's rewritten rows, and the rows a moved
memory left behind) go up again. A column the bank replaced (the arena grew, a ragged column
widened, the bank was rebuilt) is uploaded whole. Searches read the device copy, so a query moves
its own embedding and the results, never the bank's rows.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any

import numpy as np

LOG_ENTRIES = 4096  # writes remembered; a mirror further behind uploads its column whole


@dataclass
class WriteLog:
    """Row ranges ``[start, stop)`` written into a level's columns, in order (the last ``LOG_ENTRIES``)."""

    count: int = 0  # writes ever noted
    ranges: deque = field(default_factory=lambda: deque(maxlen=LOG_ENTRIES))

    def note(self, start: int, stop: int) -> None:
        if stop > start:
            self.ranges.append((int(start), int(stop)))
            self.count += 1

    def since(self, cursor: int) -> list[tuple[int, int]] | None:
        """The ranges written after the first ``cursor`` writes; None when the log no longer reaches back."""
        behind = self.count - cursor
        if behind > len(self.ranges) or behind < 0:
            return None
        return list(self.ranges)[len(self.ranges) - behind :] if behind else []


@dataclass
class _Mirror:
    source: np.ndarray  # the host column the tensor copies (identity tells a replaced column)
    tensor: Any  # torch tensor [rows, ...] on the device
    cursor: int  # WriteLog.count when last synced


@dataclass
class DeviceMirrors:
    """Per level: (column, device) -> its device copy, and how many rows went up (for tests and stats)."""

    mirrors: dict[tuple[str, str], _Mirror] = field(default_factory=dict)
    rows_uploaded: int = 0

    def column(self, name: str, host: np.ndarray, log: WriteLog, device: Any) -> Any:
        """The device copy of column ``name`` (host array ``host``), synced with ``log``."""
        import torch

        key = (name, str(device))
        m = self.mirrors.get(key)
        todo = None if m is None or m.source is not host else log.since(m.cursor)
        if todo is None:
            t = torch.from_numpy(np.ascontiguousarray(host)).to(device)
            if (
                t.data_ptr() == host.ctypes.data
            ):  # same memory (a CPU device): copy, the host column changes in place
                t = t.clone()
            self.mirrors[key] = _Mirror(host, t, log.count)
            self.rows_uploaded += int(host.shape[0])
            return t
        for start, stop in merged_ranges(todo):
            m.tensor[start:stop] = torch.from_numpy(np.ascontiguousarray(host[start:stop])).to(device)
            self.rows_uploaded += stop - start
        m.cursor = log.count
        return m.tensor


def merged_ranges(ranges: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Overlapping or touching ranges merged (each row goes up once)."""
    out: list[tuple[int, int]] = []
    for s, e in sorted(ranges):
        if out and s <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], e))
        else:
            out.append((s, e))
    return out


__all__ = ["LOG_ENTRIES", "DeviceMirrors", "WriteLog", "merged_ranges"]
