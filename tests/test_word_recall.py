"""Evidence-word recall, the share of each evidence message's words the context shows,
on hand-made contexts (whole, fragment, repeated fragment, cut block, statement, missing), and
beside evidence recall in the eval's rows, summary, sweep and plots."""

from __future__ import annotations

import json

import pytest

from xmemory_gpu.cli import main
from xmemory_gpu.datasets.synthetic import generate_conversations, write_json
from xmemory_gpu.eval.retrieval_metrics import evidence_recall, evidence_word_recall
from xmemory_gpu.eval.runner import score
from xmemory_gpu.retrieve.context import TokenBudget
from xmemory_gpu.retrieve.result import RetrievalResult, RetrievedUnit
from xmemory_gpu.tokens import WhitespaceCounter

TEN = "one two three four five six seven eight nine ten"
MSGS = {
    "D1:1": ("Ann", TEN),
    "D1:2": ("Bob", "alpha beta gamma delta epsilon six seven eight"),
    "D1:3": ("Ann", "hi"),
}


def whole(mid: str) -> RetrievedUnit:
    speaker, text = MSGS[mid]
    line = f"{speaker}: {text}"
    return RetrievedUnit("message", mid, line, 0, 1.0, [mid], None, {}, [len(line)])


def passage(mid: str, a: int, b: int, k: int = 1) -> RetrievedUnit:
    speaker, text = MSGS[mid]
    return RetrievedUnit(
        "message", f"{mid}#p{k}", f"{speaker}: " + " ".join(text.split()[a:b]), 0, 1.0, [mid], None, passage=k
    )


def statement(text: str, sources: list[str]) -> RetrievedUnit:
    return RetrievedUnit("semantic", "7", text, 0, 1.0, sources)


def test_whole_message_earns_one_and_a_missing_one_zero():
    assert evidence_word_recall([whole("D1:1")], ["D1:1"], MSGS) == 1.0
    assert (
        evidence_word_recall([whole("D1:1")], ["D1:1", "D1:2"], MSGS) == 0.5
    )  # the mean over evidence messages
    assert evidence_word_recall([], ["D1:1"], MSGS) == 0.0
    assert evidence_word_recall([whole("D1:1")], [], MSGS) is None
    assert (
        evidence_word_recall([whole("D1:1")], ["D1:01", "D9:9"], MSGS) == 0.5
    )  # ids normalised; unknown gold earns 0


def test_a_fragment_earns_its_share_and_a_repeated_one_counts_once():
    assert evidence_word_recall([passage("D1:1", 0, 4)], ["D1:1"], MSGS) == pytest.approx(0.4)
    assert evidence_word_recall(
        [passage("D1:1", 0, 4), passage("D1:1", 0, 4)], ["D1:1"], MSGS
    ) == pytest.approx(0.4)
    assert evidence_word_recall(
        [passage("D1:1", 0, 4), passage("D1:1", 2, 6, 2)], ["D1:1"], MSGS
    ) == pytest.approx(0.6)
    assert (
        evidence_word_recall([passage("D1:1", 6, 10, 2), whole("D1:1")], ["D1:1"], MSGS) == 1.0
    )  # capped by words, not summed
    # evidence recall credits the fragment whole: the measure a fragment cannot game
    assert evidence_recall(["D1:1"], ["D1:1"]) == 1.0


def test_a_block_cut_to_fit_shows_the_words_before_its_cut():
    budget = TokenBudget(WhitespaceCounter())
    lines = [f"{s}: {t}" for s, t in (MSGS["D1:2"], MSGS["D1:1"])]
    text = "\n".join(lines)  # a naive-RAG chunk of two messages, cut by the budget's own rule
    u = RetrievedUnit(
        "chunk", "0", text, len(text.split()), 1.0, ["D1:2", "D1:1"], None, {}, [len(lines[0]), len(text)]
    )
    for room in (6, 12, 16, 19):
        cut = budget._cut(u, room)
        assert cut.cut and cut.text.endswith(" ...")
        shown = cut.text.removesuffix(" ...").split("\n")
        first = len(shown[0].split()) - 1  # the words after "Bob:"
        second = len(shown[1].split()) - 1 if len(shown) > 1 else 0
        assert evidence_word_recall([cut], ["D1:2"], MSGS) == (
            pytest.approx(first / 8) if "D1:2" in cut.message_ids else 0.0
        )
        assert evidence_word_recall([cut], ["D1:1"], MSGS) == (
            pytest.approx(second / 10) if "D1:1" in cut.message_ids else 0.0
        )
    assert evidence_word_recall([budget._cut(u, 16)], ["D1:1"], MSGS) == pytest.approx(
        0.5
    )  # half of D1:1 shown


