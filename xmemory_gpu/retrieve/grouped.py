"""One segment-restricted kNN search for a batch of queries given in any memory order, ranked the
same way on every backend."""

from __future__ import annotations

import numpy as np

from ..memory.bank import Level
from ..ops.backends import requested_backend
from ..ops.checks import check_float_matrix, csr_offsets
from ..ops.devices import backend_device, host
from ..ops.knn import knn_search

RERANK_MARGIN = 8  # candidates fetched past k, so a near-tie at the k-th place is re-decided exactly
FEW_QUERIES = (
    16  # a host search of at most this many queries takes its candidates from BLAS (``_few_queries``)
)


def exact_rerank(
    q_x: np.ndarray, x: np.ndarray, idx: np.ndarray, k: int, *, chunk_bytes: int = 32 << 20
) -> tuple[np.ndarray, np.ndarray]:
    """Re-rank kernel candidates by one host computation, so every backend returns the same units.

    q_x [Q, d] queries, x [N, d] the level's rows (host), idx [Q, k'] candidate global rows (-1 pad)
    -> idx [Q, k] int32, sim [Q, k] float32: cosine in float64 from the float32 inputs, rounded to
    float32, sorted descending with ties to the lower row id (the reference's rule), padded -1/-inf.
    Kernels sum dot products in different orders (ISA, tiling, GPU), so their scores of tied or
    near-tied rows differ in the last bit; these do not. Work in query chunks of ``chunk_bytes``."""
    n_q, kk = idx.shape
    out_i = np.full((n_q, k), -1, np.int32)
    out_s = np.full((n_q, k), -np.inf, np.float32)
    if n_q == 0 or kk == 0 or x.shape[0] == 0:
        return out_i, out_s
    d = x.shape[1]
    step = max(1, chunk_bytes // max(1, kk * d * 8))
    for a in range(0, n_q, step):
        b = min(n_q, a + step)
        ii = idx[a:b].astype(np.int64)
        ok = ii >= 0
        rows = np.asarray(x[np.where(ok, ii, 0)], np.float64)  # [c, k', d]
        q = np.asarray(q_x[a:b], np.float64)
        dots = np.einsum("qkd,qd->qk", rows, q)
        norms = np.sqrt(np.einsum("qkd,qkd->qk", rows, rows)) * np.linalg.norm(q, axis=1)[:, None]
        sim = np.divide(dots, norms, out=np.zeros_like(dots), where=norms > 0).astype(np.float32)
        sim = np.where(ok, sim, -np.inf)
        order = np.lexsort((np.where(ok, ii, np.iinfo(np.int64).max), -sim), axis=1)[:, :k]
        m = order.shape[1]
        top_i = np.take_along_axis(ii, order, axis=1)
        top_s = np.take_along_axis(sim, order, axis=1)
        out_i[a:b, :m] = np.where(np.isfinite(top_s), top_i, -1)
        out_s[a:b, :m] = np.where(np.isfinite(top_s), top_s, -np.inf)
    return out_i, out_s


def _few_queries(
    q: np.ndarray,
    q_off: np.ndarray,
    x: np.ndarray,
    x_off: np.ndarray,
    k: int,
    norms: np.ndarray | None = None,
) -> np.ndarray:
    """Candidates of a search of few queries on the host: per segment one float32 product of its
    queries with its rows, cosine by the rows' norms, the top ``k`` by a stable sort (ties to the
    lower row, as the kernel). The kernel normalises and packs every row it reads, which costs more
    than the product when the queries are few (one query over 600 rows, the whole call: 0.28 ms
    against 0.13 ms).
    q [Q, d], x [N, d] with CSR ``q_off`` / ``x_off`` -> idx [Q, k] int64 rows of x, -1 padded.
    ``norms`` [N]: the rows' norms as ``Level.row_norms`` keeps them (else computed here)."""
    out = np.full((q.shape[0], k), -1, np.int64)
    for s in range(len(q_off) - 1):
        qa, qb, xa, xb = int(q_off[s]), int(q_off[s + 1]), int(x_off[s]), int(x_off[s + 1])
        if qa == qb or xa == xb:
            continue
        xs = x[xa:xb]
        # float32 (the ranking is exact_rerank's)
        norms_s = np.sqrt(np.einsum("ij,ij->i", xs, xs)) if norms is None else norms[xa:xb]
        # one query: einsum, not BLAS (a product this small gains nothing from threads, and waking
        # them while the query encoder's threads still spin cost 1-7 ms of a search)
        prod = np.einsum("qd,nd->qn", q[qa:qb], xs) if qb - qa == 1 else q[qa:qb] @ xs.T
        sims = prod / np.where(norms_s > 0, norms_s, np.float32(1))  # a zero row scores 0, as the kernel's
        top = _top_stable(sims, k)
        out[qa:qb, : top.shape[1]] = top + xa
    return out


def _top_stable(sims: np.ndarray, k: int) -> np.ndarray:
    """[Q, min(k, n)] the columns of ``sims [Q, n]`` that ``np.argsort(-sims, kind="stable")[:, :k]``
    gives for k >= 0 (descending, ties to the lower column), in O(n) a query: the k-th largest score
    found by a partition, then only the scores at or above it sorted. A row with a NaN is sorted whole."""
    n = sims.shape[1]
    if k >= n or k <= 0:
        return np.argsort(-sims, axis=1, kind="stable")[:, : max(k, 0)]
    out = np.empty((sims.shape[0], k), np.int64)
    for i, row in enumerate(-sims):
        kth = np.partition(row, k - 1)[k - 1]
        if np.isnan(kth) or np.isnan(row).any():
            out[i] = np.argsort(row, kind="stable")[:k]
            continue
        cand = np.flatnonzero(row <= kth)  # every score at or above the k-th, ties included, ascending
        out[i] = cand[np.argsort(row[cand], kind="stable")[:k]]
    return out


def search_by_memory(
    q_x: np.ndarray, mem_idx: np.ndarray, level: Level, k: int, *, backend: str = "auto"
) -> tuple[np.ndarray, np.ndarray]:
    """q_x [Q, d], mem_idx [Q] bank memory of each query; ``level``: the bank level searched (its
    ``x`` column). The kernel takes the level's segments directly (``Segments.kernel_view``);
    queries are grouped by segment for one ``knn_search`` call and come back in their order:
    idx [Q, k] int32 global rows, sim [Q, k] float32 (host arrays), ranked by ``exact_rerank`` over
    the kernel's top ``k + RERANK_MARGIN`` (same rows and scores on every backend).

    A GPU backend (``cuda``, ``triton``) reads the level's device-resident copy
    (``Level.on_device``): only the queries go up and the [Q, k] results come back."""
    offsets, seg_of = level.seg.kernel_view()
    seg = seg_of[np.asarray(mem_idx, np.int64)]
    dev = backend_device(backend)
    # only the segments that hold a query go to the kernel (a lone query reads its memory's rows, not
    # the whole bank: checking and normalising every row per call made search O(bank))
    used = np.unique(seg)
    starts, ends = offsets[used], offsets[used + 1]
    sub_off = csr_offsets((ends - starts).tolist())
    shift_of = starts - sub_off[:-1]  # per used segment: its place in sub_x -> its global row
    local = np.searchsorted(used, seg)
    order = np.argsort(local, kind="stable")
    q_off = csr_offsets(np.bincount(local, minlength=len(used)))
    if dev is None:
        data, q = level["x"], np.asarray(q_x)[order]
    else:
        import torch

        data = level.on_device("x", dev)
        q = torch.from_numpy(np.ascontiguousarray(np.asarray(q_x, np.float32)[order])).to(dev)
    if len(used) == 1:
        sub_x = data[int(starts[0]) : int(ends[0])]  # a view
    else:  # one gather of the used segments' rows
        total = int(sub_off[-1])
        if dev is None:
            sub_x = data[np.repeat(shift_of, ends - starts) + np.arange(total)]
        else:  # the row index is built on the device from the [S] shifts and lengths
            shift = torch.repeat_interleave(
                torch.from_numpy(shift_of).to(dev), torch.from_numpy(ends - starts).to(dev), output_size=total
            )
            sub_x = data.index_select(0, shift + torch.arange(total, device=dev))
    if dev is None and len(order) <= FEW_QUERIES and requested_backend(backend) in ("auto", "cpu"):
        norms = None
        if data.dtype == np.float32:  # the used segments' rows, as sub_x takes them
            rows = (
                np.arange(int(starts[0]), int(ends[0]))
                if len(used) == 1
                else np.repeat(shift_of, ends - starts) + np.arange(int(sub_off[-1]))
            )
            norms = level.row_norms("x", rows)
        idx = _few_queries(
            check_float_matrix("q", q), q_off, np.asarray(sub_x), sub_off, k + RERANK_MARGIN, norms
        )
    else:
        idx, _ = knn_search(q, q_off, sub_x, sub_off, k + RERANK_MARGIN, backend=backend)
        idx = host(idx)
    idx = np.where(idx >= 0, idx + shift_of[local[order]][:, None], -1)
    cand = np.empty_like(idx)
    cand[order] = idx
    return exact_rerank(np.asarray(q_x, np.float32), level["x"], cand, k)
