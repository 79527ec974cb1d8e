"""The bulk build's plan: which of the inputs' conversations a build builds, rebuilds (damaged) or
skips (already built), under the one resume rule, cut into shards in input order.

Every executor (this process, the worker pool, Ray) builds the plan's shards and the ordered
committer (``construct.commit``) commits them in the plan's order, so a build and its resumption
write the same store whichever way they build.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

from ..memory.backend import MemoryBackend
from ..memory.records import Conversation

NEW, DAMAGED, BUILT = "new", "damaged", "built"


def resume_state(store: MemoryBackend, memory_id: str) -> str:
    """The resume rule: a memory the store lacks is ``NEW`` (built); one it holds but that fails its
    checks (file missing or cut, checksum, columns) is ``DAMAGED`` (rebuilt, replacing the stored
    copy); one it holds intact is ``BUILT`` (skipped)."""
    if not store.has(memory_id):
        return NEW
    return BUILT if store.has(memory_id, intact=True) else DAMAGED


@dataclass(frozen=True)
class Shard:
    """Conversations built together (one lockstep construction call) and committed whole.
    ``index``: the shard's place in the plan (the commit order); ``replace``: it holds a damaged
    memory, so its commit replaces stored copies."""

    index: int
    conversations: list[Conversation]
    replace: bool = False

    @property
    def ids(self) -> list[str]:
        return [c.sample_id for c in self.conversations]


class BuildPlan:
    """``conversations`` (``count`` of them, read lazily) against ``store``: :meth:`todo` yields those
    to build, classifying each as it is read; ``skipped`` and ``damaged`` fill meanwhile.
    ``on_skip(n)``: called for each conversation skipped (a progress bar's ``skip``)."""

    def __init__(
        self,
        store: MemoryBackend,
        conversations: Iterable[Conversation],
        count: int,
        *,
        on_skip: Callable[[int], None] | None = None,
    ) -> None:
        self.store = store
        self.count = int(count)
        self.skipped: list[str] = []
        self.damaged: set[str] = set()
        self._convs = conversations
        self._on_skip = on_skip
        self._read = False

    def todo(self) -> Iterator[Conversation]:
        """The conversations to build, in input order (read once)."""
        if self._read:
            raise RuntimeError("BuildPlan.todo: the plan's conversations were read already")
        self._read = True
        for c in self._convs:
            state = resume_state(self.store, c.sample_id)
            if state == BUILT:
                self.skipped.append(c.sample_id)
                if self._on_skip is not None:
                    self._on_skip(1)
                continue
            if state == DAMAGED:
                self.damaged.add(c.sample_id)
            yield c

    def shards(self, size: int) -> Iterator[Shard]:
        """:meth:`todo` in shards of ``size`` conversations (the last may be shorter), each read as
        it is needed."""
        for k, convs in enumerate(chunks(self.todo(), size)):
            yield Shard(k, convs, replace=any(c.sample_id in self.damaged for c in convs))


def check_counts(where: str, **values: object) -> None:
    """Each of ``values`` None or an integer >= 1; else a ValueError naming ``where`` and the field."""
    for name, value in values.items():
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
            raise ValueError(f"{where}: {name}: expected an integer >= 1, got {value!r}")


def chunks(items: Iterable, size: int) -> Iterator[list]:
    """``items`` in lists of ``size`` (the last may be shorter), read as they are needed."""
    it = iter(items)
    while chunk := list(itertools.islice(it, size)):
        yield chunk


def balanced_shard_size(count: int, workers: int, most: int) -> int:
    """A shard size of at most ``most`` that cuts ``count`` conversations into as few rounds of
    ``workers`` shards as ``most`` allows, the shards of near-equal size (no worker idles at the end
    while another builds a short last shard alone). The count is the inputs': a resumed build's
    shards are sized as if every conversation were still to build."""
    rounds = max(1, -(-count // (workers * most)))
    return max(1, -(-count // (workers * rounds)))
