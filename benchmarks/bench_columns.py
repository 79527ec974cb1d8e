"""A memory's file, both ways (``memory.codec.slice_to_bytes`` / ``slice_from_bytes``, the store's
format through ``ops.columns``): ours (C++ container, text columns and header views) against the
reference (the format's Python and the theme sums a read computes, ``XMEMORY_BACKEND=reference``)
and NumPy's own container
(``np.savez`` / ``np.load`` of the same named arrays, texts as UTF-8 plus offsets: the library that
does this job, though not our format and without the checks and derived columns a read does), on the
memories of 200 synthetic conversations built with ``hashing:384``. Run:
``python -m pytest benchmarks/bench_columns.py --benchmark-columns=min,median,rounds``; repeat the
run to interleave; compare medians."""

from __future__ import annotations

import io

import numpy as np
import pytest
from scale import scaled

from xmemory_gpu.construct.pipeline import build_slices
from xmemory_gpu.datasets.locomo import load_locomo
from xmemory_gpu.datasets.synthetic import generate_conversations, write_json
from xmemory_gpu.embed import load_embedder
from xmemory_gpu.memory.codec import DERIVED, slice_from_bytes, slice_to_bytes
from xmemory_gpu.ops import available_backends

N_CONVERSATIONS = scaled(200, 10)


@pytest.fixture(scope="module")
def slices(tmp_path_factory):
    convs = load_locomo(
        write_json(generate_conversations(N_CONVERSATIONS, seed=11), tmp_path_factory.mktemp("c") / "d.json")
    )
    out = build_slices(convs, load_embedder("hashing:384"))
    print(f"\n{len(out)} memories, {sum(len(slice_to_bytes(s)) for s in out) / len(out) / 1e3:.0f} kB each")
    return out


def _named(sl) -> dict[str, np.ndarray]:
    """The arrays a memory's file holds, as ``np.savez`` takes them."""
    out = {}
    for lv, cols in sl.cols.items():
        for name, a in cols.items():
            if lv == "theme" and name in DERIVED:
                continue
            if a.dtype.kind == "O":
                enc = [str(t).encode("utf-8", "surrogatepass") for t in a.tolist()]
                out[f"{lv}.{name}.utf8"] = np.frombuffer(b"".join(enc), np.uint8)
                out[f"{lv}.{name}.off"] = np.cumsum([0] + [len(e) for e in enc], dtype=np.int64)
            else:
                out[f"{lv}.{name}"] = a
    return out


def _savez(sl) -> bytes:
    buf = io.BytesIO()
    np.savez(buf, **_named(sl))
    return buf.getvalue()


def _backend(monkeypatch, impl: str) -> None:
    if impl == "ours":
        if not available_backends()["cpu"].available:
            pytest.skip("the C++ module is not built")
        monkeypatch.setenv("XMEMORY_BACKEND", "cpu")
    else:  # the format's Python and every op's reference
        monkeypatch.setenv("XMEMORY_BACKEND", "reference")


@pytest.mark.parametrize("impl", ["ours", "reference", "numpy_savez"])
def test_encode(benchmark, slices, impl, monkeypatch):
    if impl == "numpy_savez":
        run = lambda: [_savez(s) for s in slices]  # noqa: E731
    else:
        _backend(monkeypatch, impl)
        run = lambda: [slice_to_bytes(s) for s in slices]  # noqa: E731
    benchmark(run)
    benchmark.extra_info["us_per_memory"] = round(benchmark.stats["median"] / len(slices) * 1e6, 1)


@pytest.mark.parametrize("impl", ["ours", "reference", "numpy_load"])
def test_decode(benchmark, slices, impl, monkeypatch):
    if impl == "numpy_load":
        files = [_savez(s) for s in slices]
        run = lambda: [dict(np.load(io.BytesIO(f), allow_pickle=False)) for f in files]  # noqa: E731
    else:
        files = [slice_to_bytes(s) for s in slices]
        _backend(monkeypatch, impl)
        run = lambda: [slice_from_bytes(s.memory_id, f, s.stats) for s, f in zip(slices, files)]  # noqa: E731
    benchmark(run)
    benchmark.extra_info["us_per_memory"] = round(benchmark.stats["median"] / len(slices) * 1e6, 1)
