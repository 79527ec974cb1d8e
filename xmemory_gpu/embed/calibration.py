"""A fixed calibration corpus for the int8 OpenVINO embedder: texts shaped like what the embedder
sees (chat messages with the speaker, third-person statements, questions, long assistant answers),
generated from templates by a seeded generator (Python's ``random``), so the quantised model does
not depend on any user's data. No dataset text is shipped. The corpus's digest is part of the int8
model's cache key."""

from __future__ import annotations

import hashlib
import random

NAMES = ("Caroline", "Melanie", "Jon", "Gina", "Priya", "Tomás", "Aiko", "Deborah", "Sam", "Olu")
PLACES = (
    "the library",
    "a support group",
    "the beach",
    "Paris",
    "the pottery class",
    "a charity race",
    "the farmers market",
    "my sister's wedding",
    "the hospital",
    "a job interview",
    "the museum",
)
THINGS = (
    "a painting",
    "a new guitar",
    "my dog",
    "the kids",
    "a book about counseling",
    "a photo of the sunset",
    "a recipe for lemon chicken",
    "an adoption agency",
    "a camping trip",
    "a dance studio",
    "running shoes",
)
FEELINGS = ("so happy", "really nervous", "grateful", "exhausted but proud", "a bit lost", "inspired", "calm")
WHEN = ("yesterday", "last week", "on Saturday", "two days ago", "this morning", "last summer", "in May 2023")
OPENERS = ("Hey", "Wow", "Oh nice", "Thanks", "Honestly", "Guess what", "Haha", "Sorry")
TOPICS = (
    "sleep",
    "budgeting",
    "a job search",
    "learning Spanish",
    "training for a marathon",
    "moving house",
    "a garden",
    "a sourdough starter",
    "a birthday party",
    "a research project",
)
ADVICE = (
    "Start small and keep a short daily routine that you can sustain for several weeks.",
    "Write down what you tried, what changed and how you felt, so the pattern becomes visible.",
    "Ask the people around you for concrete help, and say exactly what would make a difference.",
    "Compare a few options side by side on cost, time and effort before you commit to one of them.",
    "If something does not work after a fair attempt, change one thing at a time and try again.",
    "Plan the week on Sunday evening, leave buffers, and protect the hours that matter most.",
)


def _message(rng: random.Random) -> str:
    a, b = rng.sample(NAMES, 2)
    parts = [
        f"{rng.choice(OPENERS)} {b}!",
        f"I went to {rng.choice(PLACES)} {rng.choice(WHEN)} and felt {rng.choice(FEELINGS)}.",
        f"I got {rng.choice(THINGS)} for the trip.",
        f"What have you been up to with {rng.choice(THINGS)}?",
        f"[shares {rng.choice(THINGS)}]",
        f"It reminded me of {rng.choice(PLACES)}.",
    ]
    return f"{a}: " + " ".join(rng.sample(parts, rng.randint(1, len(parts))))


def _statement(rng: random.Random) -> str:
    a = rng.choice(NAMES)
    return rng.choice(
        (
            f"{a} went to {rng.choice(PLACES)} {rng.choice(WHEN)}.",
            f"{a} said: I feel {rng.choice(FEELINGS)}!",
            f"{a} bought {rng.choice(THINGS)}.",
            f"{a} is interested in {rng.choice(TOPICS)}.",
            f"{a} shared a photo of {rng.choice(THINGS)}",
        )
    )


def _question(rng: random.Random) -> str:
    a = rng.choice(NAMES)
    return rng.choice(
        (
            f"When did {a} go to {rng.choice(PLACES)}?",
            f"What did {a} buy?",
            f"How does {a} feel about {rng.choice(TOPICS)}?",
            f"What advice did the assistant give about {rng.choice(TOPICS)}?",
        )
    )


def _answer(rng: random.Random) -> str:
    sentences = [f"Here is a plan for {rng.choice(TOPICS)}."] + [
        rng.choice(ADVICE) for _ in range(rng.randint(2, 14))
    ]
    return "Assistant: " + " ".join(sentences)


def calibration_texts(n: int = 600, seed: int = 0) -> list[str]:
    """``n`` texts: 40% messages, 30% statements, 10% questions, 20% long answers (up to ~250 words)."""
    rng = random.Random(seed)
    makers = (_message,) * 4 + (_statement,) * 3 + (_question,) + (_answer,) * 2
    return [makers[i % len(makers)](rng) for i in range(n)]


def corpus_digest(texts: list[str]) -> str:
    return hashlib.sha256("\0".join(texts).encode()).hexdigest()[:16]
