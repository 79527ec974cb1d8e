"""The one-file-per-memory format (memory/codec.py): a built bank's slices round-trip exactly, derived
theme columns are recomputed, and bytes that break the layout are refused naming the column, by the
codec and by the store (which then quarantines only that memory)."""

from __future__ import annotations

import hashlib
import sqlite3

import numpy as np
import pytest

from xmemory_gpu.config import XMemoryConfig
from xmemory_gpu.construct.pipeline import build_bank
from xmemory_gpu.datasets.locomo import load_locomo
from xmemory_gpu.datasets.synthetic import generate_conversations, write_json
from xmemory_gpu.embed import load_embedder
from xmemory_gpu.engine import MemoryEngine, scope_key
from xmemory_gpu.memory.codec import (
    SliceFormatError,
    check_slice,
    pack_arrays,
    slice_from_bytes,
    slice_to_bytes,
    unpack_arrays,
)
from xmemory_gpu.memory.store import Store, StoreError

SPEC = "hashing:64"


@pytest.fixture(scope="module")
def convs(tmp_path_factory):
    p = write_json(
        generate_conversations(3, seed=11, sessions=(2, 4)), tmp_path_factory.mktemp("c") / "d.json"
    )
    return load_locomo(p)


@pytest.fixture(scope="module")
def bank(convs):
    convs[0].messages[0].text = "odd text: \x00 trailing NUL, é, 漢字, emoji \U0001f600 \x00"
    convs[0].messages[1].text = ""
    return build_bank(convs, load_embedder(SPEC), XMemoryConfig())


def _same(a: np.ndarray, b: np.ndarray) -> bool:
    if a.dtype != b.dtype or a.shape != b.shape:
        return False
    return a.tolist() == b.tolist() if a.dtype.kind == "O" else np.array_equal(a, b, equal_nan=True)


def test_a_built_bank_round_trips_exactly(bank):
    for b in range(bank.n_memories):
        sl = bank.slice(b)
        got = slice_from_bytes(sl.memory_id, slice_to_bytes(sl), sl.stats)
        for lv, cols in sl.cols.items():
            assert list(got.cols[lv]) == list(cols), lv  # every column, in the layout's order
            for name, a in cols.items():
                assert _same(got.cols[lv][name], a), (lv, name)
        check_slice(got, bank.dim)
    assert bank.slice(0).cols["msg"]["text"][0].endswith("\x00")


def test_derived_theme_columns_are_not_written(bank):
    names = set(unpack_arrays(slice_to_bytes(bank.slice(0))))
    assert "sem.x" in names and "theme.id" in names
    assert not {"theme.sum", "theme.x", "theme.count"} & names


def _packed(sl, **change) -> bytes:
    """The slice's bytes with entries replaced (name -> array) or removed (name -> None)."""
    arrays = unpack_arrays(slice_to_bytes(sl))
    for k, v in change.items():
        k = k.replace("__", ".")
        if v is None:
            arrays.pop(k)
        else:
            arrays[k] = v
    return pack_arrays(arrays)


def _bad_cases(sl):
    n_msg = sl.n("msg")
    x = sl.cols["sem"]["x"].copy()
    x[1, 3] = np.nan
    t = sl.cols["msg"]["time"].copy()
    t[0] = 1e20
    idx = sl.cols["sem"]["knn_idx"].copy()
    idx[0, 0] = sl.n("sem") + 5
    msgs = sl.cols["epi"]["msgs"].copy()
    msgs[0, 0] = n_msg
    off = unpack_arrays(slice_to_bytes(sl))["msg.text.off"].copy()
    off[-1] += 7
    return [
        ({"sem__text__utf8": None}, "column sem.text is missing"),
        (
            {"msg__session": sl.cols["msg"]["session"].astype(np.float32)},
            "column msg.session: expected int64",
        ),
        ({"sem__x": x}, "column sem.x: non-finite values in rows \\[1\\]"),
        ({"msg__time": t}, "column msg.time: times outside years 1-9999"),
        ({"sem__knn_idx": idx}, "column sem.knn_idx: row ids outside"),
        ({"epi__msgs": msgs}, "column epi.msgs: row ids outside"),
        ({"msg__text__off": off}, "column msg.text: offsets do not cut"),
        ({"sem__theme": np.full(sl.n("sem"), sl.n("theme"), np.int32)}, "column sem.theme: row ids outside"),
        ({"msg__x": sl.cols["msg"]["x"][:, :10].copy()}, "column msg.x: shape"),
    ]


