"""Stage I, Stage II priority, the peers' strategies and the search CLI on a small built store."""

from __future__ import annotations

import json

import numpy as np
import pytest
from tiny_llm import make_tiny_llama

from xmemory_gpu.cli import main
from xmemory_gpu.config import XMemoryConfig
from xmemory_gpu.construct.pipeline import build_memories
from xmemory_gpu.datasets.locomo import load_locomo
from xmemory_gpu.datasets.synthetic import generate_conversations, write_json
from xmemory_gpu.embed.hashing import HashingEmbedder
from xmemory_gpu.memory.hierarchy import bank_of
from xmemory_gpu.memory.store import Store
from xmemory_gpu.retrieve import STRATEGIES, Retriever
from xmemory_gpu.retrieve.stage1 import restrict_graph, run_stage1

EMB = HashingEmbedder(128)


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    path = tmp_path_factory.mktemp("r") / "synthetic.json"
    write_json(generate_conversations(5, seed=21), path)
    convs = load_locomo(path)
    return convs, build_memories(convs, EMB, XMemoryConfig())


@pytest.fixture(scope="module")
def retriever(data):
    return Retriever(bank_of(data[1]), EMB)


def _questions(convs):
    return [(q.question, c.sample_id) for c in convs for q in c.qa][:60]


def test_restrict_graph_maps_to_local_positions():
    cand_q = np.array([0, 0, 0, 1, 1])
    cand_row = np.array([7, 3, 5, 3, 9])
    off = np.array([0, 3, 5])
    knn_idx = np.full((10, 3), -1, np.int32)
    knn_sim = np.full((10, 3), -np.inf, np.float32)
    knn_idx[7], knn_sim[7] = [5, 9, 3], [0.9, 0.8, -0.1]  # 9 not a candidate of q0; 3 has weight <= 0
    knn_idx[3], knn_sim[3] = [9, 7, -1], [0.5, 0.4, -np.inf]
    idx, w = restrict_graph(cand_q, cand_row, off, knn_idx, knn_sim, 10)
    assert idx[0].tolist() == [2, -1, -1] and w[0, 0] == pytest.approx(0.9)
    assert idx[3].tolist() == [1, -1, -1]  # for q1, row 9 is local position 1; row 7 is not a candidate
    assert idx[1].tolist() == [-1, 0, -1]


def test_stage1_units_trace_to_messages_and_respect_budgets(data, retriever):
    convs, mems = data
    qs = _questions(convs)
    res = retriever.search([q for q, _ in qs], [m for _, m in qs], strategy="xmemory-stage1")
    cfg = XMemoryConfig().stage1
    by_id = {m.memory_id: m for m in mems}
    for r in res:
        ids = {m.id for m in by_id[r.memory_id].messages}
        th = [u for u in r.units if u.type == "theme"]
        se = [u for u in r.units if u.type == "semantic"]
        assert 1 <= len(th) <= cfg.theme_budget and 1 <= len(se) <= cfg.semantic_budget
        assert all(u.message_ids and set(u.message_ids) <= ids for u in se)
        assert set(r.message_ids) <= ids and r.context.startswith("Semantic memories:")
        assert r.context_tokens > 0 and r.tokenizer


def test_stage1_semantics_lie_in_selected_themes(data, retriever):
    convs, _ = data
    qs = _questions(convs)[:20]
    bank = retriever.bank
    q_x = EMB.encode([q for q, _ in qs])
    mem_idx = np.array([bank.index_of(m) for _, m in qs])
    out = run_stage1(bank, q_x, mem_idx, XMemoryConfig().stage1, backend="reference")
    for q in range(len(qs)):
        themes = set(out.themes[out.theme_offsets[q] : out.theme_offsets[q + 1]].tolist())
        sems = out.semantics[out.sem_offsets[q] : out.sem_offsets[q + 1]]
        assert not out.fallback[q]
        assert set(bank.theme_of[sems].tolist()) <= themes
        rel = out.sem_rel[out.sem_offsets[q] : out.sem_offsets[q + 1]]
        np.testing.assert_allclose(rel, bank.sem_x[sems] @ q_x[q], atol=1e-5)


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_batched_equals_one_by_one_and_budget(data, retriever, strategy):
    convs, _ = data
    qs = _questions(convs)[:12]
    batch = retriever.search([q for q, _ in qs], [m for _, m in qs], strategy=strategy)
    for (q, m), r in zip(qs, batch):
        one = retriever.search([q], m, strategy=strategy)[0]
        assert [(u.type, round(u.score, 4)) for u in one.units] == [
            (u.type, round(u.score, 4)) for u in r.units
        ]
        scores = [round(u.score, 4) for u in r.units]
        untied = [i for i, v in enumerate(scores) if scores.count(v) == 1]  # tied units may swap
        assert [one.units[i].id for i in untied] == [r.units[i].id for i in untied]
    for r in retriever.search([q for q, _ in qs], [m for _, m in qs], strategy=strategy, budget_tokens=250):
        assert 0 < r.context_tokens <= 250
        assert r.timings and all(v >= 0 for v in r.timings.values())


