"""Compile every Triton kernel of the ops for a GPU target offline (no GPU needed) and report ptxas's
registers and spills. Run in a process WITHOUT TRITON_INTERPRET (tests/ops/test_triton_compile.py
does): ``python tests/ops/triton_aot.py [ARCH]`` prints one JSON line per kernel variant.

This catches what the interpreter accepts and a GPU compile rejects (types that differ between the
branches of an ``if``, ``tl.dot`` blocks under 16, non-power-of-two ``tl.arange``), and puts the
register / spill report in CI. It does not run anything.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

if os.environ.get("TRITON_INTERPRET", "0") not in ("", "0"):
    raise SystemExit(
        "triton_aot.py: unset TRITON_INTERPRET (the interpreter's jit functions cannot be compiled)"
    )

import triton  # noqa: E402
from triton.backends.compiler import GPUTarget  # noqa: E402
from triton.compiler import ASTSource  # noqa: E402


def _ptxas_report(ptx: str, arch: int) -> dict[str, int]:
    from triton.backends.nvidia import compiler as nvc

    ptxas = nvc.get_ptxas(arch).path
    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / "k.ptx"
        p.write_text(ptx)
        r = subprocess.run(
            [
                ptxas,
                "-v",
                f"--gpu-name=sm_{arch}a" if arch >= 90 else f"--gpu-name=sm_{arch}",
                str(p),
                "-o",
                str(Path(d) / "k.o"),
            ],
            capture_output=True,
            text=True,
            check=True,
        )
    out = {"registers": -1, "spill_bytes": 0}
    for line in r.stderr.splitlines():
        if "Used" in line and "registers" in line:
            out["registers"] = int(line.split("Used")[1].split("registers")[0])
        if "spill stores" in line:
            out["spill_bytes"] = max(
                out["spill_bytes"], int(line.split("bytes spill stores")[0].split(",")[-1])
            )
    return out


def variants():
    """(name, jit fn, signature, constexprs, num_warps) of the configurations the host code launches
    (Python int arguments specialise as i32, as at a launch)."""
    from xmemory_gpu.ops.entropy import triton as et
    from xmemory_gpu.ops.knn import triton as kt
    from xmemory_gpu.ops.objective import triton as ot

    bt, bd, bm, w = 16, 16, 32, 8  # ot._config() on a GPU
    yield (
        "objective.group_sums",
        ot._group_sums_kernel,
        {
            "x_ptr": "*fp64",
            "go_ptr": "*i64",
            "mb_ptr": "*i64",
            "gs_ptr": "*fp64",
            "gn_ptr": "*fp64",
            "d": "i32",
        },
        {"BLOCK_M": bm, "BLOCK_D": bd},
        w,
    )
    names = [
        "tile_item_ptr",
        "tile_i0_ptr",
        "mem_ptr",
        "to_ptr",
        "ts_ptr",
        "tn_ptr",
        "tc_cnt_ptr",
        "ti_ptr",
        "tcos_ptr",
        "ao_ptr",
        "go_ptr",
        "gs_ptr",
        "gn_ptr",
        "slot_off_ptr",
        "removed_ptr",
        "s_ptr",
        "coh_ptr",
        "cnt_ptr",
        "d",
    ]
    types = [
        "*i64",
        "*i64",
        "*i64",
        "*i64",
        "*fp64",
        "*fp64",
        "*i64",
        "*i64",
        "*fp64",
        "*i64",
        "*i64",
        "*fp64",
        "*fp64",
        "*i64",
        "*i8",
        "*fp64",
        "*fp64",
        "*fp64",
        "i32",
    ]
    fin = {
        "mem_ptr": "*i64",
        "node_off_ptr": "*i64",
        "slot_off_ptr": "*i64",
        "s_ptr": "*fp64",
        "coh_ptr": "*fp64",
        "cnt_ptr": "*fp64",
        "eps_ptr": "*fp64",
        "out_ptr": "*fp64",
    }
    for cand in (True, False):
        yield (
            f"objective.slot_s[candidates={cand}]",
            ot._slot_s_kernel,
            dict(zip(names, types)),
            {"CANDIDATES": cand, "BLOCK_T": bt, "BLOCK_D": bd},
            w,
        )
        yield (
            f"objective.finish[candidates={cand}]",
            ot._finish_kernel,
            fin,
            {"CANDIDATES": cand, "BLOCK_T": bt},
            w,
        )
    knn = {
        "q_ptr": "*fp32",
        "x_ptr": "*fp32",
        "q_off_ptr": "*i64",
        "x_off_ptr": "*i64",
        "tile_seg_ptr": "*i32",
        "tile_q0_ptr": "*i64",
        "idx_ptr": "*i32",
        "sim_ptr": "*fp32",
        "d": "i32",
        "k": "i32",
    }
    for kp, excl in ((2, True), (16, False), (64, True)):
        block_m, block_n, block_d, warps = 64, 64, 32, 8  # kt._config on a GPU
        yield (
            f"knn.topk[KP={kp}]",
            kt._knn_topk_kernel,
            knn,
            {
                "EXCLUDE_SELF": excl,
                "DROP_NONPOS": False,
                "KP": kp,
                "BLOCK_M": block_m,
                "BLOCK_N": block_n,
                "BLOCK_D": block_d,
                "PRECISION": "ieee",
                "LOG_M": 6,
                "LOG_N": 6,
                "LOG_KP": kp.bit_length() - 1,
            },
            warps,
        )
    from xmemory_gpu.ops.coverage import triton as ct

    cov = {
        "prog_q_ptr": "*i32",
        "off_ptr": "*i64",
        "cap_ptr": "*i64",
        "idx_ptr": "*i32",
        "w_ptr": "*fp32",
        "rel_ptr": "*fp64",
        "idx2_ptr": "*i32",
        "w2_ptr": "*fp32",
        "selfl_ptr": "*i8",
        "reln_ptr": "*fp64",
        "cov_ptr": "*i8",
        "chosen_ptr": "*i8",
        "sel_ptr": "*i32",
        "val_ptr": "*fp64",
        "cnt_ptr": "*i32",
        "par_ptr": "*fp64",
    }
    for count_stop, k, block in ((True, 10, 16), (True, 10, 256), (False, 4, 64)):  # BLOCK_N in [16, 256]
        yield (
            f"coverage[count_stop={count_stop},K={k},BLOCK_N={block}]",
            ct._coverage_kernel,
            cov,
            {"COUNT_STOP": count_stop, "K": k, "BLOCK_N": block},
            4,
        )
    for dtype in ("fp32", "bf16"):
        block, warps = et._config(151_936, 4 if dtype == "fp32" else 2)
        yield (
            f"entropy[{dtype}]",
            et._entropy_logprob_kernel,
            {
                "z_ptr": f"*{dtype}",
                "ids_ptr": "*i64",
                "ent_ptr": "*fp32",
                "lp_ptr": "*fp32",
                "V": "i32",
                "stride_t": "i32",
                "stride_v": "i32",
            },
            {"BLOCK_V": block},
            warps,
        )


def main() -> int:
    arch = int(sys.argv[1]) if len(sys.argv) > 1 else 90
    target = GPUTarget("cuda", arch, 32)
    failed = 0
    for name, fn, sig, consts, warps in variants():
        sig = {**sig, **{k: "constexpr" for k in consts}}
        try:
            k = triton.compile(
                ASTSource(fn=fn, signature=sig, constexprs=consts),
                target=target,
                options={"num_warps": warps},
            )
            rep = {
                "kernel": name,
                "ok": True,
                "num_warps": warps,
                "shared": k.metadata.shared,
                **_ptxas_report(k.asm["ptx"], arch),
            }
        except Exception as exc:  # report every kernel, then fail
            failed += 1
            rep = {"kernel": name, "ok": False, "error": f"{type(exc).__name__}: {str(exc)[:400]}"}
        print(json.dumps(rep), flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
