"""The f(P) a memory records stays the partition's own through adds, deletes and updates, while an
add that joins no statement to a theme reuses the recorded value instead of scoring every row."""

from __future__ import annotations

import numpy as np
import pytest
from long_chat import long_chat_turns

from xmemory_gpu.construct import incremental
from xmemory_gpu.embed.hashing import HashingEmbedder
from xmemory_gpu.engine import MemoryEngine
from xmemory_gpu.ops.objective import partition_objective

EMB = HashingEmbedder(64)


def _turns(n: int) -> list[dict]:
    return long_chat_turns(5, 40_000, n, ids=True)


def _recorded_and_fresh(eng: MemoryEngine) -> tuple[float, float]:
    sl = eng.bank.slice(eng.bank.index_of(next(iter(eng.bank.index))))
    sc = sl.cols["sem"]
    x, labels = sc["x"].astype(np.float64), sc["theme"].astype(np.int64)
    fresh = float(
        partition_objective(x, labels, np.array([0, len(x)]), eps=eng.config.theme.eps, backend="reference")[
            0
        ]
    )
    return float(sl.stats["f_P"]), fresh


def test_the_recorded_objective_is_the_partitions_through_writes(tmp_path, monkeypatch):
    scored = []
    real = incremental.record_objective
    monkeypatch.setattr(incremental, "record_objective", lambda *a, **k: (scored.append(1), real(*a, **k)))
    turns = _turns(80)
    adds = 0
    with MemoryEngine.open(tmp_path / "s", embedder=EMB) as eng:
        for i in range(0, 60, 2):
            eng.add(turns[i : i + 2], user_id="u")
            adds += 1
            got, fresh = _recorded_and_fresh(eng)
            assert got == pytest.approx(fresh, rel=1e-6, abs=1e-9), i
        for mid in ("m3", "m20", "m41"):
            eng.delete(mid, user_id="u")
            got, fresh = _recorded_and_fresh(eng)
            assert got == pytest.approx(fresh, rel=1e-6, abs=1e-9), mid
        eng.update("m10", "I moved to Lisbon last spring and I work at a bakery now.", user_id="u")
        got, fresh = _recorded_and_fresh(eng)
        assert got == pytest.approx(fresh, rel=1e-6, abs=1e-9)
        for i in range(60, 80, 2):
            eng.add(turns[i : i + 2], user_id="u")
            adds += 1
            got, fresh = _recorded_and_fresh(eng)
            assert got == pytest.approx(fresh, rel=1e-6, abs=1e-9), i
    assert len(scored) < adds  # some adds joined no statement to a theme and scored nothing
