"""The bulk build's progress bar and stage timings, one for every way it builds (this process,
worker processes, Ray): conversations done, their rate (conversations/s) and the time left.

A shard's conversations are built in lockstep, so the bar moves within a shard as its stages finish
each conversation (``STAGE_SHARE``: the fraction of a conversation's work each stage stands for)
and is settled to whole conversations when the shard is committed. Conversations already in the
store count as done from the start and not in the rate.
"""

from __future__ import annotations

import sys
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

# a conversation's work per stage (summing to 1): the encoder dominates a build with a neural
# embedder; the other stages are per conversation (episodes, statements, summaries) or per shard (themes)
STAGE_SHARE = {"embed_messages": 0.5, "episodes": 0.1, "statements": 0.2, "themes": 0.1, "summaries": 0.1}

Advance = Callable[[float], None]  # conversations' worth of work done (a fraction within a shard)

BAR_FORMAT = "{desc}: {percentage:3.0f}%|{bar}| {n:.0f}/{total_fmt} conv [{elapsed}<{remaining}, {rate_fmt}]"


@dataclass
class Timings:
    """Seconds per stage, accumulated over calls."""

    seconds: dict[str, float] = field(default_factory=lambda: defaultdict(float))

    @contextmanager
    def stage(self, name: str) -> Iterator[None]:
        t0 = time.perf_counter()
        try:
            yield
        finally:
            self.seconds[name] += time.perf_counter() - t0

    def add(self, seconds: dict[str, float]) -> None:
        """Stage seconds measured elsewhere (a worker's, an actor's) added to these."""
        for name, sec in seconds.items():
            self.seconds[name] += sec

    def as_dict(self) -> dict[str, float]:
        return {k: round(v, 4) for k, v in self.seconds.items()}


class BuildProgress:
    """Conversations built out of ``total``, on a tqdm bar on stderr (none when not ``enabled``:
    the counts are kept all the same). ``advance`` moves it by a fraction of conversations,
    ``commit`` settles it to the conversations committed so far; both may be called from several
    threads (a worker pool's)."""

    def __init__(self, total: int, *, desc: str = "build", enabled: bool = True) -> None:
        self.total = int(total)
        self.done = 0  # conversations committed or skipped
        self.n = 0.0  # conversations' worth of work shown
        self.updates = 0  # moves of the bar
        self._lock = threading.Lock()
        self._bar = None
        if enabled:
            from tqdm.auto import tqdm

            self._bar = tqdm(
                total=self.total,
                desc=desc,
                unit="conv",
                file=sys.stderr,
                bar_format=BAR_FORMAT,
                smoothing=0.1,
                dynamic_ncols=True,
            )

    def skip(self, n: int) -> None:
        """``n`` conversations already in the store: done, and not counted in the rate."""
        if n <= 0:
            return
        with self._lock:
            self.done += n
            self.n += n
            if self._bar is not None:
                bar = self._bar
                bar.update(n)
                bar.start_t = bar.last_print_t = bar._time()  # the rate counts conversations built here only
                bar.last_print_n = bar.initial = bar.n

    def advance(self, n: float) -> None:
        """``n`` conversations' worth of work done (capped at the conversations not yet committed)."""
        with self._lock:
            self._advance(n)

    def _advance(self, n: float) -> None:
        n = min(n, self.total - self.n)
        if n <= 0:
            return
        self.n += n
        self.updates += 1
        if self._bar is not None:
            self._bar.update(n)

    def commit(self, n: int) -> None:
        """``n`` more conversations committed: the bar shows at least them (the rest of their work)."""
        with self._lock:
            self.done += n
            if self.n < self.done:
                self._advance(self.done - self.n)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None

    def __enter__(self) -> BuildProgress:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class ShardProgress:
    """A shard's stages reported per conversation: ``stage(name, k)`` says that stage is done for
    ``k`` more of the shard's conversations (``STAGE_SHARE[name]`` of each)."""

    def __init__(self, advance: Advance | None) -> None:
        self._advance = advance

    def stage(self, name: str, k: float = 1.0) -> None:
        if self._advance is not None and k > 0:
            self._advance(STAGE_SHARE.get(name, 0.0) * k)
