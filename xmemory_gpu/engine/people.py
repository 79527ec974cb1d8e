"""Who is speaking in a role chat, and who a first-person question is about.

An app sends ``{"role": "user" | "assistant"}`` turns for an opaque user id. The person behind role
``user`` is the memory's *subject*. The memory is written about the neutral subject, "the user"
("the user works as a nurse"): its statements, their embeddings and what a delete forgets do not
depend on a name. The subject's name (the ``user_name`` an app passes, else one the user gives: "my
name is Priya", "call me Sam", "Hi, I'm Priya", "Sam here") is a fact of its own, kept beside the
memory with the message that gave it, and applied when units are shown ("Priya works as a nurse").
A first-person question is asked about the subject ("Where do I work now?" -> "Where does the user
work now?"), and so is a question naming it ("Where does Priya work?").
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

NEUTRAL = "the user"
# chat roles under other frameworks' names: LangChain's human / ai, Gemini's model, OpenAI's developer
ROLE_ALIASES = {
    "user": "user",
    "human": "user",
    "assistant": "assistant",
    "ai": "assistant",
    "model": "assistant",
    "bot": "assistant",
    "developer": "system",
    "system": "system",
}
# words that follow "I'm" capitalised without being a name, though a names list has them
_NOT_NAMES = frozenset(
    """American British English Irish Scottish Welsh Canadian Australian French German Spanish Italian Portuguese Dutch
    Indian Chinese Japanese Korean Mexican Brazilian Nigerian Polish Russian Swedish Greek Turkish Jewish Muslim
    Christian Catholic Vegan Vegetarian Sorry Fine Good Great Back Here Home Done Ok Okay Not So Just Also Still Really
    Very Glad Happy Sure Tired Busy Excited Ready Free Single Married Lucky Sunny Well Alright Hungry Pregnant""".split()
)
_NAME = r"([A-Z][a-z]+)"
# forms that say it is a name: any capitalised word after them is taken
_EXPLICIT = [
    re.compile(r"(?i:\bmy name(?:'s| is))\s+" + _NAME + r"\b"),
    re.compile(r"(?i:\b(?:please\s+)?call me)\s+" + _NAME + r"\b"),
]
# introductions: the word must be a given name (a names list), "this is" only after a greeting
_GREETING = r"(?i:(?:hi|hello|hey)(?:\s+there)?[!,.]*\s+)"
_INTRODUCTIONS = [
    re.compile(
        r"^" + _GREETING + r"?(?i:i'm|i am)\s+" + _NAME + r"(?=\s*(?:[,.!]|$|\s+here\b|\s+by the way\b))"
    ),
    re.compile(r"^" + _GREETING + r"(?i:this is)\s+" + _NAME + r"(?=\s*(?:[,.!]|$|\s+here\b))"),
    re.compile(r"^" + _NAME + r" here\b"),
]


@lru_cache(maxsize=1)
def _given_names():
    """gender-guesser's detector over its list of about 61,000 given names (loaded once, about 0.6 s)."""
    from gender_guesser.detector import Detector

    return Detector(case_sensitive=False)


def is_given_name(word: str) -> bool:
    """Whether ``word`` is a given name in the names list and not a word that follows "I'm" as a state."""
    return word not in _NOT_NAMES and _given_names().get_gender(word) != "unknown"


@dataclass(frozen=True)
class NameClaim:
    """A name the user gives in one message; ``explicit``: said to be a name ("my name is", "call me")."""

    name: str
    explicit: bool


# capitalised words that follow "call me" without being a name
_NOT_CALLED = frozenset(
    """Monday Tuesday Wednesday Thursday Friday Saturday Sunday Tomorrow Tonight Today Later Back Anytime
    Maybe Sometime Soon Again""".split()
)


def name_claim(text: str) -> NameClaim | None:
    """The name a user gives for themself in ``text`` (the last one said), or None. "My name is X"
    and "call me X" name the user whatever X is; "I'm X", "Hi, this is X" and "X here" only when X
    is a given name ("I'm Hungry." and "This is Paris." name nobody)."""
    found = None
    for sentence in re.split(r"(?<=[.!?])\s+", text.strip().replace("\u2019", "'")):
        for pat in _EXPLICIT:
            for m in pat.finditer(sentence):
                if m.group(1) not in _NOT_CALLED:
                    found = NameClaim(m.group(1), True)
        if found is None or not found.explicit:
            for pat in _INTRODUCTIONS:
                m = pat.search(sentence)
                if m and is_given_name(m.group(1)):
                    found = NameClaim(m.group(1), False)
                    break
    return found


def introduced_name(text: str) -> str | None:
    """The name a user gives for themself in ``text``, or None (:func:`name_claim`)."""
    c = name_claim(text)
    return None if c is None else c.name


def replaces(new: NameClaim, old: NameClaim | None) -> bool:
    """Whether a later claim ``new`` replaces the name learned from ``old``: an explicit one always,
    an introduction unless the name was said explicitly."""
    return old is None or new.explicit or not old.explicit


_SUBJECT = re.compile(r"\b([Tt])he user\b")


def named(text: str, name: str | None) -> str:
    """``text`` with the neutral subject ("the user") read as the user's ``name`` (unchanged without one)."""
    return text if not name or "he user" not in text else _SUBJECT.sub(name, text)


def neutral(query: str, name: str | None) -> str:
    """``query`` with the user's ``name`` turned into the neutral subject the memory is written about."""
    return query if not name else re.sub(rf"\b{re.escape(name)}\b", NEUTRAL, query)


# question inversions first ("do I work" -> "does S work"), then the rest of the first person
_INVERTED = [
    (r"\bdo I\b", "does {s}"),
    (r"\bDo I\b", "Does {s}"),
    (r"\bam I\b", "is {s}"),
    (r"\bAm I\b", "Is {s}"),
    (r"\bhave I\b", "has {s}"),
    (r"\bHave I\b", "Has {s}"),
    (r"\b(did|was|can|could|will|would|should|shall|may|might|must) I\b", "\\1 {s}"),
    (r"\b(Did|Was|Can|Could|Will|Would|Should|Shall|May|Might|Must) I\b", "\\1 {s}"),
]
_FIRST = [
    (r"\bI'm\b", "{s} is"),
    (r"\bI am\b", "{s} is"),
    (r"\bI've\b", "{s} has"),
    (r"\bI'd\b", "{s} would"),
    (r"\bI'll\b", "{s} will"),
    (r"\bmyself\b", "{s}"),
    (r"\b[Mm]y\b", "{s}'s"),
    (r"\bmine\b", "{s}'s"),
    (r"\bme\b", "{s}"),
    (r"\bI\b", "{s}"),
]


def about_subject(query: str, subject: str) -> str:
    """``query`` with its first person turned into ``subject`` ("What is my dog's name?" -> "What is
    Priya's dog's name?"); a query without first person is returned unchanged."""
    q = query.replace("\u2019", "'")
    if not re.search(r"\b(?:I|I'm|I've|I'd|I'll|[Mm]y|me|mine|myself)\b", q):
        return query
    for pat, rep in _INVERTED + _FIRST:
        q = re.sub(pat, rep.format(s=subject), q)
    return q


__all__ = [
    "NEUTRAL",
    "ROLE_ALIASES",
    "NameClaim",
    "about_subject",
    "introduced_name",
    "is_given_name",
    "name_claim",
    "named",
    "neutral",
    "replaces",
]
