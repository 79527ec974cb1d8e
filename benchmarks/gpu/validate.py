"""One-command GPU validation and benchmarks for every op's GPU paths (called by benchmarks/gpu/run.sh).

For each op (knn_graph, knn_search, partition_objective, score_candidates, coverage_select,
token_entropy_logprob) and each GPU backend it has (triton, cuda):

1. **check**: fresh random ragged inputs with the edge cases (empty segments, a single row or theme,
   duplicates / ties, zero candidates) against the float64 reference, outputs poisoned first;
2. **bench**: median time with CUDA events after warm-up, against a torch baseline (or the C++ CPU
   path where torch has none), with the roofline floor: the bytes the op must move (each input read
   once, each output written once) and the FLOPs it must do, over the measured peaks of this device
   (a device-to-device copy; a float32 and a float64 matmul), so ``floor / time`` is the fraction of
   the roofline achieved;
3. **validated**: the (op, backend) pairs whose check passed and whose family's pytest files passed
   (``--junit``), with device, date and commit: the entries ``python -m xmemory_gpu.ops.validated
   --merge results.json`` folds into ``xmemory_gpu/ops/validated.json``.

Writes ``results.json`` (machine-readable) and ``results.md`` (a block ready for RESULTS.md) to ``--out``.
``--dry-run`` runs the same code on the CPU (Triton under ``TRITON_INTERPRET=1``, no CUDA launches) at
tiny sizes, so CI keeps the script from rotting; a dry run validates nothing.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import platform
import statistics
import subprocess
import sys
import time
import traceback
import xml.etree.ElementTree as ET
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests"))

FAMILY_TESTS = {  # pytest files whose failures block validating a family's ops
    "knn": ("test_knn.py", "test_dispatch.py"),
    "objective": ("test_objective.py", "test_dispatch.py"),
    "coverage": ("test_coverage.py", "test_dispatch.py"),
    "entropy": ("test_entropy.py", "test_dispatch.py"),
}
FAMILY = {
    "knn_graph": "knn",
    "knn_search": "knn",
    "partition_objective": "objective",
    "score_candidates": "objective",
    "coverage_select": "coverage",
    "token_entropy_logprob": "entropy",
}


# ---- timing and peaks --------------------------------------------------------------------------


class Timer:
    """Median milliseconds of fn(): CUDA events on a GPU, perf_counter on the CPU (dry run)."""

    def __init__(self, torch: Any, cuda: bool, reps: int, warmup: int):
        self.torch, self.cuda, self.reps, self.warmup = torch, cuda, reps, warmup

    def sync(self) -> None:
        if self.cuda:
            self.torch.cuda.synchronize()

    def ms(self, fn: Callable[[], object]) -> float:
        for _ in range(self.warmup):
            fn()
        self.sync()
        times = []
        for _ in range(self.reps):
            if self.cuda:
                a, b = self.torch.cuda.Event(enable_timing=True), self.torch.cuda.Event(enable_timing=True)
                a.record()
                fn()
                b.record()
                self.torch.cuda.synchronize()
                times.append(a.elapsed_time(b))
            else:
                t0 = time.perf_counter()
                fn()
                times.append((time.perf_counter() - t0) * 1e3)
        return statistics.median(times)


def measure_peaks(torch: Any, dev: Any, timer: Timer, dry: bool) -> dict[str, float]:
    """Measured ceilings of this device: copy bandwidth (bytes read + written) and fp32 / fp64 matmul."""
    n_copy = (1 << 20) if dry else (1 << 28)  # 4 MiB or 1 GiB of float32
    src = torch.randn(n_copy, device=dev)
    dst = torch.empty_like(src)
    ms = timer.ms(lambda: dst.copy_(src))
    peaks = {"bandwidth_GBps": 2 * src.numel() * 4 / ms / 1e6}
    for name, dtype, n, tf32 in (
        ("fp32_TFLOPs", torch.float32, 256 if dry else 8192, False),
        ("tf32_TFLOPs", torch.float32, 256 if dry else 8192, True),
        ("fp64_TFLOPs", torch.float64, 128 if dry else 4096, False),
    ):
        x = torch.randn(n, n, device=dev, dtype=dtype)
        ms = timer.ms(lambda x=x, tf32=tf32: _tf32(torch, lambda: x @ x, tf32))
        peaks[name] = 2 * n**3 / ms / 1e9
    return peaks


# ---- inputs ------------------------------------------------------------------------------------


def ragged_sizes(rng: np.random.Generator, n_seg: int, lo: int, hi: int, edge: bool = True) -> list[int]:
    sizes = [int(s) for s in rng.integers(lo, hi + 1, size=n_seg)]
    if edge:
        sizes[:3] = [0, 1, 2][: len(sizes)]  # empty segment, a single row, a pair
    return sizes


def offsets(sizes: list[int]) -> np.ndarray:
    off = np.zeros(len(sizes) + 1, dtype=np.int64)
    np.cumsum(sizes, out=off[1:])
    return off


# ---- per-op check + bench ----------------------------------------------------------------------


class Runner:
    def __init__(self, args: argparse.Namespace):
        import torch

        self.torch = torch
        self.dry = args.dry_run
        self.cuda = torch.cuda.is_available() and not self.dry
        if not self.dry and not self.cuda:
            raise SystemExit("validate.py: no CUDA device (use --dry-run on a CPU)")
        self.dev = torch.device("cuda" if self.cuda else "cpu")
        self.timer = Timer(torch, self.cuda, reps=3 if self.dry else 20, warmup=1 if self.dry else 3)
        self.slow_timer = Timer(torch, self.cuda, reps=3, warmup=1)  # baselines of thousands of launches
        self.rng = np.random.default_rng(args.seed)
        from xmemory_gpu.ops import available_backends

        self.status = available_backends()
        self.checks: list[dict[str, Any]] = []
        self.bench: list[dict[str, Any]] = []
        self.peaks: dict[str, float] = {}

    # helpers
    def gpu_backends(self, implemented: tuple[str, ...]) -> list[str]:
        return [b for b in ("triton", "cuda") if b in implemented and self.status[b].available]

    def t(self, a: np.ndarray) -> Any:
        return self.torch.from_numpy(np.ascontiguousarray(a)).to(self.dev)

    def check(self, op: str, backend: str, fn: Callable[[], dict[str, Any]]) -> None:
        t0 = time.perf_counter()
        try:
            info = fn() or {}
            ok, err = True, ""
        except Exception as exc:  # a failed check is recorded, never fatal
            info, ok, err = {}, False, f"{type(exc).__name__}: {exc}"
            traceback.print_exc()
        self.checks.append(
            {
                "op": op,
                "backend": backend,
                "passed": ok,
                "error": err[:500],
                "seconds": round(time.perf_counter() - t0, 2),
                **info,
            }
        )
        print(f"check {op:22s} {backend:7s} {'ok' if ok else 'FAILED ' + err[:200]}", flush=True)

    def add_bench(
        self,
        op: str,
        case: str,
        impl: str,
        fn: Callable[[], object],
        *,
        nbytes: float,
        flops: float,
        peak_flops_key: str,
        slow: bool = False,
    ) -> None:
        try:
            ms = (self.slow_timer if slow else self.timer).ms(fn)
        except Exception as exc:
            print(f"bench {op} {impl}: FAILED {type(exc).__name__}: {exc}", flush=True)
            self.bench.append(
                {"op": op, "case": case, "impl": impl, "error": f"{type(exc).__name__}: {exc}"[:300]}
            )
            return
        bw = self.peaks["bandwidth_GBps"] * 1e6  # bytes per ms
        fl = self.peaks[peak_flops_key] * 1e9  # flops per ms
        floor = max(nbytes / bw, flops / fl if flops else 0.0)
        row = {
            "op": op,
            "case": case,
            "impl": impl,
            "median_ms": ms,
            "bytes": nbytes,
            "flops": flops,
            "GBps": nbytes / ms / 1e6,
            "TFLOPs": flops / ms / 1e9 if flops else None,
            "floor_ms": floor,
            "roofline_fraction": floor / ms if ms > 0 else None,
            "bound": "memory" if nbytes / bw >= (flops / fl if flops else 0.0) else "compute",
        }
        self.bench.append(row)
        print(f"bench {op:22s} {impl:28s} {ms:9.3f} ms  floor {floor:8.3f} ms", flush=True)

    # ---- knn ----
    def knn(self) -> None:
        from ops.knn_cases import check_knn

        from xmemory_gpu.ops import implemented_backends
        from xmemory_gpu.ops.knn import knn_graph, knn_search

        for b in self.gpu_backends(implemented_backends("knn_graph")):

            def graph_check(b=b) -> dict[str, Any]:
                for k, d in ((1, 24), (10, 37)):
                    sizes = ragged_sizes(self.rng, 8, 3, 40 if self.dry else 300)
                    off = offsets(sizes)
                    x = self.rng.standard_normal((int(off[-1]), d)).astype(np.float32)
                    x[5] = x[6]  # duplicates: ties go to the lower row id
                    idx, sim = knn_graph(self.t(x), off, k, backend=b)
                    check_knn(
                        x, off, x, off, k, idx.cpu().numpy(), sim.cpu().numpy(), self_excluded=True, tol=1e-4
                    )
                return {}

            def search_check(b=b) -> dict[str, Any]:
                sizes_q = ragged_sizes(self.rng, 6, 1, 20)
                sizes_x = ragged_sizes(self.rng, 6, 0, 30 if self.dry else 200, edge=False)
                sizes_x[0] = 0  # queries against an empty segment get padding only
                qo, xo = offsets(sizes_q), offsets(sizes_x)
                q = self.rng.standard_normal((int(qo[-1]), 19)).astype(np.float32)
                x = self.rng.standard_normal((int(xo[-1]), 19)).astype(np.float32)
                idx, sim = knn_search(self.t(q), qo, self.t(x), xo, 7, backend=b)
                check_knn(
                    q, qo, x, xo, 7, idx.cpu().numpy(), sim.cpu().numpy(), self_excluded=False, tol=1e-4
                )
                return {}

            self.check("knn_graph", b, graph_check)
            self.check("knn_search", b, search_check)

        # bench: many segments, padded bmm + topk as the torch baseline
        torch = self.torch
        n_seg, lo, hi, k = (6, 20, 40, 10) if self.dry else (10_000, 200, 400, 10)
        for d in (16,) if self.dry else (384, 1536):
            sizes = np.asarray(ragged_sizes(self.rng, n_seg, lo, hi, edge=False))
            off = offsets(sizes.tolist())
            x = torch.randn(int(off[-1]), d, device=self.dev)
            st = torch.from_numpy(sizes).to(self.dev)
            flops = float(2 * d * np.sum(sizes.astype(np.float64) ** 2))
            nbytes = float(x.numel() * 4 + int(off[-1]) * k * 8)
            case = f"{n_seg} segments of {lo}-{hi} rows, d={d}, k={k}"
            for b in self.gpu_backends(implemented_backends("knn_graph")):
                self.add_bench(
                    "knn_graph",
                    case,
                    f"{b} (ours)",
                    lambda b=b, x=x, off=off: knn_graph(x, off, k, backend=b),
                    nbytes=nbytes,
                    flops=flops,
                    peak_flops_key="fp32_TFLOPs",
                )
            if "triton" in self.gpu_backends(implemented_backends("knn_graph")):
                from xmemory_gpu.ops.knn import triton as knn_triton

                self.add_bench(
                    "knn_graph",
                    case,
                    "triton tf32 (ours, input_precision='tf32')",
                    lambda x=x, off=off: knn_triton.knn_graph(x, off, k, input_precision="tf32"),
                    nbytes=nbytes,
                    flops=flops,
                    peak_flops_key="tf32_TFLOPs",
                )
            self.add_bench(
                "knn_graph",
                case,
                "torch padded bmm + topk",
                lambda x=x, st=st: _padded_bmm_topk(torch, x, st, k),
                nbytes=nbytes,
                flops=flops,
                peak_flops_key="fp32_TFLOPs",
            )
            self.add_bench(
                "knn_graph",
                case,
                "torch padded bmm + topk, tf32",
                lambda x=x, st=st: _tf32(torch, lambda: _padded_bmm_topk(torch, x, st, k)),
                nbytes=nbytes,
                flops=flops,
                peak_flops_key="tf32_TFLOPs",
            )
            self.add_bench(
                "knn_graph",
                case,
                "torch per-conversation loop (mm + topk)",
                lambda x=x, off=off: _loop_topk(torch, x, off, k),
                nbytes=nbytes,
                flops=flops,
                peak_flops_key="fp32_TFLOPs",
                slow=True,
            )
            del x, st
            if self.cuda:
                torch.cuda.empty_cache()

    # ---- objective ----
    def objective(self) -> None:
        from ops.objective_cases import random_candidates, random_partition

        from xmemory_gpu.ops import implemented_backends
        from xmemory_gpu.ops.objective import (
            Candidates,
            PartitionState,
            partition_objective,
            score_candidates,
        )
        from xmemory_gpu.ops.objective import reference as ref

        for b in self.gpu_backends(implemented_backends("partition_objective")):

            def part_check(b=b) -> dict[str, Any]:
                sizes = [0, 1, 5, 40, 33, 12, 64] + ([] if self.dry else [300, 700])
                themes = [1, 1, 5, 1, 12, 12, 64] + ([] if self.dry else [60, 90])
                x, lab, off = random_partition(self.rng, sizes, themes, 19)
                s = int(off[6])
                x[s : s + 64] = x[s : s + 4][np.arange(64) % 4]  # ties in s_k; MAD = 0
                lab[s : s + 64] = np.arange(64) * 7 + 1
                want = ref.partition_objective(x, lab, off)
                got = partition_objective(self.t(x), self.t(lab), off, backend=b).cpu().numpy()
                np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-12)
                return {"max_abs_err": float(np.max(np.abs(got - want)))}

            self.check("partition_objective", b, part_check)
        for b in self.gpu_backends(implemented_backends("score_candidates")):

            def score_check(b=b) -> dict[str, Any]:
                x, lab, off = random_partition(self.rng, [30, 2, 60, 9, 1, 25], [6, 2, 10, 9, 1, 1], 11)
                state = PartitionState.from_labels(x, lab, off)
                cands = random_candidates(self.rng, state, 4 if self.dry else 15)
                want = ref.score_candidates(state, cands)
                got = score_candidates(state, cands, backend=b)
                np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-12)
                assert score_candidates(state, Candidates.from_lists(state, []), backend=b).shape == (0,)
                return {"max_abs_err": float(np.max(np.abs(got - want)))}

            self.check("score_candidates", b, score_check)

        # bench
        n_mem, nodes, themes, d, per = (3, 40, 6, 16, 4) if self.dry else (10_000, 100, 16, 384, 10)
        x, lab, off = random_partition(self.rng, [nodes] * n_mem, [themes] * n_mem, d)
        xt, lt = self.t(x), self.t(lab)
        n = x.shape[0]
        case = f"{n_mem} memories x {nodes} nodes x {themes} themes, d={d}"
        nbytes = float(n * d * 4 + n * 8 + n_mem * 8)
        flops = float(n * d + n_mem * themes * themes * 2 * d)
        for b in self.gpu_backends(implemented_backends("partition_objective")):
            self.add_bench(
                "partition_objective",
                case,
                f"{b} (ours)",
                lambda b=b: partition_objective(xt, lt, off, backend=b),
                nbytes=nbytes,
                flops=flops,
                peak_flops_key="fp64_TFLOPs",
            )
        self.add_bench(
            "partition_objective",
            case,
            "torch (segment sums + padded bmm)",
            lambda: _torch_objective(self.torch, xt, lt, off),
            nbytes=nbytes,
            flops=flops,
            peak_flops_key="fp64_TFLOPs",
        )
        state = PartitionState.from_labels(x, lab, off)
        cands = random_candidates(self.rng, state, per)
        n_grp = np.diff(cands.add_offsets)
        kb = np.diff(state.theme_offsets)[cands.memory]
        members = float(np.asarray(cands.members).size)
        c_bytes = float((members * d + np.sum(kb) * d + cands.n) * 8)
        c_flops = float(members * d + np.sum((kb + n_grp) * n_grp) * 2 * d)
        case = f"{cands.n} candidates over {case} (host to host)"
        for b in self.gpu_backends(implemented_backends("score_candidates")):
            self.add_bench(
                "score_candidates",
                case,
                f"{b} (ours)",
                lambda b=b: score_candidates(state, cands, backend=b),
                nbytes=c_bytes,
                flops=c_flops,
                peak_flops_key="fp64_TFLOPs",
            )
        if self.status["cpu"].available:
            self.add_bench(
                "score_candidates",
                case,
                "cpu C++ (baseline)",
                lambda: score_candidates(state, cands, backend="cpu"),
                nbytes=c_bytes,
                flops=c_flops,
                peak_flops_key="fp64_TFLOPs",
            )

    # ---- coverage ----
    def coverage(self) -> None:
        from ops.coverage_cases import random_problem

        from xmemory_gpu.ops import implemented_backends
        from xmemory_gpu.ops.coverage import coverage_select

        for b in self.gpu_backends(implemented_backends("coverage_select")):

            def cov_check(b=b) -> dict[str, Any]:
                sizes = ragged_sizes(self.rng, 10, 1, 60 if self.dry else 400)
                off, idx, w, rel = random_problem(self.rng, sizes, 8)
                budgets = self.rng.integers(0, 30, size=len(sizes)).astype(np.int64)
                budgets[-1] = 10**6  # larger than the candidate count
                want = coverage_select(off, idx, w, rel, budget=budgets, backend="reference")
                got = coverage_select(off, idx, w, rel, budget=budgets, backend=b)
                got = [g.cpu().numpy() if hasattr(g, "cpu") else np.asarray(g) for g in got]
                assert np.array_equal(got[0], want[0]) and np.array_equal(got[1], want[1]), "picks differ"
                np.testing.assert_allclose(got[2], want[2], rtol=1e-6)
                return {}

            self.check("coverage_select", b, cov_check)
        n_q, lo, hi, k = (8, 10, 40, 4) if self.dry else (10_000, 40, 500, 10)
        sizes = ragged_sizes(self.rng, n_q, lo, hi, edge=False)
        off, idx, w, rel = random_problem(self.rng, sizes, k)
        m = int(off[-1])
        nbytes = float(m * k * 8 + m * 4 + n_q * 8)
        case = f"{n_q} queries x {lo}-{hi} candidates, k={k}, budget 20 (host to host)"
        for b in self.gpu_backends(implemented_backends("coverage_select")):
            self.add_bench(
                "coverage_select",
                case,
                f"{b} (ours)",
                lambda b=b: coverage_select(off, idx, w, rel, budget=20, backend=b),
                nbytes=nbytes,
                flops=0.0,
                peak_flops_key="fp32_TFLOPs",
            )
        if self.status["cpu"].available:
            self.add_bench(
                "coverage_select",
                case,
                "cpu C++ (baseline)",
                lambda: coverage_select(off, idx, w, rel, budget=20, backend="cpu"),
                nbytes=nbytes,
                flops=0.0,
                peak_flops_key="fp32_TFLOPs",
            )

    # ---- entropy ----
    def entropy(self) -> None:
        from xmemory_gpu.ops.entropy import reference as eref
        from xmemory_gpu.ops.entropy import token_entropy_logprob

        torch = self.torch
        if self.status["triton"].available:

            def ent_check() -> dict[str, Any]:
                for t_, v in ((1, 50), (37, 4097), (5, 300)):
                    z = torch.randn(t_, v, device=self.dev) * 4
                    z[0, :3] = float("-inf")  # banned tokens
                    ids = torch.randint(3, v, (t_,), device=self.dev)
                    e, lp = token_entropy_logprob(z, ids, backend="triton")
                    zn = z.cpu().double().numpy()
                    zn[np.isneginf(zn)] = -1e30
                    np.testing.assert_allclose(e.cpu().numpy(), eref.token_entropy(zn), rtol=1e-5, atol=2e-5)
                    np.testing.assert_allclose(
                        lp.cpu().numpy(), eref.token_logprob(zn, ids.cpu().numpy()), rtol=1e-5, atol=2e-5
                    )
                return {}

            self.check("token_entropy_logprob", "triton", ent_check)
        t_, v = (8, 1000) if self.dry else (4096, 151_936)
        for dtype in (torch.float32,) if self.dry else (torch.bfloat16, torch.float32):
            z = torch.randn(t_, v, device=self.dev, dtype=dtype) * 4
            ids = torch.randint(0, v, (t_,), device=self.dev)
            nbytes = float(z.numel() * z.element_size() + t_ * 16)
            case = f"T={t_}, V={v}, {str(dtype).replace('torch.', '')}"
            if self.status["triton"].available:
                self.add_bench(
                    "token_entropy_logprob",
                    case,
                    "triton (ours)",
                    lambda z=z, ids=ids: token_entropy_logprob(z, ids, backend="triton"),
                    nbytes=nbytes,
                    flops=float(4 * z.numel()),
                    peak_flops_key="fp32_TFLOPs",
                )
            torch_path = "cuda" if self.cuda else "cpu"  # entropy's torch log_softmax, where the logits are
            self.add_bench(
                "token_entropy_logprob",
                case,
                "torch log_softmax + gather",
                lambda z=z, ids=ids, b=torch_path: token_entropy_logprob(z, ids, backend=b),
                nbytes=nbytes,
                flops=float(4 * z.numel()),
                peak_flops_key="fp32_TFLOPs",
            )


def _tf32(torch: Any, fn: Callable[[], object], on: bool = True) -> object:
    """fn() with torch's float32 matmuls on tensor cores (tf32) or not."""
    before = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = on
    try:
        return fn()
    finally:
        torch.backends.cuda.matmul.allow_tf32 = before


