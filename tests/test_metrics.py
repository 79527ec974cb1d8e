"""QA and retrieval metrics on hand-worked cases."""

from __future__ import annotations

import math

import pytest

from xmemory_gpu.eval.metrics import (
    METRIC_DEFINITIONS,
    _lcs,
    bleu1,
    bleu1_authors,
    exact_match,
    locomo_f1,
    locomo_f1_score,
    normalize_answer,
    qa_scores,
    rouge_l,
    squad_f1,
    token_f1_authors,
    tokens,
)
from xmemory_gpu.eval.retrieval_metrics import (
    Block,
    aggregate,
    answer_coverage,
    answer_words,
    evidence_density,
    evidence_precision,
    evidence_recall,
    mean,
    normalize_evidence,
)

# ----------------------------------------------------------------------------- QA metrics


def test_normalize_and_tokens():
    assert normalize_answer("The  Cat, sat!") == "cat sat"
    assert normalize_answer("An apple; the theater.") == "apple theater"  # articles are whole words only
    assert normalize_answer("D1:3 at 3:30") == "d13 at 330"  # punctuation removed, not spaced
    assert tokens(2023) == ["2023"] and tokens(None) == [] and tokens("") == []


def test_token_f1_authors_uses_word_sets():
    # {the, cat, sat} vs {the, cat}: P = 2/3, R = 1 -> F1 = 2 * (2/3) / (5/3) = 0.8
    assert token_f1_authors("The cat sat.", "the cat") == pytest.approx(0.8)
    assert token_f1_authors("cat cat cat", "cat") == pytest.approx(1.0)  # sets, not multisets
    # articles are kept: {a, dog} vs {dog}: P = 1/2, R = 1 -> 2/3 (SQuAD F1 drops "a": 1.0)
    assert token_f1_authors("a dog", "dog") == pytest.approx(2 / 3)
    assert squad_f1("a dog", "dog") == pytest.approx(1.0)
    # only . , ! ? become spaces: "hello,world" splits, "paris;" stays a different word
    assert token_f1_authors("Hello,world!", "hello world") == pytest.approx(1.0)
    assert token_f1_authors("Paris;", "paris") == 0.0
    # int reference: {7, may, 2023} vs {2023}: P = 1/3, R = 1 -> 0.5
    assert token_f1_authors("7 May 2023", 2023) == pytest.approx(0.5)
    assert (
        token_f1_authors("", "") == 1.0
        and token_f1_authors("x", "") == 0.0
        and token_f1_authors("", "x") == 0.0
    )
    assert token_f1_authors("dog", "cat") == 0.0


def test_squad_f1_and_em():
    # multisets: pred [cat, cat, sat], ref [cat, sat]: common 2, P = 2/3, R = 1 -> 0.8
    assert squad_f1("the cat cat sat", "a cat sat") == pytest.approx(0.8)
    # SQuAD-style: [broncos] vs [denver, broncos]: P = 1, R = 1/2 -> 2/3
    assert squad_f1("the Broncos", "Denver Broncos") == pytest.approx(2 / 3)
    # int reference: [in, 2023] vs [2023]: P = 1/2, R = 1 -> 2/3
    assert squad_f1("In 2023.", 2023) == pytest.approx(2 / 3)
    assert squad_f1(2023, "2023") == 1.0
    # official v1.1: no common token -> 0, even when both normalise to empty; EM compares strings
    assert squad_f1("the", "a") == 0.0 and exact_match("the", "a") == 1.0
    assert exact_match("The Cat.", "cat") == 1.0 and exact_match("cats", "cat") == 0.0
    assert exact_match("In 2023.", 2023) == 0.0 and exact_match(" 2023 ", 2023) == 1.0


