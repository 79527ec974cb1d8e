"""Helpers for tests that kill or interrupt a real ``xmemory build`` part-way."""

from __future__ import annotations

import sqlite3
from pathlib import Path

# Drives the real build; a pause after each commit gives the test a moment to kill it mid-build.
SLOW_DRIVER = """
import sys, time
from xmemory_gpu.memory.store import Store
_finish = Store._finish  # every commit ends there (commit, and a build's start_commit ... finish)
def slow_finish(self, *a, **kw):
    _finish(self, *a, **kw)
    time.sleep(0.4)
Store._finish = slow_finish
from xmemory_gpu.cli import main
sys.exit(main(sys.argv[1:]))
"""


def committed(store: Path) -> int:
    """Memories committed so far, read without creating the catalogue (a plain connect would create
    an empty file the builder then refuses as a store)."""
    try:
        with sqlite3.connect(f"file:{store / 'memory.sqlite'}?mode=ro", uri=True, timeout=1) as con:
            return con.execute("SELECT COUNT(*) FROM memories").fetchone()[0]
    except sqlite3.Error:
        return 0
