"""Search at the speed of its kernels: what a search caches per bank row (episode line ends,
long messages' passage lines; ``Level.rows_cache``) follows the bank as the live
engine writes it, and the parts a strategy defers (``context.Deferred``: built by the fit only
where their unit does not fit) give the contexts that building them all gives."""

from __future__ import annotations

import numpy as np
import pytest

from xmemory_gpu.config import XMemoryConfig
from xmemory_gpu.construct.pipeline import build_memories
from xmemory_gpu.datasets.locomo import load_locomo
from xmemory_gpu.datasets.synthetic import generate_conversations, write_json
from xmemory_gpu.embed.hashing import HashingEmbedder
from xmemory_gpu.engine import MemoryEngine, scope_key
from xmemory_gpu.memory.hierarchy import bank_of
from xmemory_gpu.retrieve import STRATEGIES, Retriever
from xmemory_gpu.retrieve.context import Deferred, TokenBudget, episode_unit, message_rows, word_floor
from xmemory_gpu.retrieve.passages import Parts

EMB = HashingEmbedder(128)
LONG = " ".join(f"word{i} of the longest story told, about the lake and the boat." for i in range(40))


def _plain(results) -> list[dict]:
    return [{k: v for k, v in r.to_dict().items() if k != "timings"} for r in results]


def _convs(path, n: int, seed: int):
    write_json(generate_conversations(n, seed=seed), path)
    return load_locomo(path)


@pytest.fixture(scope="module")
def bank(tmp_path_factory):
    convs = _convs(tmp_path_factory.mktemp("speed") / "synthetic.json", 3, 5)
    return bank_of(build_memories(convs, EMB, XMemoryConfig()), EMB.dim), convs


def test_row_cache_drops_the_rows_a_put_slice_rewrites(bank):
    bank, _ = bank
    bank = bank.compact()
    calls = []
    lines = bank.msg.rows_cache("test.lines", lambda r: calls.append(r) or bank.msg["text"][r])
    r0 = int(bank.msg.seg.starts[0])
    assert (
        lines[r0] == bank.msg["text"][r0] and lines[r0] == bank.msg["text"][r0] and calls == [r0]
    )  # computed once
    other = int(bank.msg.seg.starts[1])
    assert lines[other] == bank.msg["text"][other]
    sl = bank.slice(0)
    sl.cols["msg"]["text"] = sl.cols["msg"]["text"].copy()
    sl.cols["msg"]["text"][0] = "rewritten in place"
    bank.put_slice(sl)  # same size: in place
    lines = bank.msg.rows_cache("test.lines", lambda r: calls.append(r) or bank.msg["text"][r])
    assert lines[r0] == "rewritten in place"
    n = len(calls)
    assert lines[other] == bank.msg["text"][other] and len(calls) == n  # another memory's row was kept
    grown = bank.slice(0)
    for cols in grown.cols.values():  # twice the rows: the memory moves to the arena's end
        for name, a in cols.items():
            cols[name] = np.concatenate([a, a]) if len(a) else a
    grown.cols["msg"]["text"][-1] = "moved"
    b = bank.put_slice(grown)
    last = int(bank.msg.seg.starts[b] + bank.msg.seg.lengths[b] - 1)
    lines = bank.msg.rows_cache("test.lines", lambda r: bank.msg["text"][r])
    assert lines[last] == "moved" and lines[r0] == bank.msg["text"][r0]