def test_bleu1_brevity_clipping_and_smoothing():
    # pred [cat] vs ref [cat, sat, down]: c = 1, r = 3, p1 = 1, BP = exp(1 - 3/1)
    assert bleu1("cat", "cat sat down") == pytest.approx(math.exp(-2))
    # c = 4 > r = 2: no penalty; p1 = 2/4
    assert bleu1("cat sat down now", "cat sat") == pytest.approx(0.5)
    # clipping: pred [cat, cat, cat] vs ref [cat, on, mat]: clipped 1, p1 = 1/3, c == r -> BP = 1
    assert bleu1("the cat cat cat", "cat on mat") == pytest.approx(1 / 3)
    # smoothing: 0 matches count as 0.1: c = r = 1 -> 0.1 / 1
    assert bleu1("dog", "cat") == pytest.approx(0.1)
    # smoothing and penalty: c = 2, r = 3: (0.1 / 2) * exp(1 - 3/2)
    assert bleu1("dog dog", "cat sat mat") == pytest.approx(0.05 * math.exp(-0.5))
    assert bleu1("", "x") == 0.0 and bleu1("x", "") == 0.0 and bleu1("the", "cat") == 0.0
    assert bleu1("Lisbon, Portugal", "lisbon portugal") == pytest.approx(1.0)


def test_rouge_l():
    assert _lcs(list("abcbdab"), list("bdcaba")) == 4  # the CLRS example
    assert _lcs([], ["x"]) == 0
    # "a" is an article and drops: [b, c, d] vs [c, d, e] -> LCS 2, P = R = 2/3
    assert rouge_l("a b c d", "a c d e") == pytest.approx(2 / 3)
    # [one two three four] vs [one three five six seven]: LCS 2, P = 1/2, R = 2/5 -> 2 * 0.2 / 0.9 = 4/9
    assert rouge_l("one two three four", "one three five six seven") == pytest.approx(4 / 9)
    # order matters for ROUGE-L (LCS 1 -> 0.5) but not for token F1
    assert rouge_l("cat sat", "sat cat") == pytest.approx(0.5) and squad_f1("cat sat", "sat cat") == 1.0
    assert rouge_l("", "x") == 0.0 and rouge_l("x", "") == 0.0 and rouge_l("dog", "cat") == 0.0


def test_qa_scores():
    s = qa_scores("The cat sat.", "the cat")
    assert set(s) == {
        "f1_authors",
        "f1_squad",
        "exact_match",
        "bleu1",
        "bleu1_authors",
        "rouge_l",
        "locomo_f1",
    }
    # authors {the, cat, sat} vs {the, cat}: 0.8; SQuAD [cat, sat] vs [cat]: 2/3;
    # BLEU-1 c = 2 > r = 1, p1 = 1/2; ROUGE-L LCS 1, P = 1/2, R = 1 -> 2/3
    assert s == {
        "f1_authors": pytest.approx(0.8),
        "f1_squad": pytest.approx(2 / 3),
        "exact_match": 0.0,
        "bleu1": pytest.approx(0.5),
        # NLTK: [the, cat, sat, .] vs [the, cat]: 2 of 4 unigrams, c > r -> 0.5
        "bleu1_authors": pytest.approx(0.5),
        "rouge_l": pytest.approx(2 / 3),
        # LoCoMo: [cat, sat] vs [cat] (the removed): 2/3
        "locomo_f1": pytest.approx(2 / 3),
    }
    assert all(v == 1.0 for v in qa_scores("Lisbon", "lisbon").values())
    assert qa_scores("no", "yes", category=5)["locomo_f1"] == 0.0
    assert set(METRIC_DEFINITIONS) >= set(s) | {"tokens_per_query"}


def test_bleu1_authors_hand_worked():
    # [the, cat, sat, on, the, mat, .] (7) vs [the, cat, is, on, the, mat] (6): clipped the 2, cat, on, mat
    # -> 5 / 7, c > r so BP = 1
    assert bleu1_authors("The cat sat on the mat.", "the cat is on the mat") == pytest.approx(5 / 7)
    # punctuation, articles and clitics are tokens: [she, 's, a, painter] vs [a, painter]: p1 = 2/4, BP = 1
    assert bleu1_authors("She's a painter", "a painter") == pytest.approx(0.5)
    # shorter than the reference: [paris] vs [in, paris, ,, france]: p1 = 1, BP = exp(1 - 4/1)
    assert bleu1_authors("Paris", "in Paris, France") == pytest.approx(math.exp(-3))
    # no common unigram: NLTK scores 0 (our smoothed bleu1 does not)
    assert bleu1_authors("dog", "cat") == 0.0 and bleu1("dog", "cat") > 0.0
    assert bleu1_authors("", "cat") == 0.0
    assert bleu1_authors("7", 7) == 1.0  # non-string references are str()-ed


