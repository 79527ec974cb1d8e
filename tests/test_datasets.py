"""LoCoMo loader (real dev split and each kind of bad input) and the synthetic generator."""

from __future__ import annotations

import copy
import json

import pytest

from xmemory_gpu.datasets.locomo import DatasetError, load_locomo
from xmemory_gpu.datasets.synthetic import generate_conversations, write_json


def test_dev_split_counts_and_captions(locomo_path):
    convs = load_locomo(locomo_path)
    assert len(convs) == 6
    assert sum(len(c.messages) for c in convs) == 3435
    assert sum(len(c.qa) for c in convs) == 1157
    msgs = [m for c in convs for m in c.messages]
    assert any("[shares a photo:" in m.text for m in msgs)
    for c in convs:
        ts = [m.timestamp for m in c.messages]
        assert ts == sorted(ts) and ts[0] > 1.0e9  # session date-times parsed (seconds since epoch)
        assert len({m.id for m in c.messages}) == len(c.messages)


def _one(tmp_path, conv, name="bad.json"):
    p = tmp_path / name
    p.write_text(json.dumps([conv]))
    return p


@pytest.fixture
def good():
    return generate_conversations(1, seed=3)[0]


@pytest.mark.parametrize(
    "mutate, field",
    [
        (
            lambda c: [c["conversation"].pop(k) for k in list(c["conversation"]) if k.startswith("session_")],
            "no session_N",
        ),
        (lambda c: c["conversation"]["session_1"][0].__setitem__("text", ""), "text: missing or empty"),
        (
            lambda c: c["conversation"].__setitem__("session_1_date_time", "sometime in May"),
            "session_1_date_time: cannot parse",
        ),
        (lambda c: c["conversation"]["session_1"][0].pop("dia_id"), "dia_id: missing"),
        (lambda c: c.pop("sample_id"), "sample_id"),
    ],
)
def test_bad_input_names_file_and_field(tmp_path, good, mutate, field):
    conv = copy.deepcopy(good)
    mutate(conv)
    p = _one(tmp_path, conv)
    with pytest.raises(DatasetError) as err:
        load_locomo(p)
    assert str(p) in str(err.value) and field in str(err.value)


def test_malformed_json(tmp_path):
    p = tmp_path / "broken.json"
    p.write_text('[{"sample_id": "x",')
    with pytest.raises(DatasetError, match=r"broken\.json: malformed JSON at line 1"):
        load_locomo(p)


def test_synthetic_is_seeded_and_loadable(tmp_path):
    a, b = generate_conversations(5, seed=9), generate_conversations(5, seed=9)
    assert a == b and a != generate_conversations(5, seed=10)
    write_json(a, tmp_path / "s.json")
    convs = load_locomo(tmp_path / "s.json")
    assert len(convs) == 5
    for c in convs:
        ids = {m.id for m in c.messages}
        assert c.qa and all(set(q.evidence) <= ids for q in c.qa)
        assert len({m.session for m in c.messages}) >= 2
