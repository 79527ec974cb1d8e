"""The store's file format (ops/columns): the C++ path gives the reference's bytes and arrays on fresh
random columns (every dtype the format holds, empty, 0-d, non-contiguous and big-endian arrays, texts
with every kind of character), takes the plain case itself, and for anything else (a name JSON escapes,
a lone surrogate, a crafted header) gives what the reference gives, value or message."""

from __future__ import annotations

import json
import struct

import numpy as np
import pytest

from xmemory_gpu.ops import available_backends, columns
from xmemory_gpu.ops.columns import reference

needs_cpu = pytest.mark.skipif(
    not available_backends()["cpu"].available, reason="the C++ module is not built"
)
DTYPES = [np.float32, np.float64, np.int32, np.int64, np.uint8]
PIECES = ["dog", "", "café", "漢字", "\U0001f600", "\x00", "e\u0301", "a\nb", '"q"', "back\\slash", "z" * 300]


def _arrays(rng: np.random.Generator) -> tuple[list[str], list[np.ndarray]]:
    names, arrays = [], []
    for i in range(int(rng.integers(0, 12))):
        dt = DTYPES[int(rng.integers(len(DTYPES)))]
        shape = tuple(int(s) for s in rng.integers(0, 5, size=int(rng.integers(0, 4))))
        a = (rng.standard_normal(shape) * 100).astype(dt)
        kind = rng.integers(4)
        if kind == 1 and a.ndim == 2:
            a = a[:, ::2]  # not contiguous
        elif kind == 2:
            a = a.astype(a.dtype.newbyteorder(">"))  # big-endian: stored little-endian
        names.append(f"lv{i}.col_{rng.integers(100)}")
        arrays.append(a)
    return names, arrays


def _texts(rng: np.random.Generator) -> list[str]:
    return [
        "".join(str(rng.choice(PIECES)) for _ in range(int(rng.integers(0, 6))))
        for _ in range(int(rng.integers(0, 30)))
    ]


def _same(a: dict[str, np.ndarray], b: dict[str, np.ndarray]) -> bool:
    return list(a) == list(b) and all(
        x.dtype == y.dtype
        and x.shape == y.shape
        and x.strides == y.strides
        and x.flags.writeable == y.flags.writeable
        and x.flags.aligned == y.flags.aligned
        and np.array_equal(x, y)
        for x, y in zip(a.values(), b.values())
    )


def _views(data: bytes, backend: str) -> dict[str, np.ndarray]:
    (n,) = struct.unpack_from("<Q", data, 8)
    return columns.container_views(
        json.loads(data[16 : 16 + n])["arrays"], bytearray(data), columns.aligned(16 + n), backend=backend
    )


def _outcome(fn, *args, **kw):
    try:
        return "ok", fn(*args, **kw)
    except (ValueError, UnicodeDecodeError) as exc:
        return type(exc).__name__, str(exc)


@needs_cpu
@pytest.mark.parametrize("seed", range(40))
def test_containers_equal_the_reference(seed):
    rng = np.random.default_rng(seed)
    names, arrays = _arrays(rng)
    data = columns.pack_arrays(names, arrays, backend="cpu")
    assert data == columns.pack_arrays(names, arrays, backend="reference")
    pieces, size = columns.container_pieces(names, arrays)  # what a streamed file write takes
    assert b"".join(pieces) == data and size == len(data)
    assert len(data) % 64 == 0 and data[:8] == columns.MAGIC
    got = _views(data, "cpu")
    assert _same(got, _views(data, "reference"))
    for name, a in zip(names, arrays):  # the values, little-endian, 0-d as shape [1]
        assert np.array_equal(got[name], a.reshape(a.shape or (1,))), name


@needs_cpu
@pytest.mark.parametrize("seed", range(40))
def test_text_columns_equal_the_reference(seed):
    texts = _texts(np.random.default_rng(seed))
    raw, off = columns.join_utf8(texts, backend="cpu")
    ref_raw, ref_off = columns.join_utf8(texts, backend="reference")
    assert raw.dtype == np.uint8 and off.dtype == np.int64 and off.shape == (len(texts) + 1,)
    assert raw.tobytes() == ref_raw.tobytes() and np.array_equal(off, ref_off)
    assert raw.flags.writeable == ref_raw.flags.writeable and off.flags.writeable == ref_off.flags.writeable
    back = columns.split_utf8(raw.tobytes(), off, backend="cpu")
    assert (
        back.dtype == object
        and back.tolist() == texts == columns.split_utf8(raw.tobytes(), off, backend="reference").tolist()
    )


