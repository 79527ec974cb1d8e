"""Messages embedded with their speaker (one rendering for the bulk build and the live
engine), long messages in passages, at most a few statements per message, and budgets filled with
parts (an episode's messages, a message's best passage) instead of skipping what does not fit."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from xmemory_gpu.config import XMemoryConfig
from xmemory_gpu.construct.incremental import empty_memory, grow
from xmemory_gpu.construct.pipeline import build_memories, build_slices
from xmemory_gpu.construct.segment import PASSAGE_WORDS, embed_messages, embedding_text, passages
from xmemory_gpu.construct.semantic import extract_statements, most_specific, specificity
from xmemory_gpu.datasets.locomo import load_locomo
from xmemory_gpu.datasets.synthetic import generate_conversations, generate_long_chats, write_json
from xmemory_gpu.embed.hashing import HashingEmbedder
from xmemory_gpu.memory.bank import Bank
from xmemory_gpu.memory.hierarchy import slice_from_memory
from xmemory_gpu.memory.records import Conversation, Episode, Message
from xmemory_gpu.retrieve import Retriever
from xmemory_gpu.retrieve.context import TokenBudget, as_fill, as_part
from xmemory_gpu.retrieve.result import RetrievedUnit
from xmemory_gpu.tokens import WhitespaceCounter

EMB = HashingEmbedder(128)


def test_embedding_text_renders_speaker_and_caption_like_the_anchor():
    assert embedding_text("Caroline", "I went to a support group.") == "Caroline: I went to a support group."
    assert (
        embedding_text("Mel", "Look! [shares a photo: a dog on a beach]")
        == "Mel: Look! [shares a photo of a dog on a beach]"
    )


def test_passages_lose_no_word_and_respect_the_limit(rng):
    text = " ".join(
        f"w{i}" + ("." if rng.random() < 0.05 else "") for i in range(int(rng.integers(200, 900)))
    )
    text += " " + " ".join(f"long{i}" for i in range(400))  # one sentence longer than a passage
    ps = passages(text, 50)
    assert all(len(p.split()) <= 50 for p in ps)
    assert " ".join(ps).split() == text.split()
    assert passages("short text.", 50) == ["short text."]
    from xmemory_gpu.retrieve import passages as rp  # retrieval's mirror of the build's rule (layering)

    assert rp.passages(text, 50) == ps and rp.PASSAGE_WORDS == PASSAGE_WORDS
    assert rp.embedding_text("A", "x [shares a photo: y]") == embedding_text("A", "x [shares a photo: y]")


def test_messages_embedded_with_speaker_and_long_ones_by_passages():
    short = Message("D1:1", "Ann", "I adopted a puppy.", 1)
    got = embed_messages(EMB, [short])
    assert np.allclose(got.x, EMB.encode(["Ann: I adopted a puppy."])) and got.psg_x.shape == (0, EMB.dim)
    body = " ".join(f"word{i % 97} filler{i % 13}." for i in range(400))
    long = Message("D1:2", "Assistant", body, 1)
    got = embed_messages(EMB, [short, long], 100)
    x = got.x
    parts = EMB.encode([f"Assistant: {p}" for p in passages(body, 100)])
    mean = parts.astype(np.float64).sum(0)
    assert np.allclose(x[1], mean / np.linalg.norm(mean), atol=1e-5)
    assert not np.allclose(x[1], EMB.encode([f"Assistant: {body}"])[0], atol=1e-3)
    # the long message's passages are kept (the bank's psg level): their rows, in order
    assert len(parts) > 1 and got.psg_msg.tolist() == [1] * len(parts)
    np.testing.assert_allclose(got.psg_x, parts, atol=1e-6)


def test_bulk_build_and_engine_grow_embed_messages_alike(tmp_path):
    convs = load_locomo(
        write_json(
            generate_long_chats(1, seed=3, target_tokens=6000, answer_chars=(800, 2000)), tmp_path / "l.json"
        )
    )
    cfg = XMemoryConfig()
    cfg.semantic = replace(cfg.semantic, passage_words=60)
    bulk = build_slices(convs, EMB, cfg)[0].cols
    grown = grow(
        [empty_memory(convs[0].sample_id, EMB.dim, cfg.knn.k_semantics)],
        [convs[0].messages],
        EMB,
        cfg,
        flush=True,
    )[0].cols
    assert np.allclose(bulk["msg"]["x"], grown["msg"]["x"], atol=1e-6)
    assert len(bulk["psg"]["msg"]) > 0 and bulk["psg"]["msg"].tolist() == grown["psg"]["msg"].tolist()
    assert np.allclose(bulk["psg"]["x"], grown["psg"]["x"], atol=1e-6)


def test_at_most_three_statements_per_message_the_most_specific():
    sents = [
        "The weather was fine and the walk was long enough.",
        "Maya booked the Amberline hotel in Lisbon for 240 dollars.",
        "Everything felt pretty nice overall today.",
        "Jonas starts at Northgate Clinic on 3 May.",
        "We ate some food and talked about many things.",
        "Pick the Redhaven route, 12 km, with Tara.",
    ]
    assert specificity(sents[1]) > specificity(sents[0])
    top = most_specific(sents, 3)
    assert top == [sents[1], sents[3], sents[5]]  # the ones with names and numbers, in message order
    assert most_specific(sents, 0) == sents
    msg = Message("D1:1", "Assistant", " ".join(sents * 3), 1)
    conv = Conversation("c", ("User", "Assistant"), [msg])
    ep = [Episode(0, "", "", ["D1:1"])]
    cfg = XMemoryConfig().semantic
    assert len(extract_statements(conv, ep, cfg)) == 3
    assert len(extract_statements(conv, ep, replace(cfg, max_per_message=0))) > 3
    photo = Message("D1:2", "Ann", " ".join(sents) + " [shares a photo: a red kite]", 1)
    nodes = extract_statements(Conversation("c", ("Ann", "Bo"), [photo]), [Episode(0, "", "", ["D1:2"])], cfg)
    assert len(nodes) == 3 and nodes[-1].text == "Ann shared a photo of a red kite"


def _unit(kind: str, uid: str, n_words: int, ids: list[str]) -> RetrievedUnit:
    return RetrievedUnit(kind, uid, " ".join(["w"] * n_words), 0, 1.0, ids)


def test_fit_takes_parts_of_what_does_not_fit_and_fills():
    budget = TokenBudget(WhitespaceCounter())
    sem = _unit("semantic", "s", 5, ["D1:1"])
    epi = _unit("episode", "e", 500, ["D1:1", "D1:2", "D1:3"])
    m2 = as_part(_unit("message", "D1:2", 30, ["D1:2"]))
    m1 = as_part(_unit("message", "D1:1", 400, ["D1:1"]))
    p1 = as_part(_unit("message", "D1:1#p2", 40, ["D1:1"]), 2)
    p1.passage = 2
    m3 = as_part(_unit("message", "D1:3", 10, ["D1:3"]))
    fill = as_fill(_unit("chunk", "c9", 5, ["D9:9"]))
    units = [sem, epi, m2, m1, p1, m3, fill]
    for u, c in zip(units, budget.count([u.text for u in units])):
        u.tokens = c
    assert [u.id for u in budget.fit(units, None)] == ["s", "e"]  # no budget: whole units, no parts, no fill
    # 115 tokens (date lines count): the episode does not fit -> its messages; the long one gives its passage
    assert [u.id for u in budget.fit(units, 115)] == ["s", "D1:2", "D1:1#p2", "D1:3", "c9"]
    assert [u.id for u in budget.fit(units, 1000)] == ["s", "e", "c9"]  # the episode fits: no parts
    dup = _unit("message", "again", 20, ["D1:2"])  # the same text again: not paid twice
    dup.tokens = 20
    assert "again" not in [u.id for u in budget.fit(units + [dup], 1000)]


@pytest.fixture(scope="module")
def persona_retriever(tmp_path_factory):
    convs = load_locomo(
        write_json(generate_conversations(3, seed=2), tmp_path_factory.mktemp("p") / "p.json")
    )
    mems = build_memories(convs, EMB, XMemoryConfig())
    bank = Bank.from_slices([slice_from_memory(m) for m in mems], EMB.dim)
    return Retriever(bank, EMB, XMemoryConfig(), tokens=WhitespaceCounter()), convs


def test_naive_rag_takes_k_chunks_without_budget_and_as_many_as_fit_under_one(persona_retriever):
    r, convs = persona_retriever
    qs = [q.question for q in convs[0].qa][:4]
    for k in (2, 5):
        r.config.baselines = replace(r.config.baselines, naive_rag_k=k)
        assert all(len(x.units) == k for x in r.search(qs, convs[0].sample_id, strategy="naive-rag"))
    r.config.baselines = replace(r.config.baselines, naive_rag_k=2)
    for res in r.search(qs, convs[0].sample_id, strategy="naive-rag", budget_tokens=150):
        assert len(res.units) > 2 and 0.8 * 150 <= res.context_tokens <= 150


@pytest.mark.parametrize("strategy", ["xmemory", "naive-rag"])
def test_budgets_are_used_on_long_chats(tmp_path, strategy):
    convs = load_locomo(write_json(generate_long_chats(1, seed=1, target_tokens=20000), tmp_path / "l.json"))
    mems = build_memories(convs, EMB, XMemoryConfig())
    assert (
        max(
            np.bincount(
                [
                    int(n.message_ids[0].split(":")[1]) + 1000 * int(n.message_ids[0][1:].split(":")[0])
                    for n in mems[0].semantics
                    if len(n.message_ids) == 1
                ]
            )
        )
        <= 3
    )
    bank = Bank.from_slices([slice_from_memory(m) for m in mems], EMB.dim)
    r = Retriever(bank, EMB, XMemoryConfig(), tokens=WhitespaceCounter())
    qs = [q.question for q in convs[0].qa[:6]]
    for b in (300, 600, 1200):
        for res in r.search(qs, convs[0].sample_id, strategy=strategy, budget_tokens=b):
            assert 0.9 * b <= res.context_tokens <= b, (b, res.context_tokens)
