"""Facts that change, without an LLM: which statements a later one supersedes.

A later statement supersedes an earlier one of the same speaker when both are about the same
*subject* (``subject``: the speaker, "the user", or someone else: "the user's sister Meena", "Bob"),
the later one says that an *attribute* of it changed (``changes``: in one clause, a change word of
that attribute, "moved to" a home, "quit" a job, "broke" an injury, or a general one, "now",
"instead", "switched", "started", "joined", beside the attribute's words; not after a negation, a
modal, an intent, a condition or someone else's possessive: "won't quit", "wants to quit", "if she
moved", "his new job"), it says more than the earlier one (``repeats``: "now lives in Paris too"
after "lives in Paris" changes nothing), the earlier one speaks of that attribute (``attributes``:
job, home, diet, allergy, income, transport, schedule, plans, relationship, injury, illness: word
patterns; an allergy is no injury), and their embeddings are close (cosine >=
``threshold``). A measured value is an attribute too (``MEASURES``: a duration, a span of days to
years, a data size, a rate, a share, as a number with its unit), changed where its clause says so
("has decreased to 120ms", "is currently at 180ms", "the new limit of ..."); a change of a measured
value alone needs the closer cosine ``MEASURE_THRESHOLD`` (a span of days to years, the closer
``SPAN_THRESHOLD``: "learning French for 6 months now" is no change of "learning Spanish for 2
years"), so that it supersedes the same metric, not another one of its kind. Where a change statement
goes on past the clause that says what changed ("the user is optimising the login API's response time,
which has decreased to 120ms ..., and the user wants to ..."), the cosine is also read for that part
of it alone (``focus``), given an encoder: the clauses after it would otherwise hide the change.
A later statement that says the speaker has *never* done what an earlier one says they did ("the user
has never written integration tests for socket events" after "the user has written integration tests
for socket events ...") supersedes it too (``denial``): one of the two is no longer true, and the later
one is read first, the earlier one shown beside it as earlier. It needs the denial in the present
perfect, the denied verb done in the earlier statement (not negated, wished or asked about), the
denied clause's last word and most of its words there (``DENIAL_SHARE``), and the cosine
``DENIAL_THRESHOLD``.
The earlier statement is kept (history questions still find it); retrieval ranks it after the newer
one and shows it as earlier ("previously, until 2024-03: ..."). This goes past mem0's UPDATE, which
overwrites the old fact, and keeps what temporal graph memories (Graphiti / Zep's invalidated
edges) keep.
"""

from __future__ import annotations

import hashlib
import re
import threading
from collections import OrderedDict
from collections.abc import Callable
from functools import lru_cache
from typing import NamedTuple

import numpy as np

from ..ops.rows import dot4_gram, unit_rows