def test_the_codec_refuses_what_breaks_the_layout(bank):
    sl = bank.slice(1)
    for change, msg in _bad_cases(sl):
        with pytest.raises(SliceFormatError, match=msg):
            check_slice(slice_from_bytes(sl.memory_id, _packed(sl, **change), {}), bank.dim)
    with pytest.raises(SliceFormatError, match="not a memory's columns"):
        slice_from_bytes("m", b"not a container", {})
    data = slice_to_bytes(sl)
    with pytest.raises(SliceFormatError, match="run past the end"):
        slice_from_bytes("m", data[: len(data) // 2], {})
    with pytest.raises(SliceFormatError, match="dtype '\\|O8'"):
        unpack_arrays(data.replace(b'"dtype":"<f4"', b'"dtype":"|O8"', 1))


def test_the_container_holds_numeric_arrays_only():
    with pytest.raises(SliceFormatError, match="cannot be stored"):
        pack_arrays({"a": np.array(["x"], dtype=object)})
    a = {
        "f": np.arange(7, dtype=np.float32).reshape(7, 1),
        "e": np.zeros((0, 3), np.int64),
        "u": np.frombuffer(b"abc", np.uint8),
    }
    got = unpack_arrays(pack_arrays(a))
    assert all(np.array_equal(got[k], v) and got[k].dtype == v.dtype for k, v in a.items())
    got["f"][0, 0] = 5  # writable


def test_the_store_refuses_a_crafted_file_and_quarantines_only_it(tmp_path, bank):
    root = tmp_path / "s"
    st = Store.create(root, dim=bank.dim, embedder=SPEC, config={})
    for b in range(bank.n_memories):
        st.put_slice(bank.slice(b))
    victim = bank.memory_ids[1]
    sl = st.get_slice(victim)
    for change, msg in _bad_cases(sl):
        data = _packed(sl, **change)
        name = st._conn.execute("SELECT arrays_file FROM memories WHERE memory_id = ?", (victim,)).fetchone()[
            0
        ]
        (root / "arrays" / name).write_bytes(data)
        with sqlite3.connect(
            root / "memory.sqlite"
        ) as con:  # a matching checksum: only the columns are wrong
            con.execute(
                "UPDATE memories SET sha256 = ? WHERE memory_id = ?",
                (hashlib.sha256(data).hexdigest(), victim),
            )
        with pytest.raises(StoreError, match=msg):
            st.get_slice(victim)
        assert st.check(victim) is not None and st.check(bank.memory_ids[0]) is None
        loaded = st.load_bank(quarantine=True)
        assert victim in st.quarantined and loaded.memory_ids == [m for m in bank.memory_ids if m != victim]
    st.close()


def test_an_engine_store_keeps_no_text_in_the_catalogue(tmp_path):
    token = "Zyxwquorbplant"
    with MemoryEngine.open(tmp_path / "s", embedder=SPEC) as eng:
        eng.add([{"speaker": "A", "content": f"My locker code is {token}."}], user_id="u")
        sl = eng.store.get_slice(scope_key("u"))
        assert any(token in t for t in sl.cols["msg"]["text"].tolist())
    assert token.encode() not in (tmp_path / "s" / "memory.sqlite").read_bytes()


def test_a_crafted_header_is_refused_in_one_line():
    import json
    import struct

    from xmemory_gpu.memory.codec import MAGIC

    def container(header: bytes) -> bytes:
        head = MAGIC + struct.pack("<Q", len(header)) + header
        return head + b"\0" * (-len(head) % 64) + b"\0" * 256

    with pytest.raises(SliceFormatError, match="header is not valid"):
        unpack_arrays(container(b"[" * 200_000))  # nested past the parser's recursion limit
    deep = {"arrays": [{"name": "a", "dtype": "<f4", "shape": [1] * 70, "offset": 0}]}
    with pytest.raises(SliceFormatError, match="shape"):
        unpack_arrays(container(json.dumps(deep).encode()))
    huge = {"arrays": [{"name": "a", "dtype": "<f8", "shape": [2**40, 0, 2**40], "offset": 0}]}
    with pytest.raises(SliceFormatError, match="shape"):  # empty, but larger than numpy can describe
        unpack_arrays(container(json.dumps(huge).encode()))
    with pytest.raises(SliceFormatError, match="run past the end"):
        unpack_arrays(
            container(
                json.dumps(
                    {"arrays": [{"name": "a", "dtype": "<f8", "shape": [2**40], "offset": 0}]}
                ).encode()
            )
        )
