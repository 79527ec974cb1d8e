"""``XMEMORY_BACKEND=reference`` runs every host path on its NumPy reference: an engine's add and
search work with each function of the compiled module made to raise."""

from __future__ import annotations

import pytest

from xmemory_gpu.ops import available_backends


@pytest.mark.skipif(not available_backends()["cpu"].available, reason="the C++ module is not built")
def test_engine_add_and_search_run_without_the_compiled_module(tmp_path, monkeypatch):
    from xmemory_gpu import _C
    from xmemory_gpu.embed.hashing import HashingEmbedder
    from xmemory_gpu.engine import MemoryEngine

    called: list[str] = []

    def refuse(name: str):
        def fn(*args, **kwargs):
            called.append(name)
            raise AssertionError(f"_C.{name} called under XMEMORY_BACKEND=reference")

        return fn

    names = [n for n in dir(_C) if not n.startswith("_") and callable(getattr(_C, n))]
    assert "row_norms" in names and "attach_rows" in names
    for name in names:
        monkeypatch.setattr(_C, name, refuse(name))
    monkeypatch.setenv("XMEMORY_BACKEND", "reference")
    with MemoryEngine.open(tmp_path / "s", embedder=HashingEmbedder(64)) as eng:
        eng.add(
            [
                {"role": "user", "content": "I commute by train 40 minutes each way so I read a lot."},
                {"role": "assistant", "content": "That's plenty of reading time."},
                {"role": "user", "content": "My sister Ana lives in Lisbon and paints."},
            ],
            user_id="u",
        )
        eng.add([{"role": "user", "content": "I started learning the cello last spring."}], user_id="u")
        results = eng.search("How do I get to work?", user_id="u", threshold=0.0)
    assert called == []
    assert len(results) == 1 and results[0].units