# a word that says something changed, whatever it is about: it changes the attributes named in its clause
CHANGE = re.compile(
    r"\b(?:now|no longer|any ?more|switched|switching|changed|changing|instead|started|starting|began|left|"
    r"leaving|joined|joining|sold|stopped|gave up|update[ds]?|these days|nowadays)\b",
    re.I,
)
# work as a job ("works as", "working at"), not a place ("cycle to work") nor effort ("hard work", "make it work")
_WORK = r"(?:work|works|worked|working)\s+(?:as|at|for|in)|workplace|co-?workers?|colleagues?"
_JOB = (
    rf"{_WORK}|job|jobs|career|hired|employ\w*|company|start-?up|position|role|quit|promoted|"
    r"cto|ceo|nurs\w*|designer|engineer|teach\w*|doctor|manager|developer|hospital|intern\w*"
)
ATTRIBUTES: dict[str, re.Pattern] = {
    name: re.compile(p, re.I)
    for name, p in {
        "job": rf"\b(?:{_JOB}|office)\b",
        "home": r"\b(?:live[d]?|(?<!our )(?<!their )(?<!his )(?<!her )(?<!'s )lives|living|moved|move|relocat\w*|flat|apartment|house|(?<!take )(?<!takes )home|"
        r"neighbou?rhood)\b",
        "diet": r"\b(?:vegetarian|vegan|pescatarian|diet|eat\w*|meat|fish|keto)\b",
        "allergy": r"\b(?:allerg\w*|intoleran\w*|(?:celiac|coeliac)|gluten|dairy|lactose)\b",
        "income": r"\b(?:earn\w*|salary|income|take[s]? home|raise|wage|paid \$?\d)\b",
        "transport": r"\b(?:drive[s]?|driving|car|cycl\w*|bike|commut\w*|bus|train|subway|scooter)\b",
        "schedule": r"\b(?:mondays?|tuesdays?|wednesdays?|thursdays?|fridays?|saturdays?|sundays?|weekly|schedule|days)\b",
        "plans": r"\b(?:wedding|marathon|trip|plan\w*|training|holiday|vacation|visit\w*|move to)\b",
        "relationship": r"\b(?:married|engaged|dating|partner|girlfriend|boyfriend|wife|husband|divorc\w*|single|"
        r"broke up|fianc\w*)\b",
        "injury": r"\b(?:injur\w*|hurt|broke(?! up)|broken|ankle|knee|shoulder|wrist|hip|sprain\w*|fractur\w*|"
        r"surgery|physio\w*|crutches)\b",
        "illness": r"\b(?:sick|ill|flu|covid|diagnos\w*|cancer|diabet\w*|pregnan\w*|asthma)\b",
    }.items()
}
# a measured value: a number with a unit of one kind ("180ms", "250 MB", "100 requests per minute", "80%")
_NUM = r"(?<![\d,.])\d[\d,]*+(?:\.\d+)?\s?"  # from a number's start, its digits taken once: linear
MEASURES: dict[str, re.Pattern] = {
    name: re.compile(p, re.I)
    for name, p in {
        # no bare "s": "80s" is a decade
        "duration": rf"\b{_NUM}(?:ms|milliseconds?|secs?|seconds?|mins?|minutes?|hrs?|hours?)\b",
        # how long something has lasted ("for 9 months now"); "3 months ago", "2 years back", "in 3 weeks"
        # are dates, not spans
        "span": rf"(?<!\bin )(?<!\bwithin )\b{_NUM}(?:days?|weeks?|months?|years?)\b"
        r"(?!\s+(?:ago|back|earlier|later|before|after|prior|from now)\b)",
        "data size": rf"\b{_NUM}(?:[kmgt]i?b|bytes?|kilobytes?|megabytes?|gigabytes?|terabytes?)\b",
        "rate": rf"\b{_NUM}(?:(?:requests?|queries|calls|messages|events|frames|jobs|tasks)\s?(?:/|per)\s?"
        r"(?:s|sec|second|min|minute|hour|day)|rps|qps|fps)\b",
        "share": rf"\b{_NUM}(?:%|percent\b)",
    }.items()
}
ATTRIBUTES.update(MEASURES)
# words that say a measured value changed: they change the kinds of value their clause names
MEASURE_CHANGE = re.compile(
    r"\b(?:(?:decreas|increas|reduc|improv|drop+|rais|lower|doubl|halv|bump)(?:e|es|ed|ing)?|rose|risen|fell|"
    r"fallen|grew|grown|went (?:up|down)) (?:\w+ )?(?:to|from|by)\b|\bcurrently (?:at|around|averag\w*|using|uses)\b|"
    r"\bnew (?:\w+ )?(?:limit|rate|value|setting|target|latency|time|size)\b",
    re.I,
)
MEASURE_THRESHOLD = 0.7  # cosine of two statements whose change is only of a measured value: one metric
# ... where that value is a span of days to years: "learning French for 6 months now" after "learning
# Spanish for 2 years" is cosine 0.76, another gym 0.84, the same Fitbit's months 0.86 (all-MiniLM-L6-v2)
SPAN_THRESHOLD = 0.85

