"""The paper's Stage II gate on live searches: ``MemoryEngine.open(..., reader=SPEC)`` and ``xmemory serve
--reader SPEC`` run the uncertainty gate with a real (tiny, random) transformers model through the ``hf``
reader; the probes of a ``search_batch`` go to the reader as one batch; without a reader the note stays."""

from __future__ import annotations

import json
import signal

import pytest

pytest.importorskip("transformers")

from tiny_llm import make_tiny_llama  # noqa: E402

from xmemory_gpu.embed.hashing import HashingEmbedder  # noqa: E402
from xmemory_gpu.engine import MemoryEngine  # noqa: E402

EMB = HashingEmbedder(128)
NOTE = "no reader configured"
CHAT = [
    ("I moved to Lisbon in May and rent a flat near the river.", "Lisbon is lovely."),
    ("I work as a nurse at St. Mary's Hospital on night shifts.", "Night shifts are hard."),
    ("My dog Biscuit is a beagle who hates the rain.", "Beagles are great."),
    ("I started pottery classes on Thursday evenings.", "Pottery is relaxing."),
    ("My sister Meena visits in June for two weeks.", "That will be fun."),
]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return make_tiny_llama(tmp_path_factory.mktemp("tiny"))


def _fill(eng, user: str) -> None:
    for n, (u, a) in enumerate(CHAT):
        eng.add(
            [
                {"role": "user", "content": u, "timestamp": 1_700_000_000 + 86_400 * n},
                {"role": "assistant", "content": a, "timestamp": 1_700_000_060 + 86_400 * n},
            ],
            user_id=user,
        )


def test_the_gate_runs_live_with_a_reader(tmp_path, tiny):
    with MemoryEngine.open(tmp_path / "s", embedder=EMB, reader=f"hf:{tiny}") as eng:
        _fill(eng, "a")
        _fill(eng, "b")
        calls = []
        real = eng.retriever.reader.uncertainty

        def counted(prompts, **kw):
            calls.append(len(prompts))
            return real(prompts, **kw)

        eng.retriever.reader.uncertainty = counted
        (r,) = eng.search("Where do I live?", user_id="a", strategy="xmemory", budget_tokens=300)
        assert NOTE not in " ".join(r.notes) and r.llm_calls > 0 and calls, r.notes
        one = len(calls)
        calls.clear()
        out = eng.search_batch(
            [
                {"query": "Where do I live?", "user_id": "a"},
                {"query": "What is my dog called?", "user_id": "b"},
                {"queries": ["Where do I work?", "Who visits in June?"], "user_id": "a"},
            ]
        )
        assert [len(x) for x in out] == [1, 1, 2]
        assert len(calls) == one and sum(calls) > 0  # every query's probes in the same reader batches
    with MemoryEngine.open(tmp_path / "s", embedder=EMB) as eng:  # no reader: the note stays
        assert NOTE in " ".join(eng.search("Where do I live?", user_id="a", strategy="xmemory")[0].notes)


def test_serve_takes_a_reader(tmp_path, tiny):
    pytest.importorskip("fastapi")
    from test_service import ADMIN, Server

    from xmemory_gpu.client import MemoryClient

    keys = tmp_path / "keys.json"
    keys.write_text(json.dumps({ADMIN: "*"}))
    s = Server(tmp_path / "store", keys, extra=["--reader", f"hf:{tiny}"])
    try:
        c = MemoryClient(s.url, api_key=ADMIN)
        for u, a in CHAT:
            c.add([{"role": "user", "content": u}, {"role": "assistant", "content": a}], user_id="a")
        r = c.search("Where do I live?", user_id="a", strategy="xmemory", budget_tokens=300)[0]
        assert NOTE not in " ".join(r["notes"]) and r["llm_calls"] > 0, r["notes"]
    finally:
        assert s.kill(signal.SIGTERM) == 0
