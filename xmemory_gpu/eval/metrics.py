"""QA answer metrics (DESIGN section 8), stdlib only: no tokenizer data is downloaded.

``token_f1_authors`` is the xMemory authors' F1: lower-case, ``. , ! ?`` to spaces, whitespace
split, F1 over word SETS. ``squad_f1`` / ``exact_match`` are SQuAD v1.1's (articles and
punctuation removed, token multisets). ``bleu1``: unigram BLEU with brevity penalty and
NLTK-method-1-style smoothing (0 clipped matches count as 0.1). ``rouge_l``: LCS F1 (beta = 1).
BLEU-1 and ROUGE-L use SQuAD-normalised tokens. LoCoMo answers may be numbers: ``str()`` first.
"""

from __future__ import annotations

import math
import re
import string
from collections import Counter

_PUNCT = set(string.punctuation)


def normalize_answer(text: object) -> str:
    """SQuAD v1.1 normalisation: lower-case, drop punctuation and articles, squeeze spaces."""
    s = str(text).lower()
    s = "".join(ch for ch in s if ch not in _PUNCT)
    s = re.sub(r"\b(a|an|the)\b", " ", s)
    return " ".join(s.split())


def tokens(text: object) -> list[str]:
    return normalize_answer(text).split()


def token_f1_authors(prediction: object, reference: object) -> float:
    def bag(t: object) -> set[str]:
        s = str(t).lower()
        for ch in ".,!?":
            s = s.replace(ch, " ")
        return set(s.split())

    p, r = bag(prediction), bag(reference)
    if not p and not r:
        return 1.0
    common = len(p & r)
    if not p or not r or common == 0:
        return 0.0
    prec, rec = common / len(p), common / len(r)
    return 2 * prec * rec / (prec + rec)


def squad_f1(prediction: object, reference: object) -> float:
    p, r = tokens(prediction), tokens(reference)
    if not p and not r:
        return 1.0
    common = sum((Counter(p) & Counter(r)).values())
    if common == 0:
        return 0.0
    prec, rec = common / len(p), common / len(r)
    return 2 * prec * rec / (prec + rec)


def exact_match(prediction: object, reference: object) -> float:
    return float(normalize_answer(prediction) == normalize_answer(reference))


def bleu1(prediction: object, reference: object) -> float:
    p, r = tokens(prediction), tokens(reference)
    if not p or not r:
        return 0.0
    clipped = sum((Counter(p) & Counter(r)).values())
    precision = (clipped if clipped else 0.1) / len(p)
    bp = 1.0 if len(p) > len(r) else math.exp(1 - len(r) / len(p))
    return bp * precision


def _lcs(a: list[str], b: list[str]) -> int:
    prev = [0] * (len(b) + 1)
    for x in a:
        cur = [0]
        for j, y in enumerate(b):
            cur.append(prev[j] + 1 if x == y else max(prev[j + 1], cur[j]))
        prev = cur
    return prev[-1]


def rouge_l(prediction: object, reference: object) -> float:
    p, r = tokens(prediction), tokens(reference)
    if not p or not r:
        return 0.0
    lcs = _lcs(p, r)
    if lcs == 0:
        return 0.0
    prec, rec = lcs / len(p), lcs / len(r)
    return 2 * prec * rec / (prec + rec)


def qa_scores(prediction: object, reference: object) -> dict[str, float]:
    return {
        "f1_authors": token_f1_authors(prediction, reference),
        "f1_squad": squad_f1(prediction, reference),
        "exact_match": exact_match(prediction, reference),
        "bleu1": bleu1(prediction, reference),
        "rouge_l": rouge_l(prediction, reference),
    }
