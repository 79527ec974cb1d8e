"""Hand-written chats of the kind an assistant app sends its memory: ``{"role": "user" | "assistant"}``
turns for opaque user ids, some without timestamps, with facts that change, abbreviations, irregular
verbs, facts said inside requests, assistant small talk, and questions of four kinds:

- ``first``: first person, as the user would ask ("Where do I work now?");
- ``named``: third person with the user's name (only where the user gives one);
- ``unanswerable``: about something never said (the answer is "nothing relevant");
- every answerable question lists its ``evidence`` (message numbers) and, for a fact that changed,
  ``stale`` (the numbers of the messages that said the earlier value).

Used by ``benchmarks/assistant_chats.py`` and its tests. Messages are numbered from 0
within a chat; ids are ``f"{user_id}-{n}"``.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Question:
    text: str
    kind: str  # "first" | "named" | "unanswerable"
    evidence: list[int] = field(default_factory=list)
    stale: list[int] = field(default_factory=list)


@dataclass
class Chat:
    user_id: str
    user_name: str | None  # passed at add (an app that knows it), else None
    turns: list[tuple[str, str, str | None]]  # (role, content, ISO timestamp or None)
    questions: list[Question]

    def message_id(self, n: int) -> str:
        return f"{self.user_id}-{n}"

    def messages(self) -> list[dict]:
        out = []
        for n, (role, content, ts) in enumerate(self.turns):
            m = {"role": role, "content": content, "id": self.message_id(n)}
            if ts is not None:
                m["timestamp"] = ts
            out.append(m)
        return out


def _q(text: str, kind: str, evidence: list[int] | None = None, stale: list[int] | None = None) -> Question:
    return Question(text, kind, list(evidence or []), list(stale or []))


CHATS: list[Chat] = [
    Chat(
        "u_7f3a9c",
        None,
        [
            ("user", "Hi! I'm Priya, nice to meet you.", "2024-01-08T09:00:00Z"),
            ("assistant", "Nice to meet you, Priya! How can I help today?", "2024-01-08T09:00:05Z"),
            (
                "user",
                "I work as a night-shift nurse at St. Mary's Hospital in Boston.",
                "2024-01-08T09:01:00Z",
            ),
            (
                "assistant",
                "That sounds demanding. Night shifts can be hard on sleep.",
                "2024-01-08T09:01:05Z",
            ),
            ("user", "My dog Biscuit is a beagle and he hates the rain.", "2024-01-08T09:02:00Z"),
            ("assistant", "Beagles are great company, and they do love staying dry.", "2024-01-08T09:02:05Z"),
            ("user", "I'm training for the Boston Marathon in April.", "2024-01-20T18:00:00Z"),
            ("assistant", "Good luck with the training! Remember to rest.", "2024-01-20T18:00:05Z"),
            (
                "user",
                "Bad news, I broke my ankle on an icy run yesterday, so the marathon is off.",
                "2024-02-15T20:00:00Z",
            ),
            ("assistant", "I'm so sorry to hear that. Take care of that ankle.", "2024-02-15T20:00:05Z"),
            (
                "user",
                "I left the hospital last month and started as a product designer at Google.",
                "2024-05-02T10:00:00Z",
            ),
            ("assistant", "Congratulations on the new role!", "2024-05-02T10:00:05Z"),
            (
                "user",
                "My sister Meena is visiting on June 14th, can you remind me to book a table at Dr. Bao's?",
                "2024-05-30T08:00:00Z",
            ),
            ("assistant", "Sure, I'll remind you about the booking.", "2024-05-30T08:00:05Z"),
        ],
        [
            _q("Where do I work now?", "first", [10], [2]),
            _q("What is Priya's current job?", "named", [10], [2]),
            _q("What is my dog's name?", "first", [4]),
            _q("What breed is Priya's dog?", "named", [4]),
            _q("Am I still running the marathon?", "first", [8], [6]),
            _q("What happened to Priya's ankle?", "named", [8]),
            _q("When is my sister visiting?", "first", [12]),
            _q("Who is visiting Priya in June?", "named", [12]),
            _q("Where did I work before Google?", "first", [2, 10]),
            _q("What is my favourite band?", "unanswerable"),
            _q("Do I have any children?", "unanswerable"),
            _q("What car does Priya drive?", "unanswerable"),
        ],
    ),
    Chat(
        "c91e04b2",
        None,
        [
            ("user", "Can you help me plan meals? I've been vegetarian for three years.", None),
            ("assistant", "Of course! Vegetarian meals can be very varied.", None),
            ("user", "I live in Dublin with my partner Tom, in a flat near the canal.", None),
            ("assistant", "Dublin has great markets for fresh produce.", None),
            ("user", "I teach chemistry at a secondary school, so weekday lunches have to be quick.", None),
            ("assistant", "Quick lunches it is. Batch cooking on Sundays helps.", None),
            ("user", "Update: Tom and I moved from Dublin to Austin in March for his new job.", None),
            ("assistant", "A big move! Austin has lots of Tex-Mex options.", None),
            ("user", "Also I started eating fish again, so I'm pescatarian now.", None),
            ("assistant", "Noted, fish opens up many recipes.", None),
            ("user", "I'm allergic to peanuts, e.g. no satay sauce please.", None),
            ("assistant", "Got it, I'll avoid peanuts.", None),
            ("user", "Could you remember that my birthday is on October 3rd?", None),
            ("assistant", "I'll remember your birthday.", None),
        ],
        [
            _q("Where do I live now?", "first", [6], [2]),
            _q("What is my diet now?", "first", [8], [0]),
            _q("What do I teach?", "first", [4]),
            _q("What am I allergic to?", "first", [10]),
            _q("Who is my partner?", "first", [2]),
            _q("When is my birthday?", "first", [12]),
            _q("Why did we move to Austin?", "first", [6]),
            _q("What instrument do I play?", "unanswerable"),
            _q("What is my cat called?", "unanswerable"),
            _q("Which gym do I go to?", "unanswerable"),
        ],
    ),
    Chat(
        "acct_55d0e1",
        "Sam",
        [
            ("user", "Morning! Quick one: I quit Tilde last week.", "2024-03-04T07:30:00Z"),
            ("assistant", "Oh, that's a big step. What's next?", "2024-03-04T07:30:04Z"),
            (
                "user",
                "I'm joining a climate start-up called Verdant as CTO on April 1st.",
                "2024-03-04T07:31:00Z",
            ),
            ("assistant", "Exciting! Congratulations.", "2024-03-04T07:31:04Z"),
            ("user", "I ran a half marathon on Sunday in 1 hr 52 min.", "2024-03-11T19:00:00Z"),
            ("assistant", "That's a great time!", "2024-03-11T19:00:04Z"),
            ("user", "My wife Ana and I bought a house on Elm St. in Portland.", "2024-04-20T12:00:00Z"),
            ("assistant", "Congratulations on the house!", "2024-04-20T12:00:04Z"),
            ("user", "Our daughter Lily starts kindergarten in September.", "2024-04-20T12:02:00Z"),
            ("assistant", "Such an exciting milestone.", "2024-04-20T12:02:04Z"),
            (
                "user",
                "I meet my mentor Dr. Okafor every Tuesday at 8 a.m. for coffee.",
                "2024-05-06T08:00:00Z",
            ),
            ("assistant", "Regular mentoring is valuable.", "2024-05-06T08:00:04Z"),
        ],
        [
            _q("Where did I work before Verdant?", "first", [0]),
            _q("What is my role at Verdant?", "first", [2]),
            _q("What is Sam's job now?", "named", [2], [0]),
            _q("How fast did Sam run the half marathon?", "named", [4]),
            _q("Where is my house?", "first", [6]),
            _q("What is the name of Sam's wife?", "named", [6]),
            _q("When does my daughter start kindergarten?", "first", [8]),
            _q("When does Sam meet his mentor?", "named", [10]),
            _q("Who is my mentor?", "first", [10]),
            _q("What is Sam's favourite movie?", "unanswerable"),
            _q("Do I own a boat?", "unanswerable"),
            _q("Which language am I learning?", "unanswerable"),
        ],
    ),
    Chat(
        "9b2f7d11-e3",
        None,
        [
            ("user", "hey, I'm looking for book recommendations. I loved Project Hail Mary.", None),
            ("assistant", "Great pick! You might enjoy The Martian too.", None),
            ("user", "Already read it. I commute by train 40 minutes each way so I read a lot.", None),
            ("assistant", "That's plenty of reading time.", None),
            ("user", "Btw call me Jordan.", None),
            ("assistant", "Will do, Jordan!", None),
            ("user", "I got engaged to Chris last weekend!", None),
            ("assistant", "Congratulations to you both!", None),
            ("user", "We are planning the wedding for Mt. Hood in August next year.", None),
            ("assistant", "A mountain wedding sounds beautiful.", None),
            ("user", "My cat Pepper knocked my coffee onto the laptop this morning.", None),
            ("assistant", "Oh no! I hope the laptop survived.", None),
            ("user", "We changed plans, the wedding will be in Lisbon instead of Mt. Hood.", None),
            ("assistant", "Lisbon is a lovely choice.", None),
        ],
        [
            _q("How do I get to work?", "first", [2]),
            _q("Who am I engaged to?", "first", [6]),
            _q("Where is my wedding going to be?", "first", [12], [8]),
            _q("Where is Jordan's wedding?", "named", [12], [8]),
            _q("What is the name of Jordan's cat?", "named", [10]),
            _q("Which book did I love?", "first", [0]),
            _q("What did my cat do?", "first", [10]),
            _q("What is my salary?", "unanswerable"),
            _q("Where did Jordan go to university?", "unanswerable"),
            _q("What sport do I play?", "unanswerable"),
        ],
    ),
    Chat(
        "usr-000318",
        "Kemi",
        [
            (
                "user",
                "I need help with a budget. I earn about $4,200 a month after tax.",
                "2024-06-01T10:00:00Z",
            ),
            ("assistant", "Let's build a simple budget together.", "2024-06-01T10:00:03Z"),
            ("user", "Rent for my studio in Leeds is £950 a month.", "2024-06-01T10:01:00Z"),
            ("assistant", "Rent is usually the biggest item.", "2024-06-01T10:01:03Z"),
            ("user", "I drive a 2015 Honda Civic and fuel costs me around £120.", "2024-06-01T10:02:00Z"),
            ("assistant", "Fuel adds up quickly.", "2024-06-01T10:02:03Z"),
            ("user", "I sold the Civic and now cycle to work, no more fuel costs.", "2024-07-15T09:00:00Z"),
            ("assistant", "Cycling saves money and keeps you fit.", "2024-07-15T09:00:03Z"),
            (
                "user",
                "My brother Tunde lent me £500 which I pay back at £50 a month.",
                "2024-07-15T09:05:00Z",
            ),
            ("assistant", "That's a manageable repayment.", "2024-07-15T09:05:03Z"),
            ("user", "I got a raise, I now take home $4,800 a month.", "2024-09-01T10:00:00Z"),
            ("assistant", "Congratulations on the raise!", "2024-09-01T10:00:03Z"),
        ],
        [
            _q("How much do I earn now?", "first", [10], [0]),
            _q("How much is Kemi's rent?", "named", [2]),
            _q("Where do I live?", "first", [2]),
            _q("How does Kemi get to work now?", "named", [6], [4]),
            _q("What car did I drive?", "first", [4]),
            _q("Who lent me money?", "first", [8]),
            _q("How much does Kemi pay back each month?", "named", [8]),
            _q("What is Kemi's pension plan?", "unanswerable"),
            _q("Do I have a pet?", "unanswerable"),
            _q("What is my favourite food?", "unanswerable"),
        ],
    ),
    Chat(
        "e0f1c2d3",
        None,
        [
            ("user", "I want to get back into fitness. I used to swim competitively in college.", None),
            ("assistant", "Swimming is a great full-body workout.", None),
            ("user", "I hurt my shoulder in 2019 so I stopped swimming.", None),
            ("assistant", "Shoulder injuries need care. Have you seen a physio?", None),
            ("user", "Yes, my physio Dr. Reyes said I can start with light rowing.", None),
            ("assistant", "Rowing is low impact, good choice.", None),
            ("user", "I joined the gym on Baker St. and go on Mondays and Thursdays.", None),
            ("assistant", "Twice a week is a solid start.", None),
            ("user", "I switched my gym days to Tuesdays and Fridays because of work.", None),
            ("assistant", "Flexibility matters.", None),
            ("user", "Is oat milk better than almond milk for protein? I drink oat milk every day.", None),
            ("assistant", "Oat milk has a bit more protein than almond milk.", None),
        ],
        [
            _q("Which days do I go to the gym?", "first", [8], [6]),
            _q("Why did I stop swimming?", "first", [2]),
            _q("Who is my physio?", "first", [4]),
            _q("Where is my gym?", "first", [6]),
            _q("What milk do I drink?", "first", [10]),
            _q("What sport did I do in college?", "first", [0]),
            _q("What is my weight?", "unanswerable"),
            _q("Where do I work?", "unanswerable"),
            _q("Do I have a sister?", "unanswerable"),
        ],
    ),
]


# General requests an assistant answers at length: no fact about the user, so they only compete for
# the budget (an app's chat is mostly this). ``with_small_talk`` puts some between a chat's turns.
SMALL_TALK: list[tuple[str, str]] = [
    (
        "Can you explain how compound interest works?",
        "Compound interest means you earn interest on the interest. If you invest 1,000 at 5 percent a year, after the "
        "first year you have 1,050; in the second year the 5 percent applies to 1,050, giving 1,102.50, and so on. Over "
        "long periods the growth becomes exponential, which is why starting early matters more than the amount.",
    ),
    (
        "What's a good way to keep basil alive indoors?",
        "Basil likes at least six hours of bright light, so a south-facing window is ideal. Water when the top inch of soil "
        "is dry, never let the pot sit in water, and pinch off the top leaves regularly so the plant grows bushy instead "
        "of flowering. A pot with drainage holes and a light potting mix make a big difference.",
    ),
    (
        "How long should I boil an egg for a runny yolk?",
        "For a runny yolk, lower the egg into already boiling water and cook it for about six minutes, then move it to "
        "cold water for a minute so it stops cooking. Seven minutes gives a jammy yolk and ten to twelve minutes a fully "
        "set one. Very fresh eggs are harder to peel, so eggs a week old work best.",
    ),
    (
        "Summarise the causes of the French Revolution in a few sentences.",
        "The French Revolution grew out of a fiscal crisis, as war debts left the monarchy near bankruptcy, combined with "
        "an unfair tax system that burdened the Third Estate. Enlightenment ideas about rights and popular sovereignty "
        "spread widely, bad harvests raised bread prices, and the Estates-General of 1789 turned into a confrontation "
        "that the crown could not control.",
    ),
    (
        "What's the difference between a virus and a bacterium?",
        "Bacteria are single-celled living organisms that can reproduce on their own, and many are harmless or even "
        "helpful; antibiotics can kill harmful ones. Viruses are much smaller, are not cells, and can only reproduce "
        "inside a host's cells, so antibiotics do not work on them; vaccines and antiviral drugs are used instead.",
    ),
    (
        "Give me a quick stretching routine for after sitting all day.",
        "Try this five-minute routine: stand and reach both arms overhead for thirty seconds, then do slow neck rolls in "
        "each direction. Follow with a standing quad stretch, thirty seconds per leg, a hamstring fold reaching toward "
        "your toes, and a doorway chest stretch. Finish with ten gentle hip circles each way and a few deep breaths.",
    ),
    (
        "How do noise-cancelling headphones work?",
        "Active noise cancelling uses small microphones on the ear cups to pick up outside sound. A chip then produces "
        "a sound wave that is the mirror image of that noise, and when the two waves meet they largely cancel out. It "
        "works best on steady low-frequency sounds like engine hum, while sudden or high-pitched sounds still get through.",
    ),
    (
        "Write a short haiku about autumn.",
        "Crisp leaves drift and fall, amber light on quiet paths, the year exhales slow. Autumn haiku often pair a "
        "seasonal image with a feeling of change, and you could swap the last line for something more personal if you "
        "would like the poem to mark a particular memory.",
    ),
    (
        "What are some tips for a job interview?",
        "Research the company and the role so you can connect your experience to their needs. Prepare short stories "
        "using the situation, task, action and result structure, practise answering common questions out loud, and have "
        "two or three thoughtful questions ready for the interviewer. Arrive early, and send a brief thank-you note after.",
    ),
    (
        "How does a heat pump heat a house?",
        "A heat pump moves heat rather than generating it. A refrigerant absorbs heat from the outside air or ground, even "
        "when it is cold, a compressor raises its temperature, and the heat is released indoors. Because it moves more "
        "energy than it uses in electricity, a heat pump can be three to four times as efficient as a resistive heater.",
    ),
    (
        "Can you suggest a weekend itinerary for Rome?",
        "On day one, visit the Colosseum and the Roman Forum in the morning, then walk to the Pantheon and Piazza Navona "
        "for the evening. On day two, book an early slot for the Vatican Museums and St. Peter's Basilica, have lunch in "
        "Trastevere, and end with gelato near the Trevi Fountain. Comfortable shoes are essential.",
    ),
    (
        "Explain what a Roth IRA is.",
        "A Roth IRA is a United States retirement account funded with money that has already been taxed. Investments "
        "grow tax-free, and qualified withdrawals in retirement are also tax-free. There are income limits for "
        "contributing directly and yearly contribution caps, and contributions can be withdrawn without penalty.",
    ),
]


def with_small_talk(chat: Chat, every: int = 2, seed: int = 0) -> Chat:
    """``chat`` with a small-talk exchange after every ``every`` exchanges (rotating through
    ``SMALL_TALK`` from ``seed``); questions renumbered to the new message positions. Timestamps of
    inserted turns repeat the previous turn's."""
    turns: list[tuple[str, str, str | None]] = []
    new_of: dict[int, int] = {}
    k = seed
    for n, t in enumerate(chat.turns):
        new_of[n] = len(turns)
        turns.append(t)
        if n % 2 == 1 and (n // 2) % every == every - 1:
            user, answer = SMALL_TALK[k % len(SMALL_TALK)]
            k += 1
            turns += [("user", user, t[2]), ("assistant", answer, t[2])]
    qs = [
        Question(q.text, q.kind, [new_of[i] for i in q.evidence], [new_of[i] for i in q.stale])
        for q in chat.questions
    ]
    return Chat(chat.user_id, chat.user_name, turns, qs)


def chats(small_talk: bool = True) -> list[Chat]:
    """The test chats, by default with small talk between their exchanges (the budget then binds)."""
    return [with_small_talk(c, every=1 + i % 2, seed=3 * i) if small_talk else c for i, c in enumerate(CHATS)]


__all__ = ["CHATS", "SMALL_TALK", "Chat", "Question", "chats", "with_small_talk"]
