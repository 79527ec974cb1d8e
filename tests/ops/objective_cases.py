"""Random ragged partitions and candidate edits, shared by the tests and the benchmarks."""

from __future__ import annotations

import numpy as np

from xmemory_gpu.ops.objective import Candidates, PartitionState


def random_partition(rng: np.random.Generator, sizes: list[int], n_themes: list[int], d: int):
    """x [N, d] float32 clustered around per-theme centres, labels [N] local (sparse values: any
    non-negative ints), offsets [B+1]; drawn in whole arrays (the GPU benchmarks' sizes too)."""
    sizes_a = np.asarray(sizes, np.int64)
    off = np.zeros(len(sizes) + 1, dtype=np.int64)
    np.cumsum(sizes_a, out=off[1:])
    k = np.maximum(np.asarray(n_themes, np.int64), 1)
    first = np.concatenate([[0], np.cumsum(k)[:-1]]).astype(np.int64)  # each memory's first centre
    centres = rng.standard_normal((int(k.sum()), d), dtype=np.float32)
    lab = (rng.random(int(off[-1])) * np.repeat(k, sizes_a)).astype(np.int64)
    x = centres[np.repeat(first, sizes_a) + lab]
    x += 0.8 * rng.standard_normal(x.shape, dtype=np.float32)
    return x, lab * 3, off


def random_candidates(rng: np.random.Generator, state: PartitionState, per_memory: int) -> Candidates:
    """Splits (2-4 parts), merges (2-3 themes) and moves (a few nodes between two themes)."""
    items = []
    for b in range(len(state.offsets) - 1):
        ts, te = int(state.theme_offsets[b]), int(state.theme_offsets[b + 1])
        if te == ts:
            continue
        for _ in range(per_memory):
            kind = rng.integers(0, 3)
            if kind == 0:
                t = int(rng.integers(ts, te))
                mem = rng.permutation(state.members_of(t))
                if mem.size < 2:
                    continue
                parts = int(rng.integers(2, min(4, mem.size) + 1))
                cuts = np.sort(rng.choice(np.arange(1, mem.size), size=parts - 1, replace=False))
                items.append((b, [int(state.theme_label[t])], np.split(mem, cuts)))
            elif te - ts >= 2:
                ts_pick = rng.choice(
                    np.arange(ts, te), size=min(te - ts, int(rng.integers(2, 4))), replace=False
                )
                labels = [int(state.theme_label[t]) for t in ts_pick]
                if kind == 1:
                    items.append((b, labels, [np.concatenate([state.members_of(t) for t in ts_pick])]))
                else:
                    a, c = state.members_of(ts_pick[0]), state.members_of(ts_pick[1])
                    n = int(rng.integers(1, a.size + 1))
                    moved = rng.permutation(a)
                    items.append((b, labels[:2], [moved[n:], np.concatenate([c, moved[:n]])]))
    return Candidates.from_lists(state, items)


def numpy_closed_form(
    x: np.ndarray, labels: np.ndarray, offsets: np.ndarray, eps: float = 1e-8
) -> np.ndarray:
    """The vectorised NumPy baseline for ``partition_objective``: rows normalised in x's dtype, per
    segment one-hot theme sums through BLAS, then norms and the centroid cosine matrix in float64
    (``state.closed_form``). Benchmarks time it beside the kernels; tests check it too."""
    from xmemory_gpu.ops.objective.state import closed_form

    x = np.asarray(x)
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    xn = np.divide(x, norms, out=np.zeros_like(x), where=norms > 0)
    out = np.zeros(len(offsets) - 1, dtype=np.float64)
    for b in range(len(offsets) - 1):
        s, e = int(offsets[b]), int(offsets[b + 1])
        if e == s:
            continue
        _, inv = np.unique(labels[s:e], return_inverse=True)
        onehot = np.zeros((int(inv.max()) + 1, e - s), dtype=x.dtype)
        onehot[inv, np.arange(e - s)] = 1
        sums = (onehot @ xn[s:e]).astype(np.float64)
        out[b] = closed_form(sums, np.bincount(inv).astype(np.float64), e - s, eps)
    return out