# what a general change word changes: the attributes, less words of a place one goes to ("at the office")
_GENERAL = {**ATTRIBUTES, "job": re.compile(rf"\b(?:{_JOB})\b", re.I)}
# change words that belong to one attribute: they change it even where its other words are absent
OWN_CHANGE: dict[str, re.Pattern] = {
    name: re.compile(p, re.I)
    for name, p in {
        # "quitting" only told as under way ("is quitting"), not wished or feared ("thinking about quitting")
        "job": r"\b(?:quit|(?:is|am|are|was|were|'s|'m|'re) quitting|resign\w*|retired|(?:got|was|been|were) fired|"
        r"laid off|hired|promoted|new (?:job|role|position))\b",
        "home": r"\b(?:(?:moved|moving) (?:to|from|in|out|into|back|away|house|abroad|here|there)|relocat\w*|"
        r"new (?:flat|apartment|house|home|place))\b",
        "income": r"\b(?:raise|pay cut)\b",
        "transport": r"\b(?:new (?:car|bike|scooter))\b",
        "plans": r"\b(?:is off(?! to)|called off|cancel+ed|postponed|rescheduled|changed plans)\b",
        "relationship": r"\b(?:divorced|broke up|split up|separated|engaged|married|new (?:partner|girlfriend|boyfriend))\b",
        "injury": r"\b(?:broke(?! up)|injured|hurt|sprained|fractured)\b",
        "illness": r"\b(?:diagnosed|recovered|pregnant)\b",
    }.items()
}
THRESHOLD = (
    0.40  # cosine of the two statements (all-MiniLM-L6-v2: same-attribute pairs 0.41-0.80 on our chats)
)
# a denial ("has never written ...") of an earlier statement: the cosine and the share of the denied
# clause's words the earlier one holds (the 5 pairs found in the calibration chats, BEAM 500K 1-4:
# cosine 0.51-0.70 with all-MiniLM-L6-v2)
DENIAL_THRESHOLD = 0.45
DENIAL_SHARE = 0.6
# "never" in the present perfect: "has never written", "'ve actually never used" (not "had never",
# "would never", "never misses": a time before something else, a wish, a habit)
_NEVER = re.compile(r"\b(?:has|have)\s+(?:\w+\s+)?never\b|'ve\s+(?:\w+\s+)?never\b", re.I)
# a time that is over, before a denial: "growing up, the user has never ..." is no denial of today
_THEN = re.compile(
    r"\b(?:growing up|as a (?:kid|child|teen\w*|student)|back then|in the past|(?:was|were) (?:a kid|young))\b",
    re.I,
)
# before an earlier statement's deed: it was asked about, wished or learned, not done
_NOT_DEED = re.compile(r"\b(?:ask\w*|how|whether|wonder\w*|tips?|learn\w*|help)\b", re.I)


class Denial(NamedTuple):
    """A denial's clause: its word stems, its verb's stem, its last word's stem and its text."""

    stems: frozenset[str]
    verb: str
    last: str
    clause: str


# a comma between digits ("1,500ms") is a thousands separator, not a clause's end
_CLAUSE = re.compile(r"(?<!\d),|,(?!\d)|[;:]|\b(?:so|but|because|while|although|though)\b", re.I)
_OTHERS = re.compile(r"\b(?:his|her|their|(?P<who>[A-Z][a-z]+)'s)\s+$")  # "for his new job": another's change
_NEGATIVE = frozenset({"no longer", "anymore", "any more"})  # change words that are negations themselves
_NOT_DONE = re.compile(r"(?:\bnot|\bnever|n't|\bwould|\bcould|\bshould|\bmight|\bmay)\s+(?:\w+\s+)?$", re.I)
# intent, doubt or a condition before a change word in its clause: it has not happened ("wants to quit",
# "thinking about moving", "if she moved"); lower case only, "Will" and "May" are names and a month
_UNSURE = re.compile(
    r"\b(?:(?:wants?|wanted|wanting|wish(?:es|ed|ing)?|hop(?:es?|ed|ing)|plan(?:s|ned|ning)?|intend(?:s|ed|ing)?|"
    r"tr(?:y|ies|ied|ying)|decid(?:e|es|ed|ing)|going|about|ready|would like|needs?|has|have) to|gonna|"
    r"planning on|thinking (?:about|of)|consider(?:s|ed|ing)?|will|shall|would|could|should|might|may|[Ii]f|"
    r"[Uu]nless|whether|in case|[Ss]uppos(?:e|ing)|[Mm]aybe|[Pp]erhaps|probably|possibly)\b|(?<=\w)'(?:d|ll)\b"
)
# a clause opened by one of these is a condition; "when" and "once" only when it is not told in the past
_IF = re.compile(r"\s*(?:if|unless|suppose|supposing|in case|what if|whenever)\b", re.I)
_WHEN = re.compile(r"\s*(?:when|once)\b", re.I)
_PAST = re.compile(
    r"\b(?:\w+(?<!e)ed|was|were|had|did|got|left|sold|quit|began|broke|took|went|came|became|met)\b", re.I
)
_WINDOW = 40  # characters before a change word read for what undoes it (a bound: long text stays linear)