def test_locomo_f1_hand_worked():
    # Porter stemming and "and" removed: [run, swim] vs [swim, run]
    assert locomo_f1_score("Running and swimming", "swimming, running") == 1.0
    # commas deleted before punctuation: "1,000" -> "1000"
    assert locomo_f1_score("1,000 dollars", "1000 dollars") == 1.0
    # multiset: [dog, dog] vs [dog]: common 1, P 1/2, R 1
    assert locomo_f1_score("dog dog", "dog") == pytest.approx(2 / 3)
    assert locomo_f1_score("a the", "an") == 0.0  # both normalise to nothing
    # category 1: comma-split multi-answer, mean over gold parts of the best prediction part:
    # gold "swimming" -> 1; gold "running and pottery" -> [run, potteri] vs best [run]: 2/3
    assert locomo_f1("running, swimming", "swimming, running and pottery", 1) == pytest.approx(
        (1 + 2 / 3) / 2
    )
    # the same strings outside category 1 are one answer each (commas deleted)
    assert locomo_f1("running, swimming", "swimming, running and pottery", 2) == pytest.approx(
        2 * (2 / 2) * (2 / 3) / (2 / 2 + 2 / 3)
    )
    # category 3: the gold is cut at ";"
    assert locomo_f1("likely yes", "Likely yes; she enjoys it", 3) == 1.0
    assert locomo_f1("likely yes", "Likely yes; she enjoys it", 4) < 1.0
    # category 5: abstention phrases
    assert locomo_f1("That is not mentioned in the conversation.", "x", 5) == 1.0
    assert locomo_f1("No information available", "x", 5) == 1.0
    assert locomo_f1("Yes, in May", "x", 5) == 0.0


# ----------------------------------------------------------------------------- retrieval metrics


def test_evidence_recall_precision():
    assert evidence_recall(["D1:1", "D1:2", "D1:2"], ["D1:2", "D3:4"]) == 0.5
    assert evidence_recall(["D1:2"], ["D1:2", "D1:2"]) == 1.0  # distinct evidence ids
    assert evidence_recall([], ["D1:2"]) == 0.0
    assert evidence_recall(["D1:1"], []) is None
    # distinct retrieved {D1:1, D1:2}: 1 of 2 is evidence
    assert evidence_precision(["D1:1", "D1:2", "D1:2"], ["D1:2"]) == 0.5
    assert evidence_precision(["D1:1", "D1:2", "D2:1"], ["D1:2", "D2:1", "D9:9"]) == pytest.approx(2 / 3)
    assert evidence_precision([], ["D1:2"]) is None
    assert evidence_precision(["D1:2"], []) is None


def test_evidence_ids_normalised():
    assert normalize_evidence(["D8:6; D9:17", "D30:05", "D:11:26", " D1:3 ", "odd"]) == {
        "D8:6",
        "D9:17",
        "D30:5",
        "D11:26",
        "D1:3",
        "odd",
    }
    assert evidence_recall(["D8:6", "D30:5"], ["D8:6; D9:17", "D30:05"]) == pytest.approx(2 / 3)


def test_answer_words():
    assert answer_words("The city of Lisbon, Portugal") == ["city", "lisbon", "portugal"]
    assert answer_words("7 May 2023") == ["7", "may", "2023"]  # "may" is a month here
    assert answer_words(2023) == ["2023"]
    assert answer_words("Paris and paris") == ["paris"]
    assert answer_words("Yes, it is.") == [] and answer_words("") == []


def test_answer_coverage_prefix():
    blocks = [
        Block("Alice went out.", ["D1:1"], 4),
        Block("Went hiking!", ["D1:2"], 3),
        Block("Lisbon it was", ["D1:3"], 5),
        Block("Alice hiking Lisbon", ["D1:4"], 9),
    ]
    # alice in block 1, hiking in 2, lisbon in 3: prefix of 3 blocks, 4 + 3 + 5 tokens
    assert answer_coverage(blocks, "Alice, hiking in Lisbon") == {
        "words": 3,
        "covered": True,
        "covered_share": 1.0,
        "blocks_to_cover": 3,
        "tokens_to_cover": 12,
    }
    # the single block 4 holds all, but the prefix counts from the top of the ranking
    assert answer_coverage(blocks[3:], "Alice, hiking in Lisbon")["blocks_to_cover"] == 1
    assert answer_coverage(blocks, "Lisbon, Berlin") == {
        "words": 2,
        "covered": False,
        "covered_share": 0.5,
        "blocks_to_cover": None,
        "tokens_to_cover": None,
    }
    # no content word: never "covered", share undefined
    assert answer_coverage(blocks, "Yes") == {
        "words": 0,
        "covered": False,
        "covered_share": None,
        "blocks_to_cover": None,
        "tokens_to_cover": None,
    }
    assert answer_coverage([], "Lisbon")["covered_share"] == 0.0


