"""The answer prompt (LoCoMo-style short answers) over an answer context whose relative times are
already resolved against each unit's date (``context.answer_context``)."""

from __future__ import annotations

ANSWER_PROMPT = (
    "Below are memories retrieved from a long conversation, each with the date it was said. Answer the question "
    "with a short phrase, using exact words from the memories where possible. For a question about time, answer "
    "with a date worked out from the memory's date; relative times are followed by their dates in parentheses."
    "\n\n{context}\n\nQuestion: {question}\nShort answer:"
)


def answer_prompt(reader, question: str, context: str) -> str:
    """The LoCoMo-style short-answer prompt in the reader's chat format; ``context`` from
    ``answer_context`` (dates resolved)."""
    return reader.chat(ANSWER_PROMPT.format(context=context or "(no memories)", question=question))
