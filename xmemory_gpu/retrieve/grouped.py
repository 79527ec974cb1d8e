"""One segment-restricted kNN search for a batch of queries given in any memory order."""

from __future__ import annotations

import numpy as np

from ..memory.bank import Level
from ..ops._arrays import csr_offsets
from ..ops._dispatch import backend_device, host
from ..ops.knn import knn_search


def search_by_memory(q_x: np.ndarray, mem_idx: np.ndarray, level: Level, k: int, *,
                     backend: str = "auto") -> tuple[np.ndarray, np.ndarray]:
    """q_x [Q, d], mem_idx [Q] bank memory of each query; ``level``: the bank level searched (its
    ``x`` column). The kernel takes the level's segments directly (``Segments.kernel_view``);
    queries are grouped by segment for one ``knn_search`` call and come back in their order:
    idx [Q, k] int32 global rows, sim [Q, k] float32 (host arrays).

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
            shift = torch.repeat_interleave(torch.from_numpy(shift_of).to(dev), torch.from_numpy(ends - starts).to(dev),
                                            output_size=total)
            sub_x = data.index_select(0, shift + torch.arange(total, device=dev))
    idx, sim = knn_search(q, q_off, sub_x, sub_off, k, backend=backend)
    idx, sim = host(idx), host(sim)
    idx = np.where(idx >= 0, idx + shift_of[local[order]][:, None], -1).astype(idx.dtype)
    out_i, out_s = np.empty_like(idx), np.empty_like(sim)
    out_i[order], out_s[order] = idx, sim
    return out_i, out_s
