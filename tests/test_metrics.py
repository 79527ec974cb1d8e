"""QA and retrieval metrics on hand-worked cases."""

from __future__ import annotations

import math

import pytest

from xmemory_gpu.eval.metrics import (
    bleu1,
    exact_match,
    normalize_answer,
    qa_scores,
    rouge_l,
    squad_f1,
    token_f1_authors,
)
from xmemory_gpu.eval.retrieval_metrics import (
    Block,
    aggregate,
    answer_coverage,
    answer_words,
    evidence_density,
    evidence_precision,
    evidence_recall,
)


def test_token_f1_authors_uses_word_sets():
    # {the, cat, sat} vs {the, cat}: P = 2/3, R = 1 -> F1 = 0.8
    assert token_f1_authors("The cat sat.", "the cat") == pytest.approx(0.8)
    assert token_f1_authors("cat cat cat", "cat") == pytest.approx(1.0)  # sets, not multisets
    assert token_f1_authors("", "") == 1.0 and token_f1_authors("x", "") == 0.0
    assert token_f1_authors("7 May 2023", 2023) == pytest.approx(2 * (1 / 3) / (1 / 3 + 1))


def test_squad_f1_and_em():
    assert normalize_answer("The  Cat, sat!") == "cat sat"
    # multisets: pred [cat, cat, sat], ref [cat, sat]: common 2, P = 2/3, R = 1
    assert squad_f1("the cat cat sat", "a cat sat") == pytest.approx(0.8)
    assert exact_match("The Cat.", "cat") == 1.0 and exact_match("cats", "cat") == 0.0


def test_bleu1_brevity_and_smoothing():
    # pred [cat] vs ref [cat, sat, down]: precision 1, BP = exp(1 - 3/1)
    assert bleu1("cat", "cat sat down") == pytest.approx(math.exp(-2))
    assert bleu1("cat sat down now", "cat sat") == pytest.approx(2 / 4)  # longer: no penalty
    assert bleu1("dog", "cat") == pytest.approx(0.1)  # smoothing: 0 matches count as 0.1


def test_rouge_l():
    # LCS of [a b c d] and [a c d e]... after article removal "a" drops: [b c d] vs [c d e] -> LCS 2
    assert rouge_l("a b c d", "a c d e") == pytest.approx(2 / 3)
    assert rouge_l("", "x") == 0.0
    assert set(qa_scores("x", "x")) == {"f1_authors", "f1_squad", "exact_match", "bleu1", "rouge_l"}


def test_evidence_recall_precision():
    assert evidence_recall(["D1:1", "D1:2", "D1:2"], ["D1:2", "D3:4"]) == 0.5
    assert evidence_recall(["D1:1"], []) is None
    assert evidence_precision(["D1:1", "D1:2"], ["D1:2"]) == 0.5
    assert evidence_precision([], ["D1:2"]) is None


def test_answer_coverage_and_density():
    blocks = [Block("Alice went hiking.", ["D1:1"], 5), Block("She lives in Lisbon, Portugal.", ["D1:2"], 7),
              Block("Lisbon and Portugal and Alice", ["D1:3"], 6)]
    assert answer_words("The city of Lisbon, Portugal") == ["city", "lisbon", "portugal"]
    cov = answer_coverage(blocks, "Lisbon, Portugal")
    assert cov == {"words": 2, "covered": True, "covered_share": 1.0, "blocks_to_cover": 2, "tokens_to_cover": 12}
    assert answer_coverage(blocks, "Berlin")["blocks_to_cover"] is None
    dens = evidence_density(blocks, "Lisbon Portugal Alice")
    assert dens == {"0": 0.0, "1": pytest.approx(1 / 3), "2": pytest.approx(1 / 3), "3+": pytest.approx(1 / 3)}
    assert evidence_density([], "x")["1"] is None


def test_aggregate_per_category_and_micro():
    rows = [{"category": 1, "r": 1.0}, {"category": 1, "r": 0.0}, {"category": 2, "r": 1.0}, {"category": 5, "r": 0.0},
            {"category": 2, "r": None}]
    agg = aggregate(rows, "r")
    assert agg["1"] == 0.5 and agg["2"] == 1.0 and agg["5"] == 0.0
    assert agg["micro"] == pytest.approx(2 / 3)  # over the 3 scored questions of categories 1-4
