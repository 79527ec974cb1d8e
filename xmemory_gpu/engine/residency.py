"""Which memories the engine keeps in its bank when it runs under a byte budget
(``MemoryEngine.open(..., max_resident_bytes=N)``): least recently used first out, never one a
request in flight has pinned.

The engine loads a memory's slice from the store on first touch (``note``), pins the memories a
request reads or writes for its duration (``pin`` / ``unpin``), and after each load or commit asks
for ``victims``: the least recently used unpinned memories to drop until the resident bytes are at
most ``low_water`` of the budget (so one eviction makes room for several loads: dropping rebuilds
the resident bank, a cost proportional to the budget, not to the store).
"""

from __future__ import annotations

import os
from collections import Counter, OrderedDict
from collections.abc import Iterable

from ..memory.bank import MemorySlice

LOW_WATER = 0.75  # an eviction brings the resident bytes down to this share of the budget
RAM_SHARE = 0.5  # the default budget: this share of the machine's physical memory
AUTO = "auto"  # ``max_resident_bytes`` default: ``RAM_SHARE`` of the RAM


def physical_memory() -> int:
    """Bytes of physical memory (``sysconf``); 8 GiB where the platform does not say."""
    try:
        return int(os.sysconf("SC_PHYS_PAGES")) * int(os.sysconf("SC_PAGE_SIZE"))
    except (AttributeError, OSError, ValueError):
        return 8 << 30


def resolve_budget(value: int | str | None) -> int | None:
    """``max_resident_bytes`` as given -> bytes, or None for "every memory resident, loaded at open":
    ``"auto"`` is ``RAM_SHARE`` of the physical memory, ``"all"`` or None keeps everything."""
    if value is None or value == "all":
        return None
    if value == AUTO:
        return int(physical_memory() * RAM_SHARE)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"max_resident_bytes: expected an integer >= 0, 'auto' or 'all', got {value!r}")
    return value


def slice_bytes(sl: MemorySlice) -> int:
    """The bytes a memory holds in the bank: its arrays, plus its text (UTF-8 length and a
    Python string's fixed cost per cell)."""
    total = 0
    for cols in sl.cols.values():
        for a in cols.values():
            if a.dtype.kind == "O":
                total += sum(map(len, a.tolist())) + 49 * a.size
            else:
                total += a.nbytes
    return total


class Residency:
    """LRU bookkeeping over memory ids: their bytes, recency and pins (counts, so overlapping
    requests may pin the same memory)."""

    def __init__(self, budget: int) -> None:
        if isinstance(budget, bool) or not isinstance(budget, int) or budget < 0:
            raise ValueError(f"max_resident_bytes: expected an integer >= 0, got {budget!r}")
        self.budget = budget
        self._bytes: OrderedDict[str, int] = OrderedDict()  # least recently used first
        self._pins: Counter[str] = Counter()

    @property
    def resident_bytes(self) -> int:
        return sum(self._bytes.values())

    def __contains__(self, key: str) -> bool:
        return key in self._bytes

    def note(self, key: str, nbytes: int) -> None:
        """``key`` is resident with ``nbytes`` (loaded or rewritten), and the most recently used."""
        self._bytes[key] = int(nbytes)
        self._bytes.move_to_end(key)

    def touch(self, keys: Iterable[str]) -> None:
        for k in keys:
            if k in self._bytes:
                self._bytes.move_to_end(k)

    def forget(self, keys: Iterable[str]) -> None:
        """``keys`` left the bank (deleted or evicted)."""
        for k in keys:
            self._bytes.pop(k, None)

    def pin(self, keys: Iterable[str]) -> None:
        self._pins.update(set(keys))

    def unpin(self, keys: Iterable[str]) -> None:
        self._pins.subtract(set(keys))
        self._pins += Counter()  # drop counts at zero

    def victims(self) -> list[str]:
        """Least recently used unpinned memories to drop, when over the budget, until the rest
        fits ``LOW_WATER`` of it; none when within the budget."""
        total = self.resident_bytes
        if total <= self.budget:
            return []
        target, out = int(self.budget * LOW_WATER), []
        for key, n in self._bytes.items():
            if total <= target:
                break
            if self._pins[key] <= 0:
                out.append(key)
                total -= n
        return out