def denial(text: str, speaker: str = "") -> Denial | None:
    """What ``speaker`` says they have never done, in the first clause told as done (not a condition,
    not a question) that says it in the present perfect ("has never written", "'ve never used"; not
    "had never", "would never", "never misses", nor after a time that is over: "growing up, ..."): the
    clause's word stems (``never``, its adverbs and words without a value off: "the user has never
    written integration tests" -> {"written", "integration", "test"}), its verb (the first word after
    "never" and its adverbs), its last word and its text (whose ``subject`` it is); None where no
    clause says so."""
    if _THEN.search(text):
        return None
    for _, clause in _told_clauses(text):
        if "?" in clause:
            continue
        m = _NEVER.search(clause)
        if m is None:
            continue
        after = [w for w in _words(clause[m.end() :]) if w not in _DENIAL_LIGHT]
        drop = _NO_VALUE | _DENIAL_LIGHT | _stems(speaker)
        said = [w for w in _words(clause) if w not in drop]
        if after and len(set(said)) >= 2:
            return Denial(frozenset(said), after[0], said[-1], clause.strip())
    return None


def attributes(text: str, speaker: str = "") -> frozenset[str]:
    """The attributes a statement of ``speaker`` speaks of (not someone else's: "their jobs")."""
    return frozenset(name for name, pat in ATTRIBUTES.items() if _own(pat, text, speaker))


def changes(text: str, speaker: str = "") -> frozenset[str]:
    """The attributes a statement of ``speaker`` says changed: per clause, those its own change words
    name (``OWN_CHANGE``), and where a general change word (``CHANGE``) stands, those the clause
    speaks of (a place one goes to aside: "started a hobby at the office"); a change word after someone
    else's possessive ("for his new job"), a negation, a modal, an intent ("won't quit", "would move",
    "wants to quit") or in a condition and its consequence ("if she moved to Berlin, ...") changes
    nothing."""
    out: set[str] = set()
    for _, clause in _told_clauses(text):
        out |= _clause_changes(clause, speaker)
    return frozenset(out)


def focus(text: str, speaker: str = "") -> str | None:
    """A change statement's part up to the end of its first clause that says something changed
    (``changes``; the clauses before it kept, as "which has decreased to ..." needs what it is said
    of), or None where that part is the whole text or no clause says so. Linear in the text."""
    for end, clause in _told_clauses(text):
        if _clause_changes(clause, speaker):
            head = text[:end].rstrip(" ,;:")
            return head if head and text[end:].strip(" ,;:.!?") else None
    return None


def _told_clauses(text: str):
    """(end, clause) of each clause of ``text`` told as done: not a condition nor its consequence
    ("if she moved to Berlin, she ..."); ``end``: where the clause ends in ``text``."""
    after_if = False  # the clause after a condition is its consequence: "if she gets it, she moves"
    start = 0
    for m in [*_CLAUSE.finditer(text), None]:
        end = len(text) if m is None else m.start()
        clause = text[start:end]
        cond = _conditional(clause)
        if not (cond or after_if):
            yield end, clause
        after_if = cond
        start = end if m is None else m.end()