def _loop_topk(torch: Any, x: Any, off: np.ndarray, k: int) -> list:
    """The per-conversation baseline: one normalised mm + diagonal fill + topk per segment."""
    xn = torch.nn.functional.normalize(x, dim=1)
    out = []
    for s, e in zip(off[:-1].tolist(), off[1:].tolist()):
        if e - s < 2:
            continue
        seg = xn[s:e]
        sims = seg @ seg.T
        sims.fill_diagonal_(float("-inf"))
        out.append(torch.topk(sims, min(k, e - s - 1), dim=1))
    return out


def _padded_bmm_topk(torch: Any, x: Any, sizes: Any, k: int) -> Any:
    b, m = sizes.numel(), int(sizes.max())
    pad = x.new_zeros(b, m, x.shape[1])
    mask = torch.arange(m, device=x.device)[None, :] < sizes[:, None]
    pad[mask] = torch.nn.functional.normalize(x, dim=1)
    sims = torch.bmm(pad, pad.transpose(1, 2))
    sims.masked_fill_(~mask[:, None, :], float("-inf"))
    sims.diagonal(dim1=1, dim2=2).fill_(float("-inf"))
    return torch.topk(sims, min(k, m), dim=2)


def _torch_objective(torch: Any, x: Any, labels: Any, off: np.ndarray) -> Any:
    """f(P) per segment in plain torch: theme sums by index_add, padded [B, K, K] cosines by bmm,
    nanmedian for the median / MAD (a timing baseline: nanmedian takes the lower middle value)."""
    dev = x.device
    nseg = len(off) - 1
    off_t = torch.from_numpy(off).to(dev)
    seg = torch.repeat_interleave(torch.arange(nseg, device=dev), off_t[1:] - off_t[:-1])
    xu = torch.nn.functional.normalize(x.double(), dim=1)
    nl = int(labels.max()) + 1
    key, inv = torch.unique(seg * nl + labels, return_inverse=True)
    k_all = key.numel()
    sums = torch.zeros(k_all, x.shape[1], dtype=torch.float64, device=dev).index_add_(0, inv, xu)
    cnt = torch.bincount(inv, minlength=k_all).double()
    tseg = key // nl
    per = torch.bincount(tseg, minlength=nseg)
    kmax = int(per.max())
    first = torch.cumsum(per, 0) - per
    slot = torch.arange(k_all, device=dev) - first[tseg]
    pad = torch.zeros(nseg, kmax, x.shape[1], dtype=torch.float64, device=dev)
    pad[tseg, slot] = torch.nn.functional.normalize(sums, dim=1)
    cos = torch.bmm(pad, pad.transpose(1, 2))
    valid = torch.zeros(nseg, kmax, dtype=torch.bool, device=dev)
    valid[tseg, slot] = True
    cos = cos.masked_fill(~valid[:, None, :], float("-inf"))
    cos.diagonal(dim1=1, dim2=2).fill_(float("-inf"))
    s = cos.max(dim=2).values
    s = torch.where(torch.isinf(s), torch.zeros_like(s), s).masked_fill(~valid, float("nan"))
    m = torch.nanmedian(s, dim=1).values
    sigma = torch.nanmedian((s - m[:, None]).abs(), dim=1).values + 1e-8
    g = torch.exp(-((s - m[:, None]) ** 2) / (2 * sigma[:, None] ** 2))
    coh = torch.zeros(nseg, kmax, dtype=torch.float64, device=dev)
    coh[tseg, slot] = sums.norm(dim=1) / cnt
    kk = per.double()
    sq = torch.zeros(nseg, dtype=torch.float64, device=dev).index_add_(0, tseg, cnt * cnt)
    n = (off_t[1:] - off_t[:-1]).double()
    return n * n / (kk * sq) + torch.nansum(coh * g, dim=1) / kk