def test_row_norms_follow_the_rows_the_bank_writes(bank):
    bank, _ = bank
    bank = bank.compact()
    direct = lambda lv, rows: np.sqrt(np.einsum("ij,ij->i", lv["x"], lv["x"]))[rows]  # noqa: E731
    lv = bank.sem
    seg = lambda b: np.arange(int(lv.seg.starts[b]), int(lv.seg.starts[b] + lv.seg.lengths[b]))  # noqa: E731
    first = lv.row_norms("x", seg(0))
    assert first.tobytes() == direct(lv, seg(0)).tobytes()
    held = lv.norms["x"]
    assert held[3].sum() == len(seg(0))  # only the rows read are computed, not the bank's
    assert lv.row_norms("x", seg(0)).tobytes() == first.tobytes() and lv.norms["x"][2] is held[2]
    sl = bank.slice(0)
    sl.cols["sem"]["x"] = sl.cols["sem"]["x"].copy()
    sl.cols["sem"]["x"][0] *= 3.0
    bank.put_slice(sl)  # same size: in place
    again = lv.row_norms("x", seg(0))
    assert again.tobytes() == direct(lv, seg(0)).tobytes() and again.tobytes() != first.tobytes()
    assert (
        not held[2].flags.writeable and held[2][seg(0)].tobytes() == first.tobytes()
    )  # a reader's copy stays
    grown = bank.slice(1)
    for cols in grown.cols.values():  # twice the rows: the memory moves, the arena may grow
        for name, a in cols.items():
            cols[name] = np.concatenate([a, a]) if len(a) else a
    b = bank.put_slice(grown)
    lv = bank.sem
    for m in (0, 1, b):
        assert lv.row_norms("x", seg(m)).tobytes() == direct(lv, seg(m)).tobytes()


def test_keyed_row_cache_carries_values_over_renumbering_and_drops_a_deleted_rows(tmp_path):
    """A cache keyed on the columns its value is computed from keeps the values of the rows a delete
    renumbers (a search after a delete does not pay for the whole memory again), recomputes a row whose
    key changed, and keeps nothing of the deleted row."""
    turns = [
        {"role": "user", "content": f"Fact number {i}: the lake was cold on day {i}."} for i in range(12)
    ]
    with MemoryEngine.open(tmp_path / "s", embedder=EMB) as eng:
        for i in range(0, len(turns), 2):
            eng.add(turns[i : i + 2], user_id="u")
        eng.search("lake", user_id="u")
        bank = eng.bank
        calls: list[int] = []

        def fn(r: int) -> str:
            calls.append(r)
            return bank.msg["text"][r].upper()

        cache = bank.msg.rows_cache("test.upper", fn, key=("text",))
        rows = bank.msg.seg.rows(0)
        assert [cache[int(r)] for r in rows] == [t.upper() for t in bank.msg["text"][rows]]
        n = len(calls)
        ids = [u["id"] for u in eng.get_all(user_id="u") if u["type"] == "message"]
        gone = next(u["text"] for u in eng.get_all(user_id="u") if u["id"] == ids[1])
        eng.delete(ids[1], user_id="u")
        eng.update(ids[5], "Fact rewritten: the lake froze.")
        cache = bank.msg.rows_cache("test.upper", fn, key=("text",))
        rows = bank.msg.seg.rows(0)
        assert [cache[int(r)] for r in rows] == [t.upper() for t in bank.msg["text"][rows]]
        assert len(calls) - n == 1  # the updated row alone; the renumbered rows kept theirs
        assert gone.upper() not in [v for v in cache.values if isinstance(v, str)]
        last = ids[-1]
        said = next(u["text"] for u in eng.get_all(user_id="u") if u["id"] == last)
        eng.delete(last, user_id="u")  # its row becomes slack, never read again
        cache = bank.msg.rows_cache("test.upper", fn, key=("text",))
        for held in (cache.values, cache._keys):  # neither the value nor its key keeps a deleted text
            assert not any(gone in str(v) or said in str(v) for v in held if v is not None)
            assert not any(gone.upper() in str(v) or said.upper() in str(v) for v in held if v is not None)
    with pytest.raises(ValueError, match="keyed"):
        bank.msg.rows_cache("test.both", fn, depends=(bank.epi,), key=("text",))
    with pytest.raises(ValueError, match="1-D column"):
        bank.msg.rows_cache("test.x", fn, key=("x",))


