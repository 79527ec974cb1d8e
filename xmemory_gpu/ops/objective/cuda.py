"""CUDA backend for the objective family: thin torch wrappers over ``xmemory_gpu._cuda``
(``objective_row_norms``, ``objective_group_sums``, ``objective_score``; csrc/cuda/objective.cu).

Same signatures as ``cpu.py``: NumPy in, uploaded to the current CUDA device, run on the current
stream, float64 NumPy out. Both ops share one kernel (one thread block per item): a candidate is
"the memory's themes minus the removed rows plus new groups"; a segment of ``partition_objective``
is an item with no kept themes whose groups are all its themes (relabelled densely on the device
with ``torch.unique``, members in row order as in the CPU path).
"""

from __future__ import annotations

import numpy as np

# gsum rows + per-item global state of one score_candidates launch (larger batches are chunked)
_CHUNK_BYTES = 512 * 2**20


def _ext():
    from ... import _cuda

    return _cuda


def _device(torch):
    if not torch.cuda.is_available():
        raise RuntimeError("xmemory_gpu.ops.objective.cuda needs a CUDA device (torch sees none)")
    return torch.device("cuda", torch.cuda.current_device())


def _stream(torch, dev) -> int:
    return int(torch.cuda.current_stream(dev).cuda_stream) if dev.type == "cuda" else 0


