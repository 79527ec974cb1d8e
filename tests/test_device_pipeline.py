"""The whole pipeline on a GPU backend: ``xmemory build --backend triton``, ``Retriever`` and the
engine on device-resident arrays, against the host path. Without a GPU the Triton kernels run in
the interpreter on CPU tensors (tests/conftest.py), so the device plumbing (one upload, copies kept
in sync with the bank, results back on the host) runs here as it does on a GPU."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip(
    "pydantic", reason="the construction pipeline imports pydantic (absent on the bare GPU image)"
)

from xmemory_gpu.cli import main  # noqa: E402
from xmemory_gpu.config import XMemoryConfig
from xmemory_gpu.construct.pipeline import build_memories
from xmemory_gpu.datasets.locomo import load_locomo
from xmemory_gpu.datasets.synthetic import generate_conversations, write_json
from xmemory_gpu.embed.hashing import HashingEmbedder
from xmemory_gpu.engine import MemoryEngine, scope_key
from xmemory_gpu.memory.bank import Bank
from xmemory_gpu.memory.device import LOG_ENTRIES, WriteLog
from xmemory_gpu.memory.hierarchy import bank_of, view
from xmemory_gpu.memory.store import Store
from xmemory_gpu.ops.backends import interpreting_triton, is_available
from xmemory_gpu.ops.devices import backend_device
from xmemory_gpu.retrieve import Retriever

pytestmark = pytest.mark.skipif(not is_available("triton"), reason="triton: no GPU and not interpreted")

EMB = HashingEmbedder(64)
QUESTIONS = [
    "What did she paint last week?",
    "Where did they travel?",
    "Who adopted a dog?",
    "What sport does he play?",
]


@pytest.fixture(scope="module")
def stores(tmp_path_factory):
    """The same two synthetic conversations built by the CLI on the host (cpu) and on the device (triton)."""
    root = tmp_path_factory.mktemp("device")
    data = root / "synth.json"
    write_json(generate_conversations(2, seed=11), data)
    out = {}
    for backend in ("cpu", "triton"):
        out[backend] = root / backend
        assert (
            main(
                [
                    "build",
                    str(data),
                    "--out",
                    str(out[backend]),
                    "--embedder",
                    "hashing:64",
                    "--backend",
                    backend,
                    "--no-progress",
                ]
            )
            == 0
        )
    return out


def _bank(path) -> Bank:
    st = Store.open(path)
    try:
        return st.load_bank()
    finally:
        st.close()


def test_build_on_the_device_matches_the_host_build(stores):
    host, dev = _bank(stores["cpu"]), _bank(stores["triton"])
    assert host.memory_ids == dev.memory_ids
    for b in range(host.n_memories):
        h, d = view(host, b), view(dev, b)
        assert [s.text for s in h.semantics] == [s.text for s in d.semantics]
        assert np.array_equal(h.theme_of, d.theme_of)  # same themes, decided on device-scored f(P)
        assert [t.summary for t in h.themes] == [t.summary for t in d.themes]
        assert d.stats["f_P"] == pytest.approx(h.stats["f_P"], abs=1e-9)
        # kNN graph: the same similarities up to float32 rounding (the hashing embedder makes exact ties
        # and exact zeros, so neighbours may swap inside a tie and a +-1e-9 cosine may be kept or dropped)
        for sd, sh in zip(d.sem_knn_sim, h.sem_knn_sim):
            sd, sh = sd[sd > 1e-6], sh[sh > 1e-6]
            assert sd.shape == sh.shape and np.allclose(sd, sh, atol=1e-6)
        x = d.sem_x / np.linalg.norm(d.sem_x, axis=1, keepdims=True)
        ok = d.sem_knn_idx >= 0
        rows = np.nonzero(ok)[0]
        assert np.allclose(np.einsum("ij,ij->i", x[rows], x[d.sem_knn_idx[ok]]), d.sem_knn_sim[ok], atol=1e-5)


class _Dense:
    """Hashing features through a fixed Gaussian matrix: generic cosines (no exact ties or zeros
    between different texts), so the host and device searches must pick the same units."""

    def __init__(self, dim: int = 64) -> None:
        self.base, self.dim, self.name = HashingEmbedder(dim), dim, f"dense-{dim}"
        self.mix = np.random.default_rng(0).standard_normal((dim, dim)).astype(np.float32)

    def encode(self, texts):
        x = self.base.encode(texts) @ self.mix
        return (x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)).astype(np.float32)


@pytest.fixture(scope="module")
def dense_bank(tmp_path_factory):
    data = tmp_path_factory.mktemp("dense") / "synth.json"
    write_json(generate_conversations(2, seed=12), data)
    emb = _Dense()
    return bank_of(build_memories(load_locomo(data), emb, XMemoryConfig(), backend="triton")), emb


def test_retriever_reads_device_resident_copies(dense_bank):
    bank, emb = dense_bank
    host = Retriever(bank, emb, backend="cpu")
    dev = Retriever(bank, emb, backend="triton")
    mids = [bank.memory_ids[q % bank.n_memories] for q in range(len(QUESTIONS))]
    for strategy in ("xmemory", "memory-only", "naive-rag"):
        a = host.search(QUESTIONS, mids, strategy=strategy, budget_tokens=300)
        b = dev.search(QUESTIONS, mids, strategy=strategy, budget_tokens=300)
        assert [r.context for r in a] == [r.context for r in b], strategy
    sem = bank.sem.mirrors
    assert sem.rows_uploaded == bank.sem.rows_allocated  # one upload of the level ...
    dev.search(QUESTIONS, mids, strategy="xmemory")
    assert sem.rows_uploaded == bank.sem.rows_allocated  # ... reused by later searches
    t = bank.sem.on_device("x", backend_device("triton"))
    assert np.array_equal(t.cpu().numpy(), bank.sem["x"])
    if interpreting_triton():
        assert t.data_ptr() != bank.sem["x"].ctypes.data  # a copy, as on a GPU: staleness would show


def _mirrored(stores):
    """A compact bank whose statements' vectors are on the device; the level, the device, and the
    rows uploaded so far."""
    bank = _bank(stores["cpu"]).compact()
    dev = backend_device("triton")
    bank.sem.on_device("x", dev)
    return bank, bank.sem, dev, bank.sem.mirrors.rows_uploaded


def test_device_copies_follow_the_bank_as_it_changes(stores):
    bank, lv, dev, before = _mirrored(stores)
    # rewrite memory 0 in place with fewer rows: only its segment goes up again
    sl = bank.slice(0)
    keep = sl.n("sem") - 2
    sl.cols["sem"] = {k: v[:keep] for k, v in sl.cols["sem"].items()}
    sl.cols["sem"]["knn_idx"] = np.where(sl.cols["sem"]["knn_idx"] < keep, sl.cols["sem"]["knn_idx"], -1)
    bank.put_slice(sl)
    t = lv.on_device("x", dev)
    assert np.array_equal(t.cpu().numpy(), lv["x"])
    assert lv.mirrors.rows_uploaded - before == int(lv.seg.capacity[0])
    # grow memory 1 past its capacity: the arena grows (a new host column), so the level goes up whole
    sl = bank.slice(1)
    sl.cols["sem"] = {k: np.concatenate([v, v]) for k, v in sl.cols["sem"].items()}
    sl.cols["sem"]["knn_idx"][:] = -1
    bank.put_slice(sl)
    before = lv.mirrors.rows_uploaded
    t = lv.on_device("x", dev)
    assert np.array_equal(t.cpu().numpy(), lv["x"])
    assert lv.mirrors.rows_uploaded - before == lv.rows_allocated


def test_device_copies_take_only_the_rows_a_partial_put_wrote(stores):
    bank, lv, dev, before = _mirrored(stores)
    sl = bank.slice(0)
    sl.cols["sem"]["x"][2] += 1.0
    bank.put_slice(sl, changed={"sem.x": np.array([2])})  # one row changed: one row goes up
    t = lv.on_device("x", dev)
    assert np.array_equal(t.cpu().numpy(), lv["x"])
    assert lv.mirrors.rows_uploaded - before == 1


def test_write_log_says_when_it_no_longer_reaches_back():
    log = WriteLog()
    log.note(0, 4)
    log.note(4, 4)  # empty: not a write
    assert log.count == 1 and log.since(0) == [(0, 4)] and log.since(1) == []
    for i in range(LOG_ENTRIES):
        log.note(i, i + 1)
    assert log.since(0) is None  # too far behind: the caller uploads whole
    assert log.since(log.count - 2) == [(LOG_ENTRIES - 2, LOG_ENTRIES - 1), (LOG_ENTRIES - 1, LOG_ENTRIES)]


def test_the_engine_serves_from_the_device_while_it_grows(tmp_path):
    write_json(generate_conversations(1, seed=5), tmp_path / "one.json")
    conv = load_locomo(tmp_path / "one.json")[0]
    turns = [
        {"id": m.id, "speaker": m.speaker, "content": m.text, "timestamp": m.timestamp, "session": m.session}
        for m in conv.messages
    ]
    half = len(turns) // 2
    results = {}
    for backend in ("cpu", "triton"):
        with MemoryEngine.open(tmp_path / backend, embedder=_Dense(), backend=backend) as eng:
            eng.add(turns[:half], user_id="u")
            first = eng.search(QUESTIONS, user_id="u", budget_tokens=200)
            eng.add(turns[half:], user_id="u")  # rewrites the memory's rows: the device copies must follow
            second = eng.search(QUESTIONS, user_id="u", budget_tokens=200)
            results[backend] = ([r.context for r in first], [r.context for r in second])
            if backend == "triton":
                lv = eng.bank.sem
                t = lv.on_device("x", backend_device("triton"))
                assert np.array_equal(t.cpu().numpy(), lv["x"])
                assert eng.bank.index[scope_key("u")] == 0
    assert results["cpu"] == results["triton"]