def _clause_changes(clause: str, speaker: str) -> set[str]:
    """The attributes one clause told as done says changed (``changes``, per clause)."""
    out = {name for name, pat in OWN_CHANGE.items() if _done(pat, clause, speaker)}
    if _done(MEASURE_CHANGE, clause, speaker):
        out.update(name for name, pat in MEASURES.items() if pat.search(clause))
    if _done(CHANGE, clause, speaker):
        out.update(name for name, pat in _GENERAL.items() if _own(pat, clause, speaker))
    return out


def _conditional(clause: str) -> bool:
    """Whether ``clause`` is a condition: opened by "if", "unless", "whenever", or by "when" / "once"
    not told in the past ("when she starts the new job", not "when she moved")."""
    return bool(_IF.match(clause) or (_WHEN.match(clause) and not _PAST.search(clause)))


def _own(pat: re.Pattern, text: str, speaker: str) -> bool:
    """Whether ``pat`` matches ``text`` other than right after someone else's possessive ("his job")."""
    for m in pat.finditer(text):
        other = _OTHERS.search(text, max(0, m.start() - _WINDOW), m.start())
        if other is None or other.group("who") == speaker:
            return True
    return False


def _done(pat: re.Pattern, clause: str, speaker: str) -> bool:
    """Whether ``pat`` matches ``clause`` as a change of the speaker's that happened: not after someone
    else's possessive, a negation, a modal, an intent or a condition (read ``_WINDOW`` characters back)."""
    for m in pat.finditer(clause):
        lo, at = max(0, m.start() - _WINDOW), m.start()
        other = _OTHERS.search(clause, lo, at)
        negated = m.group(0).lower() not in _NEGATIVE and _NOT_DONE.search(clause, lo, at)
        if (
            (other is None or other.group("who") == speaker)
            and not negated
            and not _UNSURE.search(clause, lo, at)
        ):
            return True
    return False


# who a statement is about when it is not its speaker: a relation, after a possessive ("the user's sister")
RELATIONS = (
    "sisters? brothers? siblings? mother mom mum father dad parents? wife husband partner spouse fianc[eé]e? "
    "girlfriend boyfriend sons? daughters? kids? child children baby friends? boss manager colleagues? coworkers? "
    "co-workers? roommates? flatmates? neighbou?rs? cousins? aunt uncle niece nephew grandma grandmother grandpa "
    "grandfather grandparents in-laws family mentor coach physio therapist doctor dentist teacher dogs? cats? pets? "
    "puppy kitten horse"
).split()
_REL = re.compile(
    r"\s+(?:(?:best|older|younger|little|big|elder|twin|ex-?)\s+)*(?P<rel>"
    + "|".join(RELATIONS)
    + r")\b(?:\s+(?:(?:Dr|Mr|Mrs|Ms|Prof)\.\s+)?(?P<name>(?-i:[A-Z][a-z][\w-]*)))?",
    re.I,
)
_LEAD = re.compile(
    r"^(?:(?:[A-Z][\w']*(?:\s+[\w']+){0,2}\s*[:!]|(?i:update|bad news|good news|also|btw|by the way|so|and|but|well|"
    r"oh|ok|okay|hey|hi|actually|anyway|guess what|fyi|sadly|luckily|unfortunately|finally|quick one)\b[,:!]?)\s*)+"
)
# capitalised words that are no one: articles, pronouns taken apart, times, adverbs
_NO_ONE = frozenset(
    """The A An This That These Those It Its There Here Some Every All Both Each Most Many One Last Next Today Yesterday
    Tomorrow Tonight On In At For After Before When Since From With If As Because Then Now Still Just Really Recently
    Finally Lately Not No Yes Our We Us He She They His Her Their Him Them What Who Which Where Why How Monday Tuesday
    Wednesday Thursday Friday Saturday Sunday January February March April May June July August September October
    November December Mt St Dr Mr Mrs Ms""".split()
)
_AFTER_PREP = re.compile(
    r"\b(?:in|at|to|from|for|of|near|on|by|with|into|via|about|the|a|an|called|named)\s+$", re.I
)
SELF = "<speaker>"  # the subject of a statement about its speaker


