"""A seeded generator of multi-session conversations in LoCoMo's JSON format, with QA and evidence.

Two speakers share persona facts (job, city, pet, hobby, family, plans) across sessions, among
small talk; some facts change later (a move, a new job) so temporal questions have one right
answer. Every question's ``evidence`` lists the ``dia_id`` of the turns that state its answer.
Used for the quickstart, tests and scale benchmarks (thousands of conversations in seconds).
"""

from __future__ import annotations

import json
import random
from datetime import datetime, timedelta
from pathlib import Path

NAMES = [
    "Alice",
    "Bob",
    "Carmen",
    "Deepak",
    "Elena",
    "Farid",
    "Grace",
    "Hiro",
    "Ines",
    "Jonas",
    "Kemi",
    "Liam",
    "Maya",
    "Nikos",
    "Olga",
    "Pavel",
    "Quinn",
    "Rosa",
    "Sami",
    "Tara",
]
JOBS = [
    "nurse",
    "software engineer",
    "teacher",
    "chef",
    "architect",
    "photographer",
    "pharmacist",
    "carpenter",
    "journalist",
    "veterinarian",
    "accountant",
    "pilot",
]
CITIES = [
    "Boston",
    "Lisbon",
    "Denver",
    "Osaka",
    "Toronto",
    "Nairobi",
    "Prague",
    "Austin",
    "Dublin",
    "Seattle",
]
PETS = [
    ("dog", "Max"),
    ("cat", "Luna"),
    ("parrot", "Kiwi"),
    ("rabbit", "Clover"),
    ("dog", "Biscuit"),
    ("cat", "Miso"),
]
HOBBIES = [
    "rock climbing",
    "pottery",
    "playing the cello",
    "marathon running",
    "bird watching",
    "painting",
    "baking sourdough",
    "chess",
    "gardening",
    "salsa dancing",
]
FAMILY = ["two kids", "a younger brother", "a twin sister", "three nieces", "a grandmother who lives nearby"]
EVENTS = [
    "a pottery class",
    "a half marathon",
    "a trip to Iceland",
    "a job interview",
    "a cooking workshop",
    "a family reunion",
    "a photography exhibition",
    "a charity concert",
]
FILLER = [
    "Hey! Good to hear from you, how have you been?",
    "Haha, that's so true.",
    "Wow, that sounds amazing!",
    "Thanks, I really appreciate it.",
    "Oh nice, tell me more!",
    "Same here, it's been a busy week.",
    "Totally agree with you.",
    "That's great to hear.",
    "Sounds like fun!",
    "Take care, talk soon!",
]

Fact = tuple[str, str, str]  # (kind, statement template with {s}, answer)


def _persona(rng: random.Random) -> dict:
    pet = rng.choice(PETS)
    return {
        "job": rng.choice(JOBS),
        "city": rng.choice(CITIES),
        "pet": pet,
        "hobby": rng.choice(HOBBIES),
        "family": rng.choice(FAMILY),
        "event": rng.choice(EVENTS),
        "new_city": rng.choice(CITIES),
        "new_job": rng.choice(JOBS),
    }


def _fmt(dt: datetime) -> str:
    hour = dt.hour % 12 or 12
    return (
        f"{hour}:{dt.minute:02d} {'am' if dt.hour < 12 else 'pm'} on {dt.day} {dt.strftime('%B')}, {dt.year}"
    )


def _date_words(dt: datetime) -> str:
    return f"{dt.day} {dt.strftime('%B')} {dt.year}"


def generate_conversations(
    n: int,
    *,
    seed: int = 0,
    sessions: tuple[int, int] = (3, 6),
    turns_per_session: tuple[int, int] = (8, 16),
    start: str = "2023-01-01",
) -> list[dict]:
    """``n`` conversations as LoCoMo-format dicts (``sample_id`` ``synth-<seed>-<i>``)."""
    rng = random.Random(seed)
    t0 = datetime.fromisoformat(start)
    out = []
    for i in range(n):
        a = "Alice" if i % 3 == 0 else rng.choice(NAMES)
        b = rng.choice([x for x in NAMES if x != a])
        out.append(
            _conversation(
                rng,
                f"synth-{seed}-{i}",
                a,
                b,
                t0 + timedelta(days=rng.randint(0, 300)),
                sessions,
                turns_per_session,
            )
        )
    return out