def _deferred_units(bank, convs, parts: Parts, n: int = 60) -> list[list]:
    """Per question: the six most similar episodes of its memory, each followed by its deferred parts."""
    qs = [q.question for c in convs for q in c.qa][:n]
    mems = [c.sample_id for c in convs for q in c.qa][:n]
    q_x = EMB.encode(qs)
    out = []
    for q in range(len(qs)):
        rows = bank.epi.seg.rows(bank.index_of(mems[q]))
        sims = bank.epi["x"][rows] @ q_x[q]
        us: list = []
        for e in rows[np.argsort(-sims, kind="stable")][:6]:
            us.append(episode_unit(bank, int(e), 1.0, {}))
            us += parts.episode_parts(int(e), q_x[q], q)
        out.append(us)
    return out


def _counting(units: list[list]) -> list[int]:
    """Wrap every deferred group's ``expand`` (nested ones too) to count the groups built."""
    built = [0]

    def wrap(d: Deferred) -> None:
        inner = d.expand

        def expand():
            built[0] += 1
            out = inner()
            for u in out:
                if type(u) is Deferred:
                    wrap(u)
            return out

        d.expand = expand

    for us in units:
        for u in us:
            if type(u) is Deferred:
                wrap(u)
    return built


def _key(got) -> list:
    return [(ctx, n, [(u.id, u.text, u.tokens, u.message_ids, u.scores) for u in k]) for k, ctx, n in got]


def test_word_floor_counts_the_words_holding_a_letter_or_digit():
    assert [word_floor(t) for t in ["", "a b", " -a  b_ c", "__ x\ny", "é ü 3", "-- .."]] == [
        0,
        2,
        3,
        1,
        3,
        0,
    ]


@pytest.mark.parametrize("budget", [40, 120, 300])
def test_a_group_none_of_whose_parts_could_fit_is_left_unbuilt(bank, budget, monkeypatch):
    """Once the room left is shorter than every part a group would build (date line and text), the
    fit leaves the group unbuilt; the contexts, and the passage rankings spent, are the same as
    building every group whose unit did not fit."""
    bank, convs = bank
    r = Retriever(bank, EMB)
    lazy = Parts(bank, EMB, 8)
    units = _deferred_units(bank, convs, lazy)
    built = _counting(units)
    got = r.budget.contexts(units, budget)
    monkeypatch.setattr(TokenBudget, "_out_of_reach", lambda self, d, room, cut_from: False)
    every = Parts(bank, EMB, 8)
    units = _deferred_units(bank, convs, every)
    built_all = _counting(units)
    want = r.budget.contexts(units, budget)
    assert _key(got) == _key(want)
    assert lazy._ranked == every._ranked
    assert built[0] < built_all[0]


@pytest.mark.parametrize("budget", [None, 40, 120, 300, 600])
def test_deferred_parts_give_the_contexts_building_them_all_gives(bank, budget):
    bank, convs = bank
    r = Retriever(bank, EMB)
    qs = [q.question for c in convs for q in c.qa][:60]
    mems = [c.sample_id for c in convs for q in c.qa][:60]
    q_x = EMB.encode(qs)
    mem_idx = np.array([bank.index_of(m) for m in mems])
    lazy, eager = Parts(bank, EMB, 8), Parts(bank, EMB, 8)  # 8-word passages: many long messages
    lazy_units, eager_units = [], []
    for q in range(len(qs)):
        rows = bank.epi.seg.rows(int(mem_idx[q]))
        sims = bank.epi["x"][rows] @ q_x[q]
        lu, eu = [], []
        for e in rows[np.argsort(-sims, kind="stable")][:6]:
            lu.append(episode_unit(bank, int(e), 1.0, {}))
            eu.append(episode_unit(bank, int(e), 1.0, {}))
            lu += lazy.episode_parts(int(e), q_x[q], q)
            eu += eager.episode(int(e), q_x[q], q)
        lazy_units.append(lu)
        eager_units.append(eu)
    assert any(type(u) is Deferred for us in lazy_units for u in us)
    got = r.budget.contexts(lazy_units, budget)
    want = r.budget.contexts(eager_units, budget)
    assert [
        (ctx, n, [(u.id, u.text, u.tokens, u.message_ids, u.scores) for u in k]) for k, ctx, n in got
    ] == [(ctx, n, [(u.id, u.text, u.tokens, u.message_ids, u.scores) for u in k]) for k, ctx, n in want]
    assert lazy._ranked == eager._ranked  # the same passage rankings were spent, built or not