@lru_cache(maxsize=256)
def _mentions(speaker: str) -> re.Pattern:
    sp = re.escape(speaker) if speaker else "(?!)"  # no speaker: only "we" speaks of the speaker
    return re.compile(
        rf"(?<!\w)(?P<self>(?i:{sp}))(?P<selfpos>'s)?\b|\b(?P<we>(?i:we|us|our))\b|"
        r"\b(?P<pro>(?i:he|she|they|him|his|her|them|their))\b|\b(?P<name>[A-Z][a-z][\w-]*)(?P<pos>'s)?"
    )


def subject(text: str, speaker: str) -> str | None:
    """Who a statement of ``speaker`` is about: ``SELF`` (the speaker, "we" included), another person
    or pet as a lower-case key (a name, else the relation: "the user's sister" -> "sister", "Bob"
    -> "bob"), or None when it cannot be told (a pronoun: "he"). An empty ``speaker`` is no one named:
    the statement is the speaker's unless it names someone else."""
    speaker = speaker.strip()
    said = f"{speaker} said: "
    s = text[len(said) :] if speaker and text.startswith(said) else text
    s = _LEAD.sub("", s)
    sp = speaker.lower()
    for m in _mentions(speaker).finditer(s):
        rest = s[m.end() :]
        if m.group("self") or m.group("we"):
            own = m.group("selfpos") or (m.group("we") or "").lower() == "our"
            if own and (rel := _REL.match(rest)):
                return (rel.group("name") or rel.group("rel")).lower()
            return SELF
        if m.group("pro"):
            return None
        name = m.group("name")
        if name in _NO_ONE or _AFTER_PREP.search(s[: m.start()]):
            continue
        if sp and (
            re.match(rf"\s+and\s+{re.escape(sp)}\b", rest, re.I)
            or re.search(rf"\b{re.escape(sp)}\s+and\s+$", s[: m.start()], re.I)
        ):
            return SELF  # "Tom and the user moved"
        if m.group("pos") and (rel := _REL.match(rest)):
            return (rel.group("name") or f"{name}'s {rel.group('rel')}").lower()
        return name.lower()
    return SELF


# change words that end a value: a statement with one is no repeat even where it names the old value
_ENDS = re.compile(
    r"\b(?:no longer|any ?more|not|never|left|leaving|sold|stopped|stopping|gave up|giving up|quit\w*|resign\w*|"
    r"retired|fired|laid off|divorced|broke up|split up|separated|called off|cancel+ed|postponed|is off|recovered|"
    r"ex|former\w*|used to|moved (?:out|away|from|back))\b|n't\b",
    re.I,
)
# words that carry no value: what a repeat may add to the earlier statement ("now lives in Paris too")
_NO_VALUE = frozenset(
    "a an the is am are was were be been being has have had do does did in at on to of for from with as by "
    "and or too also still again well really just here there yes very same so it its".split()
)


def _fold(text: str) -> str:
    """``text`` in lower case, spaces collapsed, end punctuation off."""
    return " ".join(text.lower().split()).rstrip(".!? ")


def _words(text: str) -> list[str]:
    """The crude word stems of ``text`` in order (``_stems``)."""
    out = []
    for w in re.findall(r"[a-z0-9]+(?:'[a-z]+)?", text.lower()):
        w = w.removesuffix("'s")
        for suf in ("ing", "ed", "es", "s", "e"):
            if w.endswith(suf) and len(w) - len(suf) >= 3:
                w = w[: -len(suf)]
                break
        out.append(w)
    return out


def _stems(text: str) -> set[str]:
    """Crude word stems of ``text``: lower case, "'s" and one suffix off ("lives", "living" -> "liv")."""
    return set(_words(text))


# what a denial says besides the deed: "never", its adverbs, the speaker's role word (as stems)
_DENIAL_LIGHT = frozenset(_stems("never ever any before actually really yet once up user said"))


def _value(text: str) -> set[str] | None:
    """The stems a change statement says besides its change words (``_NO_VALUE`` off); None where a
    word in it ends a value ("quit", "no longer", "moved from"): the old value may be named there."""
    if _ENDS.search(text):
        return None
    for pat in (CHANGE, MEASURE_CHANGE, *OWN_CHANGE.values()):
        text = pat.sub(" ", text)
    return {w for w in _stems(text) if w not in _NO_VALUE}


