"""Who is speaking in a role chat, and who a first-person question is about.

An app sends ``{"role": "user" | "assistant"}`` turns for an opaque user id. The person behind role
``user`` is the memory's *subject*: the name the app passes (``user_name``), else a name the user
gives ("I'm Priya", "my name is Priya", "call me Sam", "Sam here"), else the neutral "the user".
Statements are written about the subject ("Priya works as a nurse"), and a first-person question is
asked about it ("Where do I work now?" -> "Where does Priya work now?"), so the two phrasings
retrieve the same statements.
"""

from __future__ import annotations

import re

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
# words that follow "I'm" capitalised without being a name
_NOT_NAMES = frozenset(
    """American British English Irish Scottish Welsh Canadian Australian French German Spanish Italian Portuguese Dutch
    Indian Chinese Japanese Korean Mexican Brazilian Nigerian Polish Russian Swedish Greek Turkish Jewish Muslim
    Christian Catholic Vegan Vegetarian Sorry Fine Good Great Back Here Home Done Ok Okay Not So Just Also Still Really
    Very Glad Happy Sure Tired Busy Excited""".split()
)
_INTRO = [
    re.compile(r"(?i:\bmy name(?:'s| is))\s+([A-Z][a-z]+)\b"),
    re.compile(r"(?i:\b(?:please\s+)?call me)\s+([A-Z][a-z]+)\b"),
    re.compile(
        r"^(?i:(?:hi|hello|hey)[!,.]*\s+)?(?i:i'm|i am|this is)\s+([A-Z][a-z]+)(?=\s*(?:[,.!]|$|\s+here\b))"
    ),
    re.compile(r"^([A-Z][a-z]+) here\b"),
]


def introduced_name(text: str) -> str | None:
    """The name a user gives for themself in ``text``, or None."""
    for sentence in re.split(r"(?<=[.!?])\s+", text.strip().replace("\u2019", "'")):
        for pat in _INTRO:
            m = pat.search(sentence)
            if m and m.group(1) not in _NOT_NAMES:
                return m.group(1)
    return None


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


__all__ = ["NEUTRAL", "ROLE_ALIASES", "about_subject", "introduced_name"]