def _conversation(rng, sid, a, b, when, sessions, turns_per_session) -> dict:
    personas = {a: _persona(rng), b: _persona(rng)}
    n_sess = rng.randint(*sessions)
    # facts each speaker will state, in order; the move and new job come in the conversation's final part
    agenda: dict[str, list[tuple[str, str]]] = {}
    for sp, p in personas.items():
        kind, name = p["pet"]
        agenda[sp] = [
            ("job", f"I work as a {p['job']} these days."),
            ("city", f"I live in {p['city']} now, it is a lovely place."),
            ("pet", f"My {kind} {name} has been keeping me busy lately."),
            ("hobby", f"I have been really into {p['hobby']} recently."),
            ("family", f"I have {p['family']}, so weekends are lively."),
            ("event", f"I signed up for {p['event']} next month, I am excited."),
        ]
        rng.shuffle(agenda[sp])
    conv: dict = {"speaker_a": a, "speaker_b": b}
    stated: dict[tuple[str, str], tuple[str, datetime]] = {}  # (speaker, kind) -> (dia_id, when)
    changes: dict[tuple[str, str], tuple[str, datetime]] = {}
    for s in range(1, n_sess + 1):
        when = when + timedelta(days=rng.randint(3, 40), hours=rng.randint(0, 10), minutes=rng.randint(0, 59))
        conv[f"session_{s}_date_time"] = _fmt(when)
        turns = []
        n_turns = rng.randint(*turns_per_session)
        for t in range(n_turns):
            sp = a if t % 2 == 0 else b
            dia = f"D{s}:{t + 1}"
            last = s == n_sess and n_sess > 1
            if last and (sp, "move") not in changes and rng.random() < 0.5:
                p = personas[sp]
                text = f"Big news: I moved from {p['city']} to {p['new_city']} last week!"
                changes[(sp, "move")] = (dia, when)
            elif agenda[sp] and rng.random() < 0.55:
                kind, text = agenda[sp].pop(0)
                stated[(sp, kind)] = (dia, when)
            else:
                text = rng.choice(FILLER)
            turn = {"speaker": sp, "dia_id": dia, "text": text}
            if rng.random() < 0.05:
                turn["blip_caption"] = (
                    f"a photo of {rng.choice(['a sunset over the sea', 'a bowl of ramen', 'a mountain trail', 'a birthday cake'])}"
                )
            turns.append(turn)
        conv[f"session_{s}"] = turns
    qa = []
    for (sp, kind), (dia, dt) in stated.items():
        p = personas[sp]
        if kind == "job":
            qa.append(
                {
                    "question": f"What does {sp} do for work?",
                    "answer": p["job"],
                    "evidence": [dia],
                    "category": 4,
                }
            )
        elif kind == "pet":
            qa.append(
                {
                    "question": f"What is the name of {sp}'s {p['pet'][0]}?",
                    "answer": p["pet"][1],
                    "evidence": [dia],
                    "category": 4,
                }
            )
        elif kind == "hobby":
            qa.append(
                {
                    "question": f"What hobby has {sp} been into?",
                    "answer": p["hobby"],
                    "evidence": [dia],
                    "category": 4,
                }
            )
        elif kind == "family":
            qa.append(
                {
                    "question": f"Who is in {sp}'s family?",
                    "answer": p["family"],
                    "evidence": [dia],
                    "category": 3,
                }
            )
        elif kind == "event":
            qa.append(
                {
                    "question": f"When did {sp} sign up for {p['event']}?",
                    "answer": _date_words(dt),
                    "evidence": [dia],
                    "category": 2,
                }
            )
        elif kind == "city" and (sp, "move") not in changes:
            qa.append(
                {
                    "question": f"Which city does {sp} live in?",
                    "answer": p["city"],
                    "evidence": [dia],
                    "category": 4,
                }
            )
    for (sp, _), (dia, dt) in changes.items():
        p = personas[sp]
        ev = [dia] + ([stated[(sp, "city")][0]] if (sp, "city") in stated else [])
        qa.append(
            {
                "question": f"Where did {sp} live before moving to {p['new_city']}?",
                "answer": p["city"],
                "evidence": ev,
                "category": 1,
            }
        )
        qa.append(
            {
                "question": f"When did {sp} move to {p['new_city']}?",
                "answer": f"the week before {_date_words(dt)}",
                "evidence": [dia],
                "category": 2,
            }
        )
    if (a, "job") in stated and (b, "job") in stated:
        qa.append(
            {
                "question": f"What jobs do {a} and {b} have?",
                "answer": f"{personas[a]['job']} and {personas[b]['job']}",
                "evidence": [stated[(a, "job")][0], stated[(b, "job")][0]],
                "category": 1,
            }
        )
    qa.append(
        {
            "question": f"What is the name of {a}'s horse?",
            "evidence": [],
            "category": 5,
            "adversarial_answer": "Not mentioned in the conversation",
        }
    )
    return {"sample_id": sid, "conversation": conv, "qa": qa}