def repeats(later: str, earlier: str) -> bool:
    """Whether a change statement ``later`` only repeats ``earlier``: the same text (case and spaces
    folded), or nothing besides its change words that ``earlier`` does not say ("the user now lives in
    Paris too" after "the user lives in Paris"); such a statement supersedes nothing."""
    if _fold(later) == _fold(earlier):
        return True
    value = _value(later)
    return bool(value) and value <= _stems(earlier)


def _denies(denied: Denial, text: str, speaker: str) -> bool:
    """Whether an earlier statement ``text`` says it did what ``denied`` says was never done: in a
    clause told as done, its verb not negated, wished, planned or asked about ("doesn't use", "wants to
    deploy", "asked how to deploy"); the denial's last word ("has never played guitar in public"
    denies no "plays guitar in a band") and most of its words (``DENIAL_SHARE``); and no denial of
    its own."""
    have = _stems(text)
    if denied.last not in have or len(denied.stems & have) < DENIAL_SHARE * len(denied.stems):
        return False
    if denial(text, speaker) is not None or "?" in text:
        return False
    for _, clause in _told_clauses(text):
        for m in re.finditer(r"[a-z0-9]+(?:'[a-z]+)?", clause.lower()):
            if _words(m.group(0)) == [denied.verb] and not _NOT_DEED.search(clause, 0, m.start()):
                lo = max(0, m.start() - _WINDOW)
                if not (_NOT_DONE.search(clause, lo, m.start()) or _UNSURE.search(clause, lo, m.start())):
                    return True
    return False


FACTS_KEPT = 1 << 17  # statements whose ``_facts`` a process keeps (digests and ints: about 35 MB at most)
_facts_kept: OrderedDict[bytes, tuple[int, bytes | None]] = OrderedDict()
_facts_lock = threading.Lock()


def _digest(*parts: str) -> bytes:
    """sha256 of ``parts``, each with its length first (no two tuples give the same bytes)."""
    return hashlib.sha256("".join(f"{len(p)}:{p}" for p in parts).encode("utf-8", "surrogatepass")).digest()


def _subject_key(who: str | None) -> bytes | None:
    """A ``subject`` as ``supersessions`` compares it: its digest (None stays None)."""
    return None if who is None else _digest(who)


def _facts(text: str, speaker: str) -> tuple[int, bytes | None]:
    """A statement's attribute mask (``attributes`` and ``changes``) and its ``subject`` (as
    ``_subject_key``), the regular expressions read once per statement and speaker: a change
    statement is compared with every close statement of the memory, most of them the same from one
    write to the next (5,000 of them in a memory of nine of BEAM's 1M-token conversations). Kept by
    the sha256 of the speaker and text, the subject by its own: no word of a statement stays in the
    process; pure functions of the two, so kept values never decide otherwise."""
    key = _digest(speaker, text)
    with _facts_lock:
        got = _facts_kept.get(key)
        if got is not None:
            _facts_kept.move_to_end(key)
            return got
    got = (_mask(attributes(text, speaker) | changes(text, speaker)), _subject_key(subject(text, speaker)))
    with _facts_lock:
        _facts_kept[key] = got
        if len(_facts_kept) > FACTS_KEPT:
            _facts_kept.popitem(last=False)
    return got


def _mask(names: frozenset[str]) -> int:
    """Attribute names as bits (one per ``ATTRIBUTES`` entry)."""
    return sum(1 << b for b, name in enumerate(ATTRIBUTES) if name in names)


_MEASURE_BITS = _mask(frozenset(MEASURES))
_SPAN_BITS = _mask(frozenset({"span"}))


