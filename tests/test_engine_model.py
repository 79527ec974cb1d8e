"""Model-based tests of the live engine: random sequences of add / add_batch / delete / delete_all /
search / reopen against a plain Python model of what must be there. After every step: every
message the model holds is retrievable by id and nothing else is; no search result crosses scopes;
the hierarchy's invariants hold (one theme per node, cap, provenance only to live messages);
reopening gives the same state. CI runs a bounded number of examples; ``XMEM_MODEL_EXAMPLES`` runs more.
"""

from __future__ import annotations

import os
import shutil
import tempfile

import numpy as np
from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from xmemory_gpu.config import XMemoryConfig
from xmemory_gpu.embed.hashing import HashingEmbedder
from xmemory_gpu.engine import MemoryEngine, scope_key
from xmemory_gpu.memory.backend import InMemoryBackend
from xmemory_gpu.memory.hierarchy import view

EMB = HashingEmbedder(64)
SCOPES = [("alice", None, None), ("alice", "agent", None), ("bob", None, "run/1"), ("o'neil; --", None, None)]
WORDS = [
    "garden",
    "tulips",
    "Lisbon",
    "nurse",
    "cello",
    "marathon",
    "pottery",
    "sourdough",
    "chess",
    "Denver",
    "kayak",
    "violin",
]
CFG = XMemoryConfig.from_dict({"theme": {"size_cap": 4}})  # a small cap, so splits happen in short runs

sentence = st.builds(
    lambda a, b, n: f"I really enjoy {a} and {b} every week, number {n}.",
    st.sampled_from(WORDS),
    st.sampled_from(WORDS),
    st.integers(0, 999),
)


def _covered(s: tuple) -> list[tuple]:
    """The scopes a read of ``s`` covers (mem0's rule: a part left out matches any)."""
    return [t for t in SCOPES if all(a is None or a == b for a, b in zip(s, t))]


