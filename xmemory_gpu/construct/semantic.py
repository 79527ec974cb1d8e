"""LLM-free semantic extraction: decouple messages into self-contained factual statements.

Each message is split into sentences (and lines); questions and filler (fewer than ``min_words`` words or
fewer than two content words) are dropped; first- and second-person references are rewritten to
the speakers' names so a statement reads on its own ("I adopted a puppy" said by Alice ->
"Alice adopted a puppy"); a shared photo becomes "Alice shared a photo of ...". A message keeps at most ``max_per_message`` statements, its most
specific sentences (``specificity``), each cut to ``max_statement_words`` words. Near-duplicate
statements (cosine above ``dedup_threshold``) are merged, keeping every source.
"""

from __future__ import annotations

import re

import numpy as np

from ..config import SemanticConfig
from ..memory.records import Conversation, Episode, SemanticNode
from ..text import content_words, words

_SENT_SPLIT = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'])")
_PHOTO = re.compile(r"\s*\[shares a photo: (?P<cap>[^\]]*)\]\s*$")

# first person -> speaker; fixed forms first (they carry their own verb)
_FIRST_FIXED = [
    (r"\bI'm\b", "{s} is"), (r"\bI am\b", "{s} is"), (r"\bI've\b", "{s} has"), (r"\bI have\b", "{s} has"),
    (r"\bI'd\b", "{s} would"), (r"\bI'll\b", "{s} will"), (r"\bI was\b", "{s} was"),
    (r"\bmyself\b", "{s}"), (r"\b[Mm]y\b", "{s}'s"), (r"\bmine\b", "{s}'s"), (r"\bme\b", "{s}"),
]
_SECOND_FIXED = [
    (r"\byou're\b", "{o} is"), (r"\bYou're\b", "{o} is"), (r"\byou've\b", "{o} has"), (r"\bYou've\b", "{o} has"),
    (r"\byourself\b", "{o}"), (r"\b[Yy]our\b", "{o}'s"), (r"\byours\b", "{o}'s"),
]
_NO_S = frozenset(
    """can could will would should might must may did was had went got made saw took gave came began
    just also really always never still finally recently already actually used only even""".split()
)
_ADVERBS = frozenset("just also really always never still finally recently already actually usually often".split())
_FIRST_VERB = re.compile(r"\bI((?:\s+(?:" + "|".join(sorted(_ADVERBS)) + r"))*\s+[a-z]+)\b")
_IRREGULAR = {"have": "has", "do": "does", "go": "goes", "am": "is", "are": "is"}


def _third_person(verb: str) -> str:
    low = verb.lower()
    if low in _IRREGULAR:
        return _IRREGULAR[low]
    if low in _NO_S or low.endswith("ed") or low.endswith("s"):
        return verb
    if re.search(r"(ch|sh|x|o|z)$", low):
        return verb + "es"
    if re.search(r"[^aeiou]y$", low):
        return verb[:-1] + "ies"
    return verb + "s"


def _subject_verb(match: re.Match, name: str) -> str:
    toks = match.group(1).split()
    # "I really love" -> "Alice really loves": conjugate the first non-adverb
    for j, t in enumerate(toks):
        if t.lower() not in _ADVERBS:
            toks[j] = _third_person(t)
            break
    return f"{name} {' '.join(toks)}"


def decouple(sentence: str, speaker: str, other: str) -> str:
    """Rewrite first/second person to the speakers' names (a light, rule-based decoupling)."""
    s = sentence
    for pat, rep in _FIRST_FIXED:
        s = re.sub(pat, rep.format(s=speaker), s)
    s = _FIRST_VERB.sub(lambda m: _subject_verb(m, speaker), s)
    s = re.sub(r"\bI\b", speaker, s)
    for pat, rep in _SECOND_FIXED:
        s = re.sub(pat, rep.format(o=other), s)
    s = re.sub(r"\b[Yy]ou\b", other, s)
    if speaker not in s and other not in s:
        s = f"{speaker} said: {s}"
    return s.strip()


# Reactions and pleasantries: content words that state no fact ("Haha, that's so true.").
REACTION_WORDS = frozenset(
    "haha hahaha lol omg wow yeah yes yep nope okay ok oh hey hi hello bye thanks thank great nice cool awesome amazing "
    "wonderful fantastic lovely true totally agree agreed sounds sound fun hear glad happy appreciate really care soon "
    "talk tell more same busy week good well been doing exactly absolutely definitely sure".split()
)


