"""LLM-free semantic extraction: decouple messages into self-contained factual statements.

Each message is split into sentences (and lines; a title or abbreviation such as "St." or "Dr." ends
none); a fact said inside a question or request ("My sister Emma is coming on Oct 12, can you remind
me?") is kept as a statement where the message's plain sentences leave room, other questions and filler (fewer than ``min_words`` words or
fewer than two content words) are dropped; first- and second-person references are rewritten to
the speakers' names so a statement reads on its own ("I adopted a puppy" said by Alice ->
"Alice adopted a puppy"); a shared photo becomes "Alice shared a photo of ...". A message keeps at most ``max_per_message`` statements, its most
specific sentences (``specificity``), each cut to ``max_statement_words`` words. Near-duplicate
statements (cosine above ``dedup_threshold``) are merged, keeping every source.
"""

from __future__ import annotations

import re
from heapq import nlargest
from itertools import filterfalse
from string import digits

import numpy as np

from ..config import SemanticConfig
from ..memory.records import Conversation, Episode, Message, SemanticNode
from ..ops.dedup import dedup_block, first_best
from ..text import NOT_CONTENT, is_assistant, words

ASSISTANT_MIN_WORDS = 40  # an assistant turn shorter than this (a reply, small talk) yields no statement
_SENT_SPLIT = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'])")
# a word ending in "." that does not end a sentence: titles, street and place words, Latin and other
# abbreviations, initials ("J."); a.m. / p.m. / etc. may end one, so they are not here
_ABBREV = frozenset(
    """st dr mr mrs ms mx mt jr sr prof rev gen capt lt col sgt cpl ave blvd rd hwy ft no nos vol fig approx
    e.g i.e cf vs jan feb mar apr jun jul aug sep sept oct nov dec inc ltd co corp dept est univ""".split()
)
_PHOTO = re.compile(r"\[shares a photo: (?P<cap>[^\]]*)\]\s*$")  # a shared photo's caption, at the end


def photo_caption(text: str) -> tuple[int, str] | None:
    r"""Where a trailing ``[shares a photo: CAPTION]`` starts (with the whitespace before it) and its
    caption, or None: ``re.search(r"\s*\[shares a photo: ...)`` without its leading ``\s*``, which made
    the search quadratic in a long run of whitespace."""
    m = _PHOTO.search(text)
    if m is None:
        return None
    start = m.start()
    while start and text[start - 1].isspace():
        start -= 1
    return start, m.group("cap")


def _at_word_start(*forms: str) -> str:
    r"""``\b(?:form|...)`` for forms that start with a word character, as ``form(?<!\wform)|...``: the
    boundary checked behind each form, so that a search skips to the forms' first characters (a leading
    ``\b`` makes it try every position)."""
    return "(?:" + "|".join(f"{re.escape(f)}(?<!\\w{re.escape(f)})" for f in forms) + ")"


