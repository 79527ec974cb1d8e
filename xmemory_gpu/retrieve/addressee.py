"""Whether a query asks what the assistant said ("What did you recommend for ...?", "How did you
suggest ...?", "Remind me of your earlier list of ..."), so that retrieval keeps the assistant's
answers in their rank among the user's statements (``Stage1Config.users_first``) instead of after
them.

A request to the assistant ("Can you give me a summary ...?", "Could you explain ...?", "What are
your tips for ...?") asks for a new answer, not an earlier one, and does not count: the verb must be
past ("you recommended", "you gave", "you've listed") or follow "did you", or the query must name an
earlier answer of the assistant's ("what was your suggestion", "your earlier list"). The query may
have been rewritten for a role chat ("me" -> "the user": ``engine.people``), and its apostrophes may
be typographic ("you’ve")."""

from __future__ import annotations

import re

_SAID = (
    r"said|told|mentioned|recommended|suggested|gave|listed|provided|explained|shared|described|wrote|"
    r"proposed|advised|named|showed|shown|offered|came up with|pointed out|"
    r"walked (?:me|the user) through|taught"
)
_SAY = (
    r"say|tell|mention|recommend|suggest|give|list|provide|explain|share|describe|write|propose|advise|"
    r"name|show|offer|come up with|point out|walk (?:me|the user) through|teach"
)
_ANSWER = (
    r"suggestions?|recommendations?|advice|answers?|lists?|responses?|explanations?|examples?|tips?|"
    r"ideas?|steps|instructions|options"
)
ASKS_ASSISTANT = re.compile(
    rf"\bdid you (?:\w+ )?(?:{_SAY})\b"  # "What did you recommend", "did you once mention"
    rf"|\byou(?:['’]ve| have| had)? (?:\w+ )?(?:{_SAID})\b"  # "you recommended", "you've listed"
    rf"|\b(?:was|were) your (?:\w+ )?(?:{_ANSWER})\b"  # "what was your suggestion"
    rf"|\byour (?:earlier|previous|last|past|original|first) (?:\w+ )?(?:{_ANSWER})\b",  # "your last list"
    re.I,
)


def asks_what_assistant_said(query: str) -> bool:
    """Whether ``query`` asks about an earlier answer of the assistant's (see the module doc)."""
    return ASKS_ASSISTANT.search(query) is not None
