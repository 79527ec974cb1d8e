"""Every strategy against a bank of several memories whose texts are tagged with their memory: a
query asked of memory B gets only B's units (with provenance), with and without a reader; HiGMem's
turn picking and filtering and TIR's pruning follow a scripted JSON reader exactly, fall back to
similarity when its answers are unusable, and run through the real ``hf`` backend."""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pytest
from tiny_llm import make_tiny_llama

from xmemory_gpu.config import XMemoryConfig
from xmemory_gpu.construct.pipeline import build_memories
from xmemory_gpu.datasets.locomo import load_locomo
from xmemory_gpu.datasets.synthetic import generate_conversations, write_json
from xmemory_gpu.embed.hashing import HashingEmbedder
from xmemory_gpu.llm.base import Generation, Uncertainty, Usage
from xmemory_gpu.memory.hierarchy import bank_of
from xmemory_gpu.retrieve import STRATEGIES, Retriever
from xmemory_gpu.text import message_line

EMB = HashingEmbedder(128)


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    convs = generate_conversations(4, seed=5)
    for c in convs:  # every message names its memory: a unit from another memory cannot pass for this one's
        for key, turns in c["conversation"].items():
            if key.startswith("session_") and isinstance(turns, list):
                for t in turns:
                    t["text"] = f"[{c['sample_id']}] {t['text']}"
    path = write_json(convs, tmp_path_factory.mktemp("s") / "tagged.json")
    loaded = load_locomo(path)
    return loaded, build_memories(loaded, EMB, XMemoryConfig())


def _config(**baselines) -> XMemoryConfig:
    cfg = XMemoryConfig()
    cfg.baselines = replace(cfg.baselines, **baselines)
    return cfg


class ScriptedReader:
    """Picks turn 1 of every group and keeps turn 1 of every union (``mode="first"``), or answers
    garbage (``mode="garbage"``); uncertainty falls with the number of episodes in the prompt."""

    name = "scripted"
    additive = True  # count() is a whitespace split

    def __init__(self, mode: str = "first"):
        self.mode, self.usage, self.prompts = mode, Usage(), []

    def chat(self, user: str) -> str:
        return user

    def count(self, texts):
        return [len(t.split()) for t in texts]

    def generate(self, prompts, max_tokens=32, temperature=0.0, purpose="generate"):
        self.prompts += prompts
        texts = []
        for p in prompts:
            if self.mode == "garbage":
                texts.append("I think turn two, maybe")
            else:
                texts.append(json.dumps({"keep": [1]} if "Keep only the turns" in p else {"turns": [1]}))
        return Generation(texts, [len(p.split()) for p in prompts], [5] * len(prompts))

    def uncertainty(self, prompts, n_tokens=20, kind="mean_nll", purpose=""):
        return [
            Uncertainty(1.0 - 0.1 * p.count("\n\n["), kind, [], [], [1, 2], len(p.split())) for p in prompts
        ]


def _questions(convs, per: int) -> tuple[list[str], list[str]]:
    """The first ``per`` questions of each conversation, each asked of its own memory."""
    qs = [(q.question, c.sample_id) for c in convs for q in c.qa[:per]]
    return [q for q, _ in qs], [m for _, m in qs]


def _check_units_belong(res, mem):
    ids = {m.id for m in mem.messages}
    lines = {message_line(m) for m in mem.messages}
    own = {
        "theme": {str(t.id): t.summary for t in mem.themes},
        "semantic": {str(s.id): s.text for s in mem.semantics},
        "episode": {str(e.id): e.text for e in mem.episodes},
    }
    assert res.memory_id == mem.memory_id and res.units
    for u in res.units:
        assert set(u.message_ids) <= ids
        cut = bool(u.cut)  # cut to a budget's last room: the head of its text, then " ..."
        text = u.text.removesuffix(" ...") if cut else u.text
        if u.type in own:
            assert own[u.type].get(u.id, "").startswith(text) if cut else own[u.type].get(u.id) == text
        else:
            *whole, last = text.split("\n")
            assert (
                (u.message_ids or cut) and set(whole) <= lines and f"[{mem.memory_id}]" in u.text
            )  # a cut counts what shows
            assert any(line.startswith(last) for line in lines) if cut else last in lines
    if any(u.type not in ("theme", "semantic") for u in res.units):  # raw text carries the memory's tag
        assert f"[{mem.memory_id}]" in res.context


@pytest.mark.parametrize("with_reader", [False, True])
def test_every_strategy_returns_only_the_queried_memory(data, with_reader):
    convs, mems = data
    reader = ScriptedReader() if with_reader else None
    r = Retriever(bank_of(mems), EMB, _config(tir_prune=with_reader), reader=reader)
    # every question asked of every memory, its own and the others, in one batch per strategy
    qs = [(q.question, m.memory_id) for c in convs for q in c.qa[:3] for m in mems]
    for strategy in STRATEGIES:
        for budget in (None, 300):
            res = r.search([q for q, _ in qs], [m for _, m in qs], strategy=strategy, budget_tokens=budget)
            for x, (_, m) in zip(res, qs):
                _check_units_belong(x, next(mm for mm in mems if mm.memory_id == m))
                assert budget is None or x.context_tokens <= budget
                assert (x.llm_calls > 0) == (
                    with_reader and strategy in ("xmemory", "xmemory-stage2", "higmem", "tir")
                )