def _pow2(n: np.ndarray) -> np.ndarray:
    """Next power of two >= max(n, 1), as the kernel computes it."""
    n = np.maximum(np.asarray(n, dtype=np.int64), 1)
    p = np.left_shift(np.int64(1), np.ceil(np.log2(n)).astype(np.int64))
    p = np.where(p < n, p * 2, p)
    return np.where(p // 2 >= n, p // 2, p)


def _state_bytes(slots: np.ndarray, ext) -> np.ndarray:
    """Global state bytes of each item (0 for items whose state fits in shared memory)."""
    p = _pow2(slots)
    nbytes = (p * int(ext.OBJECTIVE_SLOT_BYTES) + 7) // 8 * 8
    return np.where(p > int(ext.OBJECTIVE_SHARED_MAX_SLOTS), nbytes, 0).astype(np.int64)


def _score(torch, ext, dev, stream, slots: np.ndarray, launch) -> tuple[int, object, object]:
    """State for one objective_score launch: (max_slots, state scratch or None, state_offsets or None)."""
    max_slots = int(_pow2(slots).max()) if slots.size else 0
    state = soff = None
    if max_slots > int(ext.OBJECTIVE_SHARED_MAX_SLOTS):
        nbytes = _state_bytes(slots, ext)
        off = np.zeros(slots.size, dtype=np.int64)
        np.cumsum(nbytes[:-1], out=off[1:])
        state = torch.empty(int(nbytes.sum()), dtype=torch.uint8, device=dev)
        soff = torch.from_numpy(off).to(dev)
    launch(max_slots, 0 if state is None else state.data_ptr(), 0 if soff is None else soff.data_ptr())
    return max_slots, state, soff  # keep the scratch referenced until the caller syncs


def partition_objective(x: np.ndarray, labels: np.ndarray, offsets: np.ndarray, *, eps: float = 1e-8) -> np.ndarray:
    """f [B] float64 of each CSR segment; labels local to each segment (any non-negative ints)."""
    x = np.ascontiguousarray(np.asarray(x, dtype=np.float64))
    lab = np.ascontiguousarray(np.asarray(labels, dtype=np.int64)).reshape(-1)
    off = np.ascontiguousarray(np.asarray(offsets, dtype=np.int64)).reshape(-1)
    if x.ndim != 2 or lab.shape != (x.shape[0],):
        raise ValueError(f"cuda partition_objective: x [N, d] and labels [N] expected, got {x.shape} and {lab.shape}")
    n, d = x.shape
    if off.size < 1 or off[0] != 0 or off[-1] != n or np.any(np.diff(off) < 0):
        raise ValueError("cuda partition_objective: offsets must be non-decreasing from 0 to N")
    if lab.size and lab.min() < 0:
        raise ValueError("cuda partition_objective: labels must be non-negative")
    nseg = off.size - 1
    if nseg == 0 or n == 0:
        return np.zeros(nseg, dtype=np.float64)
    if nseg >= 2**31 or n >= 2**31:
        raise ValueError("cuda partition_objective: more than 2^31 - 1 segments or rows")

    import torch

    ext = _ext()
    dev = _device(torch)
    stream = _stream(torch, dev)
    x_t = torch.from_numpy(x if x.flags.writeable else x.copy()).to(dev)
    lab_t = torch.from_numpy(lab if lab.flags.writeable else lab.copy()).to(dev)
    off_t = torch.from_numpy(off if off.flags.writeable else off.copy()).to(dev)
    # dense theme ids, ordered by (segment, label) like the CPU path's sorted unique labels
    seg = torch.repeat_interleave(torch.arange(nseg, device=dev), off_t[1:] - off_t[:-1])
    uniq, linv = torch.unique(lab_t, return_inverse=True)
    nl = int(uniq.numel())
    tkey, tinv = torch.unique(seg * nl + linv, return_inverse=True)
    k = int(tkey.numel())
    theme_off = torch.searchsorted(tkey // nl, torch.arange(nseg + 1, device=dev))
    member_off = torch.zeros(k + 1, dtype=torch.int64, device=dev)
    member_off[1:] = torch.cumsum(torch.bincount(tinv, minlength=k), 0)
    members = torch.argsort(tinv, stable=True)  # each theme's rows in ascending order

    rn = torch.empty(n, dtype=torch.float64, device=dev)
    ext.objective_row_norms(x_t.data_ptr(), n, d, rn.data_ptr(), stream)
    gsum = torch.empty((k, d), dtype=torch.float64, device=dev)
    gnorm = torch.empty(k, dtype=torch.float64, device=dev)
    ext.objective_group_sums(x_t.data_ptr(), rn.data_ptr(), member_off.data_ptr(), members.data_ptr(), k, d,
                             gsum.data_ptr(), gnorm.data_ptr(), stream)
    out = torch.empty(nseg, dtype=torch.float64, device=dev)
    slots = np.diff(theme_off.cpu().numpy())

    def launch(max_slots: int, state: int, soff: int) -> None:
        ext.objective_score(0, off_t.data_ptr(), 0, 0, 0, 0, 0, 0, 0, 0, theme_off.data_ptr(), member_off.data_ptr(),
                            gsum.data_ptr(), gnorm.data_ptr(), nseg, d, float(eps), max_slots, state, soff,
                            out.data_ptr(), stream)

    keep = _score(torch, ext, dev, stream, slots, launch)
    res = out.cpu().numpy().astype(np.float64)
    del keep
    return res


def _up(torch, dev, a, dtype):
    a = np.ascontiguousarray(np.asarray(a, dtype=dtype))
    return torch.from_numpy(a if a.flags.writeable else a.copy()).to(dev)


def score_candidates(state, cands) -> np.ndarray:
    """f after each candidate edit [C] float64 (PartitionState / Candidates of objective/state.py)."""
    c_n = cands.n
    if c_n == 0:
        return np.zeros(0, dtype=np.float64)
    x = np.asarray(state.x, dtype=np.float64)
    d = x.shape[1]
    t_off = np.asarray(state.theme_offsets, dtype=np.int64)
    a_off = np.asarray(cands.add_offsets, dtype=np.int64)
    memory = np.asarray(cands.memory, dtype=np.int64)
    if c_n >= 2**31 or a_off[-1] >= 2**31:
        raise ValueError("cuda score_candidates: more than 2^31 - 1 candidates or groups")
    n_groups = np.diff(a_off)
    slots = np.diff(t_off)[memory] + n_groups

    import torch

    ext = _ext()
    dev = _device(torch)
    stream = _stream(torch, dev)
    k = int(state.theme_sum.shape[0])
    x_t = _up(torch, dev, x, np.float64)
    ts = _up(torch, dev, state.theme_sum, np.float64)
    tc = _up(torch, dev, state.theme_count, np.int64)
    to = _up(torch, dev, t_off, np.int64)
    no = _up(torch, dev, state.offsets, np.int64)
    ti = _up(torch, dev, state.top_idx, np.int64)
    tcos = _up(torch, dev, state.top_cos, np.float64)
    mem = _up(torch, dev, memory, np.int64)
    ro = _up(torch, dev, cands.rem_offsets, np.int64)
    rr = _up(torch, dev, cands.rem_rows, np.int64)
    ao = _up(torch, dev, a_off, np.int64)
    go = _up(torch, dev, cands.group_offsets, np.int64)
    mb = _up(torch, dev, cands.members, np.int64)
    tn = torch.empty(k, dtype=torch.float64, device=dev)
    ext.objective_row_norms(ts.data_ptr(), k, d, tn.data_ptr(), stream)
    out = torch.empty(c_n, dtype=torch.float64, device=dev)

    # chunk the candidates so gsum rows + global state stay under _CHUNK_BYTES per launch
    cost = np.cumsum(n_groups * d * 8 + _state_bytes(slots, ext))
    keep = []
    c0 = 0
    while c0 < c_n:
        before = int(cost[c0 - 1]) if c0 else 0
        c1 = max(c0 + 1, int(np.searchsorted(cost, before + _CHUNK_BYTES, side="right")))
        c1 = min(c1, c_n)
        a0, a1 = int(a_off[c0]), int(a_off[c1])
        ng = a1 - a0
        gsum = torch.empty((ng, d), dtype=torch.float64, device=dev)
        gnorm = torch.empty(ng, dtype=torch.float64, device=dev)
        go_ptr = go.data_ptr() + 8 * a0  # the chunk's groups, offsets still absolute into members
        ext.objective_group_sums(x_t.data_ptr(), 0, go_ptr, mb.data_ptr(), ng, d, gsum.data_ptr(), gnorm.data_ptr(),
                                 stream)
        ao_c = ao[c0 : c1 + 1] - a0

        def launch(max_slots: int, st: int, soff: int, c0=c0, c1=c1, ao_c=ao_c, gsum=gsum, gnorm=gnorm,
                   go_ptr=go_ptr) -> None:
            ext.objective_score(mem.data_ptr() + 8 * c0, no.data_ptr(), ts.data_ptr(), tn.data_ptr(), tc.data_ptr(),
                                to.data_ptr(), ti.data_ptr(), tcos.data_ptr(), ro.data_ptr() + 8 * c0, rr.data_ptr(),
                                ao_c.data_ptr(), go_ptr, gsum.data_ptr(), gnorm.data_ptr(), c1 - c0, d,
                                float(state.eps), max_slots, st, soff, out.data_ptr() + 8 * c0, stream)

        keep.append((gsum, gnorm, ao_c, _score(torch, ext, dev, stream, slots[c0:c1], launch)))
        c0 = c1
    res = out.cpu().numpy().astype(np.float64)
    del keep
    return res


__all__ = ["partition_objective", "score_candidates"]
