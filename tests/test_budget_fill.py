"""Issue 21: a token budget is filled. The room ``TokenBudget.fit`` leaves once every unit was
tried, counted exactly (the section headers a context really has, not the fixed allowance), goes
to the first unit that did not fit: whole where it fits there, else cut at a word boundary; never
past the budget, and the units taken before are unchanged."""

from __future__ import annotations

from xmemory_gpu.retrieve.context import MIN_CUT_TOKENS, TokenBudget, as_part, assemble, shown_messages
from xmemory_gpu.retrieve.result import RetrievedUnit
from xmemory_gpu.tokens import default_counter

TS = 1_700_000_000.0
WORDS = ("the assistant recommended a slow smoky sauce with pepper garlic and lemon for the weekend "
         "barbecue because it keeps the chicken tender and takes about four hours in the fridge").split()


def _text(n_words: int, seed: int) -> str:
    return " ".join(WORDS[(seed + i) % len(WORDS)] for i in range(n_words))


def _units(budget: TokenBudget, specs: list[tuple[str, str, int, list[str]]]) -> list[RetrievedUnit]:
    units = [RetrievedUnit(kind, uid, _text(n, i), 0, 1.0, ids, TS) for i, (kind, uid, n, ids) in enumerate(specs)]
    for u, c in zip(units, budget.count([u.text for u in units])):
        u.tokens = c
    return units


def _context(budget: TokenBudget, units: list[RetrievedUnit], b: int) -> tuple[list[RetrievedUnit], int]:
    (kept, ctx, n_tok), = budget.contexts([units], b)
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
    assert not any(u.scores.get("cut") for u in kept) and kept[5].text == units[5].text
    assert 0.9 * b <= n_tok <= b


def test_the_room_left_is_filled_by_a_cut_of_the_first_unit_that_did_not_fit():
    budget = TokenBudget(default_counter())
    b = 300
    # four statements come to 87% of the budget and a fifth does not fit whole; neither do the
    # episode and its messages (tried in its place) that follow
    words = _statement_words(budget, int(0.87 * b), 4)
    specs = [("semantic", f"s{i}", words, [f"D1:{i}"]) for i in range(5)]
    specs += [("episode", "e", 900, ["D2:1", "D2:2"]), ("message", "D2:1", 700, ["D2:1"]), ("message", "D2:2", 70, ["D2:2"])]
    units = _units(budget, specs)
    for u in units[-2:]:
        as_part(u)
    kept, n_tok = _context(budget, units, b)
    assert [u.id for u in kept] == ["s0", "s1", "s2", "s3", "s4"] and n_tok <= b
    cut = kept[-1]
    assert cut.scores.get("cut") and not any(u.scores.get("cut") for u in kept[:-1])  # the first unit skipped, cut
    assert cut.text.endswith(" ...") and units[4].text.startswith(cut.text.removesuffix(" ..."))  # at a word
    assert cut.tokens >= MIN_CUT_TOKENS and cut.message_ids == ["D1:4"]
    assert 0.9 * b <= n_tok, n_tok


def test_a_unit_whose_parts_were_tried_is_not_cut_its_part_is():
    budget = TokenBudget(default_counter())
    b = 160
    units = _units(budget, [("semantic", "s0", 60, ["D1:1"]), ("episode", "e", 900, ["D2:1", "D2:2"]),
                            ("message", "D2:1", 20, ["D2:1"]), ("message", "D2:2", 400, ["D2:2"])])
    for u in units[2:]:
        as_part(u)
    kept, n_tok = _context(budget, units, b)
    assert [u.id for u in kept] == ["s0", "D2:1", "D2:2"]  # not the episode: its short message whole ...
    assert kept[2].scores.get("cut") and not kept[1].scores.get("cut")  # ... and its long one's head in the rest
    assert 0.9 * b <= n_tok <= b


def test_no_cut_below_the_minimum_and_never_past_the_budget():
    budget = TokenBudget(default_counter())
    for b in range(0, 200, 7):
        units = _units(budget, [("semantic", f"s{i}", 25, [f"D1:{i}"]) for i in range(8)])
        kept, n_tok = _context(budget, units, b)
        assert n_tok <= b
        cuts = [u for u in kept if u.scores.get("cut")]
        assert len(cuts) <= 1 and all(u.tokens >= MIN_CUT_TOKENS for u in cuts) and cuts == [u for u in kept[-1:] if u in cuts]
        assert [u.id for u in kept] == [f"s{i}" for i in range(len(kept))]  # in order: the whole ones, then the cut
        if len(kept) < 8:  # what is left is less than a cut with its date line, its "..." (and the header)
            assert b - n_tok < MIN_CUT_TOKENS + sum(budget.count(["- (2023-11-14)", "...", "Semantic memories:"]))


def test_a_cut_block_of_messages_is_credited_only_with_the_messages_it_shows():
    """A cut episode (one line per message) keeps the ids of its lines shown whole, and of the line
    cut inside only when at least half its words are shown; a block whose lines are not one per
    message (an LLM-written episode) keeps none; a single message keeps its own."""
    budget = TokenBudget(default_counter())
    lines = [f"A: {_text(n, i)}" for i, n in enumerate((20, 20, 40, 20))]
    ids = ["D1:1", "D1:2", "D1:3", "D1:4"]
    ep = RetrievedUnit("episode", "e", "\n".join(lines), 0, 1.0, ids, TS)
    ep.tokens = budget.count([ep.text])[0]
    for shown_words, want in ((10, []), (21, ["D1:1"]), (41 + 10, ["D1:1", "D1:2"]), (41 + 25, ids[:3]), (200, ids)):
        shown = " ".join(ep.text.split(" ")[:shown_words])
        assert shown_messages(ep, shown) == want, shown_words
    cut = budget._cut(ep, 30)
    assert cut.scores.get("cut") and cut.tokens <= 30 and cut.message_ids == ["D1:1"]  # 27 words: line 1 whole, line 2 a third
    summary = RetrievedUnit("episode", "e", _text(60, 0), 0, 1.0, ids, TS)
    summary.tokens = budget.count([summary.text])[0]
    assert budget._cut(summary, 30).message_ids == []
    one = RetrievedUnit("message", "D1:9", _text(60, 0), 0, 1.0, ["D1:9"], TS)
    one.tokens = budget.count([one.text])[0]
    assert budget._cut(one, 20).message_ids == ["D1:9"]
