"""Inputs in and out of each registered op's contract, for the differential harness: per op, the op's
public function (``ENTRIES``, called with ``backend=``) and a generator (``CASES``) of one in-contract
call and calls that break the contract one argument at a time (wrong dtype, wrong ndim, mismatched
lengths, negative or overflowing offsets and ids, NaN where forbidden)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from xmemory_gpu.ops import columns


@dataclass
class Call:
    """Positional and keyword arguments of one call (``backend`` aside); ``raises``: the exception class
    both backends raise for it (a ``ValueError`` unless the op documents another)."""

    args: tuple
    kwargs: dict = field(default_factory=dict)
    raises: type[Exception] = ValueError


def swap(call: Call, **changes: Any) -> Call:
    """``call`` with positional arguments (``a0``, ``a1``, ...) or keywords replaced."""
    args = list(call.args)
    kwargs = dict(call.kwargs)
    raises = changes.pop("raises", ValueError)
    for key, v in changes.items():
        if key[0] == "a" and key[1:].isdigit():
            args[int(key[1:])] = v
        else:
            kwargs[key] = v
    return Call(tuple(args), kwargs, raises)


Cases = tuple[Call, dict[str, Call]]  # (in contract, label -> out of contract)


def _unit(rng, n, d):
    x = rng.standard_normal((n, d))
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


def _nan(a, at=0):
    a = np.array(a, dtype=np.float64 if a.dtype.kind != "f" else a.dtype)
    a.reshape(-1)[at] = np.nan
    return a


# ---- the families --------------------------------------------------------------------------------


def knn_graph(rng) -> Cases:
    x = rng.standard_normal((10, 4)).astype(np.float32)
    ok = Call((x, np.array([0, 4, 10]), 3))
    return ok, {
        "x 1-D": swap(ok, a0=x[:, 0]),
        "x complex": swap(ok, a0=x.astype(np.complex64)),
        "x NaN": swap(ok, a0=_nan(x, 5)),
        "offsets not ending at N": swap(ok, a1=np.array([0, 4, 9])),
        "offsets negative": swap(ok, a1=np.array([0, -1, 10])),
        "offsets decreasing": swap(ok, a1=np.array([0, 6, 4, 10])),
        "offsets float": swap(ok, a1=np.array([0.0, 4.0, 10.0])),
        "k 0": swap(ok, a2=0),
        "k float": swap(ok, a2=2.0),
    }


def knn_search(rng) -> Cases:
    x = rng.standard_normal((10, 4)).astype(np.float32)
    q = rng.standard_normal((5, 4)).astype(np.float32)
    ok = Call((q, np.array([0, 2, 5]), x, np.array([0, 4, 10]), 3))
    return ok, {
        "d differs": swap(ok, a0=q[:, :3]),
        "segments differ": swap(ok, a1=np.array([0, 5])),
        "x offsets past N": swap(ok, a3=np.array([0, 4, 11])),
        "q NaN": swap(ok, a0=_nan(q)),
        "x string": swap(ok, a2=np.full((10, 4), "a")),
        "k negative": swap(ok, a4=-1),
    }


def topk_select(rng) -> Cases:
    sims = rng.standard_normal((4, 6)).astype(np.float32)
    ok = Call((sims, np.arange(6, dtype=np.int64), 3, False))
    return ok, {
        "sims 1-D": swap(ok, a0=sims[0]),
        "ids length": swap(ok, a1=np.arange(5)),
        "ids float": swap(ok, a1=np.arange(6, dtype=np.float64)),
        "k 0": swap(ok, a2=0),
    }


def offer_rows(rng) -> Cases:
    n, k = 8, 3
    idx = np.full((n, k), -1, np.int32)
    sim = np.full((n, k), -np.inf, np.float32)
    others, cand = np.array([0, 1, 2], np.int64), np.array([5, 6], np.int64)
    dots = rng.standard_normal((3, 2)).astype(np.float32)
    ok = Call((dots, others, cand, idx, sim, False))
    return ok, {
        "dots shape": swap(ok, a0=dots.T),
        "others outside": swap(ok, a1=np.array([0, 1, 8])),
        "cand negative": swap(ok, a2=np.array([-1, 6])),
        "idx int64": swap(ok, a3=idx.astype(np.int64)),
        "sim not C-contiguous": swap(ok, a4=np.asfortranarray(sim)),
        "idx and sim shapes": swap(ok, a4=sim[:, :2].copy()),
    }


def partition_objective(rng) -> Cases:
    x = rng.standard_normal((9, 5))
    lab = np.array([0, 1, 0, 2, 0, 1, 1, 0, 0])
    ok = Call((x, lab, np.array([0, 4, 9])))
    return ok, {
        "x NaN": swap(ok, a0=_nan(x, 7)),
        "x 3-D": swap(ok, a0=x[None]),
        "labels length": swap(ok, a1=lab[:8]),
        "labels negative": swap(ok, a1=np.where(lab == 2, -1, lab)),
        "labels overflowing": swap(ok, a1=np.where(lab == 2, 2**31, lab)),
        "offsets short": swap(ok, a2=np.array([0, 4, 8])),
        "eps 0": swap(ok, eps=0.0),
        "eps NaN": swap(ok, eps=float("nan")),
    }


def score_candidates(rng) -> Cases:
    from xmemory_gpu.ops import Candidates, PartitionState

    from .objective_cases import random_candidates, random_partition

    x, lab, off = random_partition(rng, [12, 9], [3, 2], 6)
    state = PartitionState.from_labels(x, lab, off)
    cands = random_candidates(rng, state, 3)
    ok = Call((state, cands))

    def edit(**kw):
        return Candidates(**{**{f: getattr(cands, f) for f in cands.__dataclass_fields__}, **kw})

    return ok, {
        "state not a state": swap(ok, a0="state"),
        "memory outside": swap(ok, a1=edit(memory=np.full_like(cands.memory, 5))),
        "rem_rows outside": swap(ok, a1=edit(rem_rows=np.full_like(cands.rem_rows, 10**6))),
        "members outside": swap(ok, a1=edit(members=np.full_like(cands.members, -3))),
    }


def theme_sums(rng) -> Cases:
    x = rng.standard_normal((12, 4))
    rows = rng.permutation(12)[:9].astype(np.int64)
    labels = rng.integers(0, 3, 9).astype(np.int64)
    ok = Call((x, rows, labels, np.array([0, 4, 9], np.int64)))
    return ok, {
        "x 1-D": swap(ok, a0=x[:, 0]),
        "rows outside": swap(ok, a1=np.where(rows == rows[0], 12, rows)),
        "rows float": swap(ok, a1=rows.astype(np.float64)),
        "labels negative": swap(ok, a2=np.where(labels == 0, -1, labels)),
        "labels overflowing": swap(ok, a2=np.where(labels == 0, 2**31, labels)),
        "labels length": swap(ok, a2=labels[:8]),
        "row_off decreasing": swap(ok, a3=np.array([0, 6, 4, 9])),
    }


def top2_blocks(rng) -> Cases:
    unit = _unit(rng, 7, 5).astype(np.float64)
    ok = Call((unit, np.array([0, 3, 7], np.int64)))
    return ok, {
        "unit 1-D": swap(ok, a0=unit[0]),
        "theme_off past T": swap(ok, a1=np.array([0, 3, 8])),
        "theme_off negative": swap(ok, a1=np.array([0, -3, 7])),
    }


def top2_update(rng) -> Cases:
    unit = _unit(rng, 7, 5).astype(np.float64)
    off = np.array([0, 3, 7], np.int64)
    fresh = np.array([True, False, False, False, True, False, False])
    prev_idx = np.array([[-1, -1], [2, 0], [1, 0], [1, 2], [-1, -1], [3, 0], [0, 3]], np.int64)
    ok = Call((unit, off, fresh, prev_idx, rng.uniform(-1, 1, (7, 2))))
    return ok, {
        "unit 1-D": swap(ok, a0=unit[0]),
        "theme_off past T": swap(ok, a1=np.array([0, 3, 8])),
        "fresh not bool": swap(ok, a2=fresh.astype(np.int64)),
        "fresh length": swap(ok, a2=fresh[:5]),
        "prev_idx past its block": swap(ok, a3=np.where(prev_idx == 2, 3, prev_idx)),
        "prev_idx below -1": swap(ok, a3=np.where(prev_idx == -1, -2, prev_idx)),
        "prev_idx float": swap(ok, a3=prev_idx.astype(np.float64)),
        "prev_cos shape": swap(ok, a4=np.zeros((7, 3))),
    }


def f_blocks(rng) -> Cases:
    counts = rng.integers(1, 5, 6).astype(np.int64)
    norms = counts * 0.5
    s = rng.uniform(-1, 1, 6)
    off = np.array([0, 2, 6], np.int64)
    n = np.array([counts[:2].sum(), counts[2:].sum()], np.int64)
    ok = Call((norms, counts, s, off, n, 1e-8))
    return ok, {
        "counts length": swap(ok, a1=counts[:5]),
        "counts float": swap(ok, a1=counts.astype(np.float64)),
        "s 2-D": swap(ok, a2=s[None]),
        "theme_off past T": swap(ok, a3=np.array([0, 2, 7])),
        "n overflowing": swap(ok, a4=np.array([2**31, 3])),
        "n length": swap(ok, a4=n[:1]),
        "eps NaN": swap(ok, a5=float("nan")),
    }


def coverage_select(rng) -> Cases:
    from .coverage_cases import random_problem

    off, idx, w, rel = random_problem(rng, [6, 3], 3)
    ok = Call((off, idx, w, rel), {"budget": 2})
    return ok, {
        "offsets past M": swap(ok, a0=off + np.array([0, 0, 1])),
        "nbr_idx outside": swap(ok, a1=np.full_like(idx, 7)),
        "nbr_w shape": swap(ok, a2=w[:, :2]),
        "nbr_w NaN": swap(ok, a2=_nan(w)),
        "relevance inf": swap(ok, a3=np.full_like(rel, np.inf)),
        "budget negative": swap(ok, budget=-1),
        "alpha above 1": swap(ok, alpha=1.5),
        "stop unknown": swap(ok, stop="never"),
    }


def token_entropy_logprob(rng) -> Cases:
    logits = rng.standard_normal((4, 9)).astype(np.float32)
    ids = np.array([0, 8, 3, 2])
    ok = Call((logits, ids))
    return ok, {
        "logits 1-D": swap(ok, a0=logits[0]),
        "logits int": swap(ok, a0=logits.astype(np.int64)),
        "ids past V": swap(ok, a1=np.array([0, 9, 3, 2])),
        "ids negative": swap(ok, a1=np.array([0, -1, 3, 2])),
        "ids float": swap(ok, a1=ids.astype(np.float64)),
        "ids length": swap(ok, a1=ids[:3]),
    }


def spherical_kmeans(rng) -> Cases:
    x = _unit(rng, 10, 4).astype(np.float64)
    ok = Call(
        (
            x,
            np.array([0, 6, 10]),
            np.array([0, 1]),
            np.array([2, 3]),
            np.array([1, 0]),
            np.array([0.5, 0.2, 0.9]),
        )
    )
    return ok, {
        "x NaN": swap(ok, a0=_nan(x, 3)),
        "segment outside": swap(ok, a2=np.array([0, 2])),
        "k above n": swap(ok, a3=np.array([7, 3])),
        "k float": swap(ok, a3=np.array([2.0, 3.0])),
        "first outside": swap(ok, a4=np.array([6, 0])),
        "uniforms count": swap(ok, a5=np.array([0.5, 0.2])),
        "uniforms NaN": swap(ok, a5=np.array([0.5, np.nan, 0.9])),
        "iters 0": swap(ok, iters=0),
    }


def rowwise_linear(rng) -> Cases:
    from xmemory_gpu.ops import pack_linear

    layer = pack_linear(rng.standard_normal((6, 5)).astype(np.float32), None, backend="reference")
    x = rng.standard_normal((3, 5)).astype(np.float32)
    ok = Call((x, layer))
    return ok, {
        "x K": swap(ok, a0=x[:, :4]),
        "x 1-D": swap(ok, a0=x[0]),
        "x complex": swap(ok, a0=x.astype(np.complex64)),
        "layer not packed": swap(ok, a1=np.zeros((6, 5), np.float32)),
    }


def feature_counts(rng) -> Cases:
    ok = Call((["a cat sat", "dogs"], 64))
    return ok, {
        "dim 1": swap(ok, a1=1),
        "dim overflowing": swap(ok, a1=2**31),
        "dim float": swap(ok, a1=64.0),
        "one str": swap(ok, a0="a cat", raises=TypeError),
        "a text not str": swap(ok, a0=["a", 3], raises=TypeError),
    }


def _attach_base(rng):
    d, n, cap = 6, 8, 12
    x = _unit(rng, n, d)
    sums = np.zeros((cap, d))
    sums[:2] = rng.standard_normal((2, d))
    counts = np.array([2, 1] + [0] * (cap - 2), np.int64)
    alive = np.array([True, True] + [False] * (cap - 2))
    ids = np.array([10, 11] + [-1] * (cap - 2), np.int64)
    label = np.full(n, -1, np.int64)
    return (x, np.arange(5, dtype=np.int64), sums, counts, alive, ids, label, 2, 12)


_ATTACH = {"attach_threshold": 0.5, "lenient_floor": 0.3, "size_cap": 4}


def attach_rows(rng) -> Cases:
    item = _attach_base(rng)
    ok = Call(item, dict(_ATTACH))
    x, rows, sums, counts, alive, ids, label, _, _ = item
    return ok, {
        "x float64": swap(ok, a0=x.astype(np.float64)),
        "rows outside": swap(ok, a1=np.array([0, 8])),
        "rows float": swap(ok, a1=np.array([0.0, 1.0])),
        "sums float32": swap(ok, a2=sums.astype(np.float32)),
        "counts length": swap(ok, a3=counts[:-1].copy()),
        "alive int": swap(ok, a4=alive.astype(np.int64)),
        "label length": swap(ok, a6=label[:-1].copy()),
        "n_slots negative": swap(ok, a7=-1),
        "no room": swap(ok, a7=9),
        "threshold NaN": swap(ok, attach_threshold=float("nan")),
    }


def attach_rows_batch(rng) -> Cases:
    a, b = _attach_base(rng), _attach_base(rng)
    ok = Call(([a, b],), dict(_ATTACH))
    shared = b[:2] + a[2:7] + b[7:]
    return ok, {
        "an item short": swap(ok, a0=[a, b[:8]]),
        "an item's rows outside": swap(ok, a0=[a, b[:1] + (np.array([99]),) + b[2:]]),
        "columns shared": swap(ok, a0=[a, shared]),
        "size_cap float": swap(ok, size_cap=4.5),
    }


_MERGE = {"tiny_size": 2, "merge_candidates": 1, "size_cap": 8, "pair_threshold": 0.8}


def _graph(rng, n_slots=10, k=3):
    live = np.array([0, 2, 3, 5, 7], np.int64)
    idx = np.array([[1, 2, -1], [0, -1, -1], [4, 0, 1], [2, -1, -1], [3, 1, -1]], np.int32)
    sim = np.sort(rng.uniform(0, 1, (5, k)).astype(np.float32), axis=1)[:, ::-1].copy()
    counts = rng.integers(0, 6, n_slots).astype(np.int64)
    return live, idx, sim, counts


def merge_pairs(rng) -> Cases:
    live, idx, sim, counts = _graph(rng)
    ok = Call((live, idx, sim, counts, 10), {"k": 3, **_MERGE})
    return ok, {
        "live outside": swap(ok, a0=np.array([0, 2, 3, 5, 10])),
        "live negative": swap(ok, a0=np.array([-1, 2, 3, 5, 7])),
        "idx past L": swap(ok, a1=np.where(idx == 4, 5, idx).astype(np.int32)),
        "idx float": swap(ok, a1=idx.astype(np.float32)),
        "sim shape": swap(ok, a2=sim[:, :2]),
        "counts overflowing": swap(ok, a3=np.where(np.arange(10) == 1, 2**31, counts)),
        "n_slots overflowing": swap(ok, a4=2**31),
        "pair_threshold NaN": swap(ok, pair_threshold=float("nan")),
    }


def merge_pairs_batch(rng) -> Cases:
    live, idx, sim, counts = _graph(rng)
    item = (live, idx, sim, counts, np.arange(100, 110, dtype=np.int64), 10, 3)
    ok = Call(([item, item],), dict(_MERGE))
    return ok, {
        "an item short": swap(ok, a0=[item, item[:6]]),
        "ids length": swap(ok, a0=[item, item[:4] + (np.arange(9),) + item[5:]]),
        "counts overflowing": swap(ok, a0=[item[:3] + (counts - 2**31,) + item[4:]]),
        "live outside": swap(ok, a0=[(np.array([0, 2, 3, 5, 12]),) + item[1:]]),
    }


def _columns_arrays(rng):
    return ["a", "b"], [rng.standard_normal(5), np.arange(4, dtype=np.int32)]


def pack_arrays(rng) -> Cases:
    names, arrays = _columns_arrays(rng)
    ok = Call((names, arrays))
    return ok, {
        "lengths differ": swap(ok, a0=["a"]),
        "dtype not held": swap(ok, a1=[arrays[0], np.arange(3, dtype=np.int16)]),
        "object dtype": swap(ok, a1=[arrays[0], np.array(["x"], dtype=object)]),
    }


def join_utf8(rng) -> Cases:
    ok = Call((["ab", "é", ""],))
    return ok, {}  # every iterable of items is in contract (each taken as str)


def split_utf8(rng) -> Cases:
    raw, off = columns.join_utf8(["ab", "é", "cd"], backend="reference")
    raw = raw.tobytes()
    ok = Call((raw, off))
    return ok, {
        "offsets short of the end": swap(ok, a1=off[:-1]),
        "offsets decreasing": swap(ok, a1=np.array([0, 3, 2, len(raw)])),
        "offsets past the end": swap(ok, a1=np.array([0, 2, 4, len(raw) + 1])),
        "offsets 2-D": swap(ok, a1=off[None]),
    }


def container_views(rng) -> Cases:
    names, arrays = _columns_arrays(rng)
    data = bytearray(columns.pack_arrays(names, arrays, backend="reference"))
    import json
    import struct

    hlen = struct.unpack("<Q", data[8:16])[0]
    entries = json.loads(bytes(data[16 : 16 + hlen]))["arrays"]
    base = columns.aligned(16 + hlen)
    ok = Call((entries, data, base))
    past = [dict(entries[0], offset=len(data))] + entries[1:]
    return ok, {
        "entry past the end": swap(ok, a0=past),
        "entry dtype": swap(ok, a0=[dict(entries[0], dtype="<f2")]),
        "entry negative shape": swap(ok, a0=[dict(entries[0], shape=[-1])]),
        "entry not a dict": swap(ok, a0=[3]),
    }


def values_ok(rng) -> Cases:
    refs = [(rng.integers(0, 5, 8).astype(np.int64), 0, 5)]
    ok = Call((refs, np.zeros(3, np.int32), np.zeros(3, np.int32), [], [], 0.0, 10.0, []))
    return ok, {
        "a ref not a triple": swap(ok, a0=[(refs[0][0], 0)]),
        "tmin not a number": swap(ok, a5="0"),
        "finite an array": swap(ok, a3=np.zeros(3, np.float32)),
    }


def add_rows_in_order(rng) -> Cases:
    sums = rng.standard_normal((4, 3))
    x = rng.standard_normal((6, 3)).astype(np.float32)
    group, rows = np.array([0, 3, 1, 0]), np.array([5, 0, 2, 2])
    ok = Call((sums, group, x, rows))
    return ok, {
        "group outside": swap(ok, a1=np.array([0, 4, 1, 0])),
        "group negative": swap(ok, a1=np.array([0, -1, 1, 0])),
        "rows outside": swap(ok, a3=np.array([5, 6, 2, 2])),
        "lengths differ": swap(ok, a3=rows[:3]),
        "x d": swap(ok, a2=x[:, :2]),
        "sums int": swap(ok, a0=sums.astype(np.int64)),
        "group float": swap(ok, a1=group.astype(np.float64)),
    }


def live_rows(rng) -> Cases:
    items = [
        (rng.random(5) < 0.5, rng.standard_normal((5, 3)), 4),
        (np.ones(2, bool), rng.standard_normal((2, 3)), 2),
    ]
    ok = Call((items, 3))
    a, s, _ = items[0]
    return ok, {
        "n_slots past cap": swap(ok, a0=[(a, s, 6)]),
        "n_slots negative": swap(ok, a0=[(a, s, -1)]),
        "d differs": swap(ok, a1=4),
        "alive int": swap(ok, a0=[(a.astype(np.int64), s, 4)]),
        "an item short": swap(ok, a0=[(a, s)]),
    }


def take_rows2(rng) -> Cases:
    a, b = rng.standard_normal((4, 3)), rng.standard_normal((2, 3))
    ok = Call((a, b, np.array([0, 5, 2])))
    return ok, {
        "take outside": swap(ok, a2=np.array([0, 6])),
        "take negative": swap(ok, a2=np.array([-1, 2])),
        "take float": swap(ok, a2=np.array([0.0, 1.0])),
        "row shapes differ": swap(ok, a1=b[:, :2]),
        "b not an array": swap(ok, a1=b.tolist()),
    }


def row_norms(rng) -> Cases:
    x = rng.standard_normal((4, 3))
    ok = Call((x,))
    return ok, {"x 1-D": swap(ok, a0=x[0]), "x complex": swap(ok, a0=x.astype(np.complex128))}


def segment_sums(rng) -> Cases:
    v = rng.standard_normal(9)
    ok = Call((v, np.array([0, 4, 9])))
    return ok, {
        "off past v": swap(ok, a1=np.array([0, 4, 10])),
        "off negative": swap(ok, a1=np.array([-1, 4, 9])),
        "off decreasing": swap(ok, a1=np.array([0, 5, 4, 9])),
        "off empty": swap(ok, a1=np.zeros(0, np.int64)),
        "v 2-D": swap(ok, a0=v[None]),
    }


def unit_rows(rng) -> Cases:
    x = rng.standard_normal((4, 3))
    ok = Call((x,), {"dtype": np.float32})
    return ok, {
        "x 1-D": swap(ok, a0=x[0]),
        "dtype int": swap(ok, dtype=np.int64),
        "dtype unknown": swap(ok, dtype="nope"),
    }


def dot4_gram(rng) -> Cases:
    a, b = rng.standard_normal((4, 3)), rng.standard_normal((2, 3))
    ok = Call((a, b))
    return ok, {
        "d differs": swap(ok, a1=b[:, :2]),
        "a 1-D": swap(ok, a0=a[0]),
        "b string": swap(ok, a1=np.full((2, 3), "x")),
    }


def drift_runs(rng) -> Cases:
    x = _unit(rng, 6, 4)
    hard = np.zeros(6, bool)
    ok = Call((x, hard, 2, 0.2))
    return ok, {
        "no rows": swap(ok, a0=x[:0], a1=hard[:0]),
        "hard length": swap(ok, a1=hard[:5]),
        "min_messages float": swap(ok, a2=2.5),
        "min_messages negative": swap(ok, a2=-1),
        "drift_threshold NaN": swap(ok, a3=float("nan")),
    }


def dedup_block(rng) -> Cases:
    rows = _unit(rng, 5, 4)
    inner = rows @ rows.T
    best = np.full(5, -np.inf)
    arg = np.full(5, -1, np.int64)
    ok = Call((inner, rows, best, arg, 0.9, 0))
    return ok, {
        "inner shape": swap(ok, a0=inner[:4]),
        "rows 1-D": swap(ok, a1=rows[0]),
        "best length": swap(ok, a2=best[:4]),
        "arg float": swap(ok, a3=arg.astype(np.float64)),
        "threshold a str": swap(ok, a4="0.9"),
        "base float": swap(ok, a5=1.5),
    }


def write_durable(rng) -> Cases:
    ok = Call(([],), {"threads": 2})  # nothing to write: in contract, touches no file
    return ok, {
        "a NUL in a path": swap(ok, a0=[("/nonexistent/a\0b.tmp", "/nonexistent/ab", b"x")]),
        "data not bytes": swap(ok, a0=[("/nonexistent/a.tmp", "/nonexistent/a", "text")]),
        "a file not a triple": swap(ok, a0=[("/nonexistent/a.tmp", b"x")]),
        "threads 0": swap(ok, threads=0),
    }


CASES: dict[str, Callable[[np.random.Generator], Cases]] = {
    f.__name__: f
    for f in (
        knn_graph,
        knn_search,
        topk_select,
        offer_rows,
        partition_objective,
        score_candidates,
        theme_sums,
        top2_blocks,
        top2_update,
        f_blocks,
        coverage_select,
        token_entropy_logprob,
        spherical_kmeans,
        rowwise_linear,
        feature_counts,
        attach_rows,
        attach_rows_batch,
        merge_pairs,
        merge_pairs_batch,
        pack_arrays,
        join_utf8,
        split_utf8,
        container_views,
        values_ok,
        add_rows_in_order,
        live_rows,
        take_rows2,
        row_norms,
        segment_sums,
        unit_rows,
        dot4_gram,
        drift_runs,
        dedup_block,
        write_durable,
    )
}


def entries() -> dict[str, Callable[..., Any]]:
    """op -> its public function (called with ``backend=``)."""
    from xmemory_gpu import ops
    from xmemory_gpu.ops import attach, knn, rows
    from xmemory_gpu.ops.objective import state

    table = {
        op: getattr(ops, op)
        for op in (
            "knn_graph",
            "knn_search",
            "partition_objective",
            "score_candidates",
            "coverage_select",
            "token_entropy_logprob",
            "spherical_kmeans",
            "rowwise_linear",
            "feature_counts",
            "attach_rows",
            "dedup_block",
            "write_durable",
        )
    }
    table |= {op: getattr(knn, op) for op in ("topk_select", "offer_rows")}
    table |= {op: getattr(state, op) for op in ("theme_sums", "top2_blocks", "top2_update", "f_blocks")}
    table |= {op: getattr(attach, op) for op in ("attach_rows_batch", "merge_pairs", "merge_pairs_batch")}
    table |= {
        op: getattr(columns, op)
        for op in ("pack_arrays", "join_utf8", "split_utf8", "container_views", "values_ok")
    }
    table |= {op: getattr(rows, op) for op in rows.OPS}
    return table