def test_a_statement_credits_its_sources_with_its_words_split_evenly():
    s = statement("Ann likes four things", ["D1:1", "D1:2"])  # 4 words, 2 sources: 2 words each
    assert evidence_word_recall([s], ["D1:1"], MSGS) == pytest.approx(2 / 10)
    assert evidence_word_recall([s], ["D1:2"], MSGS) == pytest.approx(2 / 8)
    assert evidence_word_recall([s, passage("D1:1", 0, 4)], ["D1:1"], MSGS) == pytest.approx(6 / 10)
    assert (
        evidence_word_recall([statement(TEN + " and more words", ["D1:1"])], ["D1:1"], MSGS) == 1.0
    )  # capped at 1
    llm_episode = RetrievedUnit("episode", "3", "Ann and Bob talked about counting", 0, 1.0, ["D1:1", "D1:2"])
    assert evidence_word_recall([llm_episode], ["D1:2"], MSGS) == pytest.approx(3 / 8)
    theme = RetrievedUnit("theme", "0", TEN, 0, 1.0, ["D1:1"])  # themes are not context
    assert evidence_word_recall([theme], ["D1:1"], MSGS) == 0.0


def test_score_reports_it_beside_evidence_recall():
    r = RetrievalResult("q", "m", "s", [passage("D1:1", 0, 5)], "ctx", 9, "tok")
    q = {
        "sample_id": "m",
        "qa_index": 0,
        "question": "q",
        "answer": "five",
        "evidence": ["D1:1"],
        "category": 1,
    }
    assert score(r, q)["evidence_word_recall"] is None  # no message texts: not measured
    row = score(r, {**q, "evidence_messages": {"D1:1": MSGS["D1:1"]}})
    assert row["recall"] == 1.0 and row["evidence_word_recall"] == pytest.approx(0.5)


def test_eval_writes_it_in_rows_summary_sweep_and_plots(tmp_path):
    data = write_json(generate_conversations(2, seed=4), tmp_path / "syn.json")
    store = tmp_path / "store"
    assert main(["build", str(data), "--out", str(store), "--embedder", "hashing:64", "--no-progress"]) == 0
    out = tmp_path / "ev"
    assert (
        main(
            [
                "eval",
                str(store),
                "--data",
                str(data),
                "--out",
                str(out),
                "--strategies",
                "naive-rag,chunk-rag:8,xmemory",
                "--sweep-budget",
                "150,400",
                "--limit",
                "20",
            ]
        )
        == 0
    )
    rows = [json.loads(line) for line in open(out / "results.jsonl")]
    assert {r["strategy"] for r in rows} == {"naive-rag", "chunk-rag:8", "xmemory"}
    for r in rows:
        w = r["evidence_word_recall"]
        assert w is None or 0.0 <= w <= 1.0
        assert (w is None) == (r["recall"] is None)
        if r["strategy"] == "naive-rag":  # whole messages: every message counted is shown whole
            assert w == pytest.approx(r["recall"])
    summary = json.loads((out / "summary.json").read_text())
    for s in summary["strategies"].values():
        assert 0.0 <= s["evidence_word_recall"]["micro"] <= s["recall"]["micro"] + 1e-9
    assert "evidence_word_recall" in summary["meta"]["provenance"]["metric_definitions"]
    assert "| evidence recall | evidence-word recall |" in (out / "summary.md").read_text()
    sweep = json.loads((out / "sweep.json").read_text())
    assert all(len(s["evidence_word_recall"]) == 2 for s in sweep["strategies"].values())
    assert "word recall@150" in (out / "sweep.md").read_text()
    for png in ("sweep.png", "recall_vs_tokens.png"):
        assert (out / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
