"""A token budget is filled. The room ``TokenBudget.fit`` leaves once every unit was
tried, counted exactly (the section headers a context really has, not the fixed allowance), goes
to the first unit that did not fit: whole where it fits there, else cut at a word boundary; never
past the budget, and the units taken before are unchanged."""

from __future__ import annotations

import random

import pytest

from xmemory_gpu.retrieve.context import (
    MIN_CUT_TOKENS,
    TokenBudget,
    _line_ends,
    as_part,
    assemble,
    shown_messages,
)
from xmemory_gpu.retrieve.result import RetrievalResult, RetrievedUnit
from xmemory_gpu.tokens import default_counter

TS = 1_700_000_000.0
WORDS = (
    "the assistant recommended a slow smoky sauce with pepper garlic and lemon for the weekend "
    "barbecue because it keeps the chicken tender and takes about four hours in the fridge"
).split()


def _text(n_words: int, seed: int) -> str:
    return " ".join(WORDS[(seed + i) % len(WORDS)] for i in range(n_words))


def _units(budget: TokenBudget, specs: list[tuple[str, str, int, list[str]]]) -> list[RetrievedUnit]:
    units = [
        RetrievedUnit(kind, uid, _text(n, i), 0, 1.0, ids, TS) for i, (kind, uid, n, ids) in enumerate(specs)
    ]
    for u, c in zip(units, budget.count([u.text for u in units])):
        u.tokens = c
    return units


def _context(budget: TokenBudget, units: list[RetrievedUnit], b: int) -> tuple[list[RetrievedUnit], int]:
    ((kept, ctx, n_tok),) = budget.contexts([units], b)
    assert ctx == assemble(kept) and n_tok == budget.tokens.count([ctx])[0]
    return kept, n_tok


def _statement_words(budget: TokenBudget, tokens: int, n: int) -> int:
    """Words (one token each) per statement such that ``n`` statements, with their date lines and
    the section header, come to at most ``tokens``."""
    assert budget.count([" ".join(WORDS)])[0] == len(WORDS)  # one token a word
    head, header = budget.count(["- (2023-11-14)", "Semantic memories:"])
    return (tokens - header) // n - head


def test_a_unit_the_header_allowance_kept_out_is_taken_whole():
    budget = TokenBudget(default_counter())
    b = 300
    words = _statement_words(budget, b, 6)
    units = _units(budget, [("semantic", f"s{i}", words, [f"D1:{i}"]) for i in range(6)])
    kept, n_tok = _context(budget, units, b)
    assert [u.id for u in kept] == [f"s{i}" for i in range(6)]  # the sixth fits once only its header is paid
    assert not any(u.cut for u in kept) and kept[5].text == units[5].text
    assert 0.9 * b <= n_tok <= b


def test_the_room_left_is_filled_by_a_cut_of_the_first_unit_that_did_not_fit():
    budget = TokenBudget(default_counter())
    b = 300
    # four statements come to 87% of the budget and a fifth does not fit whole; neither do the
    # episode and its messages (tried in its place) that follow
    words = _statement_words(budget, int(0.87 * b), 4)
    specs = [("semantic", f"s{i}", words, [f"D1:{i}"]) for i in range(5)]
    specs += [
        ("episode", "e", 900, ["D2:1", "D2:2"]),
        ("message", "D2:1", 700, ["D2:1"]),
        ("message", "D2:2", 70, ["D2:2"]),
    ]
    units = _units(budget, specs)
    for u in units[-2:]:
        as_part(u)
    kept, n_tok = _context(budget, units, b)
    assert [u.id for u in kept] == ["s0", "s1", "s2", "s3", "s4"] and n_tok <= b
    cut = kept[-1]
    assert cut.cut and not any(u.cut for u in kept[:-1])  # the first unit skipped, cut
    assert cut.text.endswith(" ...") and units[4].text.startswith(cut.text.removesuffix(" ..."))  # at a word
    assert cut.tokens >= MIN_CUT_TOKENS and cut.message_ids == ["D1:4"]
    assert 0.9 * b <= n_tok, n_tok


def test_a_unit_whose_parts_were_tried_is_not_cut_its_part_is():
    budget = TokenBudget(default_counter())
    b = 160
    units = _units(
        budget,
        [
            ("semantic", "s0", 60, ["D1:1"]),
            ("episode", "e", 900, ["D2:1", "D2:2"]),
            ("message", "D2:1", 20, ["D2:1"]),
            ("message", "D2:2", 400, ["D2:2"]),
        ],
    )
    for u in units[2:]:
        as_part(u)
    kept, n_tok = _context(budget, units, b)
    assert [u.id for u in kept] == ["s0", "D2:1", "D2:2"]  # not the episode: its short message whole ...
    assert kept[2].cut and not kept[1].cut  # ... and its long one's head in the rest
    assert 0.9 * b <= n_tok <= b


