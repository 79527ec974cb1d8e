"""QA answer metrics, stdlib only: no tokenizer data is downloaded.

Every metric is ``(prediction, reference) -> float`` in [0, 1]. LoCoMo references may be ints or
other non-strings: they are coerced with ``str()`` (``None`` becomes ``""``).

* ``token_f1_authors``: the xMemory authors' F1: lower-case, each of ``. , ! ?`` replaced by a
  space, whitespace split, F1 over word SETS (1.0 when both sides are empty, 0.0 when one is).
* ``squad_f1`` / ``exact_match``: SQuAD v1.1's official ``f1_score`` / ``exact_match_score``
  (punctuation and the articles a/an/the removed, F1 over token multisets). As in the official
  script, F1 is 0.0 when there is no common token, including when both sides normalise to empty.
* ``bleu1``: unigram BLEU on SQuAD-normalised tokens: ``BP * p1`` with ``p1`` the clipped unigram
  precision and ``BP = 1 if c > r else exp(1 - r / c)`` (NLTK's brevity penalty). Smoothing as in
  NLTK's ``SmoothingFunction().method1`` (epsilon 0.1): 0 clipped matches count as 0.1, i.e.
  ``p1 = 0.1 / c``. (NLTK's ``sentence_bleu`` itself short-circuits to 0 when no unigram
  matches; we apply the epsilon instead, so a miss scores ``BP * 0.1 / c``, not 0.)
* ``rouge_l``: ROUGE-L F-measure with beta = 1: F1 of LCS precision (LCS / c) and recall (LCS / r)
  on the same tokens.

BLEU-1 and ROUGE-L are 0.0 when either side has no token (c, r: prediction, reference lengths).

The paper's and LoCoMo's own metrics (need ``nltk``, imported on first use):

* ``bleu1_authors``: the xMemory authors' BLEU-1 (``evaluation/locomo/metrics/utils.py``): NLTK
  ``sentence_bleu([ref], pred, weights=(1, 0, 0, 0), smoothing_function=SmoothingFunction().method1)``
  over lower-cased tokens, 0.0 on an exception as theirs. They tokenize with ``nltk.word_tokenize``,
  which needs the punkt sentence model (not downloadable here); we apply the same word tokenizer
  (``NLTKWordTokenizer``, NLTK's improved Treebank tokenizer) to the whole text without the sentence
  split, so a period inside a multi-sentence answer stays on its word (``"paris."``), which
  ``word_tokenize`` would split off; single-sentence answers tokenize identically. NLTK keeps
  punctuation, articles and clitics (``'s``) as tokens and scores 0 when no unigram matches.
* ``locomo_f1``: LoCoMo's official QA score (snap-research/locomo ``task_eval/evaluation.py``,
  ``eval_question_answering``): answers normalised by deleting commas, lower-casing, removing
  punctuation and the words a / an / the / and, Porter-stemmed, F1 over token multisets (0 with no
  common token); category 3 golds cut at the first ``;``; category 1 multi-answer F1 (prediction
  and gold split on commas; the mean over gold parts of the best prediction part); category 5
  scores 1 when the prediction says "no information available" or "not mentioned", else 0;
  categories 2 and 4 (and an unknown or missing category) the plain F1.
"""

from __future__ import annotations

import functools
import math
import re
import string
from collections import Counter

__all__ = [
    "normalize_answer",
    "tokens",
    "token_f1_authors",
    "squad_f1",
    "exact_match",
    "bleu1",
    "rouge_l",
    "qa_scores",
    "bleu1_authors",
    "locomo_f1",
    "locomo_f1_score",
    "METRIC_DEFINITIONS",
]

_PUNCT = frozenset(string.punctuation)
_ARTICLES = re.compile(r"\b(a|an|the)\b")
_AUTHORS_PUNCT = str.maketrans({c: " " for c in ".,!?"})
BLEU_EPSILON = 0.1


def _text(x: object) -> str:
    return "" if x is None else str(x)


def normalize_answer(text: object) -> str:
    """SQuAD v1.1 normalisation: lower-case, drop punctuation, drop articles, squeeze whitespace."""
    s = _text(text).lower()
    s = "".join(ch for ch in s if ch not in _PUNCT)
    s = _ARTICLES.sub(" ", s)
    return " ".join(s.split())


def tokens(text: object) -> list[str]:
    """SQuAD-normalised whitespace tokens (numbers stay strings)."""
    return normalize_answer(text).split()


def _f1(common: int, n_pred: int, n_ref: int) -> float:
    if common == 0:
        return 0.0
    precision, recall = common / n_pred, common / n_ref
    return 2 * precision * recall / (precision + recall)


def _authors_words(text: object) -> set[str]:
    return set(_text(text).lower().translate(_AUTHORS_PUNCT).split())


def token_f1_authors(prediction: object, reference: object) -> float:
    """The xMemory authors' token F1 over word sets (lower-case, ``.,!?`` -> space, split)."""
    p, r = _authors_words(prediction), _authors_words(reference)
    if not p and not r:
        return 1.0
    if not p or not r:
        return 0.0
    return _f1(len(p & r), len(p), len(r))


def squad_f1(prediction: object, reference: object) -> float:
    """SQuAD v1.1 official token F1 over normalised token multisets."""
    p, r = tokens(prediction), tokens(reference)
    return _f1(sum((Counter(p) & Counter(r)).values()), len(p), len(r))


def exact_match(prediction: object, reference: object) -> float:
    """1.0 when the SQuAD-normalised strings are equal, else 0.0."""
    return float(normalize_answer(prediction) == normalize_answer(reference))