def test_higmem_follows_the_reader_and_falls_back_without_losing_turns(data):
    convs, mems = data
    bank = bank_of(mems)
    questions, mids = _questions(convs, 4)
    plain = Retriever(bank, EMB).search(questions, mids, strategy="higmem")
    reader = ScriptedReader("first")
    picked = Retriever(bank, EMB, reader=reader).search(questions, mids, strategy="higmem")
    n_events = XMemoryConfig().baselines.higmem_events
    for x, m in zip(picked, mids):
        mem = next(mm for mm in mems if mm.memory_id == m)
        assert len(x.units) == 1 and x.units[0].type == "message"  # the filter kept turn 1 of the union
        assert (
            x.llm_calls == min(n_events, len(mem.episodes)) + 1 and x.llm_tokens > 0
        )  # one pick per event + one filter
        assert "HiGMem turn selection by scripted" in x.notes[0]
    assert sum("Keep only the turns" in p for p in reader.prompts) == len(questions)
    # unusable answers: one stricter retry each, then every event keeps its most similar turns and the union is kept whole
    garbage = Retriever(bank, EMB, reader=ScriptedReader("garbage")).search(
        questions, mids, strategy="higmem"
    )
    for p, g, m in zip(plain, garbage, mids):
        mem = next(mm for mm in mems if mm.memory_id == m)
        assert [u.message_ids for u in g.units] == [u.message_ids for u in p.units]
        assert g.llm_calls == 2 * (min(n_events, len(mem.episodes)) + 1) and p.llm_calls == 0
    assert "most similar turns" in plain[0].notes[0]


def test_higmem_picks_are_the_first_turn_of_each_event(data):
    convs, mems = data
    mem = mems[0]
    bank = bank_of(mems)
    q = convs[0].qa[0].question
    cfg = _config(higmem_turns=0)  # only the picked turns reach the filter
    reader = ScriptedReader("first")
    (x,) = Retriever(bank, EMB, cfg, reader=reader).search([q], mem.memory_id, strategy="higmem")
    picks = [p for p in reader.prompts if "Which turns are worth reading" in p]
    row = {m.id: i for i, m in enumerate(mem.messages)}
    listed = {
        "\n".join(f"{i}. {message_line(mem.messages[row[mid]])}" for i, mid in enumerate(e.message_ids, 1)): e
        for e in mem.episodes
    }
    events = [
        next(e for text, e in listed.items() if text in p) for p in picks
    ]  # the event each pick prompt shows
    assert len(events) == min(XMemoryConfig().baselines.higmem_events, len(mem.episodes))
    # each event gave its turn 1; the filter kept turn 1 of their union, in conversation order: the earliest
    assert x.message_ids == [min((e.message_ids[0] for e in events), key=row.__getitem__)]


def test_tir_pruning_keeps_the_picked_turns(data):
    convs, mems = data
    bank = bank_of(mems)
    questions, mids = _questions(convs, 3)
    whole = Retriever(bank, EMB).search(questions, mids, strategy="tir")
    with pytest.raises(ValueError, match="tir_prune needs a reader"):
        Retriever(bank, EMB, _config(tir_prune=True)).search(questions, mids, strategy="tir")
    pruned = Retriever(bank, EMB, _config(tir_prune=True), reader=ScriptedReader()).search(
        questions, mids, strategy="tir"
    )
    for w, p in zip(whole, pruned):
        assert [u.id for u in p.units] == [u.id for u in w.units]
        assert [u.message_ids for u in p.units] == [u.message_ids[:1] for u in w.units]
        assert p.llm_calls == len(w.units) and p.context_tokens < w.context_tokens
    kept = Retriever(bank, EMB, _config(tir_prune=True), reader=ScriptedReader("garbage")).search(
        questions, mids, strategy="tir"
    )
    for w, k in zip(whole, kept):  # failed answers keep the sessions whole
        assert [u.message_ids for u in k.units] == [
            u.message_ids for u in w.units
        ] and k.llm_calls == 2 * len(w.units)


def test_higmem_and_tir_pruning_through_the_hf_backend(data, tmp_path):
    from xmemory_gpu.llm import load_reader

    convs, mems = data
    make_tiny_llama(tmp_path, seed=2, layers=1)
    reader = load_reader(f"hf:{tmp_path}", device="cpu")
    bank = bank_of(mems)
    qs = [(convs[0].qa[0].question, mems[0].memory_id), (convs[1].qa[0].question, mems[1].memory_id)]
    r = Retriever(bank, EMB, _config(tir_prune=True, higmem_events=2), reader=reader)
    for strategy in ("higmem", "tir"):
        res = r.search([q for q, _ in qs], [m for _, m in qs], strategy=strategy)
        for x, (_, m) in zip(res, qs):
            if (
                x.units
            ):  # a random model may pick nothing valid: then similarity or whole sessions (never empty)
                _check_units_belong(x, next(mm for mm in mems if mm.memory_id == m))
            assert x.llm_calls >= 1 and x.llm_tokens > 0 and x.tokenizer.startswith("hf:")
            assert x.context_tokens == reader.count([x.context])[0]
    assert reader.usage.by_purpose and any(k.startswith("retrieval") for k in reader.usage.by_purpose)
    assert np.isfinite(reader.usage.prompt_tokens)