# first person -> speaker: (whole-word forms, replacement); fixed forms first (they carry their own verb),
# the negation rule (_NEGATED) between the two lists
_FIRST_FIXED = [
    (("I don't", "I dont"), "{s} doesn't"),
    (("I do not",), "{s} does not"),
    (("I haven't", "I havent"), "{s} hasn't"),
    (("I have not",), "{s} has not"),
]
_NEGATABLE = ("can", "will", "would", "could", "should", "did", "was")  # "I can not" -> "{s} can not"
# "I can't" -> "{s} can't"
_NEGATED = re.compile(_at_word_start("I") + r" ((?:[a-z]+n't)|(?:" + "|".join(_NEGATABLE) + r") not)\b")
_FIRST_AFTER = [
    (("I'm",), "{s} is"),
    (("I am",), "{s} is"),
    (("I've",), "{s} has"),
    (("I have",), "{s} has"),
    (("I'd",), "{s} would"),
    (("I'll",), "{s} will"),
    (("I was",), "{s} was"),
    (("myself",), "{s}"),
    (("My", "my"), "{s}'s"),
    (("mine",), "{s}'s"),
    (("me",), "{s}"),
]
_SECOND_FIXED = [
    (("you're",), "{o} is"),
    (("You're",), "{o} is"),
    (("you've",), "{o} has"),
    (("You've",), "{o} has"),
    (("yourself",), "{o}"),
    (("Your", "your"), "{o}'s"),
    (("yours",), "{o}'s"),
]
_NO_S = frozenset(
    """can could will would should might must may did was had went got made saw took gave came began cannot
    just also really always never still finally recently already actually used only even""".split()
)
_ADVERBS = frozenset(
    """just also really always never still finally recently already actually usually often now currently
    sometimes rarely seldom mostly generally probably definitely almost nearly hardly barely ever once then first later
    even only""".split()
)
_FIRST_VERB = re.compile(
    _at_word_start("I") + r"((?:\s+(?:" + "|".join(sorted(_ADVERBS)) + r"))*\s+[a-z]+)\b"
)
_IRREGULAR = {"have": "has", "do": "does", "go": "goes", "am": "is", "are": "is"}
# irregular past tenses (and verbs whose past is their base form): never given a third-person -s
_PAST = frozenset(
    """arose awoke bore beat became begun bent bet bit bled blew broke brought built burnt burst bought caught chose
    clung cost crept cut dealt dug drew dreamt drank drove ate fell fed felt fought found fled flew forbade forgot
    forgave froze ground grew hung heard hid hit held hurt kept knelt knew laid led leant leapt learnt left lent let
    lay lit lost meant met paid put quit read rode rang rose ran said sought sold sent set shook shone shot showed
    shrank shut sang sank sat slept slid spoke sped spent spilt spun spread sprang stood stole stuck stung stank
    strode struck swore swept swam swung taught tore told thought threw understood woke wore wove wept won wound
    wrote upset forecast""".split()
)


_ES, _IES = re.compile(r"(ch|sh|x|o|z)$"), re.compile(r"[^aeiou]y$")


def _third_person(verb: str) -> str:
    low = verb.lower()
    if low in _IRREGULAR:
        return _IRREGULAR[low]
    if low in _NO_S or low in _PAST or low.endswith("ed") or low.endswith("s"):
        return verb
    if _ES.search(low):
        return verb + "es"
    if _IES.search(low):
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


_INITIAL = re.compile(r"[A-Z]\.")


def split_sentences(text: str) -> list[str]:
    """``text`` cut into sentences at ., ! or ? before a capital, digit or quote, and at line breaks;
    a piece ending in a title or abbreviation ("St.", "Dr.", "e.g.", an initial) joins the next."""
    out: list[str] = []
    for line in text.split("\n"):
        cur = ""
        for p in _SENT_SPLIT.split(line):
            p = p.strip()
            if not p:
                continue
            if cur and (
                (last := cur.rsplit(None, 1)[-1])[:-1].lower() in _ABBREV or _INITIAL.fullmatch(last)
            ):
                cur = f"{cur} {p}"
            else:
                if cur:
                    out.append(cur)
                cur = p
        if cur:
            out.append(cur)
    return out


_ASK_JOINS = ("so", "and", "but")
_ASK_VERBS = ("can", "could", "would", "will", "should", "do", "did", "have", "are")
_ASK_YOU = re.compile(
    r"[,;:\u2014-]\s*(?:"
    + "".join(rf"{j}\s+|" for j in _ASK_JOINS)[:-1]
    + ")?(?:"
    + "|".join(_ASK_VERBS)
    + r")\s+you\b",
    re.I,
)
# "..., and I was wondering if you could ...": the request after the statement, as with "can you"
_ASK_WONDER = re.compile(
    r"[,;:\u2014-]\s*(?:(?:so|and|but)\s+)?"
    r"I(?:(?:\s+(?:was|am)|['\u2019]m)\s+(?:just\s+)?wondering|\s+wonder(?:ed)?)\s+(?:if|whether)\b",
    re.I,
)
# a head that is courtesy or talk about the talk, not a fact ("Sorry for the long message, but I was
# wondering ...")
_COURTESY = re.compile(
    r"^(?:(?:so|and|but|oh|ok|okay|hi|hey|hello)\W+)*"
    r"(?:sorry|thanks?\b|thank you|this (?:might|may|could) be|not sure|just (?:a|curious|wondering)|"
    r"quick question|a question|out of curiosity|going back|on (?:a|an|another) \w+ note|i hope|hope|"
    r"following up|a follow-?up|one more|another question|excuse me|pardon)",
    re.I,
)
_THAT_HEADS = ("remind me", "remember", "note", "know", "keep in mind")
_THAT_CLAUSE = re.compile(r"\b(?:" + "|".join(_THAT_HEADS) + r")\s+that\s+(?P<fact>.+?)[?.!]*$", re.I)
_INTERROGATIVES = (
    "what",
    "where",
    "when",
    "who",
    "whom",
    "whose",
    "why",
    "how",
    "which",
    "do",
    "does",
    "did",
    "can",
    "could",
    "would",
    "will",
    "is",
    "are",
    "was",
    "were",
    "should",
    "have",
    "has",
    "had",
    "may",
    "might",
    "shall",
    "am",
    "any",
    "anything",
    "ever",
)
_INTERROGATIVE = re.compile(r"^(?:" + "|".join(_INTERROGATIVES) + r")\b", re.I)