def test_no_cut_below_the_minimum_and_never_past_the_budget():
    budget = TokenBudget(default_counter())
    for b in range(0, 200, 7):
        units = _units(budget, [("semantic", f"s{i}", 25, [f"D1:{i}"]) for i in range(8)])
        kept, n_tok = _context(budget, units, b)
        assert n_tok <= b
        cuts = [u for u in kept if u.cut]
        assert (
            len(cuts) <= 1
            and all(u.tokens >= MIN_CUT_TOKENS for u in cuts)
            and cuts == [u for u in kept[-1:] if u in cuts]
        )
        assert [u.id for u in kept] == [
            f"s{i}" for i in range(len(kept))
        ]  # in order: the whole ones, then the cut
        if len(kept) < 8:  # what is left is less than a cut with its date line, its "..." (and the header)
            assert b - n_tok < MIN_CUT_TOKENS + sum(
                budget.count(["- (2023-11-14)", "...", "Semantic memories:"])
            )


def _block(
    budget: TokenBudget, kind: str, lines: list[str], ids: list[str], *, raw: bool = True
) -> RetrievedUnit:
    u = RetrievedUnit(kind, "e", "\n".join(lines), 0, 1.0, ids, TS, {}, _line_ends(lines) if raw else None)
    u.tokens = budget.count([u.text])[0]
    return u


def test_a_cut_block_of_messages_is_credited_only_with_the_messages_it_shows():
    """A cut block of raw messages keeps the ids of the messages shown whole, and of the one cut
    inside only when at least half its words show (exactly half counts); a message whose text
    holds line breaks (a long assistant answer) is still one message; a block that is not raw
    messages (an LLM-written episode) keeps none; a statement or a lone message counts as a whole
    under the same half rule; a passage keeps its message."""
    budget = TokenBudget(default_counter())
    lines = [
        f"A: {_text(19, 0)}",
        f"B: {_text(9, 1)}\n\n{_text(10, 2)}",
        f"A: {_text(39, 3)}",
        f"B: {_text(19, 4)}",
    ]
    ids = ["D1:1", "D1:2", "D1:3", "D1:4"]
    ep = _block(budget, "episode", lines, ids)
    words = ep.text.split(" ")  # a line break joins the last word of a line and the first of the next
    # line 1: 20 words; line 2: 20 words with a paragraph break; line 3: 40 words
    for shown_words, want in (
        (9, []),
        (10, ["D1:1"]),
        (19, ["D1:1"]),
        (28, ["D1:1"]),
        (29, ids[:2]),
        (56, ids[:2]),
        (57, ids[:3]),
        (len(words), ids),
    ):
        assert shown_messages(ep, " ".join(words[:shown_words])) == want, shown_words
    cut = budget._cut(ep, 30)
    assert cut.cut and cut.tokens <= 30 and cut.message_ids == ["D1:1"]
    llm = _block(budget, "episode", lines, ids, raw=False)
    assert shown_messages(llm, llm.text) == [] and budget._cut(llm, 30).message_ids == []
    stmt = RetrievedUnit("semantic", "s", _text(20, 0), 0, 1.0, ["D1:1", "D1:2"], TS)
    assert shown_messages(stmt, _text(10, 0)) == ["D1:1", "D1:2"] and shown_messages(stmt, _text(9, 0)) == []
    one = _block(budget, "message", [f"A: {_text(59, 0)}"], ["D1:9"])
    assert budget._cut(one, 40).message_ids == ["D1:9"] and budget._cut(one, 20).message_ids == []
    part = RetrievedUnit("message", "D1:9#p2", _text(60, 0), 0, 1.0, ["D1:9"], TS, passage=2)
    assert shown_messages(part, _text(5, 0)) == ["D1:9"]


def test_a_result_counts_only_what_its_cut_unit_shows():
    """Through ``contexts``: a result's message ids shrink with its cut episode."""
    budget = TokenBudget(default_counter())
    words = _statement_words(budget, int(0.6 * 300), 3)
    units = _units(budget, [("semantic", f"s{i}", words, [f"D1:{i}"]) for i in range(3)])
    units.append(
        _block(budget, "episode", [f"A: {_text(60, i)}" for i in range(6)], [f"D2:{i}" for i in range(6)])
    )
    ((kept, _, n_tok),) = budget.contexts([units], 300)
    assert kept[-1].cut and n_tok <= 300
    result = RetrievalResult("q", "m", "x", kept, assemble(kept), n_tok, budget.name)
    shown = shown_messages(units[-1], kept[-1].text.removesuffix(" ..."))
    assert shown[:1] == ["D2:0"] and len(shown) < 6  # about 100 tokens left: a message or two of the six
    assert result.message_ids == ["D1:0", "D1:1", "D1:2", *shown]
    assert "message_ends" not in result.to_dict()["units"][-1]