def test_a_search_after_engine_writes_sees_them(tmp_path):
    conv = _convs(tmp_path / "one.json", 1, 3)[0]
    msgs = [
        {"id": m.id, "speaker": m.speaker, "content": m.text, "timestamp": m.timestamp, "session": m.session}
        for m in conv.messages
    ]
    queries = ["what about the lake and the boat?", conv.qa[0].question]
    with MemoryEngine.open(tmp_path / "s", embedder=EMB) as eng:
        eng.add(msgs[:12], user_id="u")
        for s in STRATEGIES:  # every per-row cache filled
            eng.search(queries, user_id="u", strategy=s, budget_tokens=300)
        new = eng.add([{"speaker": "Alice", "content": LONG}], user_id="u")[0]
        eng.update(msgs[0]["id"], "Quokka sightings by the lake boat at dawn.", user_id="u")
        key = scope_key("u")
        for s in [*STRATEGIES, "chunk-rag:16"]:
            for b in (None, 150, 600):
                live = _plain(eng.retriever.search(queries, key, strategy=s, budget_tokens=b))
                fresh = Retriever(eng.bank.compact(), EMB, eng.config)  # nothing cached
                assert live == _plain(fresh.search(queries, key, strategy=s, budget_tokens=b)), (s, b)
        lines = message_rows(eng.bank)
        b = eng.bank.index[key]
        texts = [lines[int(r)][0] for r in eng.bank.msg.seg.rows(b)]
        assert f"Alice: {LONG}" in texts and any("Quokka" in t for t in texts) and new
        assert sum(msgs[0]["content"] in t for t in texts) == sum(
            m["content"] == msgs[0]["content"] for m in msgs[1:12]
        )


def _strings(v) -> list[str]:
    if isinstance(v, str):
        return [v]
    if isinstance(v, (tuple, list)):
        return [s for x in v for s in _strings(x)]
    return []


def test_what_searches_keep_per_message_holds_its_text_once_at_most(tmp_path):
    """The per-message values a search keeps (``Level.rows_cache``) hold a message's text once at
    most (a long message's passage lines), so a long memory a process searched costs its texts
    once more, not three times."""
    msgs = [{"speaker": "Alice", "content": f"{LONG} Part {i}."} for i in range(6)]
    msgs += [{"speaker": "Bob", "content": f"A short reply number {i} about the boat."} for i in range(6)]
    with MemoryEngine.open(tmp_path / "s", embedder=EMB) as eng:
        eng.add(msgs, user_id="u")
        for s in STRATEGIES:
            for b in (None, 60, 600):
                eng.search(
                    ["what about the lake and the boat?", "the longest story"],
                    user_id="u",
                    strategy=s,
                    budget_tokens=b,
                )
        msg = eng.bank.msg
        rows = msg.seg.rows(eng.bank.index[scope_key("u")])
        texts = sum(len(msg["text"][int(r)]) + len(msg["speaker"][int(r)]) + 2 for r in rows)
        kept = {name: sum(map(len, _strings(rc.values))) for name, rc in msg.derived.items()}
        assert kept["retrieve.message_shape.150"] >= 0.9 * texts  # the long messages' passage lines
        assert all(n <= 1.05 * texts for n in kept.values()), (kept, texts)
        assert sum(kept.values()) <= 1.05 * texts, (kept, texts)
