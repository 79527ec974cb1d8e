"""CUDA backend for the objective family: thin torch wrappers over ``xmemory_gpu._cuda``
(``objective_row_norms``, ``objective_group_sums``, ``objective_score_segments`` and
``objective_score_candidates``; csrc/cuda/objective.cu).

Same signatures as ``cpu.py``; inputs checked once by the dispatcher (``ops/objective/__init__.py``),
which hands ``partition_objective`` device tensors; host arrays (``score_candidates``' state) are
uploaded to the current CUDA device; runs on the current stream. The bindings take
the torch tensors themselves and check device, dtype, shape and contiguity in C++ before any launch
(csrc/cuda/objective_bind.cpp); ``objective_score_segments`` and ``objective_score_candidates`` are
the kernel's two modes. Both ops share one kernel (one thread block per item): a candidate is
"the memory's themes minus the removed rows plus new groups"; a segment of ``partition_objective``
is an item with no kept themes whose groups are all its themes (relabelled densely on the device
with ``torch.unique``, members in row order as in the CPU path).
"""

from __future__ import annotations

import numpy as np

from ..devices import is_torch

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
    """State for one objective_score_* launch: (max_slots, state scratch or None, state_offsets or None)."""
    max_slots = int(_pow2(slots).max()) if slots.size else 0
    state = soff = None
    if max_slots > int(ext.OBJECTIVE_SHARED_MAX_SLOTS):
        nbytes = _state_bytes(slots, ext)
        off = np.zeros(slots.size, dtype=np.int64)
        np.cumsum(nbytes[:-1], out=off[1:])
        state = torch.empty(int(nbytes.sum()), dtype=torch.uint8, device=dev)
        soff = torch.from_numpy(off).to(dev)
    launch(max_slots, state, soff)
    return max_slots, state, soff  # keep the scratch referenced until the caller syncs


def partition_objective(
    x: np.ndarray, labels: np.ndarray, offsets: np.ndarray, *, eps: float = 1e-8
) -> np.ndarray:
    """f [B] float64 of each CSR segment; labels local to each segment (any non-negative ints).

    x / labels: NumPy (uploaded; NumPy f returned) or torch tensors (CUDA tensors stay on their device,
    no host round trip; a torch f on that device is returned). offsets: host int64 [B+1].
    """
    # validated once by the dispatcher (ops/objective/__init__.py): shapes, finite x, labels, offsets
    as_torch = is_torch(x)
    off = np.ascontiguousarray(np.asarray(offsets, dtype=np.int64)).reshape(-1)
    n, d = (int(v) for v in x.shape)
    nseg = off.size - 1
    if nseg >= 2**31 or n >= 2**31:
        raise ValueError("cuda partition_objective: more than 2^31 - 1 segments or rows")

    import torch

    if nseg == 0 or n == 0:
        f = np.zeros(nseg, dtype=np.float64)
        return torch.from_numpy(f).to(x.device) if as_torch else f
    ext = _ext()
    dev = x.device if as_torch and x.is_cuda else _device(torch)
    stream = _stream(torch, dev)
    if as_torch:
        x_t = x.detach().to(device=dev, dtype=torch.float64).contiguous()
        lab_t = torch.as_tensor(labels).to(device=dev, dtype=torch.int64).reshape(-1).contiguous()
    else:
        x_t = _up(torch, dev, x, np.float64)
        lab_t = _up(torch, dev, labels, np.int64).reshape(-1)
    off_t = _up(torch, dev, off, np.int64)
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
    ext.objective_row_norms(x_t, rn, stream)
    gsum = torch.empty((k, d), dtype=torch.float64, device=dev)
    gnorm = torch.empty(k, dtype=torch.float64, device=dev)
    ext.objective_group_sums(x_t, rn, member_off, members, gsum, gnorm, stream)
    out = torch.empty(nseg, dtype=torch.float64, device=dev)
    slots = np.diff(theme_off.cpu().numpy())

    def launch(max_slots: int, state, soff) -> None:
        ext.objective_score_segments(
            off_t,
            theme_off.contiguous(),
            member_off,
            gsum,
            gnorm,
            float(eps),
            max_slots,
            state,
            soff,
            out,
            stream,
        )

    keep = _score(torch, ext, dev, stream, slots, launch)
    if as_torch:  # stays on the device; the scratch in `keep` is freed in stream order (torch's allocator)
        del keep
        return out
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
    x_t = state.device_x(dev)  # kept on the device across calls until the state's rows change
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
    ext.objective_row_norms(ts.reshape(k, d), tn, stream)
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
        go_c = go[a0 : a1 + 1]  # the chunk's groups, offsets still absolute into members
        ext.objective_group_sums(x_t, None, go_c, mb, gsum, gnorm, stream)
        ao_c = ao[c0 : c1 + 1] - a0

        def launch(
            max_slots: int, st, soff, c0=c0, c1=c1, ao_c=ao_c, gsum=gsum, gnorm=gnorm, go_c=go_c
        ) -> None:
            ext.objective_score_candidates(
                mem[c0:c1],
                no,
                ts.reshape(k, d),
                tn,
                tc,
                to,
                ti.reshape(k, 2),
                tcos.reshape(k, 2),
                ro[c0 : c1 + 1],
                rr,
                ao_c,
                go_c,
                gsum,
                gnorm,
                float(state.eps),
                max_slots,
                st,
                soff,
                out[c0:c1],
                stream,
            )

        keep.append((gsum, gnorm, ao_c, _score(torch, ext, dev, stream, slots[c0:c1], launch)))
        c0 = c1
    res = out.cpu().numpy().astype(np.float64)
    del keep
    return res


__all__ = ["partition_objective", "score_candidates"]