def bleu1(prediction: object, reference: object) -> float:
    """Unigram BLEU with brevity penalty and method1-style smoothing (see module docstring)."""
    p, r = tokens(prediction), tokens(reference)
    if not p or not r:
        return 0.0
    clipped = sum((Counter(p) & Counter(r)).values())
    precision = (clipped if clipped else BLEU_EPSILON) / len(p)
    bp = 1.0 if len(p) > len(r) else math.exp(1 - len(r) / len(p))
    return bp * precision


def _lcs(a: list[str], b: list[str]) -> int:
    """Length of the longest common subsequence (O(len(a) * len(b)) time, O(len(b)) memory)."""
    prev = [0] * (len(b) + 1)
    for x in a:
        cur = [0]
        for j, y in enumerate(b):
            cur.append(prev[j] + 1 if x == y else max(prev[j + 1], cur[j]))
        prev = cur
    return prev[-1]


def rouge_l(prediction: object, reference: object) -> float:
    """ROUGE-L F1 (beta = 1) of LCS precision and recall over SQuAD-normalised tokens."""
    p, r = tokens(prediction), tokens(reference)
    if not p or not r:
        return 0.0
    return _f1(_lcs(p, r), len(p), len(r))


_LOCOMO_ARTICLES = re.compile(r"\b(a|an|the|and)\b")
_LOCOMO_ABSTAIN = ("no information available", "not mentioned")


@functools.lru_cache(maxsize=1)
def _nltk():
    from nltk.stem import PorterStemmer
    from nltk.tokenize import NLTKWordTokenizer
    from nltk.translate.bleu_score import SmoothingFunction, sentence_bleu

    return PorterStemmer(), NLTKWordTokenizer(), SmoothingFunction().method1, sentence_bleu


def bleu1_authors(prediction: object, reference: object) -> float:
    """The authors' NLTK BLEU-1 (see the module doc for the tokenizer note)."""
    _, tok, smooth, sentence_bleu = _nltk()
    pred = tok.tokenize(_text(prediction).lower())
    ref = [tok.tokenize(_text(reference).lower())]
    try:
        return float(sentence_bleu(ref, pred, weights=(1, 0, 0, 0), smoothing_function=smooth))
    except Exception:  # the authors' code scores 0.0 on any error
        return 0.0


def _locomo_normalize(text: str) -> str:
    s = text.replace(",", "").lower()
    s = "".join(ch for ch in s if ch not in _PUNCT)
    return " ".join(_LOCOMO_ARTICLES.sub(" ", s).split())


def locomo_f1_score(prediction: object, reference: object) -> float:
    """LoCoMo's ``f1_score``: Porter-stemmed token-multiset F1 after LoCoMo's normalisation."""
    stem = _nltk()[0].stem
    p = [stem(w) for w in _locomo_normalize(_text(prediction)).split()]
    r = [stem(w) for w in _locomo_normalize(_text(reference)).split()]
    common = sum((Counter(p) & Counter(r)).values())
    if common == 0:
        return 0.0
    return _f1(common, len(p), len(r))


def locomo_f1(prediction: object, reference: object, category: int | None = None) -> float:
    """LoCoMo's official per-question QA score with its category rules (see the module doc)."""
    pred, ref = _text(prediction), _text(reference)
    cat = int(category) if category is not None else None
    if cat == 3:
        ref = ref.split(";")[0].strip()
    if cat == 1:
        preds = [x.strip() for x in pred.split(",")]
        golds = [x.strip() for x in ref.split(",")]
        return float(sum(max(locomo_f1_score(p, g) for p in preds) for g in golds) / len(golds))
    if cat == 5:
        low = pred.lower()
        return 1.0 if any(a in low for a in _LOCOMO_ABSTAIN) else 0.0
    return locomo_f1_score(pred, ref)


METRIC_DEFINITIONS: dict[str, str] = {
    "f1_authors": "xMemory authors' token F1: lower-case, '. , ! ?' -> space, whitespace split, F1 over word sets",
    "f1_squad": "SQuAD v1.1 official F1: lower-case, punctuation and a/an/the removed, F1 over token multisets",
    "exact_match": "SQuAD v1.1 official exact match after the same normalisation",
    "bleu1": "unigram BLEU on SQuAD-normalised tokens with NLTK's brevity penalty and method1 epsilon 0.1 "
    "applied to a miss (not NLTK's 0)",
    "bleu1_authors": "xMemory authors' BLEU-1: NLTK sentence_bleu, weights (1,0,0,0), SmoothingFunction().method1, "
    "lower-cased NLTKWordTokenizer tokens (word_tokenize without punkt's sentence split)",
    "rouge_l": "ROUGE-L F1 (beta 1) of LCS precision and recall on SQuAD-normalised tokens",
    "locomo_f1": "LoCoMo official (snap-research/locomo task_eval/evaluation.py): commas deleted, punctuation and "
    "a/an/the/and removed, Porter stems, multiset F1; cat 1 comma-split multi-answer F1; cat 3 gold "
    "cut at ';'; cat 5 1 if 'no information available' or 'not mentioned' in the answer",
    "tokens_per_query": "reader tokens per question: retrieval probes + answer prompt + output",
}


def qa_scores(prediction: object, reference: object, category: int | None = None) -> dict[str, float]:
    """All QA metrics: ``f1_authors``, ``f1_squad``, ``exact_match``, ``bleu1``, ``bleu1_authors``,
    ``rouge_l`` and ``locomo_f1`` (which uses the LoCoMo ``category`` when given)."""
    return {
        "f1_authors": token_f1_authors(prediction, reference),
        "f1_squad": squad_f1(prediction, reference),
        "exact_match": exact_match(prediction, reference),
        "bleu1": bleu1(prediction, reference),
        "bleu1_authors": bleu1_authors(prediction, reference),
        "rouge_l": rouge_l(prediction, reference),
        "locomo_f1": locomo_f1(prediction, reference, category),
    }