def write_json(conversations: list[dict], path: str | Path) -> Path:
    """Write conversations as one LoCoMo-format JSON file (parent folders created)."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    tmp = p.with_suffix(p.suffix + ".tmp")
    tmp.write_text(json.dumps(conversations, indent=1), encoding="utf-8")
    tmp.replace(p)
    return p


# ---------------------------------------------------------------------------------------------
# Long user-assistant chats: short user turns, assistant answers of several thousand characters.

TOPICS: dict[str, dict[str, list[str]]] = {
    "travel": {
        "things": [
            "itinerary",
            "rail pass",
            "guesthouse",
            "museum ticket",
            "ferry",
            "walking tour",
            "day trip",
            "night market",
        ],
        "places": ["Lisbon", "Kyoto", "Oaxaca", "Tallinn", "Marrakesh", "Hobart", "Quebec City", "Ljubljana"],
        "adjs": ["affordable", "crowded", "scenic", "walkable", "seasonal", "central", "quiet", "historic"],
    },
    "cooking": {
        "things": ["braise", "marinade", "stock", "dough", "spice blend", "pickle", "custard", "risotto"],
        "places": [
            "cast-iron pan",
            "Dutch oven",
            "sheet tray",
            "stand mixer",
            "pressure cooker",
            "wok",
            "smoker",
            "grill",
        ],
        "adjs": ["tender", "crisp", "acidic", "smoky", "silky", "caramelised", "bright", "rich"],
    },
    "fitness": {
        "things": [
            "interval session",
            "tempo run",
            "deadlift",
            "mobility routine",
            "rest day",
            "long ride",
            "swim drill",
            "plank",
        ],
        "places": ["track", "gym", "pool", "trail", "studio", "hill", "park", "velodrome"],
        "adjs": [
            "sustainable",
            "progressive",
            "gentle",
            "demanding",
            "balanced",
            "steady",
            "explosive",
            "structured",
        ],
    },
    "finance": {
        "things": [
            "index fund",
            "emergency fund",
            "mortgage",
            "budget category",
            "tax return",
            "pension",
            "bond ladder",
            "credit card",
        ],
        "places": [
            "brokerage",
            "savings account",
            "spreadsheet",
            "payroll",
            "bank",
            "credit union",
            "ledger",
            "portfolio",
        ],
        "adjs": [
            "diversified",
            "liquid",
            "predictable",
            "volatile",
            "tax-efficient",
            "fixed",
            "variable",
            "conservative",
        ],
    },
    "gardening": {
        "things": [
            "raised bed",
            "compost pile",
            "tomato seedling",
            "cover crop",
            "drip line",
            "mulch layer",
            "herb spiral",
            "trellis",
        ],
        "places": [
            "greenhouse",
            "balcony",
            "allotment",
            "backyard",
            "windowsill",
            "orchard",
            "shade corner",
            "south wall",
        ],
        "adjs": [
            "drought-tolerant",
            "fertile",
            "sandy",
            "shaded",
            "frost-hardy",
            "organic",
            "perennial",
            "compact",
        ],
    },
    "programming": {
        "things": [
            "unit test",
            "database index",
            "message queue",
            "cache layer",
            "API client",
            "migration script",
            "profiler",
            "linter",
        ],
        "places": [
            "staging server",
            "laptop",
            "container",
            "cluster",
            "repository",
            "notebook",
            "pipeline",
            "sandbox",
        ],
        "adjs": [
            "idempotent",
            "concurrent",
            "typed",
            "immutable",
            "lazy",
            "batched",
            "modular",
            "observable",
        ],
    },
}
_VERBS = [
    "compare",
    "schedule",
    "prepare",
    "check",
    "adjust",
    "combine",
    "track",
    "review",
    "plan",
    "test",
    "replace",
    "start with",
]
_OPENERS = [
    "In practice,",
    "As a rule of thumb,",
    "For most people,",
    "One thing to keep in mind is that",
    "It often helps that",
    "A common mistake is to forget that",
    "Depending on your goals,",
    "If you have the time,",
    "In my experience,",
    "To keep things simple,",
]
_KEYS = [
    "Amberline",
    "Copperfield",
    "Northgate",
    "Willowmere",
    "Bluestone",
    "Redhaven",
    "Silverbrook",
    "Foxglove",
    "Marigold",
    "Stonebridge",
    "Larkspur",
    "Oakhurst",
    "Pinecrest",
    "Seabright",
    "Thornbury",
    "Elmstead",
]
_USER_FACTS = [
    ("sister", "My sister {v} is visiting me next month.", "What is the name of the user's sister?"),
    ("budget", "My budget for this is about {v} dollars.", "What budget did the user mention?"),
    ("city", "I live in {v} at the moment.", "Which city does the user live in?"),
    ("dog", "My dog {v} comes everywhere with me.", "What is the name of the user's dog?"),
    ("job", "I work as a {v}, so my evenings are short.", "What does the user do for work?"),
]


def _filler_sentence(rng: random.Random, vocab: dict[str, list[str]]) -> str:
    thing, other = rng.sample(vocab["things"], 2)
    return (
        f"{rng.choice(_OPENERS)} you should {rng.choice(_VERBS)} the {rng.choice(vocab['adjs'])} {thing} "
        f"before the {other}, ideally around the {rng.choice(vocab['places'])}, and note what changes after "
        f"{rng.randint(2, 9)} {rng.choice(['days', 'weeks', 'tries', 'sessions'])}."
    )


def _assistant_answer(rng: random.Random, vocab: dict[str, list[str]], fact: str, chars: int) -> str:
    """Paragraphs of topic sentences up to about ``chars`` characters, ``fact`` inside one of the middle paragraphs."""
    paras: list[list[str]] = []
    size = 0
    while size < chars:
        para = [_filler_sentence(rng, vocab) for _ in range(rng.randint(3, 6))]
        paras.append(para)
        size += sum(len(s) + 1 for s in para) + 2
    p = paras[rng.randrange(len(paras))]
    p.insert(rng.randrange(len(p) + 1), fact)
    return "\n\n".join(" ".join(s for s in para) for para in paras)


def generate_long_chats(
    n: int,
    *,
    seed: int = 0,
    target_tokens: int = 150_000,
    answer_chars: tuple[int, int] = (3000, 9000),
    exchanges_per_session: tuple[int, int] = (3, 8),
    start: str = "2024-01-01",
) -> list[dict]:
    """``n`` user-assistant chats in LoCoMo's format (speakers ``User`` and ``Assistant``), each about
    ``target_tokens`` word pieces (estimated as 1.3 per word): short user turns that state personal
    facts or ask, and long assistant answers (``answer_chars`` characters) each hiding one specific
    recommendation (a named item with a number) in a middle paragraph. QA: the recommendation
    (evidence: the assistant turn), the user's facts (evidence: the user turn), when a topic was
    discussed (temporal), and two recommendations at once (multi-hop). ``sample_id`` ``long-<seed>-<i>``."""
    rng = random.Random(seed)
    t0 = datetime.fromisoformat(start)
    return [
        _long_chat(
            rng,
            f"long-{seed}-{i}",
            t0 + timedelta(days=rng.randint(0, 200)),
            target_tokens,
            answer_chars,
            exchanges_per_session,
        )
        for i in range(n)
    ]


def _long_chat(
    rng: random.Random,
    sid: str,
    when: datetime,
    target_tokens: int,
    answer_chars: tuple[int, int],
    exchanges: tuple[int, int],
) -> dict:
    conv: dict = {"speaker_a": "User", "speaker_b": "Assistant"}
    qa: list[dict] = []
    words = 0
    s = 0
    facts = list(_USER_FACTS)
    rng.shuffle(facts)
    recs: list[tuple[str, str, str]] = []  # (dia_id, what was asked about, the recommendation)
    while words * 1.3 < target_tokens:
        s += 1
        when = when + timedelta(days=rng.randint(1, 20), hours=rng.randint(0, 8))
        conv[f"session_{s}_date_time"] = _fmt(when)
        topic = rng.choice(sorted(TOPICS))
        vocab = TOPICS[topic]
        turns = []
        for t in range(rng.randint(*exchanges)):
            u_dia, a_dia = f"D{s}:{2 * t + 1}", f"D{s}:{2 * t + 2}"
            what = f"{rng.choice(vocab['adjs'])} {rng.choice(vocab['things'])}"
            if facts and rng.random() < 0.3:
                kind, template, question = facts.pop()
                value = {
                    "sister": rng.choice(NAMES),
                    "budget": str(rng.randint(3, 90) * 100),
                    "city": rng.choice(CITIES),
                    "dog": rng.choice(["Pepper", "Rollo", "Juniper", "Mochi", "Basil"]),
                    "job": rng.choice(JOBS),
                }[kind]
                user = f"{template.format(v=value)} Can you help me with a {what} for {topic}?"
                qa.append({"question": question, "answer": value, "evidence": [u_dia], "category": 4})
            else:
                user = f"What would you suggest for a {what}? I am thinking about {topic} this week."
            if t == 0:
                qa.append(
                    {
                        "question": f"When did the user ask about a {what}?",
                        "answer": _date_words(when),
                        "evidence": [u_dia],
                        "category": 2,
                    }
                )
            key, num = rng.choice(_KEYS), rng.randint(3, 95)
            fact = (
                f"For your {what}, I recommend the {key} option, which takes about {num} minutes to set up."
            )
            answer = _assistant_answer(rng, vocab, fact, rng.randint(*answer_chars))
            turns += [
                {"speaker": "User", "dia_id": u_dia, "text": user},
                {"speaker": "Assistant", "dia_id": a_dia, "text": answer},
            ]
            qa.append(
                {
                    "question": f"Which option did the assistant recommend for the user's {what}, and how long does it take?",
                    "answer": f"the {key} option, about {num} minutes",
                    "evidence": [a_dia],
                    "category": 4,
                }
            )
            recs.append((a_dia, what, f"the {key} option"))
            words += len(user.split()) + len(answer.split())
        conv[f"session_{s}"] = turns
    for (d1, w1, a1), (d2, w2, a2) in zip(recs[::7], recs[3::7]):
        qa.append(
            {
                "question": f"Which options did the assistant recommend for the {w1} and for the {w2}?",
                "answer": f"{a1} and {a2}",
                "evidence": [d1, d2],
                "category": 1,
            }
        )
    return {"sample_id": sid, "conversation": conv, "qa": qa}