class EngineModel(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.dir = tempfile.mkdtemp(prefix="xmem-model-")
        self.eng = self._open()
        self.model: dict[tuple, dict[str, str]] = {s: {} for s in SCOPES}  # scope -> message id -> text
        self.n = 0

    def _open(self) -> MemoryEngine:
        return MemoryEngine.open(self.dir, embedder=EMB, config=CFG)

    def teardown(self) -> None:
        self.eng.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    def _msgs(self, texts: list[str]) -> list[dict]:
        out = []
        for t in texts:
            self.n += 1
            out.append({"id": f"m{self.n}", "speaker": "User" if self.n % 2 else "Bot", "content": t})
        return out

    @rule(scope=st.sampled_from(SCOPES), texts=st.lists(sentence, min_size=1, max_size=4))
    def add(self, scope, texts):
        msgs = self._msgs(texts)
        ids = self.eng.add(msgs, user_id=scope[0], agent_id=scope[1], run_id=scope[2])
        assert ids == [m["id"] for m in msgs]
        self.model[scope].update({m["id"]: m["content"] for m in msgs})

    @rule(data=st.data())
    def add_batch(self, data):
        scopes = data.draw(st.lists(st.sampled_from(SCOPES), min_size=1, max_size=3, unique=True))
        items = []
        for s in scopes:
            msgs = self._msgs(data.draw(st.lists(sentence, min_size=1, max_size=3)))
            items.append({"user_id": s[0], "agent_id": s[1], "run_id": s[2], "messages": msgs})
        self.eng.add_batch(items)
        for s, it in zip(scopes, items):
            self.model[s].update({m["id"]: m["content"] for m in it["messages"]})

    @precondition(lambda self: any(self.model.values()))
    @rule(data=st.data())
    def delete_message(self, data):
        scope = data.draw(st.sampled_from([s for s in SCOPES if self.model[s]]))
        mid = data.draw(st.sampled_from(sorted(self.model[scope])))
        self.eng.delete(mid, user_id=scope[0], agent_id=scope[1], run_id=scope[2])
        del self.model[scope][mid]

    @rule(scope=st.sampled_from(SCOPES))
    def delete_all(self, scope):
        n = self.eng.delete_all(user_id=scope[0], agent_id=scope[1], run_id=scope[2])
        assert n == sum(len(self.model[t]) for t in _covered(scope))
        for t in _covered(scope):
            self.model[t] = {}

    @rule(
        scope=st.sampled_from(SCOPES),
        word=st.sampled_from(WORDS),
        strategy=st.sampled_from(["xmemory", "memory-only", "naive-rag", "tir", "higmem"]),
    )
    def search(self, scope, word, strategy):
        for r in self.eng.search(
            [f"What about {word}?"], user_id=scope[0], agent_id=scope[1], run_id=scope[2], strategy=strategy
        ):
            assert set(r.message_ids) <= {m for t in _covered(scope) for m in self.model[t]}, (
                "a result crossed scopes or named a deleted message"
            )

    @rule()
    def reopen(self):
        before = {s: self.eng.get_all(user_id=s[0], agent_id=s[1], run_id=s[2]) for s in SCOPES}
        self.eng.close()
        self.eng = self._open()
        assert {s: self.eng.get_all(user_id=s[0], agent_id=s[1], run_id=s[2]) for s in SCOPES} == before

    @invariant()
    def matches_the_model(self):
        for s in SCOPES:
            units = self.eng.get_all(user_id=s[0], agent_id=s[1], run_id=s[2])
            msgs = {u["id"]: u["text"] for u in units if u["type"] == "message"}
            assert msgs == {k: v for t in _covered(s) for k, v in self.model[t].items()}
            live = set(msgs)
            for u in units:
                if u["type"] in ("episode", "semantic"):
                    assert set(u["message_ids"]) <= live and u["message_ids"]
            key = scope_key(*s)
            if key in self.eng.bank.index:
                mem = view(self.eng.bank, self.eng.bank.index[key])
                if len(mem.semantics):
                    assert mem.theme_of.min() >= 0 and mem.theme_of.max() < len(mem.themes)
                    assert np.bincount(mem.theme_of).max() <= CFG.theme.size_cap
            for mid in self.model[s]:
                assert self.eng.get(mid, user_id=s[0], agent_id=s[1], run_id=s[2])["text"] == msgs[mid]


EngineModel.TestCase.settings = settings(
    max_examples=int(os.environ.get("XMEM_MODEL_EXAMPLES", "12")),
    stateful_step_count=10,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
    phases=[Phase.explicit, Phase.reuse, Phase.generate]
    + ([Phase.shrink] if os.environ.get("XMEM_MODEL_SHRINK") else []),
)
TestEngineModel = EngineModel.TestCase


class InMemoryEngineModel(EngineModel):
    """The same model against the in-memory backend (the storage seam): reopening is a new engine
    on the same backend object."""

    def _open(self) -> MemoryEngine:
        if not hasattr(self, "backend"):
            self.backend = InMemoryBackend(dim=EMB.dim, embedder=EMB.name, config=CFG.to_dict())
        return MemoryEngine.open(self.backend, embedder=EMB, config=CFG)


InMemoryEngineModel.TestCase.settings = EngineModel.TestCase.settings
TestInMemoryEngineModel = InMemoryEngineModel.TestCase


class ResidentEngineModel(EngineModel):
    """The same model with a residency budget smaller than one memory: every request loads what
    it touches and evicts the rest, so state must survive eviction and reload exactly."""

    def _open(self) -> MemoryEngine:
        return MemoryEngine.open(self.dir, embedder=EMB, config=CFG, max_resident_bytes=1)

    @invariant()
    def stays_within_the_budget(self):
        st = self.eng.stats()
        assert st["resident_bytes"] <= st["max_resident_bytes"]  # nothing in flight pins a memory now
        assert st["resident_memories"] <= sum(
            1 for s in SCOPES if not self.model[s]
        )  # only empty ones (0 bytes) stay


ResidentEngineModel.TestCase.settings = EngineModel.TestCase.settings
TestResidentEngineModel = ResidentEngineModel.TestCase