def stated_part(sentence: str) -> str:
    """The statement a question or request carries ("My sister Emma is coming on Oct 12, can you remind
    me?" -> "My sister Emma is coming on Oct 12."; "..., and I was wondering if you know ...?" likewise;
    "Can you remember that I'm vegan?" -> "I'm vegan."), or the sentence unchanged (a plain question
    stays a question, and is dropped as filler)."""
    s = sentence.strip()
    if not s.endswith("?"):
        return s
    m = _THAT_CLAUSE.search(s)
    if m:
        fact = m.group("fact").strip().rstrip(",;")
        return fact[:1].upper() + fact[1:] + "."
    asks = [m for m in (_ASK_YOU.search(s), _ASK_WONDER.search(s)) if m]
    m = min(asks, key=lambda a: a.start()) if asks else None  # the request that comes first
    if m and m.start() > 0:
        head = s[: m.start()].strip()
        if not _INTERROGATIVE.match(head) and not (m.re is _ASK_WONDER and _COURTESY.match(head)):
            return head.rstrip(",;") + "."
    return s


def _forms(table: list[tuple[tuple[str, ...], str]]) -> list[tuple[re.Pattern, str, tuple[str, ...]]]:
    """(pattern, replacement, forms) of whole-word forms: a pattern runs only on a sentence holding one of its forms."""
    return [(re.compile(_at_word_start(*forms) + r"\b"), rep, forms) for forms, rep in table]


_FIRST_RE, _FIRST_AFTER_RE, _SECOND_RE = _forms(_FIRST_FIXED), _forms(_FIRST_AFTER), _forms(_SECOND_FIXED)
_I, _YOU = re.compile(_at_word_start("I") + r"\b"), re.compile(_at_word_start("You", "you") + r"\b")
# every rewrite above starts at a word boundary with one of these: a sentence without them is left as it is
_PERSON = re.compile(_at_word_start("I", "My", "my", "mine", "me", "You", "you"))


def decouple(sentence: str, speaker: str, other: str) -> str:
    """Rewrite first/second person to the speakers' names (a light, rule-based decoupling), curly
    apostrophes (U+2019) made straight first. The names are put in as they are (a backslash in one is
    no template escape)."""
    s = sentence.replace("\u2019", "'")
    if _PERSON.search(s):
        sp, ot = speaker.replace("\\", "\\\\"), other.replace("\\", "\\\\")  # literal in re.sub's templates
        for pat, rep, forms in _FIRST_RE:
            if any(map(s.__contains__, forms)):  # a C-level scan: the rules run on every sentence
                s = pat.sub(rep.format(s=sp), s)
        if "I " in s:
            s = _NEGATED.sub(sp + " \\1", s)
        for pat, rep, forms in _FIRST_AFTER_RE:
            if any(map(s.__contains__, forms)):
                s = pat.sub(rep.format(s=sp), s)
        if "I" in s:
            s = _FIRST_VERB.sub(lambda m: _subject_verb(m, speaker), s)
            s = _I.sub(sp, s)
        for pat, rep, forms in _SECOND_RE:
            if any(map(s.__contains__, forms)):
                s = pat.sub(rep.format(o=ot), s)
        s = _YOU.sub(ot, s)
    if speaker not in s and other not in s:
        s = f"{speaker} said: {s}"
    return s.strip()


