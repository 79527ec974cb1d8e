"""The live engine's typed state: the user's name, stamps, raw messages and supersessions round-trip
through the catalogue's JSON, copies share nothing, and an older store's stats keys are read into it."""

from __future__ import annotations

from xmemory_gpu.memory.engine_state import KEY, LEGACY_KEYS, EngineState, without_state


def _state() -> EngineState:
    return EngineState(
        open_from=4,
        next_theme_id=2,
        speakers=("the user", "assistant"),
        forgotten=("h1",),
        user_name="Priya",
        user_name_from={"id": "m1", "explicit": True},
        stamped=("m1", "m2"),
        raw=("m3",),
        superseded={"3": [5, "2024-05-01T00:00:00"]},
    )


def test_the_state_round_trips_through_its_json():
    st = _state()
    assert EngineState.from_dict(st.as_dict(), 9) == st
    bare = EngineState.closed(7)
    assert set(bare.as_dict()) == {"open_from", "next_theme_id", "speakers", "forgotten"}
    assert EngineState.from_dict(bare.as_dict(), 7) == bare


def test_a_copy_shares_nothing_mutable():
    st = _state()
    cp = st.copy()
    cp.superseded["3"][0] = 99
    cp.user_name_from["id"] = "other"
    cp.superseded["4"] = [6, None]
    assert st == _state() and cp != st


def test_an_older_stores_stats_keys_are_read_into_the_state():
    st = _state()
    old = {"f_P": 1.5, KEY: {"open_from": 4, "next_theme_id": 2, "speakers": ["the user", "assistant"]}}
    old |= {k: v for k, v in st.as_dict().items() if k in LEGACY_KEYS}
    stats, got = EngineState.split(old, 9)
    assert stats == {"f_P": 1.5}
    assert got.user_name == "Priya" and got.stamped == ("m1", "m2") and got.raw == ("m3",)
    assert got.superseded == {"3": [5, "2024-05-01T00:00:00"]}
    assert without_state(old) == {"f_P": 1.5}


def test_a_bulk_memory_has_no_state():
    stats = {"f_P": 1.0}
    assert EngineState.split(stats, 3) == (stats, None)
