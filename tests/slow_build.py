"""Helpers for tests that kill or interrupt a real ``xmemory build`` part-way."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

PAUSE_ENV = "XMEM_TEST_PAUSE_AT"

# Drives the real build; once PAUSE_ENV memories (default 1) are committed it stops after that
# commit until the test kills or interrupts it: the test waits for ``committed(store) >= N`` and
# always finds the build paused there, however slow the machine (no race with the build's end).
SLOW_DRIVER = """
import os, sys, time
from xmemory_gpu.memory.store import Store
_finish = Store._finish  # every commit ends there (commit, and a build's start_commit ... finish)
pause_at = int(os.environ.get("XMEM_TEST_PAUSE_AT", "1"))
def paused_finish(self, *a, **kw):
    _finish(self, *a, **kw)
    if len(self.memory_ids()) >= pause_at:
        time.sleep(3600)  # killed or interrupted here by the test (bounded all the same)
Store._finish = paused_finish
from xmemory_gpu.cli import main
sys.exit(main(sys.argv[1:]))
"""


def paused_env(n: int) -> dict[str, str]:
    """The environment for SLOW_DRIVER to stop once ``n`` memories are committed."""
    return {**os.environ, PAUSE_ENV: str(n)}


def committed(store: Path) -> int:
    """Memories committed so far, read without creating the catalogue (a plain connect would create
    an empty file the builder then refuses as a store)."""
    try:
        with sqlite3.connect(f"file:{store / 'memory.sqlite'}?mode=ro", uri=True, timeout=1) as con:
            return con.execute("SELECT COUNT(*) FROM memories").fetchone()[0]
    except sqlite3.Error:
        return 0