def supersessions(
    texts: list[str],
    x: np.ndarray,
    order: np.ndarray,
    speakers: list[str],
    *,
    threshold: float = THRESHOLD,
    new: np.ndarray | None = None,
    encode: Callable[[list[str]], np.ndarray] | None = None,
) -> dict[int, int]:
    """Statement i -> the statement j that supersedes it (the first later one that does), for texts [n],
    unit rows x [n, d], ``order`` [n] (when each was said: message position) and ``speakers`` [n]
    (whose statement each is; ``subject`` is read against it). ``new``: the rows that may supersede
    (the statements a write added; default all): the cost is one product of those change statements
    with every row, so a write pays for what it adds. ``encode``: texts -> rows [m, d], the encoder of
    ``x``; with it a change statement that goes on past its change is also compared by its ``focus``
    (the higher cosine counts), at the cost of encoding those parts."""
    n = len(texts)
    if n < 2:
        return {}
    rows = np.arange(n) if new is None else np.asarray(new, np.int64)
    changed = {j: _mask(changes(texts[j], speakers[j])) for j in (int(r) for r in rows)}
    denied = {j: d for j in changed if (d := denial(texts[j], speakers[j]))}
    changes_at = [j for j, m in changed.items() if m or j in denied]
    if not changes_at:
        return {}
    order = np.asarray(order)
    spk = np.unique(np.asarray(speakers, dtype=object), return_inverse=True)[1]
    sims = dot4_gram(np.asarray(x)[changes_at], x)  # [C, n], the same bits on every CPU
    if encode is not None:
        heads = {
            c: h
            for c, j in enumerate(changes_at)
            if changed[j] and (h := focus(texts[j], speakers[j])) is not None
        }
        if heads:
            fx = unit_rows(np.asarray(encode(list(heads.values()))), dtype=np.asarray(x).dtype)
            rows_c = list(heads)
            sims[rows_c] = np.maximum(sims[rows_c], dot4_gram(fx, x))
    # only these rows are read: close enough to a change statement of their own speaker (no other
    # row can be superseded); a cold process reads each one's patterns once
    own = spk[np.asarray(changes_at)][:, None] == spk[None, :]
    close = np.flatnonzero(((sims >= threshold) & own).any(axis=0))
    masks = np.zeros(n, np.int64)
    subj: dict[int, bytes | None] = {}
    for i in close.tolist():
        masks[i], subj[i] = _facts(texts[i], speakers[i])
    out: dict[int, int] = {}
    for c in sorted(range(len(changes_at)), key=lambda c: (order[changes_at[c]], changes_at[c])):
        j = changes_at[c]
        who = subj[j] if j in subj else _facts(texts[j], speakers[j])[1]
        if who is None:
            continue
        shared = masks & changed[j]
        close_enough = np.where(
            (shared & ~_MEASURE_BITS) != 0,
            threshold,
            np.where(
                (shared & ~_SPAN_BITS) != 0, max(threshold, MEASURE_THRESHOLD), max(threshold, SPAN_THRESHOLD)
            ),
        ).astype(sims.dtype)  # compared as ``close`` is: in the cosines' precision
        earlier = (order < order[j]) & (spk == spk[j])
        earlier[j] = False
        hit = earlier & (shared != 0) & (sims[c] >= close_enough)
        for i in np.flatnonzero(hit).tolist():
            if subj[i] == who and i not in out and not repeats(texts[j], texts[i]):
                out[i] = j
        its_own = j in denied and _subject_key(subject(denied[j].clause, speakers[j])) == who
        if its_own:  # the denial is the subject's
            for i in np.flatnonzero(earlier & (sims[c] >= max(threshold, DENIAL_THRESHOLD))).tolist():
                if subj[i] == who and i not in out and _denies(denied[j], texts[i], speakers[i]):
                    out[i] = j
    return out


__all__ = [
    "ATTRIBUTES",
    "CHANGE",
    "DENIAL_SHARE",
    "DENIAL_THRESHOLD",
    "MEASURES",
    "MEASURE_CHANGE",
    "MEASURE_THRESHOLD",
    "SPAN_THRESHOLD",
    "OWN_CHANGE",
    "RELATIONS",
    "SELF",
    "THRESHOLD",
    "attributes",
    "changes",
    "denial",
    "focus",
    "repeats",
    "subject",
    "supersessions",
]