@needs_cpu
def test_the_plain_case_runs_in_cpp():
    """The fast path is taken (not the reference behind it) on what a build writes."""
    from xmemory_gpu import _C

    rng = np.random.default_rng(0)
    names, arrays = (
        ["msg.x", "sem.theme"],
        [rng.standard_normal((3, 4)).astype(np.float32), np.arange(3, dtype=np.int32)],
    )
    assert _C.pack_arrays(names, arrays) == reference.pack_arrays(names, arrays)
    assert _C.join_utf8(["a", "漢字"]) is not None
    data = reference.pack_arrays(names, arrays)
    (n,) = struct.unpack_from("<Q", data, 8)
    assert (
        _C.container_views(
            json.loads(data[16 : 16 + n])["arrays"], bytearray(data), reference.aligned(16 + n)
        )
        is not None
    )


@needs_cpu
def test_what_the_cpp_path_hands_back_gives_the_reference_result():
    odd = ["caf\u00e9", 'q"uote', "back\\slash", "tab\there", "\x7f", "\ud800"]
    arrays = [np.arange(3, dtype=np.int64)] * len(odd)
    assert columns.pack_arrays(odd, arrays, backend="cpu") == columns.pack_arrays(
        odd, arrays, backend="reference"
    )

    class Sub(str):
        pass

    for texts in (["ok", "lone \ud800 surrogate"], [Sub("sub"), "x"], [3, None, 2.5]):
        a, b = columns.join_utf8(texts, backend="cpu"), columns.join_utf8(texts, backend="reference")
        assert a[0].tobytes() == b[0].tobytes() and np.array_equal(a[1], b[1])
    raw, off = columns.join_utf8(["lone \ud800"], backend="reference")
    assert columns.split_utf8(raw.tobytes(), off, backend="cpu").tolist() == ["lone \ud800"]


@needs_cpu
@pytest.mark.parametrize("dtype", [np.int8, np.bool_, np.float16, np.complex64, np.uint32, object])
def test_a_dtype_the_format_does_not_hold_is_refused_alike(dtype):
    arrays = [np.zeros(2, np.float32), np.zeros(2, dtype)]
    cpu, ref = (_outcome(columns.pack_arrays, ["a", "b"], arrays, backend=b) for b in ("cpu", "reference"))
    assert cpu == ref and cpu[0] == "ColumnsError" and "array b: dtype" in cpu[1]


@needs_cpu
def test_bad_text_bytes_are_refused_alike():
    for raw, off in (
        (b"\xff\xfe", [0, 2]),
        (b"ab\xc3", [0, 3]),
        (b"abc", [0, 2, 1, 3]),
        (b"abc", [0, 2]),
        (b"abc", [1, 3]),
        (b"", []),
    ):
        off = np.array(off, np.int64)
        cpu, ref = (_outcome(columns.split_utf8, raw, off, backend=b) for b in ("cpu", "reference"))
        assert cpu[0] == ref[0] != "ok", (raw, off)
        if cpu[0] == "UnicodeDecodeError":
            assert cpu[1] == ref[1]