# Reactions and pleasantries: content words that state no fact ("Haha, that's so true.").
REACTION_WORDS = frozenset(
    "haha hahaha lol omg wow yeah yes yep nope okay ok oh hey hi hello bye thanks thank great nice cool awesome amazing "
    "wonderful fantastic lovely true totally agree agreed sounds sound fun hear glad happy appreciate really care soon "
    "talk tell more same busy week good well been doing exactly absolutely definitely sure".split()
)
_NO_FACT = NOT_CONTENT | REACTION_WORDS  # words that bear no fact: no content word, or a reaction


# A request to the assistant ("Give me a stretching routine.", "Explain what a Roth IRA is."): an
# imperative verb first (after an optional "please" / "so" / "ok"), which states no fact.
_REQUEST_LEADS = ("please", "so", "ok", "okay", "now", "also", "and")
_REQUEST_VERBS = (
    "give",
    "explain",
    "write",
    "summarise",
    "summarize",
    "suggest",
    "tell",
    "show",
    "help",
    "list",
    "make",
    "describe",
    "find",
    "recommend",
    "translate",
    "draft",
    "create",
    "compare",
    "define",
    "calculate",
    "generate",
    "rewrite",
    "outline",
    "convert",
)
_REQUEST_OBJECTS = (
    "me",
    "us",
    "him",
    "her",
    "them",
    "it",
    "this",
    "that",
    "a",
    "an",
    "the",
    "some",
    "my",
    "our",
    "what",
    "how",
    "why",
    "when",
    "where",
    "which",
    "who",
)
_REQUEST = re.compile(
    r"^(?:(?:"
    + "|".join(_REQUEST_LEADS)
    + r")[, ]+)*(?:"
    + "|".join(_REQUEST_VERBS)
    + r")\s+(?:"
    + "|".join(_REQUEST_OBJECTS)
    + r")\b",
    re.I,
)
# A greeting or pleasantry that names someone ("Nice to meet you, Alice.", "Hi Sam!"): no fact.
_GREETINGS = (
    "hi",
    "hello",
    "hey",
    "good morning",
    "good afternoon",
    "good evening",
    "morning",
    "welcome",
    "nice to meet you",
    "nice to see you",
    "nice to hear from you",
    "pleased to meet you",
    "great to meet you",
    "thanks",
    "thank you",
)
_GREETING = re.compile(r"^(?:(?:" + "|".join(_GREETINGS) + r")\b[\s,!.]*)+(?:[A-Z][a-z]+)?[\s,!.]*$", re.I)


def is_filler(sentence: str, cfg: SemanticConfig, ws: list[str] | None = None) -> bool:
    """Questions, very short sentences, reactions with fewer than two fact-bearing words, greetings,
    and requests to an assistant. ``ws``: the sentence's ``words`` when already read."""
    if sentence.rstrip().endswith("?"):
        return True
    if ws is None:
        ws = words(sentence)
    if (
        len(ws) < cfg.min_words or len(ws) - sum(map(_NO_FACT.__contains__, ws)) < 2
    ):  # fact-bearing words, repeats too
        return True
    s = sentence.strip()
    return bool(_GREETING.match(s) or _REQUEST.match(s))


_NUMBER = re.compile(r"\d")
_DIGITS = frozenset(digits)
# a capitalised word, not the sentence's first nor one after a sentence end: (?<!^)(?<![.!?]\s)\b[A-Z][a-z]+,
# its look-behinds taken after the capital (the search then skips to capitals)
_NAME = re.compile(r"[A-Z](?<!^.)(?<![.!?]\s.)(?<!\w.)[a-z]+")


def specificity(sentence: str, ws: list[str] | None = None) -> int:
    """How much checkable fact a sentence carries, from the sentence alone: its distinct content
    words (reactions excluded), plus one for each distinct capitalised word inside it (names,
    places, titles) and one for each distinct number (dates, amounts) -- the words questions ask
    about. Per sentence, so the bulk build and the live engine rank a message's sentences alike.
    ``ws``: the sentence's ``words`` when already read."""
    if ws is None:
        ws = words(sentence)
    content = set(filterfalse(_NO_FACT.__contains__, ws))
    # the words with a digit: content words, or digits alone (no other word bearing no fact holds one)
    numbers = (
        len(list(filter(_NUMBER.search, content))) + len(_DIGITS.intersection(ws))
        if _NUMBER.search(sentence)
        else 0
    )
    return len(content) + len(set(_NAME.findall(sentence))) + numbers