def test_answer_coverage_matching():
    # whole normalised tokens: "lisbonite" does not hold "lisbon"; punctuation is dropped on both sides
    assert not answer_coverage([("A Lisbonite.", [], 2)], "Lisbon")["covered"]
    assert answer_coverage([("We met at 3:30 PM.", [], 7)], "3:30 pm")["covered"]
    # plain 3-tuples and int answers work
    assert answer_coverage([("x", [], 1), ("in May 2023.", ["D2:1"], 4)], 2023)["tokens_to_cover"] == 5


def test_evidence_density_buckets():
    blocks = [
        Block("Alice went hiking.", ["D1:1"], 5),
        Block("She lives in Lisbon, Portugal.", ["D1:2"], 7),
        Block("Lisbon and Portugal and Alice", ["D1:3"], 6),
        Block("Nothing here", ["D1:4"], 2),
    ]
    # answer words {lisbon, portugal, alice}: blocks hold 1, 2, 3 and 0 of them
    assert evidence_density(blocks, "Lisbon Portugal Alice") == {"0": 0.25, "1": 0.25, "2": 0.25, "3+": 0.25}
    # distinct words: "Lisbon Lisbon Lisbon" holds 1; 4 content words in one block -> 3+
    dens = evidence_density([("Lisbon Lisbon Lisbon", [], 3), ("a b c d", [], 4)], "Lisbon b c d")
    assert dens == {"0": 0.0, "1": 0.5, "2": 0.0, "3+": 0.5}
    assert evidence_density(blocks, "Yes") == {"0": 1.0, "1": 0.0, "2": 0.0, "3+": 0.0}
    assert evidence_density([], "x") == {"0": None, "1": None, "2": None, "3+": None}


def test_mean():
    assert mean([]) is None and mean([None]) is None
    assert mean([True, False, None, 1]) == pytest.approx(2 / 3)


def test_aggregate_per_category_and_micro():
    rows = [
        {"category": 1, "r": 1.0},
        {"category": 1, "r": 0.0},
        {"category": 2, "r": 1.0},
        {"category": 5, "r": 0.0},
        {"category": 2, "r": None},
        {"category": 4, "r": 1.0},
        {"category": 3, "r": None},
        {"category": 4},
    ]
    agg = aggregate(rows, "r")
    assert list(agg) == ["1", "2", "3", "4", "5", "micro"]
    assert agg == {"1": 0.5, "2": 1.0, "3": None, "4": 1.0, "5": 0.0, "micro": pytest.approx(0.75)}
    # micro weighs questions (1, 0, 1, 1 -> 0.75), not categories ((0.5 + 1 + 1) / 3)
    assert agg["micro"] != pytest.approx((0.5 + 1 + 1) / 3)
    assert aggregate(rows, "r", (1, 5))["micro"] == pytest.approx(1 / 3)
    assert aggregate([{"category": 5, "r": 1.0}], "r")["micro"] is None
    # grouping by another field; micro still filters on "category": (1 + 0) / 2
    by_conv = [
        {"conv": 7, "category": 1, "r": 1.0},
        {"conv": 7, "category": 5, "r": 1.0},
        {"conv": 10, "category": 2, "r": 0.0},
        {"conv": 7, "r": 1.0},
    ]
    assert aggregate(by_conv, "r", by="conv") == {"7": 1.0, "10": 0.0, "micro": 0.5}
    by_memory = aggregate(
        [{"memory": "conv-30", "r": 1.0}, {"memory": "conv-26", "r": 0.0}], "r", by="memory"
    )
    assert list(by_memory.items()) == [("conv-26", 0.0), ("conv-30", 1.0), ("micro", None)]
    assert aggregate([], "r") == {"micro": None}