def test_word_level_counts_equal_the_tokenizer_on_whole_texts():
    """With an additive counter a text's count is the sum over its space-separated words, each word
    tokenized once: equal to the tokenizer's count of the whole text, odd characters included."""
    from xmemory_gpu.retrieve import context
    from xmemory_gpu.tokens import HFTokenizerCounter, WhitespaceCounter

    tok = default_counter()
    if not isinstance(tok, HFTokenizerCounter):
        pytest.skip("the default WordPiece tokenizer is not installed")
    assert tok.additive
    rng = random.Random(0)
    pieces = [
        "Caroline:",
        "went",
        "to",
        "St.",
        "Mary's",
        "école",
        "naïve",
        "東京都",
        "🙂",
        "don't",
        "e.g.",
        "3.5km",
        "a" * 130,
        "x\x1fy",
        "nbsp\u00a0here",
        "line\u2028sep",
        "tab\there",
        "new\nline",
        "",
        "ZWJ\u200dx",
        "...",
        "Ω≈ç√",
        "co-operate",
        "\u0301accent",
        "¿Qué?",
        "ﬁ",
        "\x85",
        "\r\n",
    ]
    texts = [" ".join(rng.choice(pieces) for _ in range(rng.randint(0, 40))) for _ in range(300)]
    texts += ["", " ", "  double  spaces  ", "trailing ", " leading"]
    for counter in (tok, WhitespaceCounter()):
        tb = context.TokenBudget(counter)
        got = tb.count(texts)
        assert got == counter.count(texts)
        assert tb.count(texts[::-1]) == got[::-1]  # cached texts and words give the same counts


def test_each_distinct_word_is_tokenized_once():
    """A long text and its parts (an episode, its messages, their passages) cost the tokenizer their
    distinct words once, not their characters again at every level."""
    from xmemory_gpu.retrieve import context
    from xmemory_gpu.tokens import WhitespaceCounter

    class Recording(WhitespaceCounter):
        def __init__(self) -> None:
            self.seen: list[str] = []

        def count(self, texts: list[str]) -> list[int]:
            self.seen += texts
            return super().count(texts)

    rec = Recording()
    tb = context.TokenBudget(rec)
    lines = [f"Speaker: the plan for day {i} is the same plan as before" for i in range(50)]
    episode = "\n".join(lines)
    assert tb.count([episode]) == [len(episode.split())]
    assert sorted(rec.seen) == sorted(set(episode.split(" ")))  # each distinct word once
    n = len(rec.seen)
    assert tb.count(lines) == [len(x.split()) for x in lines]
    assert len(rec.seen) == n  # every word of the lines was met in the episode: nothing tokenized again


def test_only_tokenizers_that_split_at_whitespace_count_by_word(tmp_path):
    """A tokenizer counts as additive only when the sum over words is its count: not with an added token
    holding a space, nor with a normalizer that is not character by character."""
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers

    from xmemory_gpu.retrieve import context
    from xmemory_gpu.tokens import HFTokenizerCounter

    def counter(name: str, *, added: list[str] = (), norm=None) -> HFTokenizerCounter:
        tok = Tokenizer(models.WordLevel({"[UNK]": 0, "new": 1, "york": 2, "a": 3}, unk_token="[UNK]"))
        tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
        if norm is not None:
            tok.normalizer = norm
        tok.add_tokens(list(added))
        tok.save(str(tmp_path / f"{name}.json"))
        return HFTokenizerCounter(tmp_path / f"{name}.json", name)

    plain = counter("plain", norm=normalizers.Sequence([normalizers.Lowercase(), normalizers.NFD()]))
    phrase = counter("phrase", added=["new york"])
    nfkc = counter("nfkc", norm=normalizers.NFKC())
    assert plain.additive and not phrase.additive and not nfkc.additive
    text = "new york a"
    assert phrase.count([text]) == [2]  # "new york" is one added token: not the sum of its words
    for c in (plain, phrase, nfkc):
        assert context.TokenBudget(c).count([text, "New York", ""]) == c.count([text, "New York", ""])


def test_token_counts_under_concurrent_searches(monkeypatch):
    """Searches share a retriever's TokenBudget: with tiny caches cleared all the time by four
    threads (and the tokenizer handing the GIL over, as a native one does), every count stays right
    and no read misses a cleared entry."""
    import threading
    import time

    from xmemory_gpu.retrieve import context
    from xmemory_gpu.tokens import WhitespaceCounter

    class HandsOver(WhitespaceCounter):
        def count(self, texts: list[str]) -> list[int]:
            time.sleep(0)
            return super().count(texts)

    monkeypatch.setattr(context, "COUNTS_MAX", 8)
    monkeypatch.setattr(context, "WORDS_MAX", 8)
    tb = context.TokenBudget(HandsOver())
    errors: list[str] = []

    def work(seed: int) -> None:
        rng = random.Random(seed)
        try:
            for _ in range(3000):
                texts = [
                    " ".join(rng.choice("abcdefghijklmnop") for _ in range(rng.randint(1, 6)))
                    for _ in range(5)
                ]
                assert tb.count(texts) == [len(t.split()) for t in texts]
        except Exception as exc:  # noqa: BLE001 - collected for the assertion below
            errors.append(repr(exc))

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