def most_specific(sentences: list[str], cap: int, ws: list[list[str]] | None = None) -> list[str]:
    """The ``cap`` most specific sentences (ties: the earlier), in their original order; all when
    ``cap`` is 0 or not exceeded. A long assistant answer keeps its few densest sentences instead of
    one node per sentence (its full text stays in the episode and the message). ``ws``: each
    sentence's ``words`` when already read."""
    if cap <= 0 or len(sentences) <= cap:
        return sentences
    score = list(map(specificity, sentences, ws if ws is not None else map(words, sentences)))
    return [sentences[i] for i in sorted(nlargest(cap, range(len(sentences)), key=score.__getitem__))]


def _cut(sentence: str, max_words: int) -> str:
    ws = sentence.split()
    return sentence if len(ws) <= max_words else " ".join(ws[:max_words]) + " ..."


_PHOTO_OF = re.compile(r"^(a )?(photo|picture|image) of ")


ASKED_WORDS = 14  # the longest question (in words) a reply is read with; a longer one is cut
REPLY_WORDS = 20  # a longer turn is no reply to the question before it, but a turn of its own


def asked_question(previous: Message | None, message: Message) -> str | None:
    """The question a reply answers: the last sentence of the turn just before it, when that turn is
    another speaker's, in the same session, and ends with a question that asks about something (a
    content word besides the question words); else None."""
    if previous is None or previous.speaker == message.speaker or previous.session != message.session:
        return None
    sentences = split_sentences(previous.text)
    if not sentences or not sentences[-1].endswith("?"):
        return None
    q = sentences[-1]
    return q if any(w not in _NO_FACT for w in words(q)) else None


def _same_stem(a: str, b: str) -> bool:
    """The same word, or one of four letters or more that begins the other ("teach", "teaches")."""
    return a == b or (min(len(a), len(b)) >= 4 and (a.startswith(b) or b.startswith(a)))


def _with_question(statement: str, asked: str) -> str:
    return f"{statement} (asked: {_cut(asked, ASKED_WORDS)})"


def without_question(statement: str) -> str:
    """``statement`` without the question a reply was read with (``_with_question``'s suffix): what
    it says whatever turn came before it."""
    i = statement.rfind(" (asked: ")
    return statement[:i] if i >= 0 and statement.endswith(")") else statement


def _answer(text: str, speaker: str, other: str, cfg: SemanticConfig) -> str | None:
    """A short reply that makes no statement on its own ("Mostly juniors.", "Yes, two of them."), as
    one statement to be read with its question: its sentences that are not questions, greetings or
    requests, when they hold a content word and fit ``max_statement_words``; else None."""
    kept = [
        s
        for s in split_sentences(text)
        if not s.endswith("?") and not _GREETING.match(s.strip()) and not _REQUEST.match(s.strip())
    ]
    reply = " ".join(kept)
    ws = words(reply)
    if not ws or len(ws) > cfg.max_statement_words or all(w in _NO_FACT for w in ws):
        return None
    return decouple(reply, speaker, other)