def is_filler(sentence: str, cfg: SemanticConfig) -> bool:
    """Questions, very short sentences, and reactions with fewer than two fact-bearing words."""
    return (
        sentence.rstrip().endswith("?")
        or len(words(sentence)) < cfg.min_words
        or len([w for w in content_words(sentence) if w not in REACTION_WORDS]) < 2
    )


_NUMBER = re.compile(r"\d")
_NAME = re.compile(r"(?<!^)(?<![.!?]\s)\b[A-Z][a-z]+")


def specificity(sentence: str) -> float:
    """How much checkable fact a sentence carries, from the sentence alone: its distinct content
    words (reactions excluded), plus one for each distinct capitalised word inside it (names,
    places, titles) and one for each distinct number (dates, amounts) -- the words questions ask
    about. Per sentence, so the bulk build and the live engine rank a message's sentences alike."""
    cw = {w for w in content_words(sentence) if w not in REACTION_WORDS}
    names = set(_NAME.findall(sentence))
    numbers = {w for w in words(sentence) if _NUMBER.search(w)}
    return len(cw) + len(names) + len(numbers)


def most_specific(sentences: list[str], cap: int) -> list[str]:
    """The ``cap`` most specific sentences (ties: the earlier), in their original order; all when
    ``cap`` is 0 or not exceeded. A long assistant answer keeps its few densest sentences instead of
    one node per sentence (its full text stays in the episode and the message)."""
    if cap <= 0 or len(sentences) <= cap:
        return sentences
    ranked = sorted(range(len(sentences)), key=lambda i: (-specificity(sentences[i]), i))[:cap]
    return [sentences[i] for i in sorted(ranked)]


def _cut(sentence: str, max_words: int) -> str:
    ws = sentence.split()
    return sentence if len(ws) <= max_words else " ".join(ws[:max_words]) + " ..."


def extract_statements(conv: Conversation, episodes: list[Episode], cfg: SemanticConfig) -> list[SemanticNode]:
    """Statements of one conversation (before de-duplication), ids in order of appearance."""
    ep_of = {mid: ep.id for ep in episodes for mid in ep.message_ids}
    a, b = conv.speakers
    nodes: list[SemanticNode] = []
    for m in conv.messages:
        other = b if m.speaker == a else a
        text = m.text
        photo = _PHOTO.search(text)
        if photo:
            text = text[: photo.start()]
        sentences = [s.strip() for p in text.split("\n") for s in _SENT_SPLIT.split(p) if s.strip()]
        has_cap = bool(photo and photo.group("cap").strip())
        cands = [s for s in sentences if not is_filler(s, cfg)]
        n_max = cfg.max_per_message
        kept = most_specific(cands, n_max - has_cap) if n_max - has_cap > 0 else ([] if n_max else cands)  # the caption counts
        out = [decouple(_cut(s, cfg.max_statement_words), m.speaker, other) for s in kept]
        if has_cap:
            caption = re.sub(r"^(a )?(photo|picture|image) of ", "", photo.group("cap").strip())
            out.append(f"{m.speaker} shared a photo of {caption}")
        for s in out:
            nodes.append(SemanticNode(id=len(nodes), text=s, episode_ids=[ep_of[m.id]], message_ids=[m.id], timestamp=m.timestamp))
    return nodes


def merge_duplicates(nodes: list[SemanticNode], x: np.ndarray, threshold: float) -> tuple[list[SemanticNode], np.ndarray]:
    """Merge statements whose cosine exceeds ``threshold`` into the earliest one, keeping all sources.

    x: [n, d] float32 unit rows. Returns the kept nodes (re-numbered) and their rows of x.
    """
    n = len(nodes)
    if n == 0:
        return [], x[:0]
    sims = x @ x.T
    keep_of = np.arange(n)
    kept: list[int] = []
    for i in range(n):
        if kept:
            prior = np.asarray(kept)
            j = int(prior[np.argmax(sims[i, prior])])
            if sims[i, j] > threshold:
                keep_of[i] = j
                continue
        kept.append(i)
    out: list[SemanticNode] = []
    for new_id, i in enumerate(kept):
        node = nodes[i]
        dup = np.flatnonzero(keep_of == i)
        mids = list(dict.fromkeys(mid for j in dup for mid in nodes[j].message_ids))
        eids = sorted({e for j in dup for e in nodes[j].episode_ids})
        out.append(SemanticNode(id=new_id, text=node.text, episode_ids=eids, message_ids=mids, timestamp=node.timestamp))
    return out, x[np.asarray(kept)]