# ---- junit, git, report ------------------------------------------------------------------------


def junit_failures(path: str | None) -> dict[str, int] | None:
    """Failures + errors per test file name from a pytest junit XML; None when no file was given."""
    if not path or not Path(path).exists():
        return None
    out: dict[str, int] = {}
    for case in ET.parse(path).getroot().iter("testcase"):
        name = (case.get("file") or case.get("classname", "").replace(".", "/") + ".py").split("/")[-1]
        bad = sum(1 for c in case if c.tag in ("failure", "error"))
        out[name] = out.get(name, 0) + bad
    return out


def git_commit() -> str:
    """XMEM_COMMIT when set (the device tool's copy carries a .git of another commit), else git's HEAD."""
    if os.environ.get("XMEM_COMMIT"):
        return os.environ["XMEM_COMMIT"]
    try:
        c = subprocess.run(
            ["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10
        )
        dirty = subprocess.run(
            ["git", "-C", str(ROOT), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            timeout=10,
        )
        if c.returncode == 0:
            return c.stdout.strip() + ("-dirty" if dirty.stdout.strip() else "")
    except (OSError, subprocess.SubprocessError):
        pass
    return os.environ.get("XMEM_COMMIT", "unknown")


def markdown(res: dict[str, Any]) -> str:
    p = res["peaks"]
    lines = [
        f"### GPU validation: {res['device']} ({res['date']}, commit {res['commit'][:12]}){' — DRY RUN' if res['dry_run'] else ''}",
        "",
        f"Command: `bash benchmarks/gpu/run.sh{' --dry-run' if res['dry_run'] else ''}`. Measured peaks: copy "
        f"{p['bandwidth_GBps']:.0f} GB/s (read + write), fp32 matmul {p['fp32_TFLOPs']:.1f} TFLOP/s (tf32 {p.get('tf32_TFLOPs', float('nan')):.0f}), fp64 matmul "
        f"{p['fp64_TFLOPs']:.1f} TFLOP/s. Tests: {res['pytest_summary']}.",
        "",
        "| op | backend | check vs float64 reference | family tests | validated |",
        "|---|---|---|---|---|",
    ]
    for c in res["checks"]:
        v = next((e for e in res["validated"] if e["op"] == c["op"] and e["backend"] == c["backend"]), None)
        fam = res["family_tests"].get(FAMILY[c["op"]], "not run")
        lines.append(
            f"| `{c['op']}` | {c['backend']} | {'pass' if c['passed'] else 'FAIL: ' + c['error'][:80]} | "
            f"{fam} | {'yes' if v and v['tests_passed'] else 'no'} |"
        )
    lines += [
        "",
        "| op | case | impl | median ms | GB/s | TFLOP/s | floor ms | of roofline |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for b in res["benchmarks"]:
        if "error" in b:
            lines.append(f"| `{b['op']}` | {b['case']} | {b['impl']} | failed: {b['error'][:60]} | | | | |")
            continue
        tf = f"{b['TFLOPs']:.2f}" if b["TFLOPs"] is not None else "-"
        lines.append(
            f"| `{b['op']}` | {b['case']} | {b['impl']} | {b['median_ms']:.3f} | {b['GBps']:.1f} | {tf} | "
            f"{b['floor_ms']:.3f} ({b['bound']}) | {100 * (b['roofline_fraction'] or 0):.1f}% |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--dry-run", action="store_true", help="CPU + Triton interpreter, tiny sizes; validates nothing"
    )
    ap.add_argument("--out", default="benchmarks/gpu/out")
    ap.add_argument("--junit", help="pytest junit XML of the GPU test run (failures block validation)")
    ap.add_argument("--pytest-summary", default="not run")
    ap.add_argument("--ops", default="knn,objective,coverage,entropy")
    ap.add_argument("--seed", type=int, default=int(np.random.SeedSequence().entropy % 2**31))
    args = ap.parse_args(argv)
    if args.dry_run and os.environ.get("TRITON_INTERPRET", "0") in ("", "0"):
        raise SystemExit("validate.py --dry-run: set TRITON_INTERPRET=1 before starting Python")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    r = Runner(args)
    r.peaks = measure_peaks(r.torch, r.dev, r.timer, r.dry)
    print(f"device {r.dev}; peaks {r.peaks}; seed {args.seed}", flush=True)
    for fam in args.ops.split(","):
        t0 = time.perf_counter()
        try:
            getattr(r, fam)()
        except Exception:  # a broken family must not hide the others' results
            traceback.print_exc()
            r.checks.append({"op": f"{fam} (family)", "backend": "-", "passed": False, "error": "crashed"})
        print(f"-- {fam}: {time.perf_counter() - t0:.1f} s", flush=True)
    device = (
        r.torch.cuda.get_device_name()
        if r.cuda
        else f"CPU {platform.processor() or platform.machine()} (dry run)"
    )
    date = _dt.date.today().isoformat()
    commit = git_commit()
    junit = junit_failures(args.junit)
    fam_tests = {}
    for fam, files in FAMILY_TESTS.items():
        if junit is None:
            fam_tests[fam] = "not run"
        else:
            bad = sum(junit.get(f, 0) for f in files)
            fam_tests[fam] = "pass" if bad == 0 else f"{bad} failed"
    validated = []
    for c in r.checks:
        if c["op"] not in FAMILY:
            continue
        # the path ``auto`` runs (not a variant such as triton's tf32 row)
        ms = [
            b["median_ms"]
            for b in r.bench
            if b["op"] == c["op"] and b.get("impl") == f"{c['backend']} (ours)" and "median_ms" in b
        ]
        passed = bool(c["passed"] and fam_tests[FAMILY[c["op"]]] == "pass" and not r.dry)
        validated.append(
            {
                "op": c["op"],
                "backend": c["backend"],
                "device": device,
                "date": date,
                "commit": commit,
                "tests_passed": passed,
                "median_ms": min(ms) if ms else None,
                "note": "dry run: validates nothing" if r.dry else f"check seed {args.seed}",
            }
        )
    res = {
        "dry_run": r.dry,
        "device": device,
        "date": date,
        "commit": commit,
        "seed": args.seed,
        "python": platform.python_version(),
        "torch": r.torch.__version__,
        "peaks": r.peaks,
        "pytest_summary": args.pytest_summary,
        "family_tests": fam_tests,
        "checks": r.checks,
        "benchmarks": r.bench,
        "validated": [] if r.dry else validated,
        "would_validate": validated,
    }
    (out / "results.json").write_text(json.dumps(res, indent=2, default=float) + "\n")
    md = markdown(res)
    (out / "results.md").write_text(md)
    print("\n" + md)
    failed = [c for c in r.checks if not c["passed"]]
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