def message_statements(
    text: str, speaker: str, other: str, assistant: bool, cfg: SemanticConfig, question: str | None = None
) -> list[str]:
    """One message's statements, in order: its sentences without filler, the most specific
    ``max_per_message`` of them (a photo's caption counts), facts said inside questions where they
    leave room, each cut to ``max_statement_words`` words and decoupled (``other``: the speaker
    "you" is); ``assistant``: a chat role's turn, which yields nothing when short and is otherwise
    attributed to it ("assistant said: ..."); a shared photo's caption last. ``question``: the one
    the message replies to (``asked_question``): a reply that is not an assistant's is read with it:
    its first statement ends with "(asked: QUESTION)" when the question asks about a word the
    statement lacks ("user said: Chemistry at Roosevelt High. (asked: What do you teach?)"), and a
    reply that makes no statement on its own makes that one ("user said: Yes, two of them. (asked:
    Do you have kids?)")."""
    if assistant and len(text.split()) < ASSISTANT_MIN_WORDS:  # an assistant's small talk is no memory
        return []
    photo = photo_caption(text)
    if photo:
        text = text[: photo[0]]
    has_cap = bool(photo and photo[1].strip())
    cands: list[str] = []  # the plain sentences that are no filler, and their words
    cand_ws: list[list[str]] = []
    questions: list[str] = []  # split_sentences strips: these are filler, and may carry a fact
    for s in split_sentences(text):
        if s.endswith("?"):
            questions.append(s)
        elif not is_filler(s, cfg, ws := words(s)):
            cands.append(s)
            cand_ws.append(ws)
    n_max = cfg.max_per_message
    room = n_max - has_cap  # the caption counts
    kept = most_specific(cands, room, cand_ws) if room > 0 else ([] if n_max else cands)
    if questions and (not n_max or room > len(kept)):  # facts said in questions fill the places left
        asked = [f for f in map(stated_part, questions) if not is_filler(f, cfg)]
        kept += asked[: room - len(kept)] if n_max else asked
    out = [decouple(_cut(s, cfg.max_statement_words), speaker, other) for s in kept]
    if question and not assistant and len(text.split()) <= REPLY_WORDS:
        if out:
            said = set(words(out[0]))
            asks = {w for w in words(question) if w not in _NO_FACT}
            if any(not any(_same_stem(w, v) for v in said) for w in asks):
                out[0] = _with_question(out[0], question)
        elif not has_cap:
            reply = _answer(text, speaker, other, cfg)
            out = [] if reply is None else [_with_question(reply, question)]
    if assistant:  # what an assistant says is its answer, never a fact about the user: attributed to it
        out = [
            s if s.startswith(speaker) else f"{speaker} said: {s.removeprefix(f'{speaker} said: ')}"
            for s in out
        ]
    if has_cap:
        caption = _PHOTO_OF.sub("", photo[1].strip())
        out.append(f"{speaker} shared a photo of {caption}")
    return out


def extract_statements(
    conv: Conversation,
    episodes: list[Episode],
    cfg: SemanticConfig,
    previous: dict[str, Message | None] | None = None,
) -> list[SemanticNode]:
    """Statements of one conversation (before de-duplication), ids in order of appearance: each
    message's ``message_statements``, read with the question of the turn before it. ``previous``:
    each message's turn before it in the whole conversation (message id -> that turn, None for the
    first) where ``conv.messages`` is only part of it; else the message before it in the list."""
    ep_of = {mid: ep.id for ep in episodes for mid in ep.message_ids}
    a, b = conv.speakers
    nodes: list[SemanticNode] = []
    for i, m in enumerate(conv.messages):
        assistant = is_assistant(m.speaker)
        asked = None
        if cfg.read_replies_with_questions:
            before = previous.get(m.id) if previous is not None else conv.messages[i - 1] if i else None
            asked = asked_question(before, m)
        for s in message_statements(m.text, m.speaker, b if m.speaker == a else a, assistant, cfg, asked):
            nodes.append(
                SemanticNode(
                    id=len(nodes),
                    text=s,
                    episode_ids=[ep_of[m.id]],
                    message_ids=[m.id],
                    timestamp=m.timestamp,
                )
            )
    return nodes


# a memory's stats key: True where every statement was read from one message, its first source (the
# rules); the others merged into it. The LLM builder reads a fact from several (False); a memory whose
# stats lack it is taken as False (``construct.forget`` then reads every touched statement again)
ONE_SOURCE = "statements_from_one_message"

# rows of new statements compared at once in de-duplication; memory is O(DEDUP_BLOCK * (DEDUP_BLOCK + d))
DEDUP_BLOCK = 512