@needs_cpu
@pytest.mark.parametrize(
    "entry",
    [
        {"name": "a", "dtype": "<f4", "shape": [2], "offset": 0},
        {"name": "a", "dtype": "<f4", "shape": [True, 2], "offset": 0},
        {"name": "a", "dtype": "<f4", "shape": [2.0], "offset": 0},
        {"name": "a", "dtype": "<f4", "shape": ["2"], "offset": "0"},
        {"name": "a", "dtype": "<f4", "shape": [-1], "offset": 0},
        {"name": "a", "dtype": "<f4", "shape": [2], "offset": -64},
        {"name": "a", "dtype": ">f4", "shape": [2], "offset": 0},
        {"name": "a", "dtype": "|O", "shape": [2], "offset": 0},
        {"name": 7, "dtype": "<i8", "shape": [2], "offset": 0},
        {"name": "a", "dtype": "<f8", "shape": [2**40], "offset": 0},
        {"name": "a", "dtype": "<f8", "shape": [2**40, 0, 2**40], "offset": 0},
        {"name": "a", "dtype": "<f8", "shape": [2**70], "offset": 0},
        {"name": "a", "dtype": "<f4", "shape": [1] * 70, "offset": 0},
        {"name": "a", "dtype": "<f4", "shape": [1] * 40, "offset": 0},
        {"name": "a", "dtype": "<u1", "shape": [0], "offset": 256},
        {"name": "a", "dtype": "|u1", "shape": [0], "offset": 256},
        {"name": "a", "dtype": "|u1", "shape": [1], "offset": 256},
        {"name": "a", "dtype": "<f4", "shape": [2]},
        {"name": "a", "dtype": "<f4\u0000x", "shape": [2], "offset": 0},
        {"name": "a", "dtype": "<f4", "shape": [3, 0], "offset": 0},
        {"name": "a", "dtype": "<f8", "shape": [2, 0, 3], "offset": 64},
        {"name": "a", "dtype": "<i4", "shape": [2], "offset": 1},
        {"name": "a", "dtype": "<f4", "shape": [2], "offset": 2**63 - 1},
        {"name": "a", "shape": [2], "offset": 0},
        ["not", "a", "dict"],
        None,
    ],
)
@pytest.mark.parametrize("base", [0, 64, 3, -32, 256, 300, 2**62])
def test_crafted_header_entries_are_read_or_refused_alike(entry, base):
    buf = bytearray(256)
    cpu, ref = (
        _outcome(columns.container_views, [entry, entry], buf, base, backend=b) for b in ("cpu", "reference")
    )
    assert cpu[0] == ref[0], (cpu, ref)
    if cpu[0] == "ok":
        assert _same(cpu[1], ref[1])
    else:
        assert cpu[1] == ref[1]
    assert _outcome(columns.container_views, {"not": "a list"}, buf, base, backend="cpu") == _outcome(
        columns.container_views, {"not": "a list"}, buf, base, backend="reference"
    )


# ---- the value checks' fast yes (check_slice) --------------------------------------------------------


@pytest.fixture(scope="module")
def built_slices(tmp_path_factory):
    from xmemory_gpu.construct.pipeline import build_slices
    from xmemory_gpu.datasets.locomo import load_locomo
    from xmemory_gpu.datasets.synthetic import generate_conversations, write_json
    from xmemory_gpu.embed import load_embedder

    convs = load_locomo(
        write_json(
            generate_conversations(4, seed=5, sessions=(2, 3)), tmp_path_factory.mktemp("c") / "d.json"
        )
    )
    return build_slices(convs, load_embedder("hashing:32"))


def _damaged(sl, rng: np.random.Generator):
    """A copy of ``sl`` with one value of one checked column broken (or left whole)."""
    from xmemory_gpu.memory.bank import MemorySlice

    cols = {lv: {k: a.copy() for k, a in c.items()} for lv, c in sl.cols.items()}
    n = {lv: len(c["x"]) if "x" in c else len(c["id"]) for lv, c in cols.items()}
    choice = int(rng.integers(9))
    pick = lambda a: tuple(int(rng.integers(s)) for s in a.shape)  # noqa: E731
    if choice == 0:
        lv, name, target = [
            ("epi", "msgs", "msg"),
            ("sem", "theme", "theme"),
            ("sem", "knn_idx", "sem"),
            ("theme", "knn_idx", "theme"),
            ("msg", "psg", "psg"),
            ("sem", "epis", "epi"),
        ][int(rng.integers(6))]
        if cols[lv][name].size:
            cols[lv][name][pick(cols[lv][name])] = rng.choice([n[target], -2, -1, 2**31 - 1])
    elif choice == 1:
        lv, name = [("msg", "x"), ("sem", "x"), ("theme", "x"), ("epi", "x")][int(rng.integers(4))]
        if cols[lv][name].size:
            cols[lv][name][pick(cols[lv][name])] = rng.choice([np.nan, np.inf, -np.inf])
    elif choice == 2:
        lv, name = [("msg", "time"), ("epi", "start"), ("sem", "time")][int(rng.integers(3))]
        if cols[lv][name].size:
            cols[lv][name][pick(cols[lv][name])] = rng.choice(
                [np.nan, np.inf, -np.inf, 3e11, -7e10, 0.0, 253402300799.0]
            )
    elif choice == 3:
        lv = ["sem", "theme"][int(rng.integers(2))]
        if cols[lv]["knn_sim"].size:
            cols[lv]["knn_sim"][pick(cols[lv]["knn_sim"])] = rng.choice([np.nan, np.inf, -np.inf])
    elif choice == 4 and cols["psg"]["msg"].size > 1:
        cols["psg"]["msg"] = cols["psg"]["msg"][::-1].copy()
    elif choice == 5 and (cols["msg"]["psg"] >= 0).any():
        i = int(np.flatnonzero(cols["msg"]["psg"] >= 0)[0])
        cols["msg"]["psg"][i] = (cols["msg"]["psg"][i] + 1) % max(n["psg"], 1)
    elif choice == 6:
        cols["sem"]["theme"] = cols["sem"]["theme"].astype(np.int64)  # another dtype: the reference decides
    return MemorySlice(sl.memory_id, cols, sl.stats)


