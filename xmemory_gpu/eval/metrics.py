"""QA answer metrics (DESIGN section 8), stdlib only: no tokenizer data is downloaded.

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
"""

from __future__ import annotations

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


def qa_scores(prediction: object, reference: object) -> dict[str, float]:
    """All QA metrics: ``f1_authors``, ``f1_squad``, ``exact_match``, ``bleu1``, ``rouge_l``."""
    return {
        "f1_authors": token_f1_authors(prediction, reference),
        "f1_squad": squad_f1(prediction, reference),
        "exact_match": exact_match(prediction, reference),
        "bleu1": bleu1(prediction, reference),
        "rouge_l": rouge_l(prediction, reference),
    }