def _best_prior(
    rows: np.ndarray, cols: np.ndarray, idx: np.ndarray | None, block: int
) -> tuple[np.ndarray, np.ndarray]:
    """Per row: the largest cosine against the columns (``cols``, or ``cols[idx]``) and its first
    position (-inf and -1 when there are none), computed ``block`` columns at a time, or, where the
    columns are read in place (no ``idx``), ``block**2 / rows`` (few calls for few rows: a delete's
    restated statements against a long memory); memory O(block * (block + d)) either way."""
    best = np.full(len(rows), -np.inf)
    arg = np.full(len(rows), -1, np.int64)
    n = len(cols) if idx is None else len(idx)
    step = block if idx is not None else max(block, block * block // max(1, len(rows)))
    for c0 in range(0, n, step):
        chunk = cols[c0 : c0 + step] if idx is None else cols[idx[c0 : c0 + step]]
        # few rows (an add's statements): einsum on this thread, not BLAS, whose thread pool only
        # adds hand-offs here and stalls beside busy cores; the exact re-score makes either the same
        v, j = first_best(
            np.einsum("rd,nd->rn", rows, chunk) if len(rows) <= 16 else rows @ chunk.T, rows, chunk
        )
        better = v > best  # strictly: a tie keeps the earlier column, as one argmax over all would
        best[better], arg[better] = v[better], c0 + j[better]
    return best, arg


def match_duplicates(
    old_x: np.ndarray, new_x: np.ndarray, threshold: float, *, block: int = DEDUP_BLOCK, backend: str = "auto"
) -> np.ndarray:
    """The de-duplication rule, in blocks: in order, each new row merges into its most similar
    earlier kept row (``old_x``'s rows, then the new rows kept so far; the first on a tie, cosines
    compared exactly: ``ops.dedup.first_best``) when the cosine exceeds ``threshold``, else it is kept;
    within a block the op ``ops.dedup.dedup_block`` on ``backend``. Returns, per new row, the position
    it merges into among the old rows followed by the kept new rows, or -1 when kept. Memory is
    O(block * (block + d)) whatever the sizes; work is O(new * (old + new) * d), the dense rule's."""
    n_old = len(old_x)
    target = np.full(len(new_x), -1, np.int64)
    kept: list[int] = []  # new rows kept so far
    for a in range(0, len(new_x), block):
        rows = new_x[a : a + block]
        best, arg = _best_prior(rows, old_x, None, block)
        n_prev = len(kept)
        if n_prev:
            v, j = _best_prior(rows, new_x, np.asarray(kept), block)
            better = v > best
            best[better], arg[better] = v[better], n_old + j[better]
        t_block = dedup_block(rows @ rows.T, rows, best, arg, threshold, n_old + n_prev, backend=backend)
        target[a : a + len(rows)] = t_block
        kept.extend((a + np.flatnonzero(t_block < 0)).tolist())
    return target


def merge_duplicates(
    nodes: list[SemanticNode], x: np.ndarray, threshold: float
) -> tuple[list[SemanticNode], np.ndarray]:
    """Merge statements whose cosine exceeds ``threshold`` into the earliest one, keeping all sources
    (:func:`match_duplicates` with no earlier rows: the live engine's rule, in blocks).

    x: [n, d] float32 unit rows. Returns the kept nodes (re-numbered) and their rows of x.
    """
    if not nodes:
        return [], x[:0]
    target = match_duplicates(x[:0], x, threshold)
    kept = np.flatnonzero(target < 0)
    members: list[list[int]] = [[i] for i in kept.tolist()]  # per kept node: itself, then what merged into it
    for i, t in zip(np.flatnonzero(target >= 0).tolist(), target[target >= 0].tolist()):
        members[t].append(i)
    out: list[SemanticNode] = []
    for new_id, dup in enumerate(members):
        node = nodes[dup[0]]
        if len(dup) == 1:  # most statements: nothing merged into them (and one source each: copied as it is)
            mids = (
                list(node.message_ids)
                if len(node.message_ids) == 1
                else list(dict.fromkeys(node.message_ids))
            )
            eids = list(node.episode_ids) if len(node.episode_ids) == 1 else sorted(set(node.episode_ids))
        else:
            mids = list(dict.fromkeys(mid for j in sorted(dup) for mid in nodes[j].message_ids))
            eids = sorted({e for j in dup for e in nodes[j].episode_ids})
        out.append(
            SemanticNode(
                id=new_id, text=node.text, episode_ids=eids, message_ids=mids, timestamp=node.timestamp
            )
        )
    return out, x[kept]