@needs_cpu
@pytest.mark.parametrize("seed", range(30))
def test_the_fast_yes_of_check_slice_agrees_with_its_checks(built_slices, seed, monkeypatch):
    from xmemory_gpu.memory.codec import SliceFormatError, check_slice

    rng = np.random.default_rng(seed)
    for sl in built_slices:
        bad = _damaged(sl, rng)
        got = []
        for backend in ("cpu", "reference"):
            monkeypatch.setenv("XMEMORY_BACKEND", backend)
            try:
                check_slice(bad, 32)
                got.append("ok")
            except SliceFormatError as exc:
                got.append(str(exc))
        assert got[0] == got[1]


@needs_cpu
def test_the_fast_yes_says_no_to_each_broken_value():
    ok = np.zeros(3, np.int32)
    base = dict(
        refs=[(np.array([0, 1, -1], np.int32), -1, 2)],
        psg_msg=np.array([0, 0, 2], np.int32),
        msg_psg=np.array([0, -1, 2], np.int32),
        finite=[np.ones((2, 3), np.float32)],
        times=[np.array([np.nan, 0.0])],
        tmin=-1.0,
        tmax=1.0,
        nonan=[np.array([-np.inf], np.float32)],
    )
    assert columns.values_ok(**base, backend="cpu")
    assert not columns.values_ok(**base, backend="reference")  # no C++: the caller's own checks run
    for key, value in [
        ("refs", [(np.array([2], np.int32), -1, 2)]),
        ("refs", [(np.array([-2], np.int64), -1, 2)]),
        ("refs", [(np.array([0], np.uint8), -1, 2)]),
        ("psg_msg", np.array([1, 0, 2], np.int32)),
        ("msg_psg", np.array([2, -1, 2], np.int32)),
        ("msg_psg", np.array([3, -1, 2], np.int32)),
        ("finite", [np.array([[np.inf]], np.float32)]),
        ("finite", [np.ones(2)]),
        ("times", [np.array([1.0])]),
        ("times", [np.array([-np.inf])]),
        ("nonan", [np.array([np.nan], np.float32)]),
        ("msg_psg", ok.astype(np.int64)),
        ("refs", [(np.arange(6, dtype=np.int32)[::2], 0, 9)]),
    ]:
        assert not columns.values_ok(**{**base, key: value}, backend="cpu"), key


@needs_cpu
def test_views_hold_their_buffer():
    """A view's buffer cannot be resized under it (the views hold its buffer export, as np.frombuffer's do)."""
    for backend in ("cpu", "reference"):
        buf = bytearray(4096)
        got = columns.container_views(
            [{"name": "a", "dtype": "<f8", "shape": [512], "offset": 0}], buf, 0, backend=backend
        )
        with pytest.raises(BufferError):
            buf.extend(b"\0" * (1 << 20))
        got["a"][:] = 1.5
        assert bytes(buf[:8]) == np.float64(1.5).tobytes(), backend  # a view of buf itself, writable


@needs_cpu
def test_the_fast_yes_is_taken_on_a_whole_slice(built_slices, monkeypatch):
    """On a whole slice the C++ pass answers and the NumPy checks do not run (they would raise here)."""
    from xmemory_gpu.memory.codec import check_slice

    def boom(*a, **k):
        raise AssertionError("the Python checks ran")

    monkeypatch.setattr(np, "isfinite", boom)
    monkeypatch.setenv("XMEMORY_BACKEND", "cpu")
    for sl in built_slices:
        check_slice(sl, 32)
    monkeypatch.setenv("XMEMORY_BACKEND", "reference")
    with pytest.raises(AssertionError, match="Python checks ran"):
        check_slice(built_slices[0], 32)


def test_a_backend_that_does_not_exist_is_not_a_damaged_file(monkeypatch):
    from xmemory_gpu.memory.codec import SliceFormatError, pack_arrays, unpack_arrays

    data = pack_arrays({"a": np.zeros(2, np.float32)})
    monkeypatch.setenv("XMEMORY_BACKEND", "bogus")
    for call in (lambda: pack_arrays({"a": np.zeros(2, np.float32)}), lambda: unpack_arrays(data)):
        with pytest.raises(ValueError, match="bogus") as info:
            call()
        assert not isinstance(info.value, SliceFormatError)