def test_strategies_shapes(data, retriever):
    convs, mems = data
    q, m = _questions(convs)[0]
    mem = next(x for x in mems if x.memory_id == m)
    (tir,) = retriever.search([q], m, strategy="tir")
    for u in tir.units:  # whole sessions
        sess = {x.session for x in mem.messages if x.id in u.message_ids}
        assert len(sess) == 1 and len(u.message_ids) == sum(x.session in sess for x in mem.messages)
    (rag,) = retriever.search([q], m, strategy="naive-rag")
    assert len(rag.units) == XMemoryConfig().baselines.naive_rag_k and all(
        u.type == "chunk" for u in rag.units
    )
    (full,) = retriever.search([q], m, strategy="xmemory")
    assert any(u.type == "episode" for u in full.units) and full.notes
    with pytest.raises(ValueError, match="unknown strategy"):
        retriever.search([q], m, strategy="nope")
    with pytest.raises(KeyError, match="not in this bank"):
        retriever.search([q], "no-such-memory")


def test_search_cli(tmp_path, data, capsys):
    convs, mems = data
    store = Store.create(tmp_path / "s", dim=EMB.dim, embedder=EMB.name, config=XMemoryConfig().to_dict())
    for mem in mems:
        store.put(mem)
    store.close()
    q, m = _questions(convs)[0]
    assert main(["search", str(tmp_path / "s"), "--memory", m, q, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out[0]["memory_id"] == m and out[0]["message_ids"]
    batch = tmp_path / "b.json"
    batch.write_text(json.dumps([{"question": q, "memory": m}, {"question": "anything else"}]))
    assert (
        main(["search", str(tmp_path / "s"), "--batch", str(batch), "--memory", m, "--strategy", "tir"]) == 0
    )
    assert capsys.readouterr().out.count("Q: ") == 2
    assert main(["search", str(tmp_path / "s"), "--memory", "nope", q]) == 2
    assert "no memory 'nope'" in capsys.readouterr().err


def test_context_token_count_is_exact(data, retriever):
    convs, _ = data
    qs = _questions(convs)[:8]
    for strategy in ("xmemory", "naive-rag"):
        for r in retriever.search([q for q, _ in qs], [m for _, m in qs], strategy=strategy):
            assert r.context_tokens == retriever.tokens.count([r.context])[0]


class ScriptedReader:
    """Uncertainty 1.0 for the coarse prompt; for a probe, 1.0 minus a drop read from the script."""

    name = "scripted"
    additive = True

    def __init__(self, drops):
        from xmemory_gpu.llm.base import Usage

        self.drops, self.usage, self.calls = drops, Usage(), 0

    def chat(self, user):
        return user

    def count(self, texts):
        return [len(t.split()) for t in texts]

    def uncertainty(self, prompts, n_tokens=20, kind="mean_nll", purpose=""):
        from xmemory_gpu.llm.base import Uncertainty

        self.calls += 1
        out, j = [], 0
        for p in prompts:
            if "Episodic memories:" not in p:
                j = 0
                out.append(Uncertainty(1.0, kind, [], [], [1], 10))
            else:
                out.append(Uncertainty(1.0 - self.drops[j], kind, [], [], [1, 2], 20))
                j += 1
        return out


@pytest.mark.parametrize(
    "drops, admitted",
    [
        (
            [0.5, 0.3, 0.1, -0.5, 0.2, -0.6, 0.9],
            [0, 1, 2, 4],
        ),  # 4th is low gain (not in the first 3): go on; 6th: second low -> stop
        ([0.5, -0.9, 0.4], [0]),  # a low-gain probe among the first 3 stops
    ],
)
def test_stage2_gate_admits_and_stops_by_the_rules(data, drops, admitted):
    convs, mems = data
    reader = ScriptedReader(drops + [0.0] * 10)
    r = Retriever(bank_of(mems), EMB, reader=reader)
    q, m = _questions(convs)[0]
    (res,) = r.search([q], m, strategy="xmemory")
    epi = [u for u in res.units if u.type == "episode"]
    assert [round(u.scores["uncertainty_drop"], 6) for u in epi] == [round(drops[i], 6) for i in admitted]
    assert [u.scores["expanded"] for u in epi] == [float(drops[i] > 0.25) for i in admitted]
    assert reader.calls == 1 and res.llm_calls == 1 + min(10, len(drops) + 10) and res.llm_tokens > 0
    assert "Stage II gate" in res.notes[0]


def test_stage2_with_a_real_tiny_reader(data, tmp_path):

    from xmemory_gpu.llm import load_reader

    make_tiny_llama(tmp_path, seed=1, layers=1)
    convs, mems = data
    r = Retriever(bank_of(mems), EMB, reader=load_reader(f"hf:{tmp_path}", device="cpu"))
    qs = _questions(convs)[:2]
    res = r.search([q for q, _ in qs], [m for _, m in qs], strategy="xmemory-stage2")
    for x in res:
        assert x.llm_calls >= 2 and x.tokenizer.startswith("hf:")
        assert all("uncertainty_drop" in u.scores for u in x.units if u.type == "episode")
        assert x.context_tokens == r.reader.count([x.context])[0]


def test_xmemory_tops_up_stage1_with_the_similarity_pool_by_relevance(data, retriever):
    """Full xmemory (no budget): its statements are Stage I's picks joined by the similarity top
    semantics it did not pick (with message_weight 0: in descending relevance); with topup off, only
    Stage I's picks."""
    convs, _ = data
    qs = _questions(convs)[:20]
    q, m = [x for x, _ in qs], [y for _, y in qs]
    full = retriever.search(q, m, strategy="xmemory")
    s1 = retriever.search(q, m, strategy="xmemory-stage1")
    sim = retriever.search(q, m, strategy="memory-only")
    for a, b, c in zip(full, s1, sim):
        sem = [u for u in a.units if u.type == "semantic"]
        ids = [u.id for u in sem]
        want = {u.id for u in b.units if u.type == "semantic"} | {
            u.id for u in c.units if u.type == "semantic"
        }
        assert set(ids) == want and len(ids) == len(set(ids))
    plain = Retriever(retriever.bank, EMB, XMemoryConfig.from_dict({"stage1": {"message_weight": 0.0}}))
    for a in plain.search(q, m, strategy="xmemory"):  # without the message term: descending relevance
        rel = [u.scores["relevance"] for u in a.units if u.type == "semantic"]
        assert rel == sorted(rel, reverse=True)
    off = Retriever(retriever.bank, EMB, XMemoryConfig.from_dict({"stage1": {"topup": False}}))
    for a, b in zip(off.search(q, m, strategy="xmemory"), s1):
        assert [u.id for u in a.units if u.type == "semantic"] == [
            u.id for u in b.units if u.type == "semantic"
        ]


def test_theme_relevance_from_summary_embeddings(data):
    """stage1.theme_relevance = "summary": a theme's relevance is cos(query, its summary's embedding)
    (the authors' rule), embedded once per distinct summary; the default stays the centroid."""
    convs, mems = data
    qs = _questions(convs)[:20]
    cfg = XMemoryConfig.from_dict({"stage1": {"theme_relevance": "summary"}})
    calls: list[list[str]] = []

    class Counting(HashingEmbedder):
        def encode(self, texts):
            calls.append(list(texts))
            return super().encode(texts)

    r = Retriever(bank_of(mems), Counting(128), cfg)
    bank = r.bank
    q_x = EMB.encode([q for q, _ in qs])
    mem_idx = np.array([bank.index_of(m) for _, m in qs])
    out = run_stage1(bank, q_x, mem_idx, cfg.stage1, backend="reference", theme_vectors=r.theme_vectors)
    for q in range(len(qs)):
        rows = out.themes[out.theme_offsets[q] : out.theme_offsets[q + 1]]
        want = EMB.encode([str(s) for s in bank.theme["summary"][rows]]) @ q_x[q]
        np.testing.assert_allclose(
            out.theme_rel[out.theme_offsets[q] : out.theme_offsets[q + 1]], want, atol=1e-5
        )
    embedded = [t for c in calls for t in c]
    assert len(embedded) == len(set(embedded))  # each summary text embedded once
    n_calls = len(calls)
    r.search([q for q, _ in qs], [m for _, m in qs], strategy="xmemory-stage1")
    assert all(
        t not in embedded for c in calls[n_calls:] for t in c if t in {str(s) for s in bank.theme["summary"]}
    )
    base = run_stage1(bank, q_x, mem_idx, XMemoryConfig().stage1, backend="reference")
    assert Retriever(bank, EMB).theme_vectors(np.arange(3)) is None
    assert not np.array_equal(base.theme_rel, out.theme_rel)
    with pytest.raises(ValueError, match="theme_relevance"):
        XMemoryConfig.from_dict({"stage1": {"theme_relevance": "title"}})
